"""What each protocol method does, for one connected controller.

The server hands every validated call here, with the caller's verified
credential. Methods that later capabilities implement answer ``not_found``
with a next step until they exist; `hello` lists what this caller may call in
``capabilities.methods``. Operator methods (credentials, health) need the
operator scope, which only the CLI's own credential has.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

import akk
from akk.actors.store import transact
from akk.actors.terminal_board import TerminalBoard, project_snapshot, terminal_row
from akk.callback_calls import CallbackCalls
from akk.interaction_calls import InteractionCalls
from akk.profiles.qualified_versions import QualifiedVersions
from akk.protocol.errors import Code, Reason, RpcError
from akk.protocol.excerpt import excerpt
from akk.protocol.schema import OPERATOR_METHODS, PROTOCOL_VERSION
from akk.runtime.actor import ActorRef
from akk.screen.fingerprint import IdMinter
from akk.server.auth import CredentialBook
from akk.server.connections import Closable, ConnectionRegistry
from akk.session_calls import SessionCalls
from akk.store import credentials, qualifications, terminals, turns
from akk.store.credentials import Credential, CredentialError, Scope, token_digest
from akk.store.reader import StoreReader
from akk.store.turns import BACKEND
from akk.turn_calls import TurnCalls
from akk.watch_calls import WatchCalls
from akk.workspace_roots import RootError, check_roots, covered, pane_allowed


@attrs.define(eq=False)
class Peer:
    """One connection's own state: the credential it proved, and whether it said hello."""

    credential: Credential
    connection: Closable
    said_hello: bool = False

    @property
    def controller_id(self) -> str:
        return self.credential.controller_id

    @property
    def operator(self) -> bool:
        return self.credential.scope is Scope.OPERATOR


Handler = Callable[[Peer, dict[str, Any]], Awaitable[Any]]
HealthReport = Callable[[], dict[str, Any]]


