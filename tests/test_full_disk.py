"""A store that cannot write: the StoreActor's failure, its message, and writing again.

The full disk is real: the store lives on a small tmpfs this test mounts
(`tests.small_fs`) and fills with a filler file.
"""

from __future__ import annotations

import errno
import os
from functools import partial
from pathlib import Path

import apsw
import pytest
import trio

from akk.actors.store import StoreActor, transact
from akk.cli.doctor import LOW_SPACE, free_space
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.service import ServiceConfig, _prepare
from akk.store import credentials
from akk.store.database import StoreUnwritable, open_reader, open_store, unwritable
from akk.store.location import StateDir
from tests.small_fs import fill, small_filesystem


def _insert(conn: apsw.Connection, controller_id: str) -> None:
    # A row wide enough to need new pages soon after the disk is full.
    conn.execute("INSERT INTO controllers VALUES (?, ?, 0, 0)", (controller_id, "n" * 3000))


async def test_a_full_disk_fails_the_write_not_the_store_actor_and_writing_resumes(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs") as fs:
        db = fs / "akk.sqlite3"
        root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                await nursery.start(root.run)
                store = root.ref("store")
                await transact(store, lambda conn: _insert(conn, "before"))
                filler = fill(fs)
                with pytest.raises(StoreUnwritable) as failed:
                    for n in range(200):  # the WAL's free pages go first
                        await transact(store, partial(_insert, controller_id=f"full-{n}"))
                message = str(failed.value)
                assert f"the store at {db} cannot write: disk full (SQLITE_FULL" in message
                assert f"free space on the filesystem of {fs}" in message
                assert "no restart" in message
                assert isinstance(failed.value.__cause__, apsw.FullError)
                # Not a crash: the same actor and connection, and reads still work.
                assert root.stats.crashes.get("store", 0) == 0
                reader = open_reader(db)
                try:
                    rows = reader.execute("SELECT count(*) FROM controllers").fetchone()
                finally:
                    reader.close()
                assert rows is not None and rows[0] >= 1
                filler.unlink()
                # Space is back: the very next write commits, with no restart.
                await transact(store, lambda conn: _insert(conn, "after"))
                assert root.stats.crashes.get("store", 0) == 0
                nursery.cancel_scope.cancel()
        reader = open_reader(db)
        try:
            names = {row[0] for row in reader.execute("SELECT controller_id FROM controllers")}
        finally:
            reader.close()
        assert {"before", "after"} <= names


def _error(kind: type[apsw.Error], extended: int) -> apsw.Error:
    error = kind("simulated")
    error.extendedresult = extended  # type: ignore[attr-defined]
    error.result = extended & 0xFF  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("error", "system_errno", "cause", "step"),
    [
        (_error(apsw.FullError, apsw.SQLITE_FULL), errno.ENOSPC,
         "disk full (SQLITE_FULL)", "free space on the filesystem of /state"),
        (_error(apsw.IOError, apsw.SQLITE_IOERR_WRITE), errno.EDQUOT,
         "disk quota exceeded (SQLITE_IOERR_WRITE, EDQUOT)", "free this user's quota"),
        (_error(apsw.IOError, apsw.SQLITE_IOERR_FSYNC), errno.EIO,
         "I/O error (SQLITE_IOERR_FSYNC, EIO)", "check the device holding /state"),
        (_error(apsw.IOError, apsw.SQLITE_IOERR_WRITE), errno.EROFS,
         "read-only (SQLITE_IOERR_WRITE, EROFS)", "make /state and akk.sqlite3 writable"),
        (_error(apsw.ReadOnlyError, apsw.SQLITE_READONLY), 0,
         "read-only (SQLITE_READONLY)", "make /state and akk.sqlite3 writable"),
        (_error(apsw.BusyError, apsw.SQLITE_BUSY), 0,
         "locked past its busy timeout (SQLITE_BUSY)", "check that no other program holds"),
    ],
)  # fmt: skip
def test_each_cause_is_named_with_its_next_step(
    error: apsw.Error, system_errno: int, cause: str, step: str
) -> None:
    failed = unwritable(Path("/state/akk.sqlite3"), error, system_errno)
    assert failed is not None
    assert failed.problem == f"the store at /state/akk.sqlite3 cannot write: {cause}"
    assert failed.next_step.startswith(step)


def test_other_errors_are_not_a_store_that_cannot_write() -> None:
    assert unwritable(Path("/s/akk.sqlite3"), apsw.ConstraintError("unique"), 0) is None


def test_doctor_warns_of_low_free_space_where_the_state_directory_lives(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs") as fs:
        state = StateDir(fs / "akk")  # not created yet: the filesystem it would be made on
        check = free_space(state)
        assert check.ok and check.warning
        assert check.detail.startswith("low: 4.0 MiB of 4.0 MiB free on the filesystem of ")
        assert "free space there" in check.next_step
        fill(fs)
        assert free_space(state).detail.startswith("low: 0.0 MiB of 4.0 MiB free")


def test_doctor_shows_free_space_without_a_warning_above_the_floor(tmp_path: Path) -> None:
    check = free_space(StateDir(tmp_path / "akk"))
    assert check.ok and not check.warning and not check.next_step
    free = float(check.detail.split(" MiB of ")[0])
    assert free * 1024 * 1024 >= LOW_SPACE  # this machine's test directory has room


def test_a_start_on_a_full_disk_serves_what_is_recorded(tmp_path: Path) -> None:
    """`akk serve` on a nearly full disk starts (reads work; each write waits for space),
    even when its first start on an older store would rewrite it once (the VACUUM that makes
    deletes return space, which needs room for a copy): that step waits for a start with
    room. (With no page left at all, SQLite cannot even map its log's index, and the open
    fails with its reason.)"""
    with small_filesystem(tmp_path / "fs", size="16m") as fs:
        state = StateDir(fs / "akk")
        state.ensure()
        state.token(), state.id_secret()  # as a server that ran before left them
        conn = open_store(state.store_path)
        with conn:
            minted = credentials.create(conn, "ctl", 0.0, actor="test")
            for n in range(300):  # about a megabyte: its copy does not fit in what is left
                _insert(conn, f"old {n}")
        conn.execute("PRAGMA auto_vacuum = NONE")  # a store from before incremental vacuum
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        filler = fill(fs)
        os.truncate(filler, filler.stat().st_size - (256 << 10))
        try:
            prepared = _prepare(ServiceConfig(state=state, port=0, tmux_sockets=()))
            prepared.lock.release()
        finally:
            filler.unlink()
    assert [c.controller_id for c in prepared.credentials.values()] == [minted.controller_id]
