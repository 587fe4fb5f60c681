"""Key plans on real screens: every family's plans expand to the keys a person would press.

Fixtures are rendered with akk.screen.render and classified by their exact
version's profile; the plans come from that profile. A small cursor simulator
replays the expanded keys over the rows to check where each key lands.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akk.profiles.keyplan import (
    AwaitEditor,
    Boundary,
    EnterGuard,
    Intent,
    KeyPlan,
    KeyPlanError,
    KeyPlans,
    Keystroke,
    LiteralText,
    MoveToChosen,
    MoveToRole,
    PlanKey,
    PlanRefusal,
    PlanStep,
    Press,
    PressChosenNumber,
    PressRoleNumber,
    PressShortcut,
    TextCheck,
    TmuxKey,
    ToggleChosen,
    TypeText,
    expand,
    expand_checked,
    pieces,
)
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    OptionRole,
    OptionView,
    PromptView,
    StepKind,
)
from akk.profiles.registry import PROFILES, Profile
from akk.store.dispatches import Stage
from tests import corpus
from tests.tier import examples

VERSIONS = {agent: sorted(v for a, v in PROFILES if a == agent) for agent in ("claude", "codex")}
TEXT = "Teal, please"


def observe(agent: str, version: str, name: str) -> tuple[Profile, Observation]:
    """The fixture `name` (120x40) classified by its exact version's profile."""
    return corpus.observed(corpus.ROOT / agent / version / f"{name}.json")


def prompt_of(observation: Observation) -> PromptView:
    assert observation.actionable and observation.prompt is not None, observation.reason
    return observation.prompt


def keys(*names: str) -> tuple[TmuxKey, ...]:
    return tuple(TmuxKey(name) for name in names)


def answer(
    agent: str,
    version: str,
    name: str,
    intent: Intent,
    chosen: tuple[int, ...] = (),
    text: str | None = None,
) -> tuple[Keystroke, ...]:
    """Expand the profile's plan for `intent` on fixture `name`."""
    profile, observation = observe(agent, version, name)
    prompt = prompt_of(observation)
    plan = profile.key_plans.plan_for(prompt.kind, prompt.step, intent)
    options = prompt.questions[0].options if prompt.questions else ()  # a queued question: none
    return expand(plan, options, chosen=chosen, text=text)


def replay(options: tuple[OptionView, ...], sent: tuple[Keystroke, ...]) -> int | None:
    """Follow the cursor through `sent`; fail if a key other than a move lands on a persistent row.

    Returns the final cursor row (None when there are no rows).
    """
    current = [i for i, option in enumerate(options) if option.current]
    cursor = current[0] if len(current) == 1 else None
    for key in sent:
        if key in (TmuxKey("Down"), TmuxKey("Up")):
            assert cursor is not None
            cursor += 1 if key == TmuxKey("Down") else -1
            assert 0 <= cursor < len(options), f"moved off the menu: {sent}"
            continue
        if isinstance(key, LiteralText):
            assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in key.text), key
        if isinstance(key, TmuxKey) and key.name.isdigit():
            # A number key takes the row drawn with that number (and answers it).
            numbered = [i for i, option in enumerate(options) if option.number == int(key.name)]
            assert len(numbered) == 1, f"no single row numbered {key.name}: {sent}"
            cursor = numbered[0]
        if cursor is not None:
            assert options[cursor].role is not OptionRole.APPROVE_PERSISTENT, sent
    if cursor is not None:
        assert options[cursor].role is not OptionRole.APPROVE_PERSISTENT, sent
    return cursor


# ---------------------------------------------------------------- what the lab drove


@attrs.frozen
class LabCase:
    """A lab run's keys on one screen, and the fixture captured just before them."""

    agent: str
    versions: tuple[str, ...]
    fixture: str
    intent: Intent
    chosen: tuple[int, ...]
    sent: tuple[str | Keystroke, ...]  # a str is a tmux key name
    source: str
    text: str | None = None


