"""TurnDesk: starts the actor that follows each unresolved Turn, and ticks them all.

Every Turn gets one TurnActor, with the follower of the backend it runs on
(`akk.backends`: a terminal's, or the Codex app-server's). They live under the
turns supervisor, restart after a crash (transient), and are woken at once
when a terminal publishes another prompt.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import apsw
import trio

from akk.actors.store import transact
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot
from akk.actors.turn import TICK, Notify, Tick, TurnActor, TurnMessage
from akk.backends.codex_app_server.follow import AppServerFollower
from akk.backends.codex_app_server.host import BackendDesk
from akk.backends.terminal.follow import TerminalFollower
from akk.runtime.actor import Actor, ActorRef, ActorStopped, MailboxFull
from akk.runtime.supervisor import ChildSpec, Restart, Supervisor, UnknownChild
from akk.screen.fingerprint import Appearance, IdMinter
from akk.store import dispatches, turns
from akk.store.turns import BACKEND, TERMINAL, Turn


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
        ids: IdMinter,
        accept_seconds: float,
        backends: BackendDesk | None = None,
    ) -> None:
        self._supervisor = supervisor
        self._backends = backends
        self._ids = ids
        self._prompts: dict[str, Appearance | None] = {}
        board.listen(self._published)
        self._accept_seconds = accept_seconds
        self._store = store
        self._reader = reader
        self._board = board
        self._notify = notify
        self._resume_by_backend: dict[str, Callable[[str], Awaitable[None]]] = {
            TERMINAL: self.follow,
            BACKEND: lambda turn_id: self.follow_backend(turn_id, generation=None, restarted=True),
        }
        """How a Turn of each backend is followed again after a start."""

    async def follow(self, turn_id: str, *, enter_at: float | None = None) -> None:
        """Start following the terminal Turn or Watch ``turn_id`` (idempotent)."""
        await self._start(
            turn_id,
            lambda: TurnActor(
                turn_id, store=self._store, reader=self._reader, notify=self._notify,
                follower=TerminalFollower(
                    turn_id, store=self._store, reader=self._reader, board=self._board,
                    ids=self._ids, enter_at=enter_at, accept_seconds=self._accept_seconds,
                ),
            ),
        )  # fmt: skip

    async def follow_backend(
        self, turn_id: str, *, generation: int | None, restarted: bool = False
    ) -> None:
        """Start following the app-server Turn ``turn_id`` (idempotent).

        ``generation``: the app-server process its receipt came from (None: unknown,
        so the Turn reconciles from the thread first). ``restarted``: AKK started
        since its reservation, so no dispatch of it can still be under way.
        """
        assert self._backends is not None
        backends = self._backends
        await self._start(
            turn_id,
            lambda: TurnActor(
                turn_id, store=self._store, reader=self._reader, notify=self._notify,
                follower=AppServerFollower(
                    turn_id, store=self._store, reader=self._reader, backends=backends,
                    ids=self._ids, generation=generation, restarted=restarted,
                ),
            ),
        )  # fmt: skip

    async def _start(self, turn_id: str, make: Callable[[], Actor[TurnMessage]]) -> None:
        if turn_id in self._supervisor.child_keys():
            return
        await self._supervisor.start_child(ChildSpec(turn_id, make, restart=Restart.TRANSIENT))

    def _published(self, snapshot: TerminalSnapshot) -> None:
        """A terminal shows a different prompt (or none): look at once, not at the next tick."""
        terminal_id = snapshot.identity.terminal_id
        if snapshot.busy or self._prompts.get(terminal_id, False) == snapshot.seen:
            return
        self._prompts[terminal_id] = snapshot.seen
        self._tick_all()

    def _tick_all(self) -> None:
        for key in self._supervisor.child_keys():
            with suppress(MailboxFull, ActorStopped, UnknownChild):
                self._supervisor.ref(key).tell(Tick())

    def ref(self, turn_id: str) -> ActorRef | None:
        if turn_id not in self._supervisor.child_keys():
            return None
        return self._supervisor.ref(turn_id)

    async def resume(self) -> int:
        """After a start: every unresolved Turn is followed again.

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

        open_turns = await transact(self._store, recover)
        for turn in open_turns:
            await self._resume_by_backend[turn.backend](turn.turn_id)
        return len(open_turns)

    async def clock(self) -> None:
        """Tick every followed Turn every TICK seconds (runs until cancelled)."""
        while True:
            await trio.sleep(TICK)
            self._tick_all()
