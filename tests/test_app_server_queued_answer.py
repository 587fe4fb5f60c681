"""A queue_next_turn answer whose round provably never reached the app-server.

The answer to an async question its ended turn left starts the Turn's next round: its
step is reserved, then the BackendActor runs turn/start. When turn/start is never
written (`Unsent`: the store could not record it first) or the actor never took the
StartTurn (its mailbox stayed full), nothing reached the agent: the step is recorded
`not_accepted` at once (never left `reserved`, for the next start to call uncertain with
a `response_uncertain` event), the call is refused saying nothing was sent, and the Turn
ends the round not_sent. The methods' side (`AppServerAnswers`) and the store are real;
the BackendActor is a stand-in replying as the test says.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

import apsw
import attrs
import pytest
import trio

from akk import faults
from akk.actors.store import transact
from akk.backends.codex_app_server.actor import (
    BackendActor,
    CodexSetup,
    StartReceipt,
    StartTurn,
    Unsent,
    never_sent,
)
from akk.backends.codex_app_server.answers import AppServerAnswers
from akk.backends.codex_app_server.board import BackendBoard, NativeTurn
from akk.backends.codex_app_server.prompts import AsyncQuestion
from akk.backends.context import BackendContext
from akk.backends.names import CODEX_APP_SERVER
from akk.faults import InjectedFault, Point
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import AskTimeout
from akk.screen.fingerprint import IdMinter
from akk.sessions import policy
from akk.store import dispatches, interactions, sessions, turns
from akk.store.database import open_store
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState
from tests.test_claude_answers import OWNER
from tests.test_full_disk_sessions import _reserved, _store

T = TypeVar("T")

IDS = IdMinter(b"k" * 32)
QUESTION = AsyncQuestion("thr_1", "t1", "item_q", (("Which color?", ("Red", "Blue")),))


@attrs.define
class _Ref:
    """The BackendActor's ref: StartTurn gets ``reply`` (raised if an exception)."""

    reply: object
    asked: list[object] = attrs.field(factory=list)

    async def ask(self, message: object, *, timeout: float) -> object:
        self.asked.append(message)
        if isinstance(self.reply, Exception):
            raise self.reply
        if callable(self.reply):
            return await self.reply(message)
        return self.reply


@attrs.define
class _Desk:
    """The TurnDesk as the answers use it: who was followed, and how."""

    followed: list[tuple[str, bool]] = attrs.field(factory=list)

    async def follow(self, turn_id: str, make: Any) -> None:
        follower = make()
        self.followed.append((turn_id, follower._restarted))


def _settled(workspace: Path, conn: apsw.Connection) -> str:
    """A session Turn whose round 1 ran native turn t1 on thr_1 and ended done."""
    turn_id = _reserved(workspace, CODEX_APP_SERVER, conn)
    now = time.time()
    inv = sessions.invocation(conn, turn_id, 1)
    turn = turns.get(conn, turn_id)
    assert inv is not None and turn is not None
    sessions.update_invocation(conn, inv, dispatch=policy.Dispatch.ACCEPTED, native_turn_id="t1")
    evidence = json.dumps({"backend": CODEX_APP_SERVER, "thread_id": "thr_1",
                           "native_turn_id": "t1"})  # fmt: skip
    turn = turns.update(
        conn, turn, state=TurnState.RUNNING, native_session="thr_1", evidence=evidence,
        evidence_status="bound", hard_deadline_at=now + 600, last_activity_at=now,
    )  # fmt: skip
    turns.settle(conn, turn, TurnState.DONE, now=now, summary="done")
    sessions.settle_invocation(conn, turn_id, 1, TurnState.DONE, now, cleanup=True)
    return turn_id


