"""Rows a store test builds on: controllers and a Claude terminal (``ctl`` and ``t1``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import apsw

from akk.store.database import open_store


def add_rows(
    conn: apsw.Connection, controllers: Iterable[str], terminal_id: str, *, agent_pid: int = 2
) -> None:
    """Insert ``controllers`` and Claude terminal ``terminal_id`` (pane %1 of socket ``s``),
    one transaction."""
    with conn:
        for controller in controllers:
            conn.execute(
                "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
                "VALUES (?, ?, 0, 0)",
                (controller, controller),
            )
        conn.execute(
            "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
            "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
            "VALUES (?, 's', '%1', 1, 'claude', ?, 3, 'claude', 0, 0)",
            (terminal_id, agent_pid),
        )


def add_ctl_and_t1(conn: apsw.Connection) -> None:
    """Insert controller ``ctl`` and terminal ``t1`` (pane %1 of socket ``s``), one transaction."""
    add_rows(conn, ("ctl",), "t1", agent_pid=101)


def store_with_t1(directory: Path) -> Iterator[apsw.Connection]:
    """A fixture's body: a new store in ``directory`` with ``ctl`` and ``t1``, closed after."""
    connection = open_store(directory / "akk.sqlite3")
    add_ctl_and_t1(connection)
    yield connection
    connection.close()
