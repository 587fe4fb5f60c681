"""TmuxWatcher: finds agent panes on one tmux server and runs a TerminalActor for each.

One control client per server is the command channel; an ActivityMonitor
lists the server's panes over it (one command per interval, no process per
pane) and says which may have changed. A pane whose process tree holds Claude
Code or Codex gets a TerminalActor, keyed by its terminal_id (pane + process
incarnation), under this watcher's own supervisor, for as long as that pane and
process live (across reattachments). When the server goes away the terminals
go with it, and the watcher waits for the server to come back.

Each terminal runs under a supervisor of its own (OTP: one supervisor per
worker), whose restart intensity is the pane's: a TerminalActor that crashes
more than PANE_MAX_RESTARTS times within PANE_RESTART_PERIOD seconds gives up
on that pane alone. The pane is held off the board, its reason shown in
`WatcherHealth.held_terminals`, and tried again after a backoff; its siblings,
the watcher and the server never notice. A `--version` that failed (timed out,
or printed nothing readable) is asked again after the VersionCache's
``retry_failed_after``, and the terminal is bound anew once it answers.

A terminal learns of new output within milliseconds: an OutputWatch keeps an
output client on each session that holds terminals, and a pane's output marks
it dirty. Dirty marks from output and from the listing both go through one
RefreshPacer, so each terminal gets at most one Refresh at a time and at most
one per REFRESH_INTERVAL, however much its pane prints. The listing stays the
safety net: for sessions past the output clients' bound, for output lost
while a client reattaches, for size changes and for discovery.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import stat
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
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
from akk.profiles.registry import Profile, ProfileMatch
from akk.runtime.actor import ActorError, ActorRef, detach_from_actor
from akk.runtime.supervisor import (
    ChildSpec,
    DuplicateChild,
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

PANE_MAX_RESTARTS = 5
PANE_RESTART_PERIOD = 30.0
"""A pane's restart intensity: its TerminalActor restarted more than PANE_MAX_RESTARTS
times within PANE_RESTART_PERIOD seconds, and the pane's supervisor gives up (the pane is
held, see `_Tracking._hold`)."""

HELD_RETRY = 30.0
"""Seconds a pane whose supervisor gave up is held before it is tried again (at most; with
jitter), doubled for each time in a row it gave up again."""

HELD_MAX_RETRY = 600.0
"""The longest hold; a terminal that ran this long before giving up starts its count anew."""

TERMINAL_SHUTDOWN = 5.0
"""Seconds a stopping TerminalActor may take to finish its message in flight."""


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
    held_terminals: dict[str, HeldTerminal] = attrs.Factory(dict)
    """Terminals whose actor kept crashing, by terminal_id: off the board until retried."""

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
class HeldTerminal:
    """A terminal whose pane supervisor gave up: off the board, tried again at ``retry_at``."""

    terminal_id: str
    pane: str
    crashes: int
    """Times in a row its supervisor gave up (each doubles the hold)."""
    reason: str
    """The last crash, as ``Type: message``."""
    held_at: float
    retry_at: float


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
    Run `run` in a nursery; `mark` from anywhere in that Trio run, an actor's
    handler too (a pane's refreshes ask as no actor, whoever marked it).
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
        # Started by whoever marked the pane: a TerminalActor's handler (`refresh_soon`)
        # would lend it its rank, and its Refresh, asking that actor, would be refused.
        detach_from_actor()
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


class _PaneRun:
    """One terminal's own supervisor, with its TerminalActor as the only child.

    The supervisor restarts the actor within the pane's restart intensity; past
    it, it stops the actor and raises `SupervisorEscalation` to `_supervise`.
    ``ref`` is the actor's stable ref (across its restarts), set once ``started``.
    """

    def __init__(self, terminal_id: str, start: Callable[[], TerminalActor]) -> None:
        self.terminal_id = terminal_id
        spec = ChildSpec(
            "actor", start, restart=Restart.TRANSIENT, shutdown_timeout=TERMINAL_SHUTDOWN
        )
        self.supervisor = Supervisor(
            f"terminal {terminal_id}",
            max_restarts=PANE_MAX_RESTARTS,
            period=PANE_RESTART_PERIOD,
            children=[spec],
        )
        self.ref: ActorRef | None = None
        self.started = trio.Event()
        self.started_at = trio.current_time()


@attrs.define
class _Tracked:
    """What the watcher knows of one pane."""

    pane: PaneInfo
    agent: AgentProcess | None = None
    terminal: ActorRef | None = None
    """The running terminal's actor (None while none runs, e.g. held)."""
    terminal_id: str | None = None
    """The identified terminal, running or held."""
    identity: TerminalIdentity | None = None
    """The terminal's identity as last bound (what its actor starts, or restarts, with)."""
    profile: Profile | None = None
    run: _PaneRun | None = None
    held_until: float | None = None
    """Trio clock: its supervisor gave up; start it again then (`_Tracking.sweep`)."""
    gave_up: int = 0
    """Times in a row its supervisor gave up."""
    version_retry_at: float | None = None
    """The VersionCache's clock: its `--version` failed; ask again then."""

    def forget_terminal(self) -> str | None:
        """Drop everything known of the terminal; return its terminal_id (None if none)."""
        terminal_id = self.terminal_id
        self.terminal = self.terminal_id = self.identity = self.profile = self.run = None
        self.agent = None
        self.held_until = self.version_retry_at = None
        self.gave_up = 0
        return terminal_id


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

        Running out of a resource (descriptors, processes: OSError) is this
        watcher's own trouble: it is recorded in ``health``, logged, and
        retried with exponential backoff and jitter, so it never reaches the
        root supervisor and the endpoint. So is one pane's crash loop, on the
        scale of that pane (see the module's docstring).
        """
        # Its children are the panes' own supervisors, temporary: it never restarts
        # one, so it never escalates; a pane that gives up is held by `_Tracking`.
        terminals = Supervisor(f"terminals {self.socket}")
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
            except* OSError as group:
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
        """Every SWEEP_INTERVAL, look again at what the listing may not bring back.

        The listing only reports panes whose screen or shape changed, and an
        agent that started without drawing yet (or a pane listed in the instant
        before its shell started the agent) changes neither. Reading /proc
        spawns nothing. A live agent is looked at again only when something is
        due: its `--version` (which failed) or its held terminal.
        """
        while True:
            await trio.sleep(SWEEP_INTERVAL)
            rebinds: list[tuple[ActorRef, Rebind]] = []
            async with self.lock:
                for entry in list(self._tracked.values()):
                    if entry.pane.dead:
                        continue
                    if not _agent_alive(entry.agent):
                        await self._identify(entry)
                        self._mark(entry)
                        continue
                    if self._version_due(entry):
                        rebinds.extend(await self._version_again(entry))
                    if entry.held_until is not None and trio.current_time() >= entry.held_until:
                        log.info("terminal %s: held, tried again", entry.terminal_id)
                        await self._start(entry)
                        self._mark(entry)
            self._watch_output()
            async with trio.open_nursery() as nursery:
                for terminal, rebind in rebinds:
                    nursery.start_soon(_tell_rebind, terminal, rebind)

    async def rebind(self) -> None:
        """Whenever the qualified versions change, bind every terminal again.

        A terminal whose binding differs (an unpinned version just qualified
        for its binary, or a revoked one) is recorded and told to read its
        pane with the new profile (`Rebind`, handled between its steps); a
        held one starts with it. The first pass runs at once: rows may have
        changed while no attachment was.
        """
        qualified = self._watcher.qualified
        while True:
            seen = qualified.generation
            async with self.lock:
                changed = [e for e in self._tracked.values() if self._bound_anew(e)]
                if changed:
                    await self._record([e.identity for e in changed if e.identity is not None])
                rebinds = [r for e in changed for r in _rebind(e)]
            async with trio.open_nursery() as nursery:
                for terminal, rebind in rebinds:
                    nursery.start_soon(_tell_rebind, terminal, rebind)
            await qualified.changed(seen)

    def _bound_anew(self, entry: _Tracked) -> bool:
        """Bind ``entry``'s terminal again; whether its binding changed."""
        identity = entry.identity
        if identity is None:
            return False
        binding = self._watcher.qualified.bind(
            identity.agent, identity.version, binary=identity.binary,
            binary_sha256=identity.binary_sha256,
        )  # fmt: skip
        profile_id = None if binding.profile is None else binding.profile.id
        if (profile_id, binding.reason) == (identity.profile, identity.profile_reason):
            return False
        entry.identity = attrs.evolve(identity, profile=profile_id, profile_reason=binding.reason)
        entry.profile = binding.profile
        log.info(
            "terminal %s: %s %s bound anew (profile %s)",
            identity.terminal_id, identity.agent, identity.version, profile_id or binding.reason,
        )  # fmt: skip
        return True

    async def _record(self, identities: list[TerminalIdentity]) -> None:
        try:
            await transact(self._watcher.store, _recorder(identities))
        except StoreUnwritable as exc:
            # The binding holds in memory; its row is written at the next sighting.
            log.warning("new bindings not recorded: %s", exc)

    def _version_due(self, entry: _Tracked) -> bool:
        versions = self._watcher.versions
        return entry.version_retry_at is not None and versions.clock() >= entry.version_retry_at

    async def _version_again(self, entry: _Tracked) -> list[tuple[ActorRef, Rebind]]:
        """Ask ``entry``'s agent for its version again (its last `--version` failed).

        Once it answers, the terminal is bound by it, recorded, and told (the
        Rebind to send, for a running terminal); until then it is asked again
        every ``retry_failed_after``. A version that answers but no profile
        pins stays as it is: that is no failure.
        """
        agent, identity = entry.agent, entry.identity
        assert agent is not None and identity is not None, "only an identified terminal"
        versions = self._watcher.versions
        version = await versions.version_of(agent)
        if version is None:
            entry.version_retry_at = versions.clock() + versions.retry_failed_after
            log.debug("terminal %s: --version failed again", identity.terminal_id)
            return []
        entry.version_retry_at = None
        binding, sha = await self._bind(agent, version, identity.binary)
        profile_id = None if binding.profile is None else binding.profile.id
        entry.identity = attrs.evolve(
            identity, version=version, profile=profile_id, profile_reason=binding.reason,
            binary_sha256=sha,
        )  # fmt: skip
        entry.profile = binding.profile
        log.info(
            "terminal %s: %s answered --version at last: %s (profile %s)",
            identity.terminal_id, agent.agent, version, entry.identity.profile or binding.reason,
        )  # fmt: skip
        await self._record([entry.identity])
        return _rebind(entry)

    async def _bind(
        self, agent: AgentProcess, version: str | None, binary: str | None
    ) -> tuple[ProfileMatch, str | None]:
        """The binding of ``agent`` at ``version``, and its binary's hash if one binds by it."""
        watcher = self._watcher
        # Only a version no profile pins binds by its binary's hash (a qualification).
        pinned = version is None or (agent.agent, version) in watcher.qualified.registry.pinned
        sha = None if pinned else await watcher.digests.digest_of(agent)
        binding = watcher.qualified.bind(agent.agent, version, binary=binary, binary_sha256=sha)
        return binding, sha

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
        if entry.terminal_id is not None and _same_process(agent, entry.agent):
            return  # running, or held until its retry
        await self._retire(entry)
        entry.agent = agent
        if agent is None:
            return
        versions = watcher.versions
        version = await versions.version_of(agent)
        if version is None:
            entry.version_retry_at = versions.clock() + versions.retry_failed_after
        binary = binary_of(agent)
        binding, sha = await self._bind(agent, version, binary)
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
            entry.agent = entry.version_retry_at = None
            log.warning("terminal %s not started until the store writes: %s",
                        identity.terminal_id, exc)  # fmt: skip
            return
        entry.terminal_id = identity.terminal_id
        entry.identity, entry.profile = identity, binding.profile
        await self._start(entry)
        log.info(
            "terminal %s: %s %s in pane %s (profile %s)",
            identity.terminal_id, identity.agent, version, identity.pane_id,
            identity.profile or binding.reason,
        )  # fmt: skip

    async def _start(self, entry: _Tracked) -> None:
        """Start ``entry``'s terminal under a supervisor of its own; publish its ref."""
        watcher, identity = self._watcher, entry.identity
        assert identity is not None, "only an identified terminal starts"
        link, board, store, notify = self.link, watcher.board, watcher.store, watcher.notify

        def start() -> TerminalActor:
            # A restart reads the pane with the binding of the moment (`rebind`).
            assert entry.identity is not None
            return TerminalActor(
                entry.identity, entry.profile, link, board, store, notify,
                refresh_soon=functools.partial(self._mark, entry),
            )  # fmt: skip

        run = _PaneRun(identity.terminal_id, start)
        entry.run, entry.held_until = run, None
        spec = ChildSpec(
            key=identity.terminal_id,
            start=functools.partial(self._supervise, entry, run),
            restart=Restart.TEMPORARY,
            # Its supervisor stops the actor within the actor's timeout and a grace.
            shutdown_timeout=2 * TERMINAL_SHUTDOWN,
        )
        try:
            await self._terminals.start_child(spec)
        except DuplicateChild:
            # The run it gave up is still being removed: the next sweep tries again.
            entry.run, entry.held_until = None, trio.current_time()
            return
        await run.started.wait()
        if entry.run is run and run.ref is not None:
            entry.terminal = run.ref
            board.bind_ref(identity.terminal_id, run.ref)
            watcher.health.held_terminals.pop(identity.terminal_id, None)

    async def _supervise(self, entry: _Tracked, run: _PaneRun) -> None:
        """Run one terminal's supervisor until stopped; if it gives up, hold the pane."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(run.supervisor.run)
                run.ref = run.supervisor.ref("actor")
                run.started.set()
        except* Exception as group:
            # An escalation (the actor crashed past the pane's intensity), or a first start
            # that failed: either way this pane's trouble alone, held and tried again.
            self._hold(entry, run, group.exceptions[0])
        finally:
            run.started.set()

    def _hold(self, entry: _Tracked, run: _PaneRun, error: BaseException) -> None:
        """Take the terminal of ``run`` off the board until a backoff passes; record why."""
        if entry.run is not run:
            return  # retired or started anew meanwhile
        crash = error.__cause__ if isinstance(error, SupervisorEscalation) else None
        crash = error if crash is None else crash
        reason = f"{type(crash).__name__}: {crash}"[:300]
        now = trio.current_time()
        if now - run.started_at >= HELD_MAX_RETRY:
            entry.gave_up = 0  # it ran well for long: not the same trouble in a row
        entry.gave_up += 1
        delay = min(HELD_RETRY * 2 ** (entry.gave_up - 1), HELD_MAX_RETRY)
        delay *= random.uniform(0.5, 1.0)
        entry.run, entry.terminal, entry.held_until = None, None, now + delay
        self._watcher.board.forget(run.terminal_id)
        wall = time.time()
        self._watcher.health.held_terminals[run.terminal_id] = HeldTerminal(
            run.terminal_id, entry.pane.pane_id, entry.gave_up, reason, wall, wall + delay
        )
        log.warning(
            "terminal %s in pane %s kept crashing (%s); held off the board, tried again in %.0f s",
            run.terminal_id, entry.pane.pane_id, reason, delay,
        )  # fmt: skip

    async def _retire(self, entry: _Tracked) -> None:
        terminal = entry.forget_terminal()
        if terminal is None:
            return
        self._watcher.health.held_terminals.pop(terminal, None)
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


def _rebind(entry: _Tracked) -> list[tuple[ActorRef, Rebind]]:
    """The Rebind telling ``entry``'s running terminal its binding (none while none runs)."""
    if entry.terminal is None or entry.identity is None:
        return []
    return [(entry.terminal, Rebind(entry.identity, entry.profile))]


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


def distinct_servers(sockets: Iterable[str]) -> list[str]:
    """The tmux servers to watch, one socket each, by its real path, in the order given.

    Two paths reach one server when they resolve to one real path (a symlink
    on the way) or name one socket file (a hard link: one st_dev and st_ino).
    Watched twice, each of its panes would be two terminals, with two actors
    that may send it keys: the later path is dropped, with a warning. A socket
    that does not exist yet is kept by its real path (its watcher waits for
    the server), so a server that starts later under two such names is not
    seen as one.
    """
    kept: dict[tuple[int, int] | str, str] = {}
    for given in sockets:
        real = os.path.realpath(given)
        server: tuple[int, int] | str = real
        try:
            found = os.stat(real)
        except OSError:
            pass
        else:
            if stat.S_ISSOCK(found.st_mode):
                server = (found.st_dev, found.st_ino)
        if server in kept:
            log.warning(
                "tmux socket %s reaches the server of %s: watched once", given, kept[server]
            )
            continue
        kept[server] = real
    return list(kept.values())
