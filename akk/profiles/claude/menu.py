"""Claude Code's numbered menu rows (``❯ 1. Label``): parsed, unwrapped and proven.

Every prompt shape draws its options this way: the permission's rows, the
questionnaire's options and the review's Submit / Cancel. A label or
description longer than the row wraps between words; `prove_wrap` decides
whether a joined row is a wrap Claude could have made (the questionnaire
proves its question's rows with it too), and `wrap_joiner` what joins it to the
row above (`akk.profiles.wrap`: nothing between two wide characters).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from akk.profiles.claude.reader import Reader
from akk.profiles.observation import OptionRole, OptionView, Unproven
from akk.profiles.wrap import cut_between_wide, joiner


@attrs.frozen
class MenuShape:
    """How one numbered menu row is drawn: ``❯ 1. Label``."""

    cursor_col: int
    number_col: int
    cursor: str = "❯"
    highlight_fg: str = "afd7ff"  # cursor glyph and the current row's label
    muted_fg: str = "949494"  # descriptions, hints, unselected automatic rows


@attrs.frozen
class Row:
    """One parsed menu row (plus any wrapped continuation rows)."""

    y: int
    number: int | None
    label: str
    label_col: int
    current: bool
    highlighted: bool  # the label's first cell is in the highlight colour
    checked: bool | None = None
    description: str = ""
    # Each row joined to this one as a wrapped row: (row above, its text's first
    # column, the row, its first column, the box's right margin), for `prove_wraps`.
    joins: tuple[tuple[int, int, int, int, int], ...] = ()


_NUMBER = re.compile(r"(\d+)\. ")


def menu_row(r: Reader, y: int, menu: MenuShape, *, boxes: bool) -> Row | None:
    """Row `y` as a numbered menu row of `menu`'s shape, or None."""
    row, text = r.cells[y], r.texts[y]
    lead = text[: menu.number_col]
    if len(lead) < menu.number_col:
        return None
    cursor = row[menu.cursor_col]
    if cursor.char == menu.cursor:
        if cursor.fg != menu.highlight_fg:
            return None
        current = True
    elif cursor.char == " ":
        current = False
    else:
        return None
    if lead[: menu.cursor_col].strip() or lead[menu.cursor_col + 1 :].strip():
        return None
    number = _NUMBER.match(text, menu.number_col)
    if number is None:
        return None
    label_col = number.end()
    checked: bool | None = None
    if boxes:
        box = text[label_col : label_col + len(r.p.questionnaire.checked)]
        if box not in (r.p.questionnaire.checked, r.p.questionnaire.unchecked):
            return None
        checked = box == r.p.questionnaire.checked
        label_col += len(box)
    label = text[label_col:].rstrip()
    if not label:
        return None
    return Row(
        y=y,
        number=int(number.group(1)),
        label=label,
        label_col=label_col,
        current=current,
        highlighted=row[label_col].fg == menu.highlight_fg,
        checked=checked,
    )


def menu_rows(
    r: Reader,
    first: int,
    last: int,
    menu: MenuShape,
    *,
    boxes: bool,
    description: int | None,
    margin: int = 0,
) -> list[Row]:
    """Rows first..last-1 as numbered menu rows with wrapped labels and descriptions
    (`margin`: the columns the prompt's box keeps free at the pane's right edge)."""
    rows: list[Row] = []
    above = (first, 0)  # the row and start column of the text a wrapped row would continue
    for y in range(first, last):
        row = menu_row(r, y, menu, boxes=boxes)
        if row is not None:
            rows.append(row)
            above = (y, row.label_col)
            continue
        if not rows or r.blank(y):
            raise Unproven(f"unexpected row {y} in a menu")
        previous = rows[-1]
        start = r.indent(y)
        cell = r.cells[y][start]
        text = r.texts[y].strip()
        join = (*above, y, start, margin)
        gap = wrap_joiner(r, *join)
        if description is not None and start == description and cell.fg == menu.muted_fg:
            joined = f"{previous.description}{gap}{text}" if previous.description else text
            joins = (*previous.joins, join) if previous.description else previous.joins
            rows[-1] = attrs.evolve(previous, description=joined, joins=joins)
        elif (
            start == previous.label_col
            and not previous.description
            # A label's muted tail (" · auto mode handles …") wraps muted.
            and (cell.fg != menu.muted_fg or _last_fg(r, above[0]) == menu.muted_fg)
        ):
            label = f"{previous.label}{gap}{text}"
            rows[-1] = attrs.evolve(previous, label=label, joins=(*previous.joins, join))
        else:
            raise Unproven(f"unexpected row {y} in a menu")
        above = (y, start)
    return rows


