"""The operator CLI: serve, token, qualify, doctor, list, sessions, send, status, events, schema,
screen, and the record commands (watch, unwatch, close, renew, recover, retry-callback).

Every failure prints what went wrong and what to do, and exits non-zero.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import logging
import os
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any, TypeVar

import apsw
import attrs
import trio
from rich.console import Console
from rich.control import Control
from rich.segment import ControlType
from rich.table import Table

from akk import classify, cli_records, doctor
from akk.actors.watcher import default_socket
from akk.auth import CredentialError
from akk.cli_records import RecordCommand
from akk.cli_text import LogFormatter, json_text, printable, shown
from akk.client import AkkError, ConnectError, Controller, connect
from akk.config import ServiceConfig, TurnSettings
from akk.instance import Endpoint, InstanceError, acquire, proven_endpoint, server_running
from akk.profiles.registry import PINNED, Registry
from akk.protocol.redaction import redact
from akk.protocol.schema import protocol_schema
from akk.qualify import command, qualification
from akk.server import Limits, ListenError, TlsFiles
from akk.service import serve_until_signal
from akk.store import credentials, qualifications
from akk.store.database import StoreError, open_store
from akk.store.location import StateDir, StateDirError
from akk.tmux.activity import DEFAULT_INTERVAL
from akk.workspace_roots import RootError, check_roots

E = TypeVar("E", bound=BaseException)
T = TypeVar("T")

_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False, soft_wrap=True)

APP_SERVER_BACKEND = "codex_app_server"
"""The one backend a --scope send goes through."""


class CliError(Exception):
    """A failure to report as `akk: <what>` and exit 2."""


def main(argv: Sequence[str] | None = None, *, registry: Registry = PINNED) -> int:
    """Entry point of the `akk` console script.

    `registry` is the pinned set `akk qualify` reads new versions with (tests take
    a pinned version as new with ``PINNED.without(agent, version)``).
    """
    args = _parser().parse_args(argv)
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
        _err.print(shown(f"akk: {exc}"))
        return 2
    except AkkError as exc:
        _err.print(shown(f"akk: the server said {exc.reason}: {exc.message}"))
        return 2
    except KeyboardInterrupt:
        return 130
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="akk", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, run: Any, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(run=run)
        return sub

    serve = command("serve", _serve, "run the supervisor and its WebSocket endpoint")
    _state_dir_option(serve)
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default loopback; beyond it needs --tls-cert and --tls-key)",
    )
    serve.add_argument("--port", type=int, default=7878, help="port (0 picks a free one)")
    serve.add_argument("--tls-cert", metavar="FILE", help="serve wss:// with this PEM chain")
    serve.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    serve.add_argument(
        "--insecure-listen-anywhere",
        action="store_true",
        help="allow plaintext ws:// beyond loopback (credentials readable on the network)",
    )
    serve.add_argument(
        "--workspace-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory backend workspaces may lie under (repeatable; default your home; "
        "/ and system directories are refused, see docs/security.md)",
    )
    serve.add_argument(
        "--auto-qualify",
        action="store_true",
        help="qualify each newly seen unpinned client binary in the background, one at a time "
        "at the lowest priority, and bind it only once qualified (docs/qualify.md)",
    )
    defaults = Limits()
    serve.add_argument(
        "--max-frame-bytes",
        type=int,
        default=defaults.max_frame_bytes,
        help="largest request frame accepted, in bytes",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        help="controller connections held at once (lowered to fit `ulimit -n`)",
    )
    serve.add_argument(
        "--max-handshakes",
        type=int,
        default=defaults.max_handshakes,
        help="upgrades in progress at once; past it the oldest is dropped",
    )
    serve.add_argument(
        "--tmux-socket",
        action="append",
        default=[],
        metavar="PATH",
        help="also watch the tmux server at PATH (repeatable; the default one is always watched)",
    )
    serve.add_argument(
        "--poll-interval",
        type=float,
        default=DEFAULT_INTERVAL,
        help="seconds between pane listings per tmux server",
    )
    turn_defaults = TurnSettings()
    serve.add_argument(
        "--inactivity-minutes",
        type=float,
        default=turn_defaults.inactivity_minutes,
        help="a Turn with no activity this long is `stalled`",
    )
    serve.add_argument(
        "--lifetime-minutes",
        type=float,
        default=turn_defaults.lifetime_minutes,
        help="a Turn running this long is `timed_out`",
    )
    serve.add_argument(
        "--accept-seconds",
        type=float,
        default=turn_defaults.accept_seconds,
        help="after Enter, how long the agent has to show it took the task (else uncertain)",
    )
    serve.add_argument(
        "--offer-minutes",
        type=float,
        default=turn_defaults.offer_minutes,
        help="how long a prompt shown by status may be answered before status is needed again",
    )
    _codex_options(serve)
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])

    token = command(
        "token",
        _token,
        "print the operator CLI's own credential; `token create|list|revoke` manage controllers'",
    )
    _state_dir_option(token)
    tokens = token.add_subparsers(metavar="ACTION")
    create = tokens.add_parser("create", help="mint a credential for controller NAME (shown once)")
    create.set_defaults(run=_token_create)
    create.add_argument("name", help="the controller_id the credential is bound to")
    create.add_argument(
        "--workspace-root",
        action="append",
        default=[],
        metavar="DIR",
        help="narrow the credential to panes and backend workspaces under DIR (repeatable)",
    )
    list_tokens = tokens.add_parser("list", help="the controllers that hold a credential")
    list_tokens.set_defaults(run=_token_list)
    revoke = tokens.add_parser("revoke", help="revoke NAME's credential and close its connections")
    revoke.set_defaults(run=_token_revoke)
    revoke.add_argument("name")
    for sub in (create, list_tokens, revoke):
        _state_dir_option(sub)
        sub.add_argument("--json", action="store_true", help="print one JSON object")

    qualify = command(
        "qualify",
        _qualify,
        "qualify an unpinned client version on this machine; --list and --revoke the qualified",
    )
    qualify.add_argument(
        "agent", nargs="?", choices=["claude", "codex"], help="the client to qualify"
    )
    qualify.add_argument(
        "--binary", metavar="PATH", help="the exact binary to qualify (default: what panes run)"
    )
    _state_dir_option(qualify)
    qualify.add_argument("--json", action="store_true", help="print JSON")
    qualify.add_argument("--list", action="store_true", help="the qualified versions, and why not")
    qualify.add_argument(
        "--revoke",
        nargs=2,
        metavar=("AGENT", "VERSION"),
        help="revoke AGENT VERSION's qualification (its panes are unsupported again)",
    )
    qualify.add_argument(
        "--parallel",
        type=int,
        default=qualification.PARALLEL,
        help=f"plan runs at a time (default {qualification.PARALLEL})",
    )

    check = command(
        "doctor", _doctor, "check tmux, the state directory, the store, the port and Codex"
    )
    _state_dir_option(check)
    check.add_argument("--port", type=int, default=7878)
    _codex_options(check)

    listing = command("list", _list, "list the terminals the running server sees")
    _state_dir_option(listing)
    listing.add_argument("--json", action="store_true", help="print the raw result as JSON")

    send = command(
        "send",
        _send,
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
        type=_scope,
        metavar="TASK/ROLE[/UNIT]",
        help="send through this task and role's own session (app-server backend), no terminal",
    )
    send.add_argument(
        "--backend",
        choices=[APP_SERVER_BACKEND],
        help=f"the backend of a --scope send (default and only one: {APP_SERVER_BACKEND})",
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

    status = command("status", _status, "show one Turn or Watch: stages, evidence, outcome, usage")
    _state_dir_option(status)
    status.add_argument("record", metavar="ID", help="a turn_id or watch_id")
    status.add_argument("--json", action="store_true", help="print the raw result as JSON")

    listed = command(
        "sessions", _sessions, "list the app-server sessions: owner, scope, thread, decision"
    )
    _state_dir_option(listed)
    listed.add_argument("--json", action="store_true", help="print the sessions as JSON")

    events = command("events", _events, "follow akk-cli's events live, acking each")
    _state_dir_option(events)
    events.add_argument("--json", action="store_true", help="one JSON object per line")

    for spec in cli_records.COMMANDS:
        record = command(spec.name, functools.partial(_record, spec), spec.help)
        _state_dir_option(record)
        cli_records.add_arguments(record, spec)

    command("schema", _schema, "print the JSON Schema of the controller protocol")

    screen = commands.add_parser("screen", help="classify a screen as AKK sees it")
    screens = screen.add_subparsers(required=True, metavar="SUBCOMMAND")
    from_file = screens.add_parser("classify", help="classify a capture-pane -p -e file")
    from_file.set_defaults(run=_screen_classify)
    from_file.add_argument("file", help="a `tmux capture-pane -p -e` capture (e.g. a fixture)")
    from_file.add_argument("--agent", required=True, choices=["claude", "codex"])
    from_file.add_argument("--version", required=True, help="the exact client version")
    from_file.add_argument("--cols", type=int, required=True)
    from_file.add_argument("--rows", type=int, required=True)
    live = screens.add_parser("capture", help="capture and classify a live tmux pane")
    live.set_defaults(run=_screen_capture)
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


def _state_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        help="state directory (default: $AKK_STATE_DIR, else $XDG_STATE_HOME/akk)",
    )


def _serve(args: argparse.Namespace) -> int:
    handler = logging.StreamHandler()
    handler.setFormatter(LogFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    if (args.tls_cert is None) != (args.tls_key is None):
        raise CliError("--tls-cert and --tls-key go together: pass both PEM files")
    tls = None if args.tls_cert is None else TlsFiles(args.tls_cert, args.tls_key)
    config = ServiceConfig(
        state=StateDir.resolve(args.state_dir),
        host=args.host,
        port=args.port,
        tls=tls,
        insecure_listen_anywhere=args.insecure_listen_anywhere,
        workspace_roots=tuple(args.workspace_root) or None,
        auto_qualify=args.auto_qualify,
        limits=Limits(
            max_frame_bytes=args.max_frame_bytes,
            max_connections=args.max_connections,
            max_handshakes=args.max_handshakes,
        ),
        tmux_sockets=(default_socket(), *(os.path.abspath(p) for p in args.tmux_socket)),
        poll_interval=args.poll_interval,
        turns=TurnSettings(
            inactivity_minutes=args.inactivity_minutes,
            lifetime_minutes=args.lifetime_minutes,
            accept_seconds=args.accept_seconds,
            offer_minutes=args.offer_minutes,
        ),
        codex_bin=args.codex_bin,
        codex_home=None if args.codex_home is None else str(args.codex_home),
    )

    def ready(endpoint: Endpoint) -> None:
        bound = "" if endpoint.host in endpoint.url else f", bound to {endpoint.host or '*'}"
        # One unwrapped line: scripts read the URL from it.
        line = f"akk serve: listening on {endpoint.url} (state {config.state.path}{bound})"
        print(printable(line))
        sys.stdout.flush()

    try:
        trio.run(serve_until_signal, config, ready)
    except* (ListenError, InstanceError, StateDirError, StoreError, RootError) as group:
        raise CliError(str(_leaves(group)[0])) from None
    return 0


def _leaves(group: BaseExceptionGroup[E]) -> list[E]:
    """The exceptions inside a (possibly nested) group, depth first."""
    found: list[E] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def _token(args: argparse.Namespace) -> int:
    _out.print(shown(StateDir.resolve(args.state_dir).token()))
    return 0


def _token_create(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if server_running(state):
        params: dict[str, Any] = {"controller_id": args.name}
        if args.workspace_root:
            params["workspace_roots"] = [os.path.abspath(p) for p in args.workspace_root]
        result = _operator_call(state, "token_create", params)
    else:
        roots = check_roots(os.path.abspath(p) for p in args.workspace_root)
        minted = _offline_write(
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
        _err.print(
            shown(f"credential for controller {result['controller_id']!r}; it is shown only now")
        )
    return 0


def _token_list(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if server_running(state):
        rows: list[dict[str, Any]] = _operator_call(state, "token_list", {})["credentials"]
    else:
        rows = _offline_write(state, lambda conn, now: credentials.listing(conn))
    if args.json:
        print(json_text({"credentials": rows}))
        return 0
    table = Table(
        "controller", "created", "last used", "connected", "workspace roots", title="credentials"
    )
    for row in rows:
        cells = (
            row["controller_id"],
            _when(row["created_at"]),
            _when(row["last_used_at"]),
            {True: "yes", False: "no", None: "-"}[row.get("connected")],
            ", ".join(row["workspace_roots"]) or "(the server's)",
        )
        table.add_row(*map(shown, cells))
    _out.print(table)
    return 0


def _token_revoke(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if server_running(state):
        result = _operator_call(state, "token_revoke", {"controller_id": args.name})
    else:
        if not _offline_write(
            state, lambda conn, now: credentials.revoke(conn, args.name, now, actor="akk-cli")
        ):
            raise CliError(
                f"controller {args.name!r} has no credential; `akk token list` shows them"
            )
        result = {"controller_id": args.name, "revoked": True, "connections_closed": 0}
    if args.json:
        print(json_text(result))
    else:
        _out.print(
            shown(
                f"revoked {result['controller_id']}'s credential; "
                f"closed {result['connections_closed']} connection(s)"
            )
        )
    return 0


def _qualify(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    if (args.list or args.revoke) and (args.agent or args.binary):
        raise CliError("--list and --revoke take no AGENT or --binary; run them on their own")
    if args.list and args.revoke:
        raise CliError("pass --list or --revoke, not both")
    if args.list:
        return _qualify_list(state, args.json)
    if args.revoke:
        agent, version = args.revoke
        if agent not in qualifications.AGENTS:
            raise CliError(f"--revoke takes claude or codex, then the version; not {agent!r}")
        return _qualify_revoke(state, agent, version, as_json=args.json)
    if args.agent is None:
        raise CliError("name the client to qualify (`akk qualify claude`), or pass --list")
    paths = [Path(args.binary)] if args.binary else command.candidates(args.agent, state)
    if not paths:
        raise CliError(
            f"no {args.agent} binary to qualify: no unbound pane of the server runs one and "
            f"`{args.agent}` is not on PATH; pass --binary PATH"
        )
    registry: Registry = args.registry
    attempts = command.run(
        args.agent,
        paths,
        registry,
        parallel=args.parallel,
        progress=lambda line: _err.print(shown(line)),
    )
    status = 0
    shown_results: list[dict[str, Any]] = []
    for attempt in attempts:
        judged = attempt.judgement
        if attempt.error is not None:
            status = 2
            shown_results.append({"binary": str(attempt.path), "state": "error",
                                  "error": attempt.error})  # fmt: skip
            _err.print(shown(f"akk: {attempt.path}: {attempt.error}"))
        elif attempt.pinned is not None:
            found = attempt.pinned
            shown_results.append({"binary": str(found.path), "state": "pinned",
                                  "version": found.version})  # fmt: skip
            if not args.json:
                _out.print(shown(f"{found.agent} {found.version} at {found.path} is pinned: "
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
                _out.print(shown(judged.text()), end="", soft_wrap=True)
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
        result: dict[str, Any] = _operator_call(state, "qualification_record", params)
        return result
    try:
        _offline_write(
            state,
            lambda conn, now: qualifications.record(
                conn, row, registry.base_agents, actor="akk-cli"
            ),
        )
    except qualifications.QualificationError as exc:
        raise CliError(f"{exc}; nothing was recorded") from None
    return row.to_json()


def _qualify_list(state: StateDir, as_json: bool) -> int:
    if server_running(state):
        listed: dict[str, Any] = _operator_call(state, "qualification_list", {})
        rows: list[dict[str, Any]] = listed["qualifications"]
    else:
        rows = _offline_write(
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
                row["binary_sha256"][:16] + "…", _when(row["qualified_at"]),
            )  # fmt: skip
        else:
            cells = (row["agent"], row["version"], "MALFORMED", row["reason"], "-", "-")
        table.add_row(*map(shown, cells))
    _out.print(table)
    return 0


def _qualify_revoke(state: StateDir, agent: str, version: str, *, as_json: bool) -> int:
    if server_running(state):
        result = _operator_call(state, "qualification_revoke", {"agent": agent, "version": version})
    else:
        if not _offline_write(
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
        _out.print(shown(f"revoked the qualification of {agent} {version}; its panes are "
                         "unsupported again"))  # fmt: skip
    return 0


def _offline_write(state: StateDir, work: Callable[[apsw.Connection, float], T]) -> T:
    """Run ``work`` in one transaction while holding the state directory (no server runs)."""
    state.ensure()
    try:
        lock = acquire(state, wait=0)
    except InstanceError:
        raise CliError(
            f"`akk serve` started for {state.path} meanwhile; run the command again"
        ) from None
    with lock:
        conn = open_store(state.store_path)
        try:
            with conn:
                result = work(conn, time.time())
        finally:
            conn.close()
    return result


def _operator_call(state: StateDir, method: str, params: dict[str, Any]) -> Any:
    """Call ``method`` on the proven running server with the operator credential."""
    return _operator_session(state, lambda ctl: ctl.call(method, params))


def _operator_session(state: StateDir, work: Callable[[Controller], Awaitable[T]]) -> T:
    """Run ``work`` on one operator connection to the proven running server (10 s in all)."""
    token = state.token()

    async def run() -> T:
        with trio.fail_after(10):
            endpoint = await proven_endpoint(state)
            async with connect(endpoint.url, token, ssl_context=endpoint.tls_context()) as ctl:
                return await work(ctl)

    return trio.run(run)


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "never"
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M")


def _doctor(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    codex = doctor.CodexOptions(binary=args.codex_bin, home=args.codex_home)
    checks = doctor.run_checks(state, args.port, codex)
    if server_running(state):
        checks.extend(doctor.server_checks(_operator_call(state, "doctor", {})))
    table = Table("check", "", "detail", "what to do", box=None)
    for check in checks:
        verdict = "ok" if check.ok else "FAIL"
        table.add_row(*map(shown, (check.name, verdict, check.detail, check.next_step)))
    _out.print(table)
    return 0 if all(check.ok for check in checks) else 1


def _list(args: argparse.Namespace) -> int:
    result: dict[str, Any] = _operator_call(StateDir.resolve(args.state_dir), "list", {})
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
            row["profile"] or f"none ({row.get('profile_reason') or 'unknown'})",
            row["activity_state"],
            # The server redacts already; the table is one more place text leaves it.
            redact(str(row.get("asks") or "")),
        )
        table.add_row(*map(shown, cells))
    _out.print(table)
    for title, records in (("turns", result["turns"]), ("watches", result["watches"])):
        if records:
            _out.print(_records_table(title, records))
    return 0


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


def _sessions(args: argparse.Namespace) -> int:
    result: dict[str, Any] = _operator_call(StateDir.resolve(args.state_dir), "list", {})
    rows: list[dict[str, Any]] = result.get("sessions", [])
    if args.json:
        print(json_text({"sessions": rows}))
    elif rows:
        _out.print(_sessions_table(rows))
    else:
        _out.print(shown("no sessions; `akk send --scope TASK/ROLE TEXT` starts one"))
    return 0


def _sessions_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(
        "owner", "task", "unit", "role", "thread", "decision", "reason", "state", "gen",
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


def _scope(value: str) -> dict[str, str]:
    """`--scope TASK/ROLE[/UNIT]` as the protocol's scope."""
    parts = value.split("/")
    if len(parts) not in (2, 3) or not all(part.strip() for part in parts):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not TASK/ROLE or TASK/ROLE/UNIT (e.g. fix-login/coder)"
        )
    return dict(zip(("task", "role", "unit"), parts, strict=False))


