"""The terminal's follower: one Turn typed into a pane, followed on its screen and file.

The TurnActor (`akk.actors.turn`) drives it once per tick:

- acceptance: the agent's own file (``akk.evidence``) shows a user message with
  exactly the request's text after the recorded position; without evidence,
  the screen (the composer emptied and the agent working) with that limit
  stated. No proof within ``accept_seconds``: ``uncertain``, never retyped;
- completion, failure, interruption and usage from the file, or the screen
  returning to idle when there is no file;
- the pane or process gone: ``failed``;
- prompts: each new appearance of a prompt on the Turn's terminal is recorded
  as an interaction with its durable ``interaction_required`` (or
  ``approval_required``) event; one that left the screen unanswered by AKK
  becomes ``gone``. The TurnDesk wakes the Turn as soon as its terminal
  publishes a different prompt, so the event does not wait for the next tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import apsw
import trio

from akk import evidence, faults
from akk.actors.store import transact
from akk.actors.terminal_board import (
    TerminalBoard,
    TerminalSnapshot,
    project_snapshot,
    sighting,
)
from akk.actors.turn_follower import Attached, CancelResult, Usage
from akk.backends.outcomes import file_outcome
from akk.backends.terminal.steps import Interrupt, InterruptReceipt
from akk.faults import Point
from akk.profiles.composer import DraftView
from akk.profiles.observation import Observation, State
from akk.protocol.errors import Reason
from akk.runtime.actor import ActorRef
from akk.screen.fingerprint import Appearance, IdMinter
from akk.store import dispatches, interactions, terminals, turns
from akk.store.dispatches import Kind, Stage
from akk.store.turns import Turn, TurnState

GONE_GRACE = 5.0
"""Seconds a Turn's terminal may be unseen (e.g. before the first listing after a start)
before the Turn fails as ``terminal_gone``."""

CANCEL_BOUND = 10.0
"""Seconds after the interrupt key within which the interruption must show."""

STRANDED_SECONDS = 10.0
"""Seconds a Claude pane reads idle, its file holding the Turn's prompt with nothing under
it, before the Turn is withdrawn though AKK never saw the task taken back: it was down, or
its looks fell between, while a person pressed Escape and cleared or changed the task."""

SCREEN_CATCH_UP = 2.0
"""Seconds a file-proven outcome waits for the Turn's pane to stop reading ``working``: the
file can be ahead of the last screen read by a repaint, and a controller sends its next task
on ``done`` (tests/lab/test_back_to_back.py). After it the file decides alone."""


class TerminalFollower(Attached):
    """The `TurnFollower` of a Turn or Watch on one terminal."""

    def __init__(
        self,
        turn_id: str,
        *,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
        board: TerminalBoard,
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
        self._enter_at = enter_at
        self._accept_deadline = 0.0
        self._cancel: tuple[float, int] | None = None  # (deadline, screen seq) after the key
        self._cancel_sent_at: float | None = None  # a stored cancel's key, read with the Turn
        self._last_seq = -1
        self._last_size = -1
        self._saw_working = False
        self._outcome_at: float | None = None  # when the file first proved the outcome
        self._stopped_at: float | None = None  # since when the screen shows the task stopped
        self._stranded_since: float | None = None  # idle over the unanswered prompt, since
        self._taken_back = False  # the screen showed Claude take the task back (see glimpse)
        self._missing_since: float | None = None
        self._pane: tuple[str, str] | None = None  # (tmux socket, pane id) once seen
        self._idle_unbound_since: float | None = None

    def read(self, conn: apsw.Connection, turn: Turn) -> None:
        """The Turn is the terminal's record, with its cancel whose interrupt key went out
        (`enter_sent`) and whose interruption is still awaited (one cut off by a restart)."""
        self._cancel_sent_at = max(
            (
                d.updated_at
                for d in _composer_steps(conn, turn.turn_id)
                if d.kind is Kind.CANCEL and d.stage is Stage.ENTER_SENT
            ),
            default=None,
        )

    def started(self, turn: Turn) -> None:
        # A Watch begins on a task the agent already works on.
        self._saw_working = turn.is_watch
        base = self._enter_at if self._enter_at is not None else trio.current_time()
        self._accept_deadline = base + self._accept_seconds
        self._await_cancel()

    def reloaded(self, reconcile: bool) -> None:
        """The screen and the file are read afresh at every look anyway."""
        self._await_cancel()

    def _await_cancel(self) -> None:
        """Await the interruption of a cancel whose key went out before this follower (AKK
        restarted after recording it): within `CANCEL_BOUND` of its record, never longer
        than that from now, it shows or the cancel ends `uncertain` (`_cancel_not_shown`),
        so the terminal takes input again. Every screen read from now on is after the key."""
        sent_at, self._cancel_sent_at = self._cancel_sent_at, None
        if sent_at is None or self._cancel is not None:
            return
        left = min(max(sent_at + CANCEL_BOUND - time.time(), 0.0), CANCEL_BOUND)
        self._cancel = (trio.current_time() + left, -1)

    def glimpse(self, snapshot: TerminalSnapshot) -> None:
        """Its terminal's snapshot as published, though the next look may find it replaced:
        the pane working, and Claude taking the task back into its composer after that. A
        person may clear the task at once, under a second after it showed; a look that
        comes later (a loaded machine) still knows it was taken back (`_check_stopped`)."""
        turn = self._turn
        if turn is None or snapshot.identity.terminal_id != turn.terminal_id or snapshot.busy:
            return
        observation = snapshot.observation
        if observation.state is State.WORKING:
            self._saw_working = True
        elif (
            self._saw_working
            and observation.state in (State.IDLE, State.IDLE_DRAFT)
            and _holds_request(observation.draft, turn.request_sha256)
        ):
            self._taken_back = True

    async def before_deadline(self) -> None:
        """A terminal Turn past its deadline is left as it is: no key is sent."""

    def settling(self, conn: apsw.Connection, fresh: Turn, state: TurnState, now: float) -> None:
        for dispatch in _composer_steps(conn, fresh.turn_id):
            if not dispatch.stage.open:
                continue
            if dispatch.kind is Kind.CANCEL and state is TurnState.CANCELLED:
                dispatches.advance(conn, dispatch, Stage.ACCEPTED)  # the interruption showed
            else:
                dispatches.advance(conn, dispatch, Stage.UNCERTAIN, f"turn {state}")

    # -- following

    async def look(self, now: float) -> bool:
        turn = self._turn
        assert turn is not None
        if self._board.ref(turn.terminal_id or "") is None:
            # Just after a start the watcher may not have listed the panes yet.
            if self._missing_since is None:
                self._missing_since = trio.current_time()
            if trio.current_time() - self._missing_since >= GONE_GRACE:
                await self._terminal_gone()
            return False
        self._missing_since = None
        snapshot = self._board.get(turn.terminal_id or "")
        if snapshot is None:
            return False  # its actor is restarting: look again next tick
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
            await self._check_acceptance(progress, snapshot.observation)
        elif turn.state is TurnState.RUNNING:
            if turn.is_watch and turn.evidence_status == "pending":
                await self._check_unbound(snapshot.observation.state)
            await self._check_outcome(progress, snapshot.observation)
        turn = self._turn
        assert turn is not None
        # A prompt is announced once the task is accepted: before that its dispatch
        # is still open and no answer could be reserved.
        accepted = turn.state is TurnState.RUNNING
        # A manual screen counts once it settled (akk.protocol.wakeups): its wake-up waits for that.
        # Nor does one that may be a frame caught mid-draw take the prompt before it off the
        # screen: a person's prompt redrawn after it is the same appearance (the Observer's
        # `_appearance`), and is neither invalidated nor announced again.
        clock = trio.current_time()
        shows = snapshot.showing(clock)
        manual = snapshot.manual
        passing = shows is None and manual is not None and manual.passing(clock)
        if (turn.unresolved and accepted and shows != self._announced and not snapshot.busy
                and not passing):  # fmt: skip
            await self._announce(snapshot, shows, clock)
        return True

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
                turn = await self._update(
                    evidence_status="bound", evidence=binding.to_json(), request_sha256=digest,
                    native_session=binding.session_id or turn.native_session,
                )  # fmt: skip
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
        self, progress: tuple[evidence.Progress, bool] | None, observation: Observation
    ) -> None:
        state = observation.state
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
                await self._check_outcome(progress, observation)
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
                if dispatch.kind is not Kind.CANCEL and dispatch.stage in (
                    Stage.ENTER_SENT,
                    Stage.UNCERTAIN,
                ):
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
        self, progress: tuple[evidence.Progress, bool] | None, observation: Observation
    ) -> None:
        state = observation.state
        clock = trio.current_time()
        if progress is not None:
            turn = self._turn
            assert turn is not None
            if progress[0].person_messages != turn.person_messages:
                # Kept as the file shows it: `status` tells it while the Turn runs, and an
                # end the file does not record (stalled, timed out) keeps it too.
                self._turn = await self._update(person_messages=progress[0].person_messages)
            outcome = file_outcome(progress[0])
            if outcome is not None:
                if self._outcome_at is None:
                    self._outcome_at = clock
                if state is State.WORKING and clock - self._outcome_at < SCREEN_CATCH_UP:
                    return  # the pane has not caught up with the file yet
                await self._settle(
                    outcome.state, outcome.reason, outcome.summary, usage=outcome.usage,
                    **outcome.changes,
                )  # fmt: skip
                return
            self._outcome_at = None
        else:
            turn = self._turn
            assert turn is not None
            if turn.evidence_status == "unknown" and state is State.IDLE and self._saw_working:
                await self._settle(
                    TurnState.DONE, None,
                    "the agent is idle again (seen on screen; its own file could not be read)",
                )  # fmt: skip
                return
        await self._check_stopped(progress, observation, clock)

    async def _check_stopped(
        self,
        progress: tuple[evidence.Progress, bool] | None,
        observation: Observation,
        clock: float,
    ) -> None:
        """The agent stopped with nothing in its file to say so.

        Claude, interrupted before its first reply (by AKK's cancel or by a person's
        Escape), writes no interruption and takes the task back into its composer:
        idle, the composer showing exactly the request, and nothing the agent wrote
        under the prompt (`withdrawn`). Once that showed after the pane read working, the
        taking back is proven, and the composer may change: a person who clears the task
        or edits it leaves it just as withdrawn (a screen before the pane worked may be the
        submit's own last frame, so it must hold instead). After AKK's interrupt key, idle
        with nothing under the prompt (or no file to read) is enough, whatever the composer
        shows. Each held for `SCREEN_CATCH_UP` cancels the Turn; text left in the composer
        is the person's to clear or send, never submitted again. Where none of that showed
        (AKK was down while a person took the task back and cleared it), the pane idle over
        the unanswered prompt for `STRANDED_SECONDS` is enough: Claude draws its spinner
        for as long as it works on a prompt. A cancel that shows neither way within
        `CANCEL_BOUND` ends uncertain (`_cancel_not_shown`).
        """
        turn = self._turn
        assert turn is not None
        idle = observation.state in (State.IDLE, State.IDLE_DRAFT)
        unanswered = progress is not None and progress[0].unanswered
        holds = idle and unanswered and _holds_request(observation.draft, turn.request_sha256)
        if holds and self._saw_working:
            self._taken_back = True
        restored = holds or (idle and unanswered and self._taken_back)
        after_key = (
            idle
            and (progress is None or unanswered)
            and self._cancel is not None
            and self._last_seq > self._cancel[1]
        )
        if not (restored or after_key):
            self._stopped_at = None
        elif self._stopped_at is None:
            self._stopped_at = clock
        if not (idle and unanswered):
            self._stranded_since = None
        elif self._stranded_since is None:
            self._stranded_since = clock
        shown = self._stopped_at is not None and clock - self._stopped_at >= SCREEN_CATCH_UP
        stranded = (
            self._stranded_since is not None and clock - self._stranded_since >= STRANDED_SECONDS
        )
        if shown or stranded:
            if not unanswered:
                await self._settle(TurnState.CANCELLED, None, "the Turn was interrupted")
                return
            by = "AKK's cancel" if self._cancel is not None else "an interrupt not from AKK"
            if holds:
                where = (
                    "put the task back in its composer, where it waits unsent; AKK never "
                    "submits it again: a person clears or sends it at the pane"
                )
            elif restored:
                where = (
                    "took the task back into its composer, where a person cleared or changed "
                    "it; AKK never sends the task again"
                )
            elif after_key:
                where = "its file records no interruption; AKK never sends the task again"
            else:
                where = (
                    f"has been idle for {STRANDED_SECONDS:.0f} s with nothing under the task in "
                    "its file, no interruption either: it was taken back while AKK did not "
                    "see it. AKK never sends the task again"
                )
            await self._settle(
                TurnState.CANCELLED, "withdrawn",
                f"the agent stopped before it answered ({by}) and {where}",
            )  # fmt: skip
        elif self._cancel is not None and clock >= self._cancel[0]:
            self._cancel = None
            await self._cancel_not_shown()

    async def _announce(
        self, snapshot: TerminalSnapshot, seen: Appearance | None, clock: float
    ) -> None:
        """Record the prompt (or settled manual screen) ``seen`` now shows, and its event once;
        earlier ones left unanswered. ``clock``: the trio time ``seen`` was decided at."""
        turn = self._turn
        assert turn is not None and self._control is not None
        now = time.time()
        shown = project_snapshot(snapshot, self._ids, turn.ids["turn_id"], clock)

        def record(conn: apsw.Connection, fresh: Turn) -> bool:
            return (
                shown is not None
                and interactions.remember(conn, fresh, sighting(snapshot, shown), now)[1]
            )

        await self._control.announce(lambda row: row.seen == seen, record)
        self._announced = seen

    # -- cancel

    async def interrupt(self, turn: Turn) -> CancelResult:
        if self._cancel is not None:
            return CancelResult(True)  # the interrupt key went; its interruption is awaited
        terminal = self._board.ref(turn.terminal_id or "")
        if terminal is None:
            return CancelResult(False, Reason.NOT_FOUND, "the terminal is gone; nothing was sent")
        reply = await terminal.ask(Interrupt(turn), timeout=10)
        if not isinstance(reply, InterruptReceipt):
            return CancelResult(False, reply.reason, reply.message)
        self._cancel = (trio.current_time() + CANCEL_BOUND, reply.seq)
        return CancelResult(True)

    async def _cancel_not_shown(self) -> None:
        """The interruption did not show within `CANCEL_BOUND`: the Turn goes on, marked
        ``cancel_uncertain``, and the cancel step ends ``uncertain``, so that answers and a
        new cancel can be reserved on the terminal again."""
        turn_id = self._turn_id

        def mark(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            for dispatch in _composer_steps(conn, turn_id):
                if dispatch.kind is Kind.CANCEL and dispatch.stage.open:
                    dispatches.advance(conn, dispatch, Stage.UNCERTAIN, "interruption_not_shown")
            return turns.update(conn, fresh, reason="cancel_uncertain")

        self._turn = await transact(self._store, mark)

    async def _update(self, **changes: object) -> Turn:
        assert self._control is not None
        return await self._control.update(**changes)

    async def _settle(
        self,
        state: TurnState,
        reason: str | None,
        summary: str,
        *,
        usage: Usage | None = None,
        **changes: Any,
    ) -> None:
        assert self._control is not None
        await self._control.settle(state, reason, summary, usage=usage, **changes)


def _composer_steps(conn: apsw.Connection, turn_id: str) -> list[dispatches.Dispatch]:
    """The Turn's task, respond and cancel dispatches: the ones its TurnActor settles.

    An answer's dispatch is the TerminalActor's until its receipt (and a
    restart's ``resume`` after a crash): two writers would race on it.
    """
    return [
        d for d in dispatches.of_turn(conn, turn_id) if d.kind not in (Kind.ANSWER, Kind.APPROVAL)
    ]


_ACTING = frozenset({State.WORKING, State.PERMISSION, State.QUESTIONNAIRE, State.ASYNC_QUESTION})


def _holds_request(draft: DraftView | None, request_sha256: str) -> bool:
    """Whether the composer shows exactly the request whose digest is ``request_sha256``
    (its rows, read as one line, or as the lines or the wrapped pieces of one): the
    request text is never stored, its digest is."""
    if draft is None or draft.empty or not draft.complete:
        return False
    readings = ("".join(draft.rows), " ".join(draft.rows), "\n".join(draft.rows))
    return any(evidence.request_digest(text) == request_sha256 for text in readings)
