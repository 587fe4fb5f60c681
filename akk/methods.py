"""What each protocol method does, for one connected controller.

The server hands every validated call here. Methods that later capabilities
implement answer ``not_found`` with a next step until they exist; `hello`
lists what this server offers in ``capabilities.methods``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs

import akk
from akk.actors.runtime import ActorRef
from akk.actors.store import transact
from akk.protocol.errors import Code, Reason, RpcError
from akk.protocol.schema import PROTOCOL_VERSION
from akk.store import controllers, listing
from akk.store.reader import StoreReader


class TerminalView(Protocol):
    """The live terminal rows (published by the pane watcher)."""

    def rows(self) -> list[dict[str, Any]]: ...


@attrs.define
class Peer:
    """One connection's own state: who it is, once it said hello."""

    controller_id: str | None = None


Handler = Callable[[Peer, dict[str, Any]], Awaitable[Any]]


class Methods:
    """Dispatches calls by method name; one instance serves all connections."""

    def __init__(self, store: ActorRef, reader: StoreReader, terminals: TerminalView) -> None:
        self._store = store
        self._reader = reader
        self._terminals = terminals
        self._handlers: dict[str, Handler] = {"hello": self._hello, "list": self._list}

    async def call(self, peer: Peer, method: str, params: dict[str, Any]) -> Any:
        """Run one validated call; raises RpcError with a reason and a next step."""
        handler = self._handlers.get(method)
        if handler is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"{method} is part of protocol v1 but this server does not offer it yet; "
                "hello's capabilities.methods lists what it offers",
                code=Code.METHOD_NOT_FOUND,
            )
        if method != "hello" and peer.controller_id is None:
            raise RpcError(
                Reason.UNAUTHORIZED,
                'this connection has not said hello; call hello {"controller_id": ...} first',
            )
        return await handler(peer, params)

    async def _hello(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        controller_id: str = params["controller_id"]
        name: str = params.get("name", controller_id)
        if peer.controller_id not in (None, controller_id):
            raise RpcError(
                Reason.CONFLICT,
                f"this connection already said hello as {peer.controller_id!r}; "
                "open another connection for another controller",
            )
        now = time.time()
        await transact(
            self._store, lambda conn: controllers.record_hello(conn, controller_id, name, now)
        )
        peer.controller_id = controller_id
        return {
            "protocol": PROTOCOL_VERSION,
            "server_version": akk.__version__,
            "capabilities": {"methods": sorted(self._handlers)},
        }

    async def _list(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        controller_id = peer.controller_id
        assert controller_id is not None
        turns, watches = await self._reader.run(
            lambda conn: (
                listing.open_turns(conn, controller_id),
                listing.active_watches(conn, controller_id),
            )
        )
        return {"terminals": self._terminals.rows(), "turns": turns, "watches": watches}
