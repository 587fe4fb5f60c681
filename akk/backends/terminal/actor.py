"""TerminalActor: one pane's only sender of keys, one input-bearing step at a time.

Its Observer (`observer`) reads the pane and publishes each new Observation
on the TerminalBoard (nobody asks the actor for news). Input-bearing steps
arrive as typed messages (`steps`) and run one at a time, each under the rule
of ARCHITECTURE.md "One input-bearing step": here the screen is recaptured
and proven and the step reserved durably; then one bounded step of keys
(`typing_step` for a composer message, `answer_step` for an answer, the
interrupt key here), each stage recorded (`stages`); the reply is a receipt,
or a typed refusal before any key (zero keys).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import apsw
import attrs
import trio

from akk import evidence, faults
from akk.actors.store import RETRY_SECONDS, transact, transact_reservation
from akk.actors.terminal_board import TerminalBoard, refused_for
from akk.backends.contract import AnswerReceipt, Refusal
from akk.backends.terminal.answer_step import send_answer
from akk.backends.terminal.checks import (
    Busy,
    answer_plan,
    delivery_refusal,
    detour_refusal,
    fence_check,
    next_turn_message,
)
from akk.backends.terminal.observer import Observer
from akk.backends.terminal.stages import StageUnrecorded, advance
from akk.backends.terminal.steps import (
    DispatchAnswer,
    DispatchRespond,
    DispatchTask,
    Interrupt,
    InterruptReceipt,
    Rebind,
    Reconcile,
    Refresh,
    TaskReceipt,
    TerminalMessage,
)
from akk.backends.terminal.typing_step import type_and_submit
from akk.discovery.identity import TerminalIdentity
from akk.evidence import claude_editor
from akk.faults import Point
from akk.profiles.composer import TypingMethod, draft_refusal
from akk.profiles.keyplan import Intent
from akk.profiles.observation import State, StepKind
from akk.profiles.registry import Profile
from akk.protocol.errors import Reason
from akk.runtime.actor import Actor, ActorRef, Rank
from akk.store import dispatches, interactions, responds, retention, turns
from akk.store.database import StoreUnwritable
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.responds import Responded
from akk.store.turns import Turn
from akk.text_rule import screen_refusal
from akk.tmux import keys
from akk.tmux.control import ClientLink, ControlClientClosed, TmuxCommandError
from akk.tmux.panes import pane_size

INTERRUPT_KEY = "Escape"
"""Both families' own interrupt key while working ("esc to interrupt" on every pinned version)."""

log = logging.getLogger("akk.terminal")

T = TypeVar("T")


# ------------------------------------------------------------------ before a reservation


@attrs.frozen
class _EvidenceStart:
    """Where the Turn's evidence starts: the snapshot taken before any key, or why not."""

    status: str  # pending | unknown
    snapshot: str | None
    limit: str | None


@attrs.frozen
class _Ready:
    """A proven idle pane, ready for one composer message."""

    seq: int
    method: TypingMethod
    evidence: _EvidenceStart

    def reserve(
        self, conn: apsw.Connection, turn: Turn, kind: Kind, terminal_id: str, now: float
    ) -> TaskReceipt:
        """Reserve the dispatch of ``turn``'s message (inside the caller's transaction)."""
        dispatch = dispatches.reserve(
            conn,
            controller_id=turn.controller_id,
            turn_id=turn.turn_id,
            terminal_id=terminal_id,
            kind=kind,
            typing=self.method.value,
            screen_seq=self.seq,
            now=now,
        )
        return TaskReceipt(turn, dispatch, self.seq, None)


async def _vim_refusal(identity: TerminalIdentity) -> Refusal | None:
    """Why a Claude composer that shows no ``-- INSERT --`` may not take keys, if it may not.

    Vim's NORMAL mode draws no mark, so the agent's own setting must prove the
    composer is not vim: where it says vim, or cannot be read, nothing is typed.
    """
    try:
        mode = await trio.to_thread.run_sync(
            claude_editor.editor_mode, identity.agent_pid, identity.cwd
        )
    except evidence.EvidenceUnavailable as exc:
        return Refusal(
            Reason.NOT_IDLE,
            f"AKK cannot read Claude's editorMode ({exc}), and its composer shows no "
            "-- INSERT --: if it is vim's NORMAL mode, typed text would be vim commands; "
            "nothing was sent. If Claude is in vim mode, a person presses i at the pane "
            "(INSERT) and you send again",
        )
    if mode != claude_editor.VIM:
        return None
    return Refusal(
        Reason.NOT_IDLE,
        "Claude's editorMode is vim and its composer shows no -- INSERT --: it is in NORMAL "
        "mode, where typed text would be vim commands; nothing was sent. A person presses i "
        "at the pane (INSERT), then send again",
    )


