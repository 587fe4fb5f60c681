"""Answers to AKK's own requests of the wrong shape: the app-server misbehaving, never a
crash of the BackendActor (which ends the process and every Turn on it, and, since the
next look asks again, again: the crash loop that escalates the backends supervisor).

Each step fails clearly and is recorded as what may have happened: a thread/start of the
wrong shape ends the round unsent (turn/start was never written); a turn/start of the
wrong shape may have started the turn, so the Turn is `uncertain` and reconciles from the
thread; a thread/read of the wrong shape tells nothing, so the Turn that needed it ends
failed `uncertain` with its cleanup unconfirmed; a config/read of the wrong shape refuses
the send. The actor is the real one behind its ref, its store real; the connection is a
stand-in answering each request as the test says.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import apsw
import attrs
import pytest
import trio
from hypothesis import given

from akk.actors.store import transact
from akk.actors.turn import Tick, TurnActor
from akk.backends.codex_app_server import results, rpc
from akk.backends.codex_app_server.actor import (
    BackendActor,
    BackendMessage,
    ReadBinding,
    ReadThread,
    StartReceipt,
    StartTurn,
)
from akk.backends.codex_app_server.board import BackendBoard
from akk.backends.codex_app_server.follow import AppServerFollower
from akk.backends.contract import Refusal
from akk.backends.names import CODEX_APP_SERVER
from akk.runtime.actor import ActorRef, Incarnation, Rank
from akk.screen.fingerprint import IdMinter
from akk.sessions import policy
from akk.store import outbox, sessions, turns
from akk.store.reader import StoreReader
from akk.store.turns import TurnState
from tests.test_app_server_board import JSON
from tests.test_app_server_requests import SETUP
from tests.test_full_disk_sessions import _reserved, _store

THREAD_READ: dict[str, Any] = {
    "thread": {
        "id": "thr_1",
        "status": {"type": "idle"},
        "turns": [
            {"id": "t1", "status": "completed", "error": None, "items": [
                {"type": "userMessage", "content": [{"type": "text", "text": "task"}]},
                {"type": "agentMessage", "text": "done"},
            ]},
            {"id": "t2", "status": "failed", "error": {"message": "boom"}, "items": []},
        ],
    }
}  # fmt: skip
"""A thread/read result of the pinned shape (the fields AKK reads)."""


def test_a_result_of_the_pinned_shape_is_read() -> None:
    facts = results.thread_facts(THREAD_READ)
    assert (facts.found, facts.status) == (True, "idle")
    done, failed = facts.turns
    assert (done.turn_id, done.status, done.final_message) == ("t1", "completed", "done")
    assert done.request_sha256 is not None and failed.error == "boom"
    assert results.thread_id_of({"thread": {"id": "thr_9"}}) == "thr_9"
    assert results.turn_id_of({"turn": {"id": "t9", "status": "inProgress"}}) == "t9"
    assert results.config_of({"config": {"model": "m"}, "origins": {}}) == {"model": "m"}
    assert results.config_of({"config": None}) == {}


def _changed(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(THREAD_READ)
    node: Any = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return changed


@pytest.mark.parametrize(
    ("read", "why"),
    [
        (lambda: results.thread_facts([]), "the result is no object"),
        (lambda: results.thread_facts({"thread": "thr_1"}), "thread is no object"),
        (lambda: results.thread_facts(_changed(("thread", "status"), "idle")),
         "thread.status is no object"),
        (lambda: results.thread_facts(_changed(("thread", "status", "type"), 3)),
         "thread.status.type is no text"),
        (lambda: results.thread_facts(_changed(("thread", "turns"), {})),
         "thread.turns is no array"),
        (lambda: results.thread_facts(_changed(("thread", "turns", 0), "t1")),
         "thread.turns[] is no object"),
        (lambda: results.thread_facts(_changed(("thread", "turns", 0, "status"), None)),
         "thread.turns[].status is no text"),
        (lambda: results.thread_facts(_changed(("thread", "turns", 1, "error"), "boom")),
         "thread.turns[].error is no object"),
        (lambda: results.thread_facts(_changed(("thread", "turns", 1, "error", "message"), 5)),
         "thread.turns[].error.message is no text"),
        (lambda: results.turn_id_of({"turn": {"status": "inProgress"}}), "turn.id is no text"),
        (lambda: results.turn_id_of({"turn": {"id": 7}}), "turn.id is no text"),
        (lambda: results.thread_id_of({}), "thread is no object"),
        (lambda: results.config_of({"config": []}), "config is no object"),
    ],
)  # fmt: skip
def test_a_result_of_the_wrong_shape_names_the_field_never_its_content(
    read: Callable[[], Any], why: str
) -> None:
    with pytest.raises(results.WrongShape) as wrong:
        read()
    assert wrong.value.why == why
    assert "boom" not in str(wrong.value) and "thr_1" not in str(wrong.value)


@given(JSON)
def test_any_result_is_read_or_is_of_the_wrong_shape(result: Any) -> None:
    for read in (results.thread_facts, results.thread_id_of, results.turn_id_of,
                 results.config_of):  # fmt: skip
        with contextlib.suppress(results.WrongShape):
            read(result)


async def _summary(reader: StoreReader, turn_id: str) -> str:
    """The summary of the Turn's newest event (its outcome's)."""
    events = await reader.run(lambda conn: outbox.of_turn(conn, turn_id))
    return str(events[-1].event()["summary"])


@attrs.define
class _Answers:
    """The connection as the BackendActor uses it: each request answered from ``results``."""

    results: dict[str, Any]
    asked: list[str] = attrs.field(factory=list)

    async def request(self, method: str, params: Any = None, *, timeout: float) -> Any:
        self.asked.append(method)
        return self.results[method]

    def start_ticks(self) -> int | None:
        return None

    pid = 4242


async def _ask(
    tmp_path: Path,
    answers: _Answers,
    message: Callable[[str], BackendMessage],
    *,
    thread: bool = True,
) -> tuple[object, str, StoreReader]:
    """``message`` (made from the reserved Turn's id) asked of the real BackendActor, run in
    its incarnation: the reply, the Turn's id and a reader of its store (to be closed)."""
    db = tmp_path / "akk.sqlite3"
    async with _store(db) as root:
        store = root.ref("store")

        def reserved(conn: apsw.Connection) -> str:
            turn_id = _reserved(tmp_path, CODEX_APP_SERVER, conn)
            if not thread:
                inv = sessions.invocation(conn, turn_id, 1)
                assert inv is not None
                session = sessions.get(conn, inv.session_id)
                assert session is not None
                sessions.update(conn, session, thread_id=None)
            return turn_id

        turn_id = await transact(store, reserved)
        board = BackendBoard(generation=1, alive=True)
        board.loaded.add("thr_1")
        reader = StoreReader(db)
        actor = BackendActor(
            cast(rpc.AppServer, answers), setup=SETUP, board=board, store=store,
            reader=reader.run,
        )  # fmt: skip
        ref = ActorRef[BackendMessage]("backend", Rank.BACKEND, mailbox_size=4)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Incarnation(ref, actor).run)
            reply = await ref.ask(message(turn_id), timeout=10)
            # The actor is still up: it answers the next message too.
            after = await ref.ask(ReadBinding("/w"), timeout=10)
            assert isinstance(after, Refusal | policy.ThreadConfig)
            nursery.cancel_scope.cancel()
        assert root.stats.crashes.get("store", 0) == 0
    return reply, turn_id, reader


