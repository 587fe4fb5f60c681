"""Claude's questionnaire editor: `editor_matches` on real screens of every pinned version.

The screens are fixtures/claude/editor/ (captured by tests/lab/test_claude_plans.py
with the steps its lab tests take) and the main corpus's free-text screens. A
screen proves a text only when its single-select editor shows exactly that text
as typed, whole: never a near miss, the dim placeholder, a clipped prompt, a
prompt read off another screen, or a multi-select question's editor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from akk.profiles import claude
from akk.profiles.claude import ClaudeProfile
from akk.profiles.claude.profile import EDITOR_MARGIN
from akk.profiles.composer import render
from akk.profiles.keyplan import Intent, KeyPlanError, PlanRefusal, expand
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    OptionRole,
    PromptView,
    ResponseKind,
    StepKind,
)
from akk.screen import Cell, Grid
from tests import corpus
from tests.lab.test_claude_plans import EDITOR_FIXTURES, EDITOR_SHOTS, LONG, editor_stem

PROFILES = {profile.version: profile for profile in claude.PROFILES}
VERSIONS = sorted(PROFILES)
EDITOR_LABELS = sorted(EDITOR_FIXTURES.glob("*/**/*.json"))


def load(path: Path) -> tuple[dict[str, Any], Grid, Observation]:
    """A label, its screen and what the exact version's profile makes of it."""
    label, grid = corpus.screen(path)
    return label, grid, corpus.observed(path)[1]


def typed(label: dict[str, Any]) -> str:
    text = label["expected"]["typed"]["text"]
    assert isinstance(text, str)
    return text


def _kind(scenario: str, proven: bool) -> list[Path]:
    return [
        path
        for path in EDITOR_LABELS
        if corpus.label(path)["scenario"] == scenario
        and (corpus.label(path)["expected"]["state"] != "unknown") == proven
    ]


PROVEN = _kind("questionnaire_single3", True)
CLIPPED = _kind("questionnaire_single3", False)
MULTI = _kind("questionnaire_multi", True)


def editor_prompt(grid: Grid, observation: Observation) -> PromptView:
    prompt = observation.prompt
    assert observation.actionable and prompt is not None, observation.reason
    assert (prompt.kind, prompt.step) == (InteractionKind.QUESTIONNAIRE, StepKind.FREE_TEXT)
    return prompt


def with_cell(grid: Grid, x: int, y: int, cell: Cell) -> Grid:
    rows = [list(grid.row(row)) for row in range(grid.rows)]
    rows[y][x] = cell
    return Grid(grid.cols, grid.rows, cells=tuple(tuple(row) for row in rows))


def _editor_cells(grid: Grid, prompt: PromptView) -> list[tuple[int, int]]:
    """(x, y) of every character of the editor's text (the cursor row and those under it)."""
    top = next(
        y
        for y in range(prompt.region.top, prompt.region.bottom)
        if grid.row_text(y).startswith("❯ ")
    )
    found = []
    for y in range(top, prompt.region.bottom):
        text = grid.row_text(y)
        if set(text) == {"─"}:
            break
        found += [(x, y) for x in range(5, grid.cols) if grid.cell(x, y).char.strip()]
    return found


# ---------------------------------------------------------------- the corpus


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_has_every_editor_screen(version: str) -> None:
    for shot in EDITOR_SHOTS:
        stem = editor_stem(version, shot)
        assert stem.with_suffix(".ansi").is_file(), f"missing {stem}; run the capture"
        label = corpus.label(stem.with_suffix(".json"))
        assert (label["version"], label["cols"], label["rows"]) == (version, shot.cols, shot.rows)
        assert typed(label) == shot.text


@corpus.each(EDITOR_LABELS)
def test_editor_screen_classifies_to_its_label(path: Path) -> None:
    label, _, observation = load(path)
    expected = label["expected"]
    assert observation.state.value == expected["state"], observation.reason
    if expected["state"] == "unknown":
        assert not observation.actionable and observation.reason
        return
    prompt = observation.prompt
    assert prompt is not None and observation.actionable
    (question,) = prompt.questions
    (wanted,) = expected["questions"]
    assert question.prompt == wanted["prompt"]
    assert question.response_kind.value == wanted["response_kind"]
    assert [o.label for o in question.options if o.current] == [wanted["current_row"]]
    assert [o.label for o in question.options if o.checked] == wanted["checked"]


# ---------------------------------------------------------------- what proves a text


@corpus.each(PROVEN)
def test_the_editor_shows_exactly_the_typed_text(path: Path) -> None:
    label, grid, observation = load(path)
    profile, text = PROFILES[label["version"]], typed(label)
    prompt = editor_prompt(grid, observation)
    assert profile.editor_matches(grid, prompt, text)
    middle = len(text) // 2
    changed = text[:middle] + ("b" if text[middle] == "a" else "a") + text[middle + 1 :]
    near_misses = {
        "one character": changed,
        "one less": text[:-1],
        "one more": text + "x",
        "trailing space": text + " ",
        "leading space": " " + text,
        "two spaces": text.replace(" ", "  ", 1),
        "a line break": text.replace(" ", "\n", 1),
        "the placeholder": "Type something.",
    }
    for what, miss in near_misses.items():
        assert not profile.editor_matches(grid, prompt, miss), what


