"""A question is actionable only for the call the agent's own file says is pending.

A screen can misquote what the model asked: each client cuts a long word at the
row's edge, and a row cut between two Chinese characters reads the same whether
the model put a space there or not. And it can hide what matters: Codex draws a
question whose call marks it secret (``isSecret``) as any other, and only masks
its notes once a person types them. The agent's transcript or rollout records
the question tool's call (Claude's AskUserQuestion, Codex's request_user_input)
with the model's exact words before the prompt is answered. So an actionable
question stays actionable only when the one pending call of the profile's tool
asks what the screen shows, compared as `same_words`; it is then offered in the
call's words (`PromptView.asked`), marked `PromptView.secret` where the call
marks it secret (a person's to answer). Anything else becomes not actionable with a reason, which
the projection shows as ``manual_required`` and which gets no keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from akk.evidence import PendingCall
from akk.evidence.model import AskedQuestion
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    OptionRole,
    PromptView,
    QuestionView,
    StepKind,
)
from akk.profiles.permission import PENDING_CALL_MISMATCH, PENDING_CALL_UNKNOWN

ASKED_STEPS = frozenset({StepKind.SINGLE_SELECT, StepKind.MULTI_SELECT, StepKind.FREE_TEXT})
"""The steps that show one of the call's questions (the others show a review or a
confirmation of the whole call)."""


def asks_question(observation: Observation) -> bool:
    """Whether `observation` is an actionable step of a questionnaire (the ones checked here).

    A Codex async question is not: its call is answered at once (``accepted``), so no
    pending call can stand for it.
    """
    prompt = observation.prompt
    return (
        observation.actionable
        and prompt is not None
        and prompt.kind in (InteractionKind.QUESTIONNAIRE, InteractionKind.CONFIRMATION)
    )


def same_words(shown: str, asked: str) -> bool:
    """Whether a screen that reads `shown` can be drawing `asked`: the same characters
    but whitespace.

    Both clients break a long text onto rows, and the profiles join the rows with one
    space, or with none between two wide characters at a full row; the model may have
    put a space at either kind of break. So a break may gain or lose a space, and any
    other character changed, added or removed never matches.
    """
    return "".join(shown.split()) == "".join(asked.split())


def bind_question(
    observation: Observation,
    tool: str,
    calls: Sequence[PendingCall] | None,
    *,
    reviews: bool,
) -> tuple[Observation, PendingCall | None]:
    """`observation` in its call's words with the call it asks, or not actionable with the
    reason why.

    `calls` are the pending calls of the agent's file (None: it could not be read);
    `tool` the profile's question tool; `reviews` whether its client ends a call of
    several questions, or of a multi-select one, on a review step (`reviews_answers`).
    Only an actionable questionnaire step is checked; any other observation comes
    back unchanged, with None.
    """
    if not asks_question(observation):
        return observation, None
    prompt = observation.prompt
    assert prompt is not None
    mine = [call for call in calls or () if call.tool == tool]
    if len(mine) != 1:
        return attrs.evolve(observation, reason=PENDING_CALL_UNKNOWN), None
    (call,) = mine
    asked = call.asked
    bound = None if asked is None else _bound(prompt, asked, reviews)
    if bound is None:
        return attrs.evolve(observation, reason=PENDING_CALL_MISMATCH), None
    return attrs.evolve(observation, prompt=bound), call


def _bound(
    prompt: PromptView, asked: tuple[AskedQuestion, ...], reviews: bool
) -> PromptView | None:
    """`prompt` with its question in the words of `asked`, secret where the step's question
    (or, for a review or confirmation, any question) is marked so; None if it asks
    something else."""
    review = reviews and (len(asked) > 1 or any(question.multi_select for question in asked))
    steps = len(asked) + review
    if prompt.step is StepKind.REVIEW and not (review and prompt.step_index == steps):
        return None
    if prompt.step is not StepKind.CONFIRM and prompt.step_total != steps:
        return None
    if prompt.step not in ASKED_STEPS:
        if not _lists(prompt.reviewed, asked):
            return None
        return attrs.evolve(prompt, secret=any(question.secret for question in asked))
    index = prompt.step_index - 1
    if len(prompt.questions) != 1 or not 0 <= index < len(asked):
        return None
    question = _question(prompt.step, prompt.questions[0], asked[index])
    if question is None:
        return None
    return attrs.evolve(prompt, asked=(question,), secret=asked[index].secret)


def _question(step: StepKind, shown: QuestionView, asked: AskedQuestion) -> QuestionView | None:
    """`shown` in the words of `asked`; None if it is another question.

    Its own options must be the call's, in order (a free-text step whose editor hides
    them shows none); the rows a client adds (Claude's "Type something.", Codex's "None
    of the above") are not the call's and stay as drawn.
    """
    if not same_words(shown.prompt, asked.question):
        return None
    if step is not StepKind.FREE_TEXT and (step is StepKind.MULTI_SELECT) != asked.multi_select:
        return None
    choices = [option for option in shown.options if option.role is OptionRole.CHOICE]
    options = list(shown.options)
    if choices or step is not StepKind.FREE_TEXT:
        if len(choices) != len(asked.options):
            return None
        words = iter(asked.options)
        for at, option in enumerate(options):
            if option.role is OptionRole.CHOICE:
                given = next(words)
                if not (
                    same_words(option.label, given.label)
                    and same_words(option.description, given.description)
                ):
                    return None
                options[at] = attrs.evolve(option, label=given.label, description=given.description)
    return attrs.evolve(
        shown, prompt=asked.question, header=asked.header or shown.header, options=tuple(options)
    )


def _lists(reviewed: tuple[str, ...], asked: tuple[AskedQuestion, ...]) -> bool:
    """Whether a review (or confirmation) listing `reviewed` lists questions of the call, in
    its order."""
    words = iter(asked)
    return all(any(same_words(listed, q.question) for q in words) for listed in reviewed)