def _last_fg(r: Reader, y: int) -> str:
    """The colour of row `y`'s last drawn character."""
    text = r.texts[y].rstrip(" ")
    return r.cells[y][r.grid.row_columns(y)[len(text) - 1]].fg


def prove_wraps(r: Reader, rows: Sequence[Row]) -> None:
    """Every row joined to a label or description of `rows` is Claude's wrap of it."""
    for row in rows:
        for join in row.joins:
            prove_wrap(r, *join)


def wrap_joiner(r: Reader, above: int, above_start: int, y: int, start: int, margin: int) -> str:
    """What joins row `y`'s text (from column `start`) to row `above`'s: a space, or nothing
    where the break cut a word of wide characters at a full row (`akk.profiles.wrap`)."""
    upper, lower = r.texts[above].rstrip(" "), r.texts[y][start:]
    return joiner(upper, lower, full=_full(r, above, above_start, y, start, margin))


def _full(r: Reader, above: int, above_start: int, y: int, start: int, margin: int) -> bool:
    """Whether row `y`'s first character would not have fit on row `above`."""
    width = r.grid.cols - start - margin
    used = _columns(r, above, above_start, len(r.texts[above].rstrip(" ")))
    return used + _columns(r, y, start, start + 1) > width


def prove_wrap(
    r: Reader, above: int, above_start: int, y: int, start: int, margin: int = 0
) -> None:
    """Row `y`'s text (from column `start`) is row `above`'s, soft-wrapped at one space.

    Claude wraps a question, label or description at the pane's edge (`cols - start`
    columns, less the box's right `margin`), between words; a word longer than that is
    cut at the edge. Rows join with a space, so the break must be one the wrap made at
    a space: the next word did not fit on the row above, and the two rows' edge words
    are not one word cut at the edge (a long path, a long ASCII word): where both
    readings are possible the text cannot be read back. A word of wide characters (CJK)
    cut at a full row is read as cut (`wrap_joiner` joins it with nothing).
    """
    width = r.grid.cols - start - margin
    upper = r.texts[above].rstrip(" ")
    if fits_above(r, above, above_start, y, start, margin):
        raise Unproven(f"row {y} does not wrap row {above}: its first word fits there")
    first_word = _first_word(r, y, start)
    lower = r.texts[y].rstrip(" ")
    last_word = _columns(r, above, max(above_start, upper.rfind(" ") + 1), len(upper))
    cut = _full(r, above, above_start, y, start, margin)
    if cut_between_wide(upper, lower[start:], full=cut):
        return
    if cut and last_word + first_word > width:
        raise Unproven(f"row {y} may go on with a word cut at the edge of row {above}")


def fits_above(
    r: Reader, above: int, above_start: int, y: int, start: int, margin: int = 0
) -> bool:
    """Whether row `y`'s first word (from column `start`) would have fit after a space on
    row `above`: then no wrap broke the text there (`prove_wrap`), a line break did."""
    width = r.grid.cols - start - margin
    used = _columns(r, above, above_start, len(r.texts[above].rstrip(" ")))
    return used + 1 + _first_word(r, y, start) <= width


def _first_word(r: Reader, y: int, start: int) -> int:
    """How many columns row `y`'s first word, from column `start`, takes."""
    lower = r.texts[y].rstrip(" ")
    word_end = lower.find(" ", start)
    return _columns(r, y, start, len(lower) if word_end < 0 else word_end)


def _columns(r: Reader, y: int, start: int, stop: int) -> int:
    """How many columns the characters start..stop-1 of row `y`'s text take."""
    if stop <= start:
        return 0
    at = r.grid.row_columns(y)
    return at[stop - 1] + r.cells[y][at[stop - 1]].width - at[start]


def prove_numbers(rows: Sequence[Row]) -> None:
    """Menu numbers run 1, 2, 3… top to bottom, none repeated or skipped."""
    if [row.number for row in rows] != list(range(1, len(rows) + 1)):
        raise Unproven("option numbers are duplicated or out of order")


def prove_cursor(rows: Sequence[Row], exempt: Row | None) -> None:
    """Exactly one row carries the cursor, and only it is in the highlight colour.

    `exempt` (an open editor) carries the cursor without the highlight.
    """
    current = [row for row in rows if row.current]
    if len(current) != 1:
        raise Unproven(f"{len(current)} menu rows carry the cursor")
    if any(row.highlighted for row in rows if not row.current):
        raise Unproven("a row away from the cursor is highlighted")
    if current[0] is not exempt and not current[0].highlighted:
        raise Unproven("the cursor row is not highlighted")


def option_view(row: Row, role: OptionRole) -> OptionView:
    """Row `row` as the option a controller sees, in the role its shape gave it."""
    return OptionView(
        label=row.label,
        role=role,
        number=row.number,
        description=row.description,
        current=row.current,
        checked=row.checked,
    )
