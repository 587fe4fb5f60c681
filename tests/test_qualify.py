"""The pure and local parts of `akk qualify`: probe, nearest profile, plan digest, verdict, CLI.

The real pipeline runs against the real clients in tests/lab/test_qualify.py;
here a stand-in binary (a shell script that prints a version) and the committed
evidence files stand in for a client.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import attrs
import pytest

from akk import cli
from akk.discovery.process import sha256_file
from akk.evidence.files import identify, read_lines, records
from akk.profiles.registry import PINNED, PROFILES
from akk.qualify import command, compare, evidence, qualification
from akk.qualify.client import Binary
from akk.qualify.qualification import Judgement, Probe, QualifyError
from akk.qualify.scenarios import ECHO_TASK
from akk.store.location import StateDir

EVIDENCE = Path(__file__).resolve().parents[1] / "fixtures" / "evidence"


def stand_in(tmp_path: Path, line: str, name: str = "claude") -> Path:
    """An executable that prints `line` for --version (and exits 1 for anything else)."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo "{line}" && exit 0\nexit 1\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


async def test_the_probe_reads_the_version_and_the_sha256_of_the_file(tmp_path: Path) -> None:
    path = stand_in(tmp_path, "2.1.999 (Claude Code)")
    found = await qualification.probe("claude", path)
    assert (found.version, found.path) == ("2.1.999", path.resolve())
    assert found.sha256 == sha256_file(path) and len(found.sha256) == 64
    path.write_text(path.read_text() + "# another build\n")
    assert (await qualification.probe("claude", path)).sha256 != found.sha256


@pytest.mark.parametrize(
    ("line", "why"),
    [("codex-cli 0.172.0", "printed no claude version"), ("2.1 (Claude Code)", "printed no")],
)
async def test_a_binary_without_its_agents_version_is_not_probed(
    tmp_path: Path, line: str, why: str
) -> None:
    with pytest.raises(QualifyError, match=why):
        await qualification.probe("claude", stand_in(tmp_path, line))
    with pytest.raises(QualifyError, match="no file at"):
        await qualification.probe("claude", tmp_path / "missing")


@pytest.mark.parametrize(
    ("agent", "version", "base"),
    [
        ("claude", "2.1.333", "claude-code@2.1.332"),
        ("claude", "2.1.300", "claude-code@2.1.267"),
        ("claude", "2.0.1", "claude-code@2.1.263"),
        ("codex", "0.160.0", "codex@0.155.1"),
    ],
)
def test_the_nearest_pinned_profile_reads_a_new_version(
    agent: str, version: str, base: str
) -> None:
    assert qualification.nearest_profile(agent, version, PROFILES).id == base


def test_a_pinned_version_has_nothing_to_qualify() -> None:
    with pytest.raises(QualifyError, match="is pinned"):
        qualification.nearest_profile("codex", "0.171.0", PROFILES)
    without = PINNED.without("codex", "0.171.0").pinned
    assert qualification.nearest_profile("codex", "0.171.0", without).id == "codex@0.169.0"


def test_the_plan_is_the_nearest_corpus_at_the_qualify_sizes_and_its_digest_is_stable() -> None:
    new = Binary("codex", "0.172.0", Path("/nonexistent/codex"))
    jobs = qualification.plan(new, "0.171.0")
    assert {(job.cols, job.rows) for job in jobs} == set(qualification.QUALIFY_SIZES)
    assert {job.client for job in jobs} == {new}
    digest = qualification.plan_digest(jobs)
    assert digest == qualification.plan_digest(list(reversed(jobs)))  # order-free
    assert len(digest) == 64 and int(digest, 16) >= 0
    changed = [attrs.evolve(jobs[0], rows=jobs[0].rows + 1), *jobs[1:]]
    assert qualification.plan_digest(changed) != digest
    # 0.155.1 asks async questions with a picker, 0.171.0 as text: other plans.
    assert qualification.plan_digest(qualification.plan(new, "0.155.1")) != digest


