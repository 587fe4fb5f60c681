"""TurnActor: one managed Turn, from its dispatch receipt to its one outcome.

A Turn is created by the TerminalActor's reservation (the Connection asks the
terminal to dispatch; nothing exists before the reservation commits, so a
refused send leaves no record). From the receipt on, the TurnActor follows it,
driven by ``Tick``s from the TurnDesk's clock:

- acceptance: the agent's own file (``akk.evidence``) shows a user message with
  exactly the request's text after the recorded position; without evidence,
  the screen (the composer emptied and the agent working) with that limit
  stated. No proof within ``accept_seconds``: ``uncertain``, never retyped;
- completion, failure, interruption and usage from the file, or the screen
  returning to idle when there is no file;
- the pane or process gone: ``failed``; no activity for the inactivity
  window: ``stalled``; past the hard lifetime: ``timed_out``;
- prompts: each new appearance of a prompt on the Turn's terminal is recorded
  as an interaction with its durable ``interaction_required`` (or
  ``approval_required``) event; one that left the screen unanswered by AKK
  becomes ``gone``. The TurnDesk wakes the Turn as soon as its terminal
  publishes a different prompt, so the event does not wait for the next tick.

The outcome and its notification commit in one transaction, once; then the
TurnActor tells the controller's Destination and stops.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import apsw
import attrs
import trio

from akk import evidence, faults
from akk.actors.store import transact
from akk.actors.terminal import Interrupt, InterruptReceipt
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot, project_snapshot
from akk.faults import Point
from akk.profiles.observation import State
from akk.protocol.errors import Reason
from akk.protocol.projection import Shown
from akk.protocol.redaction import redact
from akk.runtime.actor import Actor, ActorRef, Ask, Rank, StopActor
from akk.screen.fingerprint import Appearance, IdMinter
from akk.store import dispatches, interactions, terminals, turns
from akk.store.dispatches import Kind, Stage
from akk.store.interactions import Interaction, InteractionState
from akk.store.turns import Turn, TurnState

log = logging.getLogger("akk.turn")

GONE_GRACE = 5.0
"""Seconds a Turn's terminal may be unseen (e.g. before the first listing after a start)
before the Turn fails as ``terminal_gone``."""

CANCEL_BOUND = 10.0
"""Seconds after the interrupt key within which the interruption must show."""

SCREEN_CATCH_UP = 2.0
"""Seconds a file-proven outcome waits for the Turn's pane to stop reading ``working``: the
file can be ahead of the last screen read by a repaint, and a controller sends its next task
on ``done`` (tests/lab/test_back_to_back.py). After it the file decides alone."""

TICK = 0.1
"""Seconds between a TurnActor's looks at its evidence and screen."""

FINAL_MESSAGE_LIMIT = 4000
"""Characters of the agent's final message kept in the outcome (redacted first)."""


@attrs.frozen
class Tick(Ask[None]):
    """Look again (sent by the TurnDesk's clock)."""


@attrs.frozen
class Cancel(Ask["CancelResult"]):
    """The owner asked to cancel."""


@attrs.frozen
class Close(Ask[None]):
    """Management released (already recorded): stop following."""


@attrs.frozen
class Reload(Ask[None]):
    """The record changed outside this actor (a renew): read it again before the next look.

    ``reconcile``: also prove again what the record's process did (`recover`)."""

    reconcile: bool = False


