"""Retention: which settled records are old enough to delete, and deleting them (repository).

A record (a Turn or a Watch, both rows of ``turns``) may go once it ended: it
settled (``done``, ``failed``, ``cancelled``, ``stalled``, ``timed_out``), or it
is a Watch its owner unwatched before its task settled, or a Turn its owner
closed before it settled (nothing follows it any more). It and its notifications
have not changed since the cutoff, and nothing of it is still owed or unproven:

- no notification is ``pending`` or ``delivering`` (each was acked, withdrawn,
  or abandoned as ``retryable_failure``);
- no dispatch is open or ``uncertain``, no invocation ``pending`` or ``uncertain``;
- it did not run in a session that is still its owner's current one (the
  session policy counts and reads that thread's invocations).

It goes with its notifications, dispatches, offers, interactions, invocations
and audit rows, and leaves one compact ``prune`` audit line and a tombstone
(id → outcome, settled and pruned dates; an unwatched Watch's outcome is
``unwatched``, its date the unwatch; a Turn closed unsettled has ``closed``, its
date the close) that `lookup` answers by. A retired
session goes once nothing refers to it and it retired before the cutoff, a
terminal once nothing refers to it and it was gone before the cutoff. Audit
rows older than the cutoff go unless they belong to a record still kept; prune
lines and tombstones go ``tombstone_days`` after the pruning.

Every function runs in a transaction the caller holds, except the two that
reclaim space (`use_incremental_vacuum`, `checkpoint`). `step` does one bounded
batch: at most ``batch`` records (with their rows), or ``batch`` rows of the
other tables, so a pass never holds the writer long. `count` answers what a
pass at the same instant would delete, table by table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import apsw
import attrs

from akk.store import audit
from akk.store.dispatches import Stage
from akk.store.retention_days import DEFAULT_DAYS as DEFAULT_DAYS
from akk.store.turns import TurnState

DAY = 86_400.0
TOMBSTONE_DAYS = 365.0
"""How long a tombstone and its prune line outlive the record."""
BATCH = 50
"""Records (or rows of the other tables) one transaction deletes at most."""
VACUUM_PAGES = 2048
"""Free pages one reclaiming transaction returns to the file system (8 MiB of 4 KiB pages)."""

TABLES = (
    "turns", "notifications", "dispatches", "offers", "interactions", "invocations",
    "responds", "sessions", "terminals", "audit", "tombstones",
)  # fmt: skip
"""Every table a pass deletes from; a count has each of them."""

Counts = dict[str, int]


@attrs.frozen
class Plan:
    """One pass: what is old at ``now`` under ``retain_days``."""

    now: float
    retain_days: float
    batch: int = BATCH
    tombstone_days: float = TOMBSTONE_DAYS

    @property
    def cutoff(self) -> float:
        """Settled and quiet before this: old enough to go."""
        return self.now - self.retain_days * DAY

    @property
    def horizon(self) -> float:
        """Pruned before this: the tombstone and the prune line go too."""
        return self.now - self.tombstone_days * DAY

    @property
    def args(self) -> dict[str, Any]:
        return {"cutoff": self.cutoff, "horizon": self.horizon, "batch": self.batch}


@attrs.frozen
class Report:
    """One pass, or what it would delete (``dry_run``): rows per table, time, store size."""

    dry_run: bool
    retain_days: float
    cutoff: float
    counts: Counts
    seconds: float
    store_bytes_before: int
    store_bytes_after: int

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Tombstone:
    """What is left of a pruned record: enough to say what became of it and when."""

    record_id: str
    controller_id: str
    task_kind: str
    outcome: str
    """Its state when pruned, `UNWATCHED` for a Watch stopped before its task settled, or
    `CLOSED` for a Turn closed before it settled."""
    settled_at: float
    """When it settled (an unwatched Watch: when it was unwatched; a closed Turn: when it
    was closed)."""
    pruned_at: float


def _listed(values: Any) -> str:
    return ", ".join(f"'{value}'" for value in values)


_SETTLED = _listed(state.value for state in TurnState if state.settled)
_UNSETTLED_STAGES = _listed(
    stage.value for stage in Stage if stage.open or stage is Stage.UNCERTAIN
)

UNWATCHED = "unwatched"
"""The outcome a tombstone gives a Watch its owner unwatched before its task settled."""

CLOSED = "closed"
"""The outcome a tombstone gives a Turn its owner closed before it settled."""

_ENDED_AT = "coalesce(t.settled_at, t.unwatched_at, t.closed_at)"
"""When a prunable record ended: it settled, or else it was unwatched or closed."""

_PRUNABLE = f"""
SELECT t.turn_id FROM turns t
WHERE t.updated_at < :cutoff
  AND ((t.settled_at < :cutoff AND t.state IN ({_SETTLED}))
       OR (t.unwatched_at < :cutoff AND t.task_kind = 'watch'
           AND t.state <> '{TurnState.UNCERTAIN.value}')
       OR (t.closed_at < :cutoff AND t.settled_at IS NULL
           AND t.state <> '{TurnState.UNCERTAIN.value}'))
  AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.turn_id = t.turn_id
                  AND (n.state IN ('pending', 'delivering') OR n.updated_at >= :cutoff))
  AND NOT EXISTS (SELECT 1 FROM dispatches d WHERE d.turn_id = t.turn_id
                  AND d.stage IN ({_UNSETTLED_STAGES}))
  AND NOT EXISTS (SELECT 1 FROM invocations i WHERE i.turn_id = t.turn_id
                  AND i.outcome IN ('pending', 'uncertain'))
  AND NOT EXISTS (SELECT 1 FROM invocations i JOIN sessions s ON s.session_id = i.session_id
                  WHERE i.turn_id = t.turn_id AND s.retired_at IS NULL)
  AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = t.session_id
                  AND s.retired_at IS NULL)
