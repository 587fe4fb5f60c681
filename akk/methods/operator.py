"""The handshake and the operator's methods: hello, tokens, qualifications, doctor.

`hello` opens every connection (any credential); the rest need the operator
scope, which only the CLI's own credential has (the table refuses others).
"""

from __future__ import annotations

import time
from typing import Any

import trio

import akk
from akk.actors.store import transact
from akk.methods.common import MethodContext, Peer, backend_roots
from akk.protocol.errors import Reason, RpcError
from akk.protocol.schema import PROTOCOL_VERSION
from akk.store import credentials, outbox, qualifications
from akk.store.credentials import Credential, CredentialError, Scope, token_digest
from akk.workspace_roots import RootError, check_roots


class OperatorCalls:
    def __init__(self, ctx: MethodContext) -> None:
        self._ctx = ctx

    async def hello(self, peer: Peer, params: dict[str, Any], offered: list[str]) -> dict[str, Any]:
        """Name the caller's controller; its first hello redelivers what it did not ack.

        ``offered``: the methods ``peer`` may call (the table's).
        """
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
                self._ctx.store,
                lambda conn: credentials.record_use(conn, controller_id, name, now),
            )
            peer.said_hello = True
            # A controller has one live connection, the newest; the operator's
            # commands (`akk list`, `akk events`) run side by side (akk.server.connections).
            self._ctx.connections.claim(controller_id, peer.connection, exclusive=not peer.operator)
            released = time.time()
            await transact(
                self._ctx.store,
                lambda conn: outbox.release_leases(conn, controller_id, released),
            )
            self._ctx.destinations.wake(controller_id)
        return {
            "protocol": PROTOCOL_VERSION,
            "server_version": akk.__version__,
            "controller_id": peer.controller_id,
            "scope": peer.credential.scope.value,
            "capabilities": {
                "methods": offered,
                "workspace_roots": list(backend_roots(self._ctx, peer)),
                "pane_roots": list(peer.credential.roots) or None,
            },
        }

    async def token_create(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        controller_id: str = params["controller_id"]
        try:
            roots = await trio.to_thread.run_sync(check_roots, params.get("workspace_roots", ()))
        except RootError as exc:
            raise RpcError(Reason.INVALID_PARAMS, str(exc)) from None
        now = time.time()
        try:
            minted = await transact(
                self._ctx.store,
                lambda conn: credentials.create(
                    conn, controller_id, now, actor=peer.controller_id, roots=roots
                ),
            )
        except CredentialError as exc:
            raise RpcError(Reason.CONFLICT, str(exc)) from None
        credential = Credential(minted.controller_id, Scope.CONTROLLER, roots)
        self._ctx.book.add(credential, token_digest(minted.token))
        return {
            "controller_id": minted.controller_id,
            "token": minted.token,
            "workspace_roots": list(roots),
        }

    async def token_list(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        rows = await self._ctx.reader.run(credentials.listing)
        for row in rows:
            row["connected"] = self._ctx.connections.current(row["controller_id"]) is not None
        return {"credentials": rows}

    async def token_revoke(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        controller_id: str = params["controller_id"]
        now = time.time()
        revoked = await transact(
            self._ctx.store,
            lambda conn: credentials.revoke(conn, controller_id, now, actor=peer.controller_id),
        )
        if not revoked:
            raise RpcError(
                Reason.NOT_FOUND,
                f"controller {controller_id[:80]!r} has no credential; "
                "`akk token list` shows the live ones",
            )
        self._ctx.book.remove(controller_id)
        closed = self._ctx.connections.revoke(controller_id)
        return {"controller_id": controller_id, "revoked": True, "connections_closed": closed}

    async def qualification_record(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        row = qualifications.Qualification(**params)
        pinned = self._ctx.qualified.registry.base_agents
        try:
            await transact(
                self._ctx.store,
                lambda conn: qualifications.record(conn, row, pinned, actor=peer.controller_id),
            )
        except qualifications.QualificationError as exc:
            raise RpcError(Reason.INVALID_PARAMS, f"{exc}; nothing was recorded") from None
        await self._ctx.qualified.refresh()  # the watchers re-bind its panes now, not at the poll
        return row.to_json()

    async def qualification_list(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        pinned = self._ctx.qualified.registry.base_agents
        entries = await self._ctx.reader.run(lambda conn: qualifications.load(conn, pinned))
        return {"qualifications": [entry.to_json() for entry in entries]}

    async def qualification_revoke(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        agent: str = params["agent"]
        version: str = params["version"]
        now = time.time()
        revoked = await transact(
            self._ctx.store,
            lambda conn: qualifications.revoke(conn, agent, version, now, actor=peer.controller_id),
        )
        if not revoked:
            raise RpcError(
                Reason.NOT_FOUND,
                f"{agent} {version[:40]!r} has no qualification; `akk qualify --list` shows them",
            )
        await self._ctx.qualified.refresh()
        return {"agent": agent, "version": version, "revoked": True}

    async def doctor(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        return self._ctx.health()
