"""A controller's answer to a screen's prompt, resolved into what the terminal's key plan needs.

Controllers answer by meaning: opaque question and option ids, typed answers,
or a permission decision. This module turns that into an `Answer` (the plan's
intent, the chosen rows by index, the free text) for exactly one appearance of
a prompt, or refuses with a protocol reason and a next step. It is pure: the
TerminalActor resolves again on the screen it recaptured, so what it types is
decided by the screen it proved, never by an older one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from akk.profiles.keyplan import Intent, PlanRefusal
from akk.profiles.observation import (
    InteractionKind,
    OptionRole,
    PromptView,
    QuestionView,
    ResponseKind,
    StepKind,
)
from akk.protocol.errors import Reason, RpcError
from akk.protocol.projection import shown_roles
from akk.protocol.text_check import check_text
from akk.screen.fingerprint import Appearance, IdMinter

DECISIONS: Mapping[str, Intent] = {"approve_once": Intent.APPROVE_ONCE, "reject": Intent.REJECT}

# A selected row's role decides the intent where it is not one of the question's options.
_ROLE_INTENT: Mapping[OptionRole, Intent] = {
    OptionRole.SUBMIT: Intent.SUBMIT,
    OptionRole.PROCEED: Intent.PROCEED,
    OptionRole.GO_BACK: Intent.GO_BACK,
}

PLAN_REFUSALS: Mapping[PlanRefusal, Reason] = {
    PlanRefusal.NO_PLAN: Reason.MANUAL_REQUIRED,
    PlanRefusal.CURSOR_UNKNOWN: Reason.MANUAL_REQUIRED,
    PlanRefusal.PERSISTENT_APPROVAL: Reason.MANUAL_REQUIRED,
    PlanRefusal.ROW_MISSING: Reason.MANUAL_REQUIRED,
    PlanRefusal.NO_BOX: Reason.MANUAL_REQUIRED,
    PlanRefusal.NO_NUMBER_KEY: Reason.MANUAL_REQUIRED,
    PlanRefusal.OPTION_NOT_ON_SCREEN: Reason.PROMPT_CHANGED,
    PlanRefusal.NOT_A_CHOICE: Reason.INVALID_PARAMS,
    PlanRefusal.OPTIONS_NOT_ACCEPTED: Reason.INVALID_PARAMS,
    PlanRefusal.ONE_OPTION_ONLY: Reason.INVALID_PARAMS,
    PlanRefusal.NO_OPTION_CHOSEN: Reason.INVALID_PARAMS,
    PlanRefusal.DUPLICATE_OPTION: Reason.INVALID_PARAMS,
    PlanRefusal.TEXT_NOT_ACCEPTED: Reason.INVALID_PARAMS,
    PlanRefusal.NO_TEXT: Reason.INVALID_PARAMS,
    PlanRefusal.UNSAFE_TEXT: Reason.INVALID_PARAMS,
}
"""The protocol reason of every way a key plan refuses (each one maps; tests check it)."""


@attrs.frozen
class Answer:
    """What one input-bearing step must do on its prompt (never keys: the plan makes those)."""

    intent: Intent
    chosen: tuple[int, ...] = ()
    text: str | None = attrs.field(default=None, repr=False)  # never logged
    next_turn: bool = False  # an async answer delivered as the Turn's next round

    @property
    def kind(self) -> str:
        """The dispatch kind of the receipt: an approval or a questionnaire answer."""
        return "approval" if self.intent in (Intent.APPROVE_ONCE, Intent.REJECT) else "answer"


def decision(prompt: PromptView, value: str) -> Answer:
    """`approve {decision}` on a permission prompt."""
    if prompt.kind is not InteractionKind.PERMISSION:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"the pending interaction is a {prompt.kind.value}, not a permission; answer it "
            "with respond_interaction",
        )
    return Answer(DECISIONS[value])


def resolve(
    prompt: PromptView,
    answers: Sequence[Mapping[str, Any]],
    *,
    seen: Appearance,
    ids: IdMinter,
    delivery_mode: str | None,
) -> Answer:
    """`respond_interaction {answers}` on the step ``prompt`` shows, by the ids of ``seen``."""
    if prompt.kind is InteractionKind.PERMISSION:
        raise RpcError(
            Reason.INVALID_PARAMS,
            "this interaction is a permission prompt; answer it with approve "
            "{turn_id, decision: approve_once | reject}",
        )
    if delivery_mode is not None and prompt.kind is not InteractionKind.ASYNC_QUESTION:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"delivery_mode applies to async questions only; this {prompt.kind.value} blocks "
            "the agent until it is answered: send the answers without delivery_mode",
        )
    next_turn = delivery_mode == "queue_next_turn"
    if prompt.step is StepKind.QUEUED:
        if answers:
            raise RpcError(
                Reason.INVALID_PARAMS,
                "this async question is still queued: its question and options show only once "
                "it is opened. Send answers: [] to open it, then answer the interaction that "
                "follows",
            )
        return Answer(Intent.OPEN_QUEUED_QUESTION, next_turn=next_turn)
    if len(prompt.questions) != 1:
        raise RpcError(
            Reason.MANUAL_REQUIRED,
            f"this step shows {len(prompt.questions)} questions at once, which AKK does not "
            "answer; answer it in the terminal",
        )
    question_id = ids.question_id(seen, 0)
    if len(answers) != 1 or answers[0].get("question_id") != question_id:
        raise RpcError(
            Reason.INVALID_PARAMS,
            "answers must hold exactly one answer, for the question_id the step shows "
            "(status has it); this step has one question",
        )
    answer = _one(prompt.step, prompt.questions[0], answers[0], seen, ids)
    return attrs.evolve(answer, next_turn=next_turn)


def _one(
    step: StepKind,
    question: QuestionView,
    answer: Mapping[str, Any],
    seen: Appearance,
    ids: IdMinter,
) -> Answer:
    if answer["response_kind"] == ResponseKind.FREE_TEXT.value:
        opens_editor = step is StepKind.FREE_TEXT or any(
            o.role in (OptionRole.FREE_TEXT, OptionRole.NONE_OF_THE_ABOVE) for o in question.options
        )
        if not opens_editor:
            raise RpcError(
                Reason.INVALID_PARAMS,
                "this question takes no free text; answer with selected_option_ids from status",
            )
        text: str = answer["text"]
        # One line typed into the prompt's editor; its version's specials are proven there.
        check_text(text, "the free text", specials=(), lines=False)
        return Answer(Intent.FREE_TEXT, text=text)
    ids_by_row = {
        ids.option_id(seen, 0, row): row
        for row, option in enumerate(question.options)
        if option.role in shown_roles(step)  # a row never shown is never chosen
    }
    chosen: list[int] = []
    for option_id in answer["selected_option_ids"]:
        row = ids_by_row.get(option_id)
        if row is None:
            raise RpcError(
                Reason.INVALID_PARAMS,
                f"option {option_id[:80]!r} is not an option of this step (ids change whenever "
                "the prompt does); call status and use its option ids",
            )
        chosen.append(row)
    roles = {question.options[row].role for row in chosen}
    if roles <= {OptionRole.CHOICE}:
        expected = question.response_kind.value
        if answer["response_kind"] != expected:
            raise RpcError(
                Reason.INVALID_PARAMS,
                f"this question's response_kind is {expected}, not {answer['response_kind']}; "
                f"nothing was sent. Answer with response_kind {expected!r}, as status shows it",
            )
        return Answer(Intent.CHOOSE, tuple(chosen))
    if len(chosen) == 1 and (intent := _ROLE_INTENT.get(question.options[chosen[0]].role)):
        return Answer(intent)
    if roles & {OptionRole.NONE_OF_THE_ABOVE, OptionRole.FREE_TEXT}:
        raise RpcError(
            Reason.INVALID_PARAMS,
            "that row takes your own text: send {question_id, response_kind: free_text, text}",
        )
    raise RpcError(
        Reason.MANUAL_REQUIRED,
        "AKK does not choose that row for a controller (cancel belongs to the person at the "
        "terminal); answer it there, or choose another option",
    )
