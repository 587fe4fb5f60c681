"""Claude questions whose options wrap or are written in other scripts: read back exactly.

Over the captured screens of the question plans (``questionnaire_wrapped``,
``questionnaire_tall``: labels and descriptions over several rows;
``questionnaire_unicode`` and ``questionnaire_unicode_multi``: CJK, a ZWJ emoji,
Arabic and Hebrew; ``questionnaire_cjk``: a question and descriptions in Chinese,
cut at the pane's edge):

1. Every actionable screen projects exactly the scenario's labels and
   descriptions (wrapped rows joined, each wide character once).
2. One changed cell (its character or any style) in the question's rows or an
   option's (labels, their continuation rows, descriptions) either leaves no
   actionable question (fail closed) or changes the prompt's fingerprint, and so
   its interaction id.
3. A row that cannot be Claude's own wrap of the row above (its first word would
   have fit there, or it may go on with an ASCII word cut at the pane's edge) is
   refused, while a word of CJK text cut at a full row reads joined with nothing
   (`akk.profiles.wrap`); refused too is a question with an emoji whose variation selector Claude
   does not draw (``questionnaire_selector``) or with a zero-width space or soft
   hyphen Claude draws as U+FFFD (``questionnaire_invisible``), at every size.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from akk.profiles import claude
from akk.profiles.observation import InteractionKind, Observation, OptionRole
from akk.qualify.scenarios import SCENARIOS, AskUserQuestion
from akk.screen import Cell, Grid, IdMinter, fingerprint
from akk.screen.fingerprint import Appearance
from tests import corpus
from tests.test_fingerprint import _FIELDS, SECRET, TERMINAL, _changed_cell_in_row
from tests.tier import examples

CLAUDE = corpus.ROOT / "claude"  # the cases are named by their path under it
PLANS = (
    "questionnaire_wrapped",
    "questionnaire_tall",
    "questionnaire_unicode",
    "questionnaire_cjk",
)
PROFILES = {profile.version: profile for profile in claude.PROFILES}
IDS = IdMinter(SECRET)
_OPTION = re.compile(r"[❯ ] 1\. ")


@attrs.frozen(repr=False)
class Case:
    """One captured question screen, classified, with the rows its options fill."""

    name: str
    plan: str
    size: tuple[int, int]
    profile: claude.ClaudeProfile
    grid: Grid
    observation: Observation
    option_rows: tuple[int, ...]  # the choices' label, continuation and description rows
    question_rows: tuple[int, ...]

    def __repr__(self) -> str:
        return f"Case({self.name!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # the grid runs to a megabyte

    @functools.cached_property
    def interaction_id(self) -> str:
        """The id of the screen as captured (worked out once, not once per example)."""
        return _interaction_id(self, self.grid, self.observation)


def _option_rows(grid: Grid, observation: Observation) -> tuple[int, ...]:
    """Rows from the first option's to the one before the free-text row."""
    assert observation.prompt is not None
    (question,) = observation.prompt.questions
    free = next(o for o in question.options if o.role is OptionRole.FREE_TEXT)
    region = observation.prompt.region
    texts = [grid.row_text(y) for y in range(region.top, region.bottom)]
    first = next(i for i, text in enumerate(texts) if _OPTION.match(text))
    last = next(i for i, text in enumerate(texts) if re.match(rf"[❯ ] {free.number}\. ", text))
    return tuple(range(region.top + first, region.top + last))


def _question_rows(grid: Grid, observation: Observation) -> tuple[int, ...]:
    """The question's rows: under the tab row and its blank row, up to a blank row."""
    assert observation.prompt is not None
    first = observation.prompt.region.top + 3
    end = next(y for y in range(first, grid.rows) if not grid.row_text(y).strip())
    return tuple(range(first, end))


def _cases() -> list[Case]:
    cases = []
    for label_path in sorted(CLAUDE.glob("*/**/questionnaire_*.json")):
        label = corpus.label(label_path)
        if not label["plan"].startswith(PLANS) or label["expected"]["kind"] != "questionnaire":
            continue
        _, grid = corpus.screen(label_path)
        _, observation = corpus.observed(label_path)
        profile = PROFILES[label["version"]]
        cases.append(
            Case(
                name=str(label_path.relative_to(CLAUDE)),
                plan=label["plan"],
                size=(label["cols"], label["rows"]),
                profile=profile,
                grid=grid,
                observation=observation,
                option_rows=_option_rows(grid, observation),
                question_rows=_question_rows(grid, observation),
            )
        )
    return cases