async def _answer(tmp_path: Path, reply: object) -> tuple[RpcError, str, StoreReader, _Ref, _Desk]:
    """The owner answers the ended turn's async question with queue_next_turn; the actor
    replies ``reply`` to its StartTurn."""
    db = tmp_path / "akk.sqlite3"
    board = BackendBoard(generation=1, alive=True)
    board.turns["t1"] = NativeTurn("thr_1", "t1", status="completed")
    board.questions[QUESTION.item_id] = QUESTION
    board.loaded.add("thr_1")
    ref, desk = _Ref(reply), _Desk()
    host = type("Host", (), {"board": board, "ref": ref})()
    hosts = type("Hosts", (), {"running": host, "version": "0.171.0", "available": True})()
    async with _store(db) as root:
        store = root.ref("store")
        turn_id = await transact(store, lambda conn: _settled(tmp_path, conn))
        reader = StoreReader(db)
        turn = await reader.run(lambda conn: turns.get(conn, turn_id))
        assert isinstance(turn, Turn)
        (prompt,) = board.prompts("t1", turn, IDS)
        assert not prompt.running

        def offered(conn: apsw.Connection) -> interactions.Interaction:
            row, _ = interactions.record(
                conn, interaction_id=prompt.interaction_id, terminal_id=None, turn_id=turn_id,
                kind=prompt.kind.value, seen=prompt.seen, profile="codex-app-server",
                step_index=1, step_total=1, projection=prompt.projection, now=time.time(),
            )  # fmt: skip
            interactions.offer(conn, row, OWNER, now=time.time(), lifetime=600)
            found = interactions.get(conn, row.interaction_id)
            assert found is not None
            return found

        row = await transact(store, offered)
        ctx = BackendContext(
            store=store, reader=reader, ids=IDS, desk=cast(Any, desk),
            destinations=cast(Any, type("D", (), {"wake": lambda self, c: None})()),
            offer_minutes=10.0,
        )  # fmt: skip
        answers = AppServerAnswers(ctx, hosts=cast(Any, hosts))
        (question,) = prompt.projection["questions"]
        blue = next(o for o in question["options"] if o["label"] == "Blue")
        params = {
            "delivery_mode": "queue_next_turn",
            "answers": [{"question_id": question["question_id"],
                         "response_kind": "single_select",
                         "selected_option_ids": [blue["option_id"]]}],
        }  # fmt: skip
        with pytest.raises(RpcError) as refused:
            await answers.respond(turn, row, OWNER, params)
    return refused.value, turn_id, reader, ref, desk


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (Unsent("the store at /x cannot write: disk full, so the task was never sent to the "
                "app-server; free some space"), "disk full"),
        (AskTimeout("the mailbox was full", delivered=False), "too busy to take the answer"),
    ],
)  # fmt: skip
async def test_an_answer_whose_round_was_never_sent_is_not_accepted_at_once(
    tmp_path: Path, reply: object, said: str
) -> None:
    with trio.fail_after(30):
        refused, turn_id, reader, ref, desk = await _answer(tmp_path, reply)
    assert len(ref.asked) == 1, refused.message
    (start,) = ref.asked
    assert isinstance(start, StartTurn) and start.round == 2
    assert refused.reason is Reason.INTERNAL
    assert said in refused.message and "othing was sent" in refused.message
    assert "may" not in refused.message
    (step,) = await reader.run(lambda conn: dispatches.of_turn(conn, turn_id))
    reader.close()
    assert (step.kind, step.stage) == (Kind.ANSWER, Stage.NOT_ACCEPTED)
    assert step.reason is not None and step.reason.startswith("nothing was sent")
    # No StartTurn of it can still run: its follower ends the round not_sent at once.
    assert desk.followed == [(turn_id, True)]


async def test_the_follower_closes_a_step_the_store_could_not_close_then(tmp_path: Path) -> None:
    """On a full disk the answer's step cannot be recorded at once: the follower that ends
    the round not_sent (once the store writes) records it not_accepted in the same
    transaction. Steps already closed, and those of other kinds, are left as they are."""
    db = tmp_path / "akk.sqlite3"
    async with _store(db) as root:
        store = root.ref("store")

        def steps(conn: apsw.Connection) -> list[dispatches.Dispatch]:
            turn_id = _settled(tmp_path, conn)
            reserve = partial(
                dispatches.reserve, conn, controller_id=OWNER, turn_id=turn_id,
                terminal_id=None, typing=None, screen_seq=None, now=1.0,
            )  # fmt: skip
            made = [reserve(kind=kind) for kind in (Kind.ANSWER, Kind.ANSWER, Kind.APPROVAL)]
            dispatches.advance(conn, made[1], Stage.ACCEPTED)
            never_sent(conn, turn_id)
            return [d for step in made if (d := dispatches.get(conn, step.dispatch_id))]

        answer, accepted, approval = await transact(store, steps)
    assert answer.stage is Stage.NOT_ACCEPTED and "never reached" in str(answer.reason)
    assert accepted.stage is Stage.ACCEPTED and approval.stage is Stage.RESERVED


