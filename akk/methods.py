"""What each protocol method does, for one connected controller.

The server hands every validated call here. Methods that later capabilities
implement answer ``not_found`` with a next step until they exist; `hello`
lists what this server offers in ``capabilities.methods``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

import akk
from akk.actors.runtime import ActorRef
from akk.actors.store import transact
from akk.protocol.errors import Code, Reason, RpcError
from akk.protocol.excerpt import excerpt
from akk.protocol.projection import project
from akk.protocol.schema import PROTOCOL_VERSION
from akk.screen.fingerprint import IdMinter
from akk.store import controllers, listing
from akk.store.reader import StoreReader
from akk.terminals import TerminalBoard, terminal_row


@attrs.define
class Peer:
    """One connection's own state: who it is, once it said hello."""

    controller_id: str | None = None


Handler = Callable[[Peer, dict[str, Any]], Awaitable[Any]]


class Methods:
    """Dispatches calls by method name; one instance serves all connections."""

    def __init__(
        self, store: ActorRef, reader: StoreReader, board: TerminalBoard, ids: IdMinter
    ) -> None:
        self._store = store
        self._reader = reader
        self._board = board
        self._ids = ids
        self._handlers: dict[str, Handler] = {
            "hello": self._hello,
            "list": self._list,
            "status": self._status,
        }

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
        return {"terminals": self._board.rows(), "turns": turns, "watches": watches}

    async def _status(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        terminal_id = params.get("terminal_id")
        if terminal_id is None:
            record = "turn" if "turn_id" in params else "watch"
            raise RpcError(
                Reason.NOT_FOUND,
                f"no {record} {params.get(f'{record}_id')!r}; `list` shows this controller's "
                "turns and watches",
            )
        snapshot = self._board.get(terminal_id)
        if snapshot is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"no terminal {terminal_id!r} (its pane closed or its agent restarted); "
                "call list for the current terminal ids",
            )
        observation = snapshot.observation
        interaction = None
        if (
            observation.prompt is not None
            and observation.actionable
            and snapshot.fingerprint is not None
        ):
            interaction = project(
                observation.prompt,
                fingerprint=snapshot.fingerprint,
                ids=self._ids,
                agent=snapshot.identity.agent,
                turn_id=None,
            )
        return {
            "terminal": terminal_row(snapshot),
            "interaction": interaction,
            "screen_excerpt": excerpt(snapshot.lines),
        }
