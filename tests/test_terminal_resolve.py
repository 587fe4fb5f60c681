"""Answers resolved against real prompts: by the ids a controller was shown, or refused.

Every prompt is a captured fixture rendered with akk.screen.render and
classified by its exact version's profile; its ids come from a real IdMinter
over the fingerprint of one Appearance, and a controller's answer is built from
the projection it would have seen, never from indexes or keys.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akk.backends.terminal.resolve import PLAN_REFUSALS, Answer, decision, resolve
from akk.profiles.keyplan import Intent, KeyPlanError, PlanRefusal, expand_checked
from akk.profiles.observation import InteractionKind, OptionRole, StepKind
from akk.protocol.errors import Reason, RpcError
from akk.protocol.projection import Shown, project
from akk.protocol.schema import ANSWER, ID_PATTERN
from akk.screen import fingerprint
from akk.screen.fingerprint import Appearance, IdMinter
from tests import corpus
from tests.tier import examples

TERMINAL = "pane %1 pid 4242 started 1700000000"
IDS = IdMinter(b"test_answers: a server-held secret of 32+ bytes")
FIRST = 1_700_000_000_000_000_000  # an appearance number: the TerminalActor's clock in ns
TEXT = "Teal, please"
PROTOCOL_MODES = ("steer_current_turn", "queue_next_turn")


@functools.cache
def shown(path: Path, number: int = FIRST) -> Shown:
    """The fixture's prompt as appearance ``number``, and the projection `status` returns."""
    label, grid = corpus.screen(path)
    profile, observation = corpus.observed(path)
    prompt = observation.prompt
    assert observation.actionable and prompt is not None, observation.reason
    seen = Appearance(
        fingerprint(grid, prompt.region, profile_id=profile.id, terminal_identity=TERMINAL),
        number,
    )
    projection = project(prompt, seen=seen, ids=IDS, agent=label["agent"], turn_id="turn_1")
    return Shown(seen, prompt, projection)


ACTIONABLE = [path for path in corpus.MAIN if corpus.observed(path)[1].actionable]


def _where(test: Callable[[Shown], bool]) -> list[Path]:
    return [path for path in ACTIONABLE if test(shown(path))]


def _step(*steps: StepKind) -> Callable[[Shown], bool]:
    return lambda s: s.prompt.step in steps


def _has_role(*roles: OptionRole) -> Callable[[Shown], bool]:
    return lambda s: any(o.role in roles for q in s.prompt.questions for o in q.options)


PERMISSION = _where(lambda s: s.prompt.kind is InteractionKind.PERMISSION)
# Prompts with a persistent row: all but those a user's ask rule caused (Yes / No only).
PERSISTENT = _where(
    lambda s: (
        s.prompt.kind is InteractionKind.PERMISSION
        and any(o.role is OptionRole.APPROVE_PERSISTENT for o in s.prompt.questions[0].options)
    )
)
QUEUED = _where(_step(StepKind.QUEUED))
ANSWERABLE = _where(
    lambda s: (
        s.prompt.kind is not InteractionKind.PERMISSION and s.prompt.step is not StepKind.QUEUED
    )
)
SINGLE = _where(_step(StepKind.SINGLE_SELECT))
MULTI = _where(_step(StepKind.MULTI_SELECT))
EDITOR = _where(
    lambda s: (
        _step(StepKind.FREE_TEXT)(s)
        or (
            _step(StepKind.SINGLE_SELECT)(s)
            and _has_role(OptionRole.FREE_TEXT, OptionRole.NONE_OF_THE_ABOVE)(s)
        )
    )
)
REVIEW = _where(_step(StepKind.REVIEW))
CONFIRM = _where(_step(StepKind.CONFIRM))
ASYNC = _where(
    lambda s: (
        s.prompt.kind is InteractionKind.ASYNC_QUESTION and s.prompt.step is not StepKind.QUEUED
    )
)
BLOCKING = _where(
    lambda s: s.prompt.kind in (InteractionKind.QUESTIONNAIRE, InteractionKind.CONFIRMATION)
)
SELECTING = _where(
    lambda s: (
        s.prompt.kind is not InteractionKind.PERMISSION
        and s.prompt.step not in (StepKind.FREE_TEXT, StepKind.QUEUED)
    )
)
NO_EDITOR = _where(_step(StepKind.REVIEW, StepKind.CONFIRM))
NONE_OF_THE_ABOVE = _where(_has_role(OptionRole.NONE_OF_THE_ABOVE))


