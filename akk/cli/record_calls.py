"""`akk watch | unwatch | cancel | close | renew | recover | retry-callback`: one call each.

`records` says what each record command is (its method, params and summary) and
stays light for the command line; this module makes the call through the running
server, one runner for all of them.
"""

from __future__ import annotations

import argparse
from typing import Any

from akk.cli.records import RecordCommand, Target, params, summary
from akk.cli.server_calls import operator_session, terminal_id
from akk.cli.text import json_text, out, shown
from akk.client import Controller
from akk.store.location import StateDir


def run(command: RecordCommand, args: argparse.Namespace) -> int:
    """Run one record command: its one call, then the raw result or its summary."""

    async def call(ctl: Controller) -> Any:
        target = args.target
        if command.target in (Target.TERMINAL, Target.TASK) and target is not None:
            target = await terminal_id(ctl, target)
        return await ctl.call(command.method, params(command, target, vars(args)))

    result = operator_session(StateDir.resolve(args.state_dir), call)
    if args.json:
        print(json_text(result))
        return 0
    for line in summary(command, result):
        out.print(shown(line))
    return 0