"""
"""The records a pass may delete (``:cutoff``), as a query of their ids."""

_OF_RECORDS: Mapping[str, str] = {
    "notifications": "turn_id IN records",
    "dispatches": "turn_id IN records",
    "offers": "interaction_id IN "
    "(SELECT interaction_id FROM interactions WHERE turn_id IN records)",
    "interactions": "turn_id IN records",
    "invocations": "turn_id IN records",
    "responds": "turn_id IN records",
    "audit": "turn_id IN records",
    "turns": "turn_id IN records",
}
"""Each table's rows of the ``records`` being deleted, in an order the references allow."""

_RETIRED = """
SELECT s.session_id FROM sessions s
WHERE s.retired_at < :cutoff
  AND NOT EXISTS (SELECT 1 FROM invocations i WHERE i.session_id = s.session_id
                  AND i.turn_id NOT IN records)
  AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.session_id
                  AND t.turn_id NOT IN records)
"""
"""Retired sessions nothing will refer to once ``records`` are gone."""

_GONE = """
SELECT x.terminal_id FROM terminals x
WHERE x.gone_at < :cutoff
  AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.terminal_id = x.terminal_id
                  AND t.turn_id NOT IN records)
  AND NOT EXISTS (SELECT 1 FROM dispatches d WHERE d.terminal_id = x.terminal_id
                  AND (d.turn_id IS NULL OR d.turn_id NOT IN records))
  AND NOT EXISTS (SELECT 1 FROM interactions i WHERE i.terminal_id = x.terminal_id
                  AND (i.turn_id IS NULL OR i.turn_id NOT IN records))
  AND NOT EXISTS (SELECT 1 FROM watches w WHERE w.terminal_id = x.terminal_id)
"""
"""Gone terminals (pane closed, agent ended) nothing will refer to once ``records`` are
gone: a kept Turn or Watch, step or prompt keeps its terminal's row (`status`, `recover`
and a narrowed credential's check read it by id)."""

_SWEPT: Mapping[str, tuple[str, str]] = {
    "audit": (
        "audit_id",
        "(at < :cutoff AND action <> 'prune' AND (turn_id IS NULL OR NOT EXISTS "
        "(SELECT 1 FROM turns t WHERE t.turn_id = audit.turn_id))) "
        "OR (at < :horizon AND action = 'prune')",
    ),
    "tombstones": ("record_id", "pruned_at < :horizon"),
}
"""Tables whose old rows go by age alone: (key, condition)."""


