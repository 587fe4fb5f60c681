"""An answer's keys: the reserved plan sent checkpoint by checkpoint, then its postcondition.

`send_answer` runs after the TerminalActor reserved the answer's dispatch. It
sends the expanded plan's keys up to each check, and waits until the screen
shows that check's effect (a box ticked with the cursor on its row, the
question's editor open, or the editor showing exactly the typed text) before
any further key; then the rest, and it proves the answered step gone (another
step, work or idle; or, where the screen cannot be read, the step's call answered
in the agent's own file) within STEP_TIMEOUT. A check or postcondition never seen
ends the step ``uncertain`` (``aborted`` before any key that could submit: an
editor never seen open, or text never proven and left unsubmitted): AKK sends
no further key and never retries.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from akk import faults
from akk.actors.terminal_board import TerminalSnapshot
from akk.backends.contract import AnswerReceipt
from akk.backends.terminal.checks import MOVED_ON, boxes, step_of
from akk.backends.terminal.observer import Observer, shown_for
from akk.backends.terminal.stages import advance, answer_uncertain
from akk.backends.terminal.steps import DispatchAnswer
from akk.backends.terminal.typing_step import text_timeout
from akk.faults import Point
from akk.profiles.keyplan import (
    Check,
    EditorCheck,
    Expanded,
    Keystroke,
    LiteralText,
    TextCheck,
    TmuxKey,
    ToggleCheck,
)
from akk.profiles.observation import PromptView, StepKind
from akk.runtime.actor import ActorRef
from akk.store.dispatches import Dispatch, Stage
from akk.tmux import keys
from akk.tmux.control import ClientLink, ControlClientClosed, TmuxCommandError

STEP_TIMEOUT = 5.0
"""How long a prompt may take to show the effect of an answer's keys (a toggled box, the
typed text, the next step or the prompt gone) before the step is ``uncertain``."""


async def send_answer(
    screen: Observer,
    link: ClientLink,
    store: ActorRef,
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
    pane, sent = screen.identity.pane_id, 0
    ticked = boxes(screen.current())
    try:
        for check in expanded.checks:
            strokes = expanded.keys[sent : check.after]
            if not isinstance(check, TextCheck):
                point = (
                    Point.ANSWER_TOGGLE if isinstance(check, ToggleCheck) else Point.ANSWER_EDITOR
                )
                await faults.reached(point)
                if faults.drops(point):
                    strokes = strokes[:-1]  # the toggle key, or the walk's last, lost on its way
            if sent:  # the first keys follow the TerminalActor's own look, one write earlier
                detour = await keys.detour(link.client(), pane)
                if detour is not None:
                    return await _detoured(store, dispatch, detour)
            await press(link, pane, strokes)
            sent = check.after
            match check:
                case TextCheck():
                    if dispatch.stage is not Stage.TEXT_INJECTED:  # the first piece typed
                        dispatch = await advance(store, dispatch, Stage.TEXT_INJECTED)
                        await faults.reached(Point.ANSWER_TEXT_INJECTED)
                    shown = check.shown(message.answer.text or "")
                    proof = await prove_editor(screen, shown, check.hold)
                case EditorCheck():
                    proof = await prove_editor_open(screen, answered)
                case ToggleCheck():
                    ticked[check.row] = check.checked
                    proof = await prove_boxes(screen, ticked, check.row)
            if proof is None:
                return await answer_uncertain(store, dispatch, *_unproven(check))
            seq, answered = proof
        detour = await keys.detour(link.client(), pane) if sent else None
        if detour is not None:
            return await _detoured(store, dispatch, detour)
        await press(link, pane, expanded.keys[sent:])
    except (TmuxCommandError, ControlClientClosed) as exc:
        said = exc.said if isinstance(exc, TmuxCommandError) else str(exc)
        return await answer_uncertain(store, dispatch, f"sending keys failed: {said}"[:200])
    await faults.reached(Point.ANSWER_SENT)
    dispatch = await advance(store, dispatch, Stage.ENTER_SENT)
    await faults.reached(Point.ANSWER_RECORDED)
    if (unproven := await prove_moved_on(screen, answered, seq)) is not None:
        return await answer_uncertain(store, dispatch, unproven)
    screen.spend(answered)
    dispatch = await advance(store, dispatch, Stage.ACCEPTED, "postcondition_proven")
    return AnswerReceipt(dispatch, proven=True)


async def _detoured(store: ActorRef, dispatch: Dispatch, detour: keys.Detour) -> AnswerReceipt:
    """End the step, some of whose keys went, where tmux would not give the agent the next."""
    return await answer_uncertain(
        store, dispatch, f"the pane {detour.why}; AKK sent no further key"
    )


def _unproven(check: Check) -> tuple[str, Stage]:
    """Why a check never seen ends the step, and its stage: ``aborted`` while no key that
    could submit went out (the editor never seen open, typed text left unsubmitted)."""
    match check:
        case EditorCheck():
            why = "the question's editor did not show open after the keys that move to it"
            return f"{why}; AKK typed none of the text", Stage.ABORTED
        case TextCheck():
            why = "the editor did not show exactly the typed text"
            return f"{why}; AKK left it unsubmitted", Stage.ABORTED
        case ToggleCheck():
            why = "the screen did not show the step's effect after its keys"
            return f"{why}; AKK sent no further key", Stage.UNCERTAIN


async def press(link: ClientLink, pane: str, strokes: Sequence[Keystroke]) -> None:
    """Send ``strokes`` to ``pane`` in order: named keys and literal text."""
    client = link.client()
    for stroke in strokes:
        match stroke:
            case TmuxKey(name=name):
                await keys.press(client, pane, name)
            case LiteralText(text=text):
                await keys.type_literal(client, pane, text)


async def prove_editor(screen: Observer, text: str, hold: float) -> tuple[int, PromptView] | None:
    """The screen once the prompt's editor shows exactly ``text`` and has on every read for
    ``hold`` seconds since the first that showed it (the client's Enter guard, which opens
    when it takes the last key: no earlier screen can show that); None if it never does."""
    profile = screen.profile
    assert profile is not None

    def shows(snapshot: TerminalSnapshot) -> bool:
        prompt = snapshot.observation.prompt
        return (
            snapshot.seen is not None
            and prompt is not None
            and snapshot.grid is not None
            and profile.editor_matches(snapshot.grid, prompt, text)
        )

    timeout = text_timeout(STEP_TIMEOUT, text) + hold
    return _proof(await shown_for(screen, shows, timeout, hold=hold))


async def prove_editor_open(
    screen: Observer, answered: PromptView
) -> tuple[int, PromptView] | None:
    """The screen once ``answered``'s question shows its free-text editor open under the
    cursor (its step `StepKind.FREE_TEXT`); None if it never does."""

    def shows(snapshot: TerminalSnapshot) -> bool:
        prompt = snapshot.observation.prompt
        return (
            snapshot.seen is not None
            and prompt is not None
            and snapshot.observation.actionable
            and prompt.step is StepKind.FREE_TEXT
            and prompt.kind is answered.kind
            and prompt.step_index == answered.step_index
            and prompt.questions[0].prompt == answered.questions[0].prompt
        )

    return _proof(await shown_for(screen, shows, STEP_TIMEOUT))


async def prove_boxes(
    screen: Observer, ticked: dict[int, bool], row: int
) -> tuple[int, PromptView] | None:
    """The screen once every box shows ``ticked`` and the cursor is on ``row``."""

    def shows(snapshot: TerminalSnapshot) -> bool:
        prompt = snapshot.observation.prompt
        options = prompt.questions[0].options if prompt and prompt.questions else ()
        return (
            snapshot.seen is not None
            and prompt is not None
            and prompt.step is StepKind.MULTI_SELECT
            and len(options) > row
            and options[row].current
            and boxes(snapshot) == ticked
        )

    return _proof(await shown_for(screen, shows, STEP_TIMEOUT))


def _proof(snapshot: TerminalSnapshot | None) -> tuple[int, PromptView] | None:
    """A proven checkpoint's screen: its sequence number and the prompt it showed."""
    if snapshot is None:
        return None
    prompt = snapshot.observation.prompt
    assert prompt is not None  # every checkpoint's proof requires one
    return snapshot.seq, prompt


