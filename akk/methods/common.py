"""What every method module shares: the caller (`Peer`), the `MethodContext`, ownership and
the actions a record offers, the pane-scope checks and the request limits.

A record retention pruned answers every lookup by its id with not_found and
its date (`pruned`, which the method table asks on any not_found).

A method module is a peer of the others: it imports this module and the layers
below (actors, backends, store), never another method module. `MethodContext`
is built once by the service and handed to each of them. The server's pieces
the methods reach (a connection, the connection registry, the credential book)
are the protocols declared here, which `akk.server` satisfies; the methods never
import the server.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from akk.actors.destination import DestinationDesk, EventSink
from akk.actors.pruner import Pruner
from akk.actors.terminal_board import TerminalBoard
from akk.actors.turn_desk import TurnDesk
from akk.backends.registry import Backends
from akk.profiles.qualified_versions import QualifiedVersions
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorRef
from akk.screen.fingerprint import IdMinter
from akk.sessions import policy
from akk.store import retention, terminals, turns
from akk.store.credentials import Credential, Scope
from akk.store.reader import StoreReader
from akk.store.retention import Tombstone
from akk.store.turns import Turn, TurnState
from akk.workspace_roots import covered, pane_allowed

if TYPE_CHECKING:  # akk.config reads the server's settings, which import the methods
    from akk.config import TurnSettings
    from akk.console.feed import ConsoleFeed  # the feed reads `list`'s view, a method module
    from akk.console.login import LoginBook

MAX_REQUEST_CHARS = 50_000
"""Longest task text `send` accepts (characters); longer ones are refused before any key."""

HealthReport = Callable[[], dict[str, Any]]


class Closable(EventSink, Protocol):
    """A controller's connection as the methods hold it: events go to it; it can be closed."""

    def close_soon(self, code: int, reason: str) -> None:
        """Start closing with this code and reason; never blocks."""

    async def send_frame(self, frame: str, *, timeout: float) -> bool:
        """Write one notification frame; False if closed, or not read in time."""
        ...


class Connections(Protocol):
    """Which connection speaks for each controller (`akk.server.connections`)."""

    def claim(self, controller_id: str, connection: Closable, *, exclusive: bool = True) -> None:
        """``connection`` said hello and now speaks for ``controller_id``."""
        ...

    def revoke(self, controller_id: str) -> int:
        """Close every connection authenticated as ``controller_id``; return how many."""
        ...

    def current(self, controller_id: str) -> Closable | None:
        """The connection that speaks for ``controller_id`` (where its events go)."""
        ...


class Credentials(Protocol):
    """The live credentials bearer tokens are verified against (`akk.server.auth`)."""

    def add(self, credential: Credential, digest: str) -> None:
        """``credential`` is live now, proven by the token with this digest."""
        ...

    def remove(self, controller_id: str) -> None:
        """``controller_id``'s credential proves nothing from now on."""
        ...


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


@attrs.frozen(eq=False)
class MethodContext:
    """What the methods reach: the store, the boards, the desks, the backends, the settings,
    retention.

    ``workspace_roots``: the server's canonical roots (`akk serve --workspace-root`).
    """

    store: ActorRef
    reader: StoreReader
    board: TerminalBoard
    ids: IdMinter
    desk: TurnDesk
    destinations: DestinationDesk
    settings: TurnSettings
    backends: Backends
    session_limits: policy.RebuildLimits
    workspace_roots: tuple[str, ...]
    book: Credentials
    connections: Connections
    health: HealthReport
    qualified: QualifiedVersions
    pruner: Pruner
    logins: LoginBook | None = None
    """The console's login codes and sessions; None: no console is served."""
    console: ConsoleFeed | None = None


def backend_roots(ctx: MethodContext, peer: Peer) -> tuple[str, ...]:
    """Where ``peer`` may put a backend cwd: the server's roots within its credential's."""
    narrowed = peer.credential.roots
    if not narrowed:
        return ctx.workspace_roots
    inner = [r for r in narrowed if covered(r, ctx.workspace_roots)]
    inner += [r for r in ctx.workspace_roots if covered(r, narrowed)]
    return tuple(dict.fromkeys(inner))


