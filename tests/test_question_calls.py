"""A question is actionable only for the pending call that asks it (`akk.profiles.question_call`).

1. The agents' files: the pending call of each question tool, read from records of
   the shapes the pinned versions write (Claude's AskUserQuestion ``tool_use``,
   Codex's request_user_input ``function_call``, its arguments a JSON text), holds
   the model's exact words; an input of any other shape asks nothing.
2. Every captured question step, review and confirmation of both agents (all
   sizes and variants) binds to its scenario's call and is offered in the call's
   exact words; one character changed in the question, a label or a description,
   another step's count, or a single-select call under a multi-select screen, leaves
   it not actionable; so do no call, two calls and an unreadable file.
3. A call that marks its question secret (Codex's ``isSecret``) makes the step,
   and the confirmation of its call, a person's to answer (``secret_input``),
   although the screen draws it as any other question.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from akk.actors.terminal_board import refused_for
from akk.evidence import PendingCall, claude, codex
from akk.evidence.model import (
    AskedOption,
    AskedQuestion,
    Record,
    asked_questions,
    input_digest,
)
from akk.profiles.observation import Observation, OptionRole, StepKind
from akk.profiles.permission import PENDING_CALL_MISMATCH, PENDING_CALL_UNKNOWN
from akk.profiles.question_call import ASKED_STEPS, asks_question, bind_question, same_words
from akk.protocol.wakeups import SECRET_INPUT
from akk.qualify.scenarios import (
    CJK_ASKED,
    CJK_SPACED,
    FLAGGED_SECRET,
    SCENARIOS,
    AskUserQuestion,
    Question,
    RequestUserInput,
)
from tests import corpus

TOOL = {"claude": "AskUserQuestion", "codex": "request_user_input"}
REVIEWS = {"claude": True, "codex": False}


def asked_of(question: Question) -> AskedQuestion:
    """What a call holds of a scenario's question."""
    options = tuple(AskedOption(o.label, o.description) for o in question.options)
    return AskedQuestion(
        question.question, question.header, options, question.multi_select, question.secret
    )


def pending_question(
    agent: str, asked: tuple[AskedQuestion, ...], call_id: str = "call_1"
) -> PendingCall:
    return PendingCall(call_id, TOOL[agent], None, input_digest(repr(asked)), asked)


def _bind(
    agent: str, observation: Observation, calls: list[PendingCall] | None
) -> tuple[Observation, PendingCall | None]:
    """`bind_question` as the agent's profile calls it."""
    return bind_question(observation, TOOL[agent], calls, reviews=REVIEWS[agent])


def _scenario_call(label: corpus.Label) -> tuple[AskedQuestion, ...]:
    """The questions of the one question call the screen's scenario makes."""
    (reply,) = [
        step.reply
        for step in SCENARIOS[label["scenario"]].steps
        if isinstance(step.reply, AskUserQuestion | RequestUserInput)
    ][:1]
    assert isinstance(reply, AskUserQuestion | RequestUserInput)
    return tuple(asked_of(question) for question in reply.questions)


# ---------------------------------------------------------------- 1. the agents' files


def test_claude_s_pending_ask_user_question_holds_the_model_s_words() -> None:
    asked = {
        "questions": [
            {
                "question": CJK_ASKED.question,
                "header": CJK_ASKED.header,
                "multiSelect": False,
                "options": [{"label": o.label, "description": o.description}
                            for o in CJK_ASKED.options],
            }
        ]
    }  # fmt: skip
    record = {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_lab_0", "name": "AskUserQuestion", "input": asked}
            ],
        },
    }
    (call,) = claude.open_calls([Record(0, record)])
    assert (call.tool, call.command) == ("AskUserQuestion", None)
    assert call.asked == (asked_of(CJK_ASKED),)


def test_codex_s_pending_request_user_input_holds_the_model_s_words() -> None:
    arguments = {
        "questions": [
            {
                "id": "q1",
                "header": FLAGGED_SECRET.header,
                "question": FLAGGED_SECRET.question,
                "options": [{"label": o.label, "description": o.description}
                            for o in FLAGGED_SECRET.options],
                "isSecret": True,
            }
        ]
    }  # fmt: skip
    record = {
        "type": "response_item",
        "payload": {
            "type": "function_call",
            "name": "request_user_input",
            "arguments": json.dumps(arguments),
            "call_id": "call_lab_0",
        },
    }
    (call,) = codex.open_calls([Record(0, record)])
    assert call.tool == "request_user_input"
    assert call.asked == (asked_of(FLAGGED_SECRET),)
    assert call.asked[0].secret


