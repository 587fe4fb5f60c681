"""`akk gc`: a retention pass now (docs/retention.md), or with --dry-run what it would delete.

With a running server the pass goes through it (its one writer, the `gc` operator
method); without one it runs on the store here, holding the state directory.
Either way it prints the rows deleted per table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import apsw
from rich.table import Table

from akk.cli.server_calls import offline_store, operator_call
from akk.cli.text import json_text, out, shown, when
from akk.discovery.process import alive
from akk.server.instance import server_running
from akk.store import retention, terminals
from akk.store.location import StateDir
from akk.store.retention import Plan, Report

SERVER_TIMEOUT = 600.0
"""How long a pass through the server may take (batches wait for the writer's other work)."""


def run(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if server_running(state):
        params: dict[str, Any] = {"dry_run": args.dry_run}
        if args.older_than is not None:
            params["older_than_days"] = args.older_than
        result: dict[str, Any] = operator_call(state, "gc", params, timeout=SERVER_TIMEOUT)
    else:
        wanted = retention.DEFAULT_DAYS if args.older_than is None else args.older_than
        path = state.store_path
        report = offline_store(state, lambda conn: _offline(conn, path, wanted, args.dry_run))
        result = report.to_json()
    if args.json:
        print(json_text(result))
        return 0
    verb = "would delete" if result["dry_run"] else "deleted"
    table = Table("table", f"rows {verb}", title="retention")
    for name, rows in result["counts"].items():
        table.add_row(shown(name), shown(rows))
    out.print(table)
    size = (
        f"store {result['store_bytes_before']:,} bytes"
        if result["dry_run"]
        else f"store {result['store_bytes_before']:,} → {result['store_bytes_after']:,} bytes"
    )
    out.print(
        shown(
            f"settled before {when(result['cutoff'])} (older than {result['retain_days']:g} "
            f"days); {size}; {result['seconds']:.2f} s"
        )
    )
    return 0


def _offline(conn: apsw.Connection, path: Path, older_than: float, dry_run: bool) -> Report:
    """The pass (or its count) on a store no server holds."""
    started, before = time.monotonic(), retention.store_bytes(path)
    plan = Plan(now=time.time(), retain_days=older_than)
    if dry_run:
        with conn:
            counts = retention.count(conn, plan)
        return Report(True, older_than, plan.cutoff, counts, time.monotonic() - started,
                      before, before)  # fmt: skip
    retention.use_incremental_vacuum(conn)
    with conn:
        terminals.sweep_ended(conn, alive, plan.now)
    counts = retention.run(conn, plan)
    return Report(False, older_than, plan.cutoff, counts, time.monotonic() - started,
                  before, retention.store_bytes(path))  # fmt: skip
