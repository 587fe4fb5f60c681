"""The durable record of every terminal (pane + agent process incarnation) AKK has seen."""

from __future__ import annotations

from collections.abc import Callable

import apsw

from akk.discovery.identity import TerminalIdentity
from akk.store.database import cas_update


def record_seen(conn: apsw.Connection, identity: TerminalIdentity, now: float) -> None:
    """Insert the terminal on first sight; a rediscovery (e.g. after a restart) or a new
    binding (a qualification recorded or revoked) refreshes it."""
    revision = _revision(conn, identity.terminal_id)
    if revision is None:
        conn.execute(
            "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
            "agent_pid, process_start, executable, version, profile, profile_reason, cwd, "
            "binary_sha256, first_seen_at, last_seen_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                identity.terminal_id, identity.tmux_socket, identity.pane_id, identity.pane_pid,
                identity.agent, identity.agent_pid, identity.process_start, identity.executable,
                identity.version, identity.profile, identity.profile_reason, identity.cwd,
                identity.binary_sha256, now, now,
            ),
        )  # fmt: skip
        return
    cas_update(
        conn, "terminals", "terminal_id", identity.terminal_id, revision,
        {"last_seen_at": now, "version": identity.version, "profile": identity.profile,
         "profile_reason": identity.profile_reason, "binary_sha256": identity.binary_sha256,
         "gone_at": None},
    )  # fmt: skip


def record_gone(conn: apsw.Connection, terminal_id: str, now: float) -> None:
    """The pane closed or the agent process ended: this incarnation is over."""
    row = conn.execute(
        "SELECT revision FROM terminals WHERE terminal_id = ? AND gone_at IS NULL", (terminal_id,)
    ).fetchone()
    if row is not None:
        cas_update(
            conn, "terminals", "terminal_id", terminal_id, int(row[0]),
            {"gone_at": now, "last_seen_at": now},
        )  # fmt: skip


def sweep_ended(conn: apsw.Connection, running: Callable[[int, int], bool], now: float) -> int:
    """Record gone every terminal whose agent process no longer runs; return how many.

    ``running(pid, start_ticks)``: whether that process is still the one the row saw.
    The watcher records a pane that leaves while it watches; this catches the rows a
    previous run left when it died (SIGKILL, a reboot) or could not write, which would
    otherwise stay un-gone, and so never pruned, for good.
    """
    ended = [
        str(terminal_id)
        for terminal_id, pid, ticks in conn.execute(
            "SELECT terminal_id, agent_pid, process_start FROM terminals WHERE gone_at IS NULL"
        )
        if not running(int(pid), int(ticks))
    ]
    for terminal_id in ended:
        record_gone(conn, terminal_id, now)
    return len(ended)


def pane_of(conn: apsw.Connection, terminal_id: str) -> tuple[str, str] | None:
    """(tmux socket, pane id) where ``terminal_id`` ran, if it was ever seen."""
    row = conn.execute(
        "SELECT tmux_socket, pane_id FROM terminals WHERE terminal_id = ?", (terminal_id,)
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def cwd_of(conn: apsw.Connection, terminal_id: str) -> str | None:
    """The agent's working directory when ``terminal_id`` was seen (None: unread or unseen)."""
    row = conn.execute("SELECT cwd FROM terminals WHERE terminal_id = ?", (terminal_id,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _revision(conn: apsw.Connection, terminal_id: str) -> int | None:
    row = conn.execute(
        "SELECT revision FROM terminals WHERE terminal_id = ?", (terminal_id,)
    ).fetchone()
    return None if row is None else int(row[0])
