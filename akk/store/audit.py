"""The audit trail: who did what to which record, and how it ended (repository).

Rows name the actor, the action, its outcome (``ok``, ``dispatched`` or a
protocol reason code) and the ids it touched; ``detail`` holds small facts
(a decision, how many answers), never an answer's text, a token or a screen.
The table keeps the newest ``KEEP`` rows, so a peer that calls without end
cannot grow it without bound.
"""

from __future__ import annotations

import json
from typing import Any

import apsw

KEEP = 100_000
"""Rows kept; older ones are deleted as new ones arrive."""


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
    facts = json.dumps(detail or {})
    conn.execute(
        "INSERT INTO audit (at, actor, action, outcome, controller_id, turn_id, interaction_id, "
        "detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (at, actor, action, outcome, controller_id, turn_id, interaction_id, facts),
    )
    conn.execute("DELETE FROM audit WHERE audit_id <= last_insert_rowid() - ?", (KEEP,))


def of_turn(conn: apsw.Connection, turn_id: str, limit: int = 50) -> list[dict[str, Any]]:
    """The Turn's newest audit rows, oldest first."""
    rows = conn.execute(
        "SELECT at, actor, action, outcome, interaction_id, detail FROM audit "
        "WHERE turn_id = ? ORDER BY audit_id DESC LIMIT ?",
        (turn_id, limit),
    )
    return [
        {
            "at": at,
            "controller_id": actor,
            "action": action,
            "outcome": outcome,
            "interaction_id": interaction_id,
            "detail": json.loads(detail),
        }
        for at, actor, action, outcome, interaction_id, detail in rows
    ][::-1]