@corpus.each(PROVEN)
def test_a_changed_cell_in_the_editor_breaks_the_proof(path: Path) -> None:
    label, grid, observation = load(path)
    profile, text = PROFILES[label["version"]], typed(label)
    prompt = editor_prompt(grid, observation)
    cells = _editor_cells(grid, prompt)
    x, y = cells[len(cells) // 2]
    cell = grid.cell(x, y)
    other = "a" if cell.char != "a" else "b"
    for mutated in (
        attrs.evolve(cell, char=other),  # another character
        attrs.evolve(cell, dim=True),  # drawn like the placeholder
        attrs.evolve(cell, reverse=True),  # a second cursor: the text is not read whole
    ):
        changed = with_cell(grid, x, y, mutated)
        found = profile.classify(changed)
        assert found.prompt is None or not profile.editor_matches(changed, found.prompt, text)


@corpus.each(CLIPPED)
def test_a_clipped_editor_is_never_proven(path: Path) -> None:
    label, grid, observation = load(path)
    profile, text = PROFILES[label["version"]], typed(label)
    assert not observation.actionable and observation.reason
    # Not with the prompt of the same question on another screen either.
    other = corpus.ROOT / "claude" / label["version"] / "questionnaire_single3-free_text_typed.json"
    _, other_grid, other_observation = load(other)
    assert not profile.editor_matches(grid, editor_prompt(other_grid, other_observation), text)


def _question_before(label: dict[str, Any]) -> tuple[Grid, PromptView] | None:
    """The question as a controller saw it before the answer: its first screen captured at
    the editor screen's size (None at 120x60, where none was)."""
    size = {(120, 40): "", (80, 24): "80x24"}.get((label["cols"], label["rows"]))
    if size is None:
        return None
    path = corpus.ROOT / "claude" / label["version"] / size / "questionnaire_single3-q1.json"
    _, grid, observation = load(path)
    assert observation.prompt is not None and observation.prompt.step is StepKind.SINGLE_SELECT
    return grid, observation.prompt


@corpus.each(PROVEN)
def test_a_text_the_editor_showed_whole_is_not_refused(path: Path) -> None:
    label, grid, observation = load(path)
    profile, text = PROFILES[label["version"]], typed(label)
    assert profile.editor_refusal(text, grid, editor_prompt(grid, observation)) is None
    before = _question_before(label)
    if before is not None:
        assert profile.editor_refusal(text, *before) is None


@corpus.each(CLIPPED)
def test_a_text_the_editor_clipped_is_refused_before_a_key(path: Path) -> None:
    label = corpus.label(path)
    before = _question_before(label)
    assert before is not None
    refused = PROFILES[label["version"]].editor_refusal(typed(label), *before)
    assert refused is not None and "Claude cuts off its top" in refused.reason, refused


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("size", ["", "80x24"])
def test_the_question_may_grow_to_the_pane_and_no_further(version: str, size: str) -> None:
    """Under three options the question keeps 15 rows besides its editor (every captured
    editor screen): a text of `rows - 15` editor rows is left to the proof, one more row
    is refused."""
    profile = PROFILES[version]
    path = corpus.ROOT / "claude" / version / size / "questionnaire_single3-q1.json"
    _, grid, observation = load(path)
    assert observation.prompt is not None
    words = [f"w{n:04d}" for n in range(2_000)]
    width = grid.cols - EDITOR_MARGIN

    def rows(count: int) -> int:
        rendered = render(profile.editor.wrapping, " ".join(words[:count]), width)
        assert rendered is not None
        return len(rendered[0])

    fits = max(n for n in range(1, 600) if rows(n) <= grid.rows - 15)
    assert profile.editor_refusal(" ".join(words[:fits]), grid, observation.prompt) is None
    refused = profile.editor_refusal(" ".join(words[: fits + 1]), grid, observation.prompt)
    assert refused is not None
    assert refused.reason.startswith(f"would make the question {grid.rows + 1} rows tall")


def test_the_3000_characters_are_proven_only_where_they_fit() -> None:
    for version, profile in PROFILES.items():
        assert profile.free_text_max_chars == len(LONG) == 3000
        tall = next(p for p in PROVEN if version in p.parts and "120x60" in p.parts)
        label, grid, observation = load(tall)
        assert typed(label) == LONG
        assert profile.editor_matches(grid, editor_prompt(grid, observation), LONG)
        clipped = next(p for p in CLIPPED if version in p.parts and label["step"] in p.name)
        assert load(clipped)[0]["rows"] == 40


@corpus.each(PROVEN)
def test_text_longer_than_the_bound_is_never_proven(path: Path) -> None:
    label, grid, observation = load(path)
    text = typed(label)
    profile = PROFILES[label["version"]]
    short = attrs.evolve(
        profile, editor=attrs.evolve(profile.editor, literal_max_length=len(text) - 1)
    )
    assert short.free_text_max_chars == len(text) - 1
    assert not short.editor_matches(grid, editor_prompt(grid, observation), text)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("size", ["", "80x24"])
def test_the_main_corpus_editor_screens(version: str, size: str) -> None:
    folder = corpus.ROOT / "claude" / version / size
    profile = PROFILES[version]
    for options in (2, 3, 4):
        label, grid, observation = load(
            folder / f"questionnaire_single{options}-free_text_typed.json"
        )
        prompt = editor_prompt(grid, observation)
        (question,) = label["expected"]["questions"]
        assert profile.editor_matches(grid, prompt, question["typed_text"])
        assert not profile.editor_matches(grid, prompt, "Teal")
        # The empty editor shows its placeholder, dim, under the cursor: no text at all.
        empty = folder / f"questionnaire_single{options}-free_text_empty.json"
        _, grid, observation = load(empty)
        prompt = editor_prompt(grid, observation)
        for text in ("Type something.", "Type something", "T"):
            assert not profile.editor_matches(grid, prompt, text)


@pytest.mark.parametrize("version", VERSIONS)
def test_only_an_open_editor_proves_text(version: str) -> None:
    profile = PROFILES[version]
    for name, text in (
        ("questionnaire_single3-q1", "Red"),
        ("questionnaire_single3-q1_second", "Blue"),
        ("questionnaire_multi-q1", "Red"),
        ("questionnaire_multi-review", "Submit answers"),
        ("claude_bash-permission", "Yes"),
    ):
        _, grid, observation = load(corpus.ROOT / "claude" / version / f"{name}.json")
        assert observation.prompt is not None
        assert not profile.editor_matches(grid, observation.prompt, text), name


@pytest.mark.parametrize("version", VERSIONS)
def test_a_prompt_read_off_another_screen_is_refused(version: str) -> None:
    profile = PROFILES[version]
    folder = EDITOR_FIXTURES / version
    label, grid, _ = load(folder / "questionnaire_single3-editor_799.json")
    # The one-row editor's prompt: another region (a prompt holds no text, so the
    # 800-character screen's prompt, of the same height, is the same prompt).
    _, other_grid, other = load(folder / "questionnaire_single3-editor_marks.json")
    text, prompt = typed(label), editor_prompt(other_grid, other)
    assert not profile.editor_matches(grid, prompt, text)
    own = editor_prompt(grid, profile.classify(grid))
    moved = attrs.evolve(own, region=attrs.evolve(own.region, top=own.region.top - 1))
    assert not profile.editor_matches(grid, moved, text)


# ---------------------------------------------------------------- multi-select


@corpus.each(MULTI)
def test_a_multi_select_editor_stays_a_multi_select_step(path: Path) -> None:
    """Enter there ticks or unticks the typed text and answers nothing: no free-text plan."""
    label, grid, observation = load(path)
    profile: ClaudeProfile = PROFILES[label["version"]]
    text = typed(label)
    prompt = observation.prompt
    assert observation.actionable and prompt is not None
    assert (prompt.kind, prompt.step) == (InteractionKind.QUESTIONNAIRE, StepKind.MULTI_SELECT)
    (question,) = prompt.questions
    assert question.response_kind is ResponseKind.MULTI_SELECT
    (free,) = [o for o in question.options if o.role is OptionRole.FREE_TEXT]
    assert free.current and free.checked is bool(text)
    assert not profile.editor_matches(grid, prompt, text or "Type something")
    with pytest.raises(KeyPlanError) as refused:
        profile.key_plans.plan_for(prompt.kind, prompt.step, Intent.FREE_TEXT)
    assert refused.value.reason is PlanRefusal.NO_PLAN
    plan = profile.key_plans.plan_for(prompt.kind, prompt.step, Intent.CHOOSE)
    if text:  # the typed text is ticked but is no option: a person clears it first
        with pytest.raises(KeyPlanError) as ticked:
            expand(plan, question.options, chosen=(0,))
        assert ticked.value.reason is PlanRefusal.NOT_A_CHOICE
    else:
        assert expand(plan, question.options, chosen=(0,))


@pytest.mark.parametrize("version", VERSIONS)
def test_only_an_empty_or_closed_editor_takes_an_answer(version: str) -> None:
    """Text in the open editor (a person's) would be typed after: `editor_taken` says so,
    and the answer is refused before a key. The placeholder of an empty editor is no text."""
    profile = PROFILES[version]
    folder = corpus.ROOT / "claude" / version
    taken = {}
    for step in ("q1", "free_text_empty", "free_text_typed"):
        _, grid, observation = load(folder / f"questionnaire_single2-{step}.json")
        assert observation.prompt is not None and observation.actionable
        taken[step] = profile.editor_taken(grid, observation.prompt)
    assert taken == {
        "q1": None,
        "free_text_empty": None,
        "free_text_typed": "editor holds text typed there",
    }
