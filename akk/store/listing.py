"""Read-side queries behind the `list` method (run on a reader connection)."""

from __future__ import annotations

from typing import Any

import apsw


def active_watches(conn: apsw.Connection, controller_id: str | None) -> list[dict[str, Any]]:
    """The controller's Watches still observing (every controller's for None), oldest first."""
    return _rows(
        conn,
        "SELECT watch_id, controller_id, terminal_id, session_id, state, deadline_at, created_at "
        "FROM watches WHERE coalesce(?, controller_id) = controller_id AND state = 'active' "
        "ORDER BY created_at",
        (controller_id,),
    )


def _rows(conn: apsw.Connection, sql: str, args: tuple[object, ...]) -> list[dict[str, Any]]:
    cursor = conn.cursor()
    cursor.row_trace = _as_dict
    return list(cursor.execute(sql, args))


def _as_dict(cursor: apsw.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: value for d, value in zip(cursor.getdescription(), row, strict=True)}
