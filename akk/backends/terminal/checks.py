"""What a TerminalActor checks before and after an answer's keys, as pure functions.

The key plan of an answer (`plan`), the fence of its interaction and offer
inside the reservation (`fence_check`), whether its delivery mode fits the
screen (`delivery_refusal`), the next round's message (`next_turn_message`),
and what a step of a prompt is (`step_of`, `boxes`): each refuses rather than
guesses, so a refused answer sends zero keys.
"""

from __future__ import annotations

import apsw

from akk.actors.terminal_board import TerminalSnapshot
from akk.backends.contract import Refusal, no_prompt_left
from akk.backends.terminal.resolve import PLAN_REFUSALS, Answer
from akk.backends.terminal.steps import DispatchAnswer
from akk.profiles.keyplan import (
    Expanded,
    Intent,
    KeyPlan,
    KeyPlanError,
    expand_checked,
)
from akk.profiles.observation import InteractionKind, PromptView, State
from akk.profiles.registry import Profile
from akk.protocol.errors import Reason
from akk.screen.grid import Grid
from akk.store import interactions, turns
from akk.store.interactions import InteractionState, OfferState
from akk.tmux.keys import Detour

MOVED_ON = frozenset({State.IDLE, State.IDLE_DRAFT, State.WORKING})


class Busy(Exception):
    """The terminal already has an open input-bearing step (the unique index said so)."""


def answer_plan(
    profile: Profile, prompt: PromptView, answer: Answer, grid: Grid
) -> tuple[KeyPlan, Expanded] | Refusal:
    """The profile's proven key plan for ``answer`` on ``prompt`` (read off ``grid``),
    expanded; or why not."""
    try:
        plan = profile.key_plans.plan_for(prompt.kind, prompt.step, answer.intent)
        if not plan.lab_verified:
            return Refusal(
                Reason.MANUAL_REQUIRED,
                f"{profile.id} has no lab-proven way to {answer.intent} on a {prompt.step} step "
                "yet; answer it in the terminal. Nothing was sent",
            )
        if answer.text is not None and len(answer.text) > profile.free_text_max_chars:
            return Refusal(
                Reason.INVALID_PARAMS,
                f"the text has {len(answer.text)} characters; {profile.id} can prove at most "
                f"{profile.free_text_max_chars} in its editor. Shorten it; nothing was sent",
            )
        refused = None if answer.text is None else profile.editor_refusal(answer.text, grid, prompt)
        if refused is not None:  # it would be typed, never proven, and left in the editor
            return Refusal(Reason.INVALID_PARAMS, refused.message("the free text"))
        options = prompt.questions[0].options if prompt.questions else ()
        return plan, expand_checked(plan, options, chosen=answer.chosen, text=answer.text)
    except KeyPlanError as exc:
        return Refusal(PLAN_REFUSALS[exc.reason], f"{exc}; nothing was sent")


def fence_check(conn: apsw.Connection, message: DispatchAnswer, now: float) -> Refusal | None:
    """Inside the reservation: the Turn, the interaction's fence and the offer, all still good.

    A next-turn answer needs the Turn settled (its round over), not closed, and
    no other record on the terminal; any other answer needs the Turn open.
    """
    turn = turns.get(conn, message.turn_id)
    if turn is None:
        return Refusal(Reason.NOT_FOUND, f"no turn {message.turn_id}; nothing was sent")
    if message.answer.next_turn and turn.closed_at is None:
        if not turn.state.settled:
            return Refusal(
                Reason.NOT_IDLE,
                f"turn {message.turn_id}'s round has not ended yet (wait for its outcome "
                "event); queue_next_turn starts the round after it. Nothing was sent",
            )
        holder = turns.unresolved_on(conn, turn.terminal_id or "")
        if holder is not None:
            return Refusal(Reason.CONFLICT, turns.held(holder, message.controller_id))
    elif (refused := no_prompt_left(turn)) is not None:
        return refused
    row = interactions.get(conn, message.interaction_id)
    if row is None or row.turn_id != message.turn_id or row.seen != message.seen:
        return Refusal(Reason.PROMPT_CHANGED, "that interaction is not this prompt; call status")
    if row.state is not InteractionState.PENDING:
        return Refusal(
            Reason.CONFLICT,
            f"interaction {row.interaction_id} was already answered (or left the screen); it "
            "never takes input again. Call status for the current one",
        )
    found = interactions.offer_of(conn, message.interaction_id, message.controller_id)
    if found is None or found.offer_id != message.offer_id or found.state is not OfferState.OPEN:
        return Refusal(Reason.STATUS_REQUIRED, "call status for this Turn, then answer")
    if found.expires_at <= now:
        return Refusal(Reason.OFFER_EXPIRED, "the offer expired; call status again, then answer")
    return None


def delivery_refusal(prompt: PromptView, state: State, answer: Answer) -> Refusal | None:
    """An async answer's delivery must fit the agent: steered while it works, queued once idle."""
    if prompt.kind is not InteractionKind.ASYNC_QUESTION:
        return None
    working = state is State.WORKING
    if answer.next_turn and working:
        return Refusal(
            Reason.NOT_IDLE,
            "the agent is still working on this turn: answer now with steer_current_turn, or "
            "once the Turn's outcome arrived with queue_next_turn. Nothing was sent",
        )
    if not answer.next_turn and not working:
        return Refusal(
            Reason.INVALID_PARAMS,
            "the agent is no longer working, so this answer would start its next turn: send it "
            "with delivery_mode queue_next_turn (the Turn's next round) once the Turn's outcome "
            "arrived. Nothing was sent",
        )
    return None


def next_turn_message(profile: Profile, prompt: PromptView, answer: Answer) -> str | None:
    """What the agent's file will show as the next round's request, or None if unknown."""
    (question,) = prompt.questions
    if answer.intent is not Intent.CHOOSE or len(answer.chosen) != 1:
        return None
    return profile.next_turn_message(question.prompt, question.options[answer.chosen[0]].label)


def step_of(prompt: PromptView) -> tuple[object, ...]:
    """What makes a prompt step the same step, whatever its cursor or boxes show."""
    return (
        prompt.kind,
        prompt.step,
        prompt.step_index,
        prompt.step_total,
        tuple(question.prompt for question in prompt.questions),
    )


def boxes(snapshot: TerminalSnapshot | None) -> dict[int, bool]:
    """The multi-select boxes on ``snapshot`` by row (rows without a box left out)."""
    prompt = None if snapshot is None else snapshot.observation.prompt
    if prompt is None or not prompt.questions:
        return {}
    return {
        row: option.checked
        for row, option in enumerate(prompt.questions[0].options)
        if option.checked is not None
    }


def detour_refusal(detour: Detour) -> Refusal:
    """The refusal of a step whose keys tmux would not give the agent (`keys.detour`):
    ``manual_required`` for a setting a person must change, ``not_idle`` for a mode."""
    return Refusal(
        Reason.MANUAL_REQUIRED if detour.lasting else Reason.NOT_IDLE,
        f"the pane does not take keys as they are spelled: {detour.why}; nothing was sent. "
        f"{detour.next_step}",
    )
