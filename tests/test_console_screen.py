"""The console's styled screen: the grid's runs, redacted as `status` redacts, or withheld.

Checked on every captured screen of the corpus (runs rebuild each redacted row;
styles are shared), on a real permission screen carrying a secret (no piece of it
in the output, styled or not), on the API-key screen (withheld whole), and on
wide characters, captured and built by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from akk.console.screen import MAX_COLS, MAX_ROWS, screen_view
from akk.protocol.redaction import MASK, asks_for_secret, redact_screen
from akk.screen.grid import Cell, Grid
from akk.screen.render import render
from tests import corpus
from tests.test_redaction import (
    ANTHROPIC,
    BASH_SCREENS,
    LABELS,
    SECRET_COMMANDS,
    substituted,
)

# One screen of each kind the corpus holds is enough to cover every style a client draws.
SAMPLE = [path for path in LABELS if path.parent.name in ("2.1.332", "0.171.0", "80x24")][::7]
API_KEY_SCREENS = [p for p in LABELS if corpus.label(p)["expected"].get("blocker") == "api_key"]


def with_command(label_path: Path, command: str) -> Grid:
    """The captured permission screen with ``command`` in place of the one the lab ran."""
    label, capture = substituted(label_path, command)
    return render(capture, label["cols"], label["rows"])


def leaks(secret: str, text: str) -> bool:
    """Whether ``text`` shows the secret or any 8-character piece of it."""
    return any(secret[start : start + 8] in text for start in range(len(secret) - 7))


def joined(row: list[list[Any]]) -> str:
    return "".join(text for text, _ in row)


def assert_rows_are_the_redacted_screen(view: dict[str, Any], lines: tuple[str, ...]) -> None:
    """Each row's runs spell its redacted row (trailing spaces may go); the rest is blank."""
    redacted = redact_screen(lines).lines
    rows = view["rows"]
    assert len(rows) <= len(redacted)
    for row, line in zip(rows, redacted, strict=False):
        text = joined(row)
        assert line.startswith(text) and not line[len(text) :].strip(" "), (text, line)
        assert all(text for text, _ in row)  # no empty runs
        assert all(0 <= style < len(view["styles"]) for _, style in row)
    assert all(not line.strip(" ") for line in redacted[len(rows) :])


def assert_styles_are_shared(view: dict[str, Any]) -> None:
    styles = view["styles"]
    assert styles[0] == {}
    keys = [json.dumps(style, sort_keys=True) for style in styles]
    assert len(set(keys)) == len(keys)
    for style in styles:
        assert all(value is True for key, value in style.items() if key not in ("fg", "bg"))
        assert style.get("fg") != "default" and style.get("bg") != "default"
    used = {index for row in view["rows"] for _, index in row}
    assert used <= set(range(len(styles)))
    assert set(range(1, len(styles))) <= used  # no style is listed that no run uses


@corpus.each(SAMPLE)
def test_a_captured_screen_keeps_its_text_and_styles(label_path: Path) -> None:
    _, grid = corpus.screen(label_path)
    view = screen_view(grid.lines(), grid)
    if asks_for_secret(grid.lines()):
        assert view == {"rows": [], "styles": [], "cols": grid.cols, "withheld": "secret_input"}
        return
    assert view["withheld"] is None and view["cols"] == grid.cols
    assert_rows_are_the_redacted_screen(view, grid.lines())
    assert_styles_are_shared(view)
    assert len(view["styles"]) > 1  # the clients colour their screens
    json.dumps(view)


def test_the_sample_covers_both_clients_and_both_sizes() -> None:
    assert {p.relative_to(corpus.ROOT).parts[0] for p in SAMPLE} == {"claude", "codex"}
    assert any(p.parent.name == "80x24" for p in SAMPLE) and len(SAMPLE) > 20


def test_equal_styles_share_one_index() -> None:
    bold = "\x1b[1m"
    reset = "\x1b[0m"
    grid = render(f"{bold}a{reset} b {bold}c{reset}\r\n{bold}d{reset}", 8, 2)
    view = screen_view(grid.lines(), grid)
    assert view["styles"] == [{}, {"bold": True}]
    assert view["rows"] == [[["a", 1], [" b ", 0], ["c", 1]], [["d", 1]]]


@pytest.mark.parametrize(("command", "secret"), SECRET_COMMANDS, ids=["env", "url", "github"])
@pytest.mark.parametrize("label_path", BASH_SCREENS, ids=corpus.name)
def test_a_secret_on_a_real_screen_never_leaves(
    label_path: Path, command: str, secret: str
) -> None:
    grid = with_command(label_path, command)
    lines = grid.lines()
    assert any(secret in line for line in lines)
    view = screen_view(lines, grid)
    assert view["withheld"] is None
    dumped = json.dumps(view, ensure_ascii=False)
    assert not leaks(secret, dumped) and MASK in dumped
    assert_rows_are_the_redacted_screen(view, lines)
    # The rows around the secret keep their colours; the masked rows are plain.
    masked = [row for row in view["rows"] if MASK in joined(row)]
    assert masked and all(row == [[joined(row), 0]] for row in masked)
    assert any(style != 0 for row in view["rows"] for _, style in row)


