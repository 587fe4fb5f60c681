"""`renew`, `unwatch` and a Watch's own deadline, each racing another, over a real store.

Each case puts the racing write in the window the reviewer found, with no sleep
deciding the order: a renew whose record settles between its read and its
transaction; a TurnActor whose deadline a renew moved after the actor read it;
an unwatch's Close that reaches the actor after a renew revived the Watch; a
revival onto a task another record follows now; an old round's expiry retried
after a revival; a prompt recorded for a Turn closed since it was read.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import apsw
import attrs
import pytest
import trio
import trio.testing

from akk.actors.destination import DestinationDesk, OutboxPolicy
from akk.actors.store import StoreActor, transact
from akk.actors.terminal_board import TerminalBoard
from akk.actors.turn import Close, Tick, TurnActor
from akk.actors.turn_desk import TurnDesk
from akk.actors.turn_follower import CancelResult, TurnControl
from akk.backends.context import BackendContext
from akk.backends.terminal.answers import TerminalAnswers
from akk.methods.callbacks import CallbackCalls
from akk.methods.common import MethodContext
from akk.methods.watches import WatchCalls
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Restart, Supervisor
from akk.screen.fingerprint import IdMinter
from akk.store import outbox, turns
from akk.store.database import open_store
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState
from tests.store_rows import add_ctl_and_t1
from tests.test_redaction import permission, snapshot_with


@attrs.define
class _Stage:
    store: ActorRef
    reader: StoreReader
    nursery: trio.Nursery

    async def read(self, query: Callable[[apsw.Connection], Any]) -> Any:
        return await self.reader.run(query)

    async def write(self, work: Callable[[apsw.Connection], Any]) -> Any:
        return await transact(self.store, work)


@asynccontextmanager
async def _staged(tmp_path: Path) -> AsyncIterator[_Stage]:
    """A real StoreActor and reader over a store with controller ``ctl`` and terminal ``t1``."""
    path = tmp_path / "akk.sqlite3"
    conn = open_store(path)
    add_ctl_and_t1(conn)
    with conn:
        conn.execute(
            "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
            "VALUES ('other', 'other', 0, 0)"
        )
    conn.close()
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(path))])
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            yield _Stage(root.ref("store"), StoreReader(path), nursery)
            nursery.cancel_scope.cancel()


def _watch(owner: str = "ctl", lifetime: float = 600.0) -> Callable[[apsw.Connection], Turn]:
    def insert(conn: apsw.Connection) -> Turn:
        return turns.insert_watch(
            conn, controller_id=owner, terminal_id="t1", evidence_status="unknown",
            evidence=None, evidence_limit="test", inactivity_seconds=600,
            lifetime_seconds=lifetime, now=time.time(),
        )  # fmt: skip

    return insert


class _Witness:
    """The task on ``t1`` still runs."""

    def __init__(self) -> None:
        self.followed: list[str] = []

    async def ended(self, record: Turn) -> None:
        return None

    async def follow(self, record_id: str) -> None:
        self.followed.append(record_id)


def _watch_calls(stage: _Stage, reader: Any = None) -> tuple[WatchCalls, _Witness]:
    witness = _Witness()
    ctx = SimpleNamespace(
        store=stage.store, reader=reader or stage.reader,
        settings=SimpleNamespace(inactivity_minutes=10, lifetime_minutes=10),
        desk=SimpleNamespace(ref=lambda record_id: None),
        destinations=SimpleNamespace(wake=lambda controller_id: None),
        backends=SimpleNamespace(witness=lambda record: witness),
    )  # fmt: skip
    return WatchCalls(cast(MethodContext, ctx)), witness


async def test_renew_never_revives_a_watch_onto_a_task_another_record_follows(
    tmp_path: Path,
) -> None:
    async with _staged(tmp_path) as stage:
        calls, witness = _watch_calls(stage)
        mine = await stage.write(_watch())
        await calls.unwatch("ctl", False, mine.turn_id)
        theirs = await stage.write(_watch("other"))  # the task is free: another watches it

        with pytest.raises(RpcError) as refused:
            await calls.renew("ctl", False, mine.turn_id, 10)
        assert refused.value.reason == Reason.CONFLICT
        assert "nothing changed" in refused.value.message and "list" in refused.value.message

        after = await stage.read(lambda conn: turns.get(conn, mine.turn_id))
        assert (after.unwatched_at is not None, after.round) == (True, mine.round)
        holder = await stage.read(lambda conn: turns.unresolved_on(conn, "t1"))
        assert holder.turn_id == theirs.turn_id
        assert witness.followed == []


class _SettlesAfterFirstRead:
    """A reader whose first answer is already stale: the Watch times out right after it."""

    def __init__(self, stage: _Stage, watch_id: str) -> None:
        self._stage, self._watch_id, self._armed = stage, watch_id, True

    async def run(self, query: Callable[[apsw.Connection], Any]) -> Any:
        result = await self._stage.read(query)
        if self._armed:
            self._armed = False
            watch_id = self._watch_id

            def expire(conn: apsw.Connection) -> Turn:
                fresh = turns.get(conn, watch_id)
                assert fresh is not None
                return turns.settle(
                    conn, fresh, TurnState.TIMED_OUT, now=time.time(), reason="timed_out",
                    summary="deadline",
                )  # fmt: skip

            await self._stage.write(expire)
        return result


async def test_a_renew_that_loses_to_the_deadline_revives_and_never_extends_a_settled_record(
    tmp_path: Path,
) -> None:
    async with _staged(tmp_path) as stage:
        watch = await stage.write(_watch())
        calls, witness = _watch_calls(stage, _SettlesAfterFirstRead(stage, watch.turn_id))
        renewed = await calls.renew("ctl", False, watch.turn_id, 10)
        stored = await stage.read(lambda conn: turns.get(conn, watch.turn_id))
        # Not "renewed" with its deadline written onto the timed_out record: revived instead.
        assert (renewed["renewed"], renewed["state"], renewed["round"]) == (True, "running", 2)
        assert (stored.state, stored.round) == (TurnState.RUNNING, 2)
        assert witness.followed == [watch.turn_id]


class _Idle:
    """A `TurnFollower` with nothing to look at: only the actor's deadlines decide."""

    def attach(self, control: TurnControl) -> None:
        """Nothing to keep."""

    def read(self, conn: apsw.Connection, turn: Turn) -> None:
        """Nothing beside the Turn."""

    def started(self, turn: Turn) -> None:
        """Nothing to set up."""

    def reloaded(self, reconcile: bool) -> None:
        """Nothing to read again."""

    async def look(self, now: float) -> bool:
        return True

    async def before_deadline(self) -> None:
        """Nothing to interrupt."""

    async def interrupt(self, turn: Turn) -> CancelResult:
        return CancelResult(True)

    def settling(self, conn: apsw.Connection, fresh: Turn, state: TurnState, now: float) -> None:
        """No facts beside the Turn's."""