CASES = _cases()


def _name(case: Case) -> str:
    return case.name


def _question(plan: str) -> Any:
    reply = SCENARIOS[plan].steps[0].reply
    assert isinstance(reply, AskUserQuestion)
    (question,) = reply.questions
    return question


def _actionable_question(observation: Observation) -> bool:
    prompt = observation.prompt
    return (
        observation.actionable
        and prompt is not None
        and prompt.kind is InteractionKind.QUESTIONNAIRE
    )


def _interaction_id(case: Case, grid: Grid, observation: Observation) -> str:
    assert observation.prompt is not None
    fp = fingerprint(
        grid, observation.prompt.region, profile_id=case.profile.id, terminal_identity=TERMINAL
    )
    return IDS.interaction_id(Appearance(fp, 0))


SIZES = ((120, 40), (80, 24), (60, 40), (100, 30), (132, 43), (200, 50))


def test_every_pinned_version_has_its_wrapped_and_unicode_questions() -> None:
    for plan in (
        "questionnaire_wrapped",
        "questionnaire_unicode",
        "questionnaire_unicode_multi",
        "questionnaire_cjk",
    ):
        for size in SIZES:
            versions = {c.profile.version for c in CASES if (c.plan, c.size) == (plan, size)}
            assert versions == set(PROFILES), (plan, size)
    # Taller than an 80x24 pane, it is read at the other sizes only (its label says unknown).
    tall = {(c.profile.version, c.size) for c in CASES if c.plan == "questionnaire_tall"}
    assert tall == {(v, size) for v in PROFILES for size in SIZES if size != (80, 24)}


# -- 1. the options read back exactly


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_options_project_the_scenarios_labels_and_descriptions(case: Case) -> None:
    assert _actionable_question(case.observation), case.observation.reason
    assert case.observation.prompt is not None
    (shown,) = case.observation.prompt.questions
    question = _question(case.plan)
    choices = [o for o in shown.options if o.role is OptionRole.CHOICE]
    assert shown.prompt == question.question
    if case.plan == "questionnaire_tall":
        assert len(case.question_rows) > 1  # the question wraps too
    assert [o.label for o in choices] == [o.label for o in question.options]
    assert [o.description for o in choices] == [o.description for o in question.options]


def test_the_wrapped_questions_wrap() -> None:
    """Labels over two rows at 80 columns (one at 120 too), descriptions at every size up to
    132 columns (at 200 the wrapped plan's fit on their rows)."""
    for case in CASES:
        if case.plan.startswith(("questionnaire_unicode", "questionnaire_cjk")) or (
            case.size[0] > 132
        ):
            continue
        options = len(_question(case.plan).options)
        assert len(case.option_rows) > 2 * options + (2 if case.size == (80, 24) else 0), case.name


# -- 2. every cell of the options is bound


@pytest.mark.parametrize("case", CASES, ids=_name)
@settings(max_examples=examples(20))
@given(data=st.data(), field=st.sampled_from(_FIELDS))
def test_a_changed_cell_in_an_option_changes_the_interaction(
    case: Case, data: st.DataObject, field: str
) -> None:
    grid = case.grid
    rows = case.question_rows + case.option_rows
    x, y, changed = _changed_cell_in_row(grid, rows, data, field)
    observation = case.profile.classify(changed)
    if not _actionable_question(observation):
        event("refused")
        return
    event("still actionable")
    assert _interaction_id(case, changed, observation) != case.interaction_id, (x, y, field)


# -- 3. what cannot be read back is refused


def _wraps(case: Case, rows: int = 1) -> bool:
    """Whether the first option's label goes on in the `rows` rows under it (not muted: no
    description)."""
    first = case.option_rows[0]
    label_col = case.grid.row_text(first).index(". ") + 2
    for y in range(first + 1, first + 1 + rows):
        below = case.grid.row_text(y)
        start = len(below) - len(below.lstrip(" "))
        if start != label_col or case.grid.cell(start, y).fg == "949494":
            return False
    return True


WRAPPED = [case for case in CASES if _wraps(case)]
ON_TWO_ROWS = [case for case in WRAPPED if not _wraps(case, 2)]
"""The first label on exactly two rows: its second row can be rewritten alone."""


