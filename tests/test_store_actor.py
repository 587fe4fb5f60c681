"""StoreActor: the single writer, under a real supervisor."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import pytest
import trio

from akk.actors.store import StoreActor, transact, transact_reservation
from akk.runtime.actor import ActorCrashed, ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.store.database import CasConflict, StoreUnwritable, cas_update, open_reader
from tests.stalled_store import held_store


def _insert_controller(conn: apsw.Connection, controller_id: str) -> int:
    conn.execute("INSERT INTO controllers VALUES (?, 'n', 0, 0)", (controller_id,))
    return conn.changes()


async def test_transactions_commit_and_failures_roll_back(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            store = root.ref("store")
            assert await transact(store, lambda c: _insert_controller(c, "a")) == 1

            def half_then_conflict(conn: apsw.Connection) -> None:
                _insert_controller(conn, "b")
                cas_update(conn, "watches", "watch_id", "missing", 0, {"state": "x"})

            with pytest.raises(CasConflict):
                await transact(store, half_then_conflict)
            # The actor did not crash, and nothing of the failed transaction stayed.
            assert root.stats.crashes.get("store", 0) == 0
            assert await transact(store, lambda c: _insert_controller(c, "c")) == 1
            nursery.cancel_scope.cancel()
    reader = open_reader(db)
    rows = reader.execute("SELECT controller_id FROM controllers ORDER BY 1").fetchall()
    assert rows == [("a",), ("c",)]


async def test_store_actor_reopens_after_restart(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            store = root.ref("store")
            await transact(store, lambda c: _insert_controller(c, "a"))
            with pytest.raises(ActorCrashed):
                await store.ask("not a transaction", timeout=5)
            # The ref outlives the crash: this waits in the mailbox for the next incarnation.
            count = await transact(
                store, lambda c: c.execute("SELECT count(*) FROM controllers").fetchone()
            )
            assert count == (1,)
            assert (root.stats.crashes["store"], root.stats.restarts["store"]) == (1, 1)
            nursery.cancel_scope.cancel()


def _controllers(db: Path) -> list[tuple[str]]:
    reader = open_reader(db)
    try:
        return reader.execute("SELECT controller_id FROM controllers ORDER BY 1").fetchall()
    finally:
        reader.close()


async def _written_once_released(store: ActorRef, release: threading.Event) -> None:
    """Release the held store; the next write lands after whatever was queued ran."""
    release.set()
    assert await transact(store, lambda c: _insert_controller(c, "next")) == 1


async def test_a_reservation_not_begun_within_its_patience_is_withdrawn_and_never_written(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Its asker hears the store could not take it, and the queued work, once the store
    reaches it, writes nothing: no reservation stands for input that never went."""
    db = tmp_path / "s.db"
    raised: list[Exception] = []

    async def reserve() -> None:
        try:
            await transact_reservation(store, lambda c: _insert_controller(c, "late"))
        except StoreUnwritable as exc:
            raised.append(exc)

    async with held_store(db) as (store, release):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reserve)
            await trio.testing.wait_all_tasks_blocked()  # queued behind the held write
            mock_clock.jump(9.9)
            await trio.testing.wait_all_tasks_blocked()
            assert not raised  # still within its patience
            mock_clock.jump(0.1)
        assert "did not begin this step's reservation within 10 s" in str(raised[0])
        await _written_once_released(store, release)
    assert _controllers(db) == [("next",)]


async def test_a_reservation_whose_asker_was_cancelled_while_it_queued_is_never_written(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Its asker stopped (an actor stopping with the server): the queued work writes nothing."""
    db = tmp_path / "s.db"
    async with held_store(db) as (store, release):
        with trio.CancelScope() as asker:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    transact_reservation, store, lambda c: _insert_controller(c, "gone")
                )
                await trio.testing.wait_all_tasks_blocked()  # queued behind the held write
                asker.cancel()
        await _written_once_released(store, release)
    assert _controllers(db) == [("next",)]


async def test_a_reservation_begun_within_its_patience_is_waited_for_to_its_end(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    db = tmp_path / "s.db"
    begun, release = threading.Event(), threading.Event()
    reply: list[int] = []

    def slow(conn: apsw.Connection) -> int:
        begun.set()
        release.wait()  # a write that began, then stalls past its patience
        return _insert_controller(conn, "slow")

    async def reserve() -> None:
        reply.append(await transact_reservation(root.ref("store"), slow))

    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        async with trio.open_nursery() as reserving:
            reserving.start_soon(reserve)
            await trio.to_thread.run_sync(begun.wait)
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(30)  # long past its patience of 10 s
            await trio.testing.wait_all_tasks_blocked()
            assert not reply
            release.set()
        assert reply == [1]
        nursery.cancel_scope.cancel()
    assert _controllers(db) == [("slow",)]


async def test_a_reservation_s_own_failure_is_raised_as_by_transact(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])

    def conflict(conn: apsw.Connection) -> None:
        cas_update(conn, "watches", "watch_id", "missing", 0, {"state": "x"})

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            with pytest.raises(CasConflict):
                await transact_reservation(root.ref("store"), conflict)
            nursery.cancel_scope.cancel()
