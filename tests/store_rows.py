"""Rows a store test builds on: controller ``ctl`` and Claude terminal ``t1``."""

from __future__ import annotations

import apsw


def add_ctl_and_t1(conn: apsw.Connection) -> None:
    """Insert controller ``ctl`` and terminal ``t1`` (pane %1 of socket ``s``), one transaction."""
    with conn:
        conn.execute(
            "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
            "VALUES ('ctl', 'ctl', 0, 0)"
        )
        conn.execute(
            "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
            "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
            "VALUES ('t1', 's', '%1', 1, 'claude', 101, 3, 'claude', 0, 0)"
        )
