"""`akk token`: the operator's own credential, and `create | list | revoke` of controllers'.

Each action goes through the running server when there is one (it closes a
revoked controller's connections), else writes the store offline.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.table import Table

from akk.cli.errors import CliError
from akk.cli.server_calls import offline_write, operator_call
from akk.cli.text import err, json_text, out, shown, when
from akk.server.instance import server_running
from akk.store import credentials
from akk.store.location import StateDir
from akk.workspace_roots import check_roots


def show(args: argparse.Namespace) -> int:
    out.print(shown(StateDir.resolve(args.state_dir).token()))
    return 0


def create(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if server_running(state):
        params: dict[str, Any] = {"controller_id": args.name}
        if args.workspace_root:
            params["workspace_roots"] = [os.path.abspath(p) for p in args.workspace_root]
        result = operator_call(state, "token_create", params)
    else:
        roots = check_roots(os.path.abspath(p) for p in args.workspace_root)
        minted = offline_write(
            state,
            lambda conn, now: credentials.create(
                conn, args.name, now, actor="akk-cli", roots=roots
            ),
        )
        result = {
            "controller_id": minted.controller_id,
            "token": minted.token,
            "workspace_roots": list(roots),
        }
    if args.json:
        print(json_text(result))
    else:
        # The token alone on stdout, so `TOKEN=$(akk token create NAME)` works.
        print(result["token"])
        err.print(
            shown(f"credential for controller {result['controller_id']!r}; it is shown only now")
        )
    return 0


def list_credentials(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if server_running(state):
        rows: list[dict[str, Any]] = operator_call(state, "token_list", {})["credentials"]
    else:
        rows = offline_write(state, lambda conn, now: credentials.listing(conn))
    if args.json:
        print(json_text({"credentials": rows}))
        return 0
    table = Table(
        "controller", "created", "last used", "connected", "workspace roots", title="credentials"
    )
    for row in rows:
        cells = (
            row["controller_id"],
            when(row["created_at"]),
            when(row["last_used_at"]),
            {True: "yes", False: "no", None: "-"}[row.get("connected")],
            ", ".join(row["workspace_roots"]) or "(the server's)",
        )
        table.add_row(*map(shown, cells))
    out.print(table)
    return 0


def revoke(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if server_running(state):
        result = operator_call(state, "token_revoke", {"controller_id": args.name})
    else:
        if not offline_write(
            state, lambda conn, now: credentials.revoke(conn, args.name, now, actor="akk-cli")
        ):
            raise CliError(
                f"controller {args.name!r} has no credential; `akk token list` shows them"
            )
        result = {"controller_id": args.name, "revoked": True, "connections_closed": 0}
    if args.json:
        print(json_text(result))
    else:
        out.print(
            shown(
                f"revoked {result['controller_id']}'s credential; "
                f"closed {result['connections_closed']} connection(s)"
            )
        )
    return 0