def test_the_corpus_has_every_shape_these_tests_need() -> None:
    for group in (
        PERMISSION,
        SINGLE,
        MULTI,
        EDITOR,
        REVIEW,
        CONFIRM,
        ASYNC,
        QUEUED,
        NONE_OF_THE_ABOVE,
    ):
        assert group
    assert {shown(p).projection["agent"] for p in SINGLE} == {"claude", "codex"}
    assert {shown(p).projection["agent"] for p in PERMISSION} == {"claude", "codex"}


# ---------------------------------------------------------------- what a controller sends


def question(s: Shown) -> dict[str, Any]:
    (only,) = s.projection["questions"]
    assert isinstance(only, dict)
    return only


def option_id(s: Shown, label: str) -> str:
    """The projected option id of the row labelled ``label`` (exactly one)."""
    (found,) = [o["option_id"] for o in question(s)["options"] if o["label"] == label]
    assert isinstance(found, str)
    return found


def row(s: Shown, label: str) -> int:
    """Where the row labelled ``label`` sits among the prompt's rows (what the plan indexes)."""
    (found,) = [i for i, o in enumerate(s.prompt.questions[0].options) if o.label == label]
    return found


def select(s: Shown, *option_ids: str, kind: str | None = None) -> dict[str, Any]:
    """A selection answer (on an editor step, where none is right, shaped as single_select)."""
    shown_kind = question(s)["response_kind"]
    return {
        "question_id": question(s)["question_id"],
        "response_kind": kind or (shown_kind if shown_kind != "free_text" else "single_select"),
        "selected_option_ids": list(option_ids),
    }


def choose(s: Shown, *labels: str, kind: str | None = None) -> dict[str, Any]:
    return select(s, *(option_id(s, label) for label in labels), kind=kind)


def typed(s: Shown, text: str = TEXT) -> dict[str, Any]:
    return {
        "question_id": question(s)["question_id"],
        "response_kind": "free_text",
        "text": text,
    }


def answer(
    s: Shown, answers: Sequence[Mapping[str, Any]], delivery_mode: str | None = None
) -> Answer:
    return resolve(s.prompt, answers, seen=s.seen, ids=IDS, delivery_mode=delivery_mode)


def refused(
    s: Shown, answers: Sequence[Mapping[str, Any]], delivery_mode: str | None = None
) -> RpcError:
    with pytest.raises(RpcError) as raised:
        answer(s, answers, delivery_mode)
    assert raised.value.message  # every refusal says what to do next
    return raised.value


def good(s: Shown) -> dict[str, Any]:
    """An answer the step takes: text on an open editor, else its first projected option."""
    if s.prompt.step is StepKind.FREE_TEXT:
        return typed(s)
    return choose(s, question(s)["options"][0]["label"])


def choices(s: Shown) -> list[str]:
    """The labels of the question's own options, as projected (no role)."""
    return [o["label"] for o in question(s)["options"] if "role" not in o]


def labelled(s: Shown, role: OptionRole) -> str:
    (found,) = [o.label for o in s.prompt.questions[0].options if o.role is role]
    return found


# ---------------------------------------------------------------- answers that resolve


@corpus.each(SINGLE)
def test_single_select_chooses_the_row_of_the_option(path: Path) -> None:
    s = shown(path)
    assert choices(s)
    for label in choices(s):
        resolved = answer(s, [choose(s, label)])
        assert resolved == Answer(Intent.CHOOSE, (row(s, label),))
        assert resolved.kind == "answer"


@corpus.each(MULTI)
def test_multi_select_chooses_every_selected_row_in_the_order_sent(path: Path) -> None:
    s = shown(path)
    labels = choices(s)
    assert len(labels) >= 3
    several = (labels[-1], labels[0], labels[1])
    assert answer(s, [choose(s, *several)]) == Answer(
        Intent.CHOOSE, tuple(row(s, label) for label in several)
    )
    assert answer(s, [choose(s, *labels)]).chosen == tuple(row(s, label) for label in labels)