class Methods:
    """Dispatches calls by method name; one instance serves all connections."""

    def __init__(
        self,
        store: ActorRef,
        reader: StoreReader,
        board: TerminalBoard,
        ids: IdMinter,
        *,
        book: CredentialBook,
        connections: ConnectionRegistry,
        health: HealthReport,
        turns: TurnCalls,
        interactions: InteractionCalls,
        callbacks: CallbackCalls,
        watches: WatchCalls,
        sessions: SessionCalls,
        workspace_roots: tuple[str, ...],
        qualified: QualifiedVersions,
    ) -> None:
        """``workspace_roots``: the server's canonical roots (`akk serve --workspace-root`)."""
        self._roots = workspace_roots
        self._qualified = qualified
        self._sessions = sessions
        self._watches = watches
        self._callbacks = callbacks
        self._interactions = interactions
        self._store = store
        self._reader = reader
        self._board = board
        self._ids = ids
        self._book = book
        self._connections = connections
        self._health = health
        self._turns = turns
        self._handlers: dict[str, Handler] = {
            "hello": self._hello,
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
            "token_create": self._token_create,
            "token_list": self._token_list,
            "token_revoke": self._token_revoke,
            "qualification_record": self._qualification_record,
            "qualification_list": self._qualification_list,
            "qualification_revoke": self._qualification_revoke,
            "doctor": self._doctor,
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
        return await handler(peer, params)

    async def _hello(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        claimed = params.get("controller_id", peer.controller_id)
        if claimed != peer.controller_id:
            raise RpcError(
                Reason.UNAUTHORIZED,
                f"this credential belongs to controller {peer.controller_id!r}, not "
                f"{claimed[:80]!r}; omit controller_id or use that controller's own credential "
                "(`akk token create NAME` mints one)",
            )
        if not peer.said_hello:
            controller_id = peer.controller_id
            name: str = params.get("name", controller_id)
            now = time.time()
            await transact(
                self._store,
                lambda conn: credentials.record_use(conn, controller_id, name, now),
            )
            peer.said_hello = True
            # A controller has one live connection, the newest; the operator's
            # commands (`akk list`, `akk events`) run side by side (akk.server.connections).
            self._connections.claim(controller_id, peer.connection, exclusive=not peer.operator)
            await self._turns.reconnected(controller_id)
        return {
            "protocol": PROTOCOL_VERSION,
            "server_version": akk.__version__,
            "controller_id": peer.controller_id,
            "scope": peer.credential.scope.value,
            "capabilities": {
                "methods": self.offered(peer),
                "workspace_roots": list(self._backend_roots(peer)),
                "pane_roots": list(peer.credential.roots) or None,
            },
        }

    def _backend_roots(self, peer: Peer) -> tuple[str, ...]:
        """Where ``peer`` may put a backend cwd: the server's roots within its credential's."""
        narrowed = peer.credential.roots
        if not narrowed:
            return self._roots
        inner = [r for r in narrowed if covered(r, self._roots)]
        inner += [r for r in self._roots if covered(r, narrowed)]
        return tuple(dict.fromkeys(inner))

    async def _pane(self, peer: Peer, terminal_id: str | None) -> None:
        """Refuse (not_owner) a credential narrowed to roots acting on a pane outside them.

        A pane's cwd was chosen by the person who started its agent, so the
        server's own roots do not bound it; only a credential's roots do. An
        unknown terminal passes here and gets its not_found from the call itself.
        """
        narrowed = peer.credential.roots
        if not narrowed or terminal_id is None:
            return
        snapshot = self._board.get(terminal_id)
        if snapshot is not None:
            cwd = snapshot.identity.cwd
        else:
            cwd = await self._reader.run(lambda conn: terminals.cwd_of(conn, terminal_id))
            if cwd is None and self._board.ref(terminal_id) is None:
                return
        if not pane_allowed(cwd, narrowed):
            raise RpcError(
                Reason.NOT_OWNER,
                f"terminal {terminal_id[:80]!r} runs outside this credential's workspace roots "
                f"({', '.join(narrowed)}); nothing was sent. Act only on panes under them (list "
                "shows those), or ask the operator for a credential with that root",
            )

    async def _turn_pane(self, peer: Peer, turn_id: str) -> None:
        """``_pane`` for the terminal of Turn ``turn_id`` (a backend Turn has none)."""
        if peer.credential.roots:
            turn = await self._reader.run(lambda conn: turns.get(conn, turn_id))
            if turn is not None:
                await self._pane(peer, turn.terminal_id)

    async def _list(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        # The operator sees every controller's records; a controller only its own.
        owner = None if peer.operator else peer.controller_id
        # A credential narrowed to roots is not shown the panes it may not act on.
        narrowed = peer.credential.roots
        rows = [r for r in self._board.rows() if pane_allowed(r["cwd"], narrowed)]
        return await self._turns.listing(owner, rows)

    async def _send(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        if "terminal_id" in params:
            await self._pane(peer, params["terminal_id"])
            return await self._turns.send(peer.controller_id, params)
        return await self._sessions.send(
            peer.controller_id, params, roots=self._backend_roots(peer)
        )

    async def _respond(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await self._turn_pane(peer, params["turn_id"])
        return await self._turns.respond(
            peer.controller_id, peer.operator, params["turn_id"], params["request"]
        )

    async def _approve(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await self._turn_pane(peer, params["turn_id"])
        return await self._interactions.approve(peer.controller_id, params)

    async def _respond_interaction(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await self._turn_pane(peer, params["turn_id"])
        return await self._interactions.respond_interaction(peer.controller_id, params)

    async def _cancel(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await self._turn_pane(peer, params["turn_id"])
        return await self._turns.cancel(peer.controller_id, peer.operator, params["turn_id"])

    async def _close(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return await self._turns.close(peer.controller_id, peer.operator, params["turn_id"])

    async def _ack(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return await self._turns.ack(peer.controller_id, params["event_id"])

    async def _retry_callback(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return await self._callbacks.retry(peer.controller_id, peer.operator, params)

    async def _watch(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        await self._pane(peer, params["terminal_id"])
        return await self._watches.watch(peer.controller_id, params["terminal_id"])

    async def _unwatch(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return await self._watches.unwatch(peer.controller_id, peer.operator, params["watch_id"])

    async def _renew(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        record_id = params.get("watch_id") or params["turn_id"]
        return await self._watches.renew(
            peer.controller_id, peer.operator, record_id, params.get("minutes")
        )

    async def _recover(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        record_id = params.get("watch_id") or params["turn_id"]
        record = await self._reader.run(lambda conn: turns.get(conn, record_id))
        if record is not None and record.backend == BACKEND:
            return await self._sessions.recover(peer.controller_id, peer.operator, record_id)
        return await self._watches.recover(peer.controller_id, peer.operator, record_id)

    async def _token_create(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        controller_id: str = params["controller_id"]
        try:
            roots = await trio.to_thread.run_sync(check_roots, params.get("workspace_roots", ()))
        except RootError as exc:
            raise RpcError(Reason.INVALID_PARAMS, str(exc)) from None
        now = time.time()
        try:
            minted = await transact(
                self._store,
                lambda conn: credentials.create(
                    conn, controller_id, now, actor=peer.controller_id, roots=roots
                ),
            )
        except CredentialError as exc:
            raise RpcError(Reason.CONFLICT, str(exc)) from None
        credential = Credential(minted.controller_id, Scope.CONTROLLER, roots)
        self._book.add(credential, token_digest(minted.token))
        return {
            "controller_id": minted.controller_id,
            "token": minted.token,
            "workspace_roots": list(roots),
        }

    async def _token_list(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        rows = await self._reader.run(credentials.listing)
        for row in rows:
            row["connected"] = self._connections.current(row["controller_id"]) is not None
        return {"credentials": rows}

    async def _token_revoke(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        controller_id: str = params["controller_id"]
        now = time.time()
        revoked = await transact(
            self._store,
            lambda conn: credentials.revoke(conn, controller_id, now, actor=peer.controller_id),
        )
        if not revoked:
            raise RpcError(
                Reason.NOT_FOUND,
                f"controller {controller_id[:80]!r} has no credential; "
                "`akk token list` shows the live ones",
            )
        self._book.remove(controller_id)
        closed = self._connections.revoke(controller_id)
        return {"controller_id": controller_id, "revoked": True, "connections_closed": closed}

    async def _qualification_record(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        row = qualifications.Qualification(**params)
        pinned = self._qualified.registry.base_agents
        try:
            await transact(
                self._store,
                lambda conn: qualifications.record(conn, row, pinned, actor=peer.controller_id),
            )
        except qualifications.QualificationError as exc:
            raise RpcError(Reason.INVALID_PARAMS, f"{exc}; nothing was recorded") from None
        await self._qualified.refresh()  # the watchers re-bind its panes now, not at the poll
        return row.to_json()

    async def _qualification_list(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        pinned = self._qualified.registry.base_agents
        entries = await self._reader.run(lambda conn: qualifications.load(conn, pinned))
        return {"qualifications": [entry.to_json() for entry in entries]}

    async def _qualification_revoke(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        agent: str = params["agent"]
        version: str = params["version"]
        now = time.time()
        revoked = await transact(
            self._store,
            lambda conn: qualifications.revoke(conn, agent, version, now, actor=peer.controller_id),
        )
        if not revoked:
            raise RpcError(
                Reason.NOT_FOUND,
                f"{agent} {version[:40]!r} has no qualification; `akk qualify --list` shows them",
            )
        await self._qualified.refresh()
        return {"agent": agent, "version": version, "revoked": True}

    async def _doctor(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return self._health()

    async def _status(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        # A managed Send's turn_id is also its watch_id.
        record_id = params.get("turn_id") or params.get("watch_id")
        if record_id is not None:
            await self._turn_pane(peer, record_id)
            return await self._turns.status(peer.controller_id, peer.operator, record_id)
        terminal_id: str = params["terminal_id"]
        await self._pane(peer, terminal_id)
        snapshot = self._board.get(terminal_id)
        if snapshot is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"no terminal {terminal_id!r} (its pane closed or its agent restarted); "
                "call list for the current terminal ids",
            )
        # A terminal's prompt is shown, never offered: answers go through the Turn.
        projected = project_snapshot(snapshot, self._ids, None)
        shown = excerpt(snapshot.lines)
        result: dict[str, Any] = {
            "terminal": terminal_row(snapshot),
            "interaction": None if projected is None else projected.projection,
            "screen_excerpt": shown,
        }
        if shown is None:
            result["screen_excerpt_withheld"] = "secret_input"
        return result
