"""The app-server's follower: one Turn run on the Codex app-server, to its one outcome.

The TurnActor (`akk.actors.turn`) drives it as it drives a terminal's, and it
reads another witness:
the app-server's own notifications, which its host folds into the
BackendBoard, and, whenever that board cannot vouch for the Turn, the
thread's own history (`thread/read`). It follows the native turn that the
invocation's receipt names:

- `turn/completed` gives the outcome (completed → done, failed → failed,
  interrupted → cancelled when the owner cancelled, else failed), the final
  message, and the usage increment (never the thread's running totals);
- no activity for the inactivity window → stalled; past the lifetime →
  timed_out (both interrupt the native turn, best effort);
- a process that is not the one the Turn ran on (the app-server or AKK
  restarted): reconcile from `thread/read`. A turn found settled records its
  actual outcome; an invocation whose turn/start may have been written but is
  not in the thread is `uncertain`; nothing is ever sent again.

The invocation's runtime facts (dispatch, outcome, cleanup) and the session's
checkpoint commit with the Turn's outcome, in one transaction.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import apsw

from akk import evidence, faults
from akk.actors.store import transact
from akk.actors.turn import not_running
from akk.actors.turn_follower import Attached, CancelResult, Usage
from akk.backends.codex_app_server.actor import (
    InterruptTurn,
    ReadThread,
    never_sent,
    thread_persisted,
)
from akk.backends.codex_app_server.board import NativeTurn
from akk.backends.codex_app_server.host import BackendDesk, BackendHost
from akk.backends.codex_app_server.results import ThreadFacts, Unreadable
from akk.backends.outcomes import bounded_final, final_summary
from akk.discovery import children
from akk.discovery.process import start_ticks
from akk.faults import Point
from akk.protocol.errors import Reason
from akk.runtime.actor import ActorError, ActorRef
from akk.screen.fingerprint import IdMinter
from akk.sessions.policy import Dispatch, History
from akk.store import dispatches, interactions, sessions, turns
from akk.store.sessions import InvocationRow
from akk.store.turns import Turn, TurnState

log = logging.getLogger("akk.backend_turn")

ASK_TIMEOUT = 40.0
"""How long a Turn waits on its BackendActor (longer than one app-server request)."""


_OUTCOMES = {
    "completed": TurnState.DONE,
    "failed": TurnState.FAILED,
    "interrupted": TurnState.CANCELLED,
}


class AppServerFollower(Attached):
    """The `TurnFollower` of a Turn on the app-server."""

    def __init__(
        self,
        turn_id: str,
        *,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
        backends: BackendDesk,
        ids: IdMinter,
        generation: int | None,
        restarted: bool,
    ) -> None:
        self._turn_id = turn_id
        self._ids = ids
        self._announced: frozenset[str] = frozenset()
        self._store = store
        self._read_store = reader
        self._backends = backends
        self._restarted = restarted
        """Followed again after AKK started: no StartTurn of this run can be in flight."""
        self._invocation: InvocationRow | None = None
        self._generation = generation
        """The app-server process the Turn is known to run on (None: reconcile first)."""
        self._seq = -1
        self._cancelled = False
        self._rejected = False
        """The owner's reject interrupted the turn (the app-server offered only `cancel`)."""

    def read(self, conn: apsw.Connection, turn: Turn) -> None:
        """The invocation of the Turn's round, read with it."""
        self._invocation = sessions.invocation(conn, turn.turn_id, turn.round)
        assert self._invocation is not None, turn.turn_id
        self._cancelled |= dispatches.cancel_asked(conn, turn.turn_id, self._invocation.reserved_at)

    def started(self, turn: Turn) -> None:
        """The generation and the restart flag the TurnDesk gave decide the first look."""

    def reloaded(self, reconcile: bool) -> None:
        if reconcile:
            self._generation = None  # the next look reads the thread

    async def before_deadline(self) -> None:
        await self._interrupt_quietly()

    def settling(self, conn: apsw.Connection, fresh: Turn, state: TurnState, now: float) -> None:
        sessions.settle_invocation(conn, fresh.turn_id, self._round, state, now)

    @property
    def _round(self) -> int:
        """The round this follower follows (its invocation's)."""
        return self._turn.round if self._turn is not None else 1

    # -- following

    async def look(self, now: float) -> bool:
        turn, invocation = self._turn, self._invocation
        assert turn is not None and invocation is not None
        if invocation.dispatch is Dispatch.NOT_SENT:
            if self._restarted:
                await self._settle(
                    TurnState.FAILED, "not_sent",
                    "the task never reached the app-server (AKK stopped first, or could not "
                    "record the send); nothing was sent. Send it again", cleanup=True,
                    unsent=True,
                )  # fmt: skip
            return False  # its StartTurn is still queued or running
        host = await self._host()
        if host is None or not host.board.alive:
            return False  # the next look, once its process runs
        if self._generation != host.board.generation or invocation.dispatch is Dispatch.MAYBE_SENT:
            await self._reconcile(host)
            return False
        native = host.board.turn(invocation.native_turn_id)
        if native is None:
            return False
        await faults.reached(Point.BACKEND_TURN_RUNNING)
        if native.seq != self._seq:
            self._seq = native.seq
            self._turn = turn = await self._update(last_activity_at=now)
        await self._announce(host, native)
        if native.settled:
            await faults.reached(Point.BACKEND_COMPLETED)
            if native.turn_id in host.board.rejected:
                self._rejected = True
                host.board.rejected.discard(native.turn_id)
            await self._settle_native(native.status, native.final_message, native.error, native)
            host.board.forget(native.turn_id)
            return False
        return True

    async def _host(self) -> BackendHost | None:
        """The app-server host; started here after a restart of AKK, or after the backends
        supervisor dropped it (`BackendDesk.host`; None: no Codex)."""
        return await self._backends.host() if self._backends.available else None

    async def _announce(self, host: BackendHost, native: NativeTurn) -> None:
        """Record each server request of this turn as an interaction (its event once); the
        ones no longer asked become ``gone``."""
        turn = self._turn
        assert turn is not None
        mine = host.board.prompts(native.turn_id, turn, self._ids)
        asked = frozenset(p.interaction_id for p in mine)
        if asked == self._announced:
            return
        now, profile = time.time(), f"codex-app-server-{self._backends.version}"

        def record(conn: apsw.Connection, fresh: Turn) -> bool:
            new = False
            for prompt in mine:
                new |= interactions.record(
                    conn, interaction_id=prompt.interaction_id, terminal_id=None,
                    turn_id=turn.turn_id, kind=prompt.kind.value, seen=prompt.seen,
                    profile=profile, step_index=1, step_total=1, projection=prompt.projection,
                    now=now, announce=fresh,
                )[1]  # fmt: skip
            return new

        assert self._control is not None
        await self._control.announce(lambda row: row.interaction_id in asked, record)
        self._announced = asked

    async def _reconcile(self, host: BackendHost) -> None:
        """The board cannot vouch for this Turn: read the thread's own history (read-only)."""
        turn, invocation = self._turn, self._invocation
        assert turn is not None and invocation is not None
        thread_id = turn.native_session
        if thread_id is None:
            session = await self._read_store(lambda conn: sessions.get(conn, invocation.session_id))
            thread_id = session.thread_id if session is not None else None
        if thread_id is None:
            await self._settle(
                TurnState.FAILED, "uncertain",
                "the thread's id was never stored (thread/start may have run); AKK does not "
                "guess it and sends nothing again", outcome="uncertain",
            )  # fmt: skip
            return
        await self._end_orphan(turn)
        try:
            facts = await host.ref.ask(ReadThread(thread_id), timeout=ASK_TIMEOUT)
        except ActorError:
            return  # the process went away again: the next look retries the read
        generation = host.board.generation
        if isinstance(facts, Unreadable):
            await self._unreadable(host, facts)
            return
        if not facts.found:
            await self._forget_thread(invocation.session_id, History.MISSING)
            await self._settle(
                TurnState.FAILED, "uncertain" if invocation.dispatch is not Dispatch.ACCEPTED
                else "history_missing",
                f"the app-server does not know the thread any more ({facts.why}); nothing is "
                "sent again", outcome="uncertain", cleanup=True,
            )  # fmt: skip
            return
        native_id = invocation.native_turn_id
        if native_id is None:
            native_id = await self._find_sent(facts)
            if native_id is None:
                await self._settle(
                    TurnState.FAILED, "uncertain",
                    "turn/start may have reached the app-server, and the thread does not show "
                    "the task; AKK will not send it again", outcome="uncertain",
                    cleanup=facts.status != "active",
                )  # fmt: skip
                return
        record = next((r for r in facts.turns if r.turn_id == native_id), None)
        live = host.board.turn(native_id)
        if live is not None and not live.settled:
            self._generation = generation  # the current process runs it: follow the board
            return
        if record is None or record.status == "inProgress":
            # The process that ran it is gone (ended above, or reaped); it cannot go on.
            await self._settle(
                TurnState.FAILED, "interrupted_by_restart",
                "the app-server running the turn ended before it finished; nothing is sent "
                "again", cleanup=True,
            )  # fmt: skip
            return
        await self._settle_native(record.status, record.final_message, record.error, live)

    async def _unreadable(self, host: BackendHost, facts: Unreadable) -> None:
        """thread/read answered with a result of the wrong shape: the app-server misbehaves,
        and what became of the task cannot be read. Unless this process runs the turn (the
        board follows it), the Turn ends failed `uncertain` now, rather than asking again
        on every look; its cleanup stays unconfirmed, so its thread is not sent to until
        `recover` reads it."""
        invocation = self._invocation
        assert invocation is not None
        live = host.board.turn(invocation.native_turn_id)
        if live is not None and not live.settled:
            self._generation = host.board.generation
            return
        await self._settle(
            TurnState.FAILED, "uncertain",
            f"the app-server answered thread/read with a result of the wrong shape "
            f"({facts.why}), so AKK cannot tell what became of the task; nothing is sent "
            "again", outcome="uncertain",
        )  # fmt: skip

    async def _find_sent(self, facts: ThreadFacts) -> str | None:
        """The native turn a `maybe_sent` invocation started, found by its text's digest
        among the thread's turns after the session's checkpoint; recorded as accepted."""
        turn, invocation = self._turn, self._invocation
        assert turn is not None and invocation is not None
        session = await self._read_store(lambda conn: sessions.get(conn, invocation.session_id))
        checkpoint = session.checkpoint if session is not None else None
        ids = [r.turn_id for r in facts.turns]
        after = facts.turns[ids.index(checkpoint) + 1 :] if checkpoint in ids else facts.turns
        found = next((r for r in after if r.request_sha256 == turn.request_sha256), None)
        if found is None:
            return None
        turn_id, round_ = turn.turn_id, turn.round

        def accept(conn: apsw.Connection) -> tuple[Turn, InvocationRow]:
            inv = sessions.invocation(conn, turn_id, round_)
            fresh = turns.get(conn, turn_id)
            assert inv is not None and fresh is not None
            inv = sessions.update_invocation(
                conn, inv, dispatch=Dispatch.ACCEPTED, native_turn_id=found.turn_id
            )
            thread_persisted(conn, inv.session_id)
            return turns.update(conn, fresh, state=TurnState.RUNNING, reason=None), inv

        self._turn, self._invocation = await transact(self._store, accept)
        return found.turn_id

    async def _end_orphan(self, turn: Turn) -> None:
        """The app-server an earlier AKK started for this Turn, if it outlived AKK: end it.

        Nobody can talk to it any more (its pipes were AKK's), so its turn cannot be
        answered or followed; its identity (pid and start time) was stored with the Turn.
        """
        try:
            facts = json.loads(turn.evidence or "{}")
        except ValueError:
            return
        pid, ticks = facts.get("pid"), facts.get("start_ticks")
        host = self._backends.running
        if not isinstance(pid, int) or (host is not None and host.board.pid == pid):
            return
        if not isinstance(ticks, int) or start_ticks(pid) != ticks:
            return
        log.warning("ending app-server pid %d left by an earlier run (turn %s)", pid, turn.turn_id)
        if not await children.end_orphan(pid, ticks):
            log.error("app-server pid %d survived SIGKILL", pid)

    async def _forget_thread(self, session_id: str, history: History) -> None:
        def mark(conn: apsw.Connection) -> None:
            fresh = sessions.get(conn, session_id)
            if fresh is not None:
                sessions.update(conn, fresh, history=history)

        await transact(self._store, mark)

    # -- cancel

    async def interrupt(self, turn: Turn) -> CancelResult:
        invocation = self._invocation
        assert invocation is not None
        host = self._backends.running
        if invocation.native_turn_id is None or host is None:
            return not_running(turn)
        message = InterruptTurn(
            turn.native_session or "", invocation.native_turn_id, turn.turn_id, turn.controller_id
        )
        try:
            refused = await host.ref.ask(message, timeout=ASK_TIMEOUT)
        except ActorError as exc:
            return CancelResult(
                False, Reason.RESPONSE_UNCERTAIN,
                f"the interrupt may not have reached the app-server ({exc.reason}); look at "
                "status before cancelling again",
            )  # fmt: skip
        if isinstance(refused, str):
            return CancelResult(False, Reason.CONFLICT, refused)
        self._cancelled = True
        return CancelResult(True)

    async def _interrupt_quietly(self) -> None:
        turn, invocation = self._turn, self._invocation
        host = self._backends.running
        if turn is None or invocation is None or invocation.native_turn_id is None or not host:
            return
        with suppress(ActorError):
            message = InterruptTurn(
                turn.native_session or "", invocation.native_turn_id, turn.turn_id,
                turn.controller_id,
            )  # fmt: skip
            await host.ref.ask(message, timeout=ASK_TIMEOUT)

    # -- store

    async def _update(self, **changes: object) -> Turn:
        assert self._control is not None
        return await self._control.update(**changes)

    async def _settle_native(
        self, status: str, final: str | None, error: str | None, native: NativeTurn | None
    ) -> None:
        """Settle from the native turn's own status (its usage when the board saw it)."""
        state = _OUTCOMES.get(status, TurnState.FAILED)
        reason: str | None = None
        if state is TurnState.CANCELLED and self._rejected and not self._cancelled:
            reason = "rejected"
        elif state is TurnState.CANCELLED and not self._cancelled:
            # Not the owner's cancel: the app-server running it ended, or something else did.
            state, reason = TurnState.FAILED, "interrupted"
        usage = Usage(evidence.UsageStatus.UNKNOWN) if native is None else native.usage()
        changes: dict[str, Any] = {}
        if final:
            changes["final_message"] = bounded_final(final)
        if state is TurnState.DONE:
            summary = final_summary(final)
        elif state is TurnState.CANCELLED:
            summary = (
                "the owner rejected the request, which interrupts the turn"
                if reason == "rejected"
                else "the task was interrupted"
            )
        elif reason == "interrupted":
            summary = "the turn was interrupted (not by its owner's cancel)"
        else:
            reason = "agent_error"
            summary = f"the agent reported: {error or status}"
        context = (native.context_tokens, native.context_window) if native else (None, None)
        await self._settle(
            state, reason, summary, usage=usage, cleanup=True, checkpoint=True, context=context,
            **changes,
        )  # fmt: skip

    async def _settle(
        self,
        state: TurnState,
        reason: str | None,
        summary: str,
        *,
        outcome: str | None = None,
        cleanup: bool = False,
        checkpoint: bool = False,
        context: tuple[int | None, int | None] = (None, None),
        usage: Usage | None = None,
        unsent: bool = False,
        **changes: Any,
    ) -> None:
        """The Turn's outcome, its invocation's facts and the session's checkpoint, at once.

        ``unsent``: the round provably never reached the app-server, so a queue_next_turn
        answer still reserved for it was not delivered either (`never_sent`)."""
        now, round_ = time.time(), self._round

        def also(conn: apsw.Connection, fresh: Turn) -> None:
            sessions.settle_invocation(
                conn, fresh.turn_id, round_, state, now, outcome=outcome, cleanup=cleanup,
                checkpoint=checkpoint, context=context,
            )  # fmt: skip
            if unsent:
                never_sent(conn, fresh.turn_id)

        assert self._control is not None
        await self._control.settle(state, reason, summary, usage=usage, also=also, **changes)
