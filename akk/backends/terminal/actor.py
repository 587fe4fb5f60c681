"""TerminalActor: one pane. Capture → pyte grid → profile → Observation; the only sender of keys.

It publishes each new Observation on the TerminalBoard (nobody asks it for
news) with a sequence number, so "the first Observation after this key step"
is provable. Input-bearing steps arrive as typed messages and run one at a
time, each under the rule of ARCHITECTURE.md "One input-bearing step":
recapture and prove the screen, reserve durably, send one bounded step,
record its stage, reply with a receipt or a typed refusal (zero keys).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence

import apsw
import attrs
import trio

from akk import evidence, faults
from akk.actors.store import transact
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot
from akk.backends.contract import AnswerReceipt, Refusal
from akk.backends.terminal.checks import (
    MOVED_ON,
    Busy,
    answer_plan,
    boxes,
    delivery_refusal,
    fence_check,
    next_turn_message,
    step_of,
)
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
from akk.discovery.identity import TerminalIdentity
from akk.evidence import claude_editor
from akk.faults import Point
from akk.profiles.composer import TypingMethod
from akk.profiles.keyplan import (
    Expanded,
    Intent,
    Keystroke,
    LiteralText,
    TextCheck,
    TmuxKey,
    ToggleCheck,
    Wait,
)
from akk.profiles.observation import Observation, PromptView, State, StepKind
from akk.profiles.permission import asks_permission, awaits_call, bind_pending
from akk.profiles.registry import Profile
from akk.protocol import wakeups
from akk.protocol.errors import Reason
from akk.runtime.actor import Actor, ActorRef, Rank
from akk.screen.fingerprint import Appearance, fingerprint
from akk.screen.grid import Grid
from akk.screen.render import CaptureMismatch, render
from akk.store import dispatches, interactions, turns
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.turns import Turn, TurnState
from akk.tmux import keys
from akk.tmux.control import ClientLink, ControlClientClosed, TmuxCommandError
from akk.tmux.panes import capture, pane_size

log = logging.getLogger("akk.terminal")

INTERRUPT_KEY = "Escape"
"""Both families' own interrupt key while working ("esc to interrupt" on every pinned version)."""

PROOF_TIMEOUT = 3.0
"""How long the composer may take to show the typed text before the proof fails."""

STEP_TIMEOUT = 5.0
"""How long a prompt may take to show the effect of an answer's keys (a toggled box, the
typed text, the next step or the prompt gone) before the step is ``uncertain``."""

RENDER_CHARS_PER_SECOND = 300.0
"""The slowest rate a client was seen drawing typed text (Claude's editor, 3,000 characters
on a loaded machine): a proof of typed text waits this much longer per character."""


PENDING_WAIT = 2.0
"""How long a permission prompt may wait for its tool call to show in the agent's file
before it is published ``manual_required`` (Claude writes the call up to ~220 ms after
drawing its prompt; tools/lab/NOTES.md)."""

PENDING_POLL = 0.02
"""Seconds between reads of the agent's file while a permission waits for its call."""


def text_timeout(base: float, text: str) -> float:
    """How long the screen may take to show ``text`` typed: ``base``, longer for long text."""
    return base + len(text) / RENDER_CHARS_PER_SECOND


# ------------------------------------------------------------------ messages


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


