"""Claude Code profiles: what makes a screen actionable, and everything that must not.

Screens are the captured corpus (fixtures/claude, read through tests/corpus.py),
mutated cell by cell or row by row. The profiles under test are the Claude rows
(and, for the cross-family check, the Codex module's), not the registry's.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from akk.profiles import claude
from akk.profiles.observation import Observation, OptionRole, State
from akk.qualify import scenarios as sc
from akk.qualify.plans.claude import CLAUDE_THEMED_PLANS, CLAUDE_THEMES
from akk.qualify.scenarios import BASH_CALL
from akk.screen import Cell, Grid, fingerprint, render
from tests import corpus

PROFILES = {profile.version: profile for profile in claude.PROFILES}
TERMINAL = "pane %1 pid 4242 started 1700000000"
CLAUDE_LABELS = corpus.every("claude")
CODEX_LABELS = corpus.every("codex")


def _actionable(label_path: Path) -> bool:
    expected = corpus.label(label_path)["expected"]
    return expected["state"] in ("permission", "questionnaire") and not expected["manual_only"]


ACTIONABLE = [path for path in CLAUDE_LABELS if _actionable(path)]


def classify(
    label_path: Path, grid: Grid | None = None
) -> tuple[claude.ClaudeProfile, Observation]:
    """The fixture's own profile and what it makes of its screen, or of ``grid`` instead."""
    profile = profile_of(label_path)
    if grid is None:
        return profile, corpus.observed(label_path)[1]
    return profile, profile.classify(grid)


def proven(label_path: Path) -> tuple[claude.ClaudeProfile, Grid, Observation, bytes]:
    """A fixture that must be actionable, its observation and its fingerprint."""
    _, grid = corpus.screen(label_path)
    profile, observation = classify(label_path)
    assert observation.actionable, observation.reason
    assert observation.prompt is not None
    fp = fingerprint(
        grid, observation.prompt.region, profile_id=profile.id, terminal_identity=TERMINAL
    )
    return profile, grid, observation, fp


def with_cells(grid: Grid, changes: dict[tuple[int, int], Cell]) -> Grid:
    rows = [list(grid.row(y)) for y in range(grid.rows)]
    for (x, y), cell in changes.items():
        rows[y][x] = cell
    return Grid(grid.cols, grid.rows, cells=tuple(tuple(row) for row in rows))


def with_rows(grid: Grid, rows: list[tuple[Cell, ...]]) -> Grid:
    """`rows` cut or padded with blank rows at the bottom to the grid's height."""
    blank = tuple(Cell() for _ in range(grid.cols))
    fitted = (rows + [blank] * grid.rows)[: grid.rows]
    return Grid(grid.cols, grid.rows, cells=tuple(fitted))


def all_rows(grid: Grid) -> list[tuple[Cell, ...]]:
    return [grid.row(y) for y in range(grid.rows)]


def text_row(grid: Grid, text: str) -> tuple[Cell, ...]:
    cells = [Cell(char=char) for char in text[: grid.cols]]
    return tuple(cells + [Cell()] * (grid.cols - len(cells)))


CHARS = st.sampled_from(list("aZ07.❯─╌│[]✔☐☒→●·…✽ é中"))
COLOURS = st.sampled_from(["default", "afd7ff", "949494", "ffffff", "808080", "d78787"])
CELLS = st.builds(
    Cell,
    char=CHARS,
    fg=COLOURS,
    bg=st.sampled_from(["default", "afd7ff", "3a3a3a"]),
    bold=st.booleans(),
    dim=st.booleans(),
    reverse=st.booleans(),
)


# ---------------------------------------------------------------- what is proven


@corpus.each(CLAUDE_LABELS)
def test_every_fixture_gets_one_observation_under_its_own_profile(label_path: Path) -> None:
    label, grid = corpus.screen(label_path)
    profile, observation = classify(label_path)
    assert observation.profile_id == profile.id == f"claude-code@{label['version']}"
    expected = label["expected"]
    wanted = "blocked" if expected["manual_only"] else expected["state"]
    assert observation.state.value == wanted, observation.reason
    if observation.prompt is not None:
        region = observation.prompt.region
        assert region.left == 0 and region.right == label["cols"]
        # Nothing but blank rows under a prompt: it was isolated from the bottom up.
        assert all(not grid.row_text(y).strip() for y in range(region.bottom, grid.rows))


@corpus.each(ACTIONABLE)
def test_region_spans_exactly_the_prompt(label_path: Path) -> None:
    _, grid, observation, _ = proven(label_path)
    assert observation.prompt is not None
    region = observation.prompt.region
    top = grid.row_text(region.top)
    if _tall(observation):  # a file taller than the pane starts at its top edge
        assert region.top == 0 and set(top) != {"─"}
    else:
        assert set(top) == {"─"}, "the region starts at the prompt's top rule"
    below = [grid.row_text(y) for y in range(region.bottom, grid.rows)]
    assert all(not row.strip() for row in below)
    assert grid.row_text(region.bottom - 1).strip(), "the region ends on the footer row"


def test_bash_permission_projects_command_and_roles() -> None:
    for version in PROFILES:
        path = corpus.ROOT / "claude" / version / "claude_bash-permission.json"
        _, _, observation, _ = proven(path)
        assert observation.state is State.PERMISSION and observation.prompt is not None
        (question,) = observation.prompt.questions
        assert question.header == "Bash command"
        assert question.detail == "touch lab-bash-ran.txt && echo lab-bash-ran"
        roles = [option.role for option in question.options]
        assert roles == [
            OptionRole.APPROVE_ONCE,
            OptionRole.APPROVE_PERSISTENT,
            OptionRole.APPROVE_PERSISTENT,
            OptionRole.REJECT,
        ]
        assert [option.current for option in question.options] == [True, False, False, False]


