"""Server requests that await no answer any more stop counting and leave the board.

The app-server resolves a request (`serverRequest/resolved`: answered elsewhere, or
moot), or completes the turn a request belongs to; either way it awaits no answer.
Such requests must not pile up toward `WireLimits.server_requests` (past it the
connection closes and every Turn on it is lost) nor stay on the board as prompts.
The peer is the fake app-server process (tests/fake_app_server.py), made to say
whole lines with `fake/raw`; the host's pump and the BackendActor are the real ones.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import apsw
import attrs
import pytest
import trio
import trio.testing

from akk.actors.store import transact
from akk.backends.codex_app_server import rpc, schema
from akk.backends.codex_app_server.actor import AnswerRequest, BackendActor, CodexSetup, Steer
from akk.backends.codex_app_server.board import BackendBoard, NativeTurn
from akk.backends.codex_app_server.host import BackendHost
from akk.backends.codex_app_server.prompts import AsyncQuestion, async_fingerprint, fingerprint
from akk.backends.contract import Refusal
from akk.protocol.errors import Reason
from akk.runtime.actor import ActorRef
from akk.screen.fingerprint import Appearance
from akk.store import dispatches, interactions, turns
from akk.store.dispatches import Kind, Stage
from akk.store.reader import StoreReader
from tests.test_app_server_rpc import FAKE, QUICK
from tests.test_claude_answers import OWNER
from tests.test_full_disk_sessions import _store

APPROVAL = "item/commandExecution/requestApproval"
SETUP = CodexSetup("codex", "/h", "0.171.0")


@attrs.define
class _Peer:
    """The fake app-server, made to say lines: `say` writes them and waits for their end."""

    server: rpc.AppServer
    next_id: int = 2  # `initialize` was request 1; the test sends all the others
    sent: list[schema.Message] = attrs.field(factory=list)

    async def say(self, *messages: dict[str, Any]) -> None:
        """The peer writes ``messages`` (then the answer to this very `fake/raw`)."""
        request_id, self.next_id = self.next_id, self.next_id + 1
        lines = [*messages, {"id": request_id, "result": {}}]
        text = "".join(json.dumps(m) + "\n" for m in lines)
        assert await self.server.request("fake/raw", {"text": text}, timeout=5) == {}


@asynccontextmanager
async def _peer(tmp_path: Path, limits: rpc.WireLimits = QUICK) -> AsyncIterator[_Peer]:
    script = tmp_path / "codex"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(0o755)
    sent: list[schema.Message] = []

    def tap(message: schema.Message) -> None:
        if message.sender == "client":
            sent.append(message)

    async with rpc.open_app_server(
        script, codex_home=tmp_path / "home", cwd=tmp_path, limits=limits, tap=tap
    ) as server:
        yield _Peer(server, sent=sent)


def _approval(request_id: str, turn_id: str, method: str = APPROVAL) -> dict[str, Any]:
    params = {"threadId": "thr", "turnId": turn_id, "itemId": "i", "startedAtMs": 1,
              "command": "ls"}  # fmt: skip
    return {"id": request_id, "method": method, "params": params}


def _resolved(request_id: str) -> dict[str, Any]:
    return {"method": "serverRequest/resolved",
            "params": {"threadId": "thr", "requestId": request_id}}  # fmt: skip


def _completed(turn_id: str, thread_id: str = "thr") -> dict[str, Any]:
    turn: dict[str, Any] = {"id": turn_id, "status": "interrupted", "items": [], "error": None}
    return {"method": "turn/completed", "params": {"threadId": thread_id, "turn": turn}}


async def _drain(server: rpc.AppServer) -> None:
    """Take what the connection delivered, as the host does (its own pump is tested below)."""
    while True:
        try:
            server.server_requests.receive_nowait()
        except trio.WouldBlock:
            try:
                server.notifications.receive_nowait()
            except trio.WouldBlock:
                return


async def test_resolved_requests_stop_counting_and_cannot_be_answered(tmp_path: Path) -> None:
    """Twice the bound of requests come and are resolved by the app-server: the connection
    stays open, and one resolved is refused as NotAwaited with nothing written."""
    with trio.fail_after(30):
        async with _peer(tmp_path) as peer:
            server = peer.server
            for n in range(2 * QUICK.server_requests):
                await peer.say(_approval(f"srv-{n}", f"t{n}"), _resolved(f"srv-{n}"))
                await _drain(server)
            assert server.closed_reason is None
            assert not server.awaiting("srv-0")
            request = rpc.ServerRequest("srv-0", APPROVAL, _approval("srv-0", "t0")["params"])
            before = len(peer.sent)
            with pytest.raises(rpc.NotAwaited, match="nothing was sent"):
                await server.respond(request, {"decision": "accept"})
            assert len(peer.sent) == before  # no line for it


async def test_a_completed_turn_leaves_its_requests_moot_but_not_others(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with _peer(tmp_path) as peer:
            server = peer.server
            for n in range(2 * QUICK.server_requests):
                await peer.say(_approval(f"srv-{n}", f"t{n}"), _completed(f"t{n}"))
                await _drain(server)
            assert server.closed_reason is None
            # An elicitation keeps its own lifecycle; a same-id turn of another thread, and
            # another turn, leave a request awaiting.
            elicitation = _approval("mcp", "t1", method="mcpServer/elicitation/request")
            await peer.say(
                elicitation, _approval("other", "t2"), _completed("t1"), _completed("t2", "thr_2")
            )
            assert server.awaiting("mcp") and server.awaiting("other")


async def test_the_bound_still_closes_a_connection_of_requests_left_unanswered(
    tmp_path: Path,
) -> None:
    limits = attrs.evolve(QUICK, server_requests=4)
    with trio.fail_after(30):
        async with _peer(tmp_path, limits) as peer:
            for n in range(4):
                await peer.say(_approval(f"srv-{n}", "t"))
            with pytest.raises(rpc.ConnectionClosed, match="over 4 server requests unanswered"):
                await peer.say(_approval("srv-4", "t"))


async def test_the_host_keeps_on_its_board_only_requests_that_await_an_answer(
    tmp_path: Path,
) -> None:
    """The host's real pump: every request resolved or of a completed turn leaves the board,
    in whichever order its two channels are read, and the connection stays open."""
    host = BackendHost(SETUP, store=cast(Any, None), reader=cast(Any, None), cwd=str(tmp_path))
    board = host.board
    with trio.fail_after(60):
        async with _peer(tmp_path) as peer:
            server = peer.server
            async with trio.open_nursery() as nursery:
                nursery.start_soon(host._pump, server)
                for n in range(3 * QUICK.server_requests):
                    settle = _resolved(f"srv-{n}") if n % 2 else _completed(f"t{n}")
                    await peer.say(_approval(f"srv-{n}", f"t{n}"), settle)
                await peer.say(_approval("asked", "t_live"))
                await trio.testing.wait_all_tasks_blocked()
                assert server.closed_reason is None
                assert list(board.requests) == ["asked"]
                await peer.say(_resolved("asked"))
                await trio.testing.wait_all_tasks_blocked()
                assert board.requests == {}
                nursery.cancel_scope.cancel()


async def test_a_request_settled_before_the_host_took_it_never_joins_the_board() -> None:
    """The request and the notice that resolves it travel on two channels: read in the other
    order, the request arrives after its resolution and is dropped."""
    send, receive = trio.open_memory_channel[rpc.ServerRequest](4)
    said, notes = trio.open_memory_channel[rpc.ServerNotification](4)
    said.close()
    awaited: set[rpc.RequestId] = {"kept"}
    app = cast(
        rpc.AppServer,
        SimpleNamespace(server_requests=receive, notifications=notes,
                        awaiting=awaited.__contains__),
    )  # fmt: skip
    host = BackendHost(SETUP, store=cast(Any, None), reader=cast(Any, None), cwd="/")
    for request_id in ("gone", "kept"):
        send.send_nowait(rpc.ServerRequest(request_id, APPROVAL, {}))
    send.close()
    await host._requests(app)
    assert list(host.board.requests) == ["kept"]
    host.board.keep_awaited(lambda request_id: False)
    assert host.board.requests == {}


@attrs.define
class _Resolved:
    """The connection as the BackendActor answers through it, after the app-server resolved
    the request: `respond` refuses before writing anything."""

    tried: int = 0

    async def respond(self, request: rpc.ServerRequest, result: dict[str, Any]) -> None:
        self.tried += 1
        raise rpc.NotAwaited(f"server request {request.id!r} is not awaiting an answer")


async def test_an_answer_to_a_request_resolved_meanwhile_is_refused_not_uncertain(
    tmp_path: Path,
) -> None:
    """Resolved after the board showed it and the answer was reserved: the step is recorded
    not accepted, the caller told prompt_changed (nothing was sent), and the Turn is not
    made uncertain."""
    db = tmp_path / "akk.sqlite3"
    with trio.fail_after(30):
        async with _store(db) as root:
            store = root.ref("store")
            request = rpc.ServerRequest(7, APPROVAL, {"threadId": "thr", "command": "ls"})
            board = BackendBoard(generation=1, alive=True)
            board.requests[request.id] = request
            seen = fingerprint(request, board.generation)
            app = _Resolved()
            actor, answer, turn_id = await answering(
                store, app, board, seen, request_id=request.id, kind=Kind.APPROVAL,
                result={"decision": "accept"},
            )  # fmt: skip
            reply = await actor.receive(answer)
            assert isinstance(reply, Refusal) and reply.reason is Reason.PROMPT_CHANGED
            assert "nothing was sent" in reply.message
            assert app.tried == 1 and board.requests == {}
            reader = StoreReader(db)
            try:
                (step,) = await reader.run(lambda conn: dispatches.of_turn(conn, turn_id))
                turn = await reader.run(lambda conn: turns.get(conn, turn_id))
            finally:
                reader.close()
            assert step.stage is Stage.NOT_ACCEPTED
            assert turn is not None and turn.state.value != "uncertain"


async def answering(
    store: ActorRef, app: object, board: BackendBoard, seen: bytes, **answer: Any
) -> tuple[BackendActor, AnswerRequest, str]:
    """A Turn whose interaction is what ``board`` shows as ``seen``, offered to its owner;
    the BackendActor on ``app`` and ``board``, and the owner's answer to it (``answer``:
    request_id, kind, result and any steer). Returns them with the Turn's id."""
    turn_id, interaction_id, offer_id = await transact(store, _offered(seen))
    actor = BackendActor(
        cast(rpc.AppServer, app), setup=SETUP, board=board, store=store, reader=cast(Any, None)
    )
    request = AnswerRequest(
        turn_id=turn_id, controller_id=OWNER, interaction_id=interaction_id,
        offer_id=offer_id, fingerprint=seen, **answer,
    )  # fmt: skip
    return actor, request, turn_id