def count(conn: apsw.Connection, plan: Plan) -> Counts:
    """What a pass at ``plan.now`` would delete, per table (a dry run; writes nothing)."""
    records = f"records(turn_id) AS ({_PRUNABLE})"
    counts = {
        table: _scalar(conn, f"WITH {records} SELECT count(*) FROM {table} WHERE {where}", plan)
        for table, where in _OF_RECORDS.items()
    }
    counts["sessions"] = _scalar(conn, f"WITH {records} SELECT count(*) FROM ({_RETIRED})", plan)
    counts["terminals"] = _scalar(conn, f"WITH {records} SELECT count(*) FROM ({_GONE})", plan)
    for table, (_, where) in _SWEPT.items():
        swept = _scalar(conn, f"SELECT count(*) FROM {table} WHERE {where}", plan)
        counts[table] = counts.get(table, 0) + swept
    return {table: counts[table] for table in TABLES}


_NO_RECORDS = "WITH records(turn_id) AS (SELECT NULL WHERE 0)"
"""`_RETIRED` and `_GONE` without prunable records: `step` takes them once none is left."""


def _ids(conn: apsw.Connection, query: str, plan: Plan) -> list[str]:
    """The first column of ``query``'s rows, as strings (a batch of ids to delete)."""
    return [str(row[0]) for row in conn.execute(query, plan.args)]


def step(conn: apsw.Connection, plan: Plan) -> Counts:
    """Delete the next batch; return what it deleted (all zero: the pass is done).

    The first batches take records, then retired sessions, then gone terminals, then
    old audit rows, prune lines and tombstones. The caller holds one transaction per call.
    """
    counts = dict.fromkeys(TABLES, 0)
    records = _ids(conn, f"{_PRUNABLE} ORDER BY {_ENDED_AT} LIMIT :batch", plan)
    if records:
        given = plan.args | {"ids": json.dumps(records)}
        buried = conn.execute(
            "SELECT turn_id, controller_id, client_request_id, task_kind, "
            f"CASE WHEN settled_at IS NOT NULL THEN state WHEN unwatched_at IS NOT NULL "
            f"THEN '{UNWATCHED}' ELSE '{CLOSED}' END, "
            "coalesce(settled_at, unwatched_at, closed_at) "
            "FROM turns WHERE turn_id IN (SELECT value FROM json_each(:ids))",
            given,
        ).fetchall()
        for table, where in _OF_RECORDS.items():
            conn.execute(
                f"WITH records(turn_id) AS (SELECT value FROM json_each(:ids)) "
                f"DELETE FROM {table} WHERE {where}",
                given,
            )
            counts[table] = conn.changes()
        for row in buried:
            _bury(conn, row, plan.now)
        return counts
    retired = _ids(conn, f"{_NO_RECORDS} {_RETIRED} LIMIT :batch", plan)
    if retired:
        doomed = {"ids": json.dumps(retired)}
        # `replaces` only names the predecessor; a compare-and-swap holder of the successor
        # writes other columns, so its revision stays.
        conn.execute(
            "UPDATE sessions SET replaces = NULL "
            "WHERE replaces IN (SELECT value FROM json_each(:ids))",
            doomed,
        )
        conn.execute(
            "DELETE FROM sessions WHERE session_id IN (SELECT value FROM json_each(:ids))", doomed
        )
        counts["sessions"] = conn.changes()
        return counts
    gone = _ids(conn, f"{_NO_RECORDS} {_GONE} LIMIT :batch", plan)
    if gone:
        conn.execute(
            "DELETE FROM terminals WHERE terminal_id IN (SELECT value FROM json_each(:ids))",
            {"ids": json.dumps(gone)},
        )
        counts["terminals"] = conn.changes()
        return counts
    for table, (key, where) in _SWEPT.items():
        conn.execute(
            f"DELETE FROM {table} WHERE {key} IN "
            f"(SELECT {key} FROM {table} WHERE {where} ORDER BY rowid LIMIT :batch)",
            plan.args,
        )
        counts[table] = conn.changes()
        if counts[table]:
            return counts
    return counts