def _send_target(args: argparse.Namespace) -> dict[str, Any]:
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
                "`akk send --scope TASK/ROLE[/UNIT] TEXT` (an app-server session)"
            )
        return {}
    if args.terminal is not None:
        raise CliError(
            f"--scope sends through a session, not into terminal {args.terminal!r}; leave "
            "TERMINAL out (quote the task if it has spaces)"
        )
    target: dict[str, Any] = {
        "scope": args.scope,
        "backend": args.backend or APP_SERVER_BACKEND,
        "cwd": os.path.abspath(args.cwd or os.getcwd()),
    }
    if args.handoff is not None:
        target["handoff"] = args.handoff
    return target


def _send(args: argparse.Namespace) -> int:
    target = _send_target(args)
    state = StateDir.resolve(args.state_dir)
    text = sys.stdin.read() if args.text == "-" else args.text
    request_id = args.client_request_id or "cli-" + secrets.token_hex(8)
    token = state.token()

    async def run() -> int:
        with trio.fail_after(30):
            endpoint = await proven_endpoint(state)
        async with connect(endpoint.url, token, ssl_context=endpoint.tls_context()) as ctl:
            with trio.fail_after(90):
                where = target or {"terminal_id": await _terminal_id(ctl, args.terminal)}
                sent = await ctl.call(
                    "send", where | {"request": text, "client_request_id": request_id}
                )
            if not args.wait:
                _print_sent(sent, args.json)
                return 0
            if not args.json:
                _err.print(shown(f"turn {sent['turn_id']}: {sent['state']}"))
            final = await _follow(ctl, sent["turn_id"], quiet=args.json)
        if args.json:
            print(json_text(final))
        else:
            _print_record(final["turn"])
        return 0 if final["turn"]["state"] == "done" else 1

    code: int = trio.run(run)
    return code


