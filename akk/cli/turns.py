"""`akk send`, `akk respond`, `akk status` and `akk events`: a Turn sent, followed and read
as akk-cli.

`send` goes into an idle terminal's composer or, with --scope, through a
session of a backend (`--backend`: the Codex app-server or Claude headless);
`--wait` follows the Turn to its outcome (its event, or its status settled).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import trio
from rich.control import Control
from rich.segment import ControlType
from rich.table import Table

from akk.backends.names import SESSION_BACKENDS
from akk.cli import records
from akk.cli.errors import CliError
from akk.cli.server_calls import operator_call, operator_session, terminal_id
from akk.cli.status_text import INDENT, interaction_lines, shown_lines, terminal_lines
from akk.cli.text import err, json_text, out, shown
from akk.client import Controller, connect
from akk.protocol.redaction import redact
from akk.protocol.schema import OUTCOME_KINDS, WAKE_UP_KINDS
from akk.server.instance import proven_endpoint
from akk.store.location import StateDir


def send_target(args: argparse.Namespace) -> dict[str, Any]:
    """The `send` params that say where the task goes, for a --scope send; {} for a terminal.

    Raises CliError for a terminal and --scope together, neither, or a session
    option without --scope.
    """
    if args.scope is None:
        options = {"--backend": args.backend, "--cwd": args.cwd, "--fresh-context": args.handoff}
        given = [flag for flag, value in options.items() if value is not None]
        if given:
            raise CliError(f"{', '.join(given)} only go with --scope TASK/ROLE[/UNIT]")
        if args.terminal is None:
            raise CliError(
                "say where the task goes: `akk send TERMINAL TEXT` (a pane, e.g. %3), or "
                "`akk send --scope TASK/ROLE[/UNIT] TEXT` (a backend session: --backend)"
            )
        return {}
    if args.terminal is not None:
        raise CliError(
            f"--scope sends through a session, not into terminal {args.terminal!r}; leave "
            "TERMINAL out (quote the task if it has spaces)"
        )
    target: dict[str, Any] = {
        "scope": args.scope,
        "backend": args.backend or SESSION_BACKENDS[0],
        "cwd": os.path.abspath(args.cwd or os.getcwd()),
    }
    if args.handoff is not None:
        target["handoff"] = args.handoff
    return target


def send(args: argparse.Namespace) -> int:
    target = send_target(args)
    text = _given_text(args)
    request_id = args.client_request_id or "cli-" + secrets.token_hex(8)

    async def call(ctl: Controller) -> dict[str, Any]:
        where = target or {"terminal_id": await terminal_id(ctl, args.terminal)}
        sent: dict[str, Any] = await ctl.call(
            "send", where | {"request": text, "client_request_id": request_id}
        )
        return sent

    return _sent(args, call)


def respond(args: argparse.Namespace) -> int:
    text = _given_text(args)
    request_id = args.client_request_id or "cli-" + secrets.token_hex(8)

    async def call(ctl: Controller) -> dict[str, Any]:
        sent: dict[str, Any] = await ctl.call(
            "respond", {"turn_id": args.turn_id, "request": text, "client_request_id": request_id}
        )
        return sent

    return _sent(args, call)


def _given_text(args: argparse.Namespace) -> str:
    """The task or follow-up as given: `-` reads it from standard input."""
    return sys.stdin.read() if args.text == "-" else str(args.text)


def _sent(args: argparse.Namespace, call: Callable[[Controller], Awaitable[dict[str, Any]]]) -> int:
    """Make ``call`` (a `send` or a `respond`: a round of a Turn) as the operator; with
    --wait, follow that round to its outcome. 0 once it is `done`."""
    state = StateDir.resolve(args.state_dir)
    token = state.token()

    async def run() -> int:
        with trio.fail_after(30):
            endpoint = await proven_endpoint(state)
        tls = endpoint.tls_context()
        async with connect(endpoint.url, token, ssl_context=tls, events=args.wait) as ctl:
            with trio.fail_after(90):
                sent = await call(ctl)
            if not args.wait:
                _print_sent(sent, args.json)
                return 0
            if not args.json:
                err.print(shown(f"turn {sent['turn_id']}: {sent['state']}"))
            round_ = int(sent.get("round") or 1)
            final = await _follow(ctl, sent["turn_id"], round_, quiet=args.json)
        if args.json:
            print(json_text(final))
        else:
            print_record(final["turn"])
        return 0 if final["turn"]["state"] == "done" else 1

    code: int = trio.run(run)
    return code


async def _follow(ctl: Controller, turn_id: str, round_: int, *, quiet: bool) -> dict[str, Any]:
    """Wait for the outcome of the Turn's round ``round_``, showing a live progress line; its
    status at the end.

    Ends at that round's outcome event (acked) or when its status shows it settled,
    whichever comes first: the operator's other commands (`akk events`) may take
    and ack the event first.
    """
    heard = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_ack_own, ctl, turn_id, round_, heard)
        while not heard.is_set():
            status = await ctl.call("status", {"turn_id": turn_id})
            turn = status["turn"]
            if not quiet:
                stages = ",".join(d["stage"] for d in status["dispatches"]) or "-"
                # On a terminal the line redraws in place (rich strips a "\r" from text).
                if err.is_terminal:
                    err.control(Control(ControlType.CARRIAGE_RETURN))
                line = shown(f"{turn_id}: {turn['state']} (dispatch {stages})")
                err.print(line, end="" if err.is_terminal else "\n")
            # Settled: its outcome event, if it comes at once, is acked before leaving.
            wait = OUTCOME_GRACE if turn["state"] in OUTCOME_KINDS else 1.0
            with trio.move_on_after(wait):
                await heard.wait()
            if turn["state"] in OUTCOME_KINDS:
                break
        nursery.cancel_scope.cancel()
    if not quiet and err.is_terminal:
        err.print()
    result: dict[str, Any] = await ctl.call("status", {"turn_id": turn_id})
    return result


async def _ack_own(ctl: Controller, turn_id: str, round_: int, heard: trio.Event) -> None:
    """Ack the Turn's own events as they come, saying on stderr what its agent asks (with
    --json too: a person must answer it); set ``heard`` at the outcome of round ``round_``
    (an earlier round's, delivered late, is only acked), saying why when it is not `done`.
    Events of other records are left alone: they are for the operator's other commands to
    ack."""
    async with aclosing(ctl.events()) as events:
        async for event in events:
            if event.get("turn_id") != turn_id:
                continue
            await ctl.ack(event["event_id"])
            if event["kind"] in WAKE_UP_KINDS and event.get("round", round_) >= round_:
                _say_asked(turn_id, event)
            if event["kind"] in OUTCOME_KINDS and event.get("round", round_) >= round_:
                if event["kind"] != "done":  # why, and what a person may need to do
                    if err.is_terminal:
                        err.print()
                    err.print(shown(f"outcome:  {redact(str(event.get('summary') or ''))}"))
                heard.set()
                return


def _say_asked(turn_id: str, event: dict[str, Any]) -> None:
    """A wake-up, on lines of its own under the progress line: what the agent asks, and that
    the operator answers it (AKK answers nothing by itself)."""
    if err.is_terminal:
        err.print()
    projection = event.get("interaction")
    asked = interaction_lines(projection)
    for line in asked or [f"asks:     {redact(str(event.get('summary') or event['kind']))}"]:
        err.print(shown(line))
    if projection is not None and projection["state"] == "manual_required":
        how = "a person answers it where the agent runs; AKK sends nothing for it"
    else:
        how = f"answer it with `akk answer {turn_id}` or in `akk ui`"
    err.print(shown(f"{INDENT}{how}; `akk status {turn_id}` shows it again"))


OUTCOME_GRACE = 2.0
"""Seconds a settled Turn's follower waits for its outcome event, to ack it."""


def _print_sent(sent: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json_text(sent))
    else:
        print(sent["turn_id"])
        err.print(shown(f"state {sent['state']}; `akk status {sent['turn_id']}`"))


def status(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if not args.record.startswith(records.RECORD_PREFIXES):
        return _terminal_status(state, args)
    result = operator_call(state, "status", records.record_ids(args.record))
    if args.json:
        print(json_text(result))
        return 0
    print_record(result["turn"] if "turn" in result else result["watch"])
    for line in shown_lines(result):
        out.print(shown(line))
    if result["dispatches"]:
        table = Table("dispatch", "kind", "stage", "reason", title="dispatches")
        for step in result["dispatches"]:
            cells = (step["dispatch_id"], step["kind"], step["stage"], step["reason"] or "")
            table.add_row(*map(shown, cells))
        out.print(table)
    older = (result.get("omitted") or {}).get("dispatches")
    if older:
        out.print(shown(f"{older} older dispatches not shown (`status` keeps the newest)"))
    return 0


def _terminal_status(state: StateDir, args: argparse.Namespace) -> int:
    """`akk status TERMINAL`: the pane's row, what its agent asks, its screen's last lines."""

    async def call(ctl: Controller) -> Any:
        return await ctl.call("status", {"terminal_id": await terminal_id(ctl, args.record)})

    result = operator_session(state, call)
    if args.json:
        print(json_text(result))
        return 0
    for line in [*terminal_lines(result["terminal"]), *shown_lines(result)]:
        out.print(shown(line))
    return 0


def print_record(record: dict[str, Any]) -> None:
    """A Turn's or Watch's record as aligned lines."""
    usage = record["usage"]
    kind = "watch" if record["task_kind"] == "watch" else "turn"
    lines = [
        f"{kind + ':':<9} {record['watch_id']} ({record['controller_id']})",
        f"state:    {record['state']}" + (f" ({record['reason']})" if record["reason"] else ""),
        f"observed: {record['observation_state']}   management: {record['management_state']}   "
        f"deadline: {records.iso_time(record['deadline_at'])}",
        f"terminal: {record['terminal_id']}   session: {record['session_id'] or '-'}",
        f"evidence: {record['evidence']['status']}"
        + (f" ({record['evidence']['limit']})" if record["evidence"]["limit"] else ""),
        f"usage:    in {usage['input_tokens']} out {usage['output_tokens']} "
        f"cache read {usage['cache_read_tokens']} write {usage['cache_write_tokens']} "
        f"({usage['usage_status']})",
    ]
    for line in lines:
        out.print(shown(line))
    if record["final_message"]:
        # Its own lines are indented: none can pass for one of the record's lines above.
        message = record["final_message"].replace("\n", "\n" + " " * len("message:  "))
        out.print(shown(f"message:  {message}", lines=True))


def events(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    token = state.token()

    async def run() -> None:
        with trio.fail_after(30):
            endpoint = await proven_endpoint(state)
        async with (
            connect(endpoint.url, token, ssl_context=endpoint.tls_context()) as ctl,
            aclosing(ctl.events()) as events,
        ):
            async for event in events:
                if args.json:
                    print(json_text(event), flush=True)
                else:
                    summary = redact(str(event.get("summary") or ""))
                    turn = event.get("turn_id") or "-"
                    line = f"{event['created_at']} {event['kind']:<20} {turn} {summary}"
                    out.print(shown(line))
                await ctl.ack(event["event_id"])

    trio.run(run)
    return 0
