"""Which connection speaks for each controller: one live connection per controller_id.

A controller's newer connection takes over: when it says hello, the older one
is closed with ``SUPERSEDED`` (a controller that crashed and reconnects must
not wait for its dead connection to time out). Events for a controller go to
its current connection only; anything the old one did not ack stays in the
outbox and is redelivered on the new one with the same ``event_id``.
"""

from __future__ import annotations

import attrs

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
    nothing; its events go to its newest connection.
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
        """The connection that speaks for ``controller_id`` (where its events go)."""
        live = self._live.get(controller_id)
        return live[-1] if live else None

    @property
    def live(self) -> int:
        return len(self._live)