def _offered(seen: bytes) -> Any:
    """A Turn, its interaction (the request ``seen``) and the owner's offer of it."""

    def offered(conn: apsw.Connection) -> tuple[str, str, str]:
        now = time.time()
        turn = turns.insert(
            conn, controller_id=OWNER, client_request_id="r1", terminal_id="term_x",
            request_sha256="0" * 64, request_chars=1, evidence_status="unknown",
            evidence=None, evidence_limit=None, inactivity_seconds=600,
            lifetime_seconds=600, now=now,
        )  # fmt: skip
        row, _ = interactions.record(
            conn, interaction_id="int_x", terminal_id=None, turn_id=turn.turn_id,
            kind="permission", seen=Appearance(seen, 1), profile="codex-app-server",
            step_index=1, step_total=1, projection={"interaction_id": "int_x"}, now=now,
        )  # fmt: skip
        offer = interactions.offer(conn, row, OWNER, now=now, lifetime=600)
        return turn.turn_id, row.interaction_id, offer.offer_id

    return offered


@attrs.define
class _TurnOver:
    """The connection after the native turn ended: `turn/steer` is refused, nothing joins."""

    steered: int = 0

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        assert method == "turn/steer"
        self.steered += 1
        raise rpc.ErrorReply(method, -32600, "expectedTurnId does not match the active turn")


