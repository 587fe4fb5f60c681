"""`akk qualify`: qualify an unpinned client binary, and --list or --revoke the qualified.

The qualification itself runs in `akk.qualify`; this module picks the binaries,
prints the verdicts and stores a qualified row (`record_qualification`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import attrs
from rich.table import Table

from akk.cli.errors import CliError
from akk.cli.server_calls import offline_write, operator_call
from akk.cli.text import err, json_text, out, shown, when
from akk.profiles.registry import PINNED, Registry
from akk.qualify import command
from akk.server.instance import server_running
from akk.store import qualifications
from akk.store.location import StateDir


def run(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if (args.list or args.revoke) and (args.agent or args.binary):
        raise CliError("--list and --revoke take no AGENT or --binary; run them on their own")
    if args.list and args.revoke:
        raise CliError("pass --list or --revoke, not both")
    if args.list:
        return _list(state, args.json)
    if args.revoke:
        agent, version = args.revoke
        if agent not in qualifications.AGENTS:
            raise CliError(f"--revoke takes claude or codex, then the version; not {agent!r}")
        return _revoke(state, agent, version, as_json=args.json)
    if args.agent is None:
        raise CliError("name the client to qualify (`akk qualify claude`), or pass --list")
    paths = [Path(args.binary)] if args.binary else command.candidates(args.agent, state)
    if not paths:
        raise CliError(
            f"no {args.agent} binary to qualify: no unbound pane of the server runs one and "
            f"`{args.agent}` is not on PATH; pass --binary PATH"
        )
    # Checked before the minutes a qualification takes: its verdict is stored there.
    state.ensure()
    registry: Registry = PINNED if args.registry is None else args.registry
    attempts = command.run(
        args.agent,
        paths,
        registry,
        parallel=args.parallel,
        progress=lambda line: err.print(shown(line)),
    )
    status = 0
    shown_results: list[dict[str, Any]] = []
    for attempt in attempts:
        judged = attempt.judgement
        if attempt.error is not None:
            status = 2
            shown_results.append({"binary": str(attempt.path), "state": "error",
                                  "error": attempt.error})  # fmt: skip
            err.print(shown(f"akk: {attempt.path}: {attempt.error}"))
        elif attempt.pinned is not None:
            found = attempt.pinned
            shown_results.append({"binary": str(found.path), "state": "pinned",
                                  "version": found.version})  # fmt: skip
            if not args.json:
                out.print(shown(f"{found.agent} {found.version} at {found.path} is pinned: "
                                 "AKK supports it as it is; nothing to qualify"),
                           soft_wrap=True)  # fmt: skip
        elif judged is not None:
            if judged.qualified:
                record_qualification(state, command.row(judged, time.time()), registry)
            else:
                status = max(status, 1)
            shown_results.append({"binary": str(judged.probe.path),
                                  "state": "qualified" if judged.qualified else "refused",
                                  "report": judged.report()})  # fmt: skip
            if not args.json:
                out.print(shown(judged.text()), end="", soft_wrap=True)
    if args.json:
        print(json_text({"results": shown_results}))
    return status


def record_qualification(
    state: StateDir, row: qualifications.Qualification, registry: Registry = PINNED
) -> dict[str, Any]:
    """Store a finished qualification: through the running server, else written offline.

    The server re-binds the version's panes at once; offline, a server started
    later binds by it. Raises CliError (nothing stored) for a row the store
    refuses (`akk.store.qualifications.record`).
    """
    if server_running(state):
        params = {**attrs.asdict(row), "report": dict(row.report)}
        result: dict[str, Any] = operator_call(state, "qualification_record", params)
        return result
    try:
        offline_write(
            state,
            lambda conn, now: qualifications.record(
                conn, row, registry.base_agents, actor="akk-cli"
            ),
        )
    except qualifications.QualificationError as exc:
        raise CliError(f"{exc}; nothing was recorded") from None
    return row.to_json()


def _list(state: StateDir, as_json: bool) -> int:
    if server_running(state):
        listed: dict[str, Any] = operator_call(state, "qualification_list", {})
        rows: list[dict[str, Any]] = listed["qualifications"]
    else:
        rows = offline_write(
            state,
            lambda conn, now: [e.to_json() for e in qualifications.load(conn, PINNED.base_agents)],
        )
    if as_json:
        print(json_text({"qualifications": rows}))
        return 0
    table = Table(
        "agent", "version", "state", "reads as", "binary SHA-256", "qualified", title="qualified"
    )
    table.columns[3].overflow = "fold"  # a profile id is read whole, never cut to "…"
    for row in rows:
        if row["state"] == "qualified":
            cells = (
                row["agent"], row["version"], "qualified", row["base_profile"],
                row["binary_sha256"][:16] + "…", when(row["qualified_at"]),
            )  # fmt: skip
        else:
            cells = (row["agent"], row["version"], "MALFORMED", row["reason"], "-", "-")
        table.add_row(*map(shown, cells))
    out.print(table)
    return 0


def _revoke(state: StateDir, agent: str, version: str, *, as_json: bool) -> int:
    if server_running(state):
        result = operator_call(state, "qualification_revoke", {"agent": agent, "version": version})
    else:
        if not offline_write(
            state,
            lambda conn, now: qualifications.revoke(conn, agent, version, now, actor="akk-cli"),
        ):
            raise CliError(
                f"{agent} {version} has no qualification; `akk qualify --list` shows them"
            )
        result = {"agent": agent, "version": version, "revoked": True}
    if as_json:
        print(json_text(result))
    else:
        out.print(shown(f"revoked the qualification of {agent} {version}; its panes are "
                         "unsupported again"))  # fmt: skip
    return 0
