"""Watches by native id on captured files: finding the person's task, following it, refusing.

The files are real rollouts and transcripts captured from pinned clients
(fixtures/evidence/codex/, fixtures/claude_headless/), laid out under a home as
the agents lay them out, cut where the task still ran and then completed, as the
agent appends them. The lab runs the same against live clients
(tests/lab/test_backend_watch.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.actors.turn_follower import Usage
from akk.backends.file_watch.follow import FileFollower
from akk.backends.file_watch.locate import find_task, task_file, task_progress
from akk.evidence import Progress, UsageStatus
from akk.evidence.model import Agent
from akk.protocol.errors import Reason, RpcError
from akk.protocol.jsonrpc import parse_request
from akk.store.turns import Turn, TurnState

FIXTURES = Path(__file__).parent.parent / "fixtures"
CODEX_ROLLOUT = FIXTURES / "evidence" / "codex" / "0.171.0" / "echo.jsonl"
CLAUDE_TRANSCRIPT = FIXTURES / "claude_headless" / "2.1.332" / "echo.jsonl"
THREAD = "01a22d2c-f249-7693-9f76-b873572d1b60"  # the rollout's own thread id
SESSION = "fe073203-b653-4840-a846-a6841eab0343"  # the transcript's own session id


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def _rollout(home: Path, lines: list[str], thread: str = THREAD) -> Path:
    path = home / "sessions" / "2026" / "11" / "30" / f"rollout-2026-11-30T15-57-30-{thread}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    return path


def _transcript(home: Path, lines: list[str], session: str = SESSION) -> Path:
    path = home / "projects" / "-tmp-akk-lab-work" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    return path


def _codex_running() -> tuple[list[str], list[str]]:
    """The rollout up to its last task's start (running), and the rest (its completion)."""
    lines = _lines(CODEX_ROLLOUT)
    end = max(i for i, line in enumerate(lines) if '"task_complete"' in line)
    return lines[:end], lines[end:]


def _claude_running() -> tuple[list[str], list[str]]:
    """The transcript up to the final reply (running), and the rest."""
    lines = _lines(CLAUDE_TRANSCRIPT)
    reply = next(i for i, line in enumerate(lines) if '"type":"assistant"' in line)
    return lines[:reply], lines[reply:]


def _watch(found_json: str, digest: str) -> Turn:
    return Turn(
        turn_id="watch_1", controller_id="ctl", client_request_id="watch_1", terminal_id=None,
        backend="codex_thread", native_session=THREAD, request_sha256=digest, request_chars=0,
        round=1, state=TurnState.RUNNING, reason=None, final_message=None,
        evidence_status="bound", evidence=found_json, evidence_limit=None, usage_input=None,
        usage_output=None, usage_cache_read=None, usage_cache_write=None,
        usage_status="unknown", inactivity_seconds=600.0, hard_deadline_at=0.0,
        last_activity_at=0.0, created_at=0.0, updated_at=0.0, settled_at=None, closed_at=None,
        revision=0, task_kind="watch",
    )  # fmt: skip


@attrs.define
class _Control:
    """The TurnActor's side of a follower, recording what the follower did."""

    turn: Turn | None
    settled: tuple[TurnState, str | None, Usage | None, dict[str, Any]] | None = None

    @property
    def record(self) -> Turn:
        assert self.turn is not None
        return self.turn

    async def update(self, **changes: Any) -> Turn:
        self.turn = attrs.evolve(self.record, **changes)
        return self.turn

    async def settle(
        self,
        state: TurnState,
        reason: str | None,
        summary: str,
        *,
        usage: Usage | None = None,
        also: object = None,
        **changes: Any,
    ) -> None:
        self.settled = (state, reason, usage, changes)

    async def announce(self, *args: object) -> None:
        raise AssertionError("a file watch announces no prompt")


async def _follow(
    tmp_path: Path, agent: Agent, running: list[str], rest: list[str]
) -> tuple[_Control, FileFollower, Path]:
    if agent == "codex":
        path = _rollout(tmp_path, running)
        found = find_task("codex", str(tmp_path), THREAD)
    else:
        path = _transcript(tmp_path, running)
        found = find_task("claude", str(tmp_path), SESSION)
    control = _Control(_watch(found.binding.to_json(), found.request_sha256))

    async def read(watch: Turn) -> Progress:  # as FileWatches.read, in a worker thread
        return await trio.to_thread.run_sync(task_progress, agent, watch)

    follower = FileFollower(read=read)
    follower.attach(control)
    return control, follower, path


@pytest.mark.parametrize("agent", ["codex", "claude"])
async def test_a_running_task_is_found_by_its_id_and_followed_to_done(
    tmp_path: Path, agent: Agent
) -> None:
    running, rest = _codex_running() if agent == "codex" else _claude_running()
    control, follower, path = await _follow(tmp_path, agent, running, rest)
    assert await follower.look(1.0)
    assert control.settled is None and control.record.last_activity_at == 1.0
    assert await follower.look(2.0)  # the file did not grow: not read again
    assert control.record.last_activity_at == 1.0
    with path.open("a") as appended:
        appended.write("".join(rest))
    assert await follower.look(3.0)
    assert control.settled is not None
    state, reason, usage, changes = control.settled
    assert (state, reason) == (TurnState.DONE, None)
    assert changes["final_message"]
    assert usage is not None and usage.tokens is not None
    if agent == "claude":  # the final reply ended it: no turn_duration in a headless run
        assert changes["final_message"] == "Hello from the lab model."
        assert usage.status is UsageStatus.COMPLETE