async def _terminal_id(ctl: Controller, wanted: str) -> str:
    rows = (await ctl.call("list"))["terminals"]
    for row in rows:
        if wanted in (row["terminal_id"], row["pane"], f"{row['tmux_socket']}:{row['pane']}"):
            return str(row["terminal_id"])
    raise CliError(f"no terminal {wanted!r}; `akk list` shows the panes AKK sees")


async def _follow(ctl: Controller, turn_id: str, *, quiet: bool) -> dict[str, Any]:
    """Wait for the Turn's outcome event (acking it), showing a live progress line."""
    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def progress() -> None:
            while not done.is_set():
                status = await ctl.call("status", {"turn_id": turn_id})
                if not quiet:
                    turn = status["turn"]
                    stages = ",".join(d["stage"] for d in status["dispatches"]) or "-"
                    # On a terminal the line redraws in place (rich strips a "\r" from text).
                    if _err.is_terminal:
                        _err.control(Control(ControlType.CARRIAGE_RETURN))
                    line = shown(f"{turn_id}: {turn['state']} (dispatch {stages})")
                    _err.print(line, end="" if _err.is_terminal else "\n")
                with trio.move_on_after(1):
                    await done.wait()

        nursery.start_soon(progress)
        async with aclosing(ctl.events()) as events:
            async for event in events:
                await ctl.ack(event["event_id"])
                if event.get("turn_id") == turn_id and event["kind"] in _OUTCOMES:
                    break
        done.set()
    if not quiet and _err.is_terminal:
        _err.print()
    result: dict[str, Any] = await ctl.call("status", {"turn_id": turn_id})
    return result


