"""Pruner: retention in a running `akk serve`, through the one writer.

A pass runs at start, then every ``prune_every`` seconds, and on demand (the
operator's `gc`). It first records gone the terminals whose agent process ended
while no watcher saw it (`terminals.sweep_ended`: a run that died), so their rows
age out too. Each batch of `akk.store.retention.step` is one StoreActor
transaction, so Turns and reservations wait at most one batch; then the freed
pages go back to the file system (a few MiB per transaction) and the
write-ahead log is truncated, so the file size follows the rows. Passes never
overlap. A dry run counts through a reader and never writes.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import apsw
import attrs
import trio

from akk.actors.store import transact
from akk.discovery.process import alive
from akk.runtime.actor import ActorRef
from akk.store import retention, terminals
from akk.store.database import BUSY_TIMEOUT_MS, StoreUnwritable
from akk.store.reader import StoreReader
from akk.store.retention import Plan, Report

log = logging.getLogger("akk.retention")


@attrs.frozen
class RetentionSettings:
    """`akk serve --retain-days DAYS --prune-every SECONDS`."""

    retain_days: float = retention.DEFAULT_DAYS
    """Settled, delivered records older than this many days are pruned (a fraction is fine)."""
    prune_every: float = 3600.0
    """Seconds from one pass to the next; the first runs at start."""


class Pruner:
    """Runs retention passes against the StoreActor's store, one at a time."""

    def __init__(
        self, store: ActorRef[Any], reader: StoreReader, path: Path, settings: RetentionSettings
    ) -> None:
        self._store = store
        self._reader = reader
        self._path = path
        self._settings = settings
        self._lock = trio.Lock()

    async def run(self) -> None:
        """A pass now, then one every ``prune_every`` seconds (runs until cancelled).

        A pass the store refuses (a full disk, a busy log) is logged and tried
        again at the next one; what it deleted before stays deleted.
        """
        while True:
            try:
                await self.prune()
            except (apsw.Error, StoreUnwritable, trio.TooSlowError) as exc:
                log.warning("retention pass stopped (%s: %s); next in %.0f s",
                            type(exc).__name__, exc, self._settings.prune_every)  # fmt: skip
            await trio.sleep(self._settings.prune_every)

    async def prune(self, older_than_days: float | None = None) -> Report:
        """One pass now (after any pass under way); ``older_than_days`` None: the server's."""
        days = self._settings.retain_days if older_than_days is None else older_than_days
        async with self._lock:
            started, before = time.monotonic(), retention.store_bytes(self._path)
            plan = Plan(now=time.time(), retain_days=days)
            await transact(self._store, lambda conn: terminals.sweep_ended(conn, alive, plan.now))
            total, batches = dict.fromkeys(retention.TABLES, 0), 0
            while True:
                done = await transact(self._store, lambda conn: retention.step(conn, plan))
                if not any(done.values()):
                    break
                total = {table: total[table] + done[table] for table in retention.TABLES}
                batches += 1
            if batches:
                while await transact(self._store, retention.reclaim_step):
                    pass
                await transact(self._store, _truncate_log, atomic=False)
            report = Report(False, days, plan.cutoff, total, time.monotonic() - started,
                            before, retention.store_bytes(self._path))  # fmt: skip
            if batches:
                log.info(
                    "retention: pruned %d records older than %g days in %d batches (%.2f s); "
                    "store %d → %d bytes",
                    total["turns"], days, batches, report.seconds, before,
                    report.store_bytes_after,
                )  # fmt: skip
            return report

    async def count(self, older_than_days: float | None = None) -> Report:
        """What `prune` would delete now, per table; writes nothing."""
        days = self._settings.retain_days if older_than_days is None else older_than_days
        started, size = time.monotonic(), retention.store_bytes(self._path)
        plan = Plan(now=time.time(), retain_days=days)
        counts = await self._reader.run(lambda conn: retention.count(conn, plan))
        return Report(True, days, plan.cutoff, counts, time.monotonic() - started, size, size)


CHECKPOINT_BUSY_MS = 100
"""How long the log's truncation waits for readers before it leaves the log for later."""


def _truncate_log(conn: apsw.Connection) -> None:
    """Truncate the log on the write connection, outside a transaction, in turn with the writes.

    Writes queue behind it as behind a batch instead of failing on a lock another
    connection holds; it waits for readers only CHECKPOINT_BUSY_MS, and a log kept
    busy longer stays as long as it is until the next pass.
    """
    conn.set_busy_timeout(CHECKPOINT_BUSY_MS)
    try:
        if not retention.checkpoint(conn):
            log.info("retention: the log was busy; it stays untruncated until the next pass")
    finally:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
