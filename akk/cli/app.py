"""The operator CLI: serve, token, qualify, doctor, gc, ui, list, sessions, send, respond,
status, answer, events, schema, screen, mcp, and the record commands (watch, unwatch, cancel,
close, renew, recover, retry-callback).

Every failure prints what went wrong and what to do, and exits non-zero. This
module is the command line (`parser`) and the entry point (`main`); each
command lives in the module named after it.

Every `akk` run builds the whole command line, `--help` included, so this module
imports only light modules: a command's function is named as ``module:function``
(`_deferred`) and imported when that command runs, with what it runs on (trio,
apsw, the profiles, the server). The failures `main` explains are imported once a
command failed (`_report`).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from akk.backends.names import SESSION_BACKENDS
from akk.cli import records
from akk.cli.errors import CliError
from akk.mcp import command as mcp_command
from akk.qualify.parallel import PARALLEL
from akk.store.retention_days import DEFAULT_DAYS

if TYPE_CHECKING:
    from akk.profiles.registry import Registry


def main(argv: Sequence[str] | None = None, *, registry: Registry | None = None) -> int:
    """Entry point of the `akk` console script.

    `registry` is the pinned set `akk qualify` reads new versions with (None: `PINNED`;
    tests take a pinned version as new with ``PINNED.without(agent, version)``).
    """
    args = parser().parse_args(argv)
    args.registry = registry
    try:
        result: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if not _report(exc):
            raise
        return 2
    return result


def _report(exc: Exception) -> bool:
    """Print ``exc`` as `akk: <what>` if it is a failure a command explains, else False.

    The types are imported here, once a command failed: their modules import trio and
    apsw, which the command line and the light commands do without, and the module
    that raised ``exc`` is loaded by now anyway.
    """
    from akk.cli.text import err, shown
    from akk.client import AkkError, ConnectError
    from akk.server.instance import InstanceError
    from akk.store.credentials import CredentialError
    from akk.store.database import StoreError
    from akk.store.location import StateDirError
    from akk.workspace_roots import RootError

    explained = (
        CliError,
        StateDirError,
        StoreError,
        ConnectError,
        InstanceError,
        CredentialError,
        RootError,
    )
    if isinstance(exc, explained):
        err.print(shown(f"akk: {exc}"))
    elif isinstance(exc, AkkError):
        err.print(shown(f"akk: the server said {exc.reason}: {exc.message}"))
    else:
        return False
    return True


def _deferred(name: str, *bound: Any) -> Callable[[argparse.Namespace], int]:
    """The command function ``module:function``, imported only when the command runs;
    ``bound`` goes before the parsed arguments."""
    module, _, function = name.partition(":")

    def run(args: argparse.Namespace) -> int:
        result: int = getattr(importlib.import_module(module), function)(*bound, args)
        return result

    return run


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="akk",
        description="AKK's operator CLI: run the supervisor, manage credentials and client "
        "versions, and drive or inspect the terminals, Turns and Watches it supervises.",
        epilog="`akk COMMAND --help` explains one command; docs/cli.md has them all.",
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, run: str, help_text: str, *bound: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(run=_deferred(run, *bound))
        return sub

    serving = command("serve", "akk.cli.serve:run", "run the supervisor and its WebSocket endpoint")
    _state_dir_option(serving)
    _serve_options(serving)
    _codex_options(serving)
    _claude_options(serving)
    serving.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])

    token = command(
        "token",
        "akk.cli.tokens:show",
        "print the operator CLI's own credential; `token create|list|revoke` manage controllers'",
    )
    _state_dir_option(token)
    actions = token.add_subparsers(metavar="ACTION")
    create = actions.add_parser("create", help="mint a credential for controller NAME (shown once)")
    create.set_defaults(run=_deferred("akk.cli.tokens:create"))
    create.add_argument("name", help="the controller_id the credential is bound to")
    create.add_argument(
        "--workspace-root",
        action="append",
        default=[],
        metavar="DIR",
        help="narrow the credential to panes and backend workspaces under DIR (repeatable)",
    )
    list_tokens = actions.add_parser("list", help="the controllers that hold a credential")
    list_tokens.set_defaults(run=_deferred("akk.cli.tokens:list_credentials"))
    revoke = actions.add_parser("revoke", help="revoke NAME's credential and close its connections")
    revoke.set_defaults(run=_deferred("akk.cli.tokens:revoke"))
    revoke.add_argument("name")
    for sub in (create, list_tokens, revoke):
        _state_dir_option(sub)
        sub.add_argument("--json", action="store_true", help="print one JSON object")

    qualifying = command(
        "qualify",
        "akk.cli.qualify:run",
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
        default=PARALLEL,
        help=f"plan runs at a time (default {PARALLEL})",
    )

    check = command(
        "doctor",
        "akk.cli.doctor:report",
        "check tmux, the state directory, the store, the port and Codex",
    )
    _state_dir_option(check)
    check.add_argument("--port", type=int, default=7878)
    _codex_options(check)

    pruning = command(
        "gc", "akk.cli.gc:run", "prune settled records now, as retention does (docs/retention.md)"
    )
    _state_dir_option(pruning)
    pruning.add_argument(
        "--older-than",
        type=_days,
        metavar="DAYS",
        help="prune what settled more than DAYS ago (default: the server's --retain-days, "
        f"else {DEFAULT_DAYS:g})",
    )
    pruning.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
    )
    pruning.add_argument("--json", action="store_true", help="print one JSON object")

    console = command(
        "ui", "akk.cli.ui:run", "print (--open: open) a one-time link to the operator console"
    )
    _state_dir_option(console)
    console.add_argument("--open", action="store_true", help="open the link in a browser too")

    lister = command(
        "list", "akk.cli.listing:terminals", "list the terminals the running server sees"
    )
    _state_dir_option(lister)
    lister.add_argument("--json", action="store_true", help="print the raw result as JSON")

    send = command(
        "send",
        "akk.cli.turns:send",
        "send a task, as akk-cli, into an idle terminal's composer, or with --scope through "
        "the backend session that task and role own",
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
        type=_scope,
        metavar="TASK/ROLE[/UNIT]",
        help="send through this task and role's own session on --backend, no terminal",
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
        help="with --scope: start a new session, HANDOFF (your summary so far) before the task",
    )
    send.add_argument("--id", dest="client_request_id", help="client_request_id (default: random)")
    send.add_argument("--wait", action="store_true", help="follow the Turn to its outcome")
    send.add_argument("--json", action="store_true", help="print JSON")

    status = command(
        "status",
        "akk.cli.turns:status",
        "show one Turn or Watch (stages, evidence, outcome, usage), or one terminal; and what "
        "its agent asks now, with the screen's last lines",
    )
    _state_dir_option(status)
    status.add_argument(
        "record",
        metavar="ID",
        help="a turn_id or watch_id; or a terminal: its terminal_id or pane, e.g. %%3",
    )
    status.add_argument("--json", action="store_true", help="print the raw result as JSON")

    follow_up = command(
        "respond",
        "akk.cli.turns:respond",
        "send a Turn's next round (a follow-up in the same conversation), as akk-cli, once "
        "its outcome arrived and its agent is idle again",
    )
    _state_dir_option(follow_up)
    follow_up.add_argument("turn_id", metavar="TURN_ID", help="the settled Turn's turn_id")
    follow_up.add_argument("text", help="the follow-up; `-` reads it from standard input")
    follow_up.add_argument(
        "--id",
        dest="client_request_id",
        help="client_request_id (default: random); the same id again types nothing",
    )
    follow_up.add_argument("--wait", action="store_true", help="follow the round to its outcome")
    follow_up.add_argument("--json", action="store_true", help="print JSON")

    answer = command(
        "answer",
        "akk.cli.answer:run",
        "answer what a Turn's agent asks (a question, a permission) yourself, choosing from "
        "what it shows; AKK sends your choice once, only to the prompt you saw",
    )
    _state_dir_option(answer)
    answer.add_argument(
        "record", metavar="ID", help="a turn_id; or a terminal: its terminal_id or pane, e.g. %%3"
    )

    listed = command(
        "sessions",
        "akk.cli.listing:sessions",
        "list the backend sessions: owner, backend, scope, decision",
    )
    _state_dir_option(listed)
    listed.add_argument("--json", action="store_true", help="print the sessions as JSON")

    events = command("events", "akk.cli.turns:events", "follow akk-cli's events live, acking each")
    _state_dir_option(events)
    events.add_argument("--json", action="store_true", help="one JSON object per line")

    for spec in records.COMMANDS:
        record = command(spec.name, "akk.cli.record_calls:run", spec.help, spec)
        _state_dir_option(record)
        records.add_arguments(record, spec)

    command("schema", "akk.cli.schema:run", "print the JSON Schema of the controller protocol")

    bridge = command(
        "mcp", "akk.mcp.command:run", "serve the controller protocol to MCP hosts (stdio)"
    )
    _state_dir_option(bridge)
    mcp_command.add_arguments(bridge)

    screen = commands.add_parser("screen", help="classify a screen as AKK sees it")
    screens = screen.add_subparsers(required=True, metavar="SUBCOMMAND")
    from_file = screens.add_parser("classify", help="classify a capture-pane -p -e file")
    from_file.set_defaults(run=_deferred("akk.cli.classify:classify_file"))
    from_file.add_argument("file", help="a `tmux capture-pane -p -e` capture (e.g. a fixture)")
    from_file.add_argument("--agent", required=True, choices=["claude", "codex"])
    from_file.add_argument("--version", required=True, help="the exact client version")
    from_file.add_argument("--cols", type=int, required=True)
    from_file.add_argument("--rows", type=int, required=True)
    live = screens.add_parser("capture", help="capture and classify a live tmux pane")
    live.set_defaults(run=_deferred("akk.cli.classify:capture"))
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


def _serve_options(parser: argparse.ArgumentParser) -> None:
    """`akk serve`'s own options: the endpoint, its limits, the tmux servers and the Turns.

    The numbers without a default here take the service's own (`akk.config`,
    `RetentionSettings`) when not given: `serve.run` passes only what was given, so the
    command line does not import the service to show its help.
    """
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default loopback; beyond it needs --tls-cert and --tls-key)",
    )
    parser.add_argument("--port", type=int, default=7878, help="port (0 picks a free one)")
    parser.add_argument("--tls-cert", metavar="FILE", help="serve wss:// with this PEM chain")
    parser.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    parser.add_argument(
        "--insecure-listen-anywhere",
        action="store_true",
        help="allow plaintext ws:// beyond loopback (credentials readable on the network)",
    )
    parser.add_argument(
        "--workspace-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory backend workspaces may lie under (repeatable; default your home; "
        "/ and system directories are refused, see docs/security.md)",
    )
    parser.add_argument(
        "--auto-qualify",
        action="store_true",
        help="qualify each newly seen unpinned client binary in the background, one at a time "
        "at the lowest priority, and bind it only once qualified (docs/qualify.md)",
    )
    parser.add_argument(
        "--max-frame-bytes",
        type=int,
        help="largest request frame accepted, in bytes",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        help="controller connections held at once (lowered to fit `ulimit -n`)",
    )
    parser.add_argument(
        "--max-handshakes",
        type=int,
        help="upgrades in progress at once; past it the oldest is dropped",
    )
    parser.add_argument(
        "--tmux-socket",
        action="append",
        default=[],
        metavar="PATH",
        help="also watch the tmux server at PATH (repeatable; the default one is always watched)",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        help="seconds between pane listings per tmux server",
    )
    parser.add_argument(
        "--inactivity-minutes",
        type=float,
        help="a Turn with no activity this long is `stalled`",
    )
    parser.add_argument(
        "--lifetime-minutes",
        type=float,
        help="a Turn running this long is `timed_out`",
    )
    parser.add_argument(
        "--accept-seconds",
        type=float,
        help="after Enter, how long the agent has to show it took the task (else uncertain)",
    )
    parser.add_argument(
        "--retain-days",
        type=_days,
        metavar="DAYS",
        help="prune settled, delivered Turns and Watches older than this (a fraction is fine; "
        "docs/retention.md)",
    )
    parser.add_argument(
        "--prune-every",
        type=_seconds,
        metavar="SECONDS",
        help="seconds between retention passes (the first runs at start)",
    )
    parser.add_argument(
        "--offer-minutes",
        type=float,
        help="how long a prompt shown by status may be answered before status is needed again",
    )


def _days(text: str) -> float:
    """A number of days, 0 or more, fractions allowed (the type of --older-than, --retain-days)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days, 0 or more")
    return value


def _seconds(text: str) -> float:
    """A period in seconds, more than 0 (argparse type)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds, more than 0")
    return seconds


def _scope(value: str) -> dict[str, str]:
    """`--scope TASK/ROLE[/UNIT]` as the protocol's scope."""
    parts = value.split("/")
    if len(parts) not in (2, 3) or not all(part.strip() for part in parts):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not TASK/ROLE or TASK/ROLE/UNIT (e.g. fix-login/coder)"
        )
    return dict(zip(("task", "role", "unit"), parts, strict=False))
