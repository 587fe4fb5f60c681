"""`akk list` and `akk sessions`: what the running server sees, as tables."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from akk.cli.server_calls import operator_call
from akk.cli.status_text import profile_text
from akk.cli.text import json_text, out, shown
from akk.protocol.redaction import redact
from akk.store.location import StateDir


def terminals(args: argparse.Namespace) -> int:
    result: dict[str, Any] = operator_call(StateDir.resolve(args.state_dir), "list", {})
    if args.json:
        print(json_text(result, indent=2))
        return 0
    table = Table("pane", "agent", "version", "profile", "state", "asks", title="terminals")
    # Pane ids repeat across tmux servers: name the server when there is more than one.
    several = len({row["tmux_socket"] for row in result["terminals"]}) > 1
    for row in result["terminals"]:
        cells = (
            f"{row['tmux_socket']}:{row['pane']}" if several else row["pane"],
            row["agent"],
            row["version"] or "?",
            profile_text(row),
            row["activity_state"],
            # The server redacts already; the table is one more place text leaves it.
            redact(str(row.get("asks") or "")),
        )
        table.add_row(*map(shown, cells))
    out.print(table)
    if more := (result.get("omitted") or {}).get("terminals"):
        out.print(
            shown(f"not shown: {more} more panes (a reply holds the first that fit, in pane order)")
        )
    for title, records in (("turns", result["turns"]), ("watches", result["watches"])):
        if records:
            out.print(_records_table(title, records))
    _say_omitted(result, ("turns", "watches"), "`akk status ID` shows one; close settled Turns")
    return 0


def _say_omitted(result: dict[str, Any], kinds: tuple[str, ...], hint: str) -> None:
    """Name the open records a reply left out (it keeps the newest that fit one frame)."""
    omitted = result.get("omitted") or {}
    left = [f"{omitted[kind]} {kind}" for kind in kinds if omitted.get(kind)]
    if left:
        out.print(shown(f"not shown, older and still open: {', '.join(left)} ({hint})"))


def _records_table(title: str, records: list[dict[str, Any]]) -> Table:
    table = Table("id", "controller", "terminal", "state", "round", "reason", title=title)
    for record in records:
        if record["closed_at"]:
            stopped = " (closed)"
        elif record["observation_state"] == "stopped":
            stopped = " (unwatched)"
        else:
            stopped = ""
        cells = (
            record["turn_id"] or record["watch_id"],
            record["controller_id"],
            record["terminal_id"] or "-",
            record["state"] + stopped,
            record["round"],
            record["reason"] or "",
        )
        table.add_row(*map(shown, cells))
    return table


def sessions(args: argparse.Namespace) -> int:
    result: dict[str, Any] = operator_call(StateDir.resolve(args.state_dir), "list", {})
    rows: list[dict[str, Any]] = result.get("sessions", [])
    if args.json:
        print(json_text({"sessions": rows}))
    elif rows:
        out.print(sessions_table(rows))
        _say_omitted(result, ("sessions",), "a reply holds the newest that fit")
    else:
        out.print(shown("no sessions; `akk send --scope TASK/ROLE TEXT` starts one"))
    return 0


def sessions_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(
        "owner", "backend", "task", "unit", "role", "thread", "decision", "reason", "state",
        "gen",
        title="sessions",
    )  # fmt: skip
    for row in rows:
        thread = row["thread_id"]
        latest = row.get("latest_invocation")
        state = row["history"]
        if latest is not None:
            state += f", {latest['dispatch']} {latest['outcome']}"
        if row["retired_at"] is not None:
            state += f" (retired: {row['retire_reason'] or '-'})"
        cells = (
            row["controller_id"],
            row["backend"],
            row["scope"]["task"],
            row["scope"]["unit"] or "-",
            row["scope"]["role"],
            "-" if thread is None else (thread if len(thread) <= 13 else thread[:12] + "…"),
            row["decision"]["action"],
            row["decision"]["reason"],
            state,
            row["generation"],
        )
        table.add_row(*map(shown, cells))
    return table