def test_wrapped_permission_label_is_joined_at_80_columns() -> None:
    _, _, observation, _ = proven(corpus.ROOT / "claude/2.1.263/80x24/claude_bash-permission.json")
    assert observation.prompt is not None
    labels = [option.label for option in observation.prompt.questions[0].options]
    assert labels[1].startswith("Yes, and always allow access to /tmp/akk-lab-")
    assert labels[1].endswith(" from this project")


def test_descriptions_are_kept_apart_from_labels() -> None:
    for version in PROFILES:
        path = corpus.ROOT / "claude" / version / "questionnaire_multi-q1.json"
        _, observation = classify(path)
        assert observation.prompt is not None
        first = observation.prompt.questions[0].options[0]
        assert (first.label, first.description, first.checked) == ("Red", "A warm color", False)


@pytest.mark.parametrize("blocker", ["onboarding", "api_key", "trust"])
def test_first_run_screens_name_their_blocker(blocker: str) -> None:
    for version in PROFILES:
        _, observation = classify(corpus.ROOT / "claude" / version / f"blocked_{blocker}.json")
        assert observation.state is State.BLOCKED and observation.prompt is None
        assert observation.reason is not None and blocker in observation.reason


# ---------------------------------------------------------------- blocked, unknown


def _menu_rows(grid: Grid, observation: Observation) -> list[int]:
    """Rows of the region that carry a menu number (``N.`` at the version's column)."""
    assert observation.prompt is not None
    region = observation.prompt.region
    pattern = re.compile(r"^ ?[ ❯] {1,2}\d\. ")
    return [y for y in range(region.top, region.bottom) if pattern.match(grid.row_text(y))]


def test_cursor_on_a_persistent_approval_row_is_blocked() -> None:
    for version in PROFILES:
        path = corpus.ROOT / "claude" / version / "claude_bash-permission.json"
        _, grid, observation, _ = proven(path)
        moved = _cursor_on_second_row(path, grid, observation)
        assert moved.state is State.BLOCKED and not moved.actionable
        assert moved.reason is not None and "persistent" in moved.reason


def _cursor_on_second_row(path: Path, grid: Grid, observation: Observation) -> Observation:
    """`path`'s prompt read again with its cursor (and highlight) moved to the second row."""
    first, second = _menu_rows(grid, observation)[:2]
    cursor = grid.cell(1, first)
    changes = {(1, first): Cell(), (1, second): cursor}
    for x in range(6, grid.cols):  # move the highlight with the cursor
        changes[(x, first)] = attrs.evolve(grid.cell(x, first), fg="default")
        changes[(x, second)] = attrs.evolve(grid.cell(x, second), fg=cursor.fg)
    return classify(path, with_cells(grid, changes))[1]


def test_a_working_line_above_an_idle_composer_is_working() -> None:
    for version in PROFILES:
        path = corpus.ROOT / "claude" / version / "echo-idle.json"
        _, grid = corpus.screen(path)
        rows = all_rows(grid)
        rows[20] = text_row(grid, "✻ Pondering…")
        _, observation = classify(path, with_rows(grid, rows))
        assert observation.state is State.WORKING


def test_a_grey_composer_without_a_working_line_is_unknown() -> None:
    for version in PROFILES:
        path = corpus.ROOT / "claude" / version / "echo-idle.json"
        _, grid = corpus.screen(path)
        composer = next(y for y in range(grid.rows) if grid.row_text(y).startswith("❯\u00a0"))
        glyph = grid.cell(0, composer)
        _, observation = classify(
            path, with_cells(grid, {(0, composer): attrs.evolve(glyph, fg="949494")})
        )
        assert observation.state is State.UNKNOWN and observation.reason


@pytest.mark.parametrize("version", sorted(PROFILES))
def test_the_shell_mode_reads_working_only_under_a_working_line(version: str) -> None:
    """A person's shell prompt ('!') while a turn runs is working, in shell mode: nobody is
    woken. At rest it is no composer to type a task into, nor is it with the rules in the
    composer's own colour, or with the working line gone."""
    path = corpus.ROOT / "claude" / version / "claude_person_while_working-shell_mode.json"
    _, observation = classify(path)
    assert (observation.state, observation.composer_mode) == (State.WORKING, "shell")
    _, at_rest = classify(corpus.ROOT / "claude" / version / "claude_person_modes-shell_mode.json")
    assert at_rest.state is State.UNKNOWN
    assert at_rest.reason is not None and at_rest.reason.startswith("shell mode at an idle")
    _, grid = corpus.screen(path)
    rows = all_rows(grid)
    spinner = next(y for y, row in enumerate(rows) if "…" in "".join(c.char for c in row))
    rows[spinner] = text_row(grid, "")
    _, stopped = classify(path, with_rows(grid, rows))
    assert stopped.state is State.UNKNOWN
    rule_fg = PROFILES[version].composer.rule_fg
    grey = [
        tuple(attrs.evolve(cell, fg=rule_fg) if cell.char == "─" else cell for cell in row)
        for row in all_rows(grid)
    ]
    _, plain = classify(path, with_rows(grid, grey))
    assert plain.state is State.UNKNOWN and not (plain.reason or "").startswith("shell mode")


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", ["2.1.328", "2.1.332"])
def test_the_hint_an_api_error_leaves_in_the_composer_is_an_empty_composer(
    version: str, size: str
) -> None:
    """After an API error Claude writes a dim hint into the empty composer ("Once fixed,
    resend your message"), the cursor on its first character: idle, with no draft, so the
    pane takes the next task. The same row not dim, or with the cursor elsewhere, is a
    person's draft."""
    path = corpus.ROOT / "claude" / version / size / "claude_api_error_hint.json"
    _, observation = classify(path)
    assert observation.state is State.IDLE and observation.draft is not None
    assert observation.draft.empty, observation.draft
    _, grid = corpus.screen(path)
    y = next(y for y in range(grid.rows) if "resend your message" in grid.row_text(y))
    row = grid.row(y)
    plain = {(x, y): attrs.evolve(cell, dim=False) for x, cell in enumerate(row) if cell.dim}
    moved = {
        (2, y): attrs.evolve(row[2], reverse=False),
        (3, y): attrs.evolve(row[3], reverse=True),
    }
    for changes in (plain, moved):
        _, typed = classify(path, with_cells(grid, changes))
        assert typed.state is State.IDLE_DRAFT and typed.draft is not None
        assert typed.draft.rows == ("Once fixed, resend your message",), typed.draft


