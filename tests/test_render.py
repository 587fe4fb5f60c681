"""Rendering tmux captures into grids: styles, true columns, sizes, regions, and real tmux."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akk.screen import (
    BLANK,
    CaptureMismatch,
    Cell,
    Grid,
    Region,
    box_above,
    is_blank_row,
    is_box_drawing,
    is_closed_box,
    is_frame_row,
    render,
)

ESC = "\x1b"


def sgr(params: str) -> str:
    return f"{ESC}[{params}m"


# --- styles ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "attribute"),
    [
        ("1", "bold"),
        ("2", "dim"),
        ("3", "italic"),
        ("4", "underline"),
        ("4:3", "underline"),
        ("5", "blink"),
        ("7", "reverse"),
        ("8", "hidden"),
        ("9", "strikethrough"),
    ],
)
def test_each_attribute_is_set_and_reset(params: str, attribute: str) -> None:
    grid = render(f"a{sgr(params)}b{sgr('0')}c", 3, 1)
    assert [getattr(grid.cell(x, 0), attribute) for x in range(3)] == [False, True, False]


def test_dim_is_distinct_from_bold_and_sgr22_clears_both() -> None:
    grid = render(f"{sgr('2')}d{sgr('1')}b{sgr('22')}n{sgr('1;2')}x{sgr('0;1')}y", 5, 1)
    flags = [(grid.cell(x, 0).bold, grid.cell(x, 0).dim) for x in range(5)]
    assert flags == [(False, True), (True, True), (False, False), (True, True), (True, False)]


def test_colon_underline_off_and_styles_do_not_leak_as_text() -> None:
    grid = render(f"{sgr('4:3')}u{sgr('4:0')}n{sgr('58;2;255;0;0')}z{sgr('58:2::1:2:3')}w", 4, 1)
    assert grid.row_text(0) == "unzw"
    assert [grid.cell(x, 0).underline for x in range(4)] == [True, False, False, False]
    # The "2" inside 58;2;... is the colour kind, not dim.
    assert not any(grid.cell(x, 0).dim for x in range(4))


@pytest.mark.parametrize(
    ("params", "fg"),
    [
        ("31", "red"),
        ("33", "yellow"),
        ("91", "brightred"),
        ("38;5;1", "red"),
        ("38;5;9", "brightred"),
        ("38;5;196", "ff0000"),
        ("38;5;244", "808080"),
        ("38;2;177;185;249", "b1b9f9"),
        ("38:2::1:2:3", "010203"),
        ("38:5:196", "ff0000"),
        ("31;39", "default"),
    ],
)
def test_foreground_colours_are_normalised(params: str, fg: str) -> None:
    assert render(f"{sgr(params)}x", 1, 1).cell(0, 0).fg == fg


@pytest.mark.parametrize(
    ("params", "bg"),
    [("44", "blue"), ("104", "brightblue"), ("48;5;22", "005f00"), ("48;2;1;2;3", "010203")],
)
def test_background_colours_are_normalised(params: str, bg: str) -> None:
    cell = render(f"{sgr(params)}x", 1, 1).cell(0, 0)
    assert (cell.bg, cell.fg) == (bg, "default")


def test_style_carries_across_rows_as_tmux_emits_it() -> None:
    # tmux emits attributes only where they change, not at every line start.
    grid = render(f"{sgr('31')}carry\nover{sgr('0')}\nplain\n", 5, 3)
    assert grid.cell(0, 1).fg == "red"
    assert grid.cell(0, 2).fg == "default"


def test_non_sgr_sequences_go_through_pyte_without_corrupting_text() -> None:
    link = f"{ESC}]8;;https://example.invalid/{ESC}\\"
    grid = render(f"a{link}link{ESC}]8;;{ESC}\\b", 8, 1)
    assert grid.row_text(0) == "alinkb  "


# --- columns --------------------------------------------------------------


def test_wide_characters_keep_true_columns() -> None:
    grid = render("中文|x", 8, 1)
    assert [grid.cell(x, 0).width for x in range(6)] == [2, 0, 2, 0, 1, 1]
    assert grid.cell(1, 0) == attrs.evolve(BLANK, char="", width=0)
    assert grid.cell(4, 0).char == "|"
    assert grid.row_text(0) == "中文|x  "
    assert grid.row_columns(0)[:4] == (0, 2, 4, 5)


def test_continuation_repeats_the_wide_cells_style() -> None:
    grid = render(f"{sgr('7;38;5;2')}中", 2, 1)
    lead, rest = grid.cell(0, 0), grid.cell(1, 0)
    assert lead.style == rest.style
    assert (lead.wide, rest.continuation, rest.char) == (True, True, "")


def test_combining_marks_stay_in_their_cell_without_normalisation() -> None:
    grid = render("e\u0301|中\u0301|", 6, 1)
    assert grid.cell(0, 0).char == "e\u0301"
    assert grid.cell(1, 0).char == "|"
    assert grid.cell(2, 0).char == "中\u0301"
    assert grid.cell(3, 0).continuation
    assert grid.cell(4, 0).char == "|"
    assert grid.row_columns(0)[:3] == (0, 0, 1)


def test_emoji_sequences_are_one_cell_like_tmux() -> None:
    family = "👨\u200d👩\u200d👧"
    grid = render(f"{family}|❤\ufe0f|", 6, 1)
    assert (grid.cell(0, 0).char, grid.cell(0, 0).width) == (family, 2)
    assert grid.cell(2, 0).char == "|"
    assert grid.cell(3, 0).char == "❤\ufe0f"
    assert grid.cell(4, 0).char == "|"


def test_zero_width_at_column_zero_is_dropped() -> None:
    assert render("\u200bab", 3, 1).row_text(0) == "ab "


def test_full_width_rows_do_not_wrap_twice() -> None:
    grid = render("abcd\nefgh\n中文\nx\n", 4, 4)
    assert grid.lines() == ("abcd", "efgh", "中文", "x   ")


def test_fewer_lines_than_rows_leave_blank_rows() -> None:
    grid = render("top\n", 5, 3)
    assert grid.lines() == ("top  ", "     ", "     ")
    assert all(cell == BLANK for cell in grid.row(2))
    assert render("", 2, 2).lines() == ("  ", "  ")


def test_empty_trailing_lines_count_as_rows() -> None:
    assert render("a\n\n\n", 1, 3).lines() == ("a", " ", " ")
    with pytest.raises(CaptureMismatch, match="recapture"):
        render("a\n\n\n\n", 1, 3)


def test_a_row_wider_than_the_pane_is_refused() -> None:
    with pytest.raises(CaptureMismatch, match="wider than 3 columns"):
        render("abcd", 3, 1)
    with pytest.raises(CaptureMismatch):
        render("ab中", 3, 1)


def test_render_rejects_an_empty_pane_size() -> None:
    with pytest.raises(ValueError, match="at least 1x1"):
        render("", 0, 5)


# --- round trip -----------------------------------------------------------

_CHARS = st.sampled_from([*"ab ─│╭❯.", "中", "한", "e\u0301"])
_COLOURS = st.sampled_from(["default", "red", "brightcyan", "ff0000", "b1b9f9", "010203"])
_STYLES = st.builds(
    Cell,
    char=st.just(" "),
    fg=_COLOURS,
    bg=_COLOURS,
    bold=st.booleans(),
    dim=st.booleans(),
    italic=st.booleans(),
    underline=st.booleans(),
    reverse=st.booleans(),
    strikethrough=st.booleans(),
)
_NAMES = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"]


def _colour_params(base: int, colour: str) -> str:
    if colour == "default":
        return str(base + 9)
    if colour.startswith("bright"):
        return str(base + 60 + _NAMES.index(colour[6:]))
    if colour in _NAMES:
        return str(base + _NAMES.index(colour))
    red, green, blue = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
    return f"{base + 8};2;{red};{green};{blue}"


def _tmux_like_capture(rows: list[list[Cell]]) -> str:
    """Encode cells the way tmux does: a reset plus full style only where it changes."""
    lines, current = [], BLANK.style
    for row in rows:
        out = []
        for cell in row:
            if cell.continuation:
                continue
            if cell.style != current:
                s = cell.style
                flags = [
                    code
                    for code, on in (
                        ("1", s.bold),
                        ("2", s.dim),
                        ("3", s.italic),
                        ("4", s.underline),
                        ("7", s.reverse),
                        ("9", s.strikethrough),
                    )
                    if on
                ]
                params = ";".join(["0", *flags, _colour_params(30, s.fg), _colour_params(40, s.bg)])
                out.append(sgr(params))
                current = s
            out.append(cell.char)
        lines.append("".join(out))
    return "\n".join(lines) + "\n"


@st.composite
def _styled_rows(draw: st.DrawFn) -> tuple[int, list[list[Cell]]]:
    cols = draw(st.integers(2, 12))
    rows = []
    for _ in range(draw(st.integers(1, 5))):
        row: list[Cell] = []
        while len(row) < cols:
            char = draw(_CHARS)
            style = draw(_STYLES)
            wide = char in ("中", "한")
            if wide and len(row) + 2 > cols:
                char, wide = "x", False
            row.append(attrs.evolve(style, char=char, width=2 if wide else 1))
            if wide:
                row.append(attrs.evolve(style, char="", width=0))
        rows.append(row)
    return cols, rows


@settings(max_examples=200)
@given(_styled_rows())
def test_render_reproduces_any_styled_grid(case: tuple[int, list[list[Cell]]]) -> None:
    cols, rows = case
    grid = render(_tmux_like_capture(rows), cols, len(rows))
    assert [list(grid.row(y)) for y in range(grid.rows)] == rows


# --- grid API -------------------------------------------------------------


def test_rows_bottom_up_and_region_reads() -> None:
    grid = render("r0\nr1中\nr2\nr3\n", 4, 4)
    assert list(grid.rows_bottom_up()) == [3, 2, 1, 0]
    region = Region(top=1, bottom=3, left=1, right=4)
    assert list(grid.rows_bottom_up(region)) == [2, 1]
    assert grid.region_cells(region)[0][1].char == "中"
    with pytest.raises(ValueError, match="leaves the 4x4 grid"):
        grid.region_cells(Region(top=0, bottom=5, left=0, right=1))


def test_runs_split_a_row_by_style() -> None:
    grid = render(f"ab{sgr('2')}cd{sgr('0')}e", 5, 1)
    runs = grid.runs(0)
    assert [(run.left, run.right, run.text, run.style.dim) for run in runs] == [
        (0, 2, "ab", False),
        (2, 4, "cd", True),
        (4, 5, "e", False),
    ]


def test_grid_checks_its_shape_and_bounds() -> None:
    with pytest.raises(ValueError, match="do not match"):
        Grid(cols=2, rows=1, cells=((BLANK,),))
    grid = render("", 2, 2)
    with pytest.raises(IndexError, match="outside"):
        grid.cell(2, 0)
    with pytest.raises(IndexError, match="outside"):
        grid.row(-1)


def test_region_is_half_open_and_never_empty() -> None:
    region = Region(top=1, bottom=3, left=2, right=4)
    assert (region.height, region.width) == (2, 2)
    assert region.contains(2, 1) and region.contains(3, 2)
    assert not region.contains(4, 2) and not region.contains(2, 3)
    with pytest.raises(ValueError, match="half-open"):
        Region(top=2, bottom=2, left=0, right=1)
    with pytest.raises(ValueError, match=">= 0"):
        Region(top=-1, bottom=2, left=0, right=1)


BOX = "\n".join(
    [
        "above     ",
        " ╭──────╮ ",
        " │ ask  │ ",
        " ├──────┤ ",
        " │ 1. a │ ",
        " ╰──────╯ ",
        "          ",
    ]
)


def test_box_above_proves_a_closed_frame_from_its_bottom_corner() -> None:
    grid = render(BOX, 10, 7)
    box = box_above(grid, 5, 1)
    assert box == Region(top=1, bottom=6, left=1, right=9)
    assert is_closed_box(grid, box)
    assert grid.row_text(2)[2:8] == " ask  "
    assert box_above(grid, 5, 2) is None
    assert box_above(grid, 0, 0) is None


@pytest.mark.parametrize(
    ("row", "column", "glyph"),
    [(1, 4, " "), (5, 8, "─"), (4, 8, " "), (2, 1, "x"), (1, 1, "┌│")],
)
def test_a_broken_frame_is_not_a_box(row: int, column: int, glyph: str) -> None:
    lines = BOX.split("\n")
    line = lines[row]
    lines[row] = line[:column] + glyph + line[column + len(glyph) :]
    grid = render("\n".join(lines), 10, 7)
    assert box_above(grid, 5, 1) is None
    assert not is_closed_box(grid, Region(top=1, bottom=6, left=1, right=9))


def test_frame_and_blank_row_primitives() -> None:
    grid = render(BOX, 10, 7)
    assert is_frame_row(grid, 1, 1, 9)
    assert is_frame_row(grid, 3, 2, 8, frozenset("─"))
    assert not is_frame_row(grid, 3, 1, 9, frozenset("─"))
    assert not is_frame_row(grid, 2, 1, 9)
    assert not is_frame_row(grid, 1, 5, 5)
    assert is_blank_row(grid, 6) and not is_blank_row(grid, 0)
    assert is_box_drawing("╭") and not is_box_drawing("❯") and not is_box_drawing("──")


# --- real tmux ------------------------------------------------------------


class Tmux:
    """A private tmux server on its own socket, for one test."""

    def __init__(self, directory: Path) -> None:
        self.socket = directory / "s.sock"
        self.env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        self.env.pop("TMUX", None)

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-u", "-S", str(self.socket), "-f", "/dev/null", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout

    def capture_when(self, target: str, sentinel: str, deadline: float = 10.0) -> str:
        """Capture `target` once `sentinel` shows, failing after `deadline` seconds."""
        give_up = time.monotonic() + deadline
        while True:
            capture = self.run("capture-pane", "-p", "-e", "-t", target)
            if sentinel in capture:
                return capture
            if time.monotonic() > give_up:
                pytest.fail(f"{sentinel!r} never appeared in pane {target}:\n{capture}")
            time.sleep(0.02)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with tempfile.TemporaryDirectory(prefix="akk-screen-") as directory:
        server = Tmux(Path(directory))
        try:
            yield server
        finally:
            subprocess.run(
                ["tmux", "-S", str(server.socket), "kill-server"],
                env=server.env,
                capture_output=True,
                timeout=10,
                check=False,
            )


def _start(tmux: Tmux, cols: int, rows: int, output: str) -> str:
    """Run a program printing `output` then "@@END@@" in a new pane; return its capture."""
    script = Path(tmux.socket.parent) / "show.py"
    script.write_text(
        "import sys, time\n"
        f"sys.stdout.write({output!r} + '@@END@@')\n"
        "sys.stdout.flush()\n"
        "time.sleep(600)\n"
    )
    tmux.run(
        "new-session", "-d", "-s", "t", "-x", str(cols), "-y", str(rows),
        f"{sys.executable} {script}",
    )  # fmt: skip
    return tmux.capture_when("t:0.0", "@@END@@")


def _at(row: int, column: int) -> str:
    """Move the cursor to zero-based `row`, `column`."""
    return f"{ESC}[{row + 1};{column + 1}H"


def test_real_capture_styles_match_what_was_printed(tmux: Tmux) -> None:
    output = (
        f"{_at(0, 0)}{sgr('1')}bold{sgr('0')} {sgr('2')}dim{sgr('0')} "
        f"{sgr('7')}rev{sgr('0')} {sgr('3;4')}iu{sgr('0')} {sgr('9')}st{sgr('0')}"
        f"{_at(1, 0)}{sgr('38;5;196')}p{sgr('38;5;3')}y{sgr('38;2;177;185;249')}t"
        f"{sgr('48;2;1;2;3')}b{sgr('0')}{sgr('4:3')}c{sgr('0')}{sgr('2;31')}dr{sgr('0')}"
        f"{_at(2, 0)}{sgr('31')}carry{_at(3, 0)}over{sgr('0')}"
        f"{_at(5, 0)}"
    )
    capture = _start(tmux, 80, 24, output)
    grid = render(capture, 80, 24)
    assert grid.row_text(0).rstrip() == "bold dim rev iu st"
    styles = {run.text: run.style for run in grid.runs(0)}
    assert styles["bold"].bold and not styles["bold"].dim
    assert styles["dim"].dim and not styles["dim"].bold
    assert styles["rev"].reverse
    assert styles["iu"].italic and styles["iu"].underline
    assert styles["st"].strikethrough
    row1 = [grid.cell(x, 1) for x in range(7)]
    assert "".join(cell.char for cell in row1) == "pytbcdr"
    assert [cell.fg for cell in row1[:4]] == ["ff0000", "yellow", "b1b9f9", "b1b9f9"]
    assert row1[3].bg == "010203" and row1[4].underline
    assert (row1[5].fg, row1[5].dim) == ("red", True)
    assert grid.cell(0, 3).fg == "red"
    assert grid.row_text(5).startswith("@@END@@")


def test_real_capture_keeps_true_columns(tmux: Tmux) -> None:
    samples = [
        "中文",
        "e\u0301",
        "中\u0301",
        "🎉",
        "❤\ufe0f",
        "👨\u200d👩\u200d👧",
        "한국",
        "⚠\ufe0f",
    ]
    # tmux places each "|" at column 20 by absolute motion; the render must
    # find it there whatever widths the characters before it have.
    output = "".join(f"{_at(y, 0)}{text}{_at(y, 20)}|" for y, text in enumerate(samples))
    output += _at(len(samples), 0)
    grid = render(_start(tmux, 40, 12, output), 40, 12)
    for y, text in enumerate(samples):
        assert grid.cell(20, y).char == "|", (text, grid.row_text(y))
        assert grid.row_text(y).startswith(text)


def test_real_capture_full_width_rows_and_last_column(tmux: Tmux) -> None:
    cols, rows = 30, 8
    output = (
        f"{_at(0, 0)}{'=' * cols}"
        f"{_at(1, 0)}{'-' * (cols - 2)}中"
        f"{_at(2, 0)}{sgr('7')}{'r' * cols}{sgr('0')}"
        f"{_at(3, cols - 1)}|"
        f"{_at(4, 0)}"
    )
    capture = _start(tmux, cols, rows, output)
    grid = render(capture, cols, rows)
    assert grid.row_text(0) == "=" * cols
    assert grid.row_text(1) == "-" * (cols - 2) + "中"
    assert grid.cell(cols - 2, 1).wide and grid.cell(cols - 1, 1).continuation
    assert all(grid.cell(x, 2).reverse for x in range(cols))
    assert grid.cell(cols - 1, 3).char == "|"
    assert grid.row_text(4).startswith("@@END@@")
    assert all(is_blank_row(grid, y) for y in range(5, rows))
