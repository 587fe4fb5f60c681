"""`akk serve`: the process, composed of the root supervisor and the controller server.

Lifetimes nest: process → root supervisor (store and, later, watcher, terminals,
turns, destinations) → controller server → one task per connection.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Callable

import attrs
import trio

from akk.actors.store import StoreActor
from akk.actors.supervisor import ChildSpec, Supervisor
from akk.actors.watcher import TmuxWatcher, default_socket
from akk.discovery.process import VersionCache
from akk.methods import Methods
from akk.screen.fingerprint import IdMinter
from akk.server import ControllerServer, ServerSettings
from akk.store.database import open_store
from akk.store.location import ENDPOINT_TMP_FILE, StateDir
from akk.store.reader import StoreReader
from akk.terminals import TerminalBoard
from akk.tmux.activity import DEFAULT_INTERVAL

log = logging.getLogger("akk.service")


@attrs.frozen
class ServiceConfig:
    state: StateDir
    host: str = "127.0.0.1"
    port: int = 7878
    max_frame_bytes: int = 1 << 20
    tmux_sockets: tuple[str, ...] = attrs.field(factory=lambda: (default_socket(),))
    poll_interval: float = DEFAULT_INTERVAL


@attrs.frozen
class Endpoint:
    """Where a running `akk serve` listens (written to the state directory)."""

    host: str
    port: int
    pid: int

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/v1"


def prepare(config: ServiceConfig) -> str:
    """Check the state directory and bring the store up to date; return the token.

    Runs before anything is supervised so that a refusal (foreign directory,
    newer store) stops `akk serve` at once with its reason instead of a restart loop.
    """
    config.state.ensure()
    open_store(config.state.store_path).close()
    return config.state.token()


async def run_service(
    config: ServiceConfig,
    *,
    on_ready: Callable[[Endpoint], None] = lambda endpoint: None,
    task_status: trio.TaskStatus[Endpoint] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run until cancelled; ``task_status.started`` (and ``on_ready``) get the endpoint."""
    token = prepare(config)
    board = TerminalBoard()
    versions = VersionCache()
    root = Supervisor(
        "root", children=[ChildSpec("store", lambda: StoreActor(config.state.store_path))]
    )
    reader = StoreReader(config.state.store_path)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            store = root.ref("store")
            for socket in dict.fromkeys(config.tmux_sockets):
                watcher = TmuxWatcher(socket, board, store, versions, interval=config.poll_interval)
                await root.start_child(ChildSpec(f"watcher {socket}", watcher.run))
            methods = Methods(store, reader, board, IdMinter(config.state.id_secret()))
            server = ControllerServer(
                ServerSettings(
                    token=token,
                    host=config.host,
                    port=config.port,
                    max_frame_bytes=config.max_frame_bytes,
                ),
                methods,
            )
            port = await nursery.start(server.serve)
            endpoint = Endpoint(config.host, port, os.getpid())
            _write_endpoint(config.state, endpoint)
            on_ready(endpoint)
            task_status.started(endpoint)
    finally:
        reader.close()
        config.state.endpoint_path.unlink(missing_ok=True)


async def serve_until_signal(config: ServiceConfig, on_ready: Callable[[Endpoint], None]) -> None:
    """Run the service until SIGINT or SIGTERM, then shut down gracefully.

    Children stop within their shutdown timeouts, cleanup shielded. A second
    signal during shutdown exits at once: everything committed is already on
    disk (WAL, synchronous=FULL), so an operator is never held hostage.
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            service = trio.CancelScope()

            async def on_signals() -> None:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if not service.cancel_called:
                        log.info("shutting down on %s (send it again to exit at once)", name)
                        service.cancel()
                    else:
                        log.warning("exiting at once on a second %s", name)
                        os._exit(128 + signum)

            nursery.start_soon(on_signals)
            with service:
                await run_service(config, on_ready=on_ready)
            nursery.cancel_scope.cancel()


def read_endpoint(state: StateDir) -> Endpoint | None:
    """The endpoint of the running server, or None if none is recorded."""
    try:
        data = json.loads(state.endpoint_path.read_text())
        return Endpoint(host=str(data["host"]), port=int(data["port"]), pid=int(data["pid"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def _write_endpoint(state: StateDir, endpoint: Endpoint) -> None:
    tmp = state.endpoint_path.with_name(ENDPOINT_TMP_FILE)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(attrs.asdict(endpoint), f)
    os.replace(tmp, state.endpoint_path)
