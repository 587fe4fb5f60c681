"""Learn which panes of ALL sessions on a tmux server changed, with one command per interval.

This is the safety net under pane output signals (`akk.tmux.output`): tmux
streams `%output` only to a client attached to the pane's session, output
clients are bounded in number, and a signal can be lost while one
reattaches. The listing also finds new panes and agents, and size changes.
`ActivityMonitor` polls `list-panes -a` over the no-output command channel
with a light format (`PROBE_FORMAT`, ~1 ms of tmux server time for 50 panes).
Each window's `window_activity` is its last output time in whole seconds, so
a pane may have changed since the previous poll (sent at `t`) exactly when
that value is at least `floor(t)`. That over-reports for at most a second
after output and never misses a change. Geometry, cursor, mode,
history size and the pane's pid are compared too, so a resize or a cursor
move without new output still counts. Only when something changed is the full
`list_panes` listing (~2.3 ms: the command name costs tmux a /proc read per
pane) taken, and it is the truth for which panes exist.

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
    ControlEventsLost,
    ControlProtocolError,
    Subscription,
)
from akk.tmux.panes import SEPARATOR, PaneInfo, list_panes

DEFAULT_INTERVAL = 0.25
"""Seconds between listings: bounds detection lag for panes whose output signals are missing."""


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


_PROBE_FIELDS = (
    "pane_id",
    "window_activity",
    "pane_pid",
    "pane_width",
    "pane_height",
    "cursor_x",
    "cursor_y",
    "pane_dead",
    "pane_in_mode",
    "alternate_on",
    "history_size",
)
PROBE_FORMAT = SEPARATOR.join(f"#{{{name}}}" for name in _PROBE_FIELDS)
"""The `-F` format of the per-interval probe: numbers and ids only."""


@attrs.frozen
class Probe:
    """One pane in a probe: last activity second, and everything else that shows change."""

    activity: int
    shape: tuple[str, ...]


def parse_probe(lines: list[str]) -> dict[str, Probe]:
    """Parse probe lines (`PROBE_FORMAT`) by pane id."""
    probes: dict[str, Probe] = {}
    for line in lines:
        fields = line.split(SEPARATOR)
        if len(fields) != len(_PROBE_FIELDS):
            raise ValueError(f"probe line has {len(fields)} fields: {line[:80]!r}")
        probes.setdefault(fields[0], Probe(int(fields[1] or 0), tuple(fields[2:])))
    return probes


def changed_since(
    before: Mapping[str, Probe], after: Mapping[str, Probe], since: float | None
) -> set[str]:
    """Panes in `after` that may have changed since the probe requested at `since`.

    New panes count; `since=None` (no earlier probe) means every pane.
    """
    floor = -math.inf if since is None else math.floor(since)
    changed = set()
    for pane_id, probe in after.items():
        old = before.get(pane_id)
        if old is None or probe.activity >= floor or probe.shape != old.shape:
            changed.add(pane_id)
    return changed


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
        panes: dict[str, PaneInfo] = {}
        probes: dict[str, Probe] = {}
        since: float | None = None
        with self.client.subscribe() as notes:
            hints: Subscription | None = notes
            while True:
                started = self.clock()
                lines = await self.client.command("list-panes", "-a", "-F", PROBE_FORMAT)
                try:
                    current = parse_probe(lines)
                except ValueError as exc:
                    raise ControlProtocolError(self.client.socket_path, str(exc)) from exc
                changed = changed_since(probes, current, since)
                if since is None or changed or current.keys() != probes.keys():
                    listed = {p.pane_id: p for p in await list_panes(self.client)}
                    added = frozenset(listed.keys() - panes.keys())
                    removed = frozenset(panes.keys() - listed.keys())
                    update = PaneUpdate(
                        listed, frozenset((changed & listed.keys()) | added), added, removed
                    )
                    first = since is None
                    panes = listed
                    if first or update.changed or update.removed:
                        yield update
                probes, since = current, started
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
            except ControlEventsLost:
                await trio.sleep_forever()
        if hints.overflowed:
            return None
        hints.pending()
        return hints