def _unmuted(grid: Grid, version: str, rows: list[int], *, after: int = -1) -> Grid:
    """`grid` with the muted cells of `rows` (right of column `after`) in the default colour."""
    muted = PROFILES[version].permission.menu.muted_fg
    changes = {
        (x, y): attrs.evolve(cell, fg="default")
        for y in rows
        for x, cell in enumerate(grid.row(y))
        if cell.fg == muted and x > after
    }
    return with_cells(grid, changes)


@pytest.mark.parametrize("size", ["", "80x24"])
@pytest.mark.parametrize("version", sorted(PROFILES))
def test_a_long_description_wraps_under_the_gutter_apart_from_the_command(
    version: str, size: str
) -> None:
    """A model's long description of the command wraps under the dim gutter a long command
    is drawn under, its text muted: it is no part of the command. The same rows in the
    command's colour would be, and stand where no command row may: never actionable."""
    path = corpus.ROOT / "claude" / version / size / "claude_bash_description_long-permission.json"
    _, observation = classify(path)
    assert observation.state is State.PERMISSION and observation.prompt is not None
    assert [q.detail for q in observation.prompt.questions] == [BASH_CALL.command]
    _, grid = corpus.screen(path)
    described = [y for y in range(grid.rows) if "│" in grid.row_text(y)]
    assert len(described) >= 2
    _, recoloured = classify(path, _unmuted(grid, version, described))
    assert not recoloured.actionable, recoloured


@pytest.mark.parametrize("version", ["2.1.328", "2.1.332"])
def test_in_a_narrow_pane_the_auto_mode_row_s_muted_hint_wraps_muted(version: str) -> None:
    """At 60 columns the 'switch to auto mode' row's muted hint wraps onto a muted row: the
    row reads as at 120 columns, a persistent row (never offered). A muted row
    under a row that ends in the label's own colour is no wrap of it."""
    auto = "Yes, and switch to auto mode · auto mode handles these prompts for you"
    for size in ("", "60x40"):
        path = corpus.ROOT / "claude" / version / size / "claude_bash-permission.json"
        _, observation = classify(path)
        assert observation.state is State.PERMISSION and observation.prompt is not None
        roles = {o.label: o.role for o in observation.prompt.questions[0].options}
        assert roles[auto] is OptionRole.APPROVE_PERSISTENT, roles
    _, grid = corpus.screen(path)
    y = next(y for y in range(grid.rows) if "3. Yes, and switch to auto" in grid.row_text(y))
    assert grid.row_text(y + 1).strip() == "these prompts for you"
    _, recoloured = classify(path, _unmuted(grid, version, [y], after=8))  # the number stays
    assert not recoloured.actionable, recoloured


@pytest.mark.parametrize("version", sorted(PROFILES))
def test_in_a_narrow_pane_the_questionnaire_footer_wraps(version: str) -> None:
    """At 60 columns the editor's footer ('… ctrl+g to edit in Vim · Esc to cancel') wraps
    onto the pane's last row: the prompt reads, its region down to that row. The footer
    without that row, or cut short in it, is a truncated prompt."""
    path = corpus.ROOT / "claude" / version / "60x40" / "questionnaire_single3-free_text_typed.json"
    _, grid = corpus.screen(path)
    last = max(y for y in range(grid.rows) if grid.row_text(y).strip())
    assert grid.row_text(last).strip() == "Esc to cancel"
    _, observation = classify(path)
    assert observation.state is State.QUESTIONNAIRE and observation.prompt is not None
    assert observation.prompt.region.bottom == last + 1
    rows = all_rows(grid)
    for what, row in (("dropped", text_row(grid, "")), ("cut short", text_row(grid, "Esc to"))):
        _, cut = classify(path, with_rows(grid, [*rows[:last], row, *rows[last + 1 :]]))
        assert not cut.actionable, what


@pytest.mark.parametrize("version", sorted(PROFILES))
def test_a_list_a_draft_opens_over_a_working_composer_reads_working(version: str) -> None:
    """The command menu ('/') or the mention popup ('@') a person opens while a turn runs
    hides the working line: the composer's grey glyph says the turn runs. With the glyph in
    its idle colour it is the person's draft at rest; a grey glyph under any other draft,
    with no working line, is no screen AKK knows."""
    for step in ("command_menu", "mention"):
        path = corpus.ROOT / "claude" / version / f"claude_person_while_working-{step}.json"
        _, observation = classify(path)
        assert observation.state is State.WORKING, (step, observation.reason)
        _, grid = corpus.screen(path)
        row = next(y for y in range(grid.rows) if grid.row_text(y).startswith("❯\u00a0"))
        glyph = grid.cell(0, row)
        idle_fg = PROFILES[version].composer.idle_fg
        _, at_rest = classify(path, with_cells(grid, {(0, row): attrs.evolve(glyph, fg=idle_fg)}))
        assert at_rest.state is State.IDLE_DRAFT, step
        plain = {(x, row): Cell(char=ch) for x, ch in enumerate("lab", start=2)}
        plain |= {(x, row): Cell() for x in range(5, 20)}
        _, other = classify(path, with_cells(grid, plain))
        assert other.state is State.UNKNOWN, step


