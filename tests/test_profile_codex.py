"""The Codex profiles on the captured corpus, and what must never be actionable.

The profiles under test are `akk.profiles.codex`'s own rows, not the registry's;
the screens come through tests/corpus.py. Property tests mutate real fixture
screens: one cell inside the prompt region, scrollback above it, whole rows
dropped, inserted or renumbered, and screens read under the wrong profile.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from akk.evidence.model import PendingCall
from akk.profiles.codex import PROFILES, CodexProfile
from akk.profiles.composer import TypingMethod
from akk.profiles.observation import Observation, OptionRole, PromptView, State, StepKind
from akk.profiles.permission import bind_pending
from akk.protocol.wakeups import PROMPT_CUT_OFF, manual_reason
from akk.qualify.scenarios import SCENARIOS, ApplyPatch
from akk.screen import Cell, Grid, fingerprint, render
from tests import corpus
from tests.test_codex_patches import patch_call
from tests.test_fixtures import classifies_to_its_label

SIZE_FOLDER = re.compile(r"\d+x\d+")
"""A size folder (`80x24`, `60x40`, `100x30`, `132x43`, `200x50`): every size besides 120x40."""
CODEX_LABELS = sorted(corpus.ROOT.glob("codex/*/*.json")) + sorted(
    path for path in corpus.ROOT.glob("codex/*/*/*.json") if SIZE_FOLDER.fullmatch(path.parent.name)
)
OTHER_LABELS = sorted(corpus.ROOT.glob("claude/*/*.json")) + sorted(
    corpus.ROOT.glob("claude/*/80x24/*.json")
)
BY_VERSION = {profile.version: profile for profile in PROFILES}
IDENTITY = "pane %1 / pid 4242 / started 2024-01-01T00:00:00Z"
PROPERTY = settings(max_examples=60)


@attrs.frozen
class Fixture:
    """A captured screen with its label and the profile of its exact version."""

    path: Path
    label: dict[str, object]
    grid: Grid
    profile: CodexProfile | None

    @property
    def name(self) -> str:
        return corpus.name(self.path)


def _load(path: Path) -> Fixture:
    label, grid = corpus.screen(path)
    return Fixture(path, label, grid, BY_VERSION.get(str(label["version"])))


def _prompts() -> list[Fixture]:
    """Every Codex fixture whose label is a prompt with its rows on screen.

    A queued async question (its label lists no questions) shows no rows to answer.
    """
    fixtures = [_load(path) for path in CODEX_LABELS]
    return [f for f in fixtures if _answerable(f.label["expected"])]  # type: ignore[arg-type]


def _answerable(expected: dict[str, Any]) -> bool:
    if expected["state"] not in ("permission", "questionnaire", "async_question"):
        return False
    return bool(expected["questions"] or expected["decisions"])


def _observe(fixture: Fixture, grid: Grid | None = None) -> Observation:
    assert fixture.profile is not None, f"{fixture.name}: no Codex profile for its version"
    if grid is None:
        return corpus.observed(fixture.path)[1]
    return fixture.profile.classify(grid)


def _with_rows(grid: Grid, rows: list[tuple[Cell, ...]]) -> Grid:
    """The same-size grid with `rows` (padded with blank rows, or cut from the top)."""
    blank = tuple(Cell() for _ in range(grid.cols))
    rows = rows[-grid.rows :] if len(rows) > grid.rows else rows + [blank] * (grid.rows - len(rows))
    return Grid(grid.cols, grid.rows, cells=tuple(rows))


def _with_cell(grid: Grid, x: int, y: int, cell: Cell) -> Grid:
    rows = [grid.row(r) for r in range(grid.rows)]
    rows[y] = (*rows[y][:x], cell, *rows[y][x + 1 :])
    return Grid(grid.cols, grid.rows, cells=tuple(rows))


def _text_row(cols: int, text: str) -> tuple[Cell, ...]:
    return tuple(Cell(char=ch) for ch in text.ljust(cols)[:cols])


PROMPTS = _prompts()
prompt_fixtures = st.sampled_from(PROMPTS)


def test_the_codex_corpus_is_there() -> None:
    versions = {_load(path).label["version"] for path in CODEX_LABELS}
    assert versions == set(BY_VERSION)
    kinds = {f.label["expected"]["kind"] for f in PROMPTS}  # type: ignore[index]
    assert kinds == {"permission", "questionnaire", "confirmation", "async_question"}


@corpus.each(CODEX_LABELS)
def test_each_fixture_gets_its_state_with_a_proven_region(path: Path) -> None:
    fixture = _load(path)
    expected = fixture.label["expected"]
    observation = _observe(fixture)
    assert observation.state.value == expected["state"], observation.reason  # type: ignore[index]
    assert observation.profile_id == f"codex@{fixture.label['version']}"
    if observation.prompt is not None:
        region = observation.prompt.region
        # The region runs from the prompt's top anchor to its footer, full width.
        assert (region.left, region.right) == (0, fixture.grid.cols)
        assert fixture.grid.row_text(region.bottom - 1).strip()
        below = [fixture.grid.row_text(y).strip() for y in range(region.bottom, fixture.grid.rows)]
        if observation.prompt.step is StepKind.QUEUED:
            # A queued question's rows sit right above the composer, one blank row between.
            assert below[0] == "" and below[1].startswith("›")
        else:
            assert not any(below)


def test_a_highlighted_persistent_approval_row_is_blocked() -> None:
    fixture = next(f for f in PROMPTS if f.label["expected"]["kind"] == "permission")  # type: ignore[index]
    prompt = _observe(fixture).prompt
    assert prompt is not None
    grid, region = fixture.grid, prompt.region
    once = next(y for y in range(region.top, region.bottom) if grid.row_text(y).startswith("› 1."))
    persistent = once + 1
    assert grid.row_text(persistent).startswith("  2. Yes, and don't ask again")
    highlighted, plain = grid.cell(0, once), Cell()
    rows = [grid.row(y) for y in range(grid.rows)]
    rows[once] = (plain, *_restyled(rows[once][1:], plain))
    rows[persistent] = (highlighted, *_restyled(rows[persistent][1:], highlighted))
    observation = _observe(fixture, Grid(grid.cols, grid.rows, cells=tuple(rows)))
    assert observation.state is State.BLOCKED and not observation.actionable
    assert observation.reason and "persistent" in observation.reason
    assert observation.prompt is not None
    (current,) = [o for o in observation.prompt.questions[0].options if o.current]
    assert current.role is OptionRole.APPROVE_PERSISTENT


def _restyled(cells: tuple[Cell, ...], like: Cell) -> tuple[Cell, ...]:
    """The same characters drawn in the style of `like`."""
    return tuple(attrs.evolve(like, char=cell.char, width=cell.width) for cell in cells)


def test_permission_options_never_carry_their_key_shortcuts() -> None:
    for fixture in PROMPTS:
        prompt = _observe(fixture).prompt
        assert prompt is not None
        for option in prompt.questions[0].options:
            assert not option.label.endswith(("(y)", "(p)", "(esc)")), option.label


@PROPERTY
@given(prompt_fixtures, st.data())
def test_one_cell_inside_the_region_changes_the_fingerprint(
    fixture: Fixture, data: st.DataObject
) -> None:
    observation = _observe(fixture)
    assert observation.prompt is not None
    region = observation.prompt.region
    x = data.draw(st.integers(region.left, region.right - 1))
    y = data.draw(st.integers(region.top, region.bottom - 1))
    old = fixture.grid.cell(x, y)
    new = data.draw(
        st.one_of(
            st.sampled_from("aZ9›│ .")
            .filter(lambda ch: ch != old.char)
            .map(lambda ch: attrs.evolve(old, char=ch, width=1)),
            st.booleans().map(lambda b: attrs.evolve(old, bold=not old.bold)),
            st.sampled_from(["red", "cyan", "5fafff"])
            .filter(lambda c: c != old.fg)
            .map(lambda c: attrs.evolve(old, fg=c)),
        )
    )
    if old.width != 1:
        return  # wide characters and their continuations: covered by the fingerprint tests
    mutated = _with_cell(fixture.grid, x, y, new)
    profile_id = observation.profile_id or ""
    before = fingerprint(fixture.grid, region, profile_id=profile_id, terminal_identity=IDENTITY)
    after = fingerprint(mutated, region, profile_id=profile_id, terminal_identity=IDENTITY)
    assert before != after
    again = _observe(fixture, mutated)
    if again.actionable:
        assert again.prompt is not None and again.prompt.region == region


@PROPERTY
@given(prompt_fixtures, st.data())
def test_scrollback_above_the_region_does_not_change_the_prompt(
    fixture: Fixture, data: st.DataObject
) -> None:
    observation = _observe(fixture)
    assert observation.prompt is not None
    region = observation.prompt.region
    if region.top < 2:
        return
    # The blank row right above the region is its proven edge; anything higher is history.
    y = data.draw(st.integers(0, region.top - 2))
    x = data.draw(st.integers(0, fixture.grid.cols - 1))
    if fixture.grid.cell(x, y).width != 1:
        return
    char = data.draw(st.sampled_from("xQ7•›─ "))
    mutated = _with_cell(fixture.grid, x, y, Cell(char=char, fg="red", bold=True))
    again = _observe(fixture, mutated)
    assert again.actionable and again.prompt is not None, again.reason
    assert again.prompt.region == region
    profile_id = observation.profile_id or ""
    assert fingerprint(mutated, region, profile_id=profile_id, terminal_identity=IDENTITY) == (
        fingerprint(fixture.grid, region, profile_id=profile_id, terminal_identity=IDENTITY)
    )


@PROPERTY
@given(
    st.sampled_from(PROFILES),
    st.integers(20, 130),
    st.integers(4, 45),
    st.lists(st.text(alphabet="  ›•◦─│╭╰|.()$/:1234 aNbQ-\u2190\u2192", max_size=140), max_size=45),
)
def test_random_garbage_is_never_actionable(
    profile: CodexProfile, cols: int, rows: int, lines: list[str]
) -> None:
    capture = "\n".join(line[:cols] for line in lines[:rows])
    grid = render(capture, cols, rows)
    assert not profile.classify(grid).actionable


def _region_rows(fixture: Fixture) -> tuple[list[tuple[Cell, ...]], int, int]:
    observation = _observe(fixture)
    assert observation.prompt is not None
    region = observation.prompt.region
    return [fixture.grid.row(y) for y in range(fixture.grid.rows)], region.top, region.bottom


def _last_question_option(fixture: Fixture, y: int) -> bool:
    """Whether row `y` is the last row of a question's menu (dropping it leaves a valid menu)."""
    prompt = _observe(fixture).prompt
    assert prompt is not None
    if prompt.kind.value == "permission":
        return False
    text = fixture.grid.row_text(y)
    last = prompt.questions[0].options[-1]
    return text.strip().lstrip("› ").startswith(f"{last.number}. ")


