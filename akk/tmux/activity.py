"""Learn which panes of ALL sessions on a tmux server changed, with one command per interval.

tmux only streams `%output` for panes of the session a control client is
attached to, and streaming output would let a slow reader stall panes (see
`akk.tmux.control`). Instead, `ActivityMonitor` polls `list-panes -a` over the
control channel. Each window's `window_activity` is its last output time in
whole seconds, so a pane may have changed since the previous poll (sent at
`t`) exactly when that value is at least `floor(t)`. That over-reports for at
most a second after output and never misses a change. Geometry, cursor, mode,
history size and the pane's command are compared too, so a resize or a
cursor move without new output still counts.

Topology notifications (`%window-add`, `%unlinked-window-close`,
`%sessions-changed`, ...) wake the loop early; the listing is still the truth.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator, Callable, Mapping

import attrs
import trio

from akk.tmux.control import (
    TOPOLOGY_NOTIFICATIONS,
    ControlClient,
    NotificationsLost,
    Subscription,
)
from akk.tmux.panes import PaneInfo, list_panes

DEFAULT_INTERVAL = 0.25
"""Seconds between listings: bounds detection lag for panes outside the attached session."""


@attrs.frozen
class PaneUpdate:
    """What one listing found different from the previous one."""

    panes: Mapping[str, PaneInfo]
    """Every pane on the server now, by pane id."""
    changed: frozenset[str]
    """Panes whose screen may differ (includes `added`): capture these."""
    added: frozenset[str]
    removed: frozenset[str]

    @property
    def topology_changed(self) -> bool:
        """True if panes appeared or went away."""
        return bool(self.added or self.removed)


def _shape(pane: PaneInfo) -> tuple[object, ...]:
    """What, besides output, makes a pane's screen or identity differ."""
    return (
        pane.pane_pid,
        pane.width,
        pane.height,
        pane.cursor_x,
        pane.cursor_y,
        pane.dead,
        pane.in_mode,
        pane.alternate_on,
        pane.history_size,
        pane.current_command,
    )


def diff(
    before: Mapping[str, PaneInfo], after: Mapping[str, PaneInfo], since: float | None
) -> PaneUpdate:
    """Compare two listings; `since` is when the earlier listing was requested (None: first)."""
    added = frozenset(after.keys() - before.keys())
    removed = frozenset(before.keys() - after.keys())
    floor = -math.inf if since is None else math.floor(since)
    changed = set(added)
    for pane_id, pane in after.items():
        old = before.get(pane_id)
        if old is None:
            continue
        if pane.activity >= floor or _shape(pane) != _shape(old):
            changed.add(pane_id)
    return PaneUpdate(dict(after), frozenset(changed), added, removed)


@attrs.define(eq=False)
class ActivityMonitor:
    """Polls one server's panes through a control client and yields what changed.

    `clock` is wall-clock seconds (tmux's activity times are wall-clock too);
    tests may replace it.
    """

    client: ControlClient
    interval: float = DEFAULT_INTERVAL
    clock: Callable[[], float] = time.time

    async def updates(self) -> AsyncGenerator[PaneUpdate, None]:
        """Yield a `PaneUpdate` whenever a listing differs; the first lists every pane as added.

        Runs until cancelled. Raises `ControlClientClosed` when the server or
        client goes away, and `TmuxCommandError` if tmux refuses the listing.
        """
        previous: dict[str, PaneInfo] = {}
        since: float | None = None
        with self.client.subscribe() as notes:
            hints: Subscription | None = notes
            while True:
                started = self.clock()
                current = {p.pane_id: p for p in await list_panes(self.client)}
                update = diff(previous, current, since)
                first = since is None
                previous, since = current, started
                if first or update.changed or update.removed:
                    yield update
                hints = await self._wait(hints)

    async def _wait(self, hints: Subscription | None) -> Subscription | None:
        """Sleep one interval, or less if a topology notification arrives.

        Returns the subscription to keep using, or None once it overflowed
        (only possible with pane output enabled): from then on just sleep.
        """
        if hints is None:
            await trio.sleep(self.interval)
            return None
        with trio.move_on_after(self.interval):
            try:
                async for note in hints:
                    if note.name in TOPOLOGY_NOTIFICATIONS:
                        break
            except NotificationsLost:
                await trio.sleep_forever()
        if hints.overflowed:
            return None
        hints.pending()
        return hints

    async def changed_panes(self) -> AsyncGenerator[set[str], None]:
        """Yield the ids of panes whose screen may have changed (added panes included)."""
        async for update in self.updates():
            if update.changed:
                yield set(update.changed)