CLAUDE_LAB = "tests/lab/test_claude_plans.py"
E2E = "tests/lab/test_interactions.py"
LAB_CASES = (
    LabCase(
        "claude",
        tuple(VERSIONS["claude"]),
        "questionnaire_multi-q1",
        Intent.CHOOSE,
        (0,),
        ("Enter", *("Down",) * 5, "Enter"),
        f"{E2E} test_claude_multi_select_toggles_each_box_then_submits_the_review",
    ),
    LabCase(
        "claude",
        tuple(VERSIONS["claude"]),
        "questionnaire_multi_question-q1",
        Intent.CHOOSE,
        (1,),
        ("2",),
        f"{CLAUDE_LAB} test_three_questions_then_submit",
    ),
    LabCase(
        "claude",
        tuple(VERSIONS["claude"]),
        "questionnaire_single3-q1",
        Intent.CHOOSE,
        (2,),
        ("3",),
        f"{E2E} test_claude_single_select_answer_reaches_the_model_once",
    ),
    LabCase(
        "claude",
        tuple(VERSIONS["claude"]),
        "questionnaire_single3-q1",
        Intent.FREE_TEXT,
        (),
        ("Down", "Down", "Down", LiteralText(TEXT), "Enter"),
        f"{E2E} test_claude_free_text_goes_through_type_something_byte_exact",
        text=TEXT,
    ),
    LabCase(
        "claude",
        tuple(VERSIONS["claude"]),
        "questionnaire_single3-free_text_empty",
        Intent.FREE_TEXT,
        (),
        (LiteralText(TEXT), "Enter"),
        f"{CLAUDE_LAB} test_free_text_into_the_open_editor",
        text=TEXT,
    ),
    LabCase(
        "claude",
        tuple(VERSIONS["claude"]),
        "questionnaire_multi-review",
        Intent.SUBMIT,
        (),
        ("1",),
        f"{E2E} test_claude_multi_select_toggles_each_box_then_submits_the_review",
    ),
    LabCase(
        "claude",
        tuple(VERSIONS["claude"]),
        "claude_bash-permission",
        Intent.APPROVE_ONCE,
        (),
        ("1",),
        f"{E2E} test_claude_bash_permission_approve_runs_it_reject_does_not",
    ),
    LabCase(
        "claude",
        tuple(VERSIONS["claude"]),
        "claude_bash-permission",
        Intent.REJECT,
        (),
        ("4",),
        f"{CLAUDE_LAB} test_bash_reject_leaves_it_unrun",
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_rui_three-q1",
        Intent.CHOOSE,
        (0,),
        ("1",),
        f"{E2E} test_codex_three_questions_are_answered_one_step_at_a_time",
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_rui_one-q1",
        Intent.CHOOSE,
        (1,),
        ("2",),
        f"{E2E} test_codex_request_user_input_choice_reaches_the_model_once",
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_rui_one-q1",
        Intent.FREE_TEXT,
        (),
        ("Down", "Down", "Down", "Tab", LiteralText(TEXT), "Enter"),
        f"{E2E} test_codex_free_text_goes_to_none_of_the_above_notes_byte_exact",
        text=TEXT,
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_rui_notes-notes_empty",
        Intent.FREE_TEXT,
        (),
        (LiteralText(TEXT), "Enter"),
        "tests/lab/test_codex_plans.py test_free_text_into_the_open_notes",
        text=TEXT,
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_rui_three-q1",
        Intent.NEXT_QUESTION,
        (),
        ("Right",),
        "tests/lab/test_codex_plans.py test_unanswered_confirmation_goes_back_then_proceeds",
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_rui_notes-unanswered",
        Intent.PROCEED,
        (),
        ("Enter",),
        "tests/lab/test_codex_plans.py test_unanswered_confirmation_goes_back_then_proceeds",
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_rui_notes-unanswered",
        Intent.GO_BACK,
        (),
        ("Down", "Enter"),
        "tests/lab/test_codex_plans.py test_unanswered_confirmation_goes_back_then_proceeds",
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_exec-permission",
        Intent.APPROVE_ONCE,
        (),
        ("y",),
        f"{E2E} test_codex_exec_approve_runs_the_command_once_reject_selects_the_no_row",
    ),
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_exec-permission",
        Intent.REJECT,
        (),
        ("3",),
        "tests/lab/test_codex_plans.py test_exec_reject_selects_the_no_row",
    ),
    # A patch's approval draws the exec approval's menu: the same keys land on its rows.
    LabCase(
        "codex",
        tuple(VERSIONS["codex"]),
        "codex_patch-permission",
        Intent.APPROVE_ONCE,
        (),
        ("y",),
        f"{E2E} test_codex_patch_approve_applies_it_once_reject_never",
    ),
    LabCase(
        "codex",
        (VERSIONS["codex"][0], VERSIONS["codex"][-1]),
        "codex_patch-permission",
        Intent.REJECT,
        (),
        ("3",),
        f"{E2E} test_codex_patch_approve_applies_it_once_reject_never",
    ),
    LabCase(
        "codex",
        ("0.154.0", "0.155.1"),
        "codex_rui_async-queued",
        Intent.OPEN_QUEUED_QUESTION,
        (),
        ("S-Left",),
        "tests/lab/test_codex_plans.py test_async_answer_when_idle_starts_the_next_turn",
    ),
    LabCase(
        "codex",
        ("0.154.0", "0.155.1"),
        "codex_rui_async-picker",
        Intent.CHOOSE,
        (1,),
        ("2",),
        "tests/lab/test_codex_plans.py test_async_answer_while_working_steers_the_turn",
    ),
)