@corpus.each(EDITOR)
def test_free_text_where_the_step_opens_an_editor(path: Path) -> None:
    s = shown(path)
    resolved = answer(s, [typed(s)])
    assert resolved == Answer(Intent.FREE_TEXT, text=TEXT)
    assert resolved.chosen == () and resolved.kind == "answer"
    assert TEXT not in repr(resolved)  # the controller's text never reaches a log line


@corpus.each(REVIEW)
def test_review_submits_and_leaves_cancel_to_a_person(path: Path) -> None:
    s = shown(path)
    submit, cancel = labelled(s, OptionRole.SUBMIT), labelled(s, OptionRole.CANCEL)
    assert answer(s, [choose(s, submit)]) == Answer(Intent.SUBMIT)
    assert refused(s, [choose(s, cancel)]).reason is Reason.MANUAL_REQUIRED


@corpus.each(CONFIRM)
def test_codex_confirmation_proceeds_or_goes_back(path: Path) -> None:
    s = shown(path)
    assert s.projection["agent"] == "codex"
    proceed, back = labelled(s, OptionRole.PROCEED), labelled(s, OptionRole.GO_BACK)
    assert answer(s, [choose(s, proceed)]) == Answer(Intent.PROCEED)
    assert answer(s, [choose(s, back)]) == Answer(Intent.GO_BACK)


@corpus.each(PERMISSION)
def test_a_permission_takes_a_decision_never_answers(path: Path) -> None:
    s = shown(path)
    approve_once, reject = decision(s.prompt, "approve_once"), decision(s.prompt, "reject")
    assert approve_once == Answer(Intent.APPROVE_ONCE) and approve_once.kind == "approval"
    assert reject == Answer(Intent.REJECT) and reject.kind == "approval"
    options = question(s)["options"]
    for chosen in options:
        sent = {
            "question_id": question(s)["question_id"],
            "response_kind": question(s)["response_kind"],
            "selected_option_ids": [chosen["option_id"]],
        }
        error = refused(s, [sent])
        assert error.reason is Reason.INVALID_PARAMS and "approve" in error.message
    assert refused(s, [typed(s)]).reason is Reason.INVALID_PARAMS


@corpus.each(ANSWERABLE)
def test_a_decision_on_anything_but_a_permission_is_invalid(path: Path) -> None:
    s = shown(path)
    for value in ("approve_once", "reject"):
        with pytest.raises(RpcError) as raised:
            decision(s.prompt, value)
        assert raised.value.reason is Reason.INVALID_PARAMS
        assert "respond_interaction" in raised.value.message


@corpus.each(ASYNC)
def test_an_async_question_takes_the_delivery_modes_it_offers(path: Path) -> None:
    s = shown(path)
    offered = s.projection["delivery_modes"]
    assert offered and set(offered) <= set(PROTOCOL_MODES)
    assert offered == list(PROTOCOL_MODES)
    label = choices(s)[0]
    for mode in (None, *offered):
        expected = Answer(Intent.CHOOSE, (row(s, label),), next_turn=mode == "queue_next_turn")
        assert answer(s, [choose(s, label)], mode) == expected
    for mode in set(PROTOCOL_MODES) - set(offered):
        error = refused(s, [choose(s, label)], mode)
        assert error.reason is Reason.INVALID_PARAMS and mode in error.message


@corpus.each(QUEUED)
def test_a_queued_async_question_is_opened_by_an_empty_answer(path: Path) -> None:
    """Its question shows only in its picker: `answers: []` opens it, nothing else answers it."""
    s = shown(path)
    assert (s.projection["step"], s.projection["questions"]) == (None, [])
    for mode in (None, *s.projection["delivery_modes"]):
        opened = Answer(Intent.OPEN_QUEUED_QUESTION, next_turn=mode == "queue_next_turn")
        assert answer(s, [], mode) == opened
    sent = {"question_id": IDS.question_id(s.seen, 0), "response_kind": "free_text", "text": TEXT}
    error = refused(s, [sent])
    assert error.reason is Reason.INVALID_PARAMS and "answers: []" in error.message
    with pytest.raises(RpcError) as raised:
        decision(s.prompt, "approve_once")
    assert raised.value.reason is Reason.INVALID_PARAMS


