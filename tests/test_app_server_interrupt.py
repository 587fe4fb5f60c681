"""A cancel of a Turn on the app-server is reserved durably before turn/interrupt.

The BackendActor records the Turn's cancel step before it writes the request, and its
stage from the answer: `accepted` (taken), `not_accepted` (the app-server's refusal:
nothing interrupted), `uncertain` (no answer). A crash after the reservation leaves the
step open with nothing written, for the restart to call uncertain. The actor and the
store are real; the app-server connection is a stand-in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import attrs
import pytest
import trio

from akk import faults
from akk.actors.store import transact
from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.actor import BackendActor, InterruptTurn
from akk.backends.codex_app_server.board import BackendBoard
from akk.backends.names import CODEX_APP_SERVER
from akk.faults import InjectedFault, Point
from akk.store import dispatches
from akk.store.dispatches import Kind, Stage
from akk.store.reader import StoreReader
from tests.test_app_server_requests import SETUP
from tests.test_claude_answers import OWNER
from tests.test_full_disk_sessions import _reserved, _store


@attrs.define
class _App:
    """turn/interrupt answered with ``fails`` raised, if set; every request kept."""

    fails: Exception | None = None
    requests: list[str] = attrs.field(factory=list)

    async def request(self, method: str, params: dict[str, Any], *, timeout: float) -> object:
        self.requests.append(method)
        if self.fails is not None:
            raise self.fails
        return {}


@pytest.mark.parametrize(
    ("fails", "stage", "reply"),
    [
        (None, Stage.ACCEPTED, None),
        (rpc.ErrorReply("turn/interrupt", -32600, "no active turn"), Stage.NOT_ACCEPTED,
         "the app-server refused turn/interrupt: no active turn"),
    ],
)  # fmt: skip
async def test_an_interrupt_is_reserved_then_recorded_from_its_answer(
    tmp_path: Path, fails: Exception | None, stage: Stage, reply: str | None
) -> None:
    steps, app, answered = await _interrupt(tmp_path, _App(fails))
    assert answered == reply and app.requests == ["turn/interrupt"]
    (step,) = steps
    assert (step.kind, step.stage, step.terminal_id) == (Kind.CANCEL, stage, None)


async def test_an_interrupt_without_an_answer_is_uncertain(tmp_path: Path) -> None:
    steps, app, answered = await _interrupt(tmp_path, _App(rpc.ConnectionClosed("gone")))
    assert isinstance(answered, rpc.ConnectionClosed) and app.requests == ["turn/interrupt"]
    (step,) = steps
    assert (step.kind, step.stage) == (Kind.CANCEL, Stage.UNCERTAIN)


async def test_a_crash_after_the_reservation_leaves_it_open_and_sends_nothing(
    tmp_path: Path,
) -> None:
    faults.arm(f"{Point.BACKEND_INTERRUPT_RESERVED}:raise")
    try:
        steps, app, answered = await _interrupt(tmp_path, _App())
    finally:
        faults.disarm()
    assert isinstance(answered, InjectedFault) and app.requests == []
    (step,) = steps
    assert (step.kind, step.stage) == (Kind.CANCEL, Stage.RESERVED)


async def _interrupt(tmp_path: Path, app: _App) -> tuple[list[dispatches.Dispatch], _App, object]:
    db = tmp_path / "akk.sqlite3"
    with trio.fail_after(20):
        async with _store(db) as root:
            store = root.ref("store")
            turn_id = await transact(store, lambda conn: _reserved(tmp_path, CODEX_APP_SERVER,
                                                                   conn))  # fmt: skip
            reader = StoreReader(db)
            actor = BackendActor(
                cast(rpc.AppServer, app), setup=SETUP, board=BackendBoard(generation=1, alive=True),
                store=store, reader=reader.run,
            )  # fmt: skip
            answered: object
            try:
                answered = await actor.receive(InterruptTurn("thr_1", "t1", turn_id, OWNER))
            except (InjectedFault, rpc.AppServerError) as exc:
                answered = exc
            steps = await reader.run(lambda conn: dispatches.of_turn(conn, turn_id))
            reader.close()
    return steps, app, answered
