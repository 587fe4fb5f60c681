"""TmuxWatcher: finds agent panes on one tmux server and runs a TerminalActor for each.

One control client per server is the command channel; an ActivityMonitor
lists the server's panes over it (one command per interval, no process per
pane) and says which may have changed. A pane whose process tree holds Claude
Code or Codex gets a TerminalActor, keyed by its terminal_id (pane + process
incarnation), under this watcher's own supervisor, for as long as that pane and
process live (across reattachments). When the server goes away the terminals
go with it, and the watcher waits for the server to come back.

A terminal learns of new output within milliseconds: an OutputWatch keeps an
output client on each session that holds terminals, and a pane's output marks
it dirty. Dirty marks from output and from the listing both go through one
RefreshPacer, so each terminal gets at most one Refresh at a time and at most
one per REFRESH_INTERVAL, however much its pane prints. The listing stays the
safety net: for sessions past the output clients' bound, for output lost
while a client reattaches, for size changes and for discovery.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import aclosing, suppress

import apsw
import attrs
import trio

from akk.actors.store import transact
from akk.actors.terminal_board import TerminalBoard
from akk.backends.terminal.actor import TerminalActor
from akk.backends.terminal.steps import Rebind, Refresh
from akk.discovery.identity import TerminalIdentity
from akk.discovery.process import (
    AgentProcess,
    DigestCache,
    VersionCache,
    binary_of,
    find_agent,
    start_ticks,
    terminal_id,
)
from akk.profiles.qualified_versions import QualifiedVersions
from akk.profiles.registry import Profile
from akk.runtime.actor import ActorError, ActorRef
from akk.runtime.supervisor import (
    ChildSpec,
    Restart,
    Supervisor,
    SupervisorEscalation,
    SupervisorNotRunning,
    UnknownChild,
)
from akk.store import terminals as terminal_records
from akk.store.database import StoreUnwritable
from akk.tmux import output as tmux_output
from akk.tmux.activity import ActivityMonitor, PaneUpdate
from akk.tmux.control import ClientLink, ControlClient, ControlClientClosed, open_control_client
from akk.tmux.output import OutputWatch
from akk.tmux.panes import PaneInfo

log = logging.getLogger("akk.watcher")

SWEEP_INTERVAL = 2.0
"""Seconds between second looks at panes without a live agent (see `_Tracking.sweep`)."""

RECONNECT_INTERVAL = 1.0
"""Seconds between checks for a server that is not (or no longer) running (no process spawned)."""

MAX_BACKOFF = 30.0
"""Longest wait after a failure (e.g. out of descriptors) before attaching again."""

REFRESH_INTERVAL = 0.03
"""Seconds from one Refresh of a terminal to its next, at least: bounds the captures of a
pane that prints without pause (~33 a second) and adds at most this to detection."""

REFRESH_TIMEOUT = 30.0
"""How long a Refresh may wait behind a dispatch in the terminal's mailbox before the
pacer stops waiting (the Refresh stays queued; the pane's next mark sends another)."""


@attrs.define
class WatcherHealth:
    """What `akk doctor` shows of one watcher (published by the watcher, read by methods)."""

    socket: str
    attached: bool = False
    output_clients: int = 0
    """Sessions whose pane output reaches the watcher now (the others rely on the listing)."""
    failures: int = 0
    """Failures since the last good attachment."""
    total_failures: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    retry_in: float | None = None

    def failed(self, error: BaseException, retry_in: float) -> None:
        self.attached = False
        self.failures += 1
        self.total_failures += 1
        self.last_error = f"{type(error).__name__}: {error}"[:300]
        self.last_error_at = time.time()
        self.retry_in = retry_in

    def report(self) -> dict[str, object]:
        return attrs.asdict(self)


@attrs.define
class _Pacing:
    marked: trio.Event = attrs.Factory(trio.Event)
    """Set by a mark since the running refresh started (and wakes a pending recheck)."""


class RefreshPacer:
    """Turns "pane P may have changed" marks into paced refreshes.

    Per pane: at most one `refresh` runs at a time, consecutive ones start at
    least `interval` apart, and a mark is never lost: one that arrives during
    a refresh or the pause after it brings one more refresh. A first mark
    after a quiet spell refreshes at once. A refresh that returns a delay is
    followed by another one after it (or at the next mark, if sooner) without
    any mark: a pane whose reading waits on something else than its screen.
    Run `run` in a nursery; `mark` from anywhere in that Trio run.
    """

    def __init__(self, refresh: Callable[[str], Awaitable[float | None]], interval: float) -> None:
        self._refresh = refresh
        self._interval = interval
        self._panes: dict[str, _Pacing] = {}
        self._nursery: trio.Nursery | None = None

    @property
    def busy(self) -> int:
        """Panes with a refresh running or due."""
        return len(self._panes)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the refreshes until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                try:
                    await trio.sleep_forever()
                finally:
                    # Closing: a mark from now on starts nothing (the nursery may already
                    # refuse new tasks before this task runs again to leave it).
                    self._nursery = None
        finally:
            self._panes.clear()

    def mark(self, pane_id: str) -> None:
        """The pane may have changed: refresh it now, or after the running one and the pause."""
        pacing = self._panes.get(pane_id)
        if pacing is not None:
            pacing.marked.set()
        elif self._nursery is not None:
            self._panes[pane_id] = _Pacing()
            self._nursery.start_soon(self._pace, pane_id)

    async def _pace(self, pane_id: str) -> None:
        pacing = self._panes[pane_id]
        try:
            while True:
                pacing.marked = trio.Event()
                started = trio.current_time()
                again = await self._refresh(pane_id)
                # Stay for the rest of the interval so that marks meanwhile wait for it.
                await trio.sleep_until(started + self._interval)
                if not pacing.marked.is_set():
                    if again is None:
                        return
                    with trio.move_on_at(started + again):
                        await pacing.marked.wait()
        finally:
            self._panes.pop(pane_id, None)


@attrs.define
class _Tracked:
    """What the watcher knows of one pane."""

    pane: PaneInfo
    agent: AgentProcess | None = None
    terminal: ActorRef | None = None
    terminal_id: str | None = None
    identity: TerminalIdentity | None = None
    """The terminal's identity as last bound (what its actor starts, or restarts, with)."""
    profile: Profile | None = None


class TmuxWatcher:
    """Watches one tmux server until cancelled (run it as a supervised plain task).

    Its terminals live under its own supervisor for the watcher's whole run,
    not one attachment: when the attached session ends while other panes live
    on, the watcher reattaches and keeps every terminal whose process is still
    the same (a dispatch in flight is never cut by a reattachment). Terminals
    are retired (and recorded gone) only when their pane or process is gone,
    or the whole server is.
    """

    def __init__(
        self,
        socket_path: str,
        board: TerminalBoard,
        store: ActorRef,
        versions: VersionCache,
        *,
        digests: DigestCache,
        qualified: QualifiedVersions,
        interval: float,
        notify: Callable[[str], None],
        output_clients: int | None = None,
    ) -> None:
        self.socket = socket_path
        self.board = board
        self.store = store
        self.notify = notify  # wakes a controller's Destination (events a terminal wrote)
        self.versions = versions
        self.digests = digests
        self.qualified = qualified  # binds versions no profile pins; re-binds when rows change
        self._interval = interval
        self.output_clients = (
            tmux_output.MAX_OUTPUT_CLIENTS if output_clients is None else output_clients
        )
        """Sessions whose output this watcher follows at most (0: the listing alone)."""
        self.health = WatcherHealth(socket_path)

    async def run(self) -> None:
        """Attach whenever the server is up; never returns until cancelled.

        Running out of a resource (descriptors, processes: OSError) or its
        terminals' supervisor giving up is this watcher's own trouble: it is
        recorded in ``health``, logged, and retried with exponential backoff
        and jitter, so it never reaches the root supervisor and the endpoint.
        """
        terminals = Supervisor(f"terminals {self.socket}", max_restarts=20, period=10.0)
        tracking = _Tracking(self, ClientLink(self.socket), terminals)
        async with trio.open_nursery() as nursery:
            await nursery.start(terminals.run)
            try:
                await self._attach_forever(tracking)
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(_CLEANUP_SECONDS):
                    await tracking.retire_all()
                nursery.cancel_scope.cancel()

    async def _attach_forever(self, tracking: _Tracking) -> None:
        backoff = RECONNECT_INTERVAL
        while True:
            attached_at: float | None = None
            failure: BaseException | None = None
            try:
                async with open_control_client(self.socket) as client:
                    attached_at = trio.current_time()
                    self.health.attached = True
                    log.info("watching tmux server %s", self.socket)
                    await tracking.follow(client, self._interval)
            except* ControlClientClosed as closed:
                log.debug("tmux server %s not available: %s", self.socket, closed.exceptions[0])
            except* (OSError, SupervisorEscalation) as group:
                failure = group.exceptions[0]
            self.health.attached = False
            tracking.link.current = None
            if failure is not None:
                delay = backoff * random.uniform(0.5, 1.0)
                self.health.failed(failure, delay)
                log.warning(
                    "watcher for tmux server %s failed (%s); retrying in %.1f s",
                    self.socket, self.health.last_error, delay,
                )  # fmt: skip
                await trio.sleep(delay)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            if attached_at is None:
                # Nothing answers (or no session is left): its panes are gone with it.
                await tracking.retire_all()
            else:
                backoff = RECONNECT_INTERVAL
                self.health.failures = 0
                self.health.retry_in = None
            # A control client ends with the session it attached to while other
            # sessions may live on: after a long watch, reattach at once (opening
            # fails fast, spawning nothing, when the whole server is gone).
            lived = None if attached_at is None else trio.current_time() - attached_at
            if lived is None or lived < RECONNECT_INTERVAL:
                await trio.sleep(RECONNECT_INTERVAL)

    async def gone(self, terminal: str, now: float) -> None:
        """A terminal's incarnation is over: take it off the board and record it.

        A store that cannot write leaves its row as last seen (every step on it needs a
        terminal on the board, so none can be reserved).
        """
        self.board.forget(terminal)
        try:
            await transact(
                self.store, lambda conn: terminal_records.record_gone(conn, terminal, now)
            )
        except StoreUnwritable as exc:
            log.warning("terminal %s gone, not recorded: %s", terminal, exc)


_CLEANUP_SECONDS = 10.0


class _Tracking:
    """The panes a TmuxWatcher tracks and their terminals, across attachments.

    ``lock`` serializes the listing-driven updates with the periodic sweep, so a
    pane is never identified twice at once. The pacer and the output watch
    belong to one attachment: output clients never outlive the no-output
    command client (see `akk.tmux.control`).
    """

    def __init__(self, watcher: TmuxWatcher, link: ClientLink, terminals: Supervisor) -> None:
        self._watcher = watcher
        self.link = link
        self._terminals = terminals
        self._tracked: dict[str, _Tracked] = {}
        self.lock = trio.Lock()
        self._pacer: RefreshPacer | None = None
        self._output: OutputWatch | None = None

    async def follow(self, client: ControlClient, interval: float) -> None:
        """Follow one attachment's listings (and its panes' output) until it ends."""
        self.link.current = client
        try:
            async with trio.open_nursery() as nursery:
                pacer = RefreshPacer(self._refresh_pane, REFRESH_INTERVAL)
                await nursery.start(pacer.run)
                output = OutputWatch(
                    self._watcher.socket, pacer.mark, max_clients=self._watcher.output_clients
                )
                await nursery.start(output.run)
                self._pacer, self._output = pacer, output
                nursery.start_soon(self.sweep)
                nursery.start_soon(self.rebind)
                first = True
                monitor = ActivityMonitor(client, interval=interval)
                async with aclosing(monitor.updates()) as updates:
                    async for update in updates:
                        async with self.lock:
                            if first:
                                # Panes that closed while no attachment watched them.
                                for pane_id in self._tracked.keys() - update.panes.keys():
                                    await self._retire(self._tracked.pop(pane_id))
                                first = False
                            await self.apply(update)
                        self._watch_output()
                nursery.cancel_scope.cancel()
        finally:
            self._pacer = self._output = None
            self._watcher.health.output_clients = 0

    async def apply(self, update: PaneUpdate) -> None:
        """Follow one listing: retire closed panes, (re)identify and refresh changed ones."""
        for pane_id in update.removed:
            entry = self._tracked.pop(pane_id, None)
            if entry is not None:
                await self._retire(entry)
        for pane_id in update.changed:
            pane = update.panes[pane_id]
            entry = self._tracked.setdefault(pane_id, _Tracked(pane))
            previous, entry.pane = entry.pane, pane
            if pane_id in update.added or _identity_may_differ(previous, pane, entry.agent):
                await self._identify(entry)
            self._mark(entry)

    async def sweep(self) -> None:
        """Every SWEEP_INTERVAL, look again at panes with no live agent.

        The listing only reports panes whose screen or shape changed, and an
        agent that started without drawing yet (or a pane listed in the instant
        before its shell started the agent) changes neither. Reading /proc
        spawns nothing.
        """
        while True:
            await trio.sleep(SWEEP_INTERVAL)
            async with self.lock:
                for entry in list(self._tracked.values()):
                    if entry.pane.dead or _agent_alive(entry.agent):
                        continue
                    await self._identify(entry)
                    self._mark(entry)
            self._watch_output()

    async def rebind(self) -> None:
        """Whenever the qualified versions change, bind every terminal again.

        A terminal whose binding differs (an unpinned version just qualified
        for its binary, or a revoked one) is recorded and told to read its
        pane with the new profile (`Rebind`, handled between its steps). The
        first pass runs at once: rows may have changed while no attachment was.
        """
        qualified = self._watcher.qualified
        while True:
            seen = qualified.generation
            async with self.lock:
                changes = [c for e in self._tracked.values() if (c := self._bound_anew(e))]
                if changes:
                    try:
                        await transact(
                            self._watcher.store, _recorder([r.identity for _, r in changes])
                        )
                    except StoreUnwritable as exc:
                        # The binding holds in memory; its row is written at the next sighting.
                        log.warning("new bindings not recorded: %s", exc)
            async with trio.open_nursery() as nursery:
                for terminal, rebind in changes:
                    nursery.start_soon(_tell_rebind, terminal, rebind)
            await qualified.changed(seen)

    def _bound_anew(self, entry: _Tracked) -> tuple[ActorRef, Rebind] | None:
        """Bind ``entry``'s terminal again; the Rebind to send if its binding changed."""
        identity, terminal = entry.identity, entry.terminal
        if identity is None or terminal is None:
            return None
        binding = self._watcher.qualified.bind(
            identity.agent, identity.version, binary=identity.binary,
            binary_sha256=identity.binary_sha256,
        )  # fmt: skip
        profile_id = None if binding.profile is None else binding.profile.id
        if (profile_id, binding.reason) == (identity.profile, identity.profile_reason):
            return None
        entry.identity = attrs.evolve(identity, profile=profile_id, profile_reason=binding.reason)
        entry.profile = binding.profile
        log.info(
            "terminal %s: %s %s bound anew (profile %s)",
            identity.terminal_id, identity.agent, identity.version, profile_id or binding.reason,
        )  # fmt: skip
        return terminal, Rebind(entry.identity, binding.profile)

    def _mark(self, entry: _Tracked) -> None:
        if entry.terminal is not None and self._pacer is not None:
            self._pacer.mark(entry.pane.pane_id)

    def _watch_output(self) -> None:
        """Keep output clients on the sessions that hold terminals, weighted by how many."""
        output = self._output
        if output is None:
            return
        output.watch(
            Counter(e.pane.session_id for e in self._tracked.values() if e.terminal is not None)
        )
        self._watcher.health.output_clients = output.attached

    async def _refresh_pane(self, pane_id: str) -> float | None:
        """One paced Refresh: arm the pane's output signal, then have its terminal capture.

        Arming first means output during or after the capture marks the pane
        again, and output before it is in the capture. Only panes with a
        terminal are armed; others stay paused on their output client.
        Returns the terminal's recheck delay (`Refresh`).
        """
        entry = self._tracked.get(pane_id)
        if entry is None or entry.terminal is None:
            return None
        terminal, pane = entry.terminal, entry.pane
        if self._output is not None:
            await self._output.arm(pane_id)
        try:
            return await terminal.ask(Refresh(pane.width, pane.height), timeout=REFRESH_TIMEOUT)
        except ActorError as exc:
            # Retired, restarting or stuck: the supervisor logs crashes; the next mark retries.
            log.debug("refresh of %s not done: %s", pane_id, exc)
            return None

    async def retire_all(self) -> None:
        """The server is gone: every terminal it had is over."""
        async with self.lock:
            for entry in self._tracked.values():
                await self._retire(entry)
            self._tracked.clear()

    async def _identify(self, entry: _Tracked) -> None:
        watcher = self._watcher
        agent = None if entry.pane.dead else find_agent(entry.pane.pane_pid)
        if entry.terminal is not None and _same_process(agent, entry.agent):
            return
        await self._retire(entry)
        entry.agent = agent
        if agent is None:
            return
        version = await watcher.versions.version_of(agent)
        # Only a version no profile pins binds by its binary's hash (a qualification).
        pinned = version is None or (agent.agent, version) in watcher.qualified.registry.pinned
        sha = None if pinned else await watcher.digests.digest_of(agent)
        binary = binary_of(agent)
        binding = watcher.qualified.bind(agent.agent, version, binary=binary, binary_sha256=sha)
        identity = TerminalIdentity(
            terminal_id=terminal_id(
                watcher.socket, entry.pane.pane_id, agent.pid, agent.start_ticks
            ),
            tmux_socket=watcher.socket,
            pane_id=entry.pane.pane_id,
            pane_pid=entry.pane.pane_pid,
            agent=agent.agent,
            agent_pid=agent.pid,
            process_start=agent.start_ticks,
            executable=agent.executable,
            version=version,
            cwd=agent.cwd,
            profile=None if binding.profile is None else binding.profile.id,
            profile_reason=binding.reason,
            binary=binary,
            binary_sha256=sha,
        )
        now = time.time()
        try:
            await transact(
                watcher.store, lambda conn: terminal_records.record_seen(conn, identity, now)
            )
        except StoreUnwritable as exc:
            # A terminal starts recorded, or not at all: the sweep identifies it again.
            entry.agent = None
            log.warning("terminal %s not started until the store writes: %s",
                        identity.terminal_id, exc)  # fmt: skip
            return
        link, board, store, notify = self.link, watcher.board, watcher.store, watcher.notify
        entry.terminal_id = identity.terminal_id
        entry.identity, entry.profile = identity, binding.profile

        def start() -> TerminalActor:
            # A restart reads the pane with the binding of the moment (`rebind`).
            assert entry.identity is not None
            return TerminalActor(entry.identity, entry.profile, link, board, store, notify)

        entry.terminal = await self._terminals.start_child(
            ChildSpec(key=identity.terminal_id, start=start, restart=Restart.TRANSIENT)
        )
        if entry.terminal is not None:
            board.bind_ref(identity.terminal_id, entry.terminal)
        log.info(
            "terminal %s: %s %s in pane %s (profile %s)",
            identity.terminal_id, identity.agent, version, identity.pane_id,
            identity.profile or binding.reason,
        )  # fmt: skip

    async def _retire(self, entry: _Tracked) -> None:
        if entry.terminal_id is None:
            return
        terminal, entry.terminal, entry.terminal_id = entry.terminal_id, None, None
        entry.agent = entry.identity = entry.profile = None
        # Already stopped if its supervisor is shutting down with the watcher.
        with trio.move_on_after(_CLEANUP_SECONDS), suppress(UnknownChild, SupervisorNotRunning):
            await self._terminals.stop_child(terminal)
        await self._watcher.gone(terminal, time.time())


def _recorder(identities: list[TerminalIdentity]) -> Callable[[apsw.Connection], None]:
    """One transaction recording each of ``identities`` with its new binding."""
    now = time.time()

    def record(conn: apsw.Connection) -> None:
        for identity in identities:
            terminal_records.record_seen(conn, identity, now)

    return record


async def _tell_rebind(terminal: ActorRef, rebind: Rebind) -> None:
    try:
        await terminal.ask(rebind, timeout=REFRESH_TIMEOUT)
    except ActorError as exc:
        # Restarting or gone: a restart reads the new binding from its _Tracked entry.
        log.debug("rebind of %s not done: %s", rebind.identity.terminal_id, exc)


def _agent_alive(agent: AgentProcess | None) -> bool:
    return agent is not None and start_ticks(agent.pid) == agent.start_ticks


def _same_process(a: AgentProcess | None, b: AgentProcess | None) -> bool:
    return a is not None and b is not None and (a.pid, a.start_ticks) == (b.pid, b.start_ticks)


def _identity_may_differ(before: PaneInfo, after: PaneInfo, agent: AgentProcess | None) -> bool:
    """Whether the pane's agent process may have started, ended or been replaced."""
    if (before.pane_pid, before.current_command, before.dead) != (
        after.pane_pid,
        after.current_command,
        after.dead,
    ):
        return True
    return agent is not None and not _agent_alive(agent)