async def check_pane(ctx: MethodContext, peer: Peer, terminal_id: str | None) -> None:
    """Refuse (not_owner) a credential narrowed to roots acting on a pane outside them.

    A pane's cwd was chosen by the person who started its agent, so the
    server's own roots do not bound it; only a credential's roots do. An
    unknown terminal passes here and gets its not_found from the call itself.
    """
    narrowed = peer.credential.roots
    if not narrowed or terminal_id is None:
        return
    snapshot = ctx.board.get(terminal_id)
    if snapshot is not None:
        cwd = snapshot.identity.cwd
    else:
        cwd = await ctx.reader.run(lambda conn: terminals.cwd_of(conn, terminal_id))
        if cwd is None and ctx.board.ref(terminal_id) is None:
            return
    if not pane_allowed(cwd, narrowed):
        raise RpcError(
            Reason.NOT_OWNER,
            f"terminal {terminal_id[:80]!r} runs outside this credential's workspace roots "
            f"({', '.join(narrowed)}); nothing was sent. Act only on panes under them (list "
            "shows those), or ask the operator for a credential with that root",
        )


async def check_turn_pane(ctx: MethodContext, peer: Peer, turn_id: str) -> None:
    """`check_pane` for the terminal of Turn ``turn_id`` (a backend Turn has none)."""
    if peer.credential.roots:
        turn = await ctx.reader.run(lambda conn: turns.get(conn, turn_id))
        if turn is not None:
            await check_pane(ctx, peer, turn.terminal_id)


def owned(turn: Turn | None, record_id: str, controller_id: str, operator: bool) -> Turn:
    """The Turn or Watch ``record_id`` if the caller may act on it; else not_found / not_owner."""
    if turn is None:
        raise RpcError(
            Reason.NOT_FOUND,
            f"no turn or watch {record_id[:80]!r}; list shows this controller's records",
        )
    if not operator and turn.controller_id != controller_id:
        raise RpcError(
            Reason.NOT_OWNER,
            f"{record_id} belongs to another controller; act only on your own turns and watches",
        )
    return turn


async def pruned(ctx: MethodContext, peer: Peer, params: dict[str, Any]) -> RpcError | None:
    """The not_found of a call naming a record retention pruned (its ``turn_id`` or
    ``watch_id``): when it went and how it had ended. None when the call names no pruned
    record of the caller's (the operator's: any), so the original answer stands."""
    record_id = params.get("turn_id") or params.get("watch_id")
    if not isinstance(record_id, str):
        return None
    stone = await ctx.reader.run(lambda conn: retention.lookup(conn, record_id))
    if stone is None or not (peer.operator or stone.controller_id == peer.controller_id):
        return None
    ended = "was" if stone.outcome == retention.UNWATCHED else "ended"
    return RpcError(
        Reason.NOT_FOUND,
        f"{record_id} {ended} {stone.outcome} on {_day(stone.settled_at)} and was pruned by "
        f"retention on {_day(stone.pruned_at)}; nothing of it is kept. Send or watch anew",
        detail="pruned",
        data=_tombstone(stone),
    )


def pruned_request(stone: Tombstone, client_request_id: str) -> RpcError:
    """A send repeating the client_request_id of a pruned Turn: refused, never typed again."""
    return RpcError(
        Reason.CONFLICT,
        f"client_request_id {client_request_id!r} was {stone.record_id}'s, which ended "
        f"{stone.outcome} and was pruned by retention on {_day(stone.pruned_at)}; its task is "
        "never typed again. Use a new client_request_id for a new task",
        detail="pruned",
        data=_tombstone(stone),
    )


def _tombstone(stone: Tombstone) -> dict[str, Any]:
    return {
        "pruned_at": _iso(stone.pruned_at),
        "settled_at": _iso(stone.settled_at),
        "outcome": stone.outcome,
    }


def _iso(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).isoformat()


def _day(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def available_actions(record: Turn, *, retryable: bool = False) -> list[dict[str, Any]]:
    """The calls valid on ``record`` now, pre-filled with its exact id.

    ``retryable``: a notification of the record waits in retryable_failure.
    """
    if record.is_watch:
        ids = {"watch_id": record.turn_id}
        actions: list[dict[str, Any]] = [{"method": "status", "params": ids}]
        if record.unwatched_at is None:
            actions.append({"method": "unwatch", "params": ids})
            actions.append({"method": "recover", "params": ids})
        if record.unresolved or record.state is TurnState.TIMED_OUT or record.unwatched_at:
            actions.append({"method": "renew", "params": ids})
        if retryable and record.unwatched_at is None:
            actions.append({"method": "retry_callback", "params": ids})
        return actions
    ids = {"turn_id": record.turn_id}
    actions = [{"method": "status", "params": ids}]
    if record.unresolved and record.state is TurnState.RUNNING:
        actions.append({"method": "cancel", "params": ids})
    if record.state.settled and record.closed_at is None:
        actions.append({"method": "respond", "params": ids})
    if record.closed_at is None:
        actions.append({"method": "close", "params": ids})
        actions.append({"method": "recover", "params": ids})
        if record.unresolved:
            actions.append({"method": "renew", "params": ids})
        if retryable:
            actions.append({"method": "retry_callback", "params": ids})
    return actions
