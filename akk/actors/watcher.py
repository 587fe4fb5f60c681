"""TmuxWatcher: finds agent panes on one tmux server and runs a TerminalActor for each.

One control client per server is the command channel; an ActivityMonitor
lists the server's panes over it (one command per interval, no process per
pane) and says which may have changed. A pane whose process tree holds Claude
Code or Codex gets a TerminalActor, keyed by its terminal_id (pane + process
incarnation), under this watcher's own supervisor. When the server goes away
the terminals go with it, and the watcher waits for the server to come back.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import suppress
from pathlib import Path

import attrs
import trio

from akk.actors.runtime import ActorRef, MailboxFull
from akk.actors.store import transact
from akk.actors.supervisor import ChildSpec, Restart, Supervisor
from akk.actors.terminal import Refresh, TerminalActor
from akk.discovery.process import AgentProcess, VersionCache, find_agent, read_process, terminal_id
from akk.profiles.registry import bind
from akk.store import terminals as terminal_records
from akk.terminals import TerminalBoard, TerminalIdentity
from akk.tmux.activity import ActivityMonitor, PaneUpdate
from akk.tmux.control import ControlClient, ControlClientClosed, open_control_client
from akk.tmux.panes import PaneInfo

log = logging.getLogger("akk.watcher")

RECONNECT_INTERVAL = 1.0
"""Seconds between checks for a server that is not (or no longer) running (no process spawned)."""


def default_socket() -> str:
    """The socket of tmux's default server for this user."""
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return str(Path(base) / f"tmux-{os.getuid()}" / "default")


@attrs.define
class _Tracked:
    """What the watcher knows of one pane."""

    pane: PaneInfo
    agent: AgentProcess | None = None
    terminal: ActorRef | None = None
    terminal_id: str | None = None


class TmuxWatcher:
    """Watches one tmux server until cancelled (run it as a supervised plain task)."""

    def __init__(
        self,
        socket_path: str,
        board: TerminalBoard,
        store: ActorRef,
        versions: VersionCache,
        *,
        interval: float,
    ) -> None:
        self._socket = socket_path
        self._board = board
        self._store = store
        self._versions = versions
        self._interval = interval

    async def run(self) -> None:
        """Attach whenever the server is up; never returns until cancelled."""
        while True:
            attached_at: float | None = None
            try:
                async with open_control_client(self._socket) as client:
                    attached_at = trio.current_time()
                    log.info("watching tmux server %s", self._socket)
                    await self._watch(client)
            except ControlClientClosed as closed:
                log.debug("tmux server %s not available: %s", self._socket, closed)
            # A control client ends with the session it attached to while other
            # sessions may live on: after a long watch, reattach at once (opening
            # fails fast, spawning nothing, when the whole server is gone).
            lived = None if attached_at is None else trio.current_time() - attached_at
            if lived is None or lived < RECONNECT_INTERVAL:
                await trio.sleep(RECONNECT_INTERVAL)

    async def _watch(self, client: ControlClient) -> None:
        terminals = Supervisor(f"terminals {self._socket}", max_restarts=20, period=10.0)
        tracked: dict[str, _Tracked] = {}
        async with trio.open_nursery() as nursery:
            await nursery.start(terminals.run)
            try:
                monitor = ActivityMonitor(client, interval=self._interval)
                async for update in monitor.updates():
                    await self._apply(update, tracked, terminals, client)
            finally:
                with trio.CancelScope(shield=True):
                    now = time.time()
                    for entry in tracked.values():
                        if entry.terminal_id is not None:
                            await self._gone(entry.terminal_id, now)
                nursery.cancel_scope.cancel()

    async def _apply(
        self,
        update: PaneUpdate,
        tracked: dict[str, _Tracked],
        terminals: Supervisor,
        client: ControlClient,
    ) -> None:
        for pane_id in update.removed:
            entry = tracked.pop(pane_id)
            await self._retire(entry, terminals)
        for pane_id in update.changed:
            pane = update.panes[pane_id]
            entry = tracked.setdefault(pane_id, _Tracked(pane))
            previous, entry.pane = entry.pane, pane
            if pane_id in update.added or _identity_may_differ(previous, pane, entry.agent):
                await self._identify(entry, terminals, client)
            if entry.terminal is not None:
                # When the mailbox is full, a queued Refresh captures the latest screen anyway.
                with suppress(MailboxFull):
                    entry.terminal.tell(Refresh(pane.width, pane.height))

    async def _identify(
        self, entry: _Tracked, terminals: Supervisor, client: ControlClient
    ) -> None:
        agent = None if entry.pane.dead else find_agent(entry.pane.pane_pid)
        if entry.terminal is not None and _same_process(agent, entry.agent):
            return
        await self._retire(entry, terminals)
        entry.agent = agent
        if agent is None:
            return
        version = await self._versions.version_of(agent)
        binding = bind(agent.agent, version)
        identity = TerminalIdentity(
            terminal_id=terminal_id(self._socket, entry.pane.pane_id, agent.pid, agent.start_ticks),
            tmux_socket=self._socket,
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
        )
        now = time.time()
        await transact(self._store, lambda conn: terminal_records.record_seen(conn, identity, now))
        profile = binding.profile
        entry.terminal_id = identity.terminal_id
        entry.terminal = await terminals.start_child(
            ChildSpec(
                key=identity.terminal_id,
                start=lambda: TerminalActor(identity, profile, client, self._board),
                restart=Restart.TRANSIENT,
            )
        )
        log.info(
            "terminal %s: %s %s in pane %s (profile %s)",
            identity.terminal_id, identity.agent, version, identity.pane_id,
            identity.profile or binding.reason,
        )  # fmt: skip

    async def _retire(self, entry: _Tracked, terminals: Supervisor) -> None:
        if entry.terminal_id is None:
            return
        terminal, entry.terminal, entry.terminal_id = entry.terminal_id, None, None
        entry.agent = None
        await terminals.stop_child(terminal)
        await self._gone(terminal, time.time())

    async def _gone(self, terminal: str, now: float) -> None:
        await transact(self._store, lambda conn: terminal_records.record_gone(conn, terminal, now))
        self._board.retire(terminal)


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
    if agent is None:
        return False
    running = read_process(agent.pid)
    return running is None or running.start_ticks != agent.start_ticks