@attrs.frozen
class CancelResult:
    ok: bool
    reason: Reason | None = None
    message: str = ""


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
        board: TerminalBoard,
        notify: Notify,
        ids: IdMinter,
        enter_at: float | None,
        accept_seconds: float,
    ) -> None:
        self._turn_id = turn_id
        self._ids = ids
        self._announced: Appearance | None = None
        self._accept_seconds = accept_seconds
        self._store = store
        self._read_store = reader
        self._board = board
        self._notify = notify
        self._enter_at = enter_at
        self._turn: Turn | None = None
        self._accept_deadline = 0.0
        self._cancel: tuple[float, int] | None = None  # (deadline, screen seq) after the key
        self._last_seq = -1
        self._last_size = -1
        self._saw_working = False
        self._outcome_at: float | None = None  # when the file first proved the outcome
        self._missing_since: float | None = None
        self._pane: tuple[str, str] | None = None  # (tmux socket, pane id) once seen
        self._idle_unbound_since: float | None = None

    async def started(self) -> None:
        self._turn = await self._load()
        # A Watch begins on a task the agent already works on.
        self._saw_working = self._turn.is_watch
        base = self._enter_at if self._enter_at is not None else trio.current_time()
        self._accept_deadline = base + self._accept_seconds

    async def receive(self, message: TurnMessage) -> object:
        match message:
            case Tick():
                await self._follow()
            case Cancel():
                return await self._start_cancel()
            case Close():
                raise StopActor()
            case Reload():
                self._turn = await self._load()
        return None

    # -- following

    async def _follow(self) -> None:
        turn = self._turn
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
            await self._settle(TurnState.TIMED_OUT, "timed_out", why)
            return
        if self._board.ref(turn.terminal_id or "") is None:
            # Just after a start the watcher may not have listed the panes yet.
            if self._missing_since is None:
                self._missing_since = trio.current_time()
            if trio.current_time() - self._missing_since >= GONE_GRACE:
                await self._terminal_gone()
            return
        self._missing_since = None
        snapshot = self._board.get(turn.terminal_id or "")
        if snapshot is None:
            return  # its actor is restarting: look again next tick
        self._pane = (snapshot.identity.tmux_socket, snapshot.identity.pane_id)
        active = snapshot.seq != self._last_seq
        self._last_seq = snapshot.seq
        if snapshot.observation.state is State.WORKING:
            self._saw_working = True
        progress = await self._progress()
        if progress is not None and progress[1]:
            active = True
        if active:
            turn = await self._update(last_activity_at=now)
        if turn.state in (TurnState.DISPATCHING, TurnState.UNCERTAIN):
            await self._check_acceptance(progress, snapshot.observation.state, snapshot.seq)
        elif turn.state is TurnState.RUNNING:
            if turn.is_watch and turn.evidence_status == "pending":
                await self._check_unbound(snapshot.observation.state)
            await self._check_outcome(progress, snapshot.observation.state)
        turn = self._turn
        assert turn is not None
        # A prompt is announced once the task is accepted: before that its dispatch
        # is still open and no answer could be reserved.
        accepted = turn.state is TurnState.RUNNING
        # A manual screen counts once it settled (akk.protocol.wakeups): its wake-up waits for that.
        clock = trio.current_time()
        shows = snapshot.showing(clock)
        if turn.unresolved and accepted and shows != self._announced and not snapshot.busy:
            await self._announce(snapshot, shows, clock)
        if turn.unresolved and now - turn.last_activity_at >= turn.inactivity_seconds:
            await self._settle(
                TurnState.STALLED, "stalled", "no activity for the Turn's inactivity window"
            )

    async def _terminal_gone(self) -> None:
        """The Turn's terminal left the board: its pane closed, or another process runs there.

        Another agent process in the same pane is another task: the record ends,
        and is never moved onto the new process.
        """
        pane = self._pane
        if pane is None:
            terminal_id = self._turn.terminal_id if self._turn else None
            pane = await self._read_store(lambda conn: terminals.pane_of(conn, terminal_id or ""))
        replaced = pane is not None and any(
            (s.identity.tmux_socket, s.identity.pane_id) == pane for s in self._board
        )
        if replaced:
            reason = "incarnation_changed"
            why = "another agent process now runs in the pane; this record was not moved onto it"
        else:
            reason = "terminal_gone"
            why = "the pane closed or the agent process ended before the task finished"
        await self._settle(TurnState.FAILED, reason, why)

    async def _progress(self) -> tuple[evidence.Progress, bool] | None:
        """What the agent's file proves now, and whether it grew; None without evidence."""
        turn = self._turn
        assert turn is not None
        if turn.evidence_status == "unknown" or turn.evidence is None:
            return None
        try:
            if turn.evidence_status == "pending":
                snap = evidence.Snapshot.from_json(turn.evidence)
                if turn.is_watch:
                    # The person's own message names the task: its digest becomes the request's.
                    task = await trio.to_thread.run_sync(evidence.bind_task, snap)
                    if task is None:
                        return None
                    binding, digest = task
                else:
                    digest = turn.request_sha256
                    found = await trio.to_thread.run_sync(evidence.bind, snap, digest)
                    if found is None:
                        return None
                    binding = found
                self._turn = await self._update(
                    evidence_status="bound", evidence=binding.to_json(), request_sha256=digest,
                    native_session=binding.session_id or turn.native_session,
                )  # fmt: skip
                turn = self._turn
            binding = evidence.Binding.from_json(turn.evidence or "")
            progress = await trio.to_thread.run_sync(evidence.read, binding, turn.request_sha256)
        except evidence.EvidenceError as exc:
            self._turn = await self._update(
                evidence_status="unknown", evidence_limit=f"{type(exc).__name__}: {exc}"[:300]
            )
            return None
        await faults.reached(Point.EVIDENCE_READ)
        grew = progress.end_offset != self._last_size
        self._last_size = progress.end_offset
        return progress, grew

    async def _check_unbound(self, state: State) -> None:
        """A Watch whose task ended on screen while its file never showed the person's message.

        After ``accept_seconds`` idle, the file is given up (evidence unknown, with
        that limit): the screen alone then settles the task.
        """
        if state not in (State.IDLE, State.IDLE_DRAFT):
            self._idle_unbound_since = None
            return
        now = trio.current_time()
        if self._idle_unbound_since is None:
            self._idle_unbound_since = now
        elif now - self._idle_unbound_since >= self._accept_seconds:
            self._turn = await self._update(
                evidence_status="unknown",
                evidence_limit="the agent's file never showed the person's message",
            )

    async def _check_acceptance(
        self, progress: tuple[evidence.Progress, bool] | None, state: State, seq: int
    ) -> None:
        turn = self._turn
        assert turn is not None
        accepted = False
        if progress is not None:
            accepted = progress[0].accepted
        elif turn.evidence_status == "unknown":
            # The screen is the only witness: the composer let go of the text and the
            # agent works, or asks about it (or already answered). Stated in status as
            # the evidence limit.
            accepted = self._saw_working or state in _ACTING
        if accepted:
            session = progress[0].session_id if progress is not None else None
            await self._record_acceptance(session)
            if progress is not None:
                await self._check_outcome(progress, state)
            return
        if trio.current_time() < self._accept_deadline:
            return
        if turn.state is TurnState.DISPATCHING:
            await self._mark_uncertain()
        await self._settle(
            TurnState.FAILED,
            "uncertain",
            "AKK cannot prove the agent received the task; it was not typed or submitted again",
        )

    async def _record_acceptance(self, session: str | None) -> None:
        turn_id = self._turn_id

        def accept(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            for dispatch in _composer_steps(conn, turn_id):
                if dispatch.stage in (Stage.ENTER_SENT, Stage.UNCERTAIN):
                    dispatches.advance(conn, dispatch, Stage.ACCEPTED)
            return turns.update(
                conn, fresh, state=TurnState.RUNNING, reason=None,
                native_session=session or fresh.native_session,
            )  # fmt: skip

        self._turn = await transact(self._store, accept)
        await faults.reached(Point.ACCEPTED)

    async def _mark_uncertain(self) -> None:
        turn_id = self._turn_id

        def mark(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            for dispatch in _composer_steps(conn, turn_id):
                if dispatch.stage.open:
                    dispatches.advance(conn, dispatch, Stage.UNCERTAIN, "acceptance_not_proven")
            return turns.update(conn, fresh, state=TurnState.UNCERTAIN, reason="not_accepted")

        self._turn = await transact(self._store, mark)

    async def _check_outcome(
        self, progress: tuple[evidence.Progress, bool] | None, state: State
    ) -> None:
        if progress is not None:
            outcome = file_outcome(progress[0])
            if outcome is None:
                self._outcome_at = None
            else:
                clock = trio.current_time()
                if self._outcome_at is None:
                    self._outcome_at = clock
                if state is State.WORKING and clock - self._outcome_at < SCREEN_CATCH_UP:
                    return  # the pane has not caught up with the file yet
                await self._settle(
                    outcome.state, outcome.reason, outcome.summary, **outcome.changes
                )
            return
        turn = self._turn
        assert turn is not None
        if turn.evidence_status == "unknown" and state is State.IDLE and self._saw_working:
            await self._settle(
                TurnState.DONE, None,
                "the agent is idle again (seen on screen; its own file could not be read)",
            )  # fmt: skip
        if self._cancel is not None:
            deadline, seq = self._cancel
            if state is State.IDLE and self._last_seq > seq and progress is None:
                await self._settle(TurnState.CANCELLED, None, "the Turn was interrupted")
            elif trio.current_time() >= deadline:
                self._cancel = None
                self._turn = await self._update(reason="cancel_uncertain")

    async def _announce(
        self, snapshot: TerminalSnapshot, seen: Appearance | None, clock: float
    ) -> None:
        """Record the prompt (or settled manual screen) ``seen`` now shows, and its event once;
        earlier ones left unanswered. ``clock``: the trio time ``seen`` was decided at."""
        turn = self._turn
        assert turn is not None
        now = time.time()
        shown = project_snapshot(snapshot, self._ids, turn.ids["turn_id"], clock)

        def record(conn: apsw.Connection) -> bool:
            for row in interactions.pending_of_turn(conn, turn.turn_id):
                if row.seen != seen:
                    interactions.set_state(conn, row, InteractionState.GONE)
            fresh = turns.get(conn, turn.turn_id)
            assert fresh is not None
            return shown is not None and remember(conn, fresh, snapshot, shown, now)[1]

        if await transact(self._store, record):
            self._notify(turn.controller_id)
        self._announced = seen

    # -- cancel

    async def _start_cancel(self) -> CancelResult:
        turn = self._turn
        assert turn is not None
        if not turn.unresolved:
            return CancelResult(
                False, Reason.CLOSED, f"turn {turn.turn_id} is already {turn.state}"
            )
        if turn.state is not TurnState.RUNNING:
            return CancelResult(
                False, Reason.NOT_IDLE,
                f"turn {turn.turn_id} is {turn.state}, not running; nothing was sent",
            )  # fmt: skip
        terminal = self._board.ref(turn.terminal_id or "")
        if terminal is None:
            return CancelResult(False, Reason.NOT_FOUND, "the terminal is gone; nothing was sent")
        reply = await terminal.ask(Interrupt(turn), timeout=10)
        if not isinstance(reply, InterruptReceipt):
            return CancelResult(False, reply.reason, reply.message)
        self._cancel = (trio.current_time() + CANCEL_BOUND, reply.seq)
        return CancelResult(True)

    # -- store

    async def _load(self) -> Turn:
        turn_id = self._turn_id
        turn: Turn | None = await self._read_store(lambda conn: turns.get(conn, turn_id))
        assert turn is not None, turn_id
        return turn

    async def _update(self, **changes: object) -> Turn:
        self._turn = await update_turn(self._store, self._turn_id, **changes)
        return self._turn

    async def _settle(
        self, state: TurnState, reason: str | None, summary: str, **changes: object
    ) -> None:
        turn_id, now = self._turn_id, time.time()

        def settle(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            if not fresh.unresolved:
                return fresh
            for dispatch in _composer_steps(conn, turn_id):
                if dispatch.stage.open:
                    dispatches.advance(conn, dispatch, Stage.UNCERTAIN, f"turn {state}")
            return turns.settle(
                conn, fresh, state, now=now, reason=reason, summary=redact(summary), **changes
            )

        self._turn = await transact(self._store, settle)
        await faults.reached(Point.OUTCOME)
        self._notify(self._turn.controller_id)
        log.info("turn %s settled %s (%s)", turn_id, state, reason or "-")
        raise StopActor()


async def update_turn(store: ActorRef, turn_id: str, **changes: object) -> Turn:
    """Compare-and-swap ``changes`` onto the Turn as it is now; the Turn as stored."""

    def apply(conn: apsw.Connection) -> Turn:
        fresh = turns.get(conn, turn_id)
        assert fresh is not None
        return turns.update(conn, fresh, **changes)

    updated: Turn = await transact(store, apply)
    return updated


def _composer_steps(conn: apsw.Connection, turn_id: str) -> list[dispatches.Dispatch]:
    """The Turn's task, respond and cancel dispatches: the ones its TurnActor settles.

    An answer's dispatch is the TerminalActor's until its receipt (and a
    restart's ``resume`` after a crash): two writers would race on it.
    """
    return [
        d for d in dispatches.of_turn(conn, turn_id) if d.kind not in (Kind.ANSWER, Kind.APPROVAL)
    ]


_ACTING = frozenset({State.WORKING, State.PERMISSION, State.QUESTIONNAIRE, State.ASYNC_QUESTION})


def remember(
    conn: apsw.Connection, turn: Turn, snapshot: TerminalSnapshot, shown: Shown, now: float
) -> tuple[Interaction, bool]:
    """Record one appearance for ``turn`` (and its wake-up when new); (row, whether new)."""
    prompt = shown.prompt
    return interactions.record(
        conn,
        interaction_id=shown.interaction_id,
        terminal_id=snapshot.identity.terminal_id,
        turn_id=turn.turn_id,
        kind=shown.kind,
        seen=shown.seen,
        profile=snapshot.identity.profile or "",
        step_index=1 if prompt is None else prompt.step_index,
        step_total=1 if prompt is None else prompt.step_total,
        projection=shown.projection,
        now=now,
        announce=turn,
    )


@attrs.frozen
class Outcome:
    """How the agent's file says a task ended: the settled state and what to record."""

    state: TurnState
    reason: str | None
    summary: str
    changes: dict[str, object]


def file_outcome(found: evidence.Progress) -> Outcome | None:
    """The outcome ``found`` proves (with usage and final message), or None while it runs."""
    usage = found.usage
    changes: dict[str, object] = {"usage_status": found.usage_status.value}
    if usage is not None:
        changes |= {
            "usage_input": usage.input,
            "usage_output": usage.output,
            "usage_cache_read": usage.cache_read,
            "usage_cache_write": usage.cache_write,
        }
    if found.final_message is not None:
        changes["final_message"] = _bounded(found.final_message)
    if found.outcome == "done":
        return Outcome(TurnState.DONE, None, _summary(found.final_message), changes)
    if found.outcome == "failed":
        why = redact((found.failure or "failed")[:200])
        return Outcome(TurnState.FAILED, "agent_error", f"the agent reported: {why}", changes)
    if found.outcome == "cancelled":
        return Outcome(TurnState.CANCELLED, None, "the task was interrupted", changes)
    return None


def _bounded(text: str) -> str:
    text = redact(text)
    return text if len(text) <= FINAL_MESSAGE_LIMIT else text[: FINAL_MESSAGE_LIMIT - 1] + "…"


def _summary(final: str | None) -> str:
    if not final:
        return "the agent finished the Turn"
    first = redact(final.strip().splitlines()[0] if final.strip() else "")
    return first[:200]
