"""Controllers: the callback destinations named by their stable controller_id."""

from __future__ import annotations

import apsw


def record_hello(conn: apsw.Connection, controller_id: str, name: str, now: float) -> None:
    """Create the controller on its first hello; refresh its name and last-seen time after."""
    conn.execute(
        "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
        "VALUES (?, ?, ?, ?) "
        "ON CONFLICT (controller_id) DO UPDATE SET name = excluded.name, "
        "last_seen_at = excluded.last_seen_at",
        (controller_id, name, now, now),
    )