def test_a_prompt_footer_above_the_composer_is_not_idle() -> None:
    path = corpus.ROOT / "claude/2.1.263/echo-idle.json"
    _, grid = corpus.screen(path)
    rows = all_rows(grid)
    rows[20] = text_row(grid, " Esc to cancel · Tab to amend")
    _, observation = classify(path, with_rows(grid, rows))
    assert observation.state is State.UNKNOWN and observation.reason


def test_a_banner_of_another_version_is_refused() -> None:
    _, grid = corpus.screen(corpus.ROOT / "claude/2.1.263/claude_bash-permission.json")
    observation = claude.V2_1_266.classify(grid)
    assert observation.state is State.UNKNOWN
    assert observation.reason is not None and "version_mismatch" in observation.reason


def test_two_prompts_on_screen_are_refused() -> None:
    path = corpus.ROOT / "claude/2.1.263/claude_bash-permission.json"
    _, grid, observation, _ = proven(path)
    assert observation.prompt is not None
    rows = all_rows(grid)
    footer = rows[observation.prompt.region.bottom - 1]
    rows[5] = footer  # a second footer in the scrollback above the region
    _, twice = classify(path, with_rows(grid, rows))
    assert not twice.actionable and twice.reason is not None and "two prompts" in twice.reason


# ---------------------------------------------------------------- properties


@settings(max_examples=300)
@given(
    label_path=st.sampled_from(ACTIONABLE),
    where=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    cell=CELLS,
)
def test_any_change_inside_the_region_changes_the_fingerprint(
    label_path: Path, where: tuple[float, float], cell: Cell
) -> None:
    profile, grid, observation, fp = proven(label_path)
    assert observation.prompt is not None
    region = observation.prompt.region
    x = region.left + min(region.width - 1, int(where[0] * region.width))
    y = region.top + min(region.height - 1, int(where[1] * region.height))
    assume(grid.cell(x, y) != cell)
    mutated = with_cells(grid, {(x, y): cell})
    after = profile.classify(mutated)
    if after.prompt is not None:
        moved_fp = fingerprint(
            mutated, after.prompt.region, profile_id=profile.id, terminal_identity=TERMINAL
        )
        assert moved_fp != fp


@settings(max_examples=300)
@given(
    label_path=st.sampled_from(ACTIONABLE),
    where=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    cell=CELLS,
)
def test_changes_above_the_region_keep_the_prompt_and_fingerprint(
    label_path: Path, where: tuple[float, float], cell: Cell
) -> None:
    profile, grid, observation, fp = proven(label_path)
    assert observation.prompt is not None
    top = observation.prompt.region.top
    assume(top > 0)
    x = min(grid.cols - 1, int(where[0] * grid.cols))
    y = min(top - 1, int(where[1] * top))
    # The start-up banner is checked against the profile's version on purpose.
    assume(profile.banner not in grid.row_text(y))
    mutated = with_cells(grid, {(x, y): cell})
    after = profile.classify(mutated)
    assert after == observation
    assert (
        fingerprint(
            mutated, observation.prompt.region, profile_id=profile.id, terminal_identity=TERMINAL
        )
        == fp
    )


ROW_TEXT = st.text(alphabet=st.sampled_from(list("abcXYZ019.,:;-─❯·… [✔]☐●→")), max_size=80)


@settings(max_examples=200)
@given(
    version=st.sampled_from(sorted(PROFILES)),
    size=st.sampled_from([(120, 40), (80, 24), (100, 30), (132, 43)]),
    rows=st.lists(ROW_TEXT, max_size=40),
    styles=st.lists(
        st.sampled_from(["", "\x1b[1m", "\x1b[38;5;153m", "\x1b[48;5;153m", "\x1b[0m"]), max_size=40
    ),
)
def test_random_garbage_is_never_actionable(
    version: str, size: tuple[int, int], rows: list[str], styles: list[str]
) -> None:
    cols, height = size
    lines = [
        (styles[i % len(styles)] if styles else "") + text[:cols]
        for i, text in enumerate(rows[:height])
    ]
    grid = render("\n".join(lines) + "\n", cols, height)
    assert not PROFILES[version].classify(grid).actionable


@settings(max_examples=200)
@given(
    label_path=st.sampled_from(ACTIONABLE),
    depth=st.integers(1, 4),
    cut=st.sampled_from(["top", "bottom", "frame"]),
)
def test_truncated_prompts_are_never_actionable(label_path: Path, depth: int, cut: str) -> None:
    """Except a file taller than the pane, which is never whole: cut further at the top,
    it reads as no more of the same file's last lines (the call it binds shows all)."""
    profile, grid, observation, _ = proven(label_path)
    assert observation.prompt is not None
    region = observation.prompt.region
    rows = all_rows(grid)
    blank = text_row(grid, "")
    if cut == "top":  # the top of the prompt scrolled away
        del rows[region.top : region.top + depth]
    elif cut == "bottom":  # the footer (or last menu rows) not drawn yet
        for y in range(region.bottom - depth, region.bottom):
            rows[y] = blank
    else:  # the frame's top rule erased
        rows[region.top] = blank
    cut_short = profile.classify(with_rows(grid, rows))
    if cut == "top" and _tall(observation) and cut_short.actionable:
        assert cut_short.prompt is not None and observation.prompt is not None
        (whole,), (shown,) = observation.prompt.questions, cut_short.prompt.questions
        assert whole.file is not None and shown.file is not None
        assert shown.file.path == whole.file.path and shown.file.cut
        assert whole.file.lines[-len(shown.file.lines) :] == shown.file.lines
        assert whole.file.numbers[-len(shown.file.numbers) :] == shown.file.numbers
        return
    assert not cut_short.actionable


