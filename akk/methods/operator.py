"""The handshake and the operator's methods: hello, tokens, qualifications, doctor, gc, and
the console's (a login code, the live view).

`hello` opens every connection (any credential); the rest need the operator
scope, which only the CLI's own credential has (the table refuses others).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, Protocol

import trio

import akk
from akk.actors.store import transact
from akk.backends.claude_headless.setup import pinned as claude_pinned
from akk.backends.codex_app_server import schema
from akk.backends.names import CLAUDE_HEADLESS, CODEX_APP_SERVER
from akk.console.login import CODE_SECONDS
from akk.methods.common import MethodContext, Peer, backend_roots
from akk.protocol.errors import Reason, RpcError
from akk.protocol.jsonrpc import Encoded
from akk.protocol.schema import PROTOCOL_VERSION
from akk.store import credentials, outbox, qualifications
from akk.store.credentials import Credential, CredentialError, Scope, token_digest
from akk.store.database import StoreUnwritable
from akk.workspace_roots import RootError, check_roots


class OperatorCalls:
    def __init__(self, ctx: MethodContext) -> None:
        self._ctx = ctx

    async def hello(self, peer: Peer, params: dict[str, Any], offered: list[str]) -> dict[str, Any]:
        """Name the caller's controller; its first hello redelivers what it did not ack.

        ``offered``: the methods ``peer`` may call (the table's). With ``events``
        false (a one-shot command) the connection takes no events: it claims
        nothing and leaves every lease as it is.
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
            # Neither write of a hello is needed to serve it: a store that cannot write
            # must not refuse the connection that reads and takes events already recorded.
            with suppress(StoreUnwritable):
                await transact(
                    self._ctx.store,
                    lambda conn: credentials.record_use(conn, controller_id, name, now),
                )
            peer.said_hello = True
            if params.get("events", True):
                await self._take_events(controller_id, peer)
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

    async def _take_events(self, controller_id: str, peer: Peer) -> None:
        """``peer``'s connection takes ``controller_id``'s events from now on.

        A controller has one live connection, the newest: what the one it supersedes
        did not ack is due again at once. The operator's commands (`akk send --wait`,
        `akk events`) run side by side (akk.server.connections), so a new one leaves
        the leases of those still live as they are: they may ack yet.
        """
        connections = self._ctx.connections
        others = peer.operator and connections.current(controller_id) is not None
        connections.claim(controller_id, peer.connection, exclusive=not peer.operator)
        if not others:
            released = time.time()
            with suppress(StoreUnwritable):  # then its leases run out by themselves
                await transact(
                    self._ctx.store,
                    lambda conn: outbox.release_leases(conn, controller_id, released),
                )
        self._ctx.destinations.wake(controller_id)

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

    async def gc(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        """`akk gc`: a retention pass now (or its counts, ``dry_run``), through the one writer.

        ``older_than_days`` defaults to the server's `--retain-days`.
        """
        days: float | None = params.get("older_than_days")
        pruner = self._ctx.pruner
        report = await (pruner.count(days) if params.get("dry_run") else pruner.prune(days))
        return report.to_json()

    async def ui_login(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        """`akk ui`: a one-time code the console's login link carries (`akk.console.login`)."""
        logins = self._ctx.logins
        if logins is None:
            raise RpcError(Reason.NOT_FOUND, _NO_CONSOLE)
        return {"code": logins.new_code(), "expires_in": CODE_SECONDS, "path": "/ui/login"}

    async def console_follow(self, peer: Peer, params: dict[str, Any]) -> Encoded:
        """The console's live view: the whole of it now, then pushed as it changes."""
        if self._ctx.console is None:
            raise RpcError(Reason.NOT_FOUND, _NO_CONSOLE)
        return await self._ctx.console.follow(peer.connection)


_NO_CONSOLE = "this server serves no operator console; `akk serve` does"


class Resolved(Protocol):
    """A session backend's binary as `akk serve` found it at its start (`ClaudeSetup`,
    `CodexSetup`)."""

    @property
    def binary(self) -> str: ...

    @property
    def version(self) -> str: ...


def session_backends(
    claude: Resolved | str, claude_home: str, codex: Resolved | str, codex_home: str
) -> list[dict[str, Any]]:
    """The Claude headless and Codex app-server backends, as `backend_health` reports each."""
    return [
        backend_health(CLAUDE_HEADLESS, claude, claude_home, claude_pinned()),
        backend_health(CODEX_APP_SERVER, codex, codex_home, schema.versions()),
    ]


def backend_health(
    name: str, setup: Resolved | str, home: str, pinned: Sequence[str]
) -> dict[str, Any]:
    """One session backend as the `doctor` call reports it: what this server runs it with.

    ``setup``: the binary and version it found at its start, or why it found none (the
    reason `find_claude` / `find_codex` gave, which names the flag); ``home``: the
    config dir its processes get (CLAUDE_CONFIG_DIR, CODEX_HOME), looked at now as
    this process sees it (`home_state`); ``pinned``: the versions it runs as they are.
    """
    where = {"home": home, "home_state": home_state(home), "pinned_versions": list(pinned)}
    if isinstance(setup, str):
        found: dict[str, Any] = {"available": False, "reason": setup, "binary": None,
                                 "version": None, "pinned": False}  # fmt: skip
    else:
        found = {"available": True, "reason": None, "binary": setup.binary,
                 "version": setup.version, "pinned": setup.version in pinned}  # fmt: skip
    return {"backend": name, **found, **where}


def home_state(path: str) -> str:
    """What a backend's config dir is to this process: ``writable``; ``not_writable``;
    ``not_a_directory``; ``absent`` when its nearest existing parent is a directory it
    may write (so a client can create it); ``uncreatable`` otherwise."""
    if os.path.isdir(path):
        return "writable" if os.access(path, os.W_OK | os.X_OK) else "not_writable"
    if os.path.lexists(path):
        return "not_a_directory"
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    writable = os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)
    return "absent" if writable else "uncreatable"