async def test_a_steer_into_a_turn_that_ended_is_refused_as_a_conflict(tmp_path: Path) -> None:
    """An async question's steer answer whose native turn ended: `conflict` (wait for the
    outcome, then queue_next_turn), whether the board knew it had ended (nothing written)
    or the app-server said so (written, refused: the step not accepted)."""
    question = AsyncQuestion("thr", "t1", "item_q", (("Which color?", ("Red", "Blue")),))
    db = tmp_path / "akk.sqlite3"
    with trio.fail_after(30):
        async with _store(db) as root:
            store = root.ref("store")
            board = BackendBoard(generation=1, alive=True)
            board.questions[question.item_id] = question
            board.turns["t1"] = NativeTurn("thr", "t1")
            seen = async_fingerprint(question, board.generation)
            app = _TurnOver()
            actor, answer, turn_id = await answering(
                store, app, board, seen, request_id="item_q", kind=Kind.ANSWER, result={},
                steer=Steer("thr", "t1", "item_q", "Blue"),
            )  # fmt: skip
            refused = await actor.receive(answer)  # the app-server says the turn is over
            assert isinstance(refused, Refusal) and refused.reason is Reason.CONFLICT
            assert "queue_next_turn" in refused.message and app.steered == 1
            board.turns["t1"] = NativeTurn("thr", "t1", status="completed")
            fenced = await actor.receive(answer)  # the board knows: nothing is written
            assert isinstance(fenced, Refusal) and fenced.reason is Reason.CONFLICT
            assert "queue_next_turn" in fenced.message and app.steered == 1
            reader = StoreReader(db)
            try:
                (step,) = await reader.run(lambda conn: dispatches.of_turn(conn, turn_id))
            finally:
                reader.close()
            assert step.stage is Stage.NOT_ACCEPTED
