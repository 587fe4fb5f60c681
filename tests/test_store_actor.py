"""StoreActor: the single writer, under a real supervisor."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
import trio

from akk.actors.store import StoreActor, transact
from akk.runtime.actor import ActorCrashed
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.store.database import CasConflict, cas_update, open_reader


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
