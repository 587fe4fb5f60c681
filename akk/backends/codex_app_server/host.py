"""BackendHost and BackendDesk: the lifetime of the `codex app-server` process AKK starts.

A `BackendHost` (a plain supervised task) starts the process from the
configured binary and CODEX_HOME, reads everything it says into a
`BackendBoard`, and runs the BackendActor's mailbox beside that reader; every
process is reaped before the host ends, and its exit is audited. The
`BackendDesk` starts a host on first use and says whether the backend is
available (`find_codex`: a pinned Codex, or why not).

A process that fails to start, or is the second in a row to end soon after it started,
is tried again only after START_RETRY_SECONDS, the board saying why meanwhile (a send is
refused at once with it): so a crash loop never reaches the backends supervisor's
restart limit. If that supervisor gives up all the same (its other children crash), it
drops the host; the desk starts it again on the next use, at most once every
RESTART_SECONDS.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import apsw
import trio

from akk.actors.store import transact
from akk.backends.codex_app_server import rpc, schema
from akk.backends.codex_app_server.actor import (
    BackendActor,
    BackendLost,
    BackendMessage,
    CodexSetup,
)
from akk.backends.codex_app_server.board import BackendBoard
from akk.discovery.process import NotExecutable, VersionCache, executable
from akk.protocol.redaction import redact_head
from akk.runtime.actor import ActorRef, Incarnation, Rank
from akk.runtime.supervisor import (
    ChildSpec,
    DuplicateChild,
    Restart,
    Supervisor,
    SupervisorNotRunning,
)
from akk.store import audit
from akk.store.database import StoreUnwritable

log = logging.getLogger("akk.backend")

START_RETRY_SECONDS = 30.0
"""After an app-server failed to start, how long before the next try (a slow retry never
reaches the supervisor's restart limit, so a broken Codex cannot stop `akk serve`)."""

STEADY_SECONDS = 10.0
"""A process that ended sooner than this after its start ended early. The second in a row
counts as failing to start (the next waits START_RETRY_SECONDS): one that answers
`initialize` and then exits would otherwise restart at once, six times within the
supervisor's period. One killed early once is started again at once."""

RESTART_SECONDS = 30.0
"""After the backends supervisor dropped the host (it gave up on its children), the least
time between the desk's starts of it."""


class BackendHost:
    """Runs one app-server process and its BackendActor; restarted by its supervisor.

    The ref (the mailbox) outlives each process, so asks queued during a restart
    are handled by the next one.
    """

    def __init__(
        self,
        setup: CodexSetup,
        *,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
        cwd: str,
        limits: rpc.WireLimits | None = None,
    ) -> None:
        self.setup = setup
        self.board = BackendBoard()
        self.ref = ActorRef[BackendMessage](
            setup.key, Rank.BACKEND, mailbox_size=BackendActor.mailbox_size
        )
        self._store = store
        self._reader = reader
        self._cwd = cwd
        self._limits = limits or rpc.WireLimits()
        self._early_exits = 0
        """Processes in a row that ended sooner than STEADY_SECONDS after their start."""

    async def run(self) -> None:
        board = self.board
        board.starting()
        env = dict(self.setup.env) if self.setup.env is not None else None
        began = trio.current_time()
        try:
            async with rpc.open_app_server(
                self.setup.binary, codex_home=self.setup.home, cwd=self._cwd, env=env,
                limits=self._limits, tap=self.setup.tap,
            ) as app:  # fmt: skip
                await self._serve(app)
        except rpc.StartError as exc:
            board.start_failed(str(exc))
            log.error("app-server did not start: %s", exc)
            await trio.sleep(START_RETRY_SECONDS)
            raise
        except Exception as exc:
            lived = trio.current_time() - began
            self._early_exits = self._early_exits + 1 if lived < STEADY_SECONDS else 0
            if self._early_exits > 1:
                why = (
                    f"the app-server ended {lived:.1f} s after it started ({_reason(exc)}), "
                    f"{self._early_exits} times in a row; AKK starts it again "
                    f"{START_RETRY_SECONDS:.0f} s later"
                )
                board.start_failed(why)
                log.error("%s", why)
                await trio.sleep(START_RETRY_SECONDS)
            raise

    async def _serve(self, app: rpc.AppServer) -> None:
        board = self.board
        board.started(app.pid)
        log.info("app-server pid %d started (generation %d)", app.pid, board.generation)
        actor = BackendActor(
            app, setup=self.setup, board=board, store=self._store, reader=self._reader
        )
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, app)
                await Incarnation(self.ref, actor).run()
                nursery.cancel_scope.cancel()
        finally:
            board.stopped()
            ended = await app.aclose()
            await self._record_exit(ended)

    async def _pump(self, app: rpc.AppServer) -> None:
        """Fold every notification and server request into the board, until the connection ends.

        The board holds only requests that still await an answer (`rpc.AppServer.awaiting`):
        a request resolved, or whose turn completed, leaves it with the notification that
        says so, and one settled before it was taken never joins it. Whichever of the two
        channels is read first, the board ends as the connection says; and a request joins
        it only after every notification the app-server sent before it (a file change
        approval after the item that shows its changes).
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._requests, app)
            async for note in app.notifications:
                self._fold(app, note)
        raise BackendLost(app.closed_reason or "the app-server's notifications ended")

    async def _requests(self, app: rpc.AppServer) -> None:
        # Bounded by the connection: at most Limits.server_requests await an answer.
        async for request in app.server_requests:
            while True:  # what was said before it, first (no await: `_pump` holds none)
                try:
                    self._fold(app, app.notifications.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            if app.awaiting(request.id):
                self.board.requests[request.id] = request
                self.board.seq += 1

    def _fold(self, app: rpc.AppServer, note: rpc.ServerNotification) -> None:
        self.board.apply(note)
        if note.method in rpc.SETTLING:
            self.board.keep_awaited(app.awaiting)

    async def _record_exit(self, ended: rpc.Exit) -> None:
        detail = {
            "how": ended.how, "returncode": ended.returncode, "reaped": ended.reaped,
            "reason": ended.reason[:200], "stragglers": list(ended.stragglers),
        }  # fmt: skip

        def record(conn: apsw.Connection) -> None:
            audit.record(
                conn, at=time.time(), actor="akk", action="app_server_exit",
                outcome="ok" if ended.reaped else "unreaped", detail=detail,
            )  # fmt: skip

        with trio.CancelScope(shield=True):
            try:
                await transact(self._store, record)
            except StoreUnwritable as exc:  # an audit line: logged, never a crash on the way out
                log.warning("exit of %s not audited: %s; %s", detail, exc.problem, exc.next_step)


def _reason(exc: BaseException) -> str:
    """What ended a host, bounded and redacted (an exception group of one: its one)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return redact_head(f"{type(exc).__name__}: {exc}", 200)