async def _actor(stage: _Stage, turn_id: str) -> tuple[Supervisor, list[TurnActor]]:
    """A TurnActor on ``turn_id`` under its own supervisor (no clock: the test ticks it)."""
    supervisor = Supervisor("turns")
    await stage.nursery.start(supervisor.run)
    made: list[TurnActor] = []

    def start() -> TurnActor:
        actor = TurnActor(
            turn_id, store=stage.store, reader=stage.reader.run,
            notify=lambda controller_id: None, follower=_Idle(),
        )  # fmt: skip
        made.append(actor)
        return actor

    await supervisor.start_child(ChildSpec(turn_id, start, restart=Restart.TRANSIENT))
    return supervisor, made


async def test_a_deadline_a_renew_moved_after_the_actor_read_it_settles_nothing(
    tmp_path: Path,
) -> None:
    async with _staged(tmp_path) as stage:
        watch = await stage.write(_watch(lifetime=0.2))
        supervisor, made = await _actor(stage, watch.turn_id)
        await trio.sleep(0.3)  # past the deadline the actor holds
        later = time.time() + 600

        def renew(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, watch.turn_id)
            assert fresh is not None
            return turns.update(conn, fresh, hard_deadline_at=later)

        await stage.write(renew)  # a renew whose Reload the actor has not read yet
        await supervisor.ref(watch.turn_id).ask(Tick(), timeout=5)
        stored = await stage.read(lambda conn: turns.get(conn, watch.turn_id))
        assert (stored.state, stored.hard_deadline_at) == (TurnState.RUNNING, later)
        assert await stage.read(lambda conn: outbox.of_turn(conn, watch.turn_id)) == []
        assert watch.turn_id in supervisor.child_keys()
        assert made[-1].turn is not None and made[-1].turn.hard_deadline_at == later


async def test_an_unwatch_close_that_arrives_after_a_revival_leaves_the_watch_followed(
    tmp_path: Path,
) -> None:
    async with _staged(tmp_path) as stage:
        watch = await stage.write(_watch())
        supervisor, made = await _actor(stage, watch.turn_id)

        def unwatch_then_renew(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, watch.turn_id)
            assert fresh is not None
            stopped = turns.update(conn, fresh, unwatched_at=time.time())
            return turns.revive(
                conn, stopped, now=time.time(), deadline=time.time() + 600, ended=None
            )

        revived = await stage.write(unwatch_then_renew)
        # The unwatch's Close, told before the revival, is read only now.
        await supervisor.ref(watch.turn_id).ask(Close(watch.round), timeout=5)
        await trio.testing.wait_all_tasks_blocked()
        assert watch.turn_id in supervisor.child_keys()
        (actor,) = made  # the same actor follows on: it neither stopped nor restarted
        assert actor.turn is not None and actor.turn.round == revived.round == 2