async def test_a_turn_start_of_the_wrong_shape_is_uncertain_not_a_crash(tmp_path: Path) -> None:
    answers = _Answers({"turn/start": {"turn": {"status": "inProgress"}}, "config/read": {}})
    with trio.fail_after(30):
        reply, turn_id, reader = await _ask(tmp_path, answers, lambda t: StartTurn(t, 1, "task"))
    assert isinstance(reply, StartReceipt)
    assert (reply.turn.state, reply.turn.reason) == (TurnState.UNCERTAIN, "dispatch_unconfirmed")
    inv = await reader.run(lambda conn: sessions.invocation(conn, turn_id, 1))
    reader.close()
    assert inv is not None and inv.dispatch is policy.Dispatch.MAYBE_SENT  # reconciled, not resent
    assert answers.asked.count("turn/start") == 1


async def test_a_thread_start_of_the_wrong_shape_ends_the_round_unsent(tmp_path: Path) -> None:
    answers = _Answers({"thread/start": {"thread": {"id": 5}}, "config/read": {}})
    with trio.fail_after(30):
        reply, turn_id, reader = await _ask(
            tmp_path, answers, lambda t: StartTurn(t, 1, "task"), thread=False
        )
    assert isinstance(reply, StartReceipt)
    assert (reply.turn.state, reply.turn.reason) == (TurnState.FAILED, "thread_start_failed")
    summary = await _summary(reader, turn_id)
    assert "thread.id is no text" in summary and "never sent" in summary
    inv = await reader.run(lambda conn: sessions.invocation(conn, turn_id, 1))
    reader.close()
    assert inv is not None and inv.dispatch is policy.Dispatch.NOT_SENT
    assert "turn/start" not in answers.asked


