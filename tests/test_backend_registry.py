"""The backend registry: one name per backend, the session backends' list, the resumers; and
a session send naming a backend that keeps no sessions is refused before anything starts."""

from __future__ import annotations

import os
from typing import Any

import pytest
import trio

from akk.backends.contract import WatchWitness
from akk.backends.names import CLAUDE_HEADLESS, CODEX_APP_SERVER, SESSION_BACKENDS
from akk.backends.registry import Backends
from akk.client import AkkError, connect
from akk.store.database import open_reader
from akk.store.turns import Turn, TurnState
from tests.conftest import LiveServer

HOME = os.path.expanduser("~")


class _Named:
    """Just enough of a backend for the registry: its name, sessions, witness, follow_again."""

    def __init__(
        self, name: str, *, keeps_sessions: bool = False, witness: WatchWitness | None = None
    ) -> None:
        self.name = name
        self.keeps_sessions = keeps_sessions
        self.witness = witness
        self.followed: list[tuple[str, bool]] = []

    async def follow_again(self, turn_id: str, *, restarted: bool) -> None:
        self.followed.append((turn_id, restarted))


def _registry(*backends: _Named) -> Backends:
    registry = Backends()
    for backend in backends:
        registry.register(backend)  # type: ignore[arg-type]  # the registry reads only these
    return registry


def _record(backend: str) -> Turn:
    """A record of ``backend`` (the registry reads only its ``backend``)."""
    return Turn(
        turn_id="watch_1", controller_id="ctl", client_request_id="watch_1", terminal_id=None,
        backend=backend, native_session=None, request_sha256="0" * 64, request_chars=0,
        round=1, state=TurnState.RUNNING, reason=None, final_message=None,
        evidence_status="unknown", evidence=None, evidence_limit=None, usage_input=None,
        usage_output=None, usage_cache_read=None, usage_cache_write=None,
        usage_status="unknown", inactivity_seconds=60.0, hard_deadline_at=0.0,
        last_activity_at=0.0, created_at=0.0, updated_at=0.0, settled_at=None, closed_at=None,
        revision=0, task_kind="watch",
    )  # fmt: skip


async def test_each_backend_registers_once_under_its_name_and_resumes_its_own_turns() -> None:
    pane = _Named("terminal", witness=object())  # type: ignore[arg-type]
    files = _Named("codex_thread", witness=object())  # type: ignore[arg-type]
    session = _Named(CODEX_APP_SERVER, keeps_sessions=True)
    registry = _registry(pane, session, files)
    assert registry.sessions() == [CODEX_APP_SERVER]
    # Each record is observed through its own backend's witness.
    assert registry.witness(_record("terminal")) is pane.witness
    assert registry.witness(_record("codex_thread")) is files.witness
    with pytest.raises(LookupError):
        registry.witness(_record(CODEX_APP_SERVER))
    resumers = registry.resumers()
    assert sorted(resumers) == sorted(["terminal", CODEX_APP_SERVER, "codex_thread"])
    await resumers[CODEX_APP_SERVER]("turn_a")
    await resumers["terminal"]("turn_b")
    assert session.followed == [("turn_a", True)] and pane.followed == [("turn_b", True)]

    for refused, why in (
        (_Named("terminal"), "registered already"),
        (_Named(""), "empty"),
        (_Named("claude_nowhere", keeps_sessions=True), "missing from names.SESSION_BACKENDS"),
    ):
        with pytest.raises(ValueError, match=why):
            registry.register(refused)  # type: ignore[arg-type]
    assert registry.sessions() == [CODEX_APP_SERVER]


@pytest.mark.parametrize("backend", ["terminal", "claude_nowhere", None])
async def test_a_session_send_names_a_backend_that_keeps_sessions(
    live_server: LiveServer, backend: str | None
) -> None:
    """Unknown, session-less or missing: invalid_params naming the choices; nothing started."""
    request_id = f"registry-{backend}"
    params: dict[str, Any] = {
        "scope": {"task": request_id, "role": "coder"},
        "cwd": os.getcwd(),
        "request": "hi",
        "client_request_id": request_id,
    }
    if backend is not None:
        params["backend"] = backend
    with trio.fail_after(10):
        async with connect(live_server.url, live_server.controllers["c1"]) as ctl:
            with pytest.raises(AkkError) as refused:
                await ctl.call("send", params)
    assert refused.value.reason == "invalid_params"
    assert all(f'"{name}"' in refused.value.message for name in SESSION_BACKENDS)
    assert "nothing was sent or recorded" in refused.value.message
    conn = open_reader(live_server.state.store_path)
    try:
        turns = conn.execute(
            "SELECT count(*) FROM turns WHERE client_request_id = ?", (request_id,)
        )
        sessions = conn.execute("SELECT count(*) FROM sessions WHERE task = ?", (request_id,))
        assert (turns.fetchone(), sessions.fetchone()) == ((0,), (0,))
    finally:
        conn.close()


async def test_a_claude_send_without_a_pinned_claude_is_refused_and_starts_nothing(
    live_server: LiveServer,
) -> None:
    """The backend is registered, but its binary is missing: unsupported_version, a next
    step, and no Turn, session or process."""
    request_id = "registry-no-claude"
    params: dict[str, Any] = {
        "scope": {"task": request_id, "role": "coder"},
        "backend": CLAUDE_HEADLESS,
        "cwd": HOME,  # the live server's workspace root
        "request": "hi",
        "client_request_id": request_id,
    }
    with trio.fail_after(10):
        async with connect(live_server.url, live_server.controllers["c1"]) as ctl:
            with pytest.raises(AkkError) as refused:
                await ctl.call("send", params)
    assert refused.value.reason == "unsupported_version", refused.value.message
    assert "no-claude" in refused.value.message and "--claude-bin" in refused.value.message
    assert "nothing was started" in refused.value.message
    conn = open_reader(live_server.state.store_path)
    try:
        turns = conn.execute(
            "SELECT count(*) FROM turns WHERE client_request_id = ?", (request_id,)
        )
        sessions = conn.execute("SELECT count(*) FROM sessions WHERE task = ?", (request_id,))
        assert (turns.fetchone(), sessions.fetchone()) == ((0,), (0,))
    finally:
        conn.close()