_MENU_ROW = re.compile(r"\s*(?:› )?\d+\. ")


def _wrapped_rows(fixture: Fixture) -> set[int]:
    """The rows that continue wrapped text: a long command, an option's label or description,
    the model's reason (`_reason_rows`), a long question (`_question_rows`).

    Wrapped text carries no mark of how many rows it has, so a screen with one of
    these rows missing reads as a shorter command or description (like the long
    notes in `notes/`). Such a screen is still refused an earlier offer: its
    region, and so its fingerprint, differ (`test_a_dropped_wrapped_row_changes_...`).
    """
    prompt = _observe(fixture).prompt
    assert prompt is not None
    texts = [fixture.grid.row_text(y) for y in range(fixture.grid.rows)]
    wrapped: set[int] = set()
    for y in range(prompt.region.top + 1, prompt.region.bottom):
        above, text = texts[y - 1], texts[y]
        if not text.strip() or _MENU_ROW.match(text):
            continue
        if above.startswith("  $ ") or _MENU_ROW.match(above) or y - 1 in wrapped:
            wrapped.add(y)
    return wrapped | _reason_rows(fixture) | _question_rows(prompt, texts)


def _question_rows(prompt: PromptView, texts: list[str]) -> set[int]:
    """The rows of a question's text wrapped over several rows, or in several paragraphs:
    without any one of them the rest still reads as a (shorter) question."""
    asked = prompt.questions[0].prompt
    first = next(
        (y for y, text in enumerate(texts) if text.strip() and asked.startswith(text.strip())), None
    )
    if first is None or texts[first].strip() == asked:
        return set()
    menu = next(y for y in range(first, len(texts)) if _MENU_ROW.match(texts[y]))
    return {y for y in range(first, menu) if texts[y].strip()}


