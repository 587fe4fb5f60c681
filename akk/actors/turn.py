"""TurnActor: one Turn, from its dispatch receipt to its one outcome, on any backend.

A Turn is created by its backend's reservation (nothing exists before it
commits, so a refused send leaves no record). From the receipt on, one
TurnActor follows it, driven by ``Tick``s from the TurnDesk's clock, through
the `TurnFollower` of the backend it runs on (`akk.actors.turn_follower`): the
terminal's screen and the agent's file, or the Codex app-server.

The actor owns what every backend shares: the record, the hard lifetime
(``timed_out``) and the inactivity window (``stalled``), cancel's
preconditions, the prompts announced as interactions (with their durable
events, once; the ones no longer asked become ``gone``), and the settle: the
outcome and its notification commit in one transaction, once; then the actor
tells the controller's Destination and stops.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import apsw
import attrs

from akk import faults
from akk.actors.store import transact
from akk.actors.terminal_board import TerminalSnapshot
from akk.actors.turn_follower import Also, CancelResult, TurnFollower, Usage
from akk.faults import Point
from akk.protocol.errors import Reason
from akk.protocol.redaction import redact
from akk.runtime.actor import Actor, ActorRef, Ask, Rank, StopActor
from akk.store import interactions, turns
from akk.store.database import StoreUnwritable
from akk.store.interactions import Interaction
from akk.store.turns import Turn, TurnState

log = logging.getLogger("akk.turn")

TICK = 0.1
"""Seconds between a TurnActor's looks at its Turn."""

FINAL_MESSAGE_LIMIT = 4000
"""Characters of the agent's final message kept in the outcome (redacted first)."""


@attrs.frozen
class Tick(Ask[None]):
    """Look again (sent by the TurnDesk's clock, or at once when a terminal publishes).

    ``published``: the snapshot whose publishing sent it, glimpsed before the look
    (`TurnFollower.glimpse`): the look reads the terminal as it is by then."""

    published: TerminalSnapshot | None = None


@attrs.frozen
class Cancel(Ask[CancelResult]):
    """The owner asked to cancel."""


@attrs.frozen
class Close(Ask[None]):
    """Management released (already recorded): stop following.

    ``round``: the round it was released in. A renew that revived the record into a
    later round before this Close was read wins: the actor follows that round on.
    """

    round: int | None = None


@attrs.frozen
class Reload(Ask[None]):
    """The record changed outside this actor (a renew): read it again before the next look.

    ``reconcile``: also prove again what the record's process did (`recover`)."""

    reconcile: bool = False


TurnMessage = Tick | Cancel | Close | Reload
"""Everything a Turn's actor takes (whichever way the Turn runs)."""

Notify = Callable[[str], None]
"""Wake the Destination of a controller (a tell; never blocks)."""