@pytest.mark.parametrize(
    ("case", "version"),
    [(case, version) for case in LAB_CASES for version in case.versions],
    ids=lambda v: v if isinstance(v, str) else f"{v.fixture}:{v.intent}",
)
def test_verified_plans_expand_to_the_keys_the_lab_sent(case: LabCase, version: str) -> None:
    sent = answer(case.agent, version, case.fixture, case.intent, case.chosen, case.text)
    wanted = tuple(TmuxKey(key) if isinstance(key, str) else key for key in case.sent)
    assert sent == wanted, case.source


def test_every_lab_verified_plan_has_its_lab_case() -> None:
    covered = set()
    for case in LAB_CASES:
        for version in case.versions:
            profile, observation = observe(case.agent, version, case.fixture)
            prompt = prompt_of(observation)
            covered.add((profile.id, PlanKey(prompt.kind, prompt.step, case.intent)))
    verified = {
        (profile.id, plan.key)
        for profile in PROFILES.values()
        for plan in profile.key_plans.plans
        if plan.lab_verified
    }
    assert verified == covered


# ---------------------------------------------------------------- every family, every screen


def actionable_prompts() -> list[tuple[str, Profile, PromptView]]:
    found = []
    for path in corpus.MAIN:
        profile, observation = corpus.observed(path)
        if observation.actionable:
            assert observation.prompt is not None
            found.append((corpus.name(path), profile, observation.prompt))
    return found


PROMPTS = actionable_prompts()


def test_the_corpus_has_prompts_of_every_step_kind_for_both_families() -> None:
    seen = {(profile.agent, prompt.step) for _, profile, prompt in PROMPTS}
    assert {step for agent, step in seen if agent == "claude"} == set(StepKind) - {
        StepKind.CONFIRM,
        StepKind.QUEUED,
    }
    assert {step for agent, step in seen if agent == "codex"} == {
        StepKind.SINGLE_SELECT,
        StepKind.FREE_TEXT,
        StepKind.CONFIRM,
        StepKind.PERMISSION,
        StepKind.QUEUED,
    }


@corpus.each(PROMPTS, lambda case: case[0])
def test_every_answer_on_every_captured_prompt_lands_where_it_should(
    name: str, profile: Profile, prompt: PromptView
) -> None:
    options = prompt.questions[0].options if prompt.questions else ()  # a queued question: none
    plans = {
        plan.key.intent: plan
        for plan in profile.key_plans.plans
        if (plan.key.interaction, plan.key.step) == (prompt.kind, prompt.step)
    }
    assert plans, f"{profile.id} has no key plan for a {prompt.kind} {prompt.step} step"
    choices = [i for i, option in enumerate(options) if option.role is OptionRole.CHOICE]
    for intent, plan in plans.items():
        if intent is Intent.CHOOSE and prompt.step is StepKind.MULTI_SELECT:
            for chosen in [(i,) for i in choices] + [tuple(choices)]:
                sent = expand(plan, options, chosen=chosen)
                assert sent[-1] == TmuxKey("Enter")
                final = replay(options, sent)
                assert final is not None and options[final].role is OptionRole.SUBMIT
                assert ticked_after(options, sent) == set(chosen)
        elif intent is Intent.CHOOSE:
            for index in choices:
                sent = expand(plan, options, chosen=(index,))
                if any(isinstance(step, PressChosenNumber) for step in plan.steps):
                    assert sent == (TmuxKey(str(options[index].number)),)
                    continue
                assert sent[-1] == TmuxKey("Enter")
                assert set(sent[:-1]) <= {TmuxKey("Down"), TmuxKey("Up")}
                assert replay(options, sent) == index
        elif intent is Intent.FREE_TEXT:
            sent = expand(plan, options, text=TEXT)
            replay(options, sent)
            typed = [key for key in sent if isinstance(key, LiteralText)]
            assert typed == [LiteralText(TEXT)]  # one chunk of plain characters, no ESC, no paste
            assert sent[-2:] == (LiteralText(TEXT), TmuxKey("Enter"))
            if profile.agent == "codex":  # Enter only once the text held for the guard
                (check,) = expand_checked(plan, options, text=TEXT).checks
                assert check == TextCheck(len(sent) - 1, hold=0.3)
        else:
            sent = expand(plan, options)
            final = replay(options, sent)
            wanted = {
                Intent.SUBMIT: OptionRole.SUBMIT,
                Intent.PROCEED: OptionRole.PROCEED,
                Intent.GO_BACK: OptionRole.GO_BACK,
                Intent.APPROVE_ONCE: OptionRole.APPROVE_ONCE,
                Intent.REJECT: OptionRole.REJECT,
            }.get(intent)
            shortcut = any(isinstance(step, PressShortcut) for step in plan.steps)
            if any(isinstance(step, PressRoleNumber) for step in plan.steps):
                (row,) = [option for option in options if option.role is wanted]
                assert sent == (TmuxKey(str(row.number)),)
            elif wanted is not None and not shortcut:
                assert final is not None and options[final].role is wanted, sent


