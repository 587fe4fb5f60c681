"""`akk serve`: the process, composed of the root supervisor and the controller server.

Lifetimes nest: process → root supervisor (store, retention, destinations and their
clock, watchers with their terminals, turns and their clock) → controller
server → one task per connection. At start, Turns left open by an earlier run
are resumed from the store before any controller can call.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from typing import Any

import apsw
import attrs
import trio

from akk.actors.destination import DestinationDesk
from akk.actors.pruner import Pruner
from akk.actors.store import StoreActor
from akk.actors.terminal_board import TerminalBoard
from akk.actors.turn_desk import TurnDesk
from akk.backends.claude_headless.backend import ClaudeHeadless
from akk.backends.claude_headless.host import RunDesk
from akk.backends.claude_headless.setup import ClaudeSetup, config_dir, find_claude
from akk.backends.codex_app_server.actor import CodexSetup
from akk.backends.codex_app_server.answers import AppServerAnswers
from akk.backends.codex_app_server.host import BackendDesk, find_codex
from akk.backends.context import BackendContext
from akk.backends.file_watch.backend import FileWatches
from akk.backends.names import FILE_WATCHES
from akk.backends.registry import Backends
from akk.backends.terminal.answers import TerminalAnswers
from akk.backends.terminal.watcher import TmuxWatcher, distinct_servers
from akk.config import ServiceConfig, TlsFiles
from akk.console.feed import ConsoleFeed
from akk.console.login import LoginBook
from akk.discovery.identity import TerminalIdentity
from akk.discovery.process import DigestCache, VersionCache
from akk.methods.common import MethodContext
from akk.methods.operator import session_backends
from akk.methods.table import Methods
from akk.profiles.qualified_versions import QualifiedVersions
from akk.profiles.registry import qualify_command
from akk.qualify.auto import AutoQualifier
from akk.runtime.supervisor import ChildSpec, Restart, Supervisor
from akk.screen.fingerprint import IdMinter
from akk.server.auth import CredentialBook
from akk.server.connections import ConnectionRegistry
from akk.server.endpoint import (
    ControllerServer,
    ListenError,
    ServerSettings,
    listen_check,
    tls_context,
)
from akk.server.instance import (
    Endpoint,
    InstanceLock,
    acquire,
    leaf_certificate,
    new_nonce,
    remove_endpoint,
    write_endpoint,
)
from akk.store import credentials, retention
from akk.store.credentials import Credential
from akk.store.database import StoreUnwritable, open_store, unwritable
from akk.store.reader import StoreReader
from akk.workspace_roots import check_roots, default_roots

log = logging.getLogger("akk.service")

DRAIN_SECONDS = 10.0
"""After the first signal: how long calls in flight may take to finish."""

SHUTDOWN_SECONDS = 30.0
"""After the first signal: the bound on the whole graceful shutdown."""


@attrs.frozen
class _Prepared:
    lock: InstanceLock
    operator_token: str
    credentials: dict[str, Credential]


def _prepare(config: ServiceConfig) -> _Prepared:
    """Take the state directory, check the store and bring it up to date.

    Runs before anything is supervised so that a refusal (another server,
    foreign directory, corrupt or newer store) stops `akk serve` at once with
    its reason instead of a restart loop.
    """
    config.state.ensure()
    lock = acquire(config.state)
    try:
        path = config.state.store_path
        conn = open_store(path)
        pruned = 0
        try:
            try:
                if retention.use_incremental_vacuum(conn):
                    log.info("the store now returns the space of deleted rows (one VACUUM, once)")
                with conn:
                    pruned = credentials.prune(conn)
            except apsw.Error as exc:
                # A full disk: serve what is recorded; the writes wait for space to return.
                cannot = unwritable(path, exc, conn.system_errno)
                if cannot is None:
                    raise
                log.warning("the store cannot write at start (%s); serving, and trying each "
                            "write again", cannot)  # fmt: skip
            with conn:
                digests = credentials.live_digests(conn)
        finally:
            conn.close()
        if pruned:
            log.info("pruned %d controller rows with no credential and no records", pruned)
        config.state.id_secret()  # a bad secret file stops the start here, with its reason
        return _Prepared(lock, config.state.token(), digests)
    except BaseException:
        lock.release()
        raise


async def run_service(
    config: ServiceConfig,
    *,
    on_ready: Callable[[Endpoint], None] = lambda endpoint: None,
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[Endpoint] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run until cancelled, or until ``stop`` is set and the calls in flight drained.

    ``task_status.started`` (and ``on_ready``) get the endpoint.

    Raises InstanceError when another server holds the state directory,
    ListenError for a host or TLS files it may not serve with, and RootError
    for a workspace root that may never be one; each before anything binds.
    """
    warning = listen_check(
        config.host, tls=config.tls is not None, insecure=config.insecure_listen_anywhere
    )
    if warning is not None:
        log.warning(warning)
    tls = None if config.tls is None else tls_context(config.tls)
    certificate = None if config.tls is None else _certificate(config.tls)
    roots = (
        default_roots() if config.workspace_roots is None else check_roots(config.workspace_roots)
    )
    prepared = _prepare(config)
    log.info("workspace roots: %s", ", ".join(roots))
    board = TerminalBoard()
    versions = VersionCache()
    book = CredentialBook(prepared.operator_token, prepared.credentials)
    connections = ConnectionRegistry()
    root = Supervisor(
        "root", children=[ChildSpec("store", lambda: StoreActor(config.state.store_path))]
    )
    reader = StoreReader(config.state.store_path)
    qualified = QualifiedVersions(config.registry, reader)
    digests = DigestCache()
    watchers: list[TmuxWatcher] = []
    endpoint: Endpoint | None = None
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            store = root.ref("store")
            pruner = Pruner(store, reader, config.state.store_path, config.retention)
            await root.start_child(ChildSpec("retention", pruner.run))
            destination_supervisor = Supervisor("destinations", max_restarts=20, period=10.0)
            destinations = DestinationDesk(
                destination_supervisor,
                store=store,
                reader=reader.run,
                sink=connections.current,
                policy=config.outbox,
            )
            turn_supervisor = Supervisor("turns", max_restarts=50, period=10.0)
            backend_supervisor = Supervisor("backends", max_restarts=5, period=30.0)
            setup = await find_codex(config.codex_bin, _codex_home(config), versions)
            if isinstance(setup, CodexSetup):
                setup = attrs.evolve(setup, env=config.codex_env, tap=config.codex_tap)
                log.info("app-server backend: codex-cli %s at %s", setup.version, setup.binary)
            else:
                log.info("app-server backend unavailable: %s", setup)
            claude = await find_claude(
                config.claude_bin, config_dir(config.claude_config_dir), versions, config.registry
            )
            if isinstance(claude, ClaudeSetup):
                claude = attrs.evolve(claude, env=config.claude_env)
                log.info("claude headless backend: %s at %s", claude.version, claude.binary)
            else:
                log.info("claude headless backend unavailable: %s", claude)
            runs = RunDesk(backend_supervisor, setup=claude, store=store)
            hosts = BackendDesk(
                backend_supervisor, setup=setup, store=store, reader=reader.run,
                cwd=str(config.state.path),
            )  # fmt: skip
            await root.start_child(ChildSpec("backends", backend_supervisor.run))
            ids = IdMinter(config.state.id_secret())
            desk = TurnDesk(
                turn_supervisor, store=store, reader=reader.run, board=board,
                notify=destinations.wake,
            )  # fmt: skip
            ctx = BackendContext(
                store=store, reader=reader, ids=ids, desk=desk, destinations=destinations,
                offer_minutes=config.turns.offer_minutes,
            )  # fmt: skip
            backends = Backends()
            backends.register(
                TerminalAnswers(ctx, board=board, accept_seconds=config.turns.accept_seconds)
            )
            backends.register(AppServerAnswers(ctx, hosts=hosts))
            backends.register(ClaudeHeadless(ctx, runs=runs, registry=config.registry))
            for agent, name in FILE_WATCHES.items():
                backends.register(FileWatches(ctx, name=name, agent=agent))
            await root.start_child(ChildSpec("destinations", destination_supervisor.run))
            await root.start_child(ChildSpec("outbox", destinations.run))
            await qualified.refresh()  # the first panes bind by the stored rows already
            await root.start_child(ChildSpec("qualifications", qualified.run))
            for socket in distinct_servers(config.tmux_sockets):
                watcher = TmuxWatcher(
                    socket, board, store, versions, digests=digests, qualified=qualified,
                    interval=config.poll_interval, notify=destinations.wake,
                )  # fmt: skip
                watchers.append(watcher)
                await root.start_child(ChildSpec(f"watcher {socket}", watcher.run))
            if config.auto_qualify:
                qualifier = AutoQualifier(board, store, qualified)
                await root.start_child(ChildSpec("auto-qualify", qualifier.run))
            await root.start_child(ChildSpec("turns", turn_supervisor.run))
            try:
                resumed = await desk.resume(backends.resumers())
            except StoreUnwritable as exc:
                # Serve what is recorded meanwhile; the open Turns follow once it writes.
                log.warning("open turns are resumed once the store writes: %s", exc)

                async def resume_when_written() -> None:
                    resumed = await desk.resume(backends.resumers(), wait=True)
                    log.info("resumed %d open turns from the store", resumed)

                spec = ChildSpec("turn resume", resume_when_written, restart=Restart.TRANSIENT)
                await root.start_child(spec)
            else:
                if resumed:
                    log.info("resumed %d open turns from the store", resumed)
            await root.start_child(ChildSpec("turn clock", desk.clock))
            nonce = new_nonce()
            server: ControllerServer

            def health() -> dict[str, Any]:
                return {
                    "pid": os.getpid(),
                    "server": attrs.asdict(server.stats)
                    | {"connections": server.shares.connections, "calls": server.shares.calls},
                    "limits": attrs.asdict(server_settings.limits),
                    "connected_controllers": connections.live,
                    "credentials": len(book),
                    "workspace_roots": list(roots),
                    "tls": tls is not None,
                    "backends": session_backends(
                        runs.setup,
                        config_dir(config.claude_config_dir),
                        hosts.setup,
                        _codex_home(config),
                    ),
                    "watchers": [watcher.health.report() for watcher in watchers],
                    "unbound_terminals": [
                        _unbound(snapshot.identity)
                        for snapshot in board
                        if snapshot.identity.profile is None
                    ],
                    "supervisor": {
                        "restarts": dict(root.stats.restarts),
                        "escalations": root.stats.escalations,
                    },
                }

            logins = LoginBook()
            console = ConsoleFeed(board, reader, lambda: [w.health.report() for w in watchers])
            await root.start_child(ChildSpec("console", console.run))
            methods = Methods(
                MethodContext(
                    store=store, reader=reader, board=board, ids=ids, desk=desk,
                    destinations=destinations, settings=config.turns, backends=backends,
                    session_limits=config.sessions, workspace_roots=roots,
                    book=book, connections=connections, health=health, qualified=qualified,
                    pruner=pruner, logins=logins, console=console,
                )
            )  # fmt: skip
            server_settings = ServerSettings(
                host=config.host, port=config.port, limits=config.limits.fit_descriptors(),
                tls=tls,
            )  # fmt: skip
            server = ControllerServer(
                server_settings, methods, book=book, connections=connections, nonce=nonce,
                logins=logins,
            )  # fmt: skip
            port = await nursery.start(server.serve)
            endpoint = Endpoint(
                config.host, port, os.getpid(), nonce,
                scheme="ws" if tls is None else "wss", certificate=certificate,
            )  # fmt: skip
            write_endpoint(config.state, endpoint)
            on_ready(endpoint)
            task_status.started(endpoint)
            if stop is not None:
                await stop.wait()
                await server.drain(DRAIN_SECONDS)
                nursery.cancel_scope.cancel()
    finally:
        reader.close()
        if endpoint is not None:
            remove_endpoint(config.state, endpoint)
        prepared.lock.release()