_OUTCOMES = {"done", "failed", "cancelled", "stalled", "timed_out"}


def _print_sent(sent: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json_text(sent))
    else:
        print(sent["turn_id"])
        _err.print(shown(f"state {sent['state']}; `akk status {sent['turn_id']}`"))


def _status(args: argparse.Namespace) -> int:
    result = _operator_call(
        StateDir.resolve(args.state_dir), "status", cli_records.record_ids(args.record)
    )
    if args.json:
        print(json_text(result))
        return 0
    _print_record(result["turn"] if "turn" in result else result["watch"])
    if result["dispatches"]:
        table = Table("dispatch", "kind", "stage", "reason", title="dispatches")
        for step in result["dispatches"]:
            cells = (step["dispatch_id"], step["kind"], step["stage"], step["reason"] or "")
            table.add_row(*map(shown, cells))
        _out.print(table)
    return 0


def _print_record(record: dict[str, Any]) -> None:
    """A Turn's or Watch's record as aligned lines."""
    usage = record["usage"]
    kind = "watch" if record["task_kind"] == "watch" else "turn"
    lines = [
        f"{kind + ':':<9} {record['watch_id']} ({record['controller_id']})",
        f"state:    {record['state']}" + (f" ({record['reason']})" if record["reason"] else ""),
        f"observed: {record['observation_state']}   management: {record['management_state']}   "
        f"deadline: {cli_records.iso_time(record['deadline_at'])}",
        f"terminal: {record['terminal_id']}   session: {record['session_id'] or '-'}",
        f"evidence: {record['evidence']['status']}"
        + (f" ({record['evidence']['limit']})" if record["evidence"]["limit"] else ""),
        f"usage:    in {usage['input_tokens']} out {usage['output_tokens']} "
        f"cache read {usage['cache_read_tokens']} write {usage['cache_write_tokens']} "
        f"({usage['usage_status']})",
    ]
    for line in lines:
        _out.print(shown(line))
    if record["final_message"]:
        # Its own lines are indented: none can pass for one of the record's lines above.
        message = record["final_message"].replace("\n", "\n" + " " * len("message:  "))
        _out.print(shown(f"message:  {message}", lines=True))


