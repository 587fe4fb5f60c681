"""Fingerprints cover exactly a region's cells plus profile and terminal; ids derive from them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from akk.screen import BLANK, Cell, Grid, IdMinter, Region, fingerprint, render
from akk.screen.fingerprint import Appearance, asked_fingerprint
from tests.tier import examples

PROFILE = "claude-code@2.0.0"
TERMINAL = "default:%3:pid=4242:start=1700000000"
SECRET = b"s" * 32

_CELLS = st.builds(
    Cell,
    char=st.sampled_from(["a", "b", " ", "─", "❯", "e\u0301"]),
    fg=st.sampled_from(["default", "red", "b1b9f9"]),
    bg=st.sampled_from(["default", "blue"]),
    bold=st.booleans(),
    dim=st.booleans(),
    reverse=st.booleans(),
)

_FLAGS = ("bold", "dim", "italic", "underline", "blink", "reverse", "hidden", "strikethrough")
_FIELDS = ("char", "fg", "bg", "width", *_FLAGS)


def _mutate(cell: Cell, field: str) -> Cell:
    """`cell` with `field` set to a different value."""
    changes: dict[str, Any] = {}
    if field == "char":
        changes["char"] = "z" if cell.char != "z" else "y"
    elif field in ("fg", "bg"):
        changes[field] = "00ff00" if getattr(cell, field) != "00ff00" else "red"
    elif field == "width":
        changes["width"] = 2 if cell.width != 2 else 1
    else:
        changes[field] = not getattr(cell, field)
    return attrs.evolve(cell, **changes)


def test_mutations_cover_every_cell_field() -> None:
    assert set(_FIELDS) == {field.name for field in attrs.fields(Cell)}
    assert all(_mutate(BLANK, field) != BLANK for field in _FIELDS)


@st.composite
def _grid_and_region(draw: st.DrawFn) -> tuple[Grid, Region]:
    cols, rows = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    cells = tuple(tuple(draw(_CELLS) for _ in range(cols)) for _ in range(rows))
    top = draw(st.integers(0, rows - 1))
    left = draw(st.integers(0, cols - 1))
    region = Region(
        top=top,
        bottom=draw(st.integers(top + 1, rows)),
        left=left,
        right=draw(st.integers(left + 1, cols)),
    )
    return Grid(cols=cols, rows=rows, cells=cells), region


def _with_cell(grid: Grid, x: int, y: int, cell: Cell) -> Grid:
    row = grid.row(y)
    changed = (*row[:x], cell, *row[x + 1 :])
    rows = tuple(changed if i == y else grid.row(i) for i in range(grid.rows))
    return Grid(cols=grid.cols, rows=grid.rows, cells=rows)


def _changed_cell_in_row(
    grid: Grid, rows: Sequence[int], data: st.DataObject, field: str
) -> tuple[int, int, Grid]:
    """A drawn cell of one of `rows` (within the row's text, or anywhere on it: its blank
    cells count too) with `field` changed: its column, its row and the grid holding it."""
    y = data.draw(st.sampled_from(rows), label="row")
    drawn = [x for x, cell in enumerate(grid.row(y)) if cell.char.strip()]
    x = data.draw(st.integers(drawn[0], drawn[-1]) | st.integers(0, grid.cols - 1), label="column")
    return x, y, _with_cell(grid, x, y, _mutate(grid.cell(x, y), field))


def _fp(grid: Grid, region: Region, profile: str = PROFILE, terminal: str = TERMINAL) -> bytes:
    return fingerprint(grid, region, profile_id=profile, terminal_identity=terminal)


@settings(max_examples=examples(300))
@given(_grid_and_region(), st.data(), st.sampled_from(_FIELDS))
def test_any_change_inside_the_region_changes_the_fingerprint(
    case: tuple[Grid, Region], data: st.DataObject, field: str
) -> None:
    grid, region = case
    x = data.draw(st.integers(region.left, region.right - 1))
    y = data.draw(st.integers(region.top, region.bottom - 1))
    cell = grid.cell(x, y)
    assert _fp(_with_cell(grid, x, y, _mutate(cell, field)), region) != _fp(grid, region)


@settings(max_examples=examples(300))
@given(_grid_and_region(), st.data(), _CELLS)
def test_changes_outside_the_region_do_not(
    case: tuple[Grid, Region], data: st.DataObject, replacement: Cell
) -> None:
    grid, region = case
    x = data.draw(st.integers(0, grid.cols - 1))
    y = data.draw(st.integers(0, grid.rows - 1))
    assume(not region.contains(x, y))
    assert _fp(_with_cell(grid, x, y, replacement), region) == _fp(grid, region)


@given(_grid_and_region(), st.text(max_size=12), st.text(max_size=12))
def test_profile_and_terminal_identity_are_bound(
    case: tuple[Grid, Region], profile: str, terminal: str
) -> None:
    grid, region = case
    assume(profile != PROFILE and terminal != TERMINAL)
    base = _fp(grid, region)
    assert _fp(grid, region, profile=profile) != base
    assert _fp(grid, region, terminal=terminal) != base


def test_field_boundaries_are_unambiguous() -> None:
    grid = render("ab\n", 2, 1)
    region = grid.full_region
    assert _fp(grid, region, "ab", "c") != _fp(grid, region, "a", "bc")
    # The same characters split into different rows and widths differ too.
    wide = render("abcd\n", 4, 1)
    tall = render("ab\ncd\n", 2, 2)
    assert _fp(wide, wide.full_region) != _fp(tall, tall.full_region)
    # Two cells "a", "b" versus one grapheme "ab" padded with a blank.
    split = Grid(
        cols=2, rows=1, cells=((attrs.evolve(BLANK, char="a"), attrs.evolve(BLANK, char="b")),)
    )
    joined = Grid(cols=2, rows=1, cells=((attrs.evolve(BLANK, char="ab"), BLANK),))
    assert _fp(split, split.full_region) != _fp(joined, joined.full_region)


def test_what_a_person_s_prompt_asks_is_bound_field_by_field_apart_from_cells() -> None:
    def asked(
        text: str, profile: str = PROFILE, terminal: str = TERMINAL, pending: str = ""
    ) -> bytes:
        return asked_fingerprint(
            text, profile_id=profile, terminal_identity=terminal, pending=pending
        )

    secret = '["secret_input"]'
    base = asked(secret)
    assert asked(secret) == base
    others = [
        asked('["editor_in_use"]'),
        asked(secret, profile="p"),
        asked(secret, terminal="t"),
        asked(secret, pending="c"),
    ]
    assert base not in others and len(set(others)) == len(others)
    assert asked("a", profile="bc") != asked("ab", profile="c")
    # Never a cells' fingerprint, whatever the cells: its own domain.
    grid = render('["secret_input"]\n', 16, 1)
    assert _fp(grid, grid.full_region) != base


def test_fingerprint_is_a_stable_sha256() -> None:
    grid = render("x\n", 1, 1)
    first = _fp(grid, grid.full_region)
    assert len(first) == 32
    assert _fp(render("x\n", 1, 1), grid.full_region) == first


PROMPT_SCREEN = (
    "{scrollback}\n"
    "\n"
    "╭────────────────────╮\n"
    "│ Do you want to run │\n"
    "│ {first}1. Yes{reset}           │\n"
    "│   2. No            │\n"
    "╰────────────────────╯\n"
)


def _prompt(scrollback: str = "old output", first: str = "\x1b[38;2;177;185;249m") -> bytes:
    capture = PROMPT_SCREEN.format(scrollback=scrollback, first=first, reset="\x1b[0m")
    grid = render(capture, 24, 8)
    region = Region(top=2, bottom=7, left=0, right=22)
    return _fp(grid, region)


def test_golden_vector() -> None:
    """Fingerprints and ids are stored across restarts: their encoding must never drift.

    If this fails, the fingerprint encoding changed: bump ``_FINGERPRINT_DOMAIN``
    and write a migration for stored offers and interactions instead.
    """
    fp = _prompt()
    assert fp.hex() == "f27b7b04ce3d5c762f9fc869a23f5f6f419c6d7fcd66b8e6336152b9c2f11840"
    ids = IdMinter(bytes(range(32)))
    seen = Appearance(fp, 1_700_000_000_000_000_000)
    assert ids.interaction_id(seen) == "int_hsWaQZgM00yIxy2a7Z3vxw"
    assert ids.question_id(seen, 0) == "q_PQJ_ee5cWk3EdwxO5IJrQw"
    assert ids.option_id(seen, 0, 1) == "opt_Y_2MZibtcn2xbsj1lLRhFA"


def test_rendered_prompt_ignores_output_above_it_but_not_its_own_styles() -> None:
    base = _prompt()
    assert _prompt(scrollback="\x1b[1mnew output, styled\x1b[0m") == base
    assert _prompt(first="\x1b[2m") != base
    assert _prompt(first="") != base


# --- ids --------------------------------------------------------------------

_ID = re.compile(r"^(int|q|opt)_[A-Za-z0-9_-]{22}$")
_FP = bytes(range(32))


@given(st.binary(min_size=1, max_size=40), st.binary(min_size=1, max_size=40))
def test_ids_differ_across_fingerprints(fp_a: bytes, fp_b: bytes) -> None:
    assume(fp_a != fp_b)
    minter = IdMinter(SECRET)
    a, b = Appearance(fp_a, 1), Appearance(fp_b, 1)
    assert minter.interaction_id(a) != minter.interaction_id(b)
    assert minter.question_id(a, 0) != minter.question_id(b, 0)
    assert minter.option_id(a, 0, 0) != minter.option_id(b, 0, 0)


@given(st.integers(0, 2**63), st.integers(0, 2**63))
def test_ids_differ_across_appearances_of_one_prompt(first: int, second: int) -> None:
    """The identical prompt asked again is a new interaction: no id of the old one fits it."""
    assume(first != second)
    minter = IdMinter(SECRET)
    a, b = Appearance(_FP, first), Appearance(_FP, second)
    assert minter.interaction_id(a) != minter.interaction_id(b)
    assert minter.question_id(a, 0) != minter.question_id(b, 0)
    assert minter.option_id(a, 0, 1) != minter.option_id(b, 0, 1)


@given(st.binary(min_size=32, max_size=48), st.binary(min_size=32, max_size=48))
def test_ids_differ_across_secrets(secret_a: bytes, secret_b: bytes) -> None:
    assume(secret_a != secret_b)
    fp = Appearance(_FP, 7)
    a, b = IdMinter(secret_a), IdMinter(secret_b)
    assert a.interaction_id(fp) != b.interaction_id(fp)
    assert a.question_id(fp, 1) != b.question_id(fp, 1)
    assert a.option_id(fp, 1, 2) != b.option_id(fp, 1, 2)


def test_ids_are_prefixed_url_safe_stable_and_index_bound() -> None:
    minter = IdMinter(SECRET)
    fp = Appearance(_FP, 7)
    ids = [
        minter.interaction_id(fp),
        *(minter.question_id(fp, q) for q in range(3)),
        *(minter.option_id(fp, q, o) for q in range(3) for o in range(4)),
    ]
    assert all(_ID.match(value) for value in ids)
    assert len(set(ids)) == len(ids)
    assert ids[0].startswith("int_") and ids[1].startswith("q_") and ids[4].startswith("opt_")
    assert IdMinter(SECRET).option_id(fp, 2, 3) == ids[-1]
    # (0, 12) and (1, 2) must not collide the way "0"+"12" and "1"+"2" would.
    assert minter.option_id(fp, 0, 12) != minter.option_id(fp, 1, 2)


def test_ids_change_when_the_prompt_changes() -> None:
    minter = IdMinter(SECRET)

    def seen(fp: bytes) -> Appearance:
        return Appearance(fp, 7)

    same = minter.interaction_id(seen(_prompt(scrollback="more")))
    assert minter.interaction_id(seen(_prompt())) == same
    assert minter.interaction_id(seen(_prompt())) != minter.interaction_id(
        seen(_prompt(first="\x1b[2m"))
    )


def test_minter_refuses_weak_secrets_and_bad_indexes() -> None:
    with pytest.raises(ValueError, match="token_bytes"):
        IdMinter(b"short")
    minter = IdMinter(SECRET)
    assert "s" * 8 not in repr(minter)
    with pytest.raises(ValueError, match=">= 0"):
        minter.option_id(Appearance(b"fp", 1), -1, 0)
    with pytest.raises(ValueError, match=">= 0"):
        minter.interaction_id(Appearance(b"fp", -1))
