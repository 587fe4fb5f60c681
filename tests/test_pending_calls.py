"""The pending tool call in the agents' own files, and the permission rule built on it.

Replays the real transcripts and rollouts of fixtures/evidence (every pinned
version's `permission` and `permission_esc` cases): written up to the tool
call, the file shows exactly that call pending, with the scenario's command;
once its result (approval, or Esc) is written, none. Then the rule of
`akk.profiles.permission` on a captured permission screen of every pinned
version, and the fingerprint's binding of the call.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import pytest

from akk.evidence import PendingCall, open_calls, owned_file
from akk.evidence import locate as evidence_locate
from akk.evidence.files import identify
from akk.evidence.model import EvidenceAmbiguous, EvidenceUnavailable, input_digest
from akk.profiles.observation import InteractionKind, Observation
from akk.profiles.permission import (
    PENDING_CALL_MISMATCH,
    PENDING_CALL_UNKNOWN,
    asked_tool,
    awaits_call,
    bind_pending,
    shows_command,
)
from akk.profiles.registry import PROFILES
from akk.qualify.scenarios import SCENARIOS, Bash, ExecCommand
from akk.screen import fingerprint
from tests import corpus

EVIDENCE = corpus.ROOT / "evidence"
CASES = sorted(
    path for agent in ("claude", "codex") for path in (EVIDENCE / agent).glob("*/permission*.jsonl")
)
TOOL = {"claude": "Bash", "codex": "exec_command"}


def _command(scenario: str) -> str:
    (reply,) = [
        step.reply
        for step in SCENARIOS[scenario].steps
        if isinstance(step.reply, Bash | ExecCommand)
    ]
    return reply.command if isinstance(reply, Bash) else reply.cmd


def _is_call(agent: str, data: dict[str, object]) -> bool:
    if agent == "claude":
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        return isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_use" for block in content
        )
    payload = data.get("payload")
    return isinstance(payload, dict) and payload.get("type") == "function_call"


def test_every_pinned_version_has_both_permission_cases() -> None:
    versions = {(p.parent.parent.name, p.parent.name) for p in CASES}
    assert versions == set(PROFILES)
    assert len(CASES) == 2 * len(PROFILES)


@pytest.mark.parametrize("path", CASES, ids=lambda p: str(p.relative_to(EVIDENCE)))
def test_the_file_shows_the_call_pending_until_its_result_is_written(
    path: Path, tmp_path: Path
) -> None:
    label = json.loads(path.with_suffix(".json").read_text())
    agent, command = label["agent"], _command(label["scenario"])
    lines = path.read_bytes().splitlines(keepends=True)
    call_at = next(i for i, line in enumerate(lines) if _is_call(agent, json.loads(line)))
    written = tmp_path / "file.jsonl"
    for upto, expected in ((call_at, 0), (call_at + 1, 1), (len(lines), 0)):
        written.write_bytes(b"".join(lines[:upto]))
        found = identify(str(written))
        assert found is not None
        calls = open_calls(agent, found[0])
        assert len(calls) == expected, (upto, calls)
        if expected:
            (call,) = calls
            assert (call.tool, call.command) == (TOOL[agent], command)
            assert len(call.input_sha256) == 64 and call.call_id
    # From an offset past the call (a later Turn's binding), it is not this Turn's.
    written.write_bytes(b"".join(lines[: call_at + 1]))
    found = identify(str(written))
    assert found is not None
    assert open_calls(agent, found[0], found[1]) == []


def _screen(agent: str, version: str) -> tuple[Observation, str]:
    """A captured Bash / exec permission of this version, classified, and its command."""
    scenario = "claude_bash" if agent == "claude" else "codex_exec"
    label_path = next((corpus.ROOT / agent / version).glob(f"**/{scenario}-permission.json"))
    _, observation = corpus.observed(label_path)
    assert observation.actionable, (label_path, observation.reason)
    return observation, _command(scenario)


def _call(tool: str, command: str | None, call_id: str = "call_1") -> PendingCall:
    given = {"command": command} if tool == "Bash" else {"cmd": command}
    return PendingCall(call_id, tool, command, input_digest(given))


@pytest.mark.parametrize(("agent", "version"), sorted(PROFILES), ids="-".join)
def test_a_permission_is_actionable_only_for_its_one_pending_call(agent: str, version: str) -> None:
    observation, command = _screen(agent, version)
    tool = asked_tool(observation)
    assert tool == TOOL[agent]
    call = _call(tool, command)
    assert bind_pending(observation, [call]) == (observation, call)
    # Another pending call of another tool does not count.
    assert bind_pending(observation, [call, _call("Read", None, "r")])[1] == call
    refused = {
        "the file unreadable": (None, PENDING_CALL_UNKNOWN),
        "no pending call": ([], PENDING_CALL_UNKNOWN),
        "two pending calls": ([call, _call(tool, command, "call_2")], PENDING_CALL_UNKNOWN),
        "a longer command": ([_call(tool, command + " && rm -rf ~")], PENDING_CALL_MISMATCH),
        "a shorter command": ([_call(tool, command[:-1])], PENDING_CALL_MISMATCH),
        "no command": ([_call(tool, None)], PENDING_CALL_MISMATCH),
        "another tool only": ([_call("Write", command)], PENDING_CALL_UNKNOWN),
    }
    for why, (calls, reason) in refused.items():
        bound, matched = bind_pending(observation, calls)
        assert matched is None and not bound.actionable, why
        assert bound.reason == reason and bound.prompt == observation.prompt, why
    # Only a readable file without a call of the tool is read again (the call may come next).
    waits = {why for why, (calls, _) in refused.items() if awaits_call(calls, tool)}
    assert waits == {"no pending call", "another tool only"}


def test_only_actionable_permissions_are_checked() -> None:
    observation, _ = _screen("claude", "2.1.332")
    assert observation.prompt is not None
    question = attrs.evolve(observation.prompt, kind=InteractionKind.QUESTIONNAIRE)
    for other in (
        attrs.evolve(observation, prompt=question),
        attrs.evolve(observation, reason="x"),
    ):
        assert bind_pending(other, None) == (other, None)


def test_a_drawn_command_keeps_every_character_and_every_space() -> None:
    assert shows_command("echo a b", "  echo a \n\t b  ")
    # Claude broke a word longer than its row: the rows are joined with a space.
    assert shows_command("echo github_pat_0123 456789 done", "echo github_pat_0123456789 done")
    assert not shows_command("echo ab", "echo a b")  # a space of the command is not shown
    assert not shows_command("echo a b", "echo a bc")  # cut short
    assert not shows_command("rm -rf /tmp/x", "rm -rf /tmp/y")
    assert not shows_command("rm -rf /tmp", "rm -rf / tmp")


def test_the_fingerprint_binds_the_pending_call() -> None:
    observation, command = _screen("codex", "0.171.0")
    label_path = next((corpus.ROOT / "codex" / "0.171.0").glob("**/codex_exec-permission.json"))
    _, grid = corpus.screen(label_path)
    assert observation.prompt is not None
    region = observation.prompt.region

    def fp(pending: str) -> bytes:
        return fingerprint(grid, region, profile_id="p", terminal_identity="t", pending=pending)

    one, other = _call("exec_command", command), _call("exec_command", command, "call_2")
    changed = _call("exec_command", command + " ")
    prints = {fp(""), fp(one.identity), fp(other.identity), fp(changed.identity)}
    assert len(prints) == 4
    assert one.identity == _call("exec_command", command).identity
    assert one.identity.isascii() and len(one.identity) == 64
    # A lone surrogate in the file's JSON still gives an ASCII identity, never an error.
    odd = PendingCall("\ud800", "Bash", "x", input_digest({"command": "\udfff"}))
    assert odd.identity.isascii()


def test_the_one_owned_file_is_read_and_several_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths: list[str] = []
    monkeypatch.setattr(evidence_locate, "owned_files", lambda agent, pid, ticks: tuple(paths))
    with pytest.raises(EvidenceUnavailable):
        owned_file("claude", 1, 1)
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text("")
        paths.append(str(tmp_path / name))
    with pytest.raises(EvidenceAmbiguous):
        owned_file("codex", 1, 1)
    paths.pop()
    assert owned_file("claude", 1, 1).path == paths[0]
    with pytest.raises(EvidenceUnavailable):
        owned_file("gemini", 1, 1)


def test_a_file_read_again_unchanged_gives_the_same_calls_and_a_changed_one_is_read_anew(
    tmp_path: Path,
) -> None:
    """`open_calls` keeps what an unchanged file (inode, size, modification time) held: a
    prompt is looked at every 30 ms while an answer is proven. Any change is read anew,
    even one that keeps the size."""
    path = next(p for p in CASES if p.parent.parent.name == "claude")
    lines = path.read_bytes().splitlines(keepends=True)
    call_at = next(i for i, line in enumerate(lines) if _is_call("claude", json.loads(line)))
    written = tmp_path / "file.jsonl"
    written.write_bytes(b"".join(lines[: call_at + 1]))
    found = identify(str(written))
    assert found is not None
    (first,) = open_calls("claude", found[0])
    assert open_calls("claude", found[0]) == [first]
    # The same bytes but the call's id, at the same size, written a moment later.
    changed = b"".join(lines[: call_at + 1]).replace(
        first.call_id.encode(), b"x" * len(first.call_id)
    )
    written.write_bytes(changed)
    stat = written.stat()
    os.utime(written, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    (second,) = open_calls("claude", found[0])
    assert second.call_id == "x" * len(first.call_id)