async def find_codex(binary: str | None, home: str, versions: VersionCache) -> CodexSetup | str:
    """The pinned Codex at ``binary`` (None: `codex` on PATH), or why there is none."""
    try:
        found = await trio.to_thread.run_sync(executable, binary, "codex", "--codex-bin")
    except NotExecutable as exc:
        return str(exc)
    program = found
    version = await versions.version_of_program("codex", [program])
    if version is None:
        return f"{program}: `--version` printed no codex-cli version"
    if version not in schema.versions():
        return f"codex-cli {version} is not pinned ({', '.join(schema.versions())} are)"
    return CodexSetup(binary=program, home=home, version=version)


class BackendDesk:
    """Starts the one BackendHost per CODEX_HOME under the backends supervisor."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        setup: CodexSetup | str,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
        cwd: str,
    ) -> None:
        self._supervisor = supervisor
        self.setup = setup
        self._store = store
        self._reader = reader
        self._cwd = cwd
        self._host: BackendHost | None = None
        self._started_at: float | None = None

    async def host(self) -> BackendHost:
        """The host, started on first use, and started again once the backends supervisor
        dropped it (it gave up on its children), at most once every RESTART_SECONDS.

        Never waits for the process: until it runs, its board says why not (`start_error`:
        a send is refused at once). The setup must be a CodexSetup.
        """
        setup = self.setup
        assert isinstance(setup, CodexSetup), setup
        if self._host is None:
            self._host = BackendHost(setup, store=self._store, reader=self._reader, cwd=self._cwd)
        host = self._host
        if setup.key in self._supervisor.child_keys():
            return host
        now = trio.current_time()
        wait = 0.0 if self._started_at is None else self._started_at + RESTART_SECONDS - now
        if wait > 0:
            host.board.start_failed(
                "the backends supervisor stopped the app-server after its children crashed "
                f"repeatedly; AKK starts it again in {math.ceil(wait)} s"
            )
            return host
        try:
            host.board.starting()
            await self._supervisor.start_child(ChildSpec(setup.key, host.run, Restart.PERMANENT))
        except DuplicateChild:
            return host  # another caller started it meanwhile
        except SupervisorNotRunning:
            host.board.start_failed("the backends supervisor is restarting; send again shortly")
            return host
        if self._started_at is not None:
            log.warning("app-server started again: the backends supervisor had stopped it")
        self._started_at = now
        return host

    @property
    def running(self) -> BackendHost | None:
        return self._host

    @property
    def available(self) -> bool:
        """A pinned Codex is configured (else `setup` says why not)."""
        return isinstance(self.setup, CodexSetup)

    @property
    def version(self) -> str:
        """The Codex version the backend runs ("" when none is configured)."""
        return self.setup.version if isinstance(self.setup, CodexSetup) else ""