@corpus.each(BLOCKING)
def test_a_blocking_prompt_refuses_a_delivery_mode(path: Path) -> None:
    s = shown(path)
    sent = good(s)
    assert isinstance(answer(s, [sent]), Answer)  # the answer itself is good
    assert "delivery_modes" not in s.projection
    for mode in PROTOCOL_MODES:
        error = refused(s, [sent], mode)
        assert error.reason is Reason.INVALID_PARAMS and "delivery_mode" in error.message


# ---------------------------------------------------------------- ids that are refused


@corpus.each(ANSWERABLE)
def test_a_wrong_or_forged_question_id_is_invalid(path: Path) -> None:
    s = shown(path)
    sent = good(s)
    assert isinstance(answer(s, [sent]), Answer)
    other = shown(next(p for p in ANSWERABLE if shown(p).seen != s.seen))
    wrong_ids = [
        "q_forged",
        question(s)["options"][0]["option_id"],  # an option id is no question id
        IDS.question_id(s.seen, 1),  # a second question this step does not have
        question(other)["question_id"],  # another prompt's question
        IdMinter(b"another server's secret, 32 bytes").question_id(s.seen, 0),
    ]
    for wrong in wrong_ids:
        assert refused(s, [{**sent, "question_id": wrong}]).reason is Reason.INVALID_PARAMS
    without = {k: v for k, v in sent.items() if k != "question_id"}
    assert refused(s, [without]).reason is Reason.INVALID_PARAMS
    # One answer per step: the same answer twice is not two answers to one question.
    assert refused(s, [sent, sent]).reason is Reason.INVALID_PARAMS
    assert refused(s, []).reason is Reason.INVALID_PARAMS


@corpus.each(SELECTING)
def test_a_forged_option_id_is_invalid(path: Path) -> None:
    s = shown(path)
    sent = good(s)
    assert isinstance(answer(s, [sent]), Answer)
    rows = len(s.prompt.questions[0].options)
    other = shown(next(p for p in ANSWERABLE if shown(p).seen != s.seen))
    forged = [
        "opt_forged",
        question(s)["question_id"],  # a question id is no option id
        IDS.option_id(s.seen, 0, rows),  # one past the last row
        IDS.option_id(s.seen, 1, 0),  # the first row of a question the step does not have
        question(other)["options"][0]["option_id"],  # another prompt's option
        IdMinter(b"another server's secret, 32 bytes").option_id(s.seen, 0, 0),
    ]
    for option in forged:
        error = refused(s, [{**sent, "selected_option_ids": [option]}])
        assert error.reason is Reason.INVALID_PARAMS
        assert "status" in error.message
        # A forged id among good ones still refuses the whole answer.
        mixed = {**sent, "selected_option_ids": [*sent["selected_option_ids"], option]}
        assert refused(s, [mixed]).reason is Reason.INVALID_PARAMS


@corpus.each(ANSWERABLE)
def test_ids_of_another_appearance_of_the_same_prompt_are_refused(path: Path) -> None:
    before, now = shown(path, FIRST), shown(path, FIRST + 1)
    assert before.seen.fingerprint == now.seen.fingerprint
    assert before.projection["interaction_id"] != now.projection["interaction_id"]
    assert answer(now, [good(now)]) == answer(before, [good(before)])
    # The earlier appearance's whole answer, and the other way round.
    assert refused(now, [good(before)]).reason is Reason.INVALID_PARAMS
    assert refused(before, [good(now)]).reason is Reason.INVALID_PARAMS
    if now.prompt.step is not StepKind.FREE_TEXT:
        # Its option ids under the current question id.
        label = question(now)["options"][0]["label"]
        stale = select(now, option_id(before, label))
        assert refused(now, [stale]).reason is Reason.INVALID_PARAMS


def _hidden_rows() -> list[tuple[Path, int]]:
    """Every row of an answerable prompt that its projection leaves out."""
    hidden = []
    for path in ANSWERABLE:
        s = shown(path)
        projected = {o["option_id"] for o in question(s)["options"]}
        for index, _ in enumerate(s.prompt.questions[0].options):
            if IDS.option_id(s.seen, 0, index) not in projected:
                hidden.append((path, index))
    return hidden


def _moves_the_widget_on(path: Path, index: int) -> bool:
    """A Submit row of a multi-select step: AKK's plan presses it, a controller never sees it."""
    s = shown(path)
    option = s.prompt.questions[0].options[index]
    return option.role is OptionRole.SUBMIT and s.prompt.step is StepKind.MULTI_SELECT


