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

    async def run(self, query: Callable[[apsw.Connection], T]) -> T:
        """Run ``query`` in one read transaction and return its result."""
        async with self._lock:
            if self._conn is None:
                self._conn = await trio.to_thread.run_sync(open_reader, self._path)
            return await trio.to_thread.run_sync(_snapshot, self._conn, query)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _snapshot(conn: apsw.Connection, query: Callable[[apsw.Connection], T]) -> T:
    with conn:
        result = query(conn)
    return result
