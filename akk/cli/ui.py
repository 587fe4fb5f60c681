"""`akk ui`: a one-time login link to the operator console of the running server.

The link carries a code the server trades, once and within 60 seconds, for a
console session (`akk.console.login`); the page it leads to never shows the
code. ``--open`` hands the link to this machine's browser instead of only
printing it.
"""

from __future__ import annotations

import argparse
import webbrowser
from typing import Any

from akk.cli.errors import CliError
from akk.cli.server_calls import operator_call
from akk.cli.text import out, shown
from akk.server.instance import read_endpoint, server_running
from akk.store.location import StateDir


def run(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if not server_running(state):
        raise CliError(f"no `akk serve` runs for {state.path}; start it, then run `akk ui` again")
    login: dict[str, Any] = operator_call(state, "ui_login", {})
    endpoint = read_endpoint(state)  # the one operator_call proved
    if endpoint is None:
        raise CliError(
            f"`akk serve` for {state.path} stopped just now; start it, then run `akk ui` again"
        )
    link = f"{endpoint.web_origin}{login['path']}?code={login['code']}"
    out.print(shown("the console's login link (it works once, within 60 seconds):"))
    print(link, flush=True)  # alone on its line, never wrapped: a person or a script copies it
    if args.open and not webbrowser.open(link):
        out.print(shown("no browser could be opened here; open the link above by hand"))
    return 0
