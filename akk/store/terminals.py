"""The durable record of every terminal (pane + agent process incarnation) AKK has seen."""

from __future__ import annotations

import apsw

from akk.terminals import TerminalIdentity


def record_seen(conn: apsw.Connection, identity: TerminalIdentity, now: float) -> None:
    """Insert the terminal on first sight; a rediscovery (e.g. after a restart) refreshes it."""
    conn.execute(
        "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, agent_pid, "
        "process_start, executable, version, profile, profile_reason, cwd, first_seen_at, "
        "last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (terminal_id) DO UPDATE SET last_seen_at = excluded.last_seen_at, "
        "profile = excluded.profile, profile_reason = excluded.profile_reason, gone_at = NULL, "
        "revision = revision + 1",
        (
            identity.terminal_id, identity.tmux_socket, identity.pane_id, identity.pane_pid,
            identity.agent, identity.agent_pid, identity.process_start, identity.executable,
            identity.version, identity.profile, identity.profile_reason, identity.cwd, now, now,
        ),
    )  # fmt: skip


def record_gone(conn: apsw.Connection, terminal_id: str, now: float) -> None:
    """The pane closed or the agent process ended: this incarnation is over."""
    conn.execute(
        "UPDATE terminals SET gone_at = ?, last_seen_at = ?, revision = revision + 1 "
        "WHERE terminal_id = ? AND gone_at IS NULL",
        (now, now, terminal_id),
    )