HIDDEN = [(p, i) for p, i in _hidden_rows() if not _moves_the_widget_on(p, i)]
HIDDEN_SUBMIT = [(p, i) for p, i in _hidden_rows() if _moves_the_widget_on(p, i)]


def _hidden_id(case: tuple[Path, int]) -> str:
    path, index = case
    return f"{corpus.name(path)}-{shown(path).prompt.questions[0].options[index].role}"


@corpus.each(HIDDEN, _hidden_id)
def test_an_id_of_a_row_never_projected_is_refused(case: tuple[Path, int]) -> None:
    path, index = case
    s = shown(path)
    assert refused(s, [select(s, IDS.option_id(s.seen, 0, index))]).reason is (
        Reason.INVALID_PARAMS
    )


def test_the_unprojected_submit_row_of_a_multi_select_step_is_refused() -> None:
    assert HIDDEN_SUBMIT
    resolved = []
    for path, index in HIDDEN_SUBMIT:
        s = shown(path)
        try:
            resolved.append(answer(s, [select(s, IDS.option_id(s.seen, 0, index))]))
        except RpcError as exc:
            assert exc.reason is Reason.INVALID_PARAMS
    assert resolved == []


def test_the_corpus_has_unprojected_chat_and_free_text_rows() -> None:
    roles = {shown(p).prompt.questions[0].options[i].role for p, i in HIDDEN}
    assert {OptionRole.CHAT, OptionRole.FREE_TEXT} <= roles


def test_every_permission_without_a_persistent_row_is_an_ask_rule_prompt() -> None:
    without = sorted(set(PERMISSION) - set(PERSISTENT))
    assert without and all("claude_bash_ask_rule" in p.name for p in without), without


@corpus.each(PERSISTENT)
def test_a_persistent_approval_row_is_never_chosen(path: Path) -> None:
    """Even on a prompt that takes answers, the persistent row's id resolves to nothing."""
    s = shown(path)
    confirming = attrs.evolve(s.prompt, kind=InteractionKind.CONFIRMATION, step=StepKind.CONFIRM)
    agent = s.projection["agent"]
    projection = project(confirming, seen=s.seen, ids=IDS, agent=agent, turn_id=None)
    projected = {o["option_id"] for q in projection["questions"] for o in q["options"]}
    persistent = [
        i for i, o in enumerate(s.prompt.questions[0].options)
        if o.role is OptionRole.APPROVE_PERSISTENT
    ]  # fmt: skip
    assert persistent
    for index in persistent:
        option = IDS.option_id(s.seen, 0, index)
        assert option not in projected
        sent = {
            "question_id": IDS.question_id(s.seen, 0),
            "response_kind": "confirm",
            "selected_option_ids": [option],
        }
        with pytest.raises(RpcError) as raised:
            resolve(confirming, [sent], seen=s.seen, ids=IDS, delivery_mode=None)
        assert raised.value.reason is Reason.INVALID_PARAMS


# ---------------------------------------------------------------- answers of the wrong kind


@corpus.each(SINGLE + MULTI)
def test_a_choice_with_another_response_kind_is_invalid(path: Path) -> None:
    s = shown(path)
    label = choices(s)[0]
    for kind in ("single_select", "multi_select", "confirm"):
        if kind == question(s)["response_kind"]:
            continue
        error = refused(s, [choose(s, label, kind=kind)])
        expected = question(s)["response_kind"]
        assert error.reason is Reason.INVALID_PARAMS
        assert error.message.endswith(
            f"nothing was sent. Answer with response_kind {expected!r}, as status shows it"
        )


@corpus.each(NO_EDITOR)
def test_free_text_where_no_editor_opens_is_invalid(path: Path) -> None:
    s = shown(path)
    error = refused(s, [typed(s)])
    assert error.reason is Reason.INVALID_PARAMS and "selected_option_ids" in error.message


@corpus.each(NONE_OF_THE_ABOVE)
def test_none_of_the_above_by_id_asks_for_the_text(path: Path) -> None:
    s = shown(path)
    none = labelled(s, OptionRole.NONE_OF_THE_ABOVE)
    error = refused(s, [choose(s, none)])
    assert error.reason is Reason.INVALID_PARAMS and "free_text" in error.message


# ---------------------------------------------------------------- what the plan refuses