@pytest.mark.parametrize(
    "given",
    [
        None,
        "text",
        {},
        {"questions": []},
        {"questions": "q"},
        {"questions": [{"header": "h", "options": []}]},  # no words
        {"questions": [{"question": 1, "header": "h"}]},
        {"questions": [{"question": "q", "header": 2}]},
        {"questions": [{"question": "q", "header": "h", "options": [{"description": "d"}]}]},
        {"questions": [{"question": "q", "header": "h", "options": ["label"]}]},
        {"questions": [{"question": "q", "header": "h", "multiSelect": "yes"}]},
        {"questions": [{"question": "q", "header": "h", "isSecret": 1}]},
        {"questions": [{"question": "q", "header": "h"}, "second"]},
    ],
)
def test_an_input_of_another_shape_asks_nothing(given: object) -> None:
    assert asked_questions(given) is None


def test_a_question_answered_in_notes_only_has_no_options() -> None:
    (asked,) = asked_questions({"questions": [{"id": "q1", "header": "", "question": "Why?",
                                               "options": None}]}) or ()  # fmt: skip
    assert asked == AskedQuestion("Why?", "", ())


# ---------------------------------------------------------------- 2. every captured question


def _asks(path: Path) -> bool:
    label = corpus.label(path)
    if "scenario" not in label or label["expected"]["state"] != "questionnaire":
        return False
    _, observation = corpus.observed(path)
    return asks_question(observation)


QUESTIONS = [path for agent in TOOL for path in corpus.every(agent) if _asks(path)]


def test_the_corpus_holds_every_kind_of_question_step() -> None:
    steps = {(corpus.label(p)["agent"], corpus.observed(p)[1].prompt.step) for p in QUESTIONS}  # type: ignore[union-attr]
    assert steps >= {
        ("claude", StepKind.SINGLE_SELECT), ("claude", StepKind.MULTI_SELECT),
        ("claude", StepKind.FREE_TEXT), ("claude", StepKind.REVIEW),
        ("codex", StepKind.SINGLE_SELECT), ("codex", StepKind.FREE_TEXT),
        ("codex", StepKind.CONFIRM),
    }  # fmt: skip
    assert len(QUESTIONS) > 500


def _changed(text: str) -> str:
    """`text` with one character more than whitespace could explain."""
    return text + "x"


def _mismatches(
    asked: tuple[AskedQuestion, ...], index: int
) -> dict[str, tuple[AskedQuestion, ...]]:
    """Calls that differ from `asked` in one word of its question `index`, or in shape."""
    question = asked[index]
    found: dict[str, tuple[AskedQuestion, ...]] = {
        "the question": (attrs.evolve(question, question=_changed(question.question)),),
        "one question more": (*asked, question),
    }
    for at, option in enumerate(question.options):
        for field in ("label", "description"):
            options = list(question.options)
            options[at] = attrs.evolve(option, **{field: _changed(getattr(option, field))})
            found[f"option {at + 1}'s {field}"] = (attrs.evolve(question, options=tuple(options)),)
    found["an option more"] = (
        attrs.evolve(question, options=(*question.options, AskedOption("More", ""))),
    )
    return {
        why: asked[:index] + changed + asked[index + 1 :] if len(changed) == 1 else changed
        for why, changed in found.items()
    }


@corpus.each(QUESTIONS)
def test_a_question_binds_to_its_call_and_is_offered_in_its_words(path: Path) -> None:
    label = corpus.label(path)
    _, observation = corpus.observed(path)
    prompt = observation.prompt
    assert prompt is not None
    agent, asked = label["agent"], _scenario_call(label)
    call = pending_question(agent, asked)
    bound, matched = _bind(agent, observation, [call])
    assert matched == call and bound.actionable, bound.reason
    assert bound.prompt is not None
    assert bound.prompt.secret == any(question.secret for question in asked)
    assert bound.prompt == prompt  # the drawing is the same; the call's words come beside it
    if prompt.step not in ASKED_STEPS:  # a review or confirmation of the whole call
        assert bound.prompt.offered == prompt.questions
        if prompt.reviewed:  # a review that lists another question asks another call
            other = [pending_question(agent, _mismatches(asked, 0)["the question"])]
            assert not _bind(agent, observation, other)[0].actionable
        return
    index = prompt.step_index - 1
    (question,) = bound.prompt.offered
    assert question.prompt == asked[index].question
    assert question.header == (asked[index].header or prompt.questions[0].header)
    choices = [(o.label, o.description) for o in question.options if o.role is OptionRole.CHOICE]
    if choices or prompt.step is not StepKind.FREE_TEXT:
        assert choices == [(o.label, o.description) for o in asked[index].options]
    for why, calls in _mismatches(asked, index).items():
        if prompt.step is StepKind.FREE_TEXT and not choices and "option" in why:
            continue  # the editor hides the options: only the question is compared
        refused, none = _bind(agent, observation, [pending_question(agent, calls)])
        assert none is None and refused.reason == PENDING_CALL_MISMATCH, why
        assert refused.prompt == observation.prompt, why
    if prompt.step is not StepKind.FREE_TEXT:
        flipped = attrs.evolve(asked[index], multi_select=not asked[index].multi_select)
        other = (*asked[:index], flipped, *asked[index + 1 :])
        assert not _bind(agent, observation, [pending_question(agent, other)])[0].actionable


