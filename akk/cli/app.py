"""The operator CLI: serve, token, qualify, doctor, gc, ui, list, sessions, send, status, events,
schema, screen, mcp, and the record commands (watch, unwatch, close, renew, recover,
retry-callback).

Every failure prints what went wrong and what to do, and exits non-zero. This
module is the command line (`parser`) and the entry point (`main`); each
command lives in the module named after it.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from akk.backends.names import SESSION_BACKENDS
from akk.cli import classify, doctor, gc, listing, qualify, records, serve, tokens, turns, ui
from akk.cli.errors import CliError
from akk.cli.text import err, shown
from akk.client import AkkError, ConnectError
from akk.mcp import command as mcp_command
from akk.profiles.registry import PINNED, Registry
from akk.protocol.schema import protocol_schema
from akk.qualify import qualification
from akk.server.instance import InstanceError
from akk.store.credentials import CredentialError
from akk.store.database import StoreError
from akk.store.location import StateDirError
from akk.workspace_roots import RootError


def main(argv: Sequence[str] | None = None, *, registry: Registry = PINNED) -> int:
    """Entry point of the `akk` console script.

    `registry` is the pinned set `akk qualify` reads new versions with (tests take
    a pinned version as new with ``PINNED.without(agent, version)``).
    """
    args = parser().parse_args(argv)
    args.registry = registry
    try:
        result: int = args.run(args)
    except (
        CliError,
        StateDirError,
        StoreError,
        ConnectError,
        InstanceError,
        CredentialError,
        RootError,
        classify.ClassifyError,
    ) as exc:
        err.print(shown(f"akk: {exc}"))
        return 2
    except AkkError as exc:
        err.print(shown(f"akk: the server said {exc.reason}: {exc.message}"))
        return 2
    except KeyboardInterrupt:
        return 130
    return result


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="akk", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, run: Any, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(run=run)
        return sub

    serving = command("serve", serve.run, "run the supervisor and its WebSocket endpoint")
    _state_dir_option(serving)
    serve.add_arguments(serving)
    _codex_options(serving)
    _claude_options(serving)
    serving.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])

    token = command(
        "token",
        tokens.show,
        "print the operator CLI's own credential; `token create|list|revoke` manage controllers'",
    )
    _state_dir_option(token)
    actions = token.add_subparsers(metavar="ACTION")
    create = actions.add_parser("create", help="mint a credential for controller NAME (shown once)")
    create.set_defaults(run=tokens.create)
    create.add_argument("name", help="the controller_id the credential is bound to")
    create.add_argument(
        "--workspace-root",
        action="append",
        default=[],
        metavar="DIR",
        help="narrow the credential to panes and backend workspaces under DIR (repeatable)",
    )
    list_tokens = actions.add_parser("list", help="the controllers that hold a credential")
    list_tokens.set_defaults(run=tokens.list_credentials)
    revoke = actions.add_parser("revoke", help="revoke NAME's credential and close its connections")
    revoke.set_defaults(run=tokens.revoke)
    revoke.add_argument("name")
    for sub in (create, list_tokens, revoke):
        _state_dir_option(sub)
        sub.add_argument("--json", action="store_true", help="print one JSON object")

    qualifying = command(
        "qualify",
        qualify.run,
        "qualify an unpinned client version on this machine; --list and --revoke the qualified",
    )
    qualifying.add_argument(
        "agent", nargs="?", choices=["claude", "codex"], help="the client to qualify"
    )
    qualifying.add_argument(
        "--binary", metavar="PATH", help="the exact binary to qualify (default: what panes run)"
    )
    _state_dir_option(qualifying)
    qualifying.add_argument("--json", action="store_true", help="print JSON")
    qualifying.add_argument(
        "--list", action="store_true", help="the qualified versions, and why not"
    )
    qualifying.add_argument(
        "--revoke",
        nargs=2,
        metavar=("AGENT", "VERSION"),
        help="revoke AGENT VERSION's qualification (its panes are unsupported again)",
    )
    qualifying.add_argument(
        "--parallel",
        type=int,
        default=qualification.PARALLEL,
        help=f"plan runs at a time (default {qualification.PARALLEL})",
    )

    check = command(
        "doctor", doctor.report, "check tmux, the state directory, the store, the port and Codex"
    )
    _state_dir_option(check)
    check.add_argument("--port", type=int, default=7878)
    _codex_options(check)

    pruning = command(
        "gc", gc.run, "prune settled records now, as retention does (docs/retention.md)"
    )
    _state_dir_option(pruning)
    gc.add_arguments(pruning)

    console = command("ui", ui.run, "print (--open: open) a one-time link to the operator console")
    _state_dir_option(console)
    ui.add_arguments(console)

    lister = command("list", listing.terminals, "list the terminals the running server sees")
    _state_dir_option(lister)
    lister.add_argument("--json", action="store_true", help="print the raw result as JSON")

    send = command(
        "send",
        turns.send,
        "send a task, as akk-cli, into an idle terminal's composer, or with --scope through "
        "the Codex app-server session that task and role own",
    )
    _state_dir_option(send)
    send.add_argument(
        "terminal",
        nargs="?",
        metavar="TERMINAL",
        help="the terminal_id (from `akk list --json`) or its pane, e.g. %%3 (not with --scope)",
    )
    send.add_argument("text", help="the task; `-` reads it from standard input")
    send.add_argument(
        "--scope",
        type=turns.parse_scope,
        metavar="TASK/ROLE[/UNIT]",
        help="send through this task and role's own session (app-server backend), no terminal",
    )
    send.add_argument(
        "--backend",
        choices=SESSION_BACKENDS,
        help=f"the backend of a --scope send (default: {SESSION_BACKENDS[0]})",
    )
    send.add_argument(
        "--cwd",
        metavar="DIR",
        help="the workspace of a --scope send (default: the current directory)",
    )
    send.add_argument(
        "--fresh-context",
        dest="handoff",
        metavar="HANDOFF",
        help="with --scope: start a new thread, HANDOFF (your summary so far) before the task",
    )
    send.add_argument("--id", dest="client_request_id", help="client_request_id (default: random)")
    send.add_argument("--wait", action="store_true", help="follow the Turn to its outcome")
    send.add_argument("--json", action="store_true", help="print JSON")

    status = command(
        "status", turns.status, "show one Turn or Watch: stages, evidence, outcome, usage"
    )
    _state_dir_option(status)
    status.add_argument("record", metavar="ID", help="a turn_id or watch_id")
    status.add_argument("--json", action="store_true", help="print the raw result as JSON")

    listed = command(
        "sessions",
        listing.sessions,
        "list the backend sessions: owner, backend, scope, decision",
    )
    _state_dir_option(listed)
    listed.add_argument("--json", action="store_true", help="print the sessions as JSON")

    events = command("events", turns.events, "follow akk-cli's events live, acking each")
    _state_dir_option(events)
    events.add_argument("--json", action="store_true", help="one JSON object per line")

    for spec in records.COMMANDS:
        record = command(spec.name, functools.partial(records.run, spec), spec.help)
        _state_dir_option(record)
        records.add_arguments(record, spec)

    command("schema", _schema, "print the JSON Schema of the controller protocol")

    bridge = command("mcp", mcp_command.run, "serve the controller protocol to MCP hosts (stdio)")
    _state_dir_option(bridge)
    mcp_command.add_arguments(bridge)

    screen = commands.add_parser("screen", help="classify a screen as AKK sees it")
    screens = screen.add_subparsers(required=True, metavar="SUBCOMMAND")
    from_file = screens.add_parser("classify", help="classify a capture-pane -p -e file")
    from_file.set_defaults(run=classify.classify_file)
    from_file.add_argument("file", help="a `tmux capture-pane -p -e` capture (e.g. a fixture)")
    from_file.add_argument("--agent", required=True, choices=["claude", "codex"])
    from_file.add_argument("--version", required=True, help="the exact client version")
    from_file.add_argument("--cols", type=int, required=True)
    from_file.add_argument("--rows", type=int, required=True)
    live = screens.add_parser("capture", help="capture and classify a live tmux pane")
    live.set_defaults(run=classify.capture)
    live.add_argument("target", help="tmux target, e.g. %%3 or work:1.0")
    live.add_argument(
        "--tmux-socket", help="the tmux server's socket (default server if not given)"
    )
    for sub in (from_file, live):
        sub.add_argument("--json", action="store_true", help="print one JSON object")
        sub.add_argument("--private", action="store_true", help="add region and fingerprint")
    return parser


def _codex_options(parser: argparse.ArgumentParser) -> None:
    """--codex-bin and --codex-home: the Codex whose app-server is the backend."""
    parser.add_argument(
        "--codex-bin", metavar="PATH", help="the Codex binary (default: codex on PATH)"
    )
    parser.add_argument(
        "--codex-home",
        metavar="DIR",
        type=Path,
        help="CODEX_HOME for its app-server (default: $CODEX_HOME, else ~/.codex)",
    )


def _claude_options(parser: argparse.ArgumentParser) -> None:
    """--claude-bin and --claude-config-dir: the Claude the headless backend runs."""
    parser.add_argument(
        "--claude-bin", metavar="PATH", help="the Claude Code binary (default: claude on PATH)"
    )
    parser.add_argument(
        "--claude-config-dir",
        metavar="DIR",
        type=Path,
        help="CLAUDE_CONFIG_DIR for its runs (default: $CLAUDE_CONFIG_DIR, else ~/.claude)",
    )


def _state_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        help="state directory (default: $AKK_STATE_DIR, else $XDG_STATE_HOME/akk)",
    )


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(protocol_schema(), indent=2))
    return 0