def _record(command: RecordCommand, args: argparse.Namespace) -> int:
    """Run one record command: its one call, then the raw result or its summary."""

    async def call(ctl: Controller) -> Any:
        target = args.target
        if command.target is cli_records.Target.TERMINAL:
            target = await _terminal_id(ctl, target)
        return await ctl.call(command.method, cli_records.params(command, target, vars(args)))

    result = _operator_session(StateDir.resolve(args.state_dir), call)
    if args.json:
        print(json_text(result))
        return 0
    for line in cli_records.summary(command, result):
        _out.print(shown(line))
    return 0


def _events(args: argparse.Namespace) -> int:
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
                    _out.print(shown(line))
                await ctl.ack(event["event_id"])

    trio.run(run)
    return 0


def _screen_classify(args: argparse.Namespace) -> int:
    try:
        capture = Path(args.file).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror}") from exc
    result = classify.classify_capture(
        capture, agent=args.agent, version=args.version, cols=args.cols, rows=args.rows,
        private=args.private,
    )  # fmt: skip
    return _print_classification(result, args.json)


def _screen_capture(args: argparse.Namespace) -> int:
    result = classify.classify_pane(args.target, socket=args.tmux_socket, private=args.private)
    return _print_classification(result, args.json)


def _print_classification(result: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json_text(result, indent=2))
        return 0
    _out.print(shown(f"state:   {result['state']}"))
    _out.print(shown(f"profile: {result['profile'] or 'none'}"))
    if result["reason"]:
        _out.print(shown(f"reason:  {result['reason']}"))
    projection = result["projection"]
    if projection is not None:
        _out.print(shown(f"asks:    {projection['kind']} step {projection['step']}"))
        for question in projection["questions"]:
            _out.print(shown(f"  {question['header'] or '-'}: {question['prompt']}"))
            for option in question["options"]:
                _out.print(shown(f"    - {option['label']}"))
    return 0


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(protocol_schema(), indent=2))
    return 0