@pytest.mark.parametrize("agent", ["codex", "claude"])
def test_a_task_that_already_ended_is_no_running_task(tmp_path: Path, agent: str) -> None:
    if agent == "codex":
        _rollout(tmp_path, _lines(CODEX_ROLLOUT))
        native = THREAD
    else:
        _transcript(tmp_path, _lines(CLAUDE_TRANSCRIPT))
        native = SESSION
    with pytest.raises(RpcError) as raised:
        find_task(agent, str(tmp_path), native)  # type: ignore[arg-type]
    assert raised.value.reason is Reason.NOT_FOUND
    assert "its last task ended (done)" in str(raised.value)


def test_the_cwd_comes_from_the_agents_own_file(tmp_path: Path) -> None:
    _rollout(tmp_path, _codex_running()[0])
    assert find_task("codex", str(tmp_path), THREAD).cwd == "/tmp/akk-lab-9dj5i6jz/work"
    _transcript(tmp_path, _claude_running()[0])
    assert find_task("claude", str(tmp_path), SESSION).cwd == "/tmp/akk-lab-e0xo2b2a/work"


async def test_a_file_replaced_after_the_watch_proves_nothing_more(tmp_path: Path) -> None:
    running, rest = _codex_running()
    control, follower, path = await _follow(tmp_path, "codex", running, rest)
    path.rename(tmp_path / "kept.jsonl")  # kept, so the new file gets another inode
    path.write_text("".join(running + rest))  # the same name, another file
    assert await follower.look(1.0)
    assert control.settled is None
    assert control.record.evidence_status == "unknown"
    assert (control.record.evidence_limit or "").startswith("EvidenceLost: ")
    assert await follower.look(2.0)  # never bound again: the clocks end it
    assert control.settled is None


def _refused(tmp_path: Path, agent: str, home: str, native: str) -> RpcError:
    with pytest.raises(RpcError) as raised:
        task_file(agent, home, native)  # type: ignore[arg-type]
    return raised.value


def test_only_the_one_file_of_exactly_that_id_is_ever_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _rollout(home, _codex_running()[0])
    assert task_file("codex", str(home), THREAD).endswith(f"-{THREAD}.jsonl")
    # A malformed id or home is refused before anything is read.
    for bad in ("*", THREAD.upper(), "../" + THREAD, THREAD + "x"):
        assert _refused(tmp_path, "codex", str(home), bad).reason is Reason.INVALID_PARAMS
    assert _refused(tmp_path, "codex", "relative/home", THREAD).reason is Reason.INVALID_PARAMS
    # Another id, another home, a home that is a file: not found, never another thread.
    other = "01a22d2c-0000-7693-9f76-b873572d1b60"
    assert _refused(tmp_path, "codex", str(home), other).reason is Reason.NOT_FOUND
    assert _refused(tmp_path, "codex", str(tmp_path), THREAD).reason is Reason.NOT_FOUND
    (tmp_path / "file").write_text("")
    assert _refused(tmp_path, "codex", str(tmp_path / "file"), THREAD).reason is Reason.NOT_FOUND
    # Two files of the same id (another day's folder): ambiguous, refused.
    twin = home / "sessions" / "2026" / "12" / "01" / f"rollout-x-{THREAD}.jsonl"
    twin.parent.mkdir(parents=True)
    twin.write_text("")
    assert "2 files" in str(_refused(tmp_path, "codex", str(home), THREAD))
    twin.unlink()
    # A link in place of the file is not followed.
    path = Path(task_file("codex", str(home), THREAD))
    target = tmp_path / "elsewhere.jsonl"
    shutil.move(path, target)
    path.symlink_to(target)
    assert _refused(tmp_path, "codex", str(home), THREAD).reason is Reason.NOT_FOUND


def test_a_file_naming_another_thread_inside_is_refused(tmp_path: Path) -> None:
    other = "01a22d2c-0000-7693-9f76-b873572d1b60"
    _rollout(tmp_path, _codex_running()[0], thread=other)  # the name says other, the file THREAD
    with pytest.raises(RpcError) as raised:
        find_task("codex", str(tmp_path), other)
    assert raised.value.reason is Reason.NOT_FOUND
    assert "never bound to another thread" in str(raised.value)


def test_a_home_of_another_user_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _rollout(tmp_path / "theirs", _codex_running()[0])
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)  # AKK is another user
    refused = _refused(tmp_path, "codex", str(tmp_path / "theirs"), THREAD)
    assert refused.reason is Reason.NOT_FOUND and "own user" in str(refused)


@pytest.mark.parametrize(
    "params",
    [
        {"thread_id": THREAD},
        {"codex_home": "/tmp"},
        {"thread_id": THREAD, "claude_config_dir": "/tmp"},
        {"claude_session_id": SESSION, "codex_home": "/tmp"},
        {"terminal_id": "term_1", "thread_id": THREAD, "codex_home": "/tmp"},
        {"thread_id": THREAD.upper(), "codex_home": "/tmp"},
    ],
)
def test_a_watch_names_exactly_one_task_shape(params: dict[str, str]) -> None:
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "watch", "params": params})
    with pytest.raises(RpcError) as raised:
        parse_request(frame)
    assert raised.value.reason is Reason.INVALID_PARAMS


def test_each_watch_shape_is_accepted() -> None:
    for params in (
        {"terminal_id": "term_1"},
        {"thread_id": THREAD, "codex_home": "/tmp"},
        {"claude_session_id": SESSION, "claude_config_dir": "/tmp"},
    ):
        frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "watch", "params": params})
        assert parse_request(frame).params == params
