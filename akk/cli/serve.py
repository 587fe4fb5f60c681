"""`akk serve`: the supervisor and its endpoint, configured from the command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TypeVar

import trio

from akk.actors.pruner import RetentionSettings
from akk.cli.errors import CliError
from akk.cli.gc import days
from akk.cli.text import LogFormatter, printable
from akk.config import EndpointLimits, ServiceConfig, TlsFiles, TurnSettings
from akk.server.endpoint import ListenError
from akk.server.instance import Endpoint, InstanceError
from akk.service import serve_until_signal
from akk.store.database import StoreError
from akk.store.location import StateDir, StateDirError
from akk.tmux.activity import DEFAULT_INTERVAL
from akk.tmux.control import default_socket
from akk.workspace_roots import RootError

E = TypeVar("E", bound=BaseException)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`akk serve`'s own options: the endpoint, its limits, the tmux servers and the Turns."""
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
    defaults = EndpointLimits()
    parser.add_argument(
        "--max-frame-bytes",
        type=int,
        default=defaults.max_frame_bytes,
        help="largest request frame accepted, in bytes",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        help="controller connections held at once (lowered to fit `ulimit -n`)",
    )
    parser.add_argument(
        "--max-handshakes",
        type=int,
        default=defaults.max_handshakes,
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
        default=DEFAULT_INTERVAL,
        help="seconds between pane listings per tmux server",
    )
    turn_defaults = TurnSettings()
    parser.add_argument(
        "--inactivity-minutes",
        type=float,
        default=turn_defaults.inactivity_minutes,
        help="a Turn with no activity this long is `stalled`",
    )
    parser.add_argument(
        "--lifetime-minutes",
        type=float,
        default=turn_defaults.lifetime_minutes,
        help="a Turn running this long is `timed_out`",
    )
    parser.add_argument(
        "--accept-seconds",
        type=float,
        default=turn_defaults.accept_seconds,
        help="after Enter, how long the agent has to show it took the task (else uncertain)",
    )
    retention_defaults = RetentionSettings()
    parser.add_argument(
        "--retain-days",
        type=days,
        default=retention_defaults.retain_days,
        metavar="DAYS",
        help="prune settled, delivered Turns and Watches older than this (a fraction is fine; "
        "docs/retention.md)",
    )
    parser.add_argument(
        "--prune-every",
        type=_seconds,
        default=retention_defaults.prune_every,
        metavar="SECONDS",
        help="seconds between retention passes (the first runs at start)",
    )
    parser.add_argument(
        "--offer-minutes",
        type=float,
        default=turn_defaults.offer_minutes,
        help="how long a prompt shown by status may be answered before status is needed again",
    )


def run(args: argparse.Namespace) -> int:
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
        limits=EndpointLimits(
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
        claude_bin=args.claude_bin,
        claude_config_dir=None if args.claude_config_dir is None else str(args.claude_config_dir),
        retention=RetentionSettings(retain_days=args.retain_days, prune_every=args.prune_every),
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


def _seconds(text: str) -> float:
    """A period in seconds, more than 0 (argparse type)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds, more than 0")
    return seconds


def _leaves(group: BaseExceptionGroup[E]) -> list[E]:
    """The exceptions inside a (possibly nested) group, depth first."""
    found: list[E] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found
