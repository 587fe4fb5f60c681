"""`akk serve`: the supervisor and its endpoint, configured from the command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, TypeVar

import trio

from akk.actors.pruner import RetentionSettings
from akk.cli.errors import CliError
from akk.cli.text import LogFormatter, printable
from akk.config import EndpointLimits, ServiceConfig, TlsFiles, TurnSettings
from akk.server.endpoint import ListenError
from akk.server.instance import Endpoint, InstanceError
from akk.service import serve_until_signal
from akk.store.database import StoreError
from akk.store.location import StateDir, StateDirError
from akk.tmux.control import default_socket
from akk.workspace_roots import RootError

E = TypeVar("E", bound=BaseException)


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
            **_given(args, "max_frame_bytes", "max_connections", "max_handshakes")
        ),
        tmux_sockets=(default_socket(), *(os.path.abspath(p) for p in args.tmux_socket)),
        **_given(args, "poll_interval"),
        turns=TurnSettings(
            **_given(
                args, "inactivity_minutes", "lifetime_minutes", "accept_seconds", "offer_minutes"
            )
        ),
        codex_bin=args.codex_bin,
        codex_home=None if args.codex_home is None else str(args.codex_home),
        claude_bin=args.claude_bin,
        claude_config_dir=None if args.claude_config_dir is None else str(args.claude_config_dir),
        retention=RetentionSettings(**_given(args, "retain_days", "prune_every")),
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


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The options among ``names`` given on the command line; the others keep the defaults of
    the settings they configure (the command line leaves them None, see `akk.cli.app`)."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _leaves(group: BaseExceptionGroup[E]) -> list[E]:
    """The exceptions inside a (possibly nested) group, depth first."""
    found: list[E] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found