def _wraps_the_reason(fixture: Fixture, y: int, text: str) -> bool:
    """Whether `text`, put at row `y`, continues the reason paragraph above it as a wrap."""
    above = fixture.grid.row_text(y - 1).rstrip()
    word = text[2:].split(" ", 1)[0]
    wraps = len(above) + 1 + len(word) > fixture.grid.cols - 2
    return y - 1 in _reason_rows(fixture) and text.startswith("  ") and text[2] != " " and wraps


def _reason_rows(fixture: Fixture) -> set[int]:
    """The rows of the approval's ``Reason:`` paragraph.

    The reason is the model's text, not part of the command or the options: a screen
    missing one of these rows projects the same prompt, under another fingerprint.
    """
    texts = [fixture.grid.row_text(y) for y in range(fixture.grid.rows)]
    first = next((y for y, text in enumerate(texts) if text.startswith("  Reason: ")), None)
    return set() if first is None else set(_paragraph(texts, first))


def _paragraph(texts: list[str], first: int) -> range:
    """Rows `first` up to the next blank row."""
    return range(first, next(y for y in range(first, len(texts)) if not texts[y].strip()))


WRAPPED = [f for f in PROMPTS if _wrapped_rows(f)]


def test_wrapped_prompts_are_in_the_corpus() -> None:
    names = {f.name.rsplit("/", 1)[-1] for f in WRAPPED}
    wanted = {"codex_exec_long", "codex_exec_reason_long"}
    assert {f"{name}-permission.json" for name in wanted} | {"codex_rui_long-q1.json"} <= names


@corpus.each(WRAPPED, lambda f: f.name)
def test_a_dropped_wrapped_row_changes_the_fingerprint_and_the_projection(
    fixture: Fixture,
) -> None:
    observation = _observe(fixture)
    assert observation.prompt is not None
    region, profile_id = observation.prompt.region, observation.profile_id or ""
    before = fingerprint(fixture.grid, region, profile_id=profile_id, terminal_identity=IDENTITY)
    rows = [fixture.grid.row(y) for y in range(fixture.grid.rows)]
    for y in _wrapped_rows(fixture):
        grid = _with_rows(fixture.grid, rows[:y] + rows[y + 1 :])
        again = _observe(fixture, grid)
        if not again.actionable:
            continue
        assert again.prompt is not None
        if y not in _reason_rows(fixture):
            assert again.prompt.questions != observation.prompt.questions, y
        fresh = fingerprint(
            grid, again.prompt.region, profile_id=profile_id, terminal_identity=IDENTITY
        )
        assert fresh != before, y


@PROPERTY
@given(prompt_fixtures, st.data())
def test_truncated_prompts_are_never_actionable(fixture: Fixture, data: st.DataObject) -> None:
    rows, top, bottom = _region_rows(fixture)
    how = data.draw(st.sampled_from(["cut_top", "cut_bottom", "drop_one"]))
    if how == "cut_top":
        k = data.draw(st.integers(1, bottom - top))
        kept = rows[:top] + rows[top + k :]
    elif how == "cut_bottom":
        k = data.draw(st.integers(1, bottom - top))
        kept = rows[: bottom - k] + rows[bottom:]
    else:
        wrapped = _wrapped_rows(fixture)
        candidates = [
            y
            for y in range(top, bottom)
            if fixture.grid.row_text(y).strip()
            and not _last_question_option(fixture, y)
            and y not in wrapped
        ]
        y = data.draw(st.sampled_from(candidates))
        kept = rows[:y] + rows[y + 1 :]
    cut = _observe(fixture, _with_rows(fixture.grid, kept))
    patched = _patched(cut)
    if cut.actionable and patched:
        # A patch's files are a row each: one cut off reads as fewer of the same files,
        # and the pending call, which names them all, never binds to it.
        whole = _patched(_observe(fixture))
        assert set(patched) < set(whole)
        assert not bind_pending(cut, [_patch_call(fixture, whole)])[0].actionable
        return
    assert not cut.actionable


def _patched(observation: Observation) -> tuple[str, ...]:
    """The files a patch approval names (none for any other observation)."""
    prompt = observation.prompt
    return prompt.questions[0].patched if prompt is not None and prompt.questions else ()


def _patch_call(fixture: Fixture, drawn: tuple[str, ...]) -> PendingCall:
    """The pending call of the fixture's patch scenario, from the lab's working directory
    (``work`` beside the files it adds)."""
    (reply,) = [step.reply for step in SCENARIOS[fixture.label["scenario"]].steps[:1]]
    assert isinstance(reply, ApplyPatch)
    return patch_call(reply.patch, posixpath.dirname(drawn[0]) + "/work")


PATCHES = [f for f in PROMPTS if len(_patched(_observe(f))) > 1]


@corpus.each(PATCHES, lambda f: f.name)
def test_a_patch_approval_missing_a_file_s_row_binds_to_no_call(fixture: Fixture) -> None:
    """The property above, for every row of every patch of several files: Codex draws a
    row per file, so without one the screen names fewer of the same files."""
    whole = _patched(_observe(fixture))
    rows, top, bottom = _region_rows(fixture)
    for y in range(top, bottom):
        if not fixture.grid.row_text(y).strip():
            continue
        cut = _observe(fixture, _with_rows(fixture.grid, rows[:y] + rows[y + 1 :]))
        if cut.actionable and _patched(cut):
            assert set(_patched(cut)) < set(whole), y
            assert not bind_pending(cut, [_patch_call(fixture, whole)])[0].actionable, y
        else:
            assert not cut.actionable, y


def test_the_corpus_has_patches_of_several_files() -> None:
    assert {f.label["version"] for f in PATCHES} == set(BY_VERSION)


@PROPERTY
@given(prompt_fixtures, st.data())
def test_an_unexpected_row_inside_the_region_is_never_actionable(
    fixture: Fixture, data: st.DataObject
) -> None:
    rows, top, bottom = _region_rows(fixture)
    y = data.draw(st.integers(top + 1, bottom - 1))
    indent = data.draw(st.integers(0, 3))
    text = data.draw(st.text(alphabet="abcXYZ 12.:", min_size=1, max_size=60).filter(str.strip))
    extra = _text_row(fixture.grid.cols, " " * indent + text.strip())
    # A row that continues the model's reason as Codex wraps it is one: the same screen.
    assume(not _wraps_the_reason(fixture, y, " " * indent + text.strip()))
    kept = [*rows[:y], extra, *rows[y:]]
    # A bottom-anchored screen (0.169.0) scrolls up; the others have blank rows below.
    if fixture.grid.row_text(fixture.grid.rows - 1).strip():
        kept = kept[1:]
    assert not _observe(fixture, _with_rows(fixture.grid, kept)).actionable


