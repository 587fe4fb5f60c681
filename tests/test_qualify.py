"""The pure and local parts of `akk qualify`: probe, nearest profile, plan digest, verdict, CLI,
and when a capture's shot takes the pane.

The real pipeline runs against the real clients in tests/lab/test_qualify.py;
here a stand-in binary (a shell script that prints a version), the committed
evidence files and a scripted pane on Trio's autojump clock stand in for a client.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from akk import cli
from akk.discovery.process import sha256_file
from akk.evidence.files import identify, read_lines, records
from akk.profiles.registry import PINNED, PROFILES
from akk.qualify import capture, command, compare, evidence, qualification, trial
from akk.qualify.capture import Look, Unsettled
from akk.qualify.client import Binary
from akk.qualify.launcher import ScreenTimeout
from akk.qualify.plans.plan import Job, Plan, Shot
from akk.qualify.qualification import Judgement, Probe, QualifyError
from akk.qualify.scenarios import ECHO_TASK
from akk.store.location import StateDir
from tests import corpus

EVIDENCE = corpus.ROOT / "evidence"


def stand_in(tmp_path: Path, line: str, name: str = "claude") -> Path:
    """An executable that prints `line` for --version (and exits 1 for anything else)."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo "{line}" && exit 0\nexit 1\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


async def test_the_probe_reads_the_version_and_the_sha256_of_the_file(tmp_path: Path) -> None:
    path = stand_in(tmp_path, "2.1.999 (Claude Code)")
    async with qualification.pinned("claude", path) as found:
        assert (found.version, found.path) == ("2.1.999", path.resolve())
        assert found.sha256 == sha256_file(path) and len(found.sha256) == 64
    path.write_text(path.read_text() + "# another build\n")
    async with qualification.pinned("claude", path) as again:
        assert again.sha256 != found.sha256


@pytest.mark.parametrize(
    ("line", "why"),
    [("codex-cli 0.172.0", "printed no claude version"), ("2.1 (Claude Code)", "printed no")],
)
async def test_a_binary_without_its_agents_version_is_not_probed(
    tmp_path: Path, line: str, why: str
) -> None:
    with pytest.raises(QualifyError, match=why):
        async with qualification.pinned("claude", stand_in(tmp_path, line)):
            pass
    with pytest.raises(QualifyError, match="no file at"):
        async with qualification.pinned("claude", tmp_path / "missing"):
            pass


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


class ScriptedPane:
    """A pane that shows each look from its time on (seconds after the first read)."""

    def __init__(self, timeline: Sequence[tuple[float, Look]]) -> None:
        self.timeline = timeline
        self.start: float | None = None
        self.reads: list[tuple[float, Look]] = []

    async def read(self) -> Look:
        now = trio.current_time()
        if self.start is None:
            self.start = now
        at = now - self.start
        shown = [look for since, look in self.timeline if since <= at][-1]
        self.reads.append((at, shown))
        return shown


def _finished_echo() -> tuple[str, str, dict[str, object]]:
    """0.169.0's finished echo screen, the same screen before its ``Worked for`` row, the label."""
    stem = corpus.ROOT / "codex" / "0.169.0" / "echo-finished"
    finished = stem.with_suffix(".ansi").read_text()
    half = "\n".join("\x1b[2m" if "Worked for" in row else row for row in finished.split("\n"))
    expected = corpus.label(stem.with_suffix(".json"))["expected"]
    return finished, half, expected