async def test_an_old_rounds_outcome_is_withdrawn_by_a_revival_and_never_retried(
    tmp_path: Path,
) -> None:
    async with _staged(tmp_path) as stage:
        watch = await stage.write(_watch())

        def expire_and_give_up(conn: apsw.Connection) -> outbox.Notification:
            fresh = turns.get(conn, watch.turn_id)
            assert fresh is not None
            turns.settle(
                conn, fresh, TurnState.TIMED_OUT, now=time.time(), reason="timed_out",
                summary="deadline",
            )  # fmt: skip
            (notice,) = outbox.of_turn(conn, watch.turn_id)
            conn.execute(
                "UPDATE notifications SET state = 'retryable_failure', attempts = 8, "
                "revision = revision + 1 WHERE notification_id = ?",
                (notice.notification_id,),
            )
            return notice

        notice = await stage.write(expire_and_give_up)
        calls = CallbackCalls(cast(MethodContext, SimpleNamespace(
            store=stage.store, reader=stage.reader,
            destinations=SimpleNamespace(wake=lambda controller_id: None),
        )))  # fmt: skip

        # A store revived before this fix kept it: a later round supersedes it.
        def next_round(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, watch.turn_id)
            assert fresh is not None
            return turns.update(
                conn, fresh, round=2, state=TurnState.RUNNING, reason=None, settled_at=None
            )

        await stage.write(next_round)
        with pytest.raises(RpcError) as refused:
            await calls.retry("ctl", False, {"watch_id": watch.turn_id})
        assert refused.value.reason == Reason.CONFLICT
        assert "superseded by round 2" in refused.value.message
        kept = await stage.read(lambda conn: outbox.get(conn, notice.notification_id))
        assert (kept.state, kept.retries) == ("retryable_failure", 0)

        # A revival now withdraws it, so there is nothing of round 2 to retry either.
        def expire_and_revive(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, watch.turn_id)
            assert fresh is not None
            conn.execute(
                "UPDATE notifications SET round = 2 WHERE notification_id = ?",
                (notice.notification_id,),
            )
            expired = turns.update(conn, fresh, state=TurnState.TIMED_OUT, settled_at=time.time())
            return turns.revive(
                conn, expired, now=time.time(), deadline=time.time() + 600, ended=None
            )

        revived = await stage.write(expire_and_revive)
        assert revived.round == 3
        withdrawn = await stage.read(lambda conn: outbox.get(conn, notice.notification_id))
        assert withdrawn.state == "withdrawn"


async def test_a_prompt_seen_for_a_turn_closed_since_it_was_read_wakes_no_one(
    tmp_path: Path,
) -> None:
    async with _staged(tmp_path) as stage:

        def send(conn: apsw.Connection) -> Turn:
            turn = turns.insert(
                conn, controller_id="ctl", client_request_id="r1", terminal_id="t1",
                request_sha256="0" * 64, request_chars=5, evidence_status="unknown",
                evidence=None, evidence_limit="test", inactivity_seconds=600,
                lifetime_seconds=600, now=time.time(),
            )  # fmt: skip
            return turns.update(conn, turn, state=TurnState.RUNNING)

        turn = await stage.write(send)
        board = TerminalBoard()
        snapshot = snapshot_with(permission("Run ls?"))
        board.announce(snapshot.identity, None, 0.0)
        board.publish(snapshot)
        destinations = DestinationDesk(
            Supervisor("destinations"), store=stage.store, reader=stage.reader.run,
            sink=lambda controller_id: None, policy=OutboxPolicy(),
        )  # fmt: skip
        desk = TurnDesk(
            Supervisor("turns"), store=stage.store, reader=stage.reader.run, board=board,
            notify=destinations.wake,
        )  # fmt: skip
        ctx = BackendContext(
            store=stage.store, reader=stage.reader, ids=IdMinter(b"k" * 32), desk=desk,
            destinations=destinations, offer_minutes=10.0,
        )  # fmt: skip
        answers = TerminalAnswers(ctx, board=board, accept_seconds=20.0)

        def close(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn.turn_id)
            assert fresh is not None
            return turns.update(conn, fresh, closed_at=time.time())

        await stage.write(close)  # committed after the caller read ``turn``
        assert await answers.shown(turn, "ctl") is None
        notes = await stage.read(lambda conn: outbox.of_turn(conn, turn.turn_id))
        assert [n.kind for n in notes] == []