async def test_an_answer_whose_round_the_app_server_refused_is_not_accepted(
    tmp_path: Path,
) -> None:
    """turn/start refused (or thread/start failed): the actor replies a StartReceipt of the
    round `fail_unsent` ended. The answer it carried reached nobody: refused, step
    `not_accepted`, never "dispatched" or `accepted`."""

    async def refuse(message: object) -> StartReceipt:
        assert isinstance(message, StartTurn)
        failed, _ = _in_store(
            tmp_path / "akk.sqlite3",
            lambda conn: sessions.fail_unsent(
                conn, message.turn_id, message.round, reason="turn_start_refused",
                summary="the app-server refused turn/start: no such thread", now=time.time(),
            ),
        )  # fmt: skip
        return StartReceipt(failed, 1)

    with trio.fail_after(30):
        refused, turn_id, reader, _, desk = await _answer(tmp_path, refuse)
    assert refused.reason is Reason.INTERNAL
    assert "turn_start_refused" in refused.message and "othing was sent" in refused.message
    assert "may" not in refused.message and "once the store" not in refused.message
    (step,) = await reader.run(lambda conn: dispatches.of_turn(conn, turn_id))
    turn = await reader.run(lambda conn: turns.get(conn, turn_id))
    reader.close()
    assert (step.kind, step.stage) == (Kind.ANSWER, Stage.NOT_ACCEPTED)
    assert step.reason is not None and step.reason.startswith("nothing was sent")
    assert turn is not None and (turn.state, turn.reason) == (TurnState.FAILED,
                                                              "turn_start_refused")  # fmt: skip
    assert desk.followed == []  # the round already ended: nothing left to follow


async def test_a_refused_start_closes_the_answer_it_carried_with_the_round(
    tmp_path: Path,
) -> None:
    """The BackendActor's own `_not_started` records the round not_sent and its open
    answer step not_accepted in one transaction (no window where the step stays open)."""
    db = tmp_path / "akk.sqlite3"
    async with _store(db) as root:
        store = root.ref("store")

        def reopened(conn: apsw.Connection) -> tuple[str, dispatches.Dispatch]:
            turn_id = _settled(tmp_path, conn)
            step = dispatches.reserve(
                conn, controller_id=OWNER, turn_id=turn_id, terminal_id=None,
                kind=Kind.ANSWER, typing=None, screen_seq=None, now=time.time(),
            )  # fmt: skip
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            again = turns.reopen(
                conn, fresh, request_sha256="0" * 64, request_chars=4,
                evidence_status="pending", evidence=None, evidence_limit=None, now=time.time(),
            )  # fmt: skip
            session = sessions.get(conn, fresh.session_id or "")
            assert session is not None
            sessions.reserve(conn, session, turn_id=turn_id, round=again.round, now=time.time(),
                             thread_intent=sessions.ThreadIntent.LOADED)  # fmt: skip
            return turn_id, step

        turn_id, step = await transact(store, reopened)
        reader = StoreReader(db)
        actor = BackendActor(
            cast(Any, None), setup=CodexSetup("codex", str(tmp_path), "0.171.0"),
            board=BackendBoard(generation=1, alive=True), store=store, reader=reader.run,
        )  # fmt: skip
        invocation = await reader.run(lambda conn: sessions.invocation(conn, turn_id, 2))
        assert invocation is not None
        receipt = await actor._not_started(invocation, "turn_start_refused", "refused")
        closed = await reader.run(lambda conn: dispatches.get(conn, step.dispatch_id))
        reader.close()
    assert receipt.turn.state is TurnState.FAILED
    assert closed is not None and closed.stage is Stage.NOT_ACCEPTED


async def test_a_crash_after_the_queued_answer_is_reserved_leaves_its_round_unsent(
    tmp_path: Path,
) -> None:
    """`backend_answer_queued`: AKK dies after the answer's step and its round committed,
    before the StartTurn is asked. What a restart finds: the step open, the round's
    invocation `not_sent` (proof that nothing reached the app-server)."""

    async def never(message: object) -> object:
        raise AssertionError(f"asked {message!r} after the crash")

    faults.arm(f"{Point.BACKEND_ANSWER_QUEUED}:raise")
    crashed = False
    try:
        with trio.fail_after(30):
            await _answer(tmp_path, never)
    except* InjectedFault:  # out through the store's nursery
        crashed = True
    finally:
        faults.disarm()
    assert crashed
    reader = StoreReader(tmp_path / "akk.sqlite3")

    def found(conn: apsw.Connection) -> tuple[dispatches.Dispatch, sessions.InvocationRow]:
        (step,) = dispatches.all_open(conn)
        invocation = sessions.invocation(conn, step.turn_id or "", 2)
        assert invocation is not None
        return step, invocation

    step, invocation = await reader.run(found)
    reader.close()
    assert (step.kind, step.stage, step.terminal_id) == (Kind.ANSWER, Stage.RESERVED, None)
    assert invocation.dispatch is policy.Dispatch.NOT_SENT


