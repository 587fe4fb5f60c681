"""A read-only connection to the store, used off the event loop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import apsw
import trio

from akk.store.database import open_reader

T = TypeVar("T")


class StoreReader:
    """Runs read queries in a worker thread, one at a time, on its own connection.

    Readers never block the writer (WAL), and see only committed data.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: apsw.Connection | None = None
        self._lock = trio.Lock()
        self._watch: apsw.Connection | None = None  # only for `version`, on the Trio thread

    async def run(self, query: Callable[[apsw.Connection], T]) -> T:
        """Run ``query`` in one read transaction and return its result."""
        async with self._lock:
            if self._conn is None:
                self._conn = await trio.to_thread.run_sync(open_reader, self._path)
            return await trio.to_thread.run_sync(_snapshot, self._conn, query)

    async def version(self) -> int:
        """A number that changes whenever any connection commits a write to the store.

        Equal numbers from two calls prove that nothing was committed between
        them (SQLite's ``data_version``, on a connection of its own that never
        writes). Costs a few microseconds, on the calling thread, once open.
        """
        if self._watch is None:
            watch = await trio.to_thread.run_sync(open_reader, self._path)
            if self._watch is None:
                self._watch = watch
            else:
                watch.close()
        row = self._watch.execute("PRAGMA data_version").fetchone()
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        for conn in (self._conn, self._watch):
            if conn is not None:
                conn.close()
        self._conn = self._watch = None


def _snapshot(conn: apsw.Connection, query: Callable[[apsw.Connection], T]) -> T:
    with conn:
        result = query(conn)
    return result