@pytest.mark.parametrize(("agent", "version"), [("claude", "2.1.332"), ("codex", "0.171.0")])
def test_the_evidence_of_a_committed_echo_turn_holds(agent: str, version: str) -> None:
    path = EVIDENCE / agent / version / "echo.jsonl"
    identified = identify(str(path))
    assert identified is not None
    progress = evidence.parse(agent, records(read_lines(identified[0], 0)), ECHO_TASK)
    checked = evidence.judge(str(path), progress)
    assert checked.problems == () and checked.outcome == "done", checked
    assert checked.usage is not None and checked.usage["output"] == 10


def test_evidence_that_does_not_hold_names_each_failing_check() -> None:
    path = EVIDENCE / "claude" / "2.1.332" / "api_error.jsonl"
    identified = identify(str(path))
    assert identified is not None
    found = records(read_lines(identified[0], 0))
    assert evidence.judge(str(path), evidence.parse("claude", found, "never asked")).problems == (
        "the task was never accepted",
    )
    request = json.loads(path.with_suffix(".json").read_text())["turns"][0]["request_text"]
    failed = evidence.judge(str(path), evidence.parse("claude", found, request))
    assert failed.outcome == "failed" and failed.problems[0].startswith("outcome failed, not done")


def _judgement(statuses: list[str], *, partial: tuple[str, ...] = ()) -> Judgement:
    base = PROFILES[("codex", "0.169.0")]
    point = compare.Point("echo", "idle", 120, 40)
    new = compare.Outcome("idle")
    comparisons = tuple(
        compare.Comparison(point, status, {}, None, None if status == "not_producible" else new)  # type: ignore[arg-type]
        for status in statuses
    )
    held = evidence.EvidenceCheck("f", True, "done", "Hello", {"input": 1}, "complete", ())
    found = Probe("codex", "0.171.0", Path("/bin/codex"), "a" * 64)
    return Judgement(
        found, base, "b" * 64, comparisons, held, None, None, True, (), partial=partial
    )


def test_qualified_only_when_every_screen_is_the_same_and_the_whole_plan_ran() -> None:
    assert _judgement(["same", "same"]).qualified
    refused = _judgement(["same", "differs", "not_producible"])
    assert not refused.qualified
    assert refused.problems == [
        "1 screens read differently from their labels",
        "1 screens could not be produced",
    ]
    assert not _judgement([]).qualified
    partial = _judgement(["same"], partial=("echo",))
    assert not partial.qualified and "a partial check qualifies nothing" in partial.problems[0]
    with pytest.raises(ValueError, match="only a qualified binary"):
        command.row(refused, 0.0)
    row = command.row(_judgement(["same"]), 12.5)
    assert (row.agent, row.version, row.base_profile, row.qualified_at) == (
        "codex",
        "0.171.0",
        "codex@0.169.0",
        12.5,
    )
    assert row.report["qualified"] is True and row.report["screens"]["same"] == 1


def test_without_a_server_the_candidate_is_the_agents_command_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = stand_in(tmp_path, "2.1.999 (Claude Code)")
    state = StateDir(tmp_path / "state")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin:/bin")
    assert command.candidates("claude", state) == [binary.resolve()]
    monkeypatch.setenv("PATH", "/nonexistent")
    assert command.candidates("claude", state) == []


def test_the_cli_says_a_pinned_binary_needs_nothing_and_a_missing_one_cannot_be_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    pinned = stand_in(tmp_path, "2.1.332 (Claude Code)")
    assert cli.main(["qualify", "claude", "--binary", str(pinned), *state]) == 0
    assert "is pinned: AKK supports it as it is" in capsys.readouterr().out
    assert (
        cli.main(["qualify", "claude", "--binary", str(tmp_path / "nope"), *state, "--json"]) == 2
    )
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["state"] == "error" and "no file at" in result["error"]