"""Everything a TerminalActor takes; each is asked, and names its reply."""


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
    ) -> None:
        self._notify = notify  # wakes a controller's Destination after an event is written
        self._identity = identity
        self._profile = profile
        self._link = link
        self._board = board
        self._store = store
        self._last: tuple[str, int, int] | None = None
        self._size: tuple[int, int] | None = None
        self._seq = 0
        self._idle_since: float | None = None  # trio clock of the first idle screen in a row
        self._grid: Grid | None = None  # the last rendered screen
        self._seen: Appearance | None = None  # the prompt's appearance on the last screen
        self._seen_since = 0.0  # trio clock when that appearance began
        self._resumed: Appearance | None = None  # the store's last appearance, until first look
        self._last_number = 0
        self._busy = False  # an input-bearing step is between its first key and its receipt
        self._manual: wakeups.Manual | None = None  # the manual screen on show (wakeups)

    async def started(self) -> None:
        self._board.announce(self._identity, self._profile, trio.current_time())
        terminal_id = self._identity.terminal_id
        latest = await transact(self._store, lambda conn: interactions.latest_on(conn, terminal_id))
        if latest is not None:
            self._resumed = latest.seen
            self._last_number = latest.appearance
        # A step open from before this actor (re)started was cut off by a crash.
        await self._reconcile()
        # Observe now, not at the pane's next change: a restarted actor on a quiet pane
        # would otherwise show unknown (and refuse every send) until someone typed there.
        try:
            self._size = await pane_size(self._link.client(), self._identity.pane_id)
        except (TmuxCommandError, ControlClientClosed):
            return  # gone or reattaching: the watcher's next listing brings a Refresh
        await self._observe()

    async def stopped(self) -> None:
        self._board.retire(self._identity.terminal_id)

    async def receive(self, message: TerminalMessage) -> object:
        match message:
            case Refresh(cols, rows):
                self._size = (cols, rows)
                await self._observe()
                return None
            case Rebind(identity, profile):
                self._identity, self._profile = identity, profile
                self._board.announce(self._identity, self._profile, trio.current_time())
                await self._observe(force=True)
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
                return await self._reconcile()

    async def _reconcile(self) -> int:
        terminal_id, now = self._identity.terminal_id, time.time()

        def settle(conn: apsw.Connection) -> list[str]:
            cause = "interrupted_by_restart"
            return [
                step.controller_id
                for step in dispatches.open_on(conn, terminal_id)
                if turns.orphaned(conn, step, cause, now)
            ]

        settled: list[str] = await transact(self._store, settle)
        for controller_id in settled:
            self._notify(controller_id)
        return len(settled)

    # -- observing

    async def _observe(self, *, force: bool = False) -> TerminalSnapshot | None:
        """Capture and classify now; publish and return the snapshot (None if no full screen)."""
        if self._size is None:
            return None
        cols, rows = self._size
        try:
            screen = await capture(self._link.client(), self._identity.pane_id)
        except (TmuxCommandError, ControlClientClosed):
            # The pane went away between listing and capture; the watcher retires us.
            return None
        if screen.count("\n") != rows:
            # tmux does not escape command output, so a pane row that mimics the
            # control protocol could cut a capture short: never classify a partial screen.
            return None
        current = self._board.get(self._identity.terminal_id)
        if not force and self._last == (screen, cols, rows) and current is not None:
            return current
        self._last = (screen, cols, rows)
        try:
            grid = render(screen, cols, rows)
        except CaptureMismatch:
            # Resized between listing and capture: the next listing brings the new size.
            return None
        observation, pending = await self._pending_call(self._classify(grid))
        if observation.state is State.IDLE:
            if self._idle_since is None:
                self._idle_since = trio.current_time()
        else:
            self._idle_since = None
        seen = None
        if observation.prompt is not None and self._profile is not None:
            seen = self._appearance(
                fingerprint(
                    grid,
                    observation.prompt.region,
                    profile_id=self._profile.id,
                    terminal_identity=self._identity.fingerprint_identity,
                    pending=pending.identity if pending is not None else "",
                )
            )
        if seen is None:
            self._resumed = None
        self._seen = seen
        self._grid = grid
        lines = grid.lines()
        self._manual = wakeups.follow(
            self._manual, observation, profiled=self._profile is not None,
            agent=self._identity.agent, lines=lines, now=trio.current_time(),
            mint=self._manual_appearance,
        )  # fmt: skip
        self._seq += 1
        snapshot = TerminalSnapshot(
            identity=self._identity,
            observation=observation,
            seen=seen,
            busy=self._busy,
            lines=lines,
            observed_at=trio.current_time(),
            seq=self._seq,
            manual=self._manual,
            profile=self._profile,
        )
        self._board.publish(snapshot)
        return snapshot

    def _manual_appearance(self, screen: bytes) -> Appearance:
        """A new appearance of a manual screen first drawn as ``screen`` (akk.protocol.wakeups)."""
        identity = self._identity.fingerprint_identity.encode("utf-8", "surrogatepass")
        fp = hashlib.sha256(b"akk-manual\x1f" + identity + b"\x1f" + screen).digest()
        return Appearance(fp, self._next_number())

    def _appearance(self, fp: bytes) -> Appearance:
        """The appearance this prompt belongs to: the current one while it stays on screen.

        A prompt that was not on the previous screen is a new appearance, unless
        it is the first screen since this actor started and the store's last
        appearance on this terminal has the same fingerprint: what happened
        while no actor watched cannot be known, so it is taken as the same
        appearance (its fence, if answered, holds).
        """
        resumed, self._resumed = self._resumed, None
        if self._seen is not None and self._seen.fingerprint == fp:
            return self._seen
        if resumed is not None and resumed.fingerprint == fp:
            self._seen_since = trio.current_time()
            return resumed
        self._seen_since = trio.current_time()
        return Appearance(fp, self._next_number())

    def _next_number(self) -> int:
        """A new appearance number: the clock's, and always above the last one."""
        self._last_number = max(time.time_ns(), self._last_number + 1)
        return self._last_number

    async def _pending_call(
        self, observation: Observation
    ) -> tuple[Observation, evidence.PendingCall | None]:
        """An actionable permission with the pending call it asks about, else not actionable.

        See `akk.profiles.permission`. While the agent's file shows no pending
        call of the profile's tool yet, it is read again for up to PENDING_WAIT
        (not within a step's keys: that screen is passing).
        """
        profile = self._profile
        if profile is None or not asks_permission(observation):
            return observation, None
        deadline = trio.current_time() + PENDING_WAIT
        while True:
            calls = await self._open_calls()
            waiting = awaits_call(calls, profile.permission_tool)
            if not waiting or self._busy or trio.current_time() >= deadline:
                return bind_pending(observation, profile.permission_tool, calls)
            await trio.sleep(PENDING_POLL)

    async def _open_calls(self) -> list[evidence.PendingCall] | None:
        """The pending calls in the agent's file; None if it cannot be read.

        The file is the one the terminal's Turn bound before its send (read from
        its binding offset); without a bound Turn (a Watch before its task is
        found, evidence unknown) the one file the agent process owns now.
        """
        terminal_id, agent = self._identity.terminal_id, self._identity.agent
        turn = await transact(self._store, lambda conn: turns.unresolved_on(conn, terminal_id))
        try:
            if turn is not None and turn.evidence_status == "bound" and turn.evidence:
                binding = evidence.Binding.from_json(turn.evidence)
                return await trio.to_thread.run_sync(
                    evidence.open_calls, binding.agent, binding.file, binding.offset
                )
            file = await trio.to_thread.run_sync(
                evidence.owned_file, agent, self._identity.agent_pid
            )
            return await trio.to_thread.run_sync(evidence.open_calls, agent, file)
        except (evidence.EvidenceError, ValueError, OSError) as exc:
            log.info("pending call on %s unknown: %s", terminal_id, exc)
            return None

    def _classify(self, grid: Grid) -> Observation:
        if self._profile is None:
            # Without the exact version's profile nothing on screen can be trusted.
            return Observation(
                State.UNKNOWN, None, reason=self._identity.profile_reason or "no_profile"
            )
        return self._profile.classify(grid)

    # -- a task

    async def _prove_idle(self, text: str) -> _Ready | Refusal:
        """The first steps of any composer message: an exact profile, a settled idle pane
        with an empty composer, and the evidence position recorded before any key."""
        profile = self._profile
        if profile is None:
            return Refusal(
                Reason.UNSUPPORTED_VERSION,
                f"{self._identity.agent} {self._identity.version or '(unknown version)'} has no "
                f"exact profile ({self._identity.profile_reason}); AKK sent it nothing. Type "
                "the task at the pane, or take the step the reason names",
            )
        snapshot = await self._observe(force=True)
        if snapshot is not None and self._idle_since is not None:
            # Keys that arrive right after the composer painted can be dropped.
            settled_at = self._idle_since + profile.typing.settle_seconds
            if trio.current_time() < settled_at:
                await trio.sleep_until(settled_at)
                snapshot = await self._observe(force=True)
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
        if observation.composer_mode is None and self._identity.agent == "claude":
            identity = self._identity
            mode = await trio.to_thread.run_sync(
                claude_editor.editor_mode, identity.agent_pid, identity.cwd
            )
            if mode == claude_editor.VIM:
                return Refusal(
                    Reason.NOT_IDLE,
                    "Claude's editorMode is vim and its composer shows no -- INSERT --: it is "
                    "in NORMAL mode, where typed text would be vim commands; nothing was sent. "
                    "A person presses i at the pane (INSERT), then send again",
                )
        proof = await self._evidence_start()
        return _Ready(snapshot.seq, profile.typing.method_for(text), proof)

    async def _evidence_start(self) -> _EvidenceStart:
        """Where the agent's own file stands now, before any key of a new round."""
        try:
            before = await trio.to_thread.run_sync(
                evidence.snapshot, self._identity.agent, self._identity.agent_pid
            )
            proof = _EvidenceStart("pending", before.to_json(), None)
        except evidence.EvidenceUnavailable as exc:
            proof = _EvidenceStart("unknown", None, str(exc)[:300])
        await faults.reached(Point.EVIDENCE_SNAPSHOT)
        return proof

    async def _dispatch_task(self, task: DispatchTask) -> TaskReceipt | Refusal:
        ready = await self._prove_idle(task.text)
        if isinstance(ready, Refusal):
            return ready
        method, proof = ready.method, ready.evidence
        now = time.time()
        digest = evidence.request_digest(task.text)
        terminal_id = self._identity.terminal_id

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
        terminal_id = self._identity.terminal_id

        def reserve(conn: apsw.Connection) -> TaskReceipt | Refusal:
            turn = turns.get(conn, message.turn_id)
            if turn is None or turn.terminal_id != terminal_id:
                return Refusal(Reason.NOT_FOUND, f"no turn {message.turn_id} on this terminal")
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
                request_sha256=evidence.request_digest(message.text),
                request_chars=len(message.text),
                evidence_status=proof.status,
                evidence=proof.snapshot,
                evidence_limit=proof.limit,
                now=now,
            )
            return ready.reserve(conn, reopened, Kind.RESPOND, terminal_id, now)

        return await self._reserve_then_type(reserve, message.text, method)

    async def _reserve_then_type(
        self,
        reserve: Callable[[apsw.Connection], TaskReceipt | Refusal],
        text: str,
        method: TypingMethod,
    ) -> TaskReceipt | Refusal:
        reserved = await transact(self._store, reserve)
        if isinstance(reserved, Refusal):
            return reserved
        await faults.reached(Point.RESERVED)
        return await self._type_and_submit(reserved, text, method)

    async def _type_and_submit(
        self, receipt: TaskReceipt, text: str, method: TypingMethod
    ) -> TaskReceipt:
        profile = self._profile
        assert profile is not None
        turn, dispatch = receipt.turn, receipt.dispatch
        pane = self._identity.pane_id
        try:
            client = self._link.client()
            if method is TypingMethod.LITERAL:
                await keys.type_literal(client, pane, text)
            else:
                await keys.paste(client, pane, text)
        except (TmuxCommandError, ControlClientClosed) as exc:
            # Some of the text may be in the composer: never typed again, never submitted.
            return await self._settle_dispatch(
                receipt, Stage.UNCERTAIN, f"typing failed: {exc}"[:200], TurnState.UNCERTAIN
            )
        typed_at = trio.current_time()
        await faults.reached(Point.TEXT_TYPED)
        dispatch = await self._advance(dispatch, Stage.TEXT_INJECTED)
        await faults.reached(Point.TEXT_INJECTED)
        proven = await self._prove_composer(text, method, typed_at)
        if not proven:
            # Someone typed too, or a key was dropped: no Enter, nothing deleted.
            now = time.time()

            def abort(conn: apsw.Connection) -> TaskReceipt:
                aborted = dispatches.advance(conn, dispatch, Stage.ABORTED, "composer_mismatch")
                fresh = turns.get(conn, turn.turn_id)
                assert fresh is not None
                failed = turns.settle(
                    conn,
                    fresh,
                    TurnState.FAILED,
                    now=now,
                    reason="composer_mismatch",
                    summary="the composer did not show exactly the task after typing; AKK "
                    "pressed no Enter and left the text in the pane for the person there",
                )
                return TaskReceipt(failed, aborted, receipt.seq, None)

            return await transact(self._store, abort)
        await faults.reached(Point.BEFORE_ENTER)
        try:
            await keys.press(self._link.client(), pane, "Enter")
        except (TmuxCommandError, ControlClientClosed) as exc:
            return await self._settle_dispatch(
                TaskReceipt(turn, dispatch, receipt.seq, None),
                Stage.UNCERTAIN,
                f"Enter may not have been sent: {exc}"[:200],
                TurnState.UNCERTAIN,
            )
        enter_at = trio.current_time()
        await faults.reached(Point.ENTER_SENT)
        dispatch = await self._advance(dispatch, Stage.ENTER_SENT)
        await faults.reached(Point.ENTER_RECORDED)
        return TaskReceipt(turn, dispatch, receipt.seq, enter_at)

    async def _prove_composer(self, text: str, method: TypingMethod, typed_at: float) -> bool:
        """Whether the composer shows exactly ``text``, after the client's quiet gap."""
        profile = self._profile
        assert profile is not None
        await trio.sleep_until(typed_at + profile.typing.enter_guard_seconds)
        with trio.move_on_after(text_timeout(PROOF_TIMEOUT, text)):
            while True:
                snapshot = await self._observe(force=True)
                if snapshot is not None:
                    draft = snapshot.observation.draft
                    if draft is not None and profile.draft_matches(draft, text, method):
                        return True
                await trio.sleep(0.05)
        return False

    async def _settle_dispatch(
        self, receipt: TaskReceipt, stage: Stage, reason: str, state: TurnState
    ) -> TaskReceipt:
        def record(conn: apsw.Connection) -> TaskReceipt:
            dispatch = dispatches.advance(conn, receipt.dispatch, stage, reason)
            fresh = turns.get(conn, receipt.turn.turn_id)
            assert fresh is not None
            turn = turns.update(conn, fresh, state=state, reason=reason)
            return TaskReceipt(turn, dispatch, receipt.seq, None)

        return await transact(self._store, record)

    # -- an answer

    async def _dispatch_answer(self, message: DispatchAnswer) -> AnswerReceipt | Refusal:
        """One answer step: prove the appearance, plan, reserve, send with checks, prove it took."""
        profile = self._profile
        if profile is None:
            return Refusal(
                Reason.UNSUPPORTED_VERSION,
                f"no exact profile ({self._identity.profile_reason}); nothing was sent",
            )
        snapshot = await self._observe(force=True)
        if snapshot is None or snapshot.seen != message.seen:
            return Refusal(
                Reason.PROMPT_CHANGED,
                "the prompt on screen is no longer the one this answer was for; nothing was "
                "sent. Call status for the current interaction",
            )
        observation, prompt = snapshot.observation, snapshot.observation.prompt
        assert prompt is not None  # an appearance is only given to a prompt
        if observation.reason is not None:
            return Refusal(
                Reason.MANUAL_REQUIRED,
                f"AKK does not answer this prompt ({observation.reason}); answer it in the "
                "terminal. Nothing was sent",
            )
        refused = delivery_refusal(prompt, observation.state, message.answer)
        if refused is not None:
            return refused
        planned = answer_plan(profile, prompt, message.answer)
        if isinstance(planned, Refusal):
            return planned
        plan, expanded = planned
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
            round_start = (text, await self._evidence_start())
        # Keys that arrive right after a widget's first paint can be dropped.
        await trio.sleep_until(self._seen_since + profile.typing.settle_seconds)
        now = time.time()
        terminal_id = self._identity.terminal_id
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
            reserved = await transact(self._store, reserve)
        except Busy:
            return Refusal(
                Reason.CONFLICT,
                "another input-bearing step is still open on this terminal; nothing was sent. "
                "Wait for its receipt (status) and call status again",
            )
        if isinstance(reserved, Refusal):
            return reserved
        await faults.reached(Point.ANSWER_RESERVED)
        self._busy = True
        try:
            receipt = await self._send_answer(reserved, expanded, message, snapshot.seq, prompt)
            if round_start is None:
                return receipt
            return attrs.evolve(receipt, next_round_at=trio.current_time())
        finally:
            self._busy = False
            # Publish the screen the step left, no longer busy, for the Turn to announce.
            await self._observe(force=True)

    async def _send_answer(
        self,
        dispatch: Dispatch,
        expanded: Expanded,
        message: DispatchAnswer,
        seq: int,
        answered: PromptView,
    ) -> AnswerReceipt:
        """The reserved step's keys, checkpoint by checkpoint; then its postcondition.

        ``answered`` is the step as proven last (the offered screen, then each
        checkpoint's); the postcondition needs a screen where that step is gone.
        """
        pane, sent = self._identity.pane_id, 0
        ticked = boxes(self._board.get(self._identity.terminal_id))
        try:
            for check in expanded.checks:
                strokes = expanded.keys[sent : check.after]
                if isinstance(check, ToggleCheck):
                    await faults.reached(Point.ANSWER_TOGGLE)
                    if faults.drops(Point.ANSWER_TOGGLE):
                        strokes = strokes[:-1]  # the toggle key lost on its way
                await self._keys(pane, strokes)
                sent = check.after
                if isinstance(check, TextCheck):
                    dispatch = await self._advance(dispatch, Stage.TEXT_INJECTED)
                    await faults.reached(Point.ANSWER_TEXT_INJECTED)
                    proof = await self._prove_editor(message.answer.text or "")
                else:
                    ticked[check.row] = check.checked
                    proof = await self._prove_boxes(ticked, check.row)
                if proof is None:
                    # Typed text never proven is left unsubmitted: aborted, not uncertain.
                    stage = Stage.ABORTED if isinstance(check, TextCheck) else Stage.UNCERTAIN
                    return await self._answer_uncertain(
                        dispatch, "the screen did not show the step's effect after its keys; "
                        "AKK sent no further key", stage,
                    )  # fmt: skip
                seq, answered = proof
            await self._keys(pane, expanded.keys[sent:])
        except (TmuxCommandError, ControlClientClosed) as exc:
            return await self._answer_uncertain(dispatch, f"sending keys failed: {exc}"[:200])
        await faults.reached(Point.ANSWER_SENT)
        dispatch = await self._advance(dispatch, Stage.ENTER_SENT)
        await faults.reached(Point.ANSWER_RECORDED)
        if not await self._prove_moved_on(answered, seq):
            return await self._answer_uncertain(
                dispatch, "the prompt still showed, unchanged, after the answer's keys"
            )
        dispatch = await self._advance(dispatch, Stage.ACCEPTED, "postcondition_proven")
        return AnswerReceipt(dispatch, proven=True)

    async def _advance(
        self, dispatch: Dispatch, stage: Stage, reason: str | None = None
    ) -> Dispatch:
        """Record ``dispatch``'s next stage (its own transaction)."""
        return await transact(
            self._store, lambda conn: dispatches.advance(conn, dispatch, stage, reason)
        )

    async def _keys(self, pane: str, strokes: Sequence[Keystroke]) -> None:
        client = self._link.client()
        for stroke in strokes:
            match stroke:
                case TmuxKey(name=name):
                    await keys.press(client, pane, name)
                case LiteralText(text=text):
                    await keys.type_literal(client, pane, text)
                case Wait(seconds=seconds):
                    await trio.sleep(seconds)

    async def _prove_editor(self, text: str) -> tuple[int, PromptView] | None:
        """The screen once the prompt's editor shows exactly ``text``; None if it never does."""
        profile = self._profile
        assert profile is not None
        with trio.move_on_after(text_timeout(STEP_TIMEOUT, text)):
            while True:
                snapshot = await self._observe(force=True)
                prompt = None if snapshot is None else snapshot.observation.prompt
                if (
                    snapshot is not None
                    and snapshot.seen is not None
                    and prompt is not None
                    and self._grid is not None
                    and profile.editor_matches(self._grid, prompt, text)
                ):
                    return snapshot.seq, prompt
                await trio.sleep(0.03)
        return None

    async def _prove_boxes(
        self, ticked: dict[int, bool], row: int
    ) -> tuple[int, PromptView] | None:
        """The screen once every box shows ``ticked`` and the cursor is on ``row``."""
        with trio.move_on_after(STEP_TIMEOUT):
            while True:
                snapshot = await self._observe(force=True)
                if snapshot is not None and snapshot.seen is not None:
                    prompt = snapshot.observation.prompt
                    options = prompt.questions[0].options if prompt and prompt.questions else ()
                    if (
                        prompt is not None
                        and prompt.step is StepKind.MULTI_SELECT
                        and len(options) > row
                        and options[row].current
                        and boxes(snapshot) == ticked
                    ):
                        return snapshot.seq, prompt
                await trio.sleep(0.03)
        return None

    async def _prove_moved_on(self, answered: PromptView, seq: int) -> bool:
        """Whether a screen after the keys shows the answered step gone: another step, work
        or idle (the same step with its cursor moved or a box ticked is not gone)."""
        with trio.move_on_after(STEP_TIMEOUT):
            while True:
                snapshot = await self._observe(force=True)
                if snapshot is not None and snapshot.seq > seq:
                    observation = snapshot.observation
                    shown = observation.prompt
                    if shown is not None and step_of(shown) != step_of(answered):
                        return True
                    if shown is None and observation.state in MOVED_ON:
                        return True
                # Look often: the next screen may pass quickly (an agent asking again at once).
                await trio.sleep(0.01)
        return False

    async def _answer_uncertain(
        self, dispatch: Dispatch, why: str, stage: Stage = Stage.UNCERTAIN
    ) -> AnswerReceipt:
        """Record the step as uncertain (or aborted before any submitting key): never retried."""
        now = time.time()

        def record(conn: apsw.Connection) -> Dispatch:
            done = dispatches.advance(conn, dispatch, stage, why)
            turns.answer_uncertain(conn, done, why, now)
            return done

        return AnswerReceipt(await transact(self._store, record), proven=False, why=why)

    # -- cancel

    async def _interrupt(self, message: Interrupt) -> InterruptReceipt | Refusal:
        profile = self._profile
        if profile is None:
            return Refusal(
                Reason.UNSUPPORTED_VERSION,
                f"no exact profile ({self._identity.profile_reason}); nothing was sent",
            )
        snapshot = await self._observe(force=True)
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
        now = time.time()
        turn = message.turn

        def reserve(conn: apsw.Connection) -> Dispatch:
            return dispatches.reserve(
                conn,
                controller_id=turn.controller_id,
                turn_id=turn.turn_id,
                terminal_id=self._identity.terminal_id,
                kind=Kind.CANCEL,
                typing=None,
                screen_seq=snapshot.seq,
                now=now,
            )

        dispatch = await transact(self._store, reserve)
        await faults.reached(Point.INTERRUPT_RESERVED)
        try:
            await keys.press(self._link.client(), self._identity.pane_id, INTERRUPT_KEY)
        except (TmuxCommandError, ControlClientClosed) as exc:
            why = str(exc)[:200]
            dispatch = await self._advance(dispatch, Stage.UNCERTAIN, why)
            return InterruptReceipt(dispatch, snapshot.seq)
        await faults.reached(Point.INTERRUPT_SENT)
        dispatch = await self._advance(dispatch, Stage.ENTER_SENT)
        return InterruptReceipt(dispatch, snapshot.seq)
