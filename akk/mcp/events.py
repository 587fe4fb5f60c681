"""The events the bridge holds for its host until they are acked, bounded, and the wait on them.

Delivery stays at least once: an event leaves the buffer only when the host acks
it (`acked`), never when it is returned. The server keeps every unacked event
and sends it again on the next connection, so the buffer drops a repeat by its
event_id, and when full it drops the newest event rather than grow: that event
is still unacked at the server, and `resync_due` tells the link to reconnect,
once the host has made room, so the server delivers it again.

Both bounds hold whatever the server sends: at most `max_events` events and
`max_bytes` of their JSON (a single event larger than that is dropped the same
way, and counted).
"""

from __future__ import annotations

import itertools
import json
from collections import OrderedDict
from typing import Any

import attrs
import trio

MAX_EVENTS = 256
MAX_BYTES = 4 << 20


@attrs.define
class EventBuffer:
    """Unacked events in arrival order, keyed by event_id. Not thread-safe (one Trio run)."""

    max_events: int = MAX_EVENTS
    max_bytes: int = MAX_BYTES
    dropped: int = 0
    """Events dropped for want of room since the last resync (each still unacked at the server)."""
    _events: OrderedDict[str, tuple[dict[str, Any], int]] = attrs.field(factory=OrderedDict)
    arrivals: int = 0
    """Events held so far (a counter, so a waiter misses none that arrive while it works)."""
    _bytes: int = 0
    _arrived: trio.Event = attrs.field(factory=trio.Event)

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: dict[str, Any]) -> bool:
        """Hold ``event`` (as the server sent it); False if it was a repeat or had no room."""
        event_id = event.get("event_id")
        if not isinstance(event_id, str) or event_id in self._events:
            return False
        size = len(json.dumps(event))
        if len(self._events) >= self.max_events or self._bytes + size > self.max_bytes:
            self.dropped += 1
            return False
        self._events[event_id] = (event, size)
        self._bytes += size
        self.arrivals += 1
        self._arrived.set()
        self._arrived = trio.Event()
        return True

    def acked(self, event_id: str) -> None:
        """Forget ``event_id``: the server has it acked (or no longer knows it)."""
        held = self._events.pop(event_id, None)
        if held is not None:
            self._bytes -= held[1]

    def pending(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` unacked events, oldest first (they stay held)."""
        return [event for event, _ in itertools.islice(self._events.values(), limit)]

    async def wait(self, limit: int, timeout: float) -> list[dict[str, Any]]:
        """`pending`, waiting up to ``timeout`` seconds for the first event if none is held."""
        with trio.move_on_after(timeout):
            while not self._events:
                await self._arrived.wait()
        return self.pending(limit)

    async def arrived(self, after: int) -> None:
        """Return once more than ``after`` events have arrived (`arrivals`)."""
        while self.arrivals <= after:
            await self._arrived.wait()

    @property
    def resync_due(self) -> bool:
        """Events were dropped, and there is room again for the server to resend them."""
        return (
            self.dropped > 0
            and len(self._events) <= self.max_events // 2
            and self._bytes <= self.max_bytes // 2
        )

    def resynced(self) -> None:
        """The link reconnected: the server sends every unacked event again."""
        self.dropped = 0