def ticked_after(options: tuple[OptionView, ...], sent: tuple[Keystroke, ...]) -> set[int]:
    """Which option boxes are ticked after `sent` (Enter on an option toggles its box)."""
    ticked = {i for i, option in enumerate(options) if option.checked}
    cursor = next(i for i, option in enumerate(options) if option.current)
    for key in sent[:-1]:  # the last Enter submits
        if key == TmuxKey("Down"):
            cursor += 1
        elif key == TmuxKey("Up"):
            cursor -= 1
        elif key == TmuxKey("Enter"):
            ticked ^= {cursor}
    return ticked


# ---------------------------------------------------------------- exact sequences

CLAUDE = VERSIONS["claude"]
CODEX = VERSIONS["codex"]


@pytest.mark.parametrize("version", CLAUDE)
def test_claude_sequences(version: str) -> None:
    def claude(name: str, intent: Intent, chosen: tuple[int, ...] = ()) -> object:
        return answer("claude", version, name, intent, chosen)

    # The option's own number, wherever the cursor is: no walk, no Enter.
    assert claude("questionnaire_single3-q1_second", Intent.CHOOSE, (0,)) == keys("1")
    assert claude("questionnaire_single3-q1", Intent.CHOOSE, (2,)) == keys("3")
    # Red is already ticked: choosing only Yellow unticks Red, ticks Yellow, goes to Submit.
    assert claude("questionnaire_multi-q1_checked", Intent.CHOOSE, (3,)) == keys(
        "Enter", "Down", "Down", "Down", "Enter", "Down", "Down", "Enter"
    )
    assert claude("questionnaire_multi-review", Intent.SUBMIT) == keys("1")
    assert claude("claude_bash-permission", Intent.APPROVE_ONCE) == keys("1")
    # No's own number: no walk past the two persistent rows above it, never Esc.
    assert claude("claude_bash-permission", Intent.REJECT) == keys("4")
    # No fixed wait: the dispatcher proves the editor open between the walk and the text.
    assert answer("claude", version, "questionnaire_single2-q1", Intent.FREE_TEXT, text=TEXT) == (
        TmuxKey("Down"),
        TmuxKey("Down"),
        LiteralText(TEXT),
        TmuxKey("Enter"),
    )
    assert answer(
        "claude", version, "questionnaire_single2-free_text_empty", Intent.FREE_TEXT, text=TEXT
    ) == (LiteralText(TEXT), TmuxKey("Enter"))


@pytest.mark.parametrize("version", CODEX)
def test_codex_sequences(version: str) -> None:
    def codex(name: str, intent: Intent, chosen: tuple[int, ...] = ()) -> object:
        return answer("codex", version, name, intent, chosen)

    # The option's own number: no walk, no Enter (the digit answers and moves on).
    assert codex("codex_rui_three-q2", Intent.CHOOSE, (1,)) == keys("2")
    assert answer("codex", version, "codex_rui_one-q1", Intent.FREE_TEXT, text=TEXT) == (
        *keys("Down", "Down", "Down", "Tab"),
        LiteralText(TEXT),
        TmuxKey("Enter"),
    )
    assert answer("codex", version, "codex_rui_notes-notes_empty", Intent.FREE_TEXT, text=TEXT) == (
        LiteralText(TEXT),
        TmuxKey("Enter"),
    )
    assert codex("codex_rui_notes-unanswered", Intent.PROCEED) == keys("Enter")
    assert codex("codex_rui_notes-unanswered", Intent.GO_BACK) == keys("Down", "Enter")
    # The "No, and tell Codex what to do differently" row by its number; Esc is cancel.
    assert codex("codex_exec-permission", Intent.REJECT) == keys("3")


@pytest.mark.parametrize("version", ["0.154.0", "0.155.1"])
def test_codex_async_picker(version: str) -> None:
    assert answer("codex", version, "codex_rui_async-picker", Intent.CHOOSE, (1,)) == keys("2")


# ---------------------------------------------------------------- refusals