@corpus.each(QUESTIONS[::25])
def test_a_question_without_its_one_call_is_a_person_s(path: Path) -> None:
    label = corpus.label(path)
    _, observation = corpus.observed(path)
    agent, asked = label["agent"], _scenario_call(label)
    other_tool = attrs.evolve(pending_question(agent, asked), tool="Bash")
    for why, calls in {
        "the file unreadable": None,
        "no pending call": [],
        "another tool's call only": [other_tool],
        "two calls": [pending_question(agent, asked), pending_question(agent, asked, "call_2")],
    }.items():
        bound, matched = _bind(agent, observation, calls)
        assert matched is None and bound.reason == PENDING_CALL_UNKNOWN, why


def test_a_whitespace_difference_alone_is_the_same_words() -> None:
    assert same_words("核对会重 写每一个", "核对会重写每一个")
    assert same_words("核对会重写每一个", "核对会 重写每一个")
    assert same_words("Which deploy\nstage", "Which deploy stage")
    assert not same_words("Which deploy stage", "Which deploy stages")
    assert not same_words("Which deploy stage", "Which deploy stage?")


# ---------------------------------------------------------------- 3. a call marked secret

SECRET_SCREENS = sorted((corpus.ROOT / "codex").glob("**/codex_rui_flagged_secret-*.json"))


def test_every_pinned_codex_has_the_flagged_secret_question() -> None:
    assert {corpus.label(p)["version"] for p in SECRET_SCREENS} == {
        path.name for path in (corpus.ROOT / "codex").iterdir() if path.is_dir()
    }


@corpus.each(SECRET_SCREENS)
def test_a_question_its_call_marks_secret_is_a_person_s(path: Path) -> None:
    _, observation = corpus.observed(path)
    assert observation.actionable  # the screen alone draws it as any other question
    assert refused_for(observation) is None
    (asked,) = _scenario_call(corpus.label(path))
    assert asked.secret
    bound, call = _bind("codex", observation, [pending_question("codex", (asked,))])
    assert call is not None and bound.prompt is not None and bound.prompt.secret
    assert refused_for(bound) == SECRET_INPUT
    assert bound.prompt.offered[0].prompt == FLAGGED_SECRET.question


def test_a_confirmation_of_a_call_with_a_secret_question_is_a_person_s() -> None:
    (path,) = [p for p in QUESTIONS if corpus.label(p)["step"] == "unanswered"][:1]
    _, observation = corpus.observed(path)
    asked = _scenario_call(corpus.label(path))
    marked = (attrs.evolve(asked[0], secret=True), *asked[1:])
    bound, call = _bind("codex", observation, [pending_question("codex", marked)])
    assert call is not None and refused_for(bound) == SECRET_INPUT
    unmarked, _ = _bind("codex", observation, [pending_question("codex", asked)])
    assert refused_for(unmarked) is None


def test_only_actionable_questions_are_checked() -> None:
    path = QUESTIONS[0]
    _, observation = corpus.observed(path)
    for other in (
        attrs.evolve(observation, reason="unknown_shape"),
        Observation(observation.state, observation.profile_id),
    ):
        assert bind_question(other, "AskUserQuestion", None, reviews=True) == (other, None)


CJK_CUT = sorted(
    [*(corpus.ROOT / "claude").glob("*/80x24/questionnaire_cjk-q1.json"),
     *(corpus.ROOT / "codex").glob("*/80x24/codex_rui_cjk-q1.json")]
)  # fmt: skip


@pytest.mark.parametrize("path", CJK_CUT, ids=corpus.name)
def test_a_space_no_screen_shows_is_offered_as_its_call_has_it(path: Path) -> None:
    """The model's space just where the row is cut (`CJK_SPACED`) leaves the screen as it
    is without it: only the call says it is there, and the question is offered with it."""
    label = corpus.label(path)
    _, observation = corpus.observed(path)
    spaced = CJK_SPACED[label["agent"]]
    assert spaced.question != CJK_ASKED.question
    bound, call = _bind(
        label["agent"], observation, [pending_question(label["agent"], (asked_of(spaced),))]
    )
    assert call is not None and bound.prompt is not None
    assert bound.prompt.offered[0].prompt == spaced.question
    assert observation.prompt is not None
    assert observation.prompt.questions[0].prompt == CJK_ASKED.question  # as the screen reads