def _tall(observation: Observation) -> bool:
    """Whether `observation` is a file's prompt whose top scrolled off the pane."""
    prompt = observation.prompt
    file = prompt.questions[0].file if prompt is not None and prompt.questions else None
    return file is not None and file.cut


@settings(max_examples=200)
# A row under a tab row that does not fill the pane is no wrap of its headers (found by
# this test while the two-row tab row was being written).
@example(
    label_path=corpus.ROOT / "claude/2.1.263/questionnaire_cjk-free_text_empty.json",
    where=0.125,
    text="A",
)
@given(
    label_path=st.sampled_from(ACTIONABLE),
    where=st.floats(0, 1),
    text=st.from_regex(r"[A-Za-z][A-Za-z0-9 .,:]{0,40}", fullmatch=True),
)
def test_an_unexpected_row_inside_the_region_is_never_actionable(
    label_path: Path, where: float, text: str
) -> None:
    profile, grid, observation, _ = proven(label_path)
    assert observation.prompt is not None
    region = observation.prompt.region
    y = region.top + 1 + min(region.height - 2, int(where * (region.height - 1)))
    rows = all_rows(grid)
    rows.insert(y, text_row(grid, text))
    assert not profile.classify(with_rows(grid, rows)).actionable


@settings(max_examples=200)
@given(
    label_path=st.sampled_from(ACTIONABLE),
    pick=st.floats(0, 1),
    digit=st.sampled_from("0123456789"),
)
def test_a_changed_option_number_is_never_actionable(
    label_path: Path, pick: float, digit: str
) -> None:
    profile, grid, observation, _ = proven(label_path)
    menu = _menu_rows(grid, observation)
    y = menu[min(len(menu) - 1, int(pick * len(menu)))]
    x = grid.row_text(y).index(".") - 1
    original = grid.cell(x, y)
    assume(original.char != digit)
    mutated = with_cells(grid, {(x, y): attrs.evolve(original, char=digit)})
    assert not profile.classify(mutated).actionable


@corpus.each(ACTIONABLE)
def test_swapped_option_numbers_are_never_actionable(label_path: Path) -> None:
    profile, grid, observation, _ = proven(label_path)
    first, second = _menu_rows(grid, observation)[:2]
    x1, x2 = grid.row_text(first).index(".") - 1, grid.row_text(second).index(".") - 1
    a, b = grid.cell(x1, first), grid.cell(x2, second)
    swapped = with_cells(
        grid,
        {(x1, first): attrs.evolve(a, char=b.char), (x2, second): attrs.evolve(b, char=a.char)},
    )
    assert not profile.classify(swapped).actionable


# ---------------------------------------------------------------- wrong profile


def _differs_between_versions(label_path: Path) -> bool:
    """Screens whose shape really differs between 2.1.263-267 and 2.1.328."""
    return any(
        part in label_path.name for part in ("claude_bash-permission", "questionnaire_multi-q1")
    )


CROSS_VERSION = [
    (path, other)
    for path in ACTIONABLE
    if _differs_between_versions(path)
    for other in PROFILES
    if (other in ("2.1.328", "2.1.332"))
    != (corpus.label(path)["version"] in ("2.1.328", "2.1.332"))
]


@corpus.each(CROSS_VERSION, lambda case: f"{corpus.name(case[0])}-{case[1]}")
def test_a_prompt_under_an_incompatible_version_is_never_actionable(
    label_path: Path, other: str
) -> None:
    _, grid = corpus.screen(label_path)
    assert not PROFILES[other].classify(grid).actionable


@corpus.each(CODEX_LABELS)
def test_codex_screens_are_never_actionable_under_claude(label_path: Path) -> None:
    _, grid = corpus.screen(label_path)
    for profile in claude.PROFILES:
        assert not profile.classify(grid).actionable


@corpus.each(ACTIONABLE)
def test_claude_prompts_are_never_actionable_under_codex(label_path: Path) -> None:
    from akk.profiles import codex  # the other family's rows, nothing else

    _, grid = corpus.screen(label_path)
    for profile in codex.PROFILES:
        assert not profile.classify(grid).actionable


# ---------------------------------------------------------------- real users' setups (issue 12)


def test_a_directory_scoped_grant_is_persistent_and_yes_stays_answerable() -> None:
    for path in sorted(corpus.ROOT.glob("claude/*/**/claude_bash_read_outside-permission.json")):
        _, _, observation, _ = proven(path)
        assert observation.state is State.PERMISSION and observation.prompt is not None
        options = observation.prompt.questions[0].options
        assert options[1].label == "Yes, allow reading from /tmp from this project"
        assert [option.role for option in options] == [
            OptionRole.APPROVE_ONCE,
            OptionRole.APPROVE_PERSISTENT,
            OptionRole.APPROVE_PERSISTENT,
            OptionRole.REJECT,
        ]


def test_an_unknown_grant_row_is_refused() -> None:
    path = corpus.ROOT / "claude/2.1.263/claude_bash_read_outside-permission.json"
    _, grid, observation, _ = proven(path)
    y = _menu_rows(grid, observation)[1]
    x = grid.row_text(y).index("reading")
    changes = {
        (x + i, y): attrs.evolve(grid.cell(x + i, y), char=char) for i, char in enumerate("writing")
    }
    _, changed = classify(path, with_cells(grid, changes))
    assert changed.state is State.UNKNOWN and not changed.actionable
    assert changed.reason is not None and "unknown permission option 2" in changed.reason


