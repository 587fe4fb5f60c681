"""The durable outbox: each controller's notifications, leased, delivered, acked (repository).

A notification's ``event_id`` is fixed when it is written, so a redelivery
(after a lost connection, a lease that ran out, or a restart) carries the same
one. States: ``pending`` (due at ``next_attempt_at``) → ``delivering`` (sent,
lease running) → ``accepted`` (acked), or back to ``pending`` when the lease
runs out, or ``retryable_failure`` after the last attempt (``retry_callback``
makes it ``pending`` again with one more attempt, same ``event_id``);
``withdrawn`` when the record it is about no longer wants it.
"""

from __future__ import annotations

import datetime
import json
import secrets
from collections.abc import Iterable
from typing import Any

import apsw
import attrs

from akk.store.database import cas_update, update_if


@attrs.frozen
class Notification:
    notification_id: str
    event_id: str
    controller_id: str
    turn_id: str | None
    kind: str
    payload: str
    state: str
    attempts: int
    lease_expires_at: float | None
    next_attempt_at: float
    revision: int
    retries: int = 0
    """Delivery attempts granted by `retry_callback`, each one past ``max_attempts``."""
    round: int = 1
    """The round (observation generation) of its record it is about."""

    def event(self) -> dict[str, Any]:
        """The PROTOCOL event this notification carries."""
        body: dict[str, Any] = json.loads(self.payload)
        return body


_COLUMNS = [a.name for a in attrs.fields(Notification)]


def enqueue(
    conn: apsw.Connection,
    *,
    controller_id: str,
    turn_id: str | None,
    kind: str,
    body: dict[str, Any],
    now: float,
    round: int = 1,
) -> Notification:
    """Write one event for ``controller_id``; it is due at once."""
    notification_id = "ntf_" + secrets.token_hex(12)
    event_id = "evt_" + secrets.token_hex(12)
    event = {
        "event_id": event_id,
        "notification_id": notification_id,
        "kind": kind,
        "created_at": datetime.datetime.fromtimestamp(now, datetime.UTC).isoformat(),
        **body,
    }
    conn.execute(
        "INSERT INTO notifications (notification_id, event_id, controller_id, turn_id, round, "
        "kind, payload, state, next_attempt_at, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
        (
            notification_id,
            event_id,
            controller_id,
            turn_id,
            round,
            kind,
            json.dumps(event),
            now,
            now,
            now,
        ),
    )
    found = get(conn, notification_id)
    assert found is not None
    return found


def get(conn: apsw.Connection, notification_id: str) -> Notification | None:
    rows = _select(conn, "WHERE notification_id = ?", (notification_id,))
    return rows[0] if rows else None


def due(
    conn: apsw.Connection, controller_id: str, now: float, limit: int = 64
) -> list[Notification]:
    """Notifications to send now: pending and due, or delivering with a lease run out."""
    return _select(
        conn,
        "WHERE controller_id = ? AND ((state = 'pending' AND next_attempt_at <= ?) "
        "OR (state = 'delivering' AND lease_expires_at <= ?)) ORDER BY created_at, rowid LIMIT ?",
        (controller_id, now, now, limit),
    )


_WAITING = "state IN ('pending', 'delivering')"
"""A notification still to deliver (SQL)."""