def _menu_rows(fixture: Fixture) -> list[int]:
    prompt = _observe(fixture).prompt
    assert prompt is not None
    numbers = {f"{o.number}. " for o in prompt.questions[0].options}
    region = prompt.region
    return [
        y
        for y in range(region.top, region.bottom)
        if fixture.grid.row_text(y).strip().lstrip("› ")[:3] in numbers
    ]


@PROPERTY
@given(prompt_fixtures, st.data())
def test_shuffled_or_duplicated_option_numbers_are_never_actionable(
    fixture: Fixture, data: st.DataObject
) -> None:
    menu = _menu_rows(fixture)
    grid = fixture.grid
    digits = [next(x for x in range(grid.cols) if grid.cell(x, y).char.isdigit()) for y in menu]
    numbers = [grid.cell(x, y).char for x, y in zip(digits, menu, strict=True)]
    wanted = data.draw(
        st.one_of(
            st.permutations(numbers),
            st.lists(st.sampled_from(numbers), min_size=len(numbers), max_size=len(numbers)),
        ).filter(lambda seq: list(seq) != numbers)
    )
    for x, y, number in zip(digits, menu, wanted, strict=True):
        grid = _with_cell(grid, x, y, attrs.evolve(grid.cell(x, y), char=number))
    assert not _observe(fixture, grid).actionable


def _incompatible(fixture: Fixture) -> list[CodexProfile]:
    """Profiles that must not read this prompt: another highlight style, or no such prompt kind.

    Versions that draw a prompt identically (0.153.4 to 0.155.1) read each other's
    screens alike; binding by exact version is what keeps them apart.
    """
    own = fixture.profile
    assert own is not None
    is_async = fixture.label["expected"]["kind"] == "async_question"  # type: ignore[index]
    return [
        other
        for other in PROFILES
        if other.highlight != own.highlight or (is_async and other.async_question is None)
    ]


@corpus.each(PROMPTS, lambda f: f.name)
def test_a_prompt_under_an_incompatible_codex_version_is_never_actionable(
    fixture: Fixture,
) -> None:
    others = _incompatible(fixture)
    assert others, "every pinned version has an incompatible one to test against"
    for other in others:
        assert not other.classify(fixture.grid).actionable, other.id


def test_other_family_screens_are_never_actionable_under_codex() -> None:
    assert OTHER_LABELS, "the Claude corpus is needed to test cross-family classification"
    for path in OTHER_LABELS:
        _, grid = corpus.screen(path)
        for profile in PROFILES:
            observation = profile.classify(grid)
            assert not observation.actionable, (path, profile.id)
            assert observation.state not in (State.IDLE, State.IDLE_DRAFT, State.WORKING), (
                path,
                profile.id,
            )


# ---------------------------------------------------------------- Plan mode (composer)

PLAN_MODE = "Plan mode (shift+tab to cycle)"


def _plan_mode(version: str, step: str, size: str = "") -> Fixture:
    return _load(corpus.ROOT / "codex" / version / size / f"codex_plan_mode-{step}.json")


def _with_last_row(grid: Grid, row: tuple[Cell, ...]) -> Grid:
    return _with_rows(grid, [*(grid.row(y) for y in range(grid.rows - 1)), row])


def _hint_row(
    cols: int, left: str, label: str, *, pad: int = 1, fg: str = "magenta"
) -> tuple[Cell, ...]:
    """A hint row as 0.169.0 draws it: hints from column 2, `label` right-aligned (mode in `fg`)."""
    cells = list(_text_row(cols, f"  {left}" if left else ""))
    start = cols - pad - len(label)
    for i, ch in enumerate(label):
        cells[start + i] = Cell(char=ch, fg=fg if i < len("Plan mode") else "default")
    return tuple(cells)


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_the_plan_mode_composer_is_idle_or_holds_its_draft(version: str, size: str) -> None:
    """Up to 0.155.1 the mode ends the status row; 0.169.0 draws it alone under it with a draft."""
    idle = _plan_mode(version, "idle", size)
    observation = _observe(idle)
    assert observation.state is State.IDLE and observation.draft is not None
    assert observation.draft.empty
    fixture = _plan_mode(version, "idle_draft", size)
    text = str(fixture.label["expected"]["draft"])  # type: ignore[index]
    observation = _observe(fixture)
    assert observation.state is State.IDLE_DRAFT, observation.reason
    draft = observation.draft
    assert draft is not None and draft.complete and draft.rows == (text,)
    assert draft.width == fixture.grid.cols - 3
    assert fixture.profile is not None
    assert fixture.profile.draft_matches(draft, text, TypingMethod.LITERAL)
    assert not fixture.profile.draft_matches(draft, text + " more", TypingMethod.LITERAL)


def test_the_mode_indicator_row_of_0_169_0_is_read_exactly() -> None:
    """Only the version's own label, in its colour, right-aligned, alone or after a known hint."""
    fixture = _plan_mode("0.169.0", "idle_draft")
    cols = fixture.grid.cols
    # The captured row is what `_hint_row` draws: the label alone, "Plan mode" in magenta.
    captured, drawn = fixture.grid.row(fixture.grid.rows - 1), _hint_row(cols, "", PLAN_MODE)
    assert [cell.char for cell in captured] == [cell.char for cell in drawn]
    assert [cell.fg for cell in captured if cell.fg == "magenta"] == ["magenta"] * len("Plan mode")
    accepted = {
        "alone": _hint_row(cols, "", PLAN_MODE),
        "while a turn runs": _hint_row(cols, "← for agents · ? for shortcuts", "Plan mode"),
        "after the hints": _hint_row(cols, "← for agents", PLAN_MODE),
    }
    for what, row in accepted.items():
        observation = _observe(fixture, _with_last_row(fixture.grid, row))
        assert observation.state is State.IDLE_DRAFT, (what, observation.reason)
    refused = {
        "one column off": _hint_row(cols, "", PLAN_MODE, pad=2),
        "at the edge": _hint_row(cols, "", PLAN_MODE, pad=0),
        "another colour": _hint_row(cols, "", PLAN_MODE, fg="default"),
        "another label": _hint_row(cols, "", "Code mode (shift+tab to cycle)"),
        "a cut label": _hint_row(cols, "", PLAN_MODE[:-1]),
        "an unknown hint": _hint_row(cols, "ctrl + t to view transcript", "Plan mode"),
        "no mode, no hint": _text_row(cols, " " * 40 + "lab"),
    }
    for what, row in refused.items():
        observation = _observe(fixture, _with_last_row(fixture.grid, row))
        assert observation.state is State.UNKNOWN, what
    for profile in PROFILES:
        if profile.version != "0.169.0":
            assert not profile.classify(fixture.grid).state.value.startswith("idle"), profile.id