async def _evidence_start(identity: TerminalIdentity) -> _EvidenceStart:
    """Where the agent's own file stands now, before any key of a new round."""
    try:
        before = await trio.to_thread.run_sync(
            evidence.snapshot, identity.agent, identity.agent_pid, identity.process_start
        )
        proof = _EvidenceStart("pending", before.to_json(), None)
    except evidence.EvidenceUnavailable as exc:
        proof = _EvidenceStart("unknown", None, str(exc)[:300])
    await faults.reached(Point.EVIDENCE_SNAPSHOT)
    return proof


# ------------------------------------------------------------------ the actor


class TerminalActor(Actor[TerminalMessage]):
    """Keeps one pane's current Observation up to date; dispatches its input."""

    rank = Rank.TERMINAL
    mailbox_size = 8

    def __init__(
        self,
        identity: TerminalIdentity,
        profile: Profile | None,
        link: ClientLink,
        board: TerminalBoard,
        store: ActorRef,
        notify: Callable[[str], None],
        refresh_soon: Callable[[], None] = lambda: None,
    ) -> None:
        self._notify = notify  # wakes a controller's Destination after an event is written
        # Asks the watcher for a Refresh (its pacer's mark): a look of a step's that leaves
        # the pane to be read again (a held prompt, `Observer.recheck`) is not a Refresh's,
        # whose delay the pacer follows, so it would otherwise wait for the pane's output.
        self._refresh_soon = refresh_soon
        self._screen = Observer(identity, profile, link, board, store)
        self._link = link
        self._store = store
        self._cut_off = True  # a step open from before this actor (re)started: settle it first
        self._settle_at = 0.0  # trio clock: a store that could not write is tried again then

    async def started(self) -> None:
        self._screen.announce()
        await self._screen.resume()
        # A step open from before this actor (re)started was cut off by a crash.
        try:
            await self._reconcile()
        except StoreUnwritable as exc:
            # Not a crash (a restart would fail the same way): it is settled by the Refreshes
            # from now on (`_settle_cut_off`) or before this terminal's next reservation
            # (`_reserve`), which is refused until the store writes.
            self._settle_at = trio.current_time() + RETRY_SECONDS
            log.warning("terminal %s: cut-off steps not settled yet: %s",
                        self._screen.identity.terminal_id, exc)  # fmt: skip
        # Observe now, not at the pane's next change: a restarted actor on a quiet pane
        # would otherwise show unknown (and refuse every send) until someone typed there.
        try:
            self._screen.size = await pane_size(self._link.client(), self._screen.identity.pane_id)
        except (TmuxCommandError, ControlClientClosed):
            return  # gone or reattaching: the watcher's next listing brings a Refresh
        await self._screen.observe()

    async def stopped(self) -> None:
        self._screen.retire()

    async def receive(self, message: TerminalMessage) -> object:
        try:
            return await self._handle(message)
        except StageUnrecorded as exc:
            # Its keys went out but the store took no record of them: the step stays open as
            # last recorded, settled like a crash's cut-off step once the store writes.
            self._cut_off = True
            log.warning("terminal %s: %s", self._screen.identity.terminal_id, exc)
            return exc.refusal()
        finally:
            if not isinstance(message, Refresh) and self._screen.recheck is not None:
                self._refresh_soon()

    async def _handle(self, message: TerminalMessage) -> object:
        match message:
            case Refresh(cols, rows):
                self._screen.size = (cols, rows)
                await self._settle_cut_off()
                await self._screen.observe()
                recheck = self._screen.recheck
                if self._cut_off:  # come back when the store may write again
                    due = max(0.0, self._settle_at - trio.current_time())
                    return due if recheck is None else min(recheck, due)
                return recheck
            case Rebind(identity, profile):
                self._screen.rebind(identity, profile)
                await self._screen.observe(force=True)
                return None
            case DispatchTask():
                return await self._dispatch_task(message)
            case DispatchRespond():
                return await self._dispatch_respond(message)
            case DispatchAnswer():
                return await self._dispatch_answer(message)
            case Interrupt():
                return await self._interrupt(message)
            case Reconcile():
                try:
                    return await self._reconcile()
                except StoreUnwritable as exc:
                    return Refusal(
                        Reason.INTERNAL,
                        f"{exc.problem}, so the steps left open in this pane are not settled "
                        f"yet; {exc.next_step}",
                    )

    async def _reconcile(self) -> int:
        terminal_id, now = self._screen.identity.terminal_id, time.time()

        def settle(conn: apsw.Connection) -> list[str]:
            cause = "interrupted_by_restart"
            return [
                step.controller_id
                for step in dispatches.open_on(conn, terminal_id)
                if turns.orphaned(conn, step, cause, now)
            ]

        settled: list[str] = await transact(self._store, settle)
        self._cut_off = False
        for controller_id in settled:
            self._notify(controller_id)
        return len(settled)

    async def _settle_cut_off(self) -> None:
        """Settle the steps left open while the store could not write, once it can again.

        Tried at most every RETRY_SECONDS, from the Refreshes (which come back
        that often while steps stay open), so an open step is settled, and its
        controller told, when space returns, not only at the next reservation.
        """
        now = trio.current_time()
        if not self._cut_off or now < self._settle_at:
            return
        self._settle_at = now + RETRY_SECONDS
        try:
            await self._reconcile()
        except StoreUnwritable as exc:
            log.debug("terminal %s: cut-off steps not settled yet: %s",
                      self._screen.identity.terminal_id, exc)  # fmt: skip

    async def _reserve(self, work: Callable[[apsw.Connection], T]) -> T | Refusal:
        """Commit an input-bearing step's reservation (``work``), the only way to its first key.

        Steps a crash cut off are settled first. A store that cannot write refuses
        the step (``internal``): a reservation that is not on disk never becomes keys.
        """
        try:
            if self._cut_off:
                await self._reconcile()
            return await transact_reservation(self._store, work)
        except StoreUnwritable as exc:
            return Refusal(Reason.INTERNAL, f"{exc.problem}, so nothing was sent; {exc.next_step}")

    # -- a task

    async def _prove_idle(self, text: str) -> _Ready | Refusal:
        """The first steps of any composer message: its secrets remembered for the pane's
        redaction (`Observer.typing`), an exact profile, a settled idle pane with an empty
        composer, and the evidence position recorded before any key."""
        self._screen.typing(text)
        identity, profile = self._screen.identity, self._screen.profile
        if profile is None:
            return Refusal(
                Reason.UNSUPPORTED_VERSION,
                f"{identity.agent} {identity.version or '(unknown version)'} has no "
                f"exact profile ({identity.profile_reason}); AKK sent it nothing. Type "
                "the task at the pane, or take the step the reason names",
            )
        snapshot = await self._screen.observe(force=True)
        if snapshot is not None and self._screen.composer_since is not None:
            # Keys that arrive right after a composer is first drawn can be dropped. One
            # that stayed drawn through the last turn (both clients keep it while they
            # work) has been taking keys all along, and is not waited for again.
            settled_at = self._screen.composer_since + profile.typing.settle_seconds
            if trio.current_time() < settled_at:
                await trio.sleep_until(settled_at)
                snapshot = await self._screen.observe(force=True)
        if snapshot is None:
            return Refusal(
                Reason.NOT_IDLE,
                "the pane could not be captured whole just now; call status and try again",
            )
        observation = snapshot.observation
        if observation.state is not State.IDLE:
            what = observation.state.value
            if observation.state is State.IDLE_DRAFT:
                what = "idle with a draft in the composer (a person's text is never replaced)"
            return Refusal(
                Reason.NOT_IDLE,
                f"the pane is {what}, not idle with an empty composer; nothing was sent. Wait "
                "for the agent (status shows its state) and send again",
            )
        draft = observation.draft
        # The version's specials are checked here whatever the caller checked: the pane's
        # profile may have been bound (a qualification) after the caller looked.
        refused = (
            screen_refusal(text, profile.typing.specials)
            if draft is None
            else draft_refusal(profile.typing, text, draft.width, draft.pane_rows)
        )
        if refused is not None:  # it would be typed, never proven, and left there unsent
            return Refusal(Reason.INVALID_PARAMS, refused.message("the text"))
        if observation.composer_mode is None and identity.agent == "claude":
            vim = await _vim_refusal(identity)
            if vim is not None:
                return vim
        detour = await keys.detour(self._link.client(), identity.pane_id)
        if detour is not None:
            return detour_refusal(detour)
        proof = await _evidence_start(identity)
        return _Ready(snapshot.seq, profile.typing.method_for(text), proof)

    async def _dispatch_task(self, task: DispatchTask) -> TaskReceipt | Refusal:
        ready = await self._prove_idle(task.text)
        if isinstance(ready, Refusal):
            return ready
        method, proof = ready.method, ready.evidence
        now = time.time()
        digest = evidence.request_digest(task.text)
        terminal_id = self._screen.identity.terminal_id

        def reserve(conn: apsw.Connection) -> TaskReceipt | Refusal:
            existing = turns.by_request(conn, task.controller_id, task.client_request_id)
            if existing is not None:
                if existing.request_sha256 == digest:
                    return Refusal(Reason.CONFLICT, "repeated client_request_id", turn=existing)
                return Refusal(
                    Reason.CONFLICT,
                    f"client_request_id {task.client_request_id!r} was already used with another "
                    "text; use a new client_request_id for a new task",
                )
            stone = retention.lookup_request(conn, task.controller_id, task.client_request_id)
            if stone is not None:  # pruned since the caller looked: never typed again
                return Refusal(
                    Reason.CONFLICT,
                    f"client_request_id {task.client_request_id!r} was {stone.record_id}'s, "
                    "which retention pruned; its task is never typed again. Use a new "
                    "client_request_id for a new task",
                )
            holder = turns.unresolved_on(conn, terminal_id)
            if holder is not None:
                return Refusal(Reason.CONFLICT, turns.held(holder, task.controller_id))
            turn = turns.insert(
                conn,
                controller_id=task.controller_id,
                client_request_id=task.client_request_id,
                terminal_id=terminal_id,
                request_sha256=digest,
                request_chars=len(task.text),
                evidence_status=proof.status,
                evidence=proof.snapshot,
                evidence_limit=proof.limit,
                inactivity_seconds=task.inactivity_seconds,
                lifetime_seconds=task.lifetime_seconds,
                now=now,
            )
            return ready.reserve(conn, turn, Kind.TASK, terminal_id, now)

        return await self._reserve_then_type(reserve, task.text, method)

    async def _dispatch_respond(self, message: DispatchRespond) -> TaskReceipt | Refusal:
        """A new composer message in the same Turn: its next round, with the same proofs."""
        ready = await self._prove_idle(message.text)
        if isinstance(ready, Refusal):
            return ready
        method, proof = ready.method, ready.evidence
        now = time.time()
        terminal_id = self._screen.identity.terminal_id

        digest = evidence.request_digest(message.text)
        key = message.key

        def reserve(conn: apsw.Connection) -> TaskReceipt | Refusal:
            turn = turns.get(conn, message.turn_id)
            if turn is None or turn.terminal_id != terminal_id:
                return Refusal(Reason.NOT_FOUND, f"no turn {message.turn_id} on this terminal")
            if (
                key is not None
                and responds.get(conn, key.controller_id, key.client_request_id) is not None
            ):
                # A repeat that passed the methods' look while the first was under way.
                return Refusal(
                    Reason.CONFLICT,
                    f"client_request_id {key.client_request_id!r} was given to another respond "
                    "since this one was checked, so nothing was typed for this one. Call "
                    "respond again with it (and the same text) for the round it started",
                )
            if turn.closed_at is not None or not turn.state.settled:
                return Refusal(
                    Reason.CONFLICT,
                    f"turn {turn.turn_id} is {turn.state.value}"
                    + (" and closed" if turn.closed_at else "")
                    + "; respond to a Turn whose agent is idle again",
                )
            holder = turns.unresolved_on(conn, terminal_id)
            if holder is not None:
                return Refusal(Reason.CONFLICT, turns.held(holder, turn.controller_id))
            reopened = turns.reopen(
                conn,
                turn,
                request_sha256=digest,
                request_chars=len(message.text),
                evidence_status=proof.status,
                evidence=proof.snapshot,
                evidence_limit=proof.limit,
                now=now,
            )
            if key is not None:
                responds.record(
                    conn, key.controller_id, key.client_request_id,
                    Responded(turn.turn_id, reopened.round, digest), now,
                )  # fmt: skip
            return ready.reserve(conn, reopened, Kind.RESPOND, terminal_id, now)

        return await self._reserve_then_type(reserve, message.text, method)

    async def _reserve_then_type(
        self,
        reserve: Callable[[apsw.Connection], TaskReceipt | Refusal],
        text: str,
        method: TypingMethod,
    ) -> TaskReceipt | Refusal:
        reserved = await self._reserve(reserve)
        if isinstance(reserved, Refusal):
            return reserved
        await faults.reached(Point.RESERVED)
        return await type_and_submit(self._screen, self._link, self._store, reserved, text, method)

    def _unprofiled(self) -> Refusal:
        """The refusal of a step this pane cannot take: no exact profile reads its screen."""
        return Refusal(
            Reason.UNSUPPORTED_VERSION,
            f"no exact profile ({self._screen.identity.profile_reason}); nothing was sent",
        )

    # -- an answer

    async def _dispatch_answer(self, message: DispatchAnswer) -> AnswerReceipt | Refusal:
        """One answer step: prove the appearance, plan, reserve, send with checks, prove it took."""
        profile = self._screen.profile
        if profile is None:
            return self._unprofiled()
        # Keys that arrive right after a widget's first paint can be dropped: wait that out
        # first, so the look below, which the first keys follow, is not an older one.
        await trio.sleep_until(self._screen.painted_since + profile.typing.settle_seconds)
        snapshot = await self._screen.observe(force=True)
        if snapshot is None or snapshot.seen != message.seen:
            return Refusal(
                Reason.PROMPT_CHANGED,
                "the prompt on screen is no longer the one this answer was for; nothing was "
                "sent. Call status for the current interaction",
            )
        observation, prompt = snapshot.observation, snapshot.observation.prompt
        assert prompt is not None  # an appearance is only given to a prompt
        person_s = refused_for(observation, snapshot.editor_taken)
        if person_s is not None:  # the projection's rule: a profile's reason, a secret, a draft
            return Refusal(
                Reason.MANUAL_REQUIRED,
                f"AKK does not answer this prompt ({snapshot.quoted(person_s)}); answer it in the "
                "terminal. Nothing was sent",
            )
        refused = delivery_refusal(prompt, observation.state, message.answer)
        if refused is not None:
            return refused
        assert snapshot.grid is not None  # an Observation was read off it
        planned = answer_plan(profile, prompt, message.answer, snapshot.grid)
        if isinstance(planned, Refusal):
            return planned
        plan, expanded = planned
        if message.answer.text is not None:
            self._screen.typing(message.answer.text)
        # An async answer at an idle agent starts its next turn: the Turn's next round,
        # with the message it will send and the evidence position taken before any key.
        round_start: tuple[str, _EvidenceStart] | None = None
        if message.answer.next_turn and message.answer.intent is not Intent.OPEN_QUEUED_QUESTION:
            text = next_turn_message(profile, prompt, message.answer)
            if text is None:
                return Refusal(
                    Reason.MANUAL_REQUIRED,
                    f"{profile.id} cannot say what that answer would send; answer it in the "
                    "terminal. Nothing was sent",
                )
            round_start = (text, await _evidence_start(self._screen.identity))
        detour = await keys.detour(self._link.client(), self._screen.identity.pane_id)
        if detour is not None:
            return detour_refusal(detour)
        now = time.time()
        terminal_id = self._screen.identity.terminal_id
        kind = Kind.APPROVAL if message.answer.kind == "approval" else Kind.ANSWER
        digest = hashlib.sha256(repr(plan).encode()).hexdigest()

        def reserve(conn: apsw.Connection) -> Dispatch | Refusal:
            refused = fence_check(conn, message, now)
            if refused is not None:
                return refused
            row = interactions.get(conn, message.interaction_id)
            found = interactions.offer_of(conn, message.interaction_id, message.controller_id)
            assert row is not None and found is not None
            interactions.consume(conn, row, found, now)
            if round_start is not None:
                text, proof = round_start
                turn = turns.get(conn, message.turn_id)
                assert turn is not None
                turns.reopen(
                    conn, turn, request_sha256=evidence.request_digest(text),
                    request_chars=len(text), evidence_status=proof.status,
                    evidence=proof.snapshot, evidence_limit=proof.limit, now=now,
                )  # fmt: skip
            try:
                return dispatches.reserve(
                    conn, controller_id=message.controller_id, turn_id=message.turn_id,
                    terminal_id=terminal_id, kind=kind, typing=None, screen_seq=snapshot.seq,
                    now=now, interaction_id=row.interaction_id, offer_id=found.offer_id,
                    fingerprint=message.seen.fingerprint, plan_sha256=digest,
                )  # fmt: skip
            except apsw.ConstraintError:
                raise Busy() from None

        try:
            reserved = await self._reserve(reserve)
        except Busy:
            return Refusal(
                Reason.CONFLICT,
                "another input-bearing step is still open on this terminal; nothing was sent. "
                "Wait for its receipt (status) and call status again",
            )
        if isinstance(reserved, Refusal):
            return reserved
        await faults.reached(Point.ANSWER_RESERVED)
        self._screen.busy = True
        try:
            receipt = await send_answer(
                self._screen,
                self._link,
                self._store,
                reserved,
                expanded,
                message,
                snapshot.seq,
                prompt,
            )
            if round_start is None:
                return receipt
            return attrs.evolve(receipt, next_round_at=trio.current_time())
        finally:
            self._screen.busy = False
            # Publish the screen the step left, no longer busy, for the Turn to announce.
            await self._screen.observe(force=True)

    # -- cancel

    async def _interrupt(self, message: Interrupt) -> InterruptReceipt | Refusal:
        profile = self._screen.profile
        if profile is None:
            return self._unprofiled()
        snapshot = await self._screen.observe(force=True)
        if snapshot is None or snapshot.observation.state is not State.WORKING:
            state = "unknown" if snapshot is None else snapshot.observation.state.value
            return Refusal(
                Reason.NOT_IDLE,
                f"the pane is {state}, not working on this Turn; nothing was sent",
            )
        picker = snapshot.observation.prompt
        if picker is not None and picker.step is not StepKind.QUEUED:
            return Refusal(
                Reason.NOT_IDLE,
                "an async question's picker is open over the composer, so the interrupt key "
                "would go to it; answer it first (or close it at the terminal). Nothing was sent",
            )
        pane = self._screen.identity.pane_id
        detour = await keys.detour(self._link.client(), pane)
        if detour is not None:
            return detour_refusal(detour)
        now = time.time()
        turn = message.turn

        def reserve(conn: apsw.Connection) -> Dispatch:
            try:
                return dispatches.reserve(
                    conn,
                    controller_id=turn.controller_id,
                    turn_id=turn.turn_id,
                    terminal_id=self._screen.identity.terminal_id,
                    kind=Kind.CANCEL,
                    typing=None,
                    screen_seq=snapshot.seq,
                    now=now,
                )
            except apsw.ConstraintError:
                raise Busy() from None

        try:
            dispatch = await self._reserve(reserve)
        except Busy:
            return Refusal(
                Reason.CONFLICT,
                "another input-bearing step is still open on this terminal (an earlier cancel "
                "waits for the interruption to show); nothing was sent. Call status, and cancel "
                "again once that step has ended",
            )
        if isinstance(dispatch, Refusal):
            return dispatch
        await faults.reached(Point.INTERRUPT_RESERVED)
        detour = await keys.detour(self._link.client(), pane)
        if detour is not None:
            await advance(self._store, dispatch, Stage.ABORTED, "pane_detour")
            return detour_refusal(detour)
        try:
            await keys.press(self._link.client(), pane, INTERRUPT_KEY)
        except (TmuxCommandError, ControlClientClosed) as exc:
            why = str(exc)[:200]
            dispatch = await advance(self._store, dispatch, Stage.UNCERTAIN, why)
            return InterruptReceipt(dispatch, snapshot.seq)
        await faults.reached(Point.INTERRUPT_SENT)
        dispatch = await advance(self._store, dispatch, Stage.ENTER_SENT)
        await faults.reached(Point.INTERRUPT_RECORDED)
        return InterruptReceipt(dispatch, snapshot.seq)