@pytest.mark.parametrize(
    "answer", [{"thread": {"status": "idle", "turns": []}}, {"thread": {"turns": [{"id": 1}]}}]
)
async def test_a_thread_read_of_the_wrong_shape_is_unreadable_not_a_crash(
    tmp_path: Path, answer: dict[str, Any]
) -> None:
    answers = _Answers({"thread/read": answer, "config/read": {"config": "x"}})
    with trio.fail_after(30):
        reply, _, reader = await _ask(tmp_path, answers, lambda t: ReadThread("thr_1"))
    reader.close()
    assert isinstance(reply, results.Unreadable)


async def test_a_config_read_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    answers = _Answers({"config/read": {"config": ["model"]}})
    with trio.fail_after(30):
        reply, _, reader = await _ask(tmp_path, answers, lambda t: ReadBinding("/w"))
    reader.close()
    assert isinstance(reply, Refusal) and "config is no object" in reply.message


@attrs.define
class _Host:
    """The running host as a follower reads it: its board, and a ref answering ReadThread."""

    board: BackendBoard
    read: object

    @property
    def ref(self) -> Any:
        read = self.read

        class _Ref:
            async def ask(self, message: object, *, timeout: float) -> object:
                assert isinstance(message, ReadThread)
                return read

        return _Ref()


@attrs.define
class _Desk:
    """The desk as a follower reads it: its one running host."""

    running: _Host
    available: bool = True
    version: str = "0.171.0"

    async def host(self) -> _Host:
        return self.running


async def test_a_turn_whose_thread_cannot_be_read_ends_uncertain_once(tmp_path: Path) -> None:
    """The Turn's turn/start may have gone out (maybe_sent): it reads its thread, gets a result
    of the wrong shape, and ends failed `uncertain` (outcome uncertain, cleanup unconfirmed),
    instead of reading again on every look."""
    db = tmp_path / "akk.sqlite3"
    board = BackendBoard(generation=1, alive=True)
    host = _Host(board, results.Unreadable("thread.status is no object"))
    desk = cast(Any, _Desk(host))
    with trio.fail_after(30):
        async with _store(db) as root:
            store = root.ref("store")

            def maybe_sent(conn: apsw.Connection) -> str:
                turn_id = _reserved(tmp_path, CODEX_APP_SERVER, conn)
                inv = sessions.invocation(conn, turn_id, 1)
                turn = turns.get(conn, turn_id)
                assert inv is not None and turn is not None
                sessions.update_invocation(conn, inv, dispatch=policy.Dispatch.MAYBE_SENT)
                now = time.time()  # `_reserved`'s Turn was made long ago: not timed out yet
                turns.update(conn, turn, hard_deadline_at=now + 600, last_activity_at=now)
                return turn_id

            turn_id = await transact(store, maybe_sent)
            reader = StoreReader(db)
            follower = AppServerFollower(
                turn_id, store=store, reader=reader.run, backends=desk, ids=IdMinter(b"k" * 32),
                generation=1, restarted=False,
            )  # fmt: skip
            actor = TurnActor(
                turn_id, store=store, reader=reader.run, notify=lambda c: None, follower=follower
            )
            ref = ActorRef[Any]("turn", Rank.TURN, mailbox_size=4)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(Incarnation(ref, actor).run)
                await ref.ask(Tick(), timeout=10)
                nursery.cancel_scope.cancel()
            turn = await reader.run(lambda conn: turns.get(conn, turn_id))
            inv = await reader.run(lambda conn: sessions.invocation(conn, turn_id, 1))
            summary = await _summary(reader, turn_id)
            reader.close()
    assert turn is not None and (turn.state, turn.reason) == (TurnState.FAILED, "uncertain")
    assert "thread.status is no object" in summary
    assert inv is not None and inv.outcome == "uncertain" and inv.cleanup != "confirmed"