def refusal(
    agent: str,
    name: str,
    intent: Intent,
    chosen: tuple[int, ...] = (),
    text: str | None = None,
) -> PlanRefusal:
    version = VERSIONS[agent][-1]
    with pytest.raises(KeyPlanError) as raised:
        answer(agent, version, name, intent, chosen, text)
    assert str(raised.value).startswith(f"{raised.value.reason}: ")
    return raised.value.reason


SINGLE3 = "questionnaire_single3-q1"
SINGLE2 = "questionnaire_single2-q1"
MULTI = "questionnaire_multi-q1"
BASH = "claude_bash-permission"
THREE = "codex_rui_three-q1"
NOTES = "codex_rui_notes-notes_empty"
R = PlanRefusal


@pytest.mark.parametrize(
    ("agent", "name", "intent", "chosen", "text", "reason"),
    [
        ("claude", SINGLE3, Intent.CHOOSE, (9,), None, R.OPTION_NOT_ON_SCREEN),
        ("claude", SINGLE3, Intent.CHOOSE, (-1,), None, R.OPTION_NOT_ON_SCREEN),
        ("claude", SINGLE3, Intent.CHOOSE, (4,), None, R.NOT_A_CHOICE),  # Chat about this
        ("claude", SINGLE3, Intent.CHOOSE, (0, 1), None, R.ONE_OPTION_ONLY),
        ("claude", SINGLE3, Intent.CHOOSE, (), None, R.NO_OPTION_CHOSEN),
        ("claude", SINGLE3, Intent.CHOOSE, (1,), TEXT, R.TEXT_NOT_ACCEPTED),
        ("claude", MULTI, Intent.CHOOSE, (1, 1), None, R.DUPLICATE_OPTION),
        ("claude", MULTI, Intent.CHOOSE, (5,), None, R.NOT_A_CHOICE),  # Submit
        ("claude", MULTI, Intent.FREE_TEXT, (), TEXT, R.NO_PLAN),
        ("claude", BASH, Intent.FREE_TEXT, (), TEXT, R.NO_PLAN),
        ("claude", BASH, Intent.APPROVE_ONCE, (1,), None, R.OPTIONS_NOT_ACCEPTED),
        ("claude", SINGLE2, Intent.FREE_TEXT, (), "\x1b[200~x", R.UNSAFE_TEXT),  # paste start
        ("claude", SINGLE2, Intent.FREE_TEXT, (), "\x1b", R.UNSAFE_TEXT),
        ("claude", SINGLE2, Intent.FREE_TEXT, (), "a\nb", R.UNSAFE_TEXT),
        ("claude", SINGLE2, Intent.FREE_TEXT, (), "\x9b2J", R.UNSAFE_TEXT),  # 8-bit CSI
        ("claude", SINGLE2, Intent.FREE_TEXT, (), "", R.NO_TEXT),
        ("claude", SINGLE2, Intent.FREE_TEXT, (), None, R.NO_TEXT),
        ("codex", "codex_exec-permission", Intent.FREE_TEXT, (), TEXT, R.NO_PLAN),
        ("codex", "codex_rui_notes-unanswered", Intent.CHOOSE, (0,), None, R.NO_PLAN),
        ("codex", THREE, Intent.CHOOSE, (3,), None, R.NOT_A_CHOICE),  # None of the above
        ("codex", THREE, Intent.NEXT_QUESTION, (0,), None, R.OPTIONS_NOT_ACCEPTED),
        ("codex", NOTES, Intent.FREE_TEXT, (), "tab\there", R.UNSAFE_TEXT),
    ],
)
def test_refusals(
    agent: str,
    name: str,
    intent: Intent,
    chosen: tuple[int, ...],
    text: str | None,
    reason: PlanRefusal,
) -> None:
    assert refusal(agent, name, intent, chosen, text) is reason


def test_no_queued_question_plan_where_the_version_has_no_queue() -> None:
    for version in ("0.153.4", "0.169.0"):
        with pytest.raises(KeyPlanError) as raised:
            PROFILES[("codex", version)].key_plans.plan_for(
                InteractionKind.ASYNC_QUESTION, None, Intent.OPEN_QUEUED_QUESTION
            )
        assert raised.value.reason is PlanRefusal.NO_PLAN


PERMISSION_FIXTURE = {"claude": "claude_bash-permission", "codex": "codex_exec-permission"}


def permission(agent: str) -> tuple[Profile, tuple[OptionView, ...]]:
    """The newest version's permission prompt rows (Yes, persistent rows, No)."""
    profile, observation = observe(agent, VERSIONS[agent][-1], PERMISSION_FIXTURE[agent])
    return profile, prompt_of(observation).questions[0].options


