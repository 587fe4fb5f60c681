"""The Observer: how a TerminalActor reads its pane and publishes what it saw.

Capture → pyte grid → profile → Observation, each new one published on the
TerminalBoard with the next sequence number, so "the first Observation after
this key step" is provable. It also keeps what an Observation is told by the
screens before it: since when a composer has been drawn, which appearance a
prompt on screen is (and since when), the manual screen on show
(`akk.protocol.wakeups`), and for a permission prompt or a question the
pending call in the agent's own file (`akk.profiles.permission`,
`akk.profiles.question_call`).

A prompt can be drawn before its call is written (Claude writes it up to
~220 ms later, and seconds later on a loaded machine). While the file is read
and shows no call of the profile's tool yet, for up to PENDING_GRACE, the
prompt's snapshot is published *held* (``busy``: nobody announces or answers
it) and `recheck` asks the watcher to read the pane again in PENDING_POLL even
if it does not change (a step's look, which is no Refresh, through its actor's
``refresh_soon``); only then is it ``pending_call_unknown``. Any other
prompt that cannot be bound to its call (the file unreadable, several calls,
the screen's command or question not shown whole or not the call's) is held
the same way until its screen has stood still (`wakeups.stood_still`): a screen caught
mid-draw, or a file read mid-write just as its prompt was drawn, is read again,
not published. So a slow draw or write never wakes a controller with
``manual_required`` for a prompt it could answer a moment later, and the actor
is never blocked waiting for it. A screen no profile reads is read again too,
every SETTLE_POLL, until it settles (`wakeups.Manual.settled`): each such look
first reads whether the pane's processes rest (`akk.discovery.rest`).

It sends no key; its TerminalActor owns it and asks it for a fresh look before
and during every step. `shown_for` is how a step waits for a screen it must see
(a typed text, a ticked box, an open editor, a prompt gone) before its next key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable

import attrs
import trio

from akk import evidence
from akk.actors.store import transact
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot, refused_for
from akk.discovery.identity import TerminalIdentity
from akk.discovery.rest import at_rest
from akk.profiles.observation import Observation, PromptView, State, StepKind
from akk.profiles.permission import asked_tool, asks_permission, awaits_call, bind_pending
from akk.profiles.question_call import asks_question, bind_question
from akk.profiles.registry import Profile
from akk.protocol import wakeups
from akk.protocol.redaction import SeenSecrets, key_heads, redact_screen
from akk.runtime.actor import ActorRef
from akk.screen.fingerprint import Appearance, asked_fingerprint, fingerprint
from akk.screen.grid import Grid
from akk.screen.render import CaptureMismatch, render, unstyled
from akk.store import interactions, turns
from akk.tmux.control import ClientLink, ControlClientClosed, TmuxCommandError
from akk.tmux.panes import capture, pane_size

log = logging.getLogger("akk.terminal")

PENDING_GRACE = 8.0
"""How long a permission prompt is held while the agent's file shows no call of its tool
yet, before it is published ``manual_required`` (Claude writes the call ~220 ms after
drawing its prompt when idle, tools/lab/NOTES.md, and past 2 s with six clients on 2 cores)."""

SEEN_SECRET_CHARS = 4096
"""How many characters of what was masked on its earlier drawings a pane remembers, to
mask their pieces on a drawing caught half done (`SeenSecrets`): a few dozen keys."""

LOOK_CAPTURES = 5
"""How many captures one look takes at most: a first look until two in a row agree
(`Observer._steady`), a later one while each shows a new key's possible head
(`Observer._whole_keys`)."""

PENDING_POLL = 0.05
"""Seconds between looks at a held permission (each reads the agent's file once)."""

SETTLE_POLL = 0.1
"""Seconds between looks at a manual screen that has not settled yet."""


class Observer:
    """One pane's screen as its TerminalActor last read it, and the board it is published on.

    ``identity`` and ``profile`` are the terminal as it is read now (changed
    only by `rebind`, between steps); ``busy`` is set by the actor while an
    input-bearing step is between its first key and its receipt.
    """

    def __init__(
        self,
        identity: TerminalIdentity,
        profile: Profile | None,
        link: ClientLink,
        board: TerminalBoard,
        store: ActorRef,
    ) -> None:
        self.identity = identity
        self.profile = profile
        self.busy = False
        self.recheck: float | None = None
        """Seconds after which the pane must be read again though it did not change (a held
        permission), None when only a change of the pane can change what it shows."""
        self.size: tuple[int, int] | None = None  # the pane's size as last listed
        # Trio clock of the first screen in a row that draws a composer (idle, with a draft,
        # or under a running turn): how long the composer has been taking keys.
        self.composer_since: float | None = None
        self.grid: Grid | None = None  # the last rendered screen
        self.seen_since = 0.0  # trio clock when the prompt's appearance on screen began
        self._link = link
        self._board = board
        self._store = store
        self._last: tuple[str, int, int] | None = None
        self._drawn_at = 0.0  # trio clock: when the last capture first showed as it is
        self._seq = 0
        self._seen: Appearance | None = None  # the prompt's appearance on the last screen
        self._person_s = False  # whether that prompt is a person's to answer (`_asks`)
        # A person's prompt that left for frames no profile reads: its appearance, and when
        # it left (trio clock); see `_appearance`.
        self._left: tuple[Appearance, float] | None = None
        self._resumed: Appearance | None = None  # the store's last appearance, until first look
        self._last_number = 0
        # Trio clock: since when the prompt on screen has been held (None: none is).
        self._held_since: float | None = None
        # The step AKK's last answer was proven to end, as (call, kind, step number): that
        # call's step asked again is held until the file says which call asks it (`spend`).
        self._spent: tuple[str, str, int] | None = None
        self._manual: wakeups.Manual | None = (
            None  # the manual screen on show (akk.protocol.wakeups)
        )
        self._secrets = SeenSecrets(SEEN_SECRET_CHARS)  # masked on this pane's drawings so far
        self._server_pid: int | None = None  # the tmux server's, once read (-1: unreadable)

    def announce(self) -> None:
        """Put this terminal on the board as it is read now (before its first Observation)."""
        self._board.announce(self.identity, self.profile, trio.current_time())

    def rebind(self, identity: TerminalIdentity, profile: Profile | None) -> None:
        """Read the pane as ``identity`` with ``profile`` from now on, announced on the board."""
        self.identity, self.profile = identity, profile
        self.announce()

    def retire(self) -> None:
        """Take this terminal off the board."""
        self._board.retire(self.identity.terminal_id)

    @property
    def painted_since(self) -> float:
        """Trio time since which the prompt on screen has been shown as it is: since its
        appearance began, or since the pane's capture last changed if that was earlier (a
        prompt held for its call begins its appearance only once bound, drawn before)."""
        return min(self.seen_since, self._drawn_at)

    def spend(self, answered: PromptView) -> None:
        """Note that an answer ended ``answered``, the step of its bound call (a step with
        no call notes nothing).

        Claude (2.1.263, 2.1.267) draws an identical question asked again before it writes
        the first one's result and the new call, so for a moment the new screen binds to the
        call just answered; so may an identical permission. Such a screen is held, as one
        whose call is not written yet, until the file names its call (or for
        PENDING_GRACE: a person went back to that step).
        """
        if answered.call:
            self._spent = (answered.call, answered.kind, answered.step_index)

    def current(self) -> TerminalSnapshot | None:
        """The snapshot last published for this terminal."""
        return self._board.get(self.identity.terminal_id)

    async def resume(self) -> None:
        """Continue from the store's last prompt appearance on this terminal, if any.

        One the store records gone is not continued: it was seen to leave, so the same
        drawing shown now was drawn again since, and is a new appearance to wake for.
        """
        terminal_id = self.identity.terminal_id
        latest = await transact(self._store, lambda conn: interactions.latest_on(conn, terminal_id))
        if latest is not None:
            if latest.state is not interactions.InteractionState.GONE:
                self._resumed = latest.seen
            self._last_number = latest.appearance

    async def observe(self, *, force: bool = False) -> TerminalSnapshot | None:
        """Capture and classify now; publish and return the snapshot (None if no full screen).

        A forced read (a step's proof, or its check that the pane is idle) reads the pane's
        size first: a step in flight holds this actor, so no listing brings it a resize, and
        a screen a person resized meanwhile is proven at the size it has now.
        """
        try:
            if force and (now := await pane_size(self._link.client(), self.identity.pane_id)):
                self.size = now
        except (TmuxCommandError, ControlClientClosed):
            return None  # the pane went away: the watcher retires us
        if self.size is None:
            return None
        cols, rows = self.size
        try:
            # Rest first, then the capture: a frame written before the rest is on it.
            resting = self.recheck is not None and await self._resting()
            screen = await capture(self._link.client(), self.identity.pane_id)
            if self._last is None:
                screen = await self._steady(screen)
            else:
                screen = await self._whole_keys(screen, self._last[0])
        except (TmuxCommandError, ControlClientClosed):
            # The pane went away between listing and capture; the watcher retires us.
            return None
        if screen.count("\n") != rows:
            # tmux does not escape command output, so a pane row that mimics the
            # control protocol could cut a capture short: never classify a partial screen.
            return None
        current = self.current()
        unchanged = self._last == (screen, cols, rows) and current is not None
        if not force and unchanged and self.recheck is None:
            return current
        if self._last != (screen, cols, rows):
            self._drawn_at = trio.current_time()
        self._last = (screen, cols, rows)
        try:
            grid = render(screen, cols, rows)
        except CaptureMismatch:
            # Resized between reading the size and capturing: the next read brings it.
            return None
        observation, pending, held = await self._pending_call(
            classify(grid, self.identity, self.profile), resting
        )
        if observation.draft is None:
            self.composer_since = None
        elif self.composer_since is None:
            self.composer_since = trio.current_time()
        seen, read = None, None
        if observation.prompt is not None and self.profile is not None:
            read = read_prompt(
                grid,
                observation,
                self.profile,
                terminal_identity=self.identity.fingerprint_identity,
                pending=pending.identity if pending is not None else "",
            )
            seen = self._appearance(read.fingerprint)
        if seen is None:
            if observation.state is not State.UNKNOWN:
                self._left = None  # a screen read whole: whatever left is gone
            elif self._seen is not None and self._person_s:
                self._left = (self._seen, trio.current_time())
        self._seen = seen
        self._person_s = read is not None and read.person_s
        self.grid = grid
        lines = grid.lines()
        seen_secrets = self._secrets.pieces
        masked = redact_screen(lines, seen_secrets).secrets
        self._secrets.add(masked)
        self._manual = wakeups.follow(
            self._manual, observation, profiled=self.profile is not None,
            agent=self.identity.agent, lines=lines, now=trio.current_time(),
            mint=self._manual_appearance, secrets=masked, resting=resting,
        )  # fmt: skip
        settling = self._manual is not None and not self._manual.settled(trio.current_time())
        self.recheck = PENDING_POLL if held else SETTLE_POLL if settling else None
        self._resumed = None  # only the first look since the actor started continues it
        self._seq += 1
        snapshot = TerminalSnapshot(
            identity=self.identity,
            observation=observation,
            seen=seen,
            busy=self.busy or held,
            lines=lines,
            observed_at=trio.current_time(),
            seq=self._seq,
            manual=self._manual,
            profile=self.profile,
            grid=grid,
            editor_taken=None if read is None else read.editor_taken,
            seen_secrets=seen_secrets,
        )
        self._board.publish(snapshot)
        return snapshot

    async def _steady(self, screen: str) -> str:
        """The first look's capture ``screen``, taken again until two in a row agree (at
        most `LOOK_CAPTURES`; else the last). A capture may catch a drawing half
        done, and on this Observer's first look nothing is remembered yet that could mask
        a key it cuts (`SeenSecrets`), nor any earlier frame a restart could tell the
        settled one by (`wakeups.follow`)."""
        for _ in range(LOOK_CAPTURES - 1):
            again = await capture(self._link.client(), self.identity.pane_id)
            if again == screen:
                break
            screen = again
        return screen

    async def _whole_keys(self, screen: str, before: str) -> str:
        """A later look's capture ``screen``, taken again while it shows a run that may be
        the head of a key (`key_heads`) which the capture before it, ``before``, did not
        show (at most `LOOK_CAPTURES`; else the last). A key is masked only once 40 of its
        characters show, and a new one's first drawing is remembered by nobody yet: a
        capture that cut it shows it whole on the next one. A head that stays put is the
        screen's own (an id, a word), and is read as it is."""
        if screen == before:  # most looks: nothing new, so no new head
            return screen
        shown = unstyled(before)
        for _ in range(LOOK_CAPTURES - 1):
            text = unstyled(screen)
            if all(head in shown for head in key_heads(text)):
                break
            shown, screen = text, await capture(self._link.client(), self.identity.pane_id)
        return screen

    async def _resting(self) -> bool:
        """Whether the agent's threads and the tmux server's sleep now (`at_rest`): a frame
        either of them was writing is then on the pane whole. Their descendants are not
        read: the commands an agent runs do not draw on its pane, and the server's other
        children are other panes' processes."""
        if self._server_pid is None:
            lines = await self._link.client().command("display-message", "-p", "#{pid}")
            self._server_pid = int(lines[0]) if lines and lines[0].isdigit() else -1
        if self._server_pid < 0:
            return False  # unproven: only SETTLE_CAP_SECONDS settles its screens
        return at_rest([self.identity.agent_pid, self._server_pid], descendants=False)

    def typing(self, text: str) -> None:
        """``text`` is about to be typed into the pane: its secrets are masked from its first
        drawing on, though that drawing be caught half done."""
        self._secrets.add(redact_screen(text.split("\n")).secrets)

    def _manual_appearance(self, screen: bytes) -> Appearance:
        """A new appearance of a manual screen first drawn as ``screen`` (akk.protocol.wakeups).

        On the first look since this actor started, the store's last appearance on this
        terminal continues if it was this very drawing (a screen waiting for a person
        does not change while it waits): it is the one its owner was woken for.
        """
        identity = self.identity.fingerprint_identity.encode("utf-8", "surrogatepass")
        fp = hashlib.sha256(b"akk-manual\x1f" + identity + b"\x1f" + screen).digest()
        if self._resumed is not None and self._resumed.fingerprint == fp:
            return self._resumed
        return Appearance(fp, self._next_number())

    def _appearance(self, fp: bytes) -> Appearance:
        """The appearance this prompt belongs to: the current one while it stays on screen.

        A prompt that is a person's to answer is fingerprinted by what it asks
        (`read_prompt`), so it stays the appearance it began as while it asks the same for
        the same reason, however it is redrawn: the person moving its cursor or typing into
        its editor is answering it, and PROTOCOL wakes its owner once per appearance.
        Nothing is ever sent for it, so no fence rests on its drawing. Frames no profile
        reads (caught mid-draw) for less than `wakeups.SETTLE_SECONDS` between two of its
        drawings do not end it either (``_left`` holds only a person's prompt).

        Any other prompt that was not on the previous screen is a new appearance, unless
        it is the first screen since this actor started and the store's last
        appearance on this terminal has the same fingerprint: what happened
        while no actor watched cannot be known, so it is taken as the same
        appearance (its fence, if answered, holds). A person's prompt redrawn meanwhile
        has the same fingerprint too, so it is resumed as well.
        """
        resumed = self._resumed  # cleared after each look (`observe`)
        left, self._left = self._left, None
        if self._seen is not None and self._seen.fingerprint == fp:
            return self._seen
        if (left is not None and left[0].fingerprint == fp
                and trio.current_time() - left[1] < wakeups.SETTLE_SECONDS):  # fmt: skip
            return left[0]
        if resumed is not None and resumed.fingerprint == fp:
            self.seen_since = trio.current_time()
            return resumed
        self.seen_since = trio.current_time()
        return Appearance(fp, self._next_number())

    def _next_number(self) -> int:
        """A new appearance number: the clock's, and always above the last one."""
        self._last_number = max(time.time_ns(), self._last_number + 1)
        return self._last_number

    async def open_calls(self) -> list[evidence.PendingCall] | None:
        """The pending calls in the agent's file (`open_calls`); None if it cannot be read."""
        return await open_calls(self._store, self.identity)

    async def _pending_call(
        self, observation: Observation, resting: bool
    ) -> tuple[Observation, evidence.PendingCall | None, bool]:
        """An actionable permission or question with the pending call it asks about, else
        not actionable; and whether it is held, waiting for its call (see the module's
        docstring; ``resting`` as `wakeups.stood_still` takes it, from `_resting`).

        A screen within a step's keys is never held: it is passing anyway.
        """
        profile = self.profile
        permission = asks_permission(observation)
        if profile is None or not (permission or asks_question(observation)):
            self._held_since = None
            return observation, None, False
        calls = await self.open_calls()
        now = trio.current_time()
        if permission:
            tool = asked_tool(observation)
            bound, call = bind_pending(observation, calls)
        else:
            tool = profile.question_tool
            bound, call = bind_question(observation, tool, calls, reviews=profile.reviews_answers)
        stale = False
        if call is not None and bound.prompt is not None:
            prompt = attrs.evolve(bound.prompt, call=call.identity)
            bound = attrs.evolve(bound, prompt=prompt)
            stale = self._spent == (call.identity, prompt.kind, prompt.step_index)
            if not stale:
                self._spent = None
        held = False
        if (call is None or stale) and not self.busy:
            # One grace from the first held screen until the prompt leaves (or binds),
            # however its drawing changes meanwhile: a hold always ends.
            if self._held_since is None:
                self._held_since = now
            held = now - self._held_since < PENDING_GRACE
            if call is None and not awaits_call(calls, tool):
                held = held and not wakeups.stood_still(now - self._drawn_at, resting=resting)
            if stale and not held:
                self._spent = None  # asked again, and no other call came: that call's
        else:
            self._held_since = None
        if call is None and not held:
            shown = "unreadable" if calls is None else ", ".join(c.tool for c in calls) or "none"
            log.info(
                "%s on %s is for a person (%s): open calls %s%s",
                observation.state, self.identity.terminal_id, bound.reason, shown,
                " (in a step)" if self.busy else "",
            )  # fmt: skip
        return bound, call, held


@attrs.frozen
class PromptRead:
    """What one look makes of the prompt on screen, beyond its Observation."""

    editor_taken: str | None
    """Why its editor cannot take an answer (a person's text is in it), if so."""
    fingerprint: bytes
    """Its drawing's cells (`fingerprint`), or what it asks if it is a person's to answer
    (`asked_fingerprint`: the person redrawing it is answering it)."""
    person_s: bool
    """Whether it is a person's to answer (`terminal_board.refused_for`)."""


def read_prompt(
    grid: Grid,
    observation: Observation,
    profile: Profile,
    *,
    terminal_identity: str,
    pending: str = "",
) -> PromptRead:
    """What the prompt ``observation`` read off ``grid`` under ``profile`` is, seen on the
    terminal ``terminal_identity`` (`TerminalIdentity.fingerprint_identity`), for the pending
    call ``pending`` (`evidence.PendingCall.identity`) if it asks about one."""
    prompt = observation.prompt
    assert prompt is not None
    taken = None
    if prompt.step is StepKind.FREE_TEXT:  # only an open editor can hold text
        taken = profile.editor_taken(grid, prompt)
    asked = _asks(observation, taken)
    drawn = {"profile_id": profile.id, "terminal_identity": terminal_identity, "pending": pending}
    if asked is None:
        return PromptRead(taken, fingerprint(grid, prompt.region, **drawn), person_s=False)
    return PromptRead(taken, asked_fingerprint(asked, **drawn), person_s=True)


def _asks(observation: Observation, editor_taken: str | None) -> str | None:
    """What the prompt ``observation`` read asks, as one canonical text, if it is a
    person's to answer (`terminal_board.refused_for`): its reason, kind, step number and
    questions' words, without its cursor, its options' marks, its editor's text or which of
    them has focus (Claude draws a question as a free-text step while its editor does);
    None for a prompt AKK may answer."""
    prompt, reason = observation.prompt, refused_for(observation, editor_taken)
    if prompt is None or reason is None:
        return None
    asked = [question.prompt for question in prompt.questions]
    return json.dumps([reason, prompt.kind, prompt.step_index, prompt.step_total, asked,
                       prompt.tabs, prompt.reviewed])  # fmt: skip


async def shown_for(
    screen: Observer,
    shows: Callable[[TerminalSnapshot], bool],
    timeout: float,
    *,
    hold: float = 0.0,
    poll: float = 0.03,
) -> TerminalSnapshot | None:
    """The first snapshot of ``screen``, read now and every ``poll`` s, that ``shows``, and
    that every read for ``hold`` s since the first such one showed too; None if none within
    ``timeout``. A read that does not show it (or no full screen) starts the hold over.
    """
    since: float | None = None  # when a run of reads that all show it began
    with trio.move_on_after(timeout):
        while True:
            snapshot = await screen.observe(force=True)
            if snapshot is None or not shows(snapshot):
                since = None
                await trio.sleep(poll)
                continue
            now = trio.current_time()
            if since is None:
                since = now
            if now - since >= hold:
                return snapshot
            await trio.sleep(min(poll, since + hold - now))
    return None


def classify(grid: Grid, identity: TerminalIdentity, profile: Profile | None) -> Observation:
    """What ``grid`` shows under ``profile``; unknown, with the reason, without one."""
    if profile is None:
        # Without the exact version's profile nothing on screen can be trusted.
        return Observation(State.UNKNOWN, None, reason=identity.profile_reason or "no_profile")
    return profile.classify(grid)


async def open_calls(
    store: ActorRef, identity: TerminalIdentity
) -> list[evidence.PendingCall] | None:
    """The pending calls in the agent's file; None if it cannot be read.

    The file is the one the terminal's Turn bound before its send (read from
    its binding offset). A sent Turn not bound yet has no call that can be told
    its own (the file may hold earlier Turns' calls, or the agent may own two
    files): none yet, so its prompt is held until the binding comes. Without
    a Turn to bind (a Watch before its task is found, evidence unknown), the
    one file the agent process owns now.
    """
    terminal_id, agent = identity.terminal_id, identity.agent
    turn = await transact(store, lambda conn: turns.unresolved_on(conn, terminal_id))
    if turn is not None and turn.evidence_status == "pending" and not turn.is_watch:
        return []
    try:
        if turn is not None and turn.evidence_status == "bound" and turn.evidence:
            binding = evidence.Binding.from_json(turn.evidence)
            return await trio.to_thread.run_sync(
                evidence.open_calls, binding.agent, binding.file, binding.offset
            )
        file = await trio.to_thread.run_sync(
            evidence.owned_file, agent, identity.agent_pid, identity.process_start
        )
        return await trio.to_thread.run_sync(evidence.open_calls, agent, file)
    except (evidence.EvidenceError, ValueError, OSError) as exc:
        log.info("pending call on %s unknown: %s", terminal_id, exc)
        return None