def _in_store(db: Path, work: Callable[[apsw.Connection], T]) -> T:
    """``work`` in one transaction on a connection of its own to the store at ``db`` (as the
    actor a test stands in for, or a restart, would write)."""
    conn = open_store(db)
    try:
        with conn:
            result = work(conn)
    finally:
        conn.close()
    return result


def _events(conn: apsw.Connection, turn_id: str) -> dict[str, list[str]]:
    """The Turn's notifications: each kind's payloads."""
    found: dict[str, list[str]] = {}
    rows = conn.execute("SELECT kind, payload FROM notifications WHERE turn_id = ?", (turn_id,))
    for kind, payload in rows:
        found.setdefault(kind, []).append(payload)
    return found


def _orphaned(conn: apsw.Connection, maybe_sent: bool) -> tuple[Dispatch, dict[str, list[str]]]:
    """What a restart's `turns.orphaned` makes of the one open step (its round's invocation
    first moved to maybe_sent if asked): the step as stored after, and the Turn's events."""
    (step,) = dispatches.all_open(conn)
    turn_id = step.turn_id or ""
    if maybe_sent:
        invocation = sessions.invocation(conn, turn_id, 2)
        assert invocation is not None
        sessions.update_invocation(conn, invocation, dispatch=policy.Dispatch.MAYBE_SENT)
    assert turns.orphaned(conn, step, "interrupted_by_restart", time.time())
    after = dispatches.get(conn, step.dispatch_id)
    assert after is not None
    return after, _events(conn, turn_id)


@pytest.mark.parametrize("maybe_sent", [False, True], ids=["round_not_sent", "round_maybe_sent"])
async def test_a_restart_after_the_queued_answer_was_reserved_says_what_the_round_proves(
    tmp_path: Path, maybe_sent: bool
) -> None:
    """AKK died at `backend_answer_queued`. The restart settles the open step from its round:
    never sent, so `not_accepted` with no event (nothing could have reached the agent); once
    the round may have gone out, `uncertain` with a `response_uncertain` event that points at
    status, not at a terminal this backend does not have."""

    async def never(message: object) -> object:
        raise AssertionError(f"asked {message!r} after the crash")

    faults.arm(f"{Point.BACKEND_ANSWER_QUEUED}:raise")
    try:
        with trio.fail_after(30), pytest.raises(BaseExceptionGroup):
            await _answer(tmp_path, never)
    finally:
        faults.disarm()
    step, events = _in_store(tmp_path / "akk.sqlite3", lambda conn: _orphaned(conn, maybe_sent))
    if maybe_sent:
        (payload,) = events["response_uncertain"]
        assert step.stage is Stage.UNCERTAIN
        assert "call status" in payload and "terminal" not in payload
    else:
        assert step.stage is Stage.NOT_ACCEPTED and "response_uncertain" not in events
        assert step.reason is not None and step.reason.startswith("nothing was sent")


async def test_an_answer_whose_round_start_went_unconfirmed_is_uncertain(tmp_path: Path) -> None:
    """turn/start was written but the app-server never confirmed it (the Turn is uncertain):
    the answer may have reached the agent with it. It is `response_uncertain`, its step
    `uncertain` with its event, never "dispatched" and never `not_accepted`."""

    def unconfirm(conn: apsw.Connection, turn_id: str, round_: int) -> Turn:
        invocation = sessions.invocation(conn, turn_id, round_)
        turn = turns.get(conn, turn_id)
        assert invocation is not None and turn is not None
        sessions.update_invocation(conn, invocation, dispatch=policy.Dispatch.MAYBE_SENT)
        return turns.update(conn, turn, state=TurnState.UNCERTAIN, reason="turn_start_unconfirmed")

    async def unconfirmed(message: object) -> StartReceipt:
        assert isinstance(message, StartTurn)
        db = tmp_path / "akk.sqlite3"
        turn = _in_store(db, lambda conn: unconfirm(conn, message.turn_id, message.round))
        return StartReceipt(turn, 1)

    with trio.fail_after(30):
        refused, turn_id, reader, _, _ = await _answer(tmp_path, unconfirmed)
    assert refused.reason is Reason.RESPONSE_UNCERTAIN
    assert "turn_start_unconfirmed" in refused.message
    (step,) = await reader.run(lambda conn: dispatches.of_turn(conn, turn_id))
    events = await reader.run(lambda conn: _events(conn, turn_id))
    reader.close()
    assert (step.kind, step.stage) == (Kind.ANSWER, Stage.UNCERTAIN)
    assert len(events["response_uncertain"]) == 1