def next_wakeup(conn: apsw.Connection, controller_id: str) -> float | None:
    """When the next notification of ``controller_id`` becomes due, if any is waiting."""
    row = conn.execute(
        "SELECT min(CASE state WHEN 'pending' THEN next_attempt_at ELSE lease_expires_at END) "
        f"FROM notifications WHERE controller_id = ? AND {_WAITING}",
        (controller_id,),
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def controllers_waiting(conn: apsw.Connection) -> list[str]:
    """Controllers with notifications still to deliver (a Destination each, after a restart)."""
    rows = conn.execute(f"SELECT DISTINCT controller_id FROM notifications WHERE {_WAITING}")
    return [str(row[0]) for row in rows]


def waiting_among(conn: apsw.Connection, controller_ids: Iterable[str]) -> set[str]:
    """Those of ``controller_ids`` with notifications still to deliver (one probe each)."""
    probe = f"SELECT 1 FROM notifications WHERE controller_id = ? AND {_WAITING} LIMIT 1"
    return {c for c in controller_ids if conn.execute(probe, (c,)).fetchone() is not None}


def lease(
    conn: apsw.Connection,
    notification: Notification,
    now: float,
    *,
    lease_seconds: float,
    max_attempts: int,
) -> Notification | None:
    """Take the next attempt; None once the attempts are used up (then retryable_failure).

    Each granted retry adds one attempt to ``max_attempts``. Conditional on the
    row still waiting with the attempts ``notification`` was read with, not on
    its revision: a new connection's release in between leaves it to send. Raises
    CasConflict if it moved on since (acked, withdrawn, or leased already).
    """
    if notification.attempts >= max_attempts + notification.retries:
        _move(
            conn, notification, _WAITING,
            {"state": "retryable_failure", "lease_expires_at": None,
             "last_error": f"not acked after {notification.attempts} attempts"},
        )  # fmt: skip
        return None
    _move(
        conn, notification, _WAITING,
        {"state": "delivering", "attempts": notification.attempts + 1,
         "lease_expires_at": now + lease_seconds},
    )  # fmt: skip
    return get(conn, notification.notification_id)


def retry(conn: apsw.Connection, notification: Notification, now: float) -> Notification:
    """`retry_callback`: a ``retryable_failure`` is due again now, with one more attempt.

    The event (its ``event_id`` and body), its attempts and its ``last_error``
    are kept. Compare-and-swap: raises CasConflict if the row moved on.
    """
    assert notification.state == "retryable_failure"
    cas_update(
        conn, "notifications", "notification_id", notification.notification_id,
        notification.revision,
        {"state": "pending", "next_attempt_at": now, "lease_expires_at": None,
         "retries": notification.retries + 1},
    )  # fmt: skip
    retried = get(conn, notification.notification_id)
    assert retried is not None
    return retried


def of_turn(conn: apsw.Connection, turn_id: str) -> list[Notification]:
    """Every notification about the record ``turn_id`` (a Turn or a Watch), oldest first."""
    return _select(conn, "WHERE turn_id = ? ORDER BY created_at, rowid", (turn_id,))


def postpone(conn: apsw.Connection, notification: Notification, until: float, error: str) -> None:
    """An attempt failed (no connection took it): due again at ``until``.

    Conditional on ``notification``'s lease still running: raises CasConflict if
    the row moved on meanwhile (acked, withdrawn, or released to a new connection).
    """
    _move(
        conn, notification, "state = 'delivering'",
        {"state": "pending", "next_attempt_at": until, "lease_expires_at": None,
         "last_error": error[:200]},
    )  # fmt: skip


def _move(
    conn: apsw.Connection, notification: Notification, where: str, changes: dict[str, object]
) -> None:
    """Write ``changes`` if the row is still as ``where`` (SQL) says, with the attempts
    ``notification`` was read with; else raise CasConflict (it moved on)."""
    update_if(
        conn, "notifications", "notification_id", notification.notification_id,
        (f"attempts = ? AND {where}", (notification.attempts,)), changes, notification.revision,
    )  # fmt: skip


def release_leases(conn: apsw.Connection, controller_id: str, now: float) -> int:
    """A new connection of ``controller_id``: what the old one did not ack is due again now.

    Attempts are kept; the same ``event_id`` goes out again.
    """
    conn.execute(
        "UPDATE notifications SET state = 'pending', next_attempt_at = ?, lease_expires_at = NULL, "
        "updated_at = ?, revision = revision + 1 WHERE controller_id = ? AND state = 'delivering'",
        (now, now, controller_id),
    )
    return conn.changes()


def ack(
    conn: apsw.Connection, controller_id: str, event_id: str, now: float
) -> Notification | None:
    """``controller_id`` accepted ``event_id``; None if it has no such event.

    Idempotent: acking an accepted event again returns it unchanged.
    """
    rows = _select(conn, "WHERE controller_id = ? AND event_id = ?", (controller_id, event_id))
    if not rows:
        return None
    notification = rows[0]
    if notification.state in ("pending", "delivering", "retryable_failure"):
        cas_update(
            conn, "notifications", "notification_id", notification.notification_id,
            notification.revision,
            {"state": "accepted", "accepted_at": now, "lease_expires_at": None},
        )  # fmt: skip
        notification = get(conn, notification.notification_id) or notification
    return notification


def retryable_records(conn: apsw.Connection, controller_id: str | None) -> set[str]:
    """Records with a notification in retryable_failure (every controller's for None)."""
    whose = "controller_id IS NOT NULL" if controller_id is None else "controller_id = ?"
    rows = conn.execute(
        f"SELECT DISTINCT turn_id FROM notifications WHERE {whose} AND "
        "state = 'retryable_failure' AND turn_id IS NOT NULL",
        () if controller_id is None else (controller_id,),
    )
    return {str(row[0]) for row in rows}


def withdraw_pending(conn: apsw.Connection, turn_id: str, now: float) -> int:
    """Withdraw the record's notifications never dispatched (no attempt yet); how many.

    One sent already stays as it is, whether its lease runs or a reconnect made
    it due again: its controller may have it, so its ack or redelivery decides.
    """
    conn.execute(
        "UPDATE notifications SET state = 'withdrawn', updated_at = ?, revision = revision + 1 "
        "WHERE turn_id = ? AND state = 'pending' AND attempts = 0",
        (now, turn_id),
    )
    return conn.changes()


def withdraw_superseded(
    conn: apsw.Connection, turn_id: str, kind: str, round: int, now: float
) -> int:
    """Withdraw the record's ``kind`` notifications of rounds before ``round`` not accepted and
    not in flight: waiting to be sent (again) or given up on (``retryable_failure``); how many.
    """
    conn.execute(
        "UPDATE notifications SET state = 'withdrawn', updated_at = ?, revision = revision + 1 "
        "WHERE turn_id = ? AND kind = ? AND round < ? "
        "AND state IN ('pending', 'retryable_failure')",
        (now, turn_id, kind, round),
    )
    return conn.changes()


def tap(conn: apsw.Connection, after: int | None, limit: int) -> list[tuple[int, dict[str, Any]]]:
    """Every controller's events for the operator console, oldest first, by insertion order.

    ``after``: the last position seen (each result's first item), or None for the
    ``limit`` most recent. Each event names its controller and its Turn's terminal.
    """
    select = (
        "SELECT n.rowid, n.controller_id, n.payload, t.terminal_id FROM notifications n "
        "LEFT JOIN turns t ON t.turn_id = n.turn_id "
    )
    if after is None:
        rows = conn.execute(select + "ORDER BY n.rowid DESC LIMIT ?", (limit,)).fetchall()
        rows.reverse()
    else:
        rows = conn.execute(
            select + "WHERE n.rowid > ? ORDER BY n.rowid LIMIT ?", (after, limit)
        ).fetchall()
    return [_tapped(*row) for row in rows]


def _tapped(position: Any, owner: Any, payload: Any, terminal: Any) -> tuple[int, dict[str, Any]]:
    event: dict[str, Any] = json.loads(payload)
    return int(position), event | {"controller_id": owner, "terminal_id": terminal}


def _select(conn: apsw.Connection, where: str, args: tuple[object, ...]) -> list[Notification]:
    rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM notifications {where}", args)
    return [Notification(*row) for row in rows]
