"""The audit trail: who did what to which record, and how it ended (repository).

Rows name the actor, the action, its outcome (``ok``, ``dispatched`` or a
protocol reason code) and the ids it touched; ``detail`` holds small facts
(a decision, how many answers), never an answer's text, a token or a screen.
The table keeps the newest ``KEEP`` rows of each actor, so a peer that calls
without end can neither grow it without bound nor push out another's trail (a
flood of refused calls once emptied the whole table of everyone else's rows);
retention (`akk.store.retention`) also deletes rows older than its cutoff, and
leaves one ``prune`` line per record it deletes.

A record's trail (``of_turn``) holds what its owner did, and what others did
to it with the right to (the operator, AKK itself): a call refused to another
controller is that caller's own row, never the record's. Every string a row
keeps is bounded (``MAX_STORED_CHARS``) and printable: control, format and
other unprintable characters are stored as ``\\uXXXX`` escapes.
"""

from __future__ import annotations

import json
from typing import Any

import apsw

KEEP = 100_000
"""Rows kept per actor; its older ones are deleted as its new ones arrive."""
MAX_STORED_CHARS = 96
"""Longest string a row keeps; a longer one is cut and ends in "…"."""


def record(
    conn: apsw.Connection,
    *,
    at: float,
    actor: str,
    action: str,
    outcome: str,
    controller_id: str | None = None,
    turn_id: str | None = None,
    interaction_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Append one row; every string in it is made safe to keep first (``stored``)."""
    facts = json.dumps(_stored_facts(detail or {}))
    row = (actor, action, outcome, controller_id, turn_id, interaction_id)
    conn.execute(
        "INSERT INTO audit (at, actor, action, outcome, controller_id, turn_id, interaction_id, "
        "detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (at, *(None if value is None else stored(value) for value in row), facts),
    )
    _trim(conn, stored(actor))


def _trim(conn: apsw.Connection, actor: str) -> None:
    """Delete ``actor``'s rows older than its newest ``KEEP`` (one, as each row arrives)."""
    conn.execute(
        "DELETE FROM audit WHERE actor = ?1 AND audit_id <= (SELECT audit_id FROM audit "
        "WHERE actor = ?1 ORDER BY audit_id DESC LIMIT 1 OFFSET ?2)",
        (actor, KEEP),
    )


def record_pruned(
    conn: apsw.Connection,
    *,
    at: float,
    controller_id: str,
    record_id: str,
    outcome: str,
    detail: dict[str, Any],
) -> None:
    """The one compact ``prune`` line retention leaves for a record it deleted.

    Unlike `record` it trims no old row: what a retention pass deletes must be
    exactly what it counted, and retention bounds its own lines
    (`akk.store.retention`).
    """
    conn.execute(
        "INSERT INTO audit (at, actor, action, outcome, controller_id, turn_id, detail) "
        "VALUES (?, 'akk', 'prune', ?, ?, ?, ?)",
        (at, stored(outcome), stored(controller_id), stored(record_id),
         json.dumps(_stored_facts(detail))),
    )  # fmt: skip


def stored(text: str) -> str:
    """``text`` as a row keeps it: what is not printable escaped as ``\\uXXXX``, then bounded."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)
    return text if len(text) <= MAX_STORED_CHARS else text[: MAX_STORED_CHARS - 1] + "…"


def _stored_facts(value: Any) -> Any:
    if isinstance(value, str):
        return stored(value)
    if isinstance(value, dict):
        return {stored(str(k)): _stored_facts(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_stored_facts(v) for v in value]
    return value


def of_turn(
    conn: apsw.Connection, turn_id: str, owner: str, limit: int = 50
) -> tuple[list[dict[str, Any]], int]:
    """The newest rows of ``owner``'s Turn, oldest first: its owner's and those done for it,
    and how many there are in all.

    A row another controller left naming this Turn (before refusals were kept
    as the caller's own) is not the Turn's and is never shown.
    """
    mine = "WHERE turn_id = ? AND (actor = ? OR controller_id = ?)"
    counted = conn.execute(f"SELECT count(*) FROM audit {mine}", (turn_id, owner, owner)).fetchone()
    assert counted is not None
    rows = conn.execute(
        "SELECT at, actor, action, outcome, interaction_id, detail FROM audit "
        f"{mine} ORDER BY audit_id DESC LIMIT ?",
        (turn_id, owner, owner, limit),
    )
    shown = [
        {
            "at": at,
            "controller_id": actor,
            "action": action,
            "outcome": outcome,
            "interaction_id": interaction_id,
            "detail": json.loads(detail),
        }
        for at, actor, action, outcome, interaction_id, detail in rows
    ]
    return shown[::-1], int(counted[0])