def test_a_guttered_command_is_projected_whole_and_unwrapped() -> None:
    for path in sorted(corpus.ROOT.glob("claude/*/**/claude_bash_expansion-permission.json")):
        label = corpus.label(path)
        _, _, observation, _ = proven(path)
        assert observation.prompt is not None
        (question,) = observation.prompt.questions
        assert question.detail == label["expected"]["command"], path
    # At 80 columns the command wraps over two guttered rows.
    _, grid = corpus.screen(
        corpus.ROOT / "claude/2.1.263/80x24/claude_bash_expansion-permission.json"
    )
    assert sum(grid.row_text(y).startswith("   │ ") for y in range(grid.rows)) == 2


def test_an_advisory_row_is_projected_and_must_be_known() -> None:
    for size in ("", "80x24/"):
        path = corpus.ROOT / f"claude/2.1.328/{size}claude_bash_warning-permission.json"
        label = corpus.label(path)
        _, grid, observation, _ = proven(path)
        assert observation.prompt is not None
        assert observation.prompt.questions[0].detail == (
            label["expected"]["command"]
            + "\n\nQuoted text in this command can't be checked before it runs"
        )
        y = next(y for y in range(grid.rows) if "can't be checked" in grid.row_text(y))
        rows = all_rows(grid)
        rows[y] = text_row(grid, " Quoted text in this command is fine")
        assert not profile_of(path).classify(with_rows(grid, rows)).actionable


def profile_of(path: Path) -> claude.ClaudeProfile:
    return PROFILES[corpus.label(path)["version"]]


THEMED = sorted(corpus.ROOT.glob("claude/*/theme_*.json"))


@corpus.each(THEMED)
def test_a_themed_screen_is_read_in_its_theme_only(label_path: Path) -> None:
    """Each theme's colours are exact: under the dark row alone another theme's screen is unknown.

    Only dark-daltonized draws every colour AKK reads as dark does (it changes a success
    green alone), so it reads the same under the dark row.
    """
    label, grid = corpus.screen(label_path)
    profile = profile_of(label_path)
    observation = profile.classify(grid)
    wanted = "blocked" if label["expected"]["manual_only"] else label["expected"]["state"]
    assert observation.state.value == wanted, observation.reason
    # The longest prefix: theme_light_ansi_* is not a light screen.
    theme = max((t for t in CLAUDE_THEMES if label["plan"].startswith(_theme_prefix(t))), key=len)
    dark_only = attrs.evolve(profile, themes=profile.themes[:1])
    if theme == "dark-daltonized":
        assert dark_only.classify(grid) == observation
    else:
        assert dark_only.classify(grid).state is State.UNKNOWN


def _theme_prefix(theme: str) -> str:
    return f"theme_{theme.replace('-', '_')}_"


def test_every_theme_claude_offers_is_read_on_every_version() -> None:
    """The corpus holds every theme of `/theme` on every pinned version, each one a row."""
    for version, profile in PROFILES.items():
        plans = {
            corpus.label(path)["plan"]
            for path in (corpus.ROOT / "claude" / version).glob("theme_*.json")
        }
        for theme in CLAUDE_THEMES:
            assert {_theme_prefix(theme) + name for name in CLAUDE_THEMED_PLANS} <= plans
        assert {t.name for t in profile.themes} == {"dark", *CLAUDE_THEMES}


def test_a_screen_mixing_two_themes_is_refused() -> None:
    """A light prompt whose top rule is drawn in the dark colour is no theme's prompt."""
    path = corpus.ROOT / "claude/2.1.328/theme_light_claude_bash-permission.json"
    _, grid, observation, _ = proven(path)
    assert observation.prompt is not None
    top = observation.prompt.region.top
    changes = {(x, top): attrs.evolve(grid.cell(x, top), fg="afd7ff") for x in range(grid.cols)}
    _, mixed = classify(path, with_cells(grid, changes))
    assert not mixed.actionable and mixed.state is State.UNKNOWN


@pytest.mark.parametrize("size", ["60x40", "100x30", "132x43", "200x50"])
def test_every_version_has_its_screens_at_the_other_sizes(size: str) -> None:
    for version in PROFILES:
        states = {
            corpus.label(path)["expected"]["state"]
            for path in (corpus.ROOT / "claude" / version / size).glob("*.json")
        }
        assert states >= {"idle", "idle_draft", "working", "permission", "questionnaire"}


# ---------------------------------------------------------------- a user status line, vim mode


def _status_line_screen(version: str) -> tuple[Path, Grid, int]:
    """A status_line_echo idle screen and the row of the user's status line."""
    path = corpus.ROOT / "claude" / version / "status_line_echo-idle.json"
    _, grid = corpus.screen(path)
    row = next(y for y in range(grid.rows) if grid.row_text(y).strip() == "lab-status ▸ main")
    return path, grid, row


@pytest.mark.parametrize(
    "text",
    ["  esc to interrupt", "  Esc to cancel · Tab to amend", "  ❯ 1. Yes", "  " + "─" * 60, ""],
)
def test_a_status_line_is_the_users_text_and_never_read(text: str) -> None:
    """Whatever the status line prints under the composer, the screen stays the idle composer.

    A command that prints nothing leaves its row blank (seen on 2.1.263 and 2.1.332).
    """
    for version in PROFILES:
        path, grid, row = _status_line_screen(version)
        rows = all_rows(grid)
        rows[row] = text_row(grid, text)
        _, observation = classify(path, with_rows(grid, rows))
        assert observation.state is State.IDLE and observation.prompt is None