def test_every_plan_refusal_has_a_protocol_reason() -> None:
    assert all(isinstance(reason, Reason) for reason in PLAN_REFUSALS.values())
    assert [r for r in PlanRefusal if r not in PLAN_REFUSALS] == []


def test_a_codex_option_numbered_ten_is_refused_with_a_reason() -> None:
    """Resolving is fine; the plan has no key for row 10, and that refusal needs a reason."""
    path = next(p for p in SINGLE if shown(p).projection["agent"] == "codex")
    s = shown(path)
    rows = tuple(
        attrs.evolve(s.prompt.questions[0].options[0], label=f"o{n}", number=n, current=n == 1)
        for n in range(1, 12)
    )
    long = attrs.evolve(s.prompt, questions=(attrs.evolve(s.prompt.questions[0], options=rows),))
    projection = project(long, seen=s.seen, ids=IDS, agent="codex", turn_id=None)
    tenth = Shown(s.seen, long, projection)
    resolved = answer(tenth, [choose(tenth, "o10")])
    assert resolved == Answer(Intent.CHOOSE, (9,))
    profile, _ = corpus.observed(path)
    plan = profile.key_plans.plan_for(long.kind, long.step, resolved.intent)
    with pytest.raises(KeyPlanError) as raised:
        expand_checked(plan, rows, chosen=resolved.chosen)
    assert raised.value.reason is PlanRefusal.NO_NUMBER_KEY
    assert PLAN_REFUSALS[raised.value.reason] is Reason.MANUAL_REQUIRED


def _expand(path: Path, resolved: Answer) -> None:
    profile, _ = corpus.observed(path)
    s = shown(path)
    plan = profile.key_plans.plan_for(s.prompt.kind, s.prompt.step, resolved.intent)
    expand_checked(plan, s.prompt.questions[0].options, chosen=resolved.chosen, text=resolved.text)


@corpus.each(SINGLE)
def test_a_resolved_answer_the_plan_refuses_is_the_controllers_mistake(path: Path) -> None:
    """What resolve leaves to the plan (how many rows, which text) maps to invalid_params."""
    s = shown(path)
    labels = choices(s)
    mistakes: list[tuple[dict[str, Any], PlanRefusal]] = [
        (choose(s, labels[0], labels[1]), PlanRefusal.ONE_OPTION_ONLY),
        (choose(s), PlanRefusal.NO_OPTION_CHOSEN),
    ]
    if path in EDITOR and s.prompt.kind is not InteractionKind.ASYNC_QUESTION:
        texts = [("", PlanRefusal.NO_TEXT), ("two\nlines", PlanRefusal.UNSAFE_TEXT)]
        texts += [
            ("\x1b[200~", PlanRefusal.UNSAFE_TEXT),
            ("hi\ud800there", PlanRefusal.UNSAFE_TEXT),
        ]
        for text, why in texts:
            # The text rule refuses it while resolving, before any actor; the plan does too.
            with pytest.raises(RpcError) as refused:
                answer(s, [typed(s, text)])
            assert refused.value.reason is Reason.INVALID_PARAMS
            with pytest.raises(KeyPlanError) as raised:
                _expand(path, Answer(Intent.FREE_TEXT, text=text))
            assert raised.value.reason is why
    for sent, why in mistakes:
        resolved = answer(s, [sent])
        with pytest.raises(KeyPlanError) as raised:
            _expand(path, resolved)
        assert raised.value.reason is why
        assert PLAN_REFUSALS[raised.value.reason] is Reason.INVALID_PARAMS


@corpus.each(ASYNC)
def test_text_for_an_async_question_resolves_and_its_missing_plan_needs_a_person(
    path: Path,
) -> None:
    s = shown(path)
    resolved = answer(s, [typed(s)], s.projection["delivery_modes"][0])
    assert resolved == Answer(Intent.FREE_TEXT, text=TEXT)
    with pytest.raises(KeyPlanError) as raised:
        _expand(path, resolved)
    assert raised.value.reason is PlanRefusal.NO_PLAN
    assert PLAN_REFUSALS[raised.value.reason] is Reason.MANUAL_REQUIRED


# ---------------------------------------------------------------- any answer of the right shape