async def test_a_shot_waits_for_the_turns_end_behind_a_finished_looking_screen(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Codex draws the reply and clears its status row, then works on with only the
    # title's spinner moving; on a loaded machine ``Worked for`` came 0.33 s later (and
    # 1.7 s under strace). The screen between reads `working`, not the label's `idle`.
    finished, half, expected = _finished_echo()
    profile = PROFILES[("codex", "0.169.0")]
    assert compare.outcome(profile, half, 120, 40, expected).state == "working"
    spinner = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    working = [(0.12 * i, Look(f"{spinner[i % 10]} Lab session | work", half)) for i in range(10)]
    pane = ScriptedPane(
        [
            *working,
            (1.2, Look("Lab session | work", half)),
            (1.21, Look("Lab session | work", finished)),
        ]
    )

    with trio.fail_after(30):
        shot = await capture.settled(pane.read)

    assert shot == finished
    assert compare.outcome(profile, shot, 120, 40, expected).problems == ()
    # The cells alone held still past the quiet time: they did not prove the shot.
    cells_still = max(at for at, look in pane.reads if look.screen == half)
    assert cells_still > capture.SHOT_QUIET_SECONDS


async def test_a_busy_title_holds_the_shot_however_long_the_pane_stays_still(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A starved client's spinner may stand on one glyph past the quiet time.
    finished, half, _ = _finished_echo()
    pane = ScriptedPane(
        [(0.0, Look("⠏ Lab session | work", half)), (2.0, Look("Lab session | work", finished))]
    )
    with trio.fail_after(30):
        assert await capture.settled(pane.read) == finished


async def test_a_title_change_alone_starts_the_quiet_time_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    finished, half, _ = _finished_echo()
    pane = ScriptedPane(
        [
            (0.0, Look("[ ! ] Action Required | work", half)),
            (0.3, Look("[ . ] Action Required | work", half)),
            (0.6, Look("[ ! ] Action Required | work", half)),
            (0.65, Look("[ ! ] Action Required | work", finished)),
        ]
    )
    with trio.fail_after(30):
        assert await capture.settled(pane.read) == finished
    (taken_at, _), *_ = [read for read in pane.reads if read[1].screen == finished]
    assert pane.reads[-1][0] - taken_at >= capture.SHOT_QUIET_SECONDS


async def test_a_settled_screen_is_taken_as_it_is_even_when_it_misreads(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Settling never looks at the label: a version that really stops there is refused.
    _, half, expected = _finished_echo()
    pane = ScriptedPane([(0.0, Look("Lab session | work", half))])
    with trio.fail_after(30):
        shot = await capture.settled(pane.read)
    assert shot == half
    compared = compare.compare(
        compare.Point("echo", "finished", 120, 40),
        expected,
        None,
        shot,
        PROFILES[("codex", "0.169.0")],
        PROFILES[("codex", "0.169.0")],
    )
    assert compared.status == "differs"


@pytest.mark.parametrize(
    ("title", "every", "why"),
    [
        ("⠏ Lab session | work", None, "its title says the client still works"),
        ("Lab session | work", 0.2, "it kept changing"),
    ],
)
async def test_a_pane_that_never_settles_fails_the_shot_and_says_why(
    autojump_clock: trio.testing.MockClock, title: str, every: float | None, why: str
) -> None:
    finished, half, _ = _finished_echo()
    timeline = [(0.0, Look(title, half))]
    if every is not None:
        timeline += [(every * i, Look(title, (half, finished)[i % 2])) for i in range(1, 100)]
    pane = ScriptedPane(timeline)
    with trio.fail_after(30), pytest.raises(Unsettled, match=why) as raised:
        await capture.settled(pane.read, timeout=5.0)
    assert "not producible" in str(raised.value) and raised.value.look.title == title


async def test_a_still_pane_whose_client_never_rests_fails_the_shot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, half, _ = _finished_echo()
    pane = ScriptedPane([(0.0, Look("Lab session | work", half))])
    with trio.fail_after(30), pytest.raises(Unsettled, match="never came to rest"):
        await capture.settled(pane.read, resting=lambda: False, timeout=5.0)


async def test_a_plan_run_failed_as_on_a_busy_machine_runs_once_more_alone(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run takes a second. The first pass: `settles` fails unsettled and then runs,
    `never` fails unsettled twice, `out_of_time` runs out of its time, `differs` never
    shows an expected screen (not a busy machine's failure: never run again)."""
    client = Binary("claude", "2.1.999", tmp_path / "claude")
    jobs = trial.jobs_for(client, "2.1.332")[:5]
    settles, never, out_of_time, differs, _ = jobs
    unsettled = Unsettled("the pane did not settle within 10 s", Look("", ""))
    first: dict[Job, BaseException] = {
        settles: unsettled, never: unsettled, out_of_time: trio.TooSlowError(),
        differs: ScreenTimeout("no composer", ""),
    }  # fmt: skip
    runs: list[tuple[Job, int]] = []
    running: set[Job] = set()

    async def run_plan(
        plan: object, client: object, *, cols: int, rows: int, **_: object
    ) -> list[Path]:
        (job,) = [job for job in jobs if (job.plan, job.cols, job.rows) == (plan, cols, rows)]
        runs.append((job, len(running)))
        running.add(job)
        try:
            await trio.sleep(1)
            failure = first.pop(job, unsettled if job is never else None)
            if failure is not None:
                raise failure
            return [tmp_path / job.name]
        finally:
            running.discard(job)

    monkeypatch.setattr(capture, "run_plan", run_plan)
    done = await trial.capture_jobs(jobs, tmp_path, parallel=3)
    assert {job for job, _ in runs[5:]} == {settles, never, out_of_time} and len(runs) == 8
    assert all(others == 0 for _, others in runs[5:])  # each alone
    assert set(done.failures) == {never, differs}
    assert done.failures[never].startswith("Unsettled: the pane did not settle")
    assert done.describe() == "5 plan runs, 3 at a time, 3 run again alone, 2 failed"


async def test_an_animated_screen_is_taken_as_it_is_unless_its_title_says_busy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Codex 0.155.1 turns a logo above its trust question for as long as it shows.
    finished, half, _ = _finished_echo()
    frames = [(0.08 * i, Look("work", (half, finished)[i % 2])) for i in range(100)]
    with trio.fail_after(30):
        shot = await capture.settled(ScriptedPane(frames).read, timeout=3.0, animated=True)
    assert shot in (half, finished)
    busy = [(at, Look("⠏ work", frame.screen)) for at, frame in frames]
    with trio.fail_after(30), pytest.raises(Unsettled, match="still works"):
        await capture.settled(ScriptedPane(busy).read, timeout=3.0, animated=True)


async def test_a_client_that_is_not_at_rest_holds_the_shot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Between Codex's title reset and its ``Worked for`` row a starved client shows
    # neither spinner nor the last row; only its runnable threads say it is not done.
    finished, half, _ = _finished_echo()
    pane = ScriptedPane(
        [(0.0, Look("Lab session | work", half)), (1.5, Look("Lab session | work", finished))]
    )
    with trio.fail_after(30):
        shot = await capture.settled(pane.read, resting=lambda: trio.current_time() >= 1.5)
    assert shot == finished


@pytest.mark.parametrize("settled_retaken", [True, False], ids=["few_differ", "many_differ"])
async def test_a_screen_that_reads_differently_is_taken_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled_retaken: bool
) -> None:
    """The mention popup while a Turn works is taken as it moves (no settling). Its first
    take reads working (a frame before the popup covered the status line); its retake, run
    alone, reads as labelled, and is the one judged. The settled idle screen of another job
    reads working on every take: retaken too while few jobs differ, it still differs.
    With more differing jobs than `RETAKE_SETTLED` (here none allowed) the settled one is
    not taken again: so many differences are a changed client."""
    if not settled_retaken:
        monkeypatch.setattr(trial, "RETAKE_SETTLED", 0)
    client = Binary("codex", "0.999.0", tmp_path / "codex")
    moving, settled = [
        job
        for name in ("codex_mention_covering", "codex_model_unknown")
        for job in trial.jobs_for(client, "0.171.0", [name])
        if (job.cols, job.rows) == (80, 24)
    ]
    fixtures = corpus.ROOT / "codex" / "0.171.0" / "80x24"
    working = (fixtures / "codex_model_unknown-working.ansi").read_text()
    runs: list[Job] = []
    lines: list[str] = []

    async def run_plan(plan: Plan, client: Binary, *, cols: int, rows: int, out: Path,
                       **_: object) -> list[Path]:  # fmt: skip
        (job,) = [job for job in (moving, settled) if (job.plan, job.cols) == (plan, cols)]
        runs.append(job)
        written = []
        for shot in [action for action in plan.actions if isinstance(action, Shot)]:
            stem = capture.fixture_stem(out, client, plan.name, shot.step, cols, rows)
            stem.parent.mkdir(parents=True, exist_ok=True)
            own = (fixtures / f"{stem.name}.ansi").read_text()
            screen = working if runs.count(job) == 1 or job is settled else own
            written.append(stem.with_name(f"{stem.name}.ansi"))
            written[-1].write_text(screen)
        return written

    monkeypatch.setattr(capture, "run_plan", run_plan)
    base = PROFILES[("codex", "0.171.0")]
    ran = await trial.run(
        [moving, settled], tmp_path, base, fixtures=corpus.ROOT, progress=lines.append
    )
    assert runs.count(moving) == 2 and runs.count(settled) == (2 if settled_retaken else 1)
    statuses = {c.point.plan: c.status for c in ran.comparisons if c.point.step == "mention"}
    assert statuses == {"codex_mention_covering": "same"}
    assert {c.status for c in ran.comparisons if c.point.plan == "codex_model_unknown"} == {
        "same",
        "differs",
    }
    again = 2 if settled_retaken else 1
    assert ran.captured.describe() == (
        f"2 plan runs, 2 at a time, {again} retaken alone for a screen read differently, 0 failed"
    )
    assert f"{moving.name} read differently (mention): it runs again, alone" in lines, lines