# ---------------------------------------------------------------- a person at the composer

PERSON_MODES = {
    "draft": None,
    "shell_mode": "shell",
    "command_menu": None,
    "shortcuts": None,
    "history_search": "history_search",
}
"""Each captured step of `codex_person_while_working`, and the mode its composer is read in."""


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_person_at_the_composer_reads_working_only_while_a_turn_runs(
    version: str, size: str
) -> None:
    """A draft, the shell mode or the history search while a turn runs: working, in the mode
    the person chose (nobody is woken for it). The queue hint under a finished turn, and the
    history search there, read as no screen AKK may type into; so do the shell label in
    another colour and a search row not dim."""
    folder = corpus.ROOT / "codex" / version / size
    last_row: dict[str, tuple[Cell, ...]] = {}
    for step, mode in PERSON_MODES.items():
        fixture = _load(folder / f"codex_person_while_working-{step}.json")
        observation = _observe(fixture)
        assert (observation.state, observation.composer_mode) == (State.WORKING, mode), step
        grid = fixture.grid
        last = _last_content_row(grid)
        last_row[step] = row = grid.row(last)
        restyled = {
            "shell_mode": tuple(attrs.evolve(cell, fg="default") for cell in row),
            "history_search": tuple(attrs.evolve(cell, dim=False) for cell in row),
        }.get(step)
        if restyled is not None:
            mutated = _with_rows(grid, [*(grid.row(y) for y in range(last)), restyled])
            assert _observe(fixture, mutated).state is State.UNKNOWN, step
    idle = _load(folder / "draft-idle_draft.json")
    last = _last_content_row(idle.grid)
    queued = _with_rows(idle.grid, [*(idle.grid.row(y) for y in range(last)), last_row["draft"]])
    searching = _observe(_load(folder / "codex_person_modes-history_search.json"))
    rests = [_observe(idle, queued), searching]
    profile = BY_VERSION[version]
    if profile.person_rows.lists_below:
        # The command menu under the composer with a row of another shape in it, or (where
        # only the status line tells a running turn) with no status line above it.
        menu = _load(folder / "codex_person_while_working-command_menu.json")
        rows = [menu.grid.row(y) for y in range(menu.grid.rows)]
        status = next(y for y, row in enumerate(rows) if "esc to interrupt" in _chars(row))
        rows[status] = _text_row(menu.grid.cols, "")
        if profile.turn_end is None:
            rests.append(_observe(menu, _with_rows(menu.grid, rows)))
        last = _last_content_row(menu.grid)
        other = [menu.grid.row(y) for y in range(last)] + [_text_row(menu.grid.cols, "  2. Yes")]
        assert _observe(menu, _with_rows(menu.grid, other)).state is State.UNKNOWN
    for at_rest in rests:
        assert at_rest.state is State.UNKNOWN
        assert at_rest.reason is not None and at_rest.reason.endswith("no turn runs"), at_rest


def _chars(row: tuple[Cell, ...]) -> str:
    return "".join(cell.char for cell in row)


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", ["0.169.0", "0.171.0"])
def test_a_draft_taller_than_the_pane_reads_working_only_while_a_turn_runs(
    version: str, size: str
) -> None:
    """From 0.169.0 a pasted draft taller than the pane scrolls the composer to the pane's
    end, over its footer, its first row marked ``↑`` (dim) in the right margin. While a turn
    runs: working, the draft not whole (nobody is woken for it). At rest, or with the mark
    gone or not dim: no screen AKK reads."""
    folder = corpus.ROOT / "codex" / version / size
    fixture = _load(folder / "codex_tall_draft_scrolled-tall_draft.json")
    observation = _observe(fixture)
    assert observation.state is State.WORKING
    assert observation.draft is not None and not observation.draft.complete
    grid = fixture.grid
    x = grid.cols - 1
    (top,) = [y for y in range(grid.rows) if grid.cell(x, y).char == "↑"]
    mark = grid.cell(x, top)
    for changed in (attrs.evolve(mark, dim=False), attrs.evolve(mark, char=" ")):
        assert _observe(fixture, _with_cell(grid, x, top, changed)).state is State.UNKNOWN
    rest = _observe(_load(folder / "codex_tall_draft_at_rest-tall_draft.json"))
    assert rest.state is State.UNKNOWN and "no turn runs" in (rest.reason or ""), rest


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", ["0.155.1", "0.169.0", "0.171.0"])
def test_a_turn_the_model_api_failed_ends_with_its_red_error(version: str, size: str) -> None:
    """A failed turn draws its error (a red ``■``) under the message and no turn-end line:
    idle, so the pane takes the next task. Not red, the same row ends nothing: the turn
    reads as still running."""
    fixture = _load(corpus.ROOT / "codex" / version / size / "codex_api_error.json")
    assert _observe(fixture).state is State.IDLE
    grid = fixture.grid
    (y,) = [y for y in range(grid.rows) if grid.row_text(y).startswith("■ ")]
    plain = _with_cell(grid, 0, y, attrs.evolve(grid.cell(0, y), fg="default"))
    assert _observe(fixture, plain).state is State.WORKING


def _last_content_row(grid: Grid) -> int:
    return max(y for y in range(grid.rows) if grid.row_text(y).strip())


# ---------------------------------------------------------------- variants (issue 12)

SIZED = sorted(
    path
    for path in corpus.ROOT.glob("codex/*/*/*.json")
    if SIZE_FOLDER.fullmatch(path.parent.name) and path.parent.name != "80x24"
)
"""Screens at the sizes beyond the two `tests/test_fixtures.py` reads (100x30, 132x43, 200x50)."""


