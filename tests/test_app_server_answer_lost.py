"""An app-server answer whose BackendActor dies after the reservation.

The twin of tests/test_claude_answers.py's crash between reservation and write: the
answer was reserved durably, then its actor failed (a fault at `answer_reserved`), so the
methods' side cannot know whether the answer went out. Its step is settled `uncertain`
with one `response_uncertain` event at once (never left open until a restart), the call
says so, and the answer is never sent again. The methods' side, the BackendActor and the
store are real; the app-server connection is a stand-in that counts what it was given.
"""

from __future__ import annotations

import json
import time
from contextlib import suppress
from pathlib import Path
from typing import Any, cast

import apsw
import attrs
import pytest
import trio

from akk import faults
from akk.actors.store import transact
from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.actor import BackendActor, BackendMessage
from akk.backends.codex_app_server.answers import AppServerAnswers
from akk.backends.codex_app_server.board import BackendBoard, NativeTurn
from akk.backends.context import BackendContext
from akk.backends.names import CODEX_APP_SERVER
from akk.faults import InjectedFault, Point
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorRef, Incarnation, Rank
from akk.screen.fingerprint import IdMinter
from akk.store import dispatches, interactions, sessions, turns
from akk.store.dispatches import Stage
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState
from tests.test_app_server_requests import APPROVAL, SETUP
from tests.test_claude_answers import OWNER
from tests.test_full_disk_sessions import _reserved, _store

IDS = IdMinter(b"k" * 32)


@attrs.define
class _App:
    """The app-server connection: every answer written to it."""

    responded: list[object] = attrs.field(factory=list)
    pid: int = 4242

    async def respond(self, request: rpc.ServerRequest, result: dict[str, Any]) -> None:
        self.responded.append(request.id)


@attrs.define
class _Wakes:
    woken: list[str] = attrs.field(factory=list)

    def wake(self, controller_id: str) -> None:
        self.woken.append(controller_id)


async def _serve(incarnation: Incarnation[BackendMessage]) -> None:
    """Run the BackendActor; a crash (an injected fault) ends it, as it ends its host."""
    with suppress(InjectedFault):
        await incarnation.run()


def _running(workspace: Path, conn: apsw.Connection) -> str:
    """A session Turn whose round 1 runs native turn t1 on thr_1."""
    turn_id = _reserved(workspace, CODEX_APP_SERVER, conn)
    inv = sessions.invocation(conn, turn_id, 1)
    turn = turns.get(conn, turn_id)
    assert inv is not None and turn is not None
    sessions.update_invocation(conn, inv, dispatch=sessions.policy.Dispatch.ACCEPTED,
                               native_turn_id="t1")  # fmt: skip
    evidence = json.dumps({"backend": CODEX_APP_SERVER, "thread_id": "thr_1",
                           "native_turn_id": "t1"})  # fmt: skip
    now = time.time()
    turns.update(
        conn, turn, state=TurnState.RUNNING, native_session="thr_1", evidence=evidence,
        evidence_status="bound", hard_deadline_at=now + 600, last_activity_at=now,
    )  # fmt: skip
    return turn_id


async def test_a_crash_between_reservation_and_write_leaves_the_answer_uncertain(
    tmp_path: Path,
) -> None:
    db = tmp_path / "akk.sqlite3"
    request = rpc.ServerRequest(
        7, APPROVAL, {"threadId": "thr_1", "turnId": "t1", "itemId": "i1", "command": "ls"}
    )
    board = BackendBoard(generation=1, alive=True)
    board.turns["t1"] = NativeTurn("thr_1", "t1")
    board.requests[request.id] = request
    app, wakes = _App(), _Wakes()
    try:
        with trio.fail_after(20):
            async with _store(db) as root, trio.open_nursery() as nursery:
                store = root.ref("store")
                reader = StoreReader(db)
                turn_id = await transact(store, lambda conn: _running(tmp_path, conn))
                turn = await reader.run(lambda conn: turns.get(conn, turn_id))
                assert isinstance(turn, Turn)
                actor = BackendActor(
                    cast(rpc.AppServer, app), setup=SETUP, board=board, store=store,
                    reader=reader.run,
                )  # fmt: skip
                ref = ActorRef[BackendMessage]("codex in-test", Rank.BACKEND)
                nursery.start_soon(_serve, Incarnation(ref, actor))
                host = type("Host", (), {"board": board, "ref": ref})()
                hosts = type("Hosts", (), {"running": host, "version": "0.171.0"})()
                ctx = BackendContext(
                    store=store, reader=reader, ids=IDS, desk=cast(Any, None),
                    destinations=cast(Any, wakes), offer_minutes=10.0,
                )  # fmt: skip
                answers = AppServerAnswers(ctx, hosts=cast(Any, hosts))
                shown = await answers.shown(turn, OWNER)
                assert shown is not None and shown["kind"] == "permission"

                async def row() -> interactions.Interaction:
                    found = await reader.run(
                        lambda conn: interactions.get(conn, shown["interaction_id"])
                    )
                    assert isinstance(found, interactions.Interaction)
                    return found

                # The actor dies after the reservation, before the answer is written.
                faults.arm(f"{Point.ANSWER_RESERVED}:raise")
                with pytest.raises(RpcError) as uncertain:
                    await answers.approve(turn, await row(), OWNER, "reject")
                assert uncertain.value.reason is Reason.RESPONSE_UNCERTAIN
                assert "will not be sent again" in uncertain.value.message
                assert app.responded == []
                (step,) = await reader.run(lambda conn: dispatches.of_turn(conn, turn_id))
                assert step.stage is Stage.UNCERTAIN
                kinds = await reader.run(
                    lambda conn: [k for (k,) in conn.execute("SELECT kind FROM notifications")]
                )
                assert kinds == ["approval_required", "response_uncertain"]
                assert OWNER in wakes.woken
                with pytest.raises(RpcError) as replay:
                    await answers.approve(turn, await row(), OWNER, "reject")
                assert replay.value.reason is Reason.CONFLICT
                # A restart finds nothing open: the answer is said uncertain once, never sent.
                assert await reader.run(dispatches.all_open) == []
                assert app.responded == []
                reader.close()
                nursery.cancel_scope.cancel()
    finally:
        faults.disarm()
