"""The method table: every protocol method's name, scope and handler, in one place.

The server hands every validated call here, with the caller's verified
credential. Methods that later capabilities implement answer ``not_found``
with a next step until they exist; `hello` lists what this caller may call in
``capabilities.methods``. Operator methods (credentials, qualifications,
health) need the operator scope, which only the CLI's own credential has. A
handler checks the caller's pane scope (a credential narrowed to roots), then
hands the call to the peer module that owns it. Any not_found of a call that
names a record retention pruned says so, with the date (`common.pruned`).
"""

from __future__ import annotations

from typing import Any

from akk.evidence.model import Agent
from akk.methods.callbacks import CallbackCalls
from akk.methods.common import (
    Handler,
    MethodContext,
    Peer,
    backend_roots,
    check_pane,
    check_turn_pane,
    pruned,
)
from akk.methods.interactions import InteractionCalls
from akk.methods.list_view import ListView
from akk.methods.operator import OperatorCalls
from akk.methods.sessions import SessionCalls
from akk.methods.turns import TurnCalls
from akk.methods.watches import WatchCalls
from akk.protocol.errors import Code, Reason, RpcError
from akk.protocol.jsonrpc import Encoded
from akk.protocol.schema import OPERATOR_METHODS
from akk.store import turns


class Methods:
    """Dispatches calls by method name; one instance serves all connections."""

    def __init__(self, ctx: MethodContext) -> None:
        self._ctx = ctx
        self._turns = TurnCalls(ctx)
        self._interactions = InteractionCalls(ctx)
        self._callbacks = CallbackCalls(ctx)
        self._watches = WatchCalls(ctx)
        self._sessions = SessionCalls(ctx)
        self._operator = OperatorCalls(ctx)
        self._list_view = ListView(ctx.board, ctx.reader)
        operator = self._operator
        self._handlers: dict[str, Handler] = {
            "hello": lambda peer, params: operator.hello(peer, params, self.offered(peer)),
            "list": self._list,
            "status": self._status,
            "send": self._send,
            "respond": self._respond,
            "approve": self._approve,
            "respond_interaction": self._respond_interaction,
            "cancel": self._cancel,
            "close": self._close,
            "ack": self._ack,
            "retry_callback": self._retry_callback,
            "watch": self._watch,
            "unwatch": self._unwatch,
            "renew": self._renew,
            "recover": self._recover,
        }
        self._operator_handlers: dict[str, Handler] = {
            "token_create": operator.token_create,
            "token_list": operator.token_list,
            "token_revoke": operator.token_revoke,
            "qualification_record": operator.qualification_record,
            "qualification_list": operator.qualification_list,
            "qualification_revoke": operator.qualification_revoke,
            "doctor": operator.doctor,
            "gc": operator.gc,
            "ui_login": operator.ui_login,
            "console_follow": operator.console_follow,
        }
        assert set(self._operator_handlers) == set(OPERATOR_METHODS)

    def offered(self, peer: Peer) -> list[str]:
        """The methods ``peer`` may call."""
        names = set(self._handlers)
        if peer.operator:
            names |= set(self._operator_handlers)
        return sorted(names)

    async def call(self, peer: Peer, method: str, params: dict[str, Any]) -> Any:
        """Run one validated call; raises RpcError with a reason and a next step."""
        handler = self._handlers.get(method)
        if handler is None and method in self._operator_handlers:
            if not peer.operator:
                raise RpcError(
                    Reason.UNAUTHORIZED,
                    f"{method} is an operator method; only the operator CLI's credential "
                    "(`akk token`) may call it",
                )
            handler = self._operator_handlers[method]
        if handler is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"{method} is part of protocol v1 but this server does not offer it yet; "
                "hello's capabilities.methods lists what it offers",
                code=Code.METHOD_NOT_FOUND,
            )
        if method != "hello" and not peer.said_hello:
            raise RpcError(
                Reason.UNAUTHORIZED,
                "this connection has not said hello; call hello first",
            )
        try:
            return await handler(peer, params)
        except RpcError as error:
            if error.reason is not Reason.NOT_FOUND:
                raise
            gone = await pruned(self._ctx, peer, params)
            if gone is None:
                raise
            raise gone from None

    async def _list(self, peer: Peer, params: dict[str, Any]) -> Encoded:
        # The operator sees every controller's records; a controller only its own. A
        # credential narrowed to roots is not shown the panes it may not act on.
        owner = None if peer.operator else peer.controller_id
        return await self._list_view.listing(owner, peer.credential.roots)

    async def _status(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        # A managed Send's turn_id is also its watch_id.
        record_id = params.get("turn_id") or params.get("watch_id")
        if record_id is not None:
            await check_turn_pane(self._ctx, peer, record_id)
            return await self._turns.status(peer.controller_id, peer.operator, record_id)
        terminal_id: str = params["terminal_id"]
        await check_pane(self._ctx, peer, terminal_id)
        return await self._turns.terminal_status(peer.controller_id, peer.operator, terminal_id)

    async def _send(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        if "terminal_id" in params:
            await check_pane(self._ctx, peer, params["terminal_id"])
            return await self._turns.send(peer.controller_id, params)
        return await self._sessions.send(
            peer.controller_id, params, roots=backend_roots(self._ctx, peer)
        )

    async def _respond(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await check_turn_pane(self._ctx, peer, params["turn_id"])
        return await self._turns.respond(
            peer.controller_id,
            peer.operator,
            params["turn_id"],
            params["request"],
            params.get("client_request_id"),
        )

    async def _approve(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await check_turn_pane(self._ctx, peer, params["turn_id"])
        return await self._interactions.approve(peer.controller_id, params)

    async def _respond_interaction(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await check_turn_pane(self._ctx, peer, params["turn_id"])
        return await self._interactions.respond_interaction(peer.controller_id, params)

    async def _cancel(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await check_turn_pane(self._ctx, peer, params["turn_id"])
        return await self._turns.cancel(peer.controller_id, peer.operator, params["turn_id"])

    async def _close(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return await self._turns.close(peer.controller_id, peer.operator, params["turn_id"])

    async def _ack(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return await self._turns.ack(peer.controller_id, params["event_id"])

    async def _retry_callback(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return await self._callbacks.retry(peer.controller_id, peer.operator, params)

    async def _watch(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        if "terminal_id" in params:
            await check_pane(self._ctx, peer, params["terminal_id"])
            return await self._watches.watch(peer.controller_id, params["terminal_id"])
        # A person's task by the id its agent gave it (the schema allows exactly one shape).
        agent: Agent = "codex" if "thread_id" in params else "claude"
        native_id = params.get("thread_id") or params["claude_session_id"]
        home = params.get("codex_home") or params["claude_config_dir"]
        return await self._watches.watch_task(
            peer.controller_id, agent, native_id, home, peer.credential.roots
        )

    async def _unwatch(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return await self._watches.unwatch(peer.controller_id, peer.operator, params["watch_id"])

    async def _renew(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        record_id = params.get("watch_id") or params["turn_id"]
        return await self._watches.renew(
            peer.controller_id, peer.operator, record_id, params.get("minutes")
        )

    async def _recover(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        record_id = params.get("watch_id") or params["turn_id"]
        record = await self._ctx.reader.run(lambda conn: turns.get(conn, record_id))
        # A session's Turn reconciles from its backend's thread; a pane's record (a Watch,
        # or a Send typed into a terminal) from its pane. Unknown ids are refused there.
        if record is not None and self._ctx.backends.of(record).keeps_sessions:
            return await self._sessions.recover(peer.controller_id, peer.operator, record_id)
        return await self._watches.recover(peer.controller_id, peer.operator, record_id)