class TurnActor(Actor[TurnMessage]):
    rank = Rank.TURN
    mailbox_size = 16

    def __init__(
        self,
        turn_id: str,
        *,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
        notify: Notify,
        follower: TurnFollower,
    ) -> None:
        self._turn_id = turn_id
        self._store = store
        self._read_store = reader
        self._notify = notify
        self._follower = follower
        self.turn: Turn | None = None
        self._unwritable = False  # the last look could not write (logged once per outage)
        follower.attach(self)

    async def started(self) -> None:
        await self._load()
        assert self.turn is not None
        self._follower.started(self.turn)

    async def receive(self, message: TurnMessage) -> object:
        match message:
            case Tick(published):
                if published is not None:
                    self._follower.glimpse(published)
                try:
                    await self._follow()
                except StoreUnwritable as exc:
                    # Nothing of this look was written, and a restart would fail alike: the
                    # next Tick looks again and writes what it finds (an outcome included).
                    if not self._unwritable:
                        log.warning("turn %s: looked again until the store writes: %s",
                                    self._turn_id, exc)  # fmt: skip
                    self._unwritable = True
                else:
                    self._unwritable = False
            case Cancel():
                return await self._start_cancel()
            case Close(round):
                if round is None or not await self._revived_since(round):
                    raise StopActor()
                self._follower.reloaded(False)
            case Reload(reconcile):
                await self._load()
                self._follower.reloaded(reconcile)
        return None

    async def _load(self) -> None:
        turn_id, follower = self._turn_id, self._follower

        def read(conn: apsw.Connection) -> Turn | None:
            turn = turns.get(conn, turn_id)
            if turn is not None:
                follower.read(conn, turn)
            return turn

        self.turn = await self._read_store(read)
        assert self.turn is not None, turn_id

    async def _revived_since(self, round: int) -> bool:
        """Read the record again; whether it is followed in a round after ``round``."""
        await self._load()
        return self.turn is not None and self.turn.unresolved and self.turn.round > round

    # -- following

    async def _follow(self) -> None:
        turn = self.turn
        assert turn is not None
        if not turn.unresolved:
            raise StopActor()
        now = time.time()
        if now >= turn.hard_deadline_at:
            why = (
                "the watch's observation deadline passed; renew it to observe the task again"
                if turn.is_watch
                else "the Turn reached its lifetime"
            )
            await self._expire(TurnState.TIMED_OUT, why)
            return
        if not await self._follower.look(now):
            return
        turn = self.turn
        assert turn is not None
        if turn.unresolved and now - turn.last_activity_at >= turn.inactivity_seconds:
            await self._expire(TurnState.STALLED, "no activity for the Turn's inactivity window")

    async def _expire(self, state: TurnState, summary: str) -> None:
        """Settle ``state`` (timed_out, stalled) unless a renew moved its deadline meanwhile.

        The stored record decides, read first (so a renewed Turn is not interrupted) and
        again in the settle's own transaction."""
        stored = await self._read_store(lambda conn: turns.get(conn, self._turn_id))
        if stored is not None and not _past(stored, state, time.time()):
            await self._load()
            return
        await self._follower.before_deadline()
        await self.settle(state, state.value, summary)

    async def announce(
        self,
        still_asked: Callable[[Interaction], bool],
        record: Callable[[apsw.Connection, Turn], bool],
    ) -> None:
        turn = self.turn
        assert turn is not None

        def announce(conn: apsw.Connection) -> bool:
            fresh = turns.get(conn, turn.turn_id)
            assert fresh is not None
            pending = interactions.pending_of_turn(conn, turn.turn_id)
            left = [row for row in pending if not still_asked(row)]
            for row in left:
                interactions.invalidate(conn, row, fresh, time.time())
            return record(conn, fresh) or bool(left)

        if await transact(self._store, announce):
            self._notify(turn.controller_id)

    # -- cancel

    async def _start_cancel(self) -> CancelResult:
        turn = self.turn
        assert turn is not None
        if (refused := nothing_to("cancel", turn)) is not None:
            return CancelResult(False, *refused)
        if turn.state is not TurnState.RUNNING:
            return not_running(turn)
        return await self._follower.interrupt(turn)

    # -- store

    async def update(self, **changes: object) -> Turn:
        self.turn = await update_turn(self._store, self._turn_id, **changes)
        return self.turn

    async def settle(
        self,
        state: TurnState,
        reason: str | None,
        summary: str,
        *,
        usage: Usage | None = None,
        also: Also | None = None,
        **changes: object,
    ) -> None:
        turn_id, now, follower = self._turn_id, time.time(), self._follower
        if usage is not None:
            changes = usage.columns() | changes

        def settle(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            if not fresh.unresolved or not _past(fresh, state, now):
                return fresh
            if also is None:
                follower.settling(conn, fresh, state, now)
            else:
                also(conn, fresh)
            return turns.settle(
                conn, fresh, state, now=now, reason=reason, summary=redact(summary), **changes
            )

        stored = await transact(self._store, settle)
        if stored.unresolved:  # a renew moved the deadline that ``state`` was for
            await self._load()
            return
        self.turn = stored
        await faults.reached(Point.OUTCOME)
        self._notify(self.turn.controller_id)
        log.info("turn %s settled %s (%s)", turn_id, state, reason or "-")
        raise StopActor()


def _past(turn: Turn, state: TurnState, now: float) -> bool:
    """Whether ``turn`` as stored is still past the deadline that settles it as ``state``:
    its hard lifetime (timed_out), its inactivity window (stalled); any other outcome
    has no deadline to move."""
    if state is TurnState.TIMED_OUT:
        return now >= turn.hard_deadline_at
    if state is TurnState.STALLED:
        return now - turn.last_activity_at >= turn.inactivity_seconds
    return True


def nothing_to(act: str, turn: Turn) -> tuple[Reason, str] | None:
    """Why ``act`` (cancel, answer) is refused with nothing sent: ``turn`` is closed (`closed`)
    or has already settled (`conflict`: its outcome stands). None while it is open."""
    if turn.closed_at is not None:
        why = f"turn {turn.turn_id} is closed; there is nothing to {act}. Send a new task instead"
        return Reason.CLOSED, why
    if turn.state.settled:
        return Reason.CONFLICT, (
            f"turn {turn.turn_id} is already {turn.state}, so there is nothing to {act}; its "
            "outcome stands (status shows it)"
        )
    return None


def not_running(turn: Turn) -> CancelResult:
    """Cancel refused: ``turn`` is not running (nothing was sent)."""
    why = f"turn {turn.turn_id} is {turn.state}, not running; nothing was sent"
    return CancelResult(False, Reason.NOT_IDLE, why)


async def update_turn(store: ActorRef, turn_id: str, **changes: object) -> Turn:
    """Compare-and-swap ``changes`` onto the Turn as it is now; the Turn as stored."""

    def apply(conn: apsw.Connection) -> Turn:
        fresh = turns.get(conn, turn_id)
        assert fresh is not None
        return turns.update(conn, fresh, **changes)

    updated: Turn = await transact(store, apply)
    return updated