@pytest.mark.parametrize("text", ["❯ 1. Yes", " Esc to cancel · Tab to amend", "─" * 80])
def test_a_row_under_the_composer_outside_the_footer_column_is_refused(text: str) -> None:
    for version in PROFILES:
        path, grid, row = _status_line_screen(version)
        rows = all_rows(grid)
        rows[row] = text_row(grid, text)
        _, observation = classify(path, with_rows(grid, rows))
        assert observation.state is State.UNKNOWN and observation.reason


def test_a_status_line_of_more_rows_than_the_bound_is_refused() -> None:
    for version in PROFILES:
        path, grid, row = _status_line_screen(version)
        rows = all_rows(grid)
        taller = [*rows[1 : row + 1], rows[row], *rows[row + 1 :]]
        _, observation = classify(path, with_rows(grid, taller))
        assert observation.state is State.UNKNOWN and observation.reason


@pytest.mark.parametrize("setup", ["status_line", "vim"])
def test_a_working_screen_without_esc_to_interrupt_is_proven_by_its_spinner(setup: str) -> None:
    """2.1.263-2.1.267 under a status line and every version in vim mode hide the marker."""
    for version in PROFILES:
        path = corpus.ROOT / "claude" / version / f"{setup}_slow-working.json"
        _, grid = corpus.screen(path)
        hidden = "esc to interrupt" not in grid.row_text(grid.rows - 1)
        assert hidden == (setup == "vim" or version in ("2.1.263", "2.1.266", "2.1.267"))
        spinner = next(y for y in range(grid.rows) if re.match(r"[·✢*✶✻✽✳] \w", grid.row_text(y)))
        rows = all_rows(grid)
        rows[spinner] = text_row(grid, "")
        _, observation = classify(path, with_rows(grid, rows))
        # Without the spinner only the grey glyph is left: never idle.
        assert observation.state is (State.UNKNOWN if hidden else State.WORKING)


# ---------------------------------------------------------------- variants users have (issue 25)

AUTO_MODE_ROW = "Yes, and switch to auto mode · auto mode handles these prompts for you"


def test_the_auto_mode_row_is_persistent_and_resting_on_it_is_blocked() -> None:
    """`approve_once` is the `Yes` row; `switch to auto mode` is never offered nor rested on."""
    paths = sorted(corpus.ROOT.glob("claude/*/**/claude_bash_variable-permission.json"))
    assert len(paths) == 2 * len(PROFILES)
    for path in paths:
        _, grid, observation, _ = proven(path)
        assert observation.prompt is not None
        options = observation.prompt.questions[0].options
        assert [(o.label, o.role) for o in options] == [
            ("Yes", OptionRole.APPROVE_ONCE),
            (AUTO_MODE_ROW, OptionRole.APPROVE_PERSISTENT),
            ("No", OptionRole.REJECT),
        ], path
        moved = _cursor_on_second_row(path, grid, observation)
        assert moved.state is State.BLOCKED and not moved.actionable, path


def test_a_model_without_auto_mode_draws_no_tip_and_no_auto_mode_row() -> None:
    for path in sorted(corpus.ROOT.glob("claude/*/**/claude_bash_no_auto-permission.json")):
        label, grid = corpus.screen(path)
        _, _, observation, _ = proven(path)
        assert observation.prompt is not None
        (question,) = observation.prompt.questions
        assert question.detail == label["expected"]["command"]
        assert [o.role for o in question.options] == [
            OptionRole.APPROVE_ONCE,
            OptionRole.APPROVE_PERSISTENT,
            OptionRole.REJECT,
        ]
        assert not any("auto mode" in grid.row_text(y) for y in range(grid.rows)), path


@pytest.mark.parametrize("version", ["2.1.263", "2.1.266", "2.1.267"])
def test_the_parser_reason_between_blank_rows_is_an_advisory(version: str) -> None:
    """2.1.263-2.1.267 print `Contains simple_expansion`; only the binary's own reasons read."""
    for size in ("", "80x24/"):
        path = corpus.ROOT / f"claude/{version}/{size}claude_bash_variable-permission.json"
        label, grid = corpus.screen(path)
        _, _, observation, _ = proven(path)
        assert observation.prompt is not None
        assert observation.prompt.questions[0].detail == (
            label["expected"]["command"] + "\n\nContains simple_expansion"
        )
        y = next(y for y in range(grid.rows) if "Contains" in grid.row_text(y))
        for other in (" Contains simple_expansions", " Contains a variable", " Looks fine"):
            rows = all_rows(grid)
            rows[y] = text_row(grid, other)
            assert not profile_of(path).classify(with_rows(grid, rows)).actionable, other


def test_an_ask_rule_is_named_as_an_advisory_with_its_hint() -> None:
    """A user's `permissions.ask` rule: the rule's row and the muted hint, each read whole."""
    paths = sorted(corpus.ROOT.glob("claude/*/**/claude_bash_ask_rule-permission.json"))
    assert len(paths) == 2 * len(PROFILES)
    for path in paths:
        label, grid = corpus.screen(path)
        _, _, observation, _ = proven(path)
        assert observation.prompt is not None
        (question,) = observation.prompt.questions
        reason = (
            "Permission rule Bash(touch:*) requires confirmation for this command."
            if label["version"] in ("2.1.263", "2.1.266", "2.1.267")
            else "Rule Bash(touch:*) from user settings says to ask."
        )
        assert question.detail == "\n\n".join(
            [label["expected"]["command"], reason, "/permissions to update rules"]
        )
        assert [o.role for o in question.options] == [OptionRole.APPROVE_ONCE, OptionRole.REJECT]
        y = next(y for y in range(grid.rows) if grid.row_text(y).startswith(" /permissions"))
        rows = all_rows(grid)
        rows[y] = text_row(grid, " /permissions to update rules")  # the hint, not muted
        assert not profile_of(path).classify(with_rows(grid, rows)).actionable, path


