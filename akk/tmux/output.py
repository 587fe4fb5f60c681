"""Pane output as a signal that a pane may have changed: one output client per session.

tmux streams a pane's output only to control clients attached to a session
that holds the pane's window, so `OutputWatch` keeps one output client (see
`akk.tmux.control`, `output=True`) on each session it is asked to watch: at
most `MAX_OUTPUT_CLIENTS` per server, the sessions with the most watched panes
first (each client is a `tmux -C` process and three descriptors here). Panes
of other sessions have only the listing poll (`akk.tmux.activity`). Like any
client, an output client counts in its session's `#{session_attached}`: a
session nobody looks at, but that holds an agent, is listed as attached.

On its session's client every pane is a one-shot trigger:

- armed (how a client starts): the pane's first output line calls
  `on_output(pane_id)` and pauses the pane for this client at once
  (`refresh-client -A %N:pause`), so a pane that floods output costs a few
  lines per cycle, never a stream. The bytes are dropped unread.
- paused: tmux drops the pane's output for this client only. The pane runs
  on and the person sees everything: tmux reads a paused pane like any
  other. `arm(pane_id)` continues it (`%N:continue`): its next output fires
  again.

Whoever acts on the signal arms a pane right before it captures it, so
output after the arm fires again and output before it is in the capture:
no change is lost between two signals. tmux pausing a pane by itself (the
client fell `PAUSE_AFTER_SECONDS` behind) fires the same way. A pane nobody
arms (one with no agent) stays paused after its first line.

A client that closes (its session ended, tmux moved it to another session,
notifications overflowed) is reopened with backoff while its session is still
watched; changes in between are the poll's to find. Once (re)attached, every
pane of the session signals once: output from before the client could relay
it is then in the capture that follows.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping

import attrs
import trio

from akk.tmux.control import (
    DATA_NOTIFICATIONS,
    ControlClient,
    ControlClientClosed,
    ControlEventsLost,
    TmuxCommandError,
    open_control_client,
)

log = logging.getLogger("akk.tmux.output")

MAX_OUTPUT_CLIENTS = 32
"""Output clients (tmux processes, three descriptors each) per tmux server at most."""

RETRY_INTERVAL = 1.0
"""Seconds before reopening a watched session's client that closed or failed to open."""

MAX_RETRY_INTERVAL = 30.0

_NOTIFICATION_BUFFER = 4096
"""Unread notifications per client before they count as lost (and the client is reopened)."""


@attrs.define(eq=False)
class _SessionOutput:
    """The output client of one watched session, and the panes paused on it."""

    session_id: str
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    client: ControlClient | None = None
    paused: set[str] = attrs.field(factory=set)


class OutputWatch:
    """Output clients for the watched sessions of one tmux server; see the module docstring.

    Run `run` in a nursery that lives no longer than a no-output control
    client of the same server (the guarantee that a lagging output client
    never stalls a pane), then call `watch` whenever the sessions of interest
    change. `on_output` is called synchronously from the relay task and must
    not block.
    """

    def __init__(
        self,
        socket_path: str,
        on_output: Callable[[str], None],
        *,
        max_clients: int = MAX_OUTPUT_CLIENTS,
    ) -> None:
        self.socket = socket_path
        self.max_clients = max_clients
        self._on_output = on_output
        self._sessions: dict[str, _SessionOutput] = {}
        self._nursery: trio.Nursery | None = None

    @property
    def sessions(self) -> frozenset[str]:
        """The sessions that have (or are reopening) an output client."""
        return frozenset(self._sessions)

    @property
    def attached(self) -> int:
        """How many output clients are attached right now."""
        return sum(out.client is not None for out in self._sessions.values())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the output clients until cancelled; on exit every client detaches."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._sessions.clear()

    def watch(self, weights: Mapping[str, int]) -> None:
        """Keep output clients on these sessions: the `max_clients` heaviest by weight.

        `weights` maps a session id (`$N`) to how many watched panes it holds;
        sessions left out lose their client. Ties go to the older session.
        """
        if self._nursery is None:
            return
        ranked = sorted(weights, key=lambda s: (-weights[s], _session_number(s)))
        wanted = set(ranked[: self.max_clients])
        for session_id in self._sessions.keys() - wanted:
            self._sessions.pop(session_id).scope.cancel()
        for session_id in sorted(wanted - self._sessions.keys()):
            out = _SessionOutput(session_id)
            self._sessions[session_id] = out
            self._nursery.start_soon(self._follow, out)

    async def arm(self, pane_id: str) -> None:
        """Let the pane's next output fire again (continue it where it is paused).

        Costs no command when the pane is armed already. Never raises for a
        client that is closing: its replacement starts with every pane armed.
        """
        for out in list(self._sessions.values()):
            client = out.client
            if client is None or pane_id not in out.paused:
                continue
            out.paused.discard(pane_id)
            try:
                await client.command("refresh-client", "-A", f"{pane_id}:continue")
            except (ControlClientClosed, TmuxCommandError) as exc:
                log.debug("continue %s on %s failed: %s", pane_id, out.session_id, exc)

    async def _follow(self, out: _SessionOutput) -> None:
        """Keep one session's output client attached while the session is watched."""
        delay = RETRY_INTERVAL
        with out.scope:
            while True:
                try:
                    async with open_control_client(
                        self.socket, session=out.session_id, output=True
                    ) as client:
                        out.client = client
                        delay = RETRY_INTERVAL
                        await self._relay(out, client)
                except (ControlClientClosed, ControlEventsLost, TmuxCommandError, OSError) as exc:
                    log.debug("output client for %s %s: %s", self.socket, out.session_id, exc)
                finally:
                    out.client = None
                    out.paused.clear()
                await trio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, MAX_RETRY_INTERVAL)

    async def _relay(self, out: _SessionOutput, client: ControlClient) -> None:
        """Turn the client's notifications into signals until it closes or changes session.

        Output that came before the subscription (while attaching, or while no
        client was attached) was never relayed: every pane of the session
        signals once at the start instead.
        """
        with client.subscribe(limit=_NOTIFICATION_BUFFER) as notes:
            for listed in await client.command("list-panes", "-s", "-F", "#{pane_id}"):
                self._on_output(listed)
            async for note in notes:
                pane_id = note.pane_id
                if note.name in DATA_NOTIFICATIONS and pane_id is not None:
                    if pane_id in out.paused:
                        continue  # in flight before the pause took effect
                    out.paused.add(pane_id)
                    self._on_output(pane_id)
                    # Before any arm that on_output leads to: commands run in order.
                    await client.command("refresh-client", "-A", f"{pane_id}:pause")
                elif note.name == "pause" and pane_id is not None:
                    # tmux paused it: this client fell behind on its output.
                    if pane_id not in out.paused:
                        out.paused.add(pane_id)
                        self._on_output(pane_id)
                elif note.name == "session-changed" and note.args[:1] != (out.session_id,):
                    # The session ended and tmux moved this client to another one.
                    return


def _session_number(session_id: str) -> int:
    return int(session_id.lstrip("$") or 0)