def test_every_version_has_the_variant_sizes_and_footers() -> None:
    from akk.qualify.plans.codex import CODEX_FOOTERS, CODEX_SIZED_PLANS, CODEX_VARIANT_SIZES
    from akk.qualify.plans.corpus import PLANS

    for version in BY_VERSION:
        base = corpus.ROOT / "codex" / version
        present = {
            p.relative_to(base).with_suffix("")
            for p in (*CODEX_LABELS, *SIZED)
            if base in p.parents
        }
        for cols, rows in ((120, 40), (80, 24), *CODEX_VARIANT_SIZES):
            folder = Path() if (cols, rows) == (120, 40) else Path(f"{cols}x{rows}")
            names = (*CODEX_SIZED_PLANS, *CODEX_FOOTERS)
            for plan in (PLANS[name] for name in names):
                for step in plan.steps:
                    stem = plan.name if step is None else f"{plan.name}-{step}"
                    assert folder / stem in present, (version, cols, rows, stem)


test_a_screen_at_another_size_classifies_to_its_label = corpus.each(SIZED)(classifies_to_its_label)


def _variant(version: str, name: str, size: str = "") -> Fixture:
    return _load(corpus.ROOT / "codex" / version / size / f"{name}.json")


@pytest.mark.parametrize("size", ["", "80x24", "60x40", "100x30", "132x43", "200x50"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_long_command_is_projected_whole(version: str, size: str) -> None:
    fixture = _variant(version, "codex_exec_long-permission", size)
    prompt = _observe(fixture).prompt
    assert prompt is not None
    assert prompt.questions[0].detail == fixture.label["expected"]["command"]  # type: ignore[index]


@pytest.mark.parametrize("size", ["", "80x24", "60x40", "100x30", "132x43", "200x50"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_wrapped_option_descriptions_are_read_whole(version: str, size: str) -> None:
    from akk.qualify.scenarios import SCENARIOS

    fixture = _variant(version, "codex_rui_long-q1", size)
    prompt = _observe(fixture).prompt
    assert prompt is not None
    (asked,) = SCENARIOS["codex_rui_long"].steps[0].reply.questions  # type: ignore[union-attr]
    shown = {option.label: option.description for option in prompt.questions[0].options}
    assert {o.label: shown[o.label] for o in asked.options} == {
        o.label: o.description for o in asked.options
    }


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_wrapped_label_keeps_its_description_s_wrap_apart(version: str, size: str) -> None:
    """A label that wraps in a two-column menu continues at the label's indent, and its
    description's own wrap stands beside it, at the description's column: each part goes
    to its own text. Before, the whole row went to the description, and the label was cut.
    A description beside a wrapped label out of its column is no such row."""
    from akk.qualify.scenarios import SCENARIOS

    fixture = _variant(version, "codex_rui_long_labels-q1", size)
    prompt = _observe(fixture).prompt
    assert prompt is not None
    (asked,) = SCENARIOS["codex_rui_long_labels"].steps[0].reply.questions  # type: ignore[union-attr]
    shown = {option.label: option.description for option in prompt.questions[0].options}
    assert {o.label: shown.get(o.label) for o in asked.options} == {
        o.label: o.description for o in asked.options
    }
    grid = fixture.grid
    y = next(y for y in range(grid.rows) if grid.row_text(y).startswith("  › 1. ")) + 1
    text = grid.row_text(y).rstrip()
    described = text.rindex("  ") + 2  # the description's wrap, beside the label's
    moved = (*grid.row(y)[: described - 1], *grid.row(y)[described:], Cell())
    rows = [*(grid.row(r) for r in range(y)), moved, *rows_after(grid, y)]
    assert not _observe(fixture, _with_rows(grid, rows)).actionable


def _command_rows(fixture: Fixture) -> list[int]:
    texts = [fixture.grid.row_text(y) for y in range(fixture.grid.rows)]
    first = next(y for y, text in enumerate(texts) if text.startswith("  $ "))
    return list(_paragraph(texts, first))


@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_wrapped_command_row_is_read_exactly(version: str) -> None:
    fixture = _variant(version, "codex_exec_long-permission", "80x24")
    rows = _command_rows(fixture)
    assert len(rows) >= 3
    grid, second = fixture.grid, rows[1]
    last_x = len(grid.row_text(second).rstrip()) - 1
    plain = [attrs.evolve(cell, fg="default") for cell in grid.row(second)]
    refused = {
        # A row typed into the prompt is never in the highlighter's colours.
        "default colour": _with_rows(
            grid, [*(grid.row(y) for y in range(second)), tuple(plain), *rows_after(grid, second)]
        ),
        # A word split at a hyphen cannot be told from a break at a space.
        "ends in a hyphen": _with_cell(
            grid, last_x, second, attrs.evolve(grid.cell(last_x, second), char="-")
        ),
        "indented by three": _with_rows(
            grid,
            [
                *(grid.row(y) for y in range(second)),
                (Cell(), *grid.row(second)[:-1]),
                *rows_after(grid, second),
            ],
        ),
    }
    for what, mutated in refused.items():
        assert not _observe(fixture, mutated).actionable, what


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_long_reason_wraps_at_its_paragraph_s_indent(version: str, size: str) -> None:
    """A model's reason wraps onto rows indented by two, as its first row is, where its next
    word would not fit; only so."""
    fixture = _variant(version, "codex_exec_reason_long-permission", size)
    assert _observe(fixture).state is State.PERMISSION
    grid = fixture.grid
    reason = next(y for y in range(grid.rows) if grid.row_text(y).startswith("  Reason: "))
    wrapped = reason + 1
    assert grid.row_text(wrapped).startswith("  ") and grid.row_text(wrapped)[2] != " "
    for shift in (1, 2):
        moved = (*(Cell() for _ in range(shift)), *grid.row(wrapped)[:-shift])
        rows = [*(grid.row(y) for y in range(wrapped)), moved, *rows_after(grid, wrapped)]
        assert not _observe(fixture, _with_rows(grid, rows)).actionable, shift
    # The row above cut short by its last word: the next row's first word would have fit
    # there, so Codex did not wrap it so.
    above = grid.row_text(wrapped - 1).rstrip()
    cut = {(x, wrapped - 1): Cell() for x in range(above.rindex(" "), len(above))}
    shorter = grid
    for (x, y), cell in cut.items():
        shorter = _with_cell(shorter, x, y, cell)
    assert not _observe(fixture, shorter).actionable


def _without_last_char(grid: Grid, y: int) -> Grid:
    """Row `y` with its last drawn character (wide: both its cells) blanked."""
    columns = grid.row_columns(y)
    last = columns[len(grid.row_text(y).rstrip()) - 1]
    for x in range(last, last + grid.cell(last, y).width):
        grid = _with_cell(grid, x, y, Cell())
    return grid


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_chinese_question_reads_exactly(version: str, size: str) -> None:
    """A question and descriptions in Chinese, a word wider than the row, which Codex cuts
    at the row's end: the rows join with nothing, and the description's rows are found at
    its column (in cells; a label of wide characters is wider than its characters). Before,
    the question read with a space where Codex cut it, and a description's wrap was an
    unexpected row at 80 columns. A row with room left for the next character was broken at
    a space: it joins with one."""
    from akk.qualify.scenarios import CJK_ASKED

    fixture = _variant(version, "codex_rui_cjk-q1", size)
    prompt = _observe(fixture).prompt
    assert prompt is not None
    (shown,) = prompt.questions
    assert shown.prompt == CJK_ASKED.question
    assert [(o.label, o.description) for o in shown.options[:-1]] == [
        (o.label, o.description) for o in CJK_ASKED.options
    ]
    grid = fixture.grid
    first = next(y for y in range(grid.rows) if grid.row_text(y).startswith("  Question ")) + 1
    assert grid.row_text(first + 1).startswith("  ")  # the question wraps
    prompt = _observe(fixture, _without_last_char(grid, first)).prompt
    assert prompt is not None
    cut = len(grid.row_text(first).strip()) - 1
    assert (
        prompt.questions[0].prompt == f"{CJK_ASKED.question[:cut]} {CJK_ASKED.question[cut + 1 :]}"
    )


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_chinese_reason_starts_under_its_name(version: str, size: str) -> None:
    """A reason in Chinese is one word wider than the row: Codex draws ``Reason:`` alone and
    the text from the next row, cut at the margin. The name alone with nothing under it is
    no reason, and the text's row indented otherwise is not its wrap."""
    fixture = _variant(version, "codex_exec_reason_cjk-permission", size)
    assert _observe(fixture).state is State.PERMISSION
    grid = fixture.grid
    name = next(y for y in range(grid.rows) if grid.row_text(y).rstrip() == "  Reason:")
    text = name + 1
    while grid.row_text(text).strip():
        text += 1
    blank = tuple(Cell() for _ in range(grid.cols))
    removed = [blank] * (text - name - 1)  # the text's rows, given back at the top
    rows = [*removed, *(grid.row(y) for y in range(name + 1)), *rows_after(grid, text - 1)]
    alone = _observe(fixture, _with_rows(grid, rows))
    assert alone.reason is not None and "shows no text" in alone.reason
    moved = (Cell(), *grid.row(name + 1)[:-1])
    rows = [*(grid.row(y) for y in range(name + 1)), moved, *rows_after(grid, name + 1)]
    assert not _observe(fixture, _with_rows(grid, rows)).actionable


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_label_with_a_variation_selector_is_refused(version: str, size: str) -> None:
    """Codex keeps a variation selector, but it and tmux disagree on the width of the
    character before it: a space beside it is gained or lost, and the label would read
    otherwise than sent (``❤️`` alone, its tail taken for the description; ``⌚︎Watch``
    on some drawings). So such a question is refused. (At 80x24, where the heart's
    description wraps, its wrap stands one column off the column the heart's row shows,
    and the menu is refused before.)"""
    from akk.qualify.scenarios import SELECTOR_QUESTION

    fixture = _variant(version, "codex_rui_selector-q1", size)
    observation = _observe(fixture)
    assert observation.state is State.UNKNOWN
    assert observation.reason is not None
    shown = "\n".join(fixture.grid.lines())
    heart = SELECTOR_QUESTION.options[0].label
    assert heart not in shown and heart.replace(" ", "  ") in shown  # a space gained
    if not size:
        assert "cannot be read back" in observation.reason


def rows_after(grid: Grid, y: int) -> list[tuple[Cell, ...]]:
    return [grid.row(r) for r in range(y + 1, grid.rows)]


@pytest.mark.parametrize("step", ["idle", "working", "finished"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_pane_without_a_status_line_is_read_exactly(version: str, step: str) -> None:
    """The footer is the bare hint row, the context left right-aligned; nothing else."""
    fixture = _variant(version, f"codex_status_none-{step}")
    grid = fixture.grid
    last = _last_content_row(grid)
    text = grid.row_text(last).rstrip()
    left, context = text[: text.rindex("  ")].rstrip(), text.split()[-3:]
    assert " ".join(context) == "100% context left"
    notice = " ".join(context)

    def footer(left_text: str, right: str, pad: int = 2) -> tuple[Cell, ...]:
        row = list(_text_row(grid.cols, left_text))
        for i, ch in enumerate(right):
            row[grid.cols - pad - len(right) + i] = Cell(char=ch)
        return tuple(row)

    rows = [grid.row(y) for y in range(grid.rows)]
    accepted = footer(left, "42% context left")
    observation = _observe(fixture, _with_rows(grid, [*rows[:last], accepted, *rows[last + 1 :]]))
    assert observation.state.value == fixture.label["expected"]["state"], observation.reason  # type: ignore[index]
    refused = {
        "one column off": footer(left, notice, pad=1),
        "another hint": footer("  ctrl + t to view transcript", notice),
        "no notice": footer(left, ""),
        "another notice": footer(left, "100% context used"),
    }
    for what, row in refused.items():
        mutated = _with_rows(grid, [*rows[:last], row, *rows[last + 1 :]])
        assert _observe(fixture, mutated).state is State.UNKNOWN, what


def test_a_wrapped_status_line_is_read_exactly() -> None:
    """0.169.0 wraps a long status line onto further rows of status items, three at most.

    (Three rows: the default items with the thread title at 30 columns, codex_narrow.)
    """
    fixture = _variant("0.169.0", "codex_status_custom-idle", "80x24")
    grid = fixture.grid
    assert _observe(fixture).state is State.IDLE
    hint = grid.rows - 1
    second = hint - 1
    assert grid.cell(2, second).fg not in ("default", "ffd7af")
    rows = [grid.row(y) for y in range(grid.rows)]
    plain = tuple(attrs.evolve(cell, fg="default") for cell in rows[second])
    refused = {
        "a plain row": [*rows[:second], plain, *rows[second + 1 :]],
        "four status rows": [*rows[2:second], *(rows[second],) * 3, rows[hint]],
    }
    for what, kept in refused.items():
        assert _observe(fixture, _with_rows(grid, kept)).state is State.UNKNOWN, what


@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_model_outside_the_catalog_keeps_the_composer_readable(version: str) -> None:
    for step, state in (("idle", State.IDLE), ("working", State.WORKING), ("finished", State.IDLE)):
        for size in ("", "80x24", "60x40", "100x30", "132x43", "200x50"):
            fixture = _variant(version, f"codex_model_unknown-{step}", size)
            observation = _observe(fixture)
            assert observation.state is state, (step, size, observation.reason)


WARNING = "⚠ 1 warning · f2 to view"


def _notice_row(cols: int, left: str, notice: str, *, pad: int = 1) -> tuple[Cell, ...]:
    """A hint row with `notice` right-aligned `pad` columns from the edge."""
    cells = list(_text_row(cols, f"  {left}" if left else ""))
    for i, ch in enumerate(notice):
        cells[cols - pad - len(notice) + i] = Cell(char=ch)
    return tuple(cells)


@pytest.mark.parametrize("size", ["", "80x24", "60x40", "100x30", "132x43", "200x50"])
@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_draft_after_a_turn_under_an_unknown_model_is_read_exactly(
    version: str, size: str
) -> None:
    """After a turn the footer holds the thread title and, from 0.169.0, the warning notice;
    a draft hides the hints, leaving the notice alone on the hint row: still the composer."""
    finished = _variant(version, "codex_after_warning-finished", size)
    assert _observe(finished).state is State.IDLE
    fixture = _variant(version, "codex_after_warning-draft", size)
    grid = fixture.grid
    text = fixture.label["expected"]["typed"]["text"]  # type: ignore[index]
    observation = _observe(fixture)
    assert observation.state is State.IDLE_DRAFT, observation.reason
    assert fixture.profile is not None and observation.draft is not None
    assert fixture.profile.draft_matches(observation.draft, text, TypingMethod.LITERAL)
    assert not fixture.profile.draft_matches(observation.draft, text + "x", TypingMethod.LITERAL)
    last = grid.row_text(grid.rows - 1).rstrip()
    if version in ("0.169.0", "0.171.0"):
        assert last.strip() == WARNING and last.endswith(WARNING)
        refused = {
            "one column off": _notice_row(grid.cols, "", WARNING, pad=2),
            "at the edge": _notice_row(grid.cols, "", WARNING, pad=0),
            "another notice": _notice_row(grid.cols, "", "⚠ 1 warning · f3 to view"),
            "after an unknown hint": _notice_row(grid.cols, "tab to queue message", WARNING),
            "text, no notice": _text_row(grid.cols, " " * 40 + "lab"),
        }
        for what, row in refused.items():
            assert _observe(fixture, _with_last_row(grid, row)).state is State.UNKNOWN, what
        hinted = _notice_row(grid.cols, "← for agents · ? for shortcuts", WARNING)
        assert _observe(fixture, _with_last_row(grid, hinted)).state is State.IDLE_DRAFT
    else:  # up to 0.155.1 the warning is a history row; the footer is the status row alone
        assert not any("f2 to view" in grid.row_text(y) for y in range(grid.rows))


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("漢字" * 40, "113 columns"),  # 160 columns: Codex breaks CJK where AKK cannot tell
        ("漢字" * 28, None),  # 112 columns: one row
        (" ".join(["word"] * 120), "fills 6 rows"),  # 599 characters: the notes show 5 whole
        (" ".join(["word"] * 100), None),  # 499 characters: 5 rows
        ("see [Pasted Content 9 chars]", "for a paste"),
    ],
)
def test_notes_text_no_screen_could_prove_is_refused_before_a_key(
    text: str, refused: str | None
) -> None:
    # The question as the controller saw it, at 120x40: only the pane's size counts.
    label = corpus.ROOT / "codex" / "0.171.0" / "codex_inline_rui_one-q1.json"
    _, grid = corpus.screen(label)
    _, observation = corpus.observed(label)
    assert observation.prompt is not None and (grid.cols, grid.rows) == (120, 40)
    found = BY_VERSION["0.171.0"].editor_refusal(text, grid, observation.prompt)
    if refused is None:
        assert found is None
    else:
        assert found is not None and refused in found.reason, found


@pytest.mark.parametrize("version", sorted(BY_VERSION))
def test_a_command_codex_cut_short_is_named_for_a_person(version: str) -> None:
    """A 1.2 MB command: Codex draws ``[… 15800 lines] ctrl + a view all`` (``^a`` from
    0.169.0) in its place. Up to 0.155.1 that read as an unreadable prompt, from 0.169.0 as
    "expected a blank row above the approval footer"; now every version names the cut."""
    fixture = _variant(version, "codex_exec_huge-permission")
    observation = _observe(fixture)
    assert observation.state is State.UNKNOWN and observation.prompt is None
    assert (observation.reason or "").startswith("Codex cut off the command (15800 lines")
    lines = [fixture.grid.row_text(y) for y in range(fixture.grid.rows)]
    assert manual_reason(observation, profiled=True, lines=lines) == PROMPT_CUT_OFF


MULTILINE = sorted(corpus.ROOT.glob("codex/**/codex_rui_multiline-q1.json"))


@pytest.mark.parametrize("path", MULTILINE, ids=corpus.name)
def test_a_question_of_several_paragraphs_reads_with_its_blank_line(path: Path) -> None:
    """A blank line of the question is a blank row between its rows (once it was no
    question: its first paragraph stood where the header belongs). A line break reads as
    a wrap (Codex fits a paragraph's lines to each other, so the two cannot be told apart):
    the question is offered in its call's words. Two blank rows, or one under the header,
    are no question Codex draws."""
    fixture = _load(path)
    observation = _observe(fixture)
    assert observation.actionable and observation.prompt is not None
    (question,) = observation.prompt.questions
    assert (
        question.prompt
        == "The build failed twice.\n\nShould I edit `src/app.py` now, or rewrite it?"
    )
    rows = [fixture.grid.row(y) for y in range(fixture.grid.rows)]
    texts = [fixture.grid.row_text(y) for y in range(fixture.grid.rows)]
    header = next(y for y, text in enumerate(texts) if text.strip().startswith("Question 1/1"))
    gap = header + 2  # the blank row between the paragraphs
    assert not texts[gap].strip() and texts[gap + 1].strip()
    for what, mutated in {
        "two blank rows": [*rows[1 : gap + 1], rows[gap], *rows[gap + 1 :]],
        "a blank row under the header": [*rows[1 : header + 1], rows[gap], *rows[header + 1 :]],
    }.items():
        assert not _observe(fixture, _with_rows(fixture.grid, mutated)).actionable, what