PROPERTY_PATHS = sorted(
    {
        *(group[0] for group in (PERMISSION, SINGLE, MULTI, EDITOR, REVIEW, CONFIRM, ASYNC)),
        *(group[-1] for group in (PERMISSION, SINGLE, MULTI, EDITOR, REVIEW, CONFIRM, ASYNC)),
    }
)
KINDS = ["single_select", "multi_select", "confirm"]
MODES = [None, *PROTOCOL_MODES]
IDISH = st.from_regex(ID_PATTERN, fullmatch=True)


@st.composite
def requests(draw: st.DrawFn) -> tuple[Shown, list[dict[str, Any]], str | None]:
    """A prompt and answers of the protocol's shape: mostly its own ids, some stale or forged."""
    s = shown(draw(st.sampled_from(PROPERTY_PATHS)), FIRST + draw(st.integers(0, 1)))
    other = shown(draw(st.sampled_from(PROPERTY_PATHS)), FIRST + draw(st.integers(0, 1)))
    rows = len(s.prompt.questions[0].options)
    mine = IDS.question_id(s.seen, 0)
    kind = s.prompt.questions[0].response_kind.value
    kind = kind if kind in KINDS else "single_select"
    question_ids = st.one_of(
        st.just(mine),
        st.sampled_from([mine, IDS.question_id(s.seen, 1), IDS.question_id(other.seen, 0)]),
        IDISH,
    )
    option_ids = st.one_of(
        st.builds(IDS.option_id, st.just(s.seen), st.just(0), st.integers(0, rows - 1)),
        st.builds(IDS.option_id, st.just(s.seen), st.integers(0, 1), st.integers(0, rows)),
        st.builds(IDS.option_id, st.just(other.seen), st.just(0), st.integers(0, rows)),
        IDISH,
    )
    select = st.fixed_dictionaries(
        {
            "question_id": question_ids,
            "response_kind": st.one_of(st.just(kind), st.sampled_from(KINDS)),
            "selected_option_ids": st.lists(option_ids, max_size=4),
        }
    )
    text = st.fixed_dictionaries(
        {
            "question_id": question_ids,
            "response_kind": st.just("free_text"),
            "text": st.text(max_size=50),
        }
    )
    one = st.one_of(select, text)
    answers = draw(
        st.one_of(st.lists(one, min_size=1, max_size=1), st.lists(one, min_size=1, max_size=3))
    )
    return s, answers, draw(st.one_of(st.none(), st.sampled_from(MODES)))


# Built once: `jsonschema.validate` checks the schema and builds a validator per call.
ANSWER_SHAPE = jsonschema.validators.validator_for(ANSWER)(ANSWER)


@settings(max_examples=examples(400))
@given(requests())
def test_resolve_only_ever_refuses_with_a_reason(
    drawn: tuple[Shown, list[dict[str, Any]], str | None],
) -> None:
    s, answers, mode = drawn
    for sent in answers:
        ANSWER_SHAPE.validate(sent)
    try:
        resolved = answer(s, answers, mode)
    except RpcError as exc:
        assert exc.reason in (Reason.INVALID_PARAMS, Reason.MANUAL_REQUIRED)
        assert exc.message
        return
    (sent,) = answers
    assert sent["question_id"] == IDS.question_id(s.seen, 0)
    assert s.prompt.kind is not InteractionKind.PERMISSION
    assert mode is None or mode in s.projection.get("delivery_modes", [])
    if resolved.intent is Intent.FREE_TEXT:
        assert resolved.text == sent["text"] and resolved.chosen == ()
        return
    # Every row it names is one this appearance minted (a KeyError here is a forged id let in).
    options = s.prompt.questions[0].options
    rows_by_id = {IDS.option_id(s.seen, 0, i): i for i in range(len(options))}
    named = [rows_by_id[o] for o in sent["selected_option_ids"]]
    if resolved.intent is Intent.CHOOSE:
        assert tuple(named) == resolved.chosen
        assert all(options[i].role is OptionRole.CHOICE for i in named)
        assert sent["response_kind"] == s.prompt.questions[0].response_kind.value
        return
    (only,) = named
    assert resolved.chosen == () and resolved.text is None
    assert (options[only].role, resolved.intent) in {
        (OptionRole.SUBMIT, Intent.SUBMIT),
        (OptionRole.PROCEED, Intent.PROCEED),
        (OptionRole.GO_BACK, Intent.GO_BACK),
    }
