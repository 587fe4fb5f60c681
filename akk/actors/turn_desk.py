"""TurnDesk: starts the actor that follows each unresolved Turn, and ticks them all.

Every Turn gets one TurnActor, with the follower its backend builds (the desk
knows no backend: each one calls `follow` with its own follower, and the
registry supplies how each backend's Turns are followed again after a start).
They live under the turns supervisor, restart after a crash (transient), and
are woken at once when a terminal publishes another prompt or another state.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

import apsw
import trio

from akk.actors.store import transact, transact_until_written
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot
from akk.actors.turn import TICK, Notify, Tick, TurnActor
from akk.actors.turn_follower import TurnFollower
from akk.profiles.observation import State
from akk.runtime.actor import ActorRef, ActorStopped, MailboxFull
from akk.runtime.supervisor import (
    ChildSpec,
    DuplicateChild,
    Restart,
    Supervisor,
    UnknownChild,
)
from akk.screen.fingerprint import Appearance
from akk.store import dispatches, turns
from akk.store.turns import Turn


class TurnDesk:
    """Starts a TurnActor per unresolved Turn under the turns supervisor, and ticks them."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
        board: TerminalBoard,
        notify: Notify,
    ) -> None:
        self._supervisor = supervisor
        self._shown: dict[str, tuple[Appearance | None, State]] = {}
        """What each terminal on the board last showed, by terminal_id."""
        self._board = board
        board.listen(self._published)
        self._store = store
        self._reader = reader
        self._notify = notify

    async def follow(self, turn_id: str, make_follower: Callable[[], TurnFollower]) -> None:
        """Start following the Turn or Watch ``turn_id`` (idempotent: once per Turn).

        ``make_follower`` builds its backend's follower, again after each restart. An
        actor of ``turn_id`` that is stopping (it read an unwatch's Close a moment
        before a renew revived the record) is replaced: it follows nothing more.
        """
        spec = ChildSpec(
            turn_id,
            lambda: TurnActor(
                turn_id, store=self._store, reader=self._reader, notify=self._notify,
                follower=make_follower(),
            ),
            restart=Restart.TRANSIENT,
        )  # fmt: skip
        with suppress(DuplicateChild):
            await self._supervisor.start_child(spec, replace_ending=True)

    def _published(self, snapshot: TerminalSnapshot) -> None:
        """A terminal shows a different prompt (or none), or reads another state: look at once,
        not at the next tick. A screen that shows for less than a look takes is glimpsed
        too, whenever the look comes (Claude taking a task back, cleared by a person at
        once: `TerminalFollower.glimpse`)."""
        terminal_id = snapshot.identity.terminal_id
        shown = (snapshot.seen, snapshot.observation.state)
        if snapshot.busy or self._shown.get(terminal_id) == shown:
            return
        if terminal_id not in self._shown:  # a new terminal: forget those that left the board
            for gone in [key for key in self._shown if self._board.ref(key) is None]:
                del self._shown[gone]
        self._shown[terminal_id] = shown
        self._tick_all(snapshot)

    def _tick_all(self, published: TerminalSnapshot | None = None) -> None:
        """Tell every followed Turn to look. The clock's Tick is not queued behind one
        already due (a look that takes longer than a tick would fill the mailbox with them,
        and a published Tick, and the owner's cancel, would wait behind them or be lost)."""
        for key in self._supervisor.child_keys():
            with suppress(MailboxFull, ActorStopped, UnknownChild):
                ref = self._supervisor.ref(key)
                if published is None and ref.pending:
                    continue
                ref.tell(Tick(published))

    def ref(self, turn_id: str) -> ActorRef | None:
        if turn_id not in self._supervisor.child_keys():
            return None
        return self._supervisor.ref(turn_id)

    async def resume(
        self, resumers: Mapping[str, Callable[[str], Awaitable[None]]], *, wait: bool = False
    ) -> int:
        """After a start: every unresolved Turn is followed again, by its backend's resumer.

        ``resumers``: per backend name, how a Turn of it is followed again. Raises
        `StoreUnwritable` if the store cannot write the steps it settles; with ``wait``
        it tries again until the store writes instead (a start on a full disk).

        A dispatch left reserved or half-typed by the previous run may have typed
        anything: it becomes ``uncertain`` and its Turn too. An answer left open
        (its postcondition unproven) becomes ``uncertain`` with a
        ``response_uncertain`` event; its Turn runs on. Nothing is typed or
        submitted again; the Turn's own evidence may still prove acceptance,
        otherwise it fails as ``uncertain`` after the acceptance bound.
        """

        def recover(conn: apsw.Connection) -> list[Turn]:
            now = time.time()
            for dispatch in dispatches.all_open(conn):
                turns.orphaned(conn, dispatch, "interrupted_by_restart", now)
            return turns.unresolved(conn)

        if wait:
            what = "settling the steps a restart cut off"
            open_turns = await transact_until_written(self._store, recover, what=what)
        else:
            open_turns = await transact(self._store, recover)
        for turn in open_turns:
            await resumers[turn.backend](turn.turn_id)
        return len(open_turns)

    async def clock(self) -> None:
        """Tick every followed Turn every TICK seconds (runs until cancelled)."""
        while True:
            await trio.sleep(TICK)
            self._tick_all()
