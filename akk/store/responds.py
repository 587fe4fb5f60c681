"""Responds: the client_request_id a controller gave a `respond`, and the round it started.

A row is written in the transaction that reserves that round's keys, so a repeated
`respond` with the same id finds the round and is never typed again, whether the
first call's keys went out or the server died before they could. Every function
runs inside a transaction the caller holds.
"""

from __future__ import annotations

import apsw
import attrs


@attrs.frozen
class Responded:
    """One row of ``responds``: the round a controller's `respond` started."""

    turn_id: str
    round: int
    request_sha256: str


def get(conn: apsw.Connection, controller_id: str, client_request_id: str) -> Responded | None:
    row = conn.execute(
        "SELECT turn_id, round, request_sha256 FROM responds "
        "WHERE controller_id = ? AND client_request_id = ?",
        (controller_id, client_request_id),
    ).fetchone()
    return None if row is None else Responded(str(row[0]), int(row[1]), str(row[2]))


def record(
    conn: apsw.Connection,
    controller_id: str,
    client_request_id: str,
    responded: Responded,
    now: float,
) -> None:
    """Record the round ``responded`` started (the primary key refuses a second one)."""
    conn.execute(
        "INSERT INTO responds (controller_id, client_request_id, turn_id, round, "
        "request_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (
            controller_id,
            client_request_id,
            responded.turn_id,
            responded.round,
            responded.request_sha256,
            now,
        ),
    )