def _with_text(grid: Grid, y: int, start: int, text: str) -> Grid:
    """Row `y` from column `start` on holding `text` (wide characters over two cells)."""
    row = list(grid.row(y))
    style = row[start]
    cells: list[Cell] = []
    for char in text:
        wide = char >= "\u3000"
        cells.append(attrs.evolve(style, char=char, width=2 if wide else 1))
        if wide:
            cells.append(attrs.evolve(style, char="", width=0))
    blank = attrs.evolve(style, char=" ", width=1)
    row[start:] = (cells + [blank] * grid.cols)[: grid.cols - start]
    rows = [grid.row(i) if i != y else tuple(row) for i in range(grid.rows)]
    return Grid(cols=grid.cols, rows=grid.rows, cells=tuple(rows))


def test_wrapped_questions_of_every_version_are_covered() -> None:
    assert {case.profile.version for case in WRAPPED} == set(PROFILES)


@pytest.mark.parametrize("case", WRAPPED, ids=_name)
def test_a_row_whose_first_word_fits_above_is_refused(case: Case) -> None:
    upper = case.option_rows[0]
    text = case.grid.row_text(upper)
    start = text.index(". ") + 2
    # Only the label's first word left on the row above: the next word would have fit there.
    grid = _with_text(case.grid, upper, start, text[start:].split(" ", 1)[0])
    observation = case.profile.classify(grid)
    assert not observation.actionable
    assert observation.reason is not None and "does not wrap" in observation.reason


def _first_label(observation: Observation) -> str:
    assert observation.prompt is not None
    return observation.prompt.questions[0].options[0].label


@pytest.mark.parametrize("case", WRAPPED, ids=_name)
def test_an_ascii_word_cut_at_the_edge_is_refused(case: Case) -> None:
    upper = case.option_rows[0]
    start = case.grid.row_text(upper).index(". ") + 2
    width = case.grid.cols - start
    # One word fills the row: a cut there, or a wrap at a space before the next row's
    # first word, draw the same screen.
    grid = _with_text(case.grid, upper, start, "x" * width)
    grid = _with_text(grid, upper + 1, start, "yyy")
    observation = case.profile.classify(grid)
    assert not observation.actionable
    assert observation.reason is not None and "cut at the edge" in observation.reason


@pytest.mark.parametrize("case", ON_TWO_ROWS, ids=_name)
def test_a_cjk_word_cut_at_a_full_row_reads_joined_with_nothing(case: Case) -> None:
    upper = case.option_rows[0]
    start = case.grid.row_text(upper).index(". ") + 2
    width = case.grid.cols - start
    full = "漢" * (width // 2)  # the next wide character would not fit
    grid = _with_text(_with_text(case.grid, upper, start, full), upper + 1, start, "字" * 3)
    observation = case.profile.classify(grid)
    assert observation.actionable, observation.reason
    assert _first_label(observation) == full + "字" * 3
    # With room for one more wide character on the row above, the break was a space's.
    short = full[:-1]
    grid = _with_text(_with_text(case.grid, upper, start, short), upper + 1, start, "字" * 3)
    observation = case.profile.classify(grid)
    assert observation.actionable, observation.reason
    assert _first_label(observation) == f"{short} {'字' * 3}"


UNREADABLE = sorted(
    path
    for plan in ("questionnaire_selector", "questionnaire_invisible")
    for path in CLAUDE.glob(f"*/**/{plan}-q1.json")
)


def test_every_version_and_size_has_the_unreadable_questions() -> None:
    assert len(UNREADABLE) == 2 * len(SIZES) * len(PROFILES)


@pytest.mark.parametrize("label_path", UNREADABLE, ids=lambda p: str(p.relative_to(CLAUDE)))
def test_a_question_the_screen_does_not_show_as_sent_is_refused(label_path: Path) -> None:
    label, grid = corpus.screen(label_path)
    _, observation = corpus.observed(label_path)
    assert not observation.actionable
    assert observation.reason is not None and "cannot be read back" in observation.reason
    # The labels show without their selectors, a format character as U+FFFD.
    shown = "\n".join(grid.lines())
    for option in _question(label["plan"]).options:
        drawn = re.sub("[\u200b\u00ad]", "\ufffd", re.sub("[\ufe0e\ufe0f]", "", option.label))
        assert drawn in shown
        assert drawn == option.label or option.label not in shown
