"""Codex's numbered menu rows (``› 1. Label  description``): parsed, unwrapped and proven.

Every prompt shape draws its options this way: the exec approval's rows (each
ending in its key shortcut), a question's options, the unanswered-question
confirmation and the async picker. The current row carries the cursor glyph
``›`` and the version's highlight style (cyan bold up to 0.155.1, bold reverse
in 0.169.0), which is also what keeps one version's prompt from being read
under another's profile.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from akk.profiles.codex.reader import Reader
from akk.profiles.observation import Unproven
from akk.profiles.readback import prove_readable, unreadable
from akk.profiles.wrap import cut_between_wide
from akk.screen.grid import Cell


@attrs.frozen
class Highlight:
    """The style that marks the menu row under the cursor."""

    bold: bool
    reverse: bool
    fg: str | None = None  # None: any foreground

    def marks(self, cell: Cell) -> bool:
        """Whether `cell` is drawn in this highlight style."""
        return (
            cell.bold == self.bold
            and cell.reverse == self.reverse
            and (self.fg is None or cell.fg == self.fg)
        )


@attrs.frozen
class MenuShape:
    """Where a numbered menu row draws its cursor glyph and its number."""

    cursor_col: int
    number_col: int
    descriptions: bool  # label and description are split by a gap of two or more spaces
    shortcuts: bool  # every row ends with its key in parentheses, e.g. "(y)"


@attrs.frozen
class MenuRow:
    """One parsed menu row, its wrapped label or description rows joined."""

    number: int
    label: str
    description: str
    current: bool


_NUMBERED = re.compile(r"(\d+)\. (\S.*)")
_GAP = re.compile(r"\s{2,}")
SHORTCUT = re.compile(r" \(([^()\s]+)\)$")
"""A row's key shortcut at its end, e.g. `` (y)``."""


def menu(r: Reader, top: int, bottom: int, shape: MenuShape) -> list[MenuRow]:
    """Parse rows ``top..bottom-1`` as one numbered menu, proving numbers and highlight."""
    cursor, hl, grid = r.p.cursor, r.p.highlight, r.grid
    rows: list[MenuRow] = []
    gap = " " * (shape.number_col - shape.cursor_col - 1)
    description_col: int | None = None  # the column where the last row's description starts
    above = top  # the row the text of a wrapped row would continue
    for y in range(top, bottom):
        line = r.lines[y]
        glyph = line[shape.cursor_col : shape.cursor_col + 1]
        numbered = _NUMBERED.fullmatch(line, shape.number_col)
        lead_ok = (
            line[: shape.cursor_col] == " " * shape.cursor_col
            and line[shape.cursor_col + 1 : shape.number_col] == gap
        )
        if numbered and lead_ok and glyph in (cursor, " "):
            current = glyph == cursor
            styled = hl.marks(grid.cell(shape.number_col, y))
            if current != styled or (current and not hl.marks(grid.cell(shape.cursor_col, y))):
                raise Unproven(f"menu row {y}: cursor glyph and highlight style disagree")
            text = numbered.group(2)
            label, description, description_col = text, "", None
            if shape.descriptions:
                label, between, description = _partition_text(text)
                if description:
                    description_col = r.column(y, numbered.start(2) + len(label) + len(between))
            rows.append(MenuRow(int(numbered.group(1)), label, description, current))
        elif description_col is not None and r.indented(y, description_col):
            # A wrapped description: its further rows start under its first.
            prev, joint = rows[-1], r.wrap_joiner(above, y, description_col)
            rows[-1] = attrs.evolve(prev, description=f"{prev.description}{joint}{line.strip()}")
        elif rows and r.indented(y, label_col := shape.number_col + 3):
            # A wrapped label: it continues the row above. Beside it, at the description's
            # column, may stand the description's own wrap.
            prev, more, described = rows[-1], line[label_col:], ""
            if shape.descriptions:
                more, between, described = _partition_text(more)
            if described:
                described_at = label_col + len(more) + len(between)
                if r.column(y, described_at) != description_col:
                    raise Unproven(f"menu row {y}: a description out of its column")
                joint = r.wrap_joiner(above, y, described_at)
                prev = attrs.evolve(prev, description=f"{prev.description}{joint}{described}")
            if not prev.description:
                joiner = r.wrap_joiner(above, y, label_col)
            elif cut_between_wide(prev.label, more, full=True):
                # The label's column ends short of the description's, at no edge a row
                # shows: whether a word of wide characters was cut there is unknown.
                raise Unproven(f"menu row {y}: a wide label's wrap beside its description")
            else:
                joiner = " "
            joiner = "" if prev.label.endswith("-") else joiner
            rows[-1] = attrs.evolve(prev, label=f"{prev.label}{joiner}{more}")
        else:
            raise Unproven(f"unexpected row {y} inside a menu")
        above = y
    if [row.number for row in rows] != list(range(1, len(rows) + 1)):
        raise Unproven("menu numbers are duplicated or out of order")
    if shape.shortcuts and not all(SHORTCUT.search(row.label) for row in rows):
        raise Unproven("a menu row lacks its key shortcut: truncated row")
    if sum(row.current for row in rows) != 1:
        raise Unproven("no single current row in the menu")
    return rows


def asked(r: Reader, paragraphs: Sequence[Sequence[int]], rows: Sequence[MenuRow]) -> str:
    """The question in the rows of `paragraphs` (each indented by two), each unwrapped, with
    a blank line between them; refused where it or an option of `rows` holds a character
    whose width Codex and tmux may disagree on, which shifts the spaces around it
    (`akk.profiles.readback`)."""
    question = "\n\n".join(r.unwrapped(rows_of, 2) for rows_of in paragraphs)
    prove_readable(
        [question, *(t for row in rows for t in (row.label, row.description))], _UNREADABLE
    )
    return question


_UNREADABLE = unreadable()


def _partition_text(text: str) -> tuple[str, str, str]:
    """Split a menu row's text at its first gap of two or more spaces: label, gap, description."""
    match = _GAP.search(text)
    if match is None:
        return text, "", ""
    return text[: match.start()], match.group(), text[match.end() :]
