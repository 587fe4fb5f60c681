"""A composer message's keys: type the reserved text, prove the composer shows it, Enter once.

`type_and_submit` runs after the TerminalActor reserved the dispatch: the
text is typed (literal keys or a paste, as the profile's typing method says),
the composer must then show exactly that text within PROOF_TIMEOUT (longer
for long text, `text_timeout`), and only then is Enter pressed, once. Text
never proven gets no Enter and is never deleted or typed again
(docs/composer.md).

No fixed wait stands between the keys and the Enter. What a screen cannot
show is how long the client still reads an Enter as part of a burst of typed
keys (Codex's paste-burst window, `Typing.enter_guard_seconds`): that window
starts when the client takes the last key, which is before the first screen
that shows the whole text. So the proof is held: a first read that shows the
text starts the guard, and Enter follows a read at least the guard later that
still shows exactly the text, every read between them (POLL_SECONDS apart)
showing it too.
"""

from __future__ import annotations

import trio

from akk import faults
from akk.actors.terminal_board import TerminalSnapshot
from akk.backends.terminal.observer import Observer, shown_for
from akk.backends.terminal.stages import abort_task, advance, settle_task
from akk.backends.terminal.steps import TaskReceipt
from akk.faults import Point
from akk.profiles.composer import TypingMethod
from akk.runtime.actor import ActorRef
from akk.store.dispatches import Stage
from akk.store.turns import TurnState
from akk.tmux import keys
from akk.tmux.control import (
    ClientLink,
    ControlClientClosed,
    TmuxCommandError,
    UnencodableCommand,
)

PROOF_TIMEOUT = 3.0
"""How long the composer may take to show the typed text before the proof fails."""

POLL_SECONDS = 0.02
"""Seconds between reads of the composer, until its text has shown for the Enter guard."""

RENDER_CHARS_PER_SECOND = 100.0
"""A rate below the slowest a client was seen drawing typed text: a proof of typed text
waits this much longer per character (a slow proof only delays the answer, a missed one
makes it uncertain). Claude 2.1.328's editor drew 3,000 characters at under 300 a second
on a loaded machine. (Claude 2.1.266's that once stood 24 characters short of 3,000, and
later 2,048, had lost its first read to the second: no allowance helps there, and a long
answer now goes in proven pieces, `TypeText.piece_bytes`.)"""


def text_timeout(base: float, text: str) -> float:
    """How long the screen may take to show ``text`` typed: ``base``, longer for long text."""
    return base + len(text) / RENDER_CHARS_PER_SECOND


async def type_and_submit(
    screen: Observer,
    link: ClientLink,
    store: ActorRef,
    receipt: TaskReceipt,
    text: str,
    method: TypingMethod,
) -> TaskReceipt:
    """Type ``text`` for the reserved ``receipt``, prove it, press Enter; record each stage."""
    turn, dispatch = receipt.turn, receipt.dispatch
    pane = screen.identity.pane_id
    detour = await keys.detour(link.client(), pane)
    if detour is not None:
        return await abort_task(
            store, receipt, dispatch, "pane_detour",
            f"no key was sent: the pane {detour.why}. {detour.next_step}",
        )  # fmt: skip
    try:
        client = link.client()
        if method is TypingMethod.LITERAL:
            await keys.type_literal(client, pane, text)
        else:
            await keys.paste(client, pane, text)
    except (UnencodableCommand, keys.NothingPasted) as exc:
        # The command that types was never sent (not encodable, or the paste's text never
        # staged): provably no key reached the pane.
        return await abort_task(
            store, receipt, dispatch, "not_typed",
            f"no key was sent: tmux was never asked to type the task "
            f"({exc.said}). Call status, then send it again",
        )  # fmt: skip
    except (TmuxCommandError, ControlClientClosed) as exc:
        # Some of the text may be in the composer: never typed again, never submitted.
        why = f"typing failed: {exc.said if isinstance(exc, TmuxCommandError) else exc}"
        return await settle_task(store, receipt, Stage.UNCERTAIN, why[:200], TurnState.UNCERTAIN)
    await faults.reached(Point.TEXT_TYPED)
    dispatch = await advance(store, dispatch, Stage.TEXT_INJECTED)
    await faults.reached(Point.TEXT_INJECTED)
    if not await prove_composer(screen, text, method):
        # Someone typed too, or a key was dropped: no Enter, nothing deleted.
        return await abort_task(store, receipt, dispatch)
    await faults.reached(Point.BEFORE_ENTER)
    detour = await keys.detour(link.client(), pane)
    if detour is not None:  # the Enter would not be the agent's (a chooser pastes a buffer)
        return await abort_task(
            store, receipt, dispatch, "pane_detour",
            f"the text was typed and AKK pressed no Enter: the pane {detour.why}; the text "
            "stays in the pane for the person there",
        )  # fmt: skip
    try:
        await keys.press(link.client(), pane, "Enter")
    except (TmuxCommandError, ControlClientClosed) as exc:
        return await settle_task(
            store,
            TaskReceipt(turn, dispatch, receipt.seq, None),
            Stage.UNCERTAIN,
            f"Enter may not have been sent: {exc}"[:200],
            TurnState.UNCERTAIN,
        )
    enter_at = trio.current_time()
    await faults.reached(Point.ENTER_SENT)
    dispatch = await advance(store, dispatch, Stage.ENTER_SENT)
    await faults.reached(Point.ENTER_RECORDED)
    return TaskReceipt(turn, dispatch, receipt.seq, enter_at)


async def prove_composer(screen: Observer, text: str, method: TypingMethod) -> bool:
    """Whether the composer shows exactly ``text``, and has for the client's Enter guard.

    The guard applies to typed keys only: a bracketed paste opens no burst
    window on either client (`Typing.enter_guard_seconds`).
    """
    profile = screen.profile
    assert profile is not None
    guard = profile.typing.enter_guard_seconds if method is TypingMethod.LITERAL else 0.0

    def shows(snapshot: TerminalSnapshot) -> bool:
        draft = snapshot.observation.draft
        return draft is not None and profile.draft_matches(draft, text, method)

    # The client took the last key before the first read that shows the text ended.
    timeout = text_timeout(PROOF_TIMEOUT, text) + guard
    return await shown_for(screen, shows, timeout, hold=guard, poll=POLL_SECONDS) is not None