@pytest.mark.parametrize("agent", ["claude", "codex"])
@pytest.mark.parametrize("intent", [Intent.APPROVE_ONCE, Intent.REJECT])
def test_nothing_expands_with_the_cursor_on_a_persistent_row(agent: str, intent: Intent) -> None:
    profile, options = permission(agent)
    persistent = next(i for i, o in enumerate(options) if o.role is OptionRole.APPROVE_PERSISTENT)
    moved = tuple(attrs.evolve(o, current=i == persistent) for i, o in enumerate(options))
    plan = profile.key_plans.plan_for(InteractionKind.PERMISSION, StepKind.PERMISSION, intent)
    with pytest.raises(KeyPlanError) as raised:
        expand(plan, moved)
    assert raised.value.reason is PlanRefusal.PERSISTENT_APPROVAL


@pytest.mark.parametrize(
    "steps",
    [
        (MoveToRole(OptionRole.APPROVE_PERSISTENT), Press("Enter")),
        (PressShortcut(OptionRole.APPROVE_PERSISTENT, "a"),),
        (PressRoleNumber(OptionRole.APPROVE_PERSISTENT),),
    ],
)
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_plan_targeting_a_persistent_row_never_expands(
    agent: str, steps: tuple[PlanStep, ...]
) -> None:
    _, options = permission(agent)
    key = PlanKey(InteractionKind.PERMISSION, StepKind.PERMISSION, Intent.APPROVE_ONCE)
    with pytest.raises(KeyPlanError) as raised:
        expand(KeyPlan(key, steps, "test", lab_verified=False), options)
    assert raised.value.reason is PlanRefusal.PERSISTENT_APPROVAL


def test_number_steps_press_the_rows_own_digit_and_refuse_two_digit_rows() -> None:
    key = PlanKey(InteractionKind.QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.CHOOSE)
    chosen_number = KeyPlan(key, (PressChosenNumber(),), "test", lab_verified=False)
    no_row = KeyPlan(key, (PressRoleNumber(OptionRole.REJECT),), "test", lab_verified=False)
    rows = tuple(OptionView(f"o{n}", number=n, current=n == 1) for n in range(1, 12))
    # The drawn number, not the index: wherever the cursor is, one key and no walk.
    assert expand(chosen_number, rows, chosen=(8,)) == keys("9")
    moved = tuple(attrs.evolve(o, current=o.number == 5) for o in rows)
    assert expand(chosen_number, moved, chosen=(0,)) == keys("1")
    for index, number in ((9, 10), (10, 11)):  # "1" would answer row 1 at once
        with pytest.raises(KeyPlanError) as raised:
            expand(chosen_number, rows, chosen=(index,))
        assert raised.value.reason is PlanRefusal.NO_NUMBER_KEY and str(number) in str(raised.value)
    unnumbered = (*rows[:2], OptionView("No", OptionRole.REJECT))
    with pytest.raises(KeyPlanError) as raised:
        expand(no_row, unnumbered)
    assert raised.value.reason is PlanRefusal.NO_NUMBER_KEY
    assert expand(no_row, (*rows[:2], OptionView("No", OptionRole.REJECT, number=3))) == keys("3")
    with pytest.raises(KeyPlanError) as raised:
        expand(no_row, rows)
    assert raised.value.reason is PlanRefusal.ROW_MISSING
    with pytest.raises(KeyPlanError) as raised:
        expand(chosen_number, rows)
    assert raised.value.reason is PlanRefusal.NO_OPTION_CHOSEN


def test_screen_shape_refusals() -> None:
    profile, observation = observe("claude", CLAUDE[-1], "questionnaire_multi-review")
    prompt = prompt_of(observation)
    plan = profile.key_plans.plan_for(prompt.kind, prompt.step, Intent.SUBMIT)
    options = prompt.questions[0].options
    both = tuple(attrs.evolve(o, current=True) for o in options)
    with pytest.raises(KeyPlanError, match="cursor_unknown"):
        expand(plan, both)
    with pytest.raises(KeyPlanError, match="row_missing"):
        expand(plan, tuple(attrs.evolve(o, role=OptionRole.CANCEL) for o in options))
    multi = profile.key_plans.plan_for(
        InteractionKind.QUESTIONNAIRE, StepKind.MULTI_SELECT, Intent.CHOOSE
    )
    _, single = observe("claude", CLAUDE[-1], "questionnaire_single3-q1")
    with pytest.raises(KeyPlanError, match="no_box"):
        expand(multi, prompt_of(single).questions[0].options, chosen=(1,))
    _, boxed = observe("claude", CLAUDE[-1], "questionnaire_multi-q1")
    rows = prompt_of(boxed).questions[0].options
    free_ticked = tuple(
        attrs.evolve(o, checked=True) if o.role is OptionRole.FREE_TEXT else o for o in rows
    )
    with pytest.raises(KeyPlanError, match="not_a_choice"):
        expand(multi, free_ticked, chosen=(0,))