def _shift_right(row: tuple[Cell, ...], by: int = 1) -> tuple[Cell, ...]:
    return (*(Cell() for _ in range(by)), *row[:-by])


@pytest.mark.parametrize("version", sorted(PROFILES))
def test_a_review_s_tab_row_that_wraps_in_a_narrow_pane_is_read(version: str) -> None:
    """Four 12-character headers do not fit a 60-column review's tab row: Claude wraps each
    header inside its tab's cell, the rest on the row under the glyphs at the cell's first
    column (``✔`` over ``Submit``). The review reads (it was unknown: "malformed tab"). The
    rest row moved one column, one header's rest reaching into the next cell, or no rest
    under the ``✔`` are not Claude's wrap."""
    path = corpus.ROOT / "claude" / version / "60x40" / "questionnaire_four_questions-review.json"
    _, observation = classify(path)
    assert observation.actionable and observation.prompt is not None, observation.reason
    assert observation.prompt.tabs == (
        "Deploy st…", "Cloud reg…", "Machine t…", "Backup pl…", "Submit"
    )  # fmt: skip
    _, grid = corpus.screen(path)
    glyphs = next(y for y in range(grid.rows) if grid.row_text(y).startswith("←  ☒"))
    rests = glyphs + 1
    rows = all_rows(grid)
    text = grid.row_text(rests)
    first = text.index("st…")
    reaching = list(rows[rests])
    reaching[first + 3 : first + 12] = [Cell(char="x") for _ in range(9)]  # into the next cell
    no_submit = list(rows[rests])
    at = text.index("Submit")
    no_submit[at : at + 6] = [Cell() for _ in range(6)]
    refused = {
        "moved": _shift_right(rows[rests]),
        "reaching": tuple(reaching),
        "no rest under the check mark": tuple(no_submit),
    }
    for what, row in refused.items():
        mutated = with_rows(grid, [*rows[:rests], row, *rows[rests + 1 :]])
        _, observation = classify(path, mutated)
        assert not observation.actionable, what


@pytest.mark.parametrize("size", ["", "80x24", "60x40"])
@pytest.mark.parametrize("version", sorted(PROFILES))
def test_a_review_lists_a_chinese_question_as_asked(version: str, size: str) -> None:
    """The review lists each question, wrapped at the pane's edge as the question is: a
    Chinese question cut there joins with nothing (it read with a space before)."""
    from akk.qualify.scenarios import CJK_ASKED

    path = corpus.ROOT / "claude" / version / size / "questionnaire_cjk_multi-review.json"
    _, observation = classify(path)
    assert observation.prompt is not None, observation.reason
    assert observation.prompt.reviewed == (CJK_ASKED.question,)


@pytest.mark.parametrize("version", sorted(PROFILES))
def test_a_review_question_s_gutter_runs_down_its_rows_and_not_beside_its_answer(
    version: str,
) -> None:
    """A long question is listed in the review under a dim ``│`` one column in (it was
    unreadable there: "unexpected row", so a multi-select question or a questionnaire of
    several with such a question could not be submitted). The gutter left off its wrapped
    row, or drawn beside the answer, is no review Claude draws."""
    path = corpus.ROOT / "claude" / version / "80x24" / "questionnaire_cjk_multi-review.json"
    _, observation = classify(path)
    assert observation.actionable, observation.reason
    _, grid = corpus.screen(path)
    rows = all_rows(grid)
    asked = next(y for y in range(grid.rows) if grid.row_text(y).startswith(" │ ● "))
    wrapped, answer = asked + 1, asked + 2
    assert grid.row_text(wrapped).startswith(" │   ") and "→" in grid.row_text(answer)
    gutter = rows[asked][:3]
    changed = {
        "no gutter on the wrapped row": (
            wrapped,
            (*(Cell() for _ in range(3)), *rows[wrapped][3:]),
        ),
        "a gutter beside the answer": (answer, (*gutter, *rows[answer][3:])),
    }
    for what, (y, row) in changed.items():
        _, mutated = classify(path, with_rows(grid, [*rows[:y], row, *rows[y + 1 :]]))
        assert not mutated.actionable, what


@pytest.mark.parametrize("version", sorted(PROFILES))
@pytest.mark.parametrize("step", ["q1", "review"])
def test_a_question_of_several_lines_reads_as_asked_and_only_so(version: str, step: str) -> None:
    """Claude draws each line of a question of several lines on rows of its own under the
    gutter, a blank line as the gutter alone (on its step and in its review): it reads
    exactly as asked. Two blank lines in a row, or a question that ends on one, are none
    Claude draws; the gutter alone where a wrapped row belongs is no question either."""
    path = corpus.ROOT / "claude" / version / "80x24" / f"questionnaire_multiline_multi-{step}.json"
    _, observation = classify(path)
    assert observation.actionable and observation.prompt is not None, observation.reason
    read = (
        observation.prompt.reviewed
        if step == "review"
        else tuple(q.prompt for q in observation.prompt.questions)
    )
    assert read == (sc.MULTILINE_ASKED.question,)
    _, grid = corpus.screen(path)
    rows = all_rows(grid)
    texts = [grid.row_text(y) for y in range(grid.rows)]
    blank = next(y for y, text in enumerate(texts) if text.strip() == "│")
    # The gutter alone put in at a row (the screen's top row dropped, so its bottom stays).
    changed = {
        "two blank lines": blank + 1,
        "a blank line last": blank + 3,
        "a blank line for the first": blank - 1,
    }
    for what, at in changed.items():
        mutated = [*rows[1:at], rows[blank], *rows[at:]]
        _, seen = classify(path, with_rows(grid, mutated))
        assert not seen.actionable, (what, seen.prompt)
        assert seen.reason is not None and ("gutter" in seen.reason or "row" in seen.reason)
