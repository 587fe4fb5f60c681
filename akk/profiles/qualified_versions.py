"""The qualified versions a running server binds by: the store's rows, kept current.

One ``run`` task polls the store's qualification generation (one row of
``meta``) every POLL_INTERVAL, so a row another process wrote (`akk qualify`
offline, another server's CLI) is picked up without a restart; the operator
methods ``refresh`` at once after their own write. Each change bumps
``generation``, and the watchers waiting in ``changed`` re-bind their panes.
"""

from __future__ import annotations

from collections.abc import Mapping

import apsw
import trio

from akk.profiles.registry import ProfileMatch, Registry
from akk.store import qualifications
from akk.store.qualifications import Entry
from akk.store.reader import StoreReader

POLL_INTERVAL = 0.5
"""Seconds between looks at the store's qualification generation (one indexed read)."""


class QualifiedVersions:
    """The judged qualification rows by (agent, version), and the registry they bind with."""

    def __init__(self, registry: Registry, reader: StoreReader) -> None:
        self.registry = registry
        self._reader = reader
        self._stored: int | None = None  # the store's generation last loaded
        self._entries: Mapping[tuple[str, str], Entry] = {}
        self._lock = trio.Lock()
        self._changed = trio.Event()
        self.generation = 0
        """Counts the changes seen since the server started."""

    def bind(
        self, agent: str, version: str | None, *, binary: str | None, binary_sha256: str | None
    ) -> ProfileMatch:
        """The registry's binding of (agent, version) under the rows loaded now."""
        return self.registry.bind(
            agent, version, binary=binary, binary_sha256=binary_sha256, qualified=self._entries
        )

    async def refresh(self) -> None:
        """Load the rows again if the store's generation moved since the last load."""
        async with self._lock:
            pinned = self.registry.base_agents

            def read(conn: apsw.Connection) -> tuple[int, list[Entry] | None]:
                stored = qualifications.generation(conn)
                if stored == self._stored:
                    return stored, None
                return stored, qualifications.load(conn, pinned)

            stored, entries = await self._reader.run(read)
            if entries is None:
                return
            self._stored = stored
            self._entries = {(e.agent, e.version): e for e in entries}
            self.generation += 1
            self._changed.set()
            self._changed = trio.Event()

    async def changed(self, since: int) -> None:
        """Return once ``generation`` is past ``since``."""
        while self.generation == since:
            await self._changed.wait()

    async def run(self) -> None:
        """Poll the store until cancelled (a supervised plain task)."""
        while True:
            await self.refresh()
            await trio.sleep(POLL_INTERVAL)