def test_plans_are_unique_per_request_and_never_press_cursor_keys() -> None:
    plan = PROFILES[("claude", CLAUDE[0])].key_plans.plans[0]
    with pytest.raises(ValueError, match="same request"):
        KeyPlans((plan, plan))
    for step in (Press, lambda key: PressShortcut(OptionRole.REJECT, key), ToggleChosen):
        with pytest.raises(ValueError, match="moves the cursor"):
            step("Down")


# ---------------------------------------------------------------- never a persistent row

ALL_PLANS = sorted(
    {plan for profile in PROFILES.values() for plan in profile.key_plans.plans},
    key=lambda plan: (plan.key.interaction, str(plan.key.step), plan.key.intent, plan.evidence),
)
ROLES = list(OptionRole)
PRESSABLE = ["Enter", "Tab", "Right", "S-Left", "Escape", "y"]

plan_steps = st.one_of(
    st.builds(MoveToRole, st.sampled_from(ROLES)),
    st.just(MoveToChosen()),
    st.builds(ToggleChosen, st.sampled_from(PRESSABLE)),
    st.just(TypeText()),
    st.builds(Press, st.sampled_from(PRESSABLE)),
    st.builds(PressShortcut, st.sampled_from(ROLES), st.sampled_from(PRESSABLE)),
    st.just(PressChosenNumber()),
    st.builds(PressRoleNumber, st.sampled_from(ROLES)),
    st.just(EnterGuard(0.3)),
    st.just(AwaitEditor()),
)


def _guards_after_text(steps: list[PlanStep]) -> tuple[PlanStep, ...]:
    """`steps` less each EnterGuard that does not follow a TypeText (no KeyPlan holds one)."""
    return tuple(
        step
        for n, step in enumerate(steps)
        if not isinstance(step, EnterGuard) or (n > 0 and isinstance(steps[n - 1], TypeText))
    )


random_plans = st.builds(
    KeyPlan,
    st.just(PlanKey(InteractionKind.QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.CHOOSE)),
    st.lists(plan_steps, max_size=6).map(_guards_after_text),
    st.just("random"),
    st.just(False),
)


@pytest.mark.parametrize(
    "steps",
    [
        (EnterGuard(0.3),),
        (Press("Tab"), EnterGuard(0.3)),
        (TypeText(), Press("Tab"), EnterGuard(0.3)),
    ],
)
def test_an_enter_guard_holds_typed_text_or_is_refused(steps: tuple[PlanStep, ...]) -> None:
    key = PlanKey(InteractionKind.QUESTIONNAIRE, StepKind.FREE_TEXT, Intent.FREE_TEXT)
    with pytest.raises(ValueError, match="must follow a TypeText"):
        KeyPlan(key, steps, "test", lab_verified=False)
    guarded = KeyPlan(key, (TypeText(), EnterGuard(0.3), Press("Enter")), "test", False)
    (check,) = expand_checked(guarded, (), text=TEXT).checks
    assert check == TextCheck(1, hold=0.3)


def test_text_typed_in_pieces_is_proven_piece_by_piece_the_guard_held_on_the_whole() -> None:
    key = PlanKey(InteractionKind.QUESTIONNAIRE, StepKind.FREE_TEXT, Intent.FREE_TEXT)
    steps = (TypeText(piece_bytes=8), EnterGuard(0.3), Press("Enter"))
    text = "aaaa bbbb cccc"
    expanded = expand_checked(KeyPlan(key, steps, "test", False), (), text=text)
    typed = (LiteralText("aaaa"), LiteralText(" bbbb"), LiteralText(" cccc"))
    assert expanded.keys == (*typed, TmuxKey("Enter"))
    assert expanded.checks == (
        TextCheck(1, chars=4),
        TextCheck(2, chars=9),
        TextCheck(3, hold=0.3),
    )
    shown = [check.shown(text) for check in expanded.checks if isinstance(check, TextCheck)]
    assert shown == ["aaaa", "aaaa bbbb", text]
    with pytest.raises(ValueError, match="at least 4 bytes"):
        TypeText(piece_bytes=3)


@settings(max_examples=examples(300))
@given(text=st.text(min_size=1, max_size=60), limit=st.integers(4, 20))
def test_pieces_are_the_text_in_order_each_within_its_bytes(text: str, limit: int) -> None:
    cut = pieces(text, limit)
    assert "".join(cut) == text
    assert all(0 < len(piece.encode()) <= limit for piece in cut)


