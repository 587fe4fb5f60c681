"""Checkpoints of expanded key plans: where the dispatcher must see the screen before going on.

The plans are the real profiles' (akk.profiles.claude and codex, through each
version's `key_plans`); the rows are captured fixtures rendered and classified
by their exact version's profile. A small replay follows the cursor through the
keys, so a ToggleCheck is checked against where its toggle key really lands.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from akk.profiles.keyplan import (
    AwaitEditor,
    EditorCheck,
    EnterGuard,
    Expanded,
    Intent,
    KeyPlan,
    Keystroke,
    LiteralText,
    TextCheck,
    TmuxKey,
    ToggleCheck,
    ToggleChosen,
    TypeText,
    expand,
    expand_checked,
)
from akk.profiles.observation import InteractionKind, OptionRole, OptionView, PromptView, StepKind
from akk.profiles.registry import Profile
from tests import corpus

TEXT = "Teal, please"


def observe(path: Path) -> tuple[Profile, PromptView | None]:
    profile, observation = corpus.observed(path)
    return profile, observation.prompt if observation.actionable else None


ACTIONABLE = [path for path in corpus.MAIN if observe(path)[1] is not None]


def prompt_of(path: Path) -> PromptView:
    prompt = observe(path)[1]
    assert prompt is not None
    return prompt


def plan_of(path: Path, intent: Intent) -> KeyPlan:
    profile, prompt = observe(path)
    assert prompt is not None
    return profile.key_plans.plan_for(prompt.kind, prompt.step, intent)


def options_of(path: Path) -> tuple[OptionView, ...]:
    questions = prompt_of(path).questions
    return questions[0].options if questions else ()  # a queued async question has none


MULTI = [p for p in ACTIONABLE if prompt_of(p).step is StepKind.MULTI_SELECT]


def _editor_plans() -> list[tuple[Path, Intent]]:
    """Every (fixture, plan) whose plan types text into an editor."""
    found = []
    for path in ACTIONABLE:
        profile, prompt = observe(path)
        assert prompt is not None
        for plan in profile.key_plans.plans:
            if (plan.key.interaction, plan.key.step) == (prompt.kind, prompt.step) and any(
                isinstance(step, TypeText) for step in plan.steps
            ):
                found.append((path, plan.key.intent))
    return found


EDITOR = _editor_plans()


def guard_after_text(plan: KeyPlan) -> EnterGuard | None:
    """The EnterGuard right after the TypeText, if any."""
    (typed,) = [n for n, step in enumerate(plan.steps) if isinstance(step, TypeText)]
    following = plan.steps[typed + 1 : typed + 2]
    return following[0] if following and isinstance(following[0], EnterGuard) else None


def replay(options: tuple[OptionView, ...], keys: tuple[Keystroke, ...]) -> list[int]:
    """The cursor row after each prefix of ``keys`` (index n: after the first n keys)."""
    (cursor,) = [i for i, option in enumerate(options) if option.current]
    rows = [cursor]
    for key in keys:
        if key == TmuxKey("Down"):
            cursor += 1
        elif key == TmuxKey("Up"):
            cursor -= 1
        assert 0 <= cursor < len(options)
        rows.append(cursor)
    return rows


def toggles(expanded: Expanded) -> list[ToggleCheck]:
    return [check for check in expanded.checks if isinstance(check, ToggleCheck)]


def boxes_to_change(options: tuple[OptionView, ...], chosen: set[int]) -> list[int]:
    """The rows whose box differs from the answer, top down (computed from the screen alone)."""
    return [
        row
        for row, option in enumerate(options)
        if option.role is OptionRole.CHOICE
        and option.checked is not None
        and option.checked != (row in chosen)
    ]


def assert_toggles(
    plan: KeyPlan, options: tuple[OptionView, ...], chosen: tuple[int, ...]
) -> Expanded:
    """One ToggleCheck per box that must change, each just past its own toggle key."""
    expanded = expand_checked(plan, options, chosen=chosen)
    assert expanded.keys == expand(plan, options, chosen=chosen)
    (toggle,) = [step for step in plan.steps if isinstance(step, ToggleChosen)]
    cursor = replay(options, expanded.keys)
    checks = toggles(expanded)
    assert checks == list(expanded.checks)  # no text checks on a selection
    assert [check.row for check in checks] == boxes_to_change(options, set(chosen))
    for check in checks:
        assert check.checked is (check.row in chosen)
        assert 0 < check.after <= len(expanded.keys)
        assert expanded.keys[check.after - 1] == TmuxKey(toggle.key)
        assert cursor[check.after] == check.row
    afters = [check.after for check in checks]
    assert afters == sorted(set(afters))
    # Exactly one toggle key per check, and nothing toggles without one.
    presses = [
        n + 1
        for n, key in enumerate(expanded.keys)
        if key == TmuxKey(toggle.key) and options[cursor[n]].role is OptionRole.CHOICE
    ]
    assert presses == afters
    return expanded


# ---------------------------------------------------------------- multi-select


@corpus.each(MULTI)
def test_every_answer_to_a_multi_select_checks_each_box_it_changes(path: Path) -> None:
    plan, options = plan_of(path, Intent.CHOOSE), options_of(path)
    rows = [row for row, option in enumerate(options) if option.role is OptionRole.CHOICE]
    assert len(rows) >= 3
    for size in range(1, len(rows) + 1):
        for chosen in itertools.combinations(rows, size):
            assert_toggles(plan, options, chosen)


def test_the_corpus_has_a_ticked_box() -> None:
    assert any(option.checked for path in MULTI for option in options_of(path))


@corpus.each(MULTI)
def test_a_ticked_box_left_out_is_unticked_and_checked_unticked(path: Path) -> None:
    plan, options = plan_of(path, Intent.CHOOSE), options_of(path)
    ticked = [row for row, option in enumerate(options) if option.checked]
    unticked = [
        row
        for row, option in enumerate(options)
        if option.role is OptionRole.CHOICE and option.checked is False
    ]
    chosen = (unticked[-1],)
    checks = toggles(assert_toggles(plan, options, chosen))
    assert [(c.row, c.checked) for c in checks] == sorted(
        [*((row, False) for row in ticked), (unticked[-1], True)]
    )
    if ticked:
        # The boxes already as the answer wants them: no toggle, no checkpoint.
        same = expand_checked(plan, options, chosen=tuple(ticked))
        assert same.checks == ()
        assert TmuxKey("Enter") == same.keys[-1]


@st.composite
def multi_screens(draw: st.DrawFn) -> tuple[Path, tuple[OptionView, ...], tuple[int, ...]]:
    """A real multi-select with its boxes ticked at random, the cursor on some option."""
    path = draw(st.sampled_from(MULTI))
    options = options_of(path)
    rows = [row for row, option in enumerate(options) if option.role is OptionRole.CHOICE]
    ticks = draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    cursor = draw(st.sampled_from(rows))
    drawn = list(options)
    for row, tick in zip(rows, ticks, strict=True):
        drawn[row] = attrs.evolve(options[row], checked=tick)
    drawn = [attrs.evolve(option, current=row == cursor) for row, option in enumerate(drawn)]
    chosen = draw(st.lists(st.sampled_from(rows), min_size=1, unique=True))
    return path, tuple(drawn), tuple(chosen)


@settings(max_examples=300)
@given(multi_screens())
def test_toggle_checks_follow_the_cursor_whatever_the_boxes(
    screen: tuple[Path, tuple[OptionView, ...], tuple[int, ...]],
) -> None:
    path, options, chosen = screen
    expanded = assert_toggles(plan_of(path, Intent.CHOOSE), options, chosen)
    # Once every check held, the boxes show exactly the answer.
    ticked = {row for row, option in enumerate(options) if option.checked}
    for check in toggles(expanded):
        ticked ^= {check.row}
    assert ticked == set(chosen)


# ---------------------------------------------------------------- free text


@corpus.each(EDITOR, lambda case: f"{corpus.name(case[0])}-{case[1]}")
def test_typed_text_is_checked_once_right_before_the_key_after_it(
    path: Path, intent: Intent
) -> None:
    plan, options = plan_of(path, intent), options_of(path)
    expanded = expand_checked(plan, options, text=TEXT)
    assert expanded.keys == expand(plan, options, text=TEXT)
    (check,) = [check for check in expanded.checks if isinstance(check, TextCheck)]
    assert expanded.checks[-1] == check
    typed = expanded.keys.index(LiteralText(TEXT))
    opened = [check for check in expanded.checks if isinstance(check, EditorCheck)]
    if AwaitEditor() in plan.steps:
        # No fixed wait stands in for the editor's focus: the text follows its proof at once,
        # and the keys before it are the cursor's walk onto the editor row.
        assert opened == [EditorCheck(typed)]
        assert all(key in (TmuxKey("Down"), TmuxKey("Up")) for key in expanded.keys[:typed])
    else:
        assert opened == []
    # The text is proven right after its keys, held for the plan's Enter guard (no wait
    # key: the guard runs from the first screen showing the text).
    guard = guard_after_text(plan)
    assert check == TextCheck(typed + 1, hold=guard.seconds if guard is not None else 0.0)
    assert check.after < len(expanded.keys)  # a key still follows: the one that submits


def test_claude_types_a_long_text_in_proven_pieces_and_codex_in_one() -> None:
    text = " ".join(f"w{i:04d}" for i in range(500))[:3000]
    for path, intent in EDITOR:
        agent = observe(path)[0].agent
        expanded = expand_checked(plan_of(path, intent), options_of(path), text=text)
        typed = [key for key in expanded.keys if isinstance(key, LiteralText)]
        texts = [check for check in expanded.checks if isinstance(check, TextCheck)]
        assert "".join(key.text for key in typed) == text
        assert len(typed) == len(texts) == (3 if agent == "claude" else 1)
        assert all(len(key.text.encode()) <= 1024 for key in typed) or agent == "codex"
        # Each piece's check comes right after it and proves the text so far.
        for n, check in enumerate(texts):
            assert expanded.keys[check.after - 1] == typed[n]
            assert check.shown(text) == "".join(key.text for key in typed[: n + 1])


def test_claude_free_text_awaits_its_editor_and_codex_needs_not() -> None:
    waits = {
        observe(path)[0].agent: AwaitEditor() in plan_of(path, intent).steps
        for path, intent in EDITOR
    }
    assert waits == {"claude": True, "codex": False}


def test_the_corpus_has_editor_plans_with_and_without_a_guard_after_the_text() -> None:
    guarded = {guard_after_text(plan_of(path, intent)) is not None for path, intent in EDITOR}
    assert guarded == {True, False}
    assert {observe(path)[0].agent for path, _ in EDITOR} == {"claude", "codex"}


# ---------------------------------------------------------------- every plan on every screen


def _answer(plan: KeyPlan, options: tuple[OptionView, ...]) -> tuple[tuple[int, ...], str | None]:
    """An answer ``plan`` takes on ``options``: its first option, its text, or nothing."""
    choices = [row for row, option in enumerate(options) if option.role is OptionRole.CHOICE]
    if plan.key.intent is Intent.CHOOSE:
        return (choices[-1],), None
    if plan.key.intent is Intent.FREE_TEXT:
        return (), TEXT
    return (), None


def _plans() -> list[tuple[Path, KeyPlan]]:
    found = []
    for path in ACTIONABLE:
        profile, prompt = observe(path)
        assert prompt is not None
        for plan in profile.key_plans.plans:
            if (plan.key.interaction, plan.key.step) == (prompt.kind, prompt.step):
                found.append((path, plan))
    return found


PLANS = _plans()


@corpus.each(PLANS, lambda case: f"{corpus.name(case[0])}-{case[1].key.intent}")
def test_checks_exist_only_for_toggles_editors_and_typed_text(path: Path, plan: KeyPlan) -> None:
    options = options_of(path)
    chosen, text = _answer(plan, options)
    expanded = expand_checked(plan, options, chosen=chosen, text=text)
    assert expanded.keys == expand(plan, options, chosen=chosen, text=text)
    toggled = any(isinstance(step, ToggleChosen) for step in plan.steps)
    typed = any(isinstance(step, TypeText) for step in plan.steps)
    texts = [check for check in expanded.checks if isinstance(check, TextCheck)]
    assert len(texts) == (1 if typed else 0)
    opened = [check for check in expanded.checks if isinstance(check, EditorCheck)]
    assert len(opened) == plan.steps.count(AwaitEditor())
    assert len(toggles(expanded)) == (len(boxes_to_change(options, set(chosen))) if toggled else 0)
    if not (toggled or typed):
        assert expanded.checks == ()
    # An open editor may be proven before any key (the cursor already on it); the others
    # each follow keys of their own.
    assert all(0 <= check.after <= len(expanded.keys) for check in opened)
    keyed: list[TextCheck | ToggleCheck] = [*texts, *toggles(expanded)]
    assert all(0 < check.after <= len(expanded.keys) for check in keyed)


def test_every_plan_shape_meets_a_screen() -> None:
    """The corpus reaches plans of each kind: toggling, typing, and neither."""
    kinds = {
        (
            any(isinstance(step, ToggleChosen) for step in plan.steps),
            any(isinstance(step, TypeText) for step in plan.steps),
        )
        for _, plan in PLANS
    }
    assert kinds == {(True, False), (False, True), (False, False)}
    assert {plan.key.interaction for _, plan in PLANS} >= {
        InteractionKind.QUESTIONNAIRE,
        InteractionKind.PERMISSION,
        InteractionKind.CONFIRMATION,
        InteractionKind.ASYNC_QUESTION,
    }