def run(conn: apsw.Connection, plan: Plan) -> Counts:
    """A whole pass on a connection this process owns (no server): one transaction per `step`,
    then the freed pages back to the file system and the log truncated.

    Returns what it deleted, per table.
    """
    total = dict.fromkeys(TABLES, 0)
    while True:
        with conn:
            done = step(conn, plan)
        if not any(done.values()):
            break
        total = {table: total[table] + done[table] for table in TABLES}
    while True:
        with conn:
            if not reclaim_step(conn):
                break
    checkpoint(conn)
    return total


def lookup(conn: apsw.Connection, record_id: str) -> Tombstone | None:
    """The tombstone of the pruned record ``record_id``, if retention deleted it."""
    row = conn.execute(
        "SELECT record_id, controller_id, task_kind, outcome, settled_at, pruned_at "
        "FROM tombstones WHERE record_id = ?",
        (record_id,),
    ).fetchone()
    return None if row is None else Tombstone(*row)


def lookup_request(
    conn: apsw.Connection, controller_id: str, client_request_id: str
) -> Tombstone | None:
    """The tombstone of ``controller_id``'s pruned send with this ``client_request_id``."""
    row = conn.execute(
        "SELECT record_id FROM tombstones WHERE controller_id = ? AND client_request_id = ? "
        "AND task_kind = 'managed_send'",
        (controller_id, client_request_id),
    ).fetchone()
    return None if row is None else lookup(conn, str(row[0]))


def reclaim_step(conn: apsw.Connection) -> int:
    """Give up to VACUUM_PAGES free pages back to the file system; return how many it gave.

    0: none is free, or the store does not vacuum incrementally (`use_incremental_vacuum`).
    """
    before = _scalar(conn, "PRAGMA freelist_count", None)
    conn.execute(f"PRAGMA incremental_vacuum({VACUUM_PAGES})").fetchall()
    return before - _scalar(conn, "PRAGMA freelist_count", None)


def use_incremental_vacuum(conn: apsw.Connection) -> bool:
    """Make deletes free pages for `reclaim_step`; return True if the store had to change.

    Outside any transaction. The first time on a store with tables it runs one
    VACUUM (the file is rewritten: seconds for a large store).
    """
    if _scalar(conn, "PRAGMA auto_vacuum", None) == 2:  # INCREMENTAL
        return False
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("VACUUM")
    return True


def checkpoint(conn: apsw.Connection) -> bool:
    """Copy the write-ahead log into the store and truncate it (outside any transaction).

    False: a reader or a writer kept the log busy past the busy timeout, and it stays.
    (The pragma, unlike the C call, first reads the schema, so a connection that has
    read nothing yet knows the store is in WAL mode.)
    """
    row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert row is not None
    return not row[0]


def store_bytes(path: Path) -> int:
    """The store's bytes on disk, its write-ahead log included."""
    wal = path.with_name(f"{path.name}-wal")
    return sum(os.path.getsize(name) for name in (path, wal) if name.exists())


def _bury(conn: apsw.Connection, row: tuple[Any, ...], now: float) -> None:
    """Leave a deleted record's tombstone and its one compact prune line."""
    record_id, controller_id, client_request_id, task_kind, outcome, settled_at = row
    conn.execute(
        "INSERT INTO tombstones (record_id, controller_id, client_request_id, task_kind, "
        "outcome, settled_at, pruned_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (record_id, controller_id, client_request_id, task_kind, outcome, settled_at, now),
    )
    audit.record_pruned(
        conn, at=now, controller_id=controller_id, record_id=record_id, outcome=outcome,
        detail={"task_kind": task_kind, "settled_at": settled_at},
    )  # fmt: skip


def _scalar(conn: apsw.Connection, sql: str, plan: Plan | None) -> int:
    row = conn.execute(sql, None if plan is None else plan.args).fetchone()
    assert row is not None, sql
    return int(row[0])