@settings(max_examples=examples(200))
@given(words=st.lists(st.text("abcé日", min_size=1, max_size=5), min_size=1, max_size=30))
def test_words_are_cut_before_the_space_between_them(words: list[str]) -> None:
    cut = pieces(" ".join(words), 16)
    assert all(piece[-1] != " " for piece in cut)
    assert all(piece.startswith(" ") for piece in cut[1:])


@pytest.mark.parametrize(
    "unit",
    ["e\u0301", "🇫🇷", "👩\u200d💻", "❤\ufe0f", "👍🏽", "日"],
    ids=["combining-accent", "flag", "zwj-sequence", "variation-selector", "skin-tone", "cjk"],
)
@pytest.mark.parametrize("spare", ["a byte", "a third but a byte"])
def test_pieces_never_split_a_grapheme(unit: str, spare: str) -> None:
    """Each piece has room for two of `unit`, and one byte more or all of a third but one."""
    size = len(unit.encode())
    cut = pieces(unit * 12, 2 * size + (1 if spare == "a byte" else size - 1))
    assert len(cut) == 6
    assert all(piece == unit * 2 for piece in cut)


# Persistent-approval and option rows weigh more, so most screens hold both.
WEIGHTED_ROLES = [*ROLES, OptionRole.APPROVE_PERSISTENT, OptionRole.CHOICE, OptionRole.CHOICE]


Case = tuple[KeyPlan, tuple[OptionView, ...], tuple[int, ...], str | None]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A plan, rows with any roles (persistent ones included) and an answer.

    Mostly the answer fits the plan (one option, several, text or nothing) and
    the screen has one cursor row, as on a real prompt; sometimes neither holds.
    """
    plan = draw(st.sampled_from(ALL_PLANS) | random_plans)
    roles = draw(st.lists(st.sampled_from(WEIGHTED_ROLES), max_size=8))
    cursor = draw(st.integers(0, max(len(roles) - 1, 0)))
    extra_cursor = draw(st.none() | st.none() | st.integers(0, 8))
    options = tuple(
        OptionView(
            "row",
            role=role,
            number=i + 1,
            current=i in (cursor, extra_cursor),
            checked=draw(st.none() | st.booleans()),
        )
        for i, role in enumerate(roles)
    )
    choices = [i for i, role in enumerate(roles) if role is OptionRole.CHOICE]
    if draw(st.integers(0, 3)) == 0:  # an answer that may not fit
        chosen = draw(st.lists(st.integers(-1, 9), max_size=3))
        return plan, options, tuple(chosen), draw(st.none() | st.text(max_size=12))
    chosen = []
    if choices and any(isinstance(step, MoveToChosen | PressChosenNumber) for step in plan.steps):
        chosen = [draw(st.sampled_from(choices))]
    elif choices and any(isinstance(step, ToggleChosen) for step in plan.steps):
        chosen = draw(st.lists(st.sampled_from(choices), min_size=1, unique=True))
    typed = any(isinstance(step, TypeText) for step in plan.steps)
    return plan, options, tuple(chosen), TEXT if typed else None


@settings(max_examples=examples(500))
@given(case=cases())
def test_expansion_never_lands_on_a_persistent_row(case: Case) -> None:
    plan, options, chosen, text = case
    try:
        sent = expand(plan, options, chosen=chosen, text=text)
    except KeyPlanError:
        return
    replay(options, sent)
    # A step naming the persistent row as its target never expands.
    assert not any(
        isinstance(step, MoveToRole | PressShortcut | PressRoleNumber)
        and step.role is OptionRole.APPROVE_PERSISTENT
        for step in plan.steps
    )


@pytest.mark.parametrize("profile", list(PROFILES.values()), ids=lambda p: p.id)
def test_every_plan_has_stage_boundaries_matching_the_dispatch_stages(profile: Profile) -> None:
    """Text is injected before the keys that submit it; the last step sends the step."""
    for plan in profile.key_plans.plans:
        marks = plan.boundaries
        assert marks[-1] == (len(plan.steps), Boundary.ENTER_SENT)
        assert [stage for _, stage in marks] in (
            [Boundary.ENTER_SENT],
            [Boundary.TEXT_INJECTED, Boundary.ENTER_SENT],
        )
        typed = any(isinstance(step, TypeText) for step in plan.steps)
        if len(marks) == 2:
            end = marks[0][0]
            assert typed and 0 < end < len(plan.steps)
            assert not any(isinstance(step, TypeText) for step in plan.steps[end:])
            assert Boundary.TEXT_INJECTED.value == Stage.TEXT_INJECTED.value
        assert Boundary.ENTER_SENT.value == Stage.ENTER_SENT.value
