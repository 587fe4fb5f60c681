"""Which connection speaks for each controller: one live connection per controller_id.

A controller's newer connection takes over: when it says hello, the older one
is closed with ``SUPERSEDED`` (a controller that crashed and reconnects must
not wait for its dead connection to time out). Events for a controller go to
its current connection only; anything the old one did not ack stays in the
outbox and is redelivered on the new one with the same ``event_id``.

The operator's commands run side by side: each of its connections that takes
events gets each event (the first ack accepts it). A connection whose hello
said ``"events": false`` (a one-shot command) claims nothing: it takes no
events and supersedes no one.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from akk.methods.common import Closable

# WebSocket close codes in the private-use range (4000-4999), with their reasons.
SUPERSEDED = 4001
"""Another connection said hello with this controller's credential."""
NO_HELLO = 4002
"""The connection did not say hello within the hello timeout of connecting."""
REVOKED = 4003
"""The credential this connection authenticated with was revoked."""
NOT_READING = 4008
"""The peer stopped reading: a reply or a keepalive could not be sent in time."""


@attrs.define
class ConnectionRegistry:
    """Every authenticated connection by controller_id, and which ones said hello (newest last).

    A controller's newest connection is its live one: claiming closes the
    older ones. The operator's commands run side by side, so its claims close
    nothing; its events go to each of its live connections.
    """

    _admitted: dict[str, set[Closable]] = attrs.field(factory=dict)
    _live: dict[str, list[Closable]] = attrs.field(factory=dict)
    takeovers: int = 0

    def admit(self, controller_id: str, connection: Closable) -> None:
        """``connection`` authenticated as ``controller_id`` (it has not said hello yet)."""
        self._admitted.setdefault(controller_id, set()).add(connection)

    def leave(self, controller_id: str, connection: Closable) -> None:
        """``connection`` ended."""
        admitted = self._admitted.get(controller_id)
        if admitted is not None:
            admitted.discard(connection)
            if not admitted:
                del self._admitted[controller_id]
        live = self._live.get(controller_id)
        if live is not None and connection in live:
            live.remove(connection)
            if not live:
                del self._live[controller_id]

    def claim(self, controller_id: str, connection: Closable, *, exclusive: bool = True) -> None:
        """``connection`` said hello and now speaks for ``controller_id``.

        With ``exclusive`` (every controller but the operator) older ones close.
        """
        live = self._live.setdefault(controller_id, [])
        if exclusive:
            for previous in live:
                self.takeovers += 1
                previous.close_soon(
                    SUPERSEDED,
                    "superseded: a newer connection said hello with this controller's credential",
                )
            live.clear()
        live.append(connection)

    def revoke(self, controller_id: str) -> int:
        """Close every connection authenticated as ``controller_id``; return how many."""
        self._live.pop(controller_id, None)
        connections = self._admitted.pop(controller_id, set())
        for connection in connections:
            connection.close_soon(REVOKED, "credential revoked; ask the operator for a new one")
        return len(connections)

    def current(self, controller_id: str) -> Closable | None:
        """Where ``controller_id``'s events go: its live connection, or the operator's
        live connections side by side, as one."""
        live = self._live.get(controller_id)
        if not live:
            return None
        return live[0] if len(live) == 1 else SideBySide(tuple(live))

    @property
    def live(self) -> int:
        return len(self._live)


@attrs.frozen
class SideBySide:
    """Several live connections of one controller (the operator's) as one: each event,
    frame or close goes to each of them."""

    connections: tuple[Closable, ...]

    async def send_event(self, event: dict[str, Any], *, timeout: float) -> bool:
        """Write the event to each connection at once; True if any took it in time."""
        taken: list[bool] = []

        async def one(connection: Closable) -> None:
            taken.append(await connection.send_event(event, timeout=timeout))

        async with trio.open_nursery() as nursery:
            for connection in self.connections:
                nursery.start_soon(one, connection)
        return any(taken)

    async def send_frame(self, frame: str, *, timeout: float) -> bool:
        """Write the frame to each connection in turn; True if any took it in time."""
        taken = [await c.send_frame(frame, timeout=timeout) for c in self.connections]
        return any(taken)

    def close_soon(self, code: int, reason: str) -> None:
        for connection in self.connections:
            connection.close_soon(code, reason)