def test_a_secret_without_a_grid_never_leaves() -> None:
    lines = ("$ make", f"export ANTHROPIC_API_KEY={ANTHROPIC}", "", "")
    view = screen_view(lines, None)
    assert view["rows"] == [[["$ make", 0]], [[f"export ANTHROPIC_API_KEY={MASK}", 0]]]
    assert view["styles"] == [{}] and view["cols"] == len(lines[1])
    assert not leaks(ANTHROPIC, json.dumps(view))


@corpus.each(API_KEY_SCREENS)
def test_a_screen_asking_for_a_secret_is_withheld(label_path: Path) -> None:
    _, grid = corpus.screen(label_path)
    for view in (screen_view(grid.lines(), grid), screen_view(grid.lines(), None)):
        assert view == {"rows": [], "styles": [], "cols": grid.cols, "withheld": "secret_input"}


def test_a_screen_whose_question_asks_for_a_secret_is_withheld() -> None:
    # The question is far above the bottom rows; its editor below shows what a person types.
    lines = ("Enter your API key:", "", "  1. Use the saved one", "     from the keychain",
             "  2. Skip", "     go on without", "❯ 3. lab-pw-hunter2", "", "────",
             "  4. Chat about this", "", "Enter to select · ↑/↓ to navigate · Esc to cancel",
             "", "")  # fmt: skip
    assert "lab-pw-hunter2" in json.dumps(screen_view(lines, None))  # no row rule hides it
    view = screen_view(lines, None, secret=True)
    assert view == {"rows": [], "styles": [], "cols": len(lines[-3]), "withheld": "secret_input"}


def test_the_corpus_has_screens_to_check() -> None:
    assert BASH_SCREENS and API_KEY_SCREENS


@pytest.mark.parametrize("size", ["", "80x24/"])
def test_wide_characters_come_out_whole(size: str) -> None:
    _, grid = corpus.screen(corpus.ROOT / f"codex/0.171.0/{size}draft_unicode.json")
    typed = "lab: 漢字テスト and emoji 😀 🎉 ünïcödé done"
    view = screen_view(grid.lines(), grid)
    rows = [joined(row) for row in view["rows"]]
    assert any(typed in row for row in rows)
    assert_rows_are_the_redacted_screen(view, grid.lines())


def wide_row(cols: int, at: int) -> Grid:
    """A one-row grid of ``cols`` columns: ``a``s with a red 漢 in columns ``at``, ``at + 1``."""
    cells = [Cell("a")] * cols
    cells[at : at + 2] = [Cell("漢", fg="red", width=2), Cell("", fg="red", width=0)]
    return Grid(cols, 1, (tuple(cells),))


def test_a_built_wide_character_keeps_its_style() -> None:
    grid = wide_row(6, 2)
    view = screen_view(grid.lines(), grid)
    assert view["rows"] == [[["aa", 0], ["漢", 1], ["aa", 0]]]
    assert view["styles"] == [{}, {"fg": "red"}]


def test_the_cut_never_splits_a_wide_character() -> None:
    split = wide_row(MAX_COLS + 10, MAX_COLS - 1)  # columns 499 and 500: cut between them
    view = screen_view(split.lines(), split)
    assert view["cols"] == MAX_COLS
    assert view["rows"] == [[["a" * (MAX_COLS - 1), 0]]]
    whole = wide_row(MAX_COLS + 10, MAX_COLS - 2)  # columns 498 and 499: kept
    assert screen_view(whole.lines(), whole)["rows"] == [[["a" * (MAX_COLS - 2), 0], ["漢", 1]]]


def test_the_view_is_bounded() -> None:
    lines = tuple(f"{y} " + "x" * 900 for y in range(MAX_ROWS + 100))
    view = screen_view(lines, None)
    assert len(view["rows"]) == MAX_ROWS and view["cols"] == MAX_COLS
    assert joined(view["rows"][-1]).startswith(f"{MAX_ROWS + 99} ")  # the bottom rows are kept
    assert all(len(joined(row)) == MAX_COLS for row in view["rows"])
    wide = ("漢" * 300,)
    assert screen_view(wide, None)["rows"] == [[["漢" * (MAX_COLS // 2), 0]]]


def test_visible_trailing_spaces_stay() -> None:
    grid = render("a\x1b[41m  \x1b[0m   \r\n\x1b[7m \x1b[0m", 6, 3)
    view = screen_view(grid.lines(), grid)
    assert view["rows"] == [[["a", 0], ["  ", 1]], [[" ", 2]]]
    assert view["styles"] == [{}, {"bg": "red"}, {"reverse": True}]