def _unbound(identity: TerminalIdentity) -> dict[str, Any]:
    """A terminal without a profile as `akk doctor` shows it: why, and the step to take."""
    return {
        "pane": identity.pane_id,
        "tmux_socket": identity.tmux_socket,
        "agent": identity.agent,
        "version": identity.version,
        "reason": identity.profile_reason,
        "next_step": None
        if identity.version is None
        else qualify_command(identity.agent, identity.binary),
    }


def _certificate(files: TlsFiles) -> str:
    """The leaf certificate of ``files.cert`` (what the CLI pins); raise ListenError."""
    try:
        with open(files.cert) as f:
            return leaf_certificate(f.read())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ListenError(f"cannot read a PEM certificate from {files.cert}: {exc}") from None


def _codex_home(config: ServiceConfig) -> str:
    if config.codex_home is not None:
        return config.codex_home
    return os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")


async def serve_until_signal(config: ServiceConfig, on_ready: Callable[[Endpoint], None]) -> None:
    """Run the service until SIGINT or SIGTERM, then shut down gracefully.

    The first signal stops accepting, lets the calls in flight finish (at most
    DRAIN_SECONDS), then stops every child within its shutdown timeout; the
    whole shutdown is bounded by SHUTDOWN_SECONDS. A second signal exits at
    once: everything committed is already on disk (WAL, synchronous=FULL), so
    an operator is never held hostage.
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            service = trio.CancelScope()
            stop = trio.Event()

            async def on_signals() -> None:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if not stop.is_set():
                        log.info("shutting down on %s (send it again to exit at once)", name)
                        stop.set()
                        service.deadline = trio.current_time() + SHUTDOWN_SECONDS
                    else:
                        log.warning("exiting at once on a second %s", name)
                        os._exit(128 + signum)

            nursery.start_soon(on_signals)
            with service:
                await run_service(config, on_ready=on_ready, stop=stop)
            nursery.cancel_scope.cancel()