async def prove_moved_on(screen: Observer, answered: PromptView, seq: int) -> str | None:
    """None once a screen after the keys shows the answered step gone, else why it was not
    seen gone within STEP_TIMEOUT.

    Gone: the screen shows another step, work or idle (the same step with its
    cursor moved or a box ticked is not gone). Or it shows no prompt of that step
    but cannot be read (Codex up to 0.155.1 draws the idle composer under a
    person's open popup without its footer) while the agent's own file records
    the call the step was bound to as answered: on a loaded machine the work
    between (a command approved, run and reported) can pass between two looks.
    """
    left_as: str | None = None  # how a screen without the step, not readable, read
    file_read_at = -FILE_POLL
    with trio.move_on_after(STEP_TIMEOUT):
        while True:
            snapshot = await screen.observe(force=True)
            if snapshot is not None and snapshot.seq > seq:
                shown = snapshot.observation.prompt
                if shown is not None:
                    if step_of(shown) != step_of(answered):
                        return None
                elif snapshot.observation.state in MOVED_ON:
                    return None
                else:
                    left_as = snapshot.observation.state.value
                    now = trio.current_time()
                    if answered.call and now - file_read_at >= FILE_POLL:
                        file_read_at = now
                        calls = await screen.open_calls()
                        if calls is not None and all(c.identity != answered.call for c in calls):
                            return None
            # Look often: the next screen may pass quickly (an agent asking again at once).
            await trio.sleep(0.01)
    if left_as is None:
        return "the prompt still showed, unchanged, after the answer's keys"
    return (
        f"after the answer's keys the prompt left a screen AKK reads as {left_as}, and the "
        "agent's file did not show its call answered"
    )


FILE_POLL = 0.25
"""How often `prove_moved_on` reads the agent's file while the screen cannot be read."""
