"""Which Claude the headless backend runs: pinned, or qualified with the headless proof.

The rule (`setup.refusal`) on its own, `find_claude` and `rehashed` on real
executables, and the whole path through a real `akk serve` (store, WebSocket,
the send method) with a stand-in Claude whose qualification rows are written to
the store as `akk qualify` writes them: no row, a row without the headless
proof, a row for another binary, a good row (the send is taken), a binary
swapped under the server, and a revoked row.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.backends.claude_headless import setup
from akk.backends.claude_headless.setup import HEADLESS_CHECKS, ClaudeSetup, refusal
from akk.backends.names import CLAUDE_HEADLESS
from akk.client import AkkError, Controller, connect
from akk.config import ServiceConfig
from akk.discovery.process import VersionCache, sha256_file
from akk.profiles.registry import PINNED, PROFILES
from akk.qualify import compare, evidence
from akk.qualify.headless import HeadlessProof
from akk.qualify.qualification import Judgement, Probe
from akk.service import run_service
from akk.store import qualifications
from akk.store.database import open_store
from akk.store.location import StateDir
from akk.store.qualifications import Malformed, Qualification
from tools.lab.akk_runner import mint_offline

SHA = "ab" * 32
OTHER_SHA = "cd" * 32
PROVEN = {"proven": True, "checks": list(HEADLESS_CHECKS), "problem": None}


def unpinned(sha: str | None = SHA) -> ClaudeSetup:
    return ClaudeSetup(
        binary="/opt/claude", config_dir="/c", version="2.1.999", pinned=False, binary_sha256=sha
    )


def row(sha: str = SHA, headless: Any = PROVEN, version: str = "2.1.999") -> Qualification:
    report: dict[str, Any] = {"qualified": True}
    if headless is not None:
        report["headless"] = headless
    return Qualification(
        agent="claude",
        version=version,
        binary_sha256=sha,
        base_profile="claude-code@2.1.332",
        plan_digest="ef" * 32,
        qualified_at=1_700_000_000.0,
        report=report,
    )


def stand_in(path: Path, version: str, build: str = "") -> Path:
    """An executable that prints `version` (Claude's --version line) and fails otherwise."""
    path.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && echo "{version} (Claude Code)" && exit 0\n'
        f"exit 1\n# {build}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# ---------------------------------------------------------------- the rule


def test_a_pinned_claude_runs_whatever_the_store_holds() -> None:
    pinned = ClaudeSetup(binary="/opt/claude", config_dir="/c", version="2.1.332")
    assert refusal(pinned, None) is None
    assert refusal(pinned, row(OTHER_SHA, headless=None)) is None


def test_a_qualified_binary_with_the_headless_proof_runs() -> None:
    assert refusal(unpinned(), row()) is None


def test_no_row_names_the_binary_and_the_command_that_qualifies_it() -> None:
    why = refusal(unpinned(), None)
    assert why is not None and why.startswith(
        "unpinned_version: Claude Code 2.1.999 at /opt/claude"
    )
    assert "`akk qualify claude --binary /opt/claude`" in why
    assert "2.1.332" in why  # the pinned versions are named


@pytest.mark.parametrize(
    ("headless", "said"),
    [
        (None, "qualified for panes only"),
        ({"proven": False, "checks": ["init_session"], "problem": "bash_allow: ran 0 times"},
         "not proven: bash_allow: ran 0 times"),
        ({"proven": True, "checks": list(HEADLESS_CHECKS[:-1])}, "unchecked: exits"),
        ("yes", "qualified for panes only"),
    ],
)  # fmt: skip
def test_a_row_without_the_whole_headless_proof_is_refused(headless: Any, said: str) -> None:
    why = refusal(unpinned(), row(headless=headless))
    assert why is not None and why.startswith("headless_unproven: "), why
    assert said in why and "qualify it again with `akk qualify claude --binary" in why


def test_a_row_for_another_binary_is_refused() -> None:
    why = refusal(unpinned(), row(OTHER_SHA))
    assert why is not None and why.startswith("qualified_binary_differs: "), why
    assert OTHER_SHA[:16] in why and SHA[:16] in why
    unread = refusal(unpinned(sha=None), row())
    assert unread is not None and "cannot be read" in unread


def test_a_malformed_row_says_how_to_revoke_it() -> None:
    entry = Malformed("claude", "2.1.999", "qualification_malformed: report is not a JSON object")
    why = refusal(unpinned(), entry)
    assert why is not None and why.startswith("qualification_malformed: ")
    assert "akk qualify --revoke claude 2.1.999" in why


# ---------------------------------------------------------------- finding and hashing


async def test_find_claude_hashes_only_a_version_its_registry_lacks(tmp_path: Path) -> None:
    binary = stand_in(tmp_path / "claude", "2.1.332")
    found = await setup.find_claude(str(binary), "/c", VersionCache())
    assert isinstance(found, ClaudeSetup) and found.pinned and found.binary_sha256 is None
    as_new = await setup.find_claude(
        str(binary), "/c", VersionCache(), PINNED.without("claude", "2.1.332")
    )
    assert isinstance(as_new, ClaudeSetup) and not as_new.pinned
    assert (as_new.version, as_new.binary_sha256) == ("2.1.332", sha256_file(binary))
    assert "2.1.332" not in setup.pinned(PINNED.without("claude", "2.1.332"))


async def test_rehashed_reads_the_file_again_only_when_it_changed(tmp_path: Path) -> None:
    binary = stand_in(tmp_path / "claude", "2.1.999")
    found = await setup.find_claude(str(binary), "/c", VersionCache())
    assert isinstance(found, ClaudeSetup) and found.binary_sha256 == sha256_file(binary)
    assert await setup.rehashed(found) is found  # same file: not read again
    stand_in(binary, "2.1.999", build="another build")
    swapped = await setup.rehashed(found)
    assert swapped.binary_sha256 == sha256_file(binary) != found.binary_sha256
    same_size = binary.read_text().replace("another", "anothex")
    before = binary.stat()
    binary.write_text(same_size)  # rewritten in place, its size and mtime put back
    os.utime(binary, ns=(before.st_atime_ns, before.st_mtime_ns))
    rewritten = await setup.rehashed(swapped)
    assert rewritten.binary_sha256 == sha256_file(binary) != swapped.binary_sha256
    binary.unlink()
    gone = await setup.rehashed(rewritten)
    assert gone.binary_sha256 is None and refusal(gone, row(str(rewritten.binary_sha256)))


# ---------------------------------------------------------------- through akk serve


async def _send(ctl: Controller, root: Path, n: int) -> dict[str, Any]:
    """A send in a workspace of its own (one writer per workspace)."""
    work = root / f"work-{n}"
    work.mkdir()
    params = {
        "scope": {"task": f"headless-{n}", "role": "coder"},
        "backend": CLAUDE_HEADLESS,
        "cwd": str(work),
        "request": "hi",
        "client_request_id": f"headless-{n}",
    }
    result: dict[str, Any] = await ctl.call("send", params)
    return result


async def _refused(ctl: Controller, root: Path, n: int) -> str:
    with pytest.raises(AkkError) as refused:
        await _send(ctl, root, n)
    assert refused.value.reason == "unsupported_version", refused.value.message
    assert "nothing was started" in refused.value.message
    return refused.value.message


def _write(state: StateDir, change: Any) -> None:
    """Write the qualifications table as another process (`akk qualify` offline) would."""
    conn = open_store(state.store_path)
    try:
        with conn:
            change(conn)
    finally:
        conn.close()


async def test_a_send_runs_an_unpinned_claude_only_while_its_headless_qualification_holds(
    tmp_path: Path,
) -> None:
    binary = stand_in(tmp_path / "claude", "2.1.999")
    work = tmp_path / "workspaces"
    work.mkdir()
    state = StateDir(tmp_path / "akk")
    tokens = mint_offline(state, "ctl")
    config = ServiceConfig(
        state=state, port=0, tmux_sockets=(), claude_bin=str(binary),
        claude_config_dir=str(tmp_path / "config"), codex_bin=str(tmp_path / "no-codex"),
        workspace_roots=(str(tmp_path),),
    )  # fmt: skip
    bases = PINNED.base_agents

    def record(qualified: Qualification) -> None:
        _write(state, lambda conn: qualifications.record(conn, qualified, bases, actor="test"))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            async with connect(endpoint.url, tokens["ctl"]) as ctl:
                said = await _refused(ctl, work, 1)
                assert "unpinned_version: Claude Code 2.1.999" in said
                assert f"akk qualify claude --binary {binary}" in said

                built = sha256_file(binary)
                record(row(built, headless=None))  # qualified for panes only
                assert "headless_unproven: " in await _refused(ctl, work, 2)
                record(row(OTHER_SHA))
                assert "qualified_binary_differs: " in await _refused(ctl, work, 3)

                record(row(built))
                taken = await _send(ctl, work, 4)
                assert taken["turn_id"], taken

                stand_in(binary, "2.1.999", build="swapped under the server")
                said = await _refused(ctl, work, 5)
                assert "qualified_binary_differs: " in said and built[:16] in said
                record(row(sha256_file(binary)))
                assert (await _send(ctl, work, 6))["turn_id"]

                _write(
                    state,
                    lambda conn: qualifications.revoke(conn, "claude", "2.1.999", 1.0, actor="t"),
                )
                assert "unpinned_version: " in await _refused(ctl, work, 7)
            nursery.cancel_scope.cancel()


def test_the_proven_report_is_what_the_backend_reads() -> None:
    proof = HeadlessProof(HEADLESS_CHECKS, None, sandboxed=True, seconds=1.5)
    assert proof.proven and setup.headless_unproven({"headless": proof.to_json()}) is None
    failed = HeadlessProof(HEADLESS_CHECKS[:2], "bash_allow: ran 0 times", True, 1.0)
    assert not failed.proven
    assert setup.headless_unproven({"headless": failed.to_json()}) == (
        "not proven: bash_allow: ran 0 times"
    )
    assert "NOT proven (bash_allow: ran 0 times)" in failed.describe()
    assert attrs.evolve(proof, checks=HEADLESS_CHECKS[1:]).proven is False


def test_a_claude_qualification_reports_its_headless_proof_without_it_deciding() -> None:
    base = PROFILES[("claude", "2.1.328")]
    point = compare.Point("echo", "idle", 120, 40)
    same = (compare.Comparison(point, "same", {}, None, compare.Outcome("idle")),)
    held = evidence.EvidenceCheck("f", True, "done", "Hello", {"input": 1}, "complete", ())
    found = Probe("claude", "2.1.332", Path("/bin/claude"), "a" * 64)
    failed = HeadlessProof(HEADLESS_CHECKS[:2], "bash_allow: ran 0 times", True, 1.0)
    judged = Judgement(found, base, "b" * 64, same, held, None, None, True, (), headless=failed)
    assert judged.qualified  # the screens decide; the backend reads the proof
    assert judged.report()["headless"] == failed.to_json()
    assert "headless: NOT proven (bash_allow: ran 0 times)" in judged.text()
    why = refusal(unpinned(), row(headless=judged.report()["headless"]))
    assert why is not None and "not proven: bash_allow" in why
