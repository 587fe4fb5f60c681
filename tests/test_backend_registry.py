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


async def test_each_backend_registers_once_under_its_name_and_resumes_its_own_turns() -> None:
    pane = _Named("terminal", witness=object())  # type: ignore[arg-type]
    session = _Named(CODEX_APP_SERVER, keeps_sessions=True)
    registry = _registry(pane, session)
    assert registry.sessions() == [CODEX_APP_SERVER]
    assert registry.watches is pane.witness
    resumers = registry.resumers()
    assert sorted(resumers) == sorted(["terminal", CODEX_APP_SERVER])
    await resumers[CODEX_APP_SERVER]("turn_a")
    await resumers["terminal"]("turn_b")
    assert session.followed == [("turn_a", True)] and pane.followed == [("turn_b", True)]

    for refused, why in (
        (_Named("terminal"), "registered already"),
        (_Named(""), "empty"),
        (_Named("claude_nowhere", keeps_sessions=True), "missing from names.SESSION_BACKENDS"),
        (_Named("second", witness=object()), "second watch witness"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match=why):
            registry.register(refused)  # type: ignore[arg-type]
    assert registry.sessions() == [CODEX_APP_SERVER]
    with pytest.raises(LookupError):
        _ = _registry(session).watches


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
    assert "nothing was started" in refused.value.message
    assert "terminal_id" in refused.value.message  # the other way to send
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
