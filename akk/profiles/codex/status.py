"""The rows under Codex's composer: the status line, the hint row, or the bare footer.

What the pinned versions draw: one blank row under the composer, then the
status row (the user's ``[tui] status_line``, model label in the version's
status colour) and, from 0.169.0, an optional shortcut-hint row. Up to 0.155.1
the status line is one row, cut with ``…``; 0.169.0 wraps a long one onto a
second row of coloured items, and may end its hint row with ``⚠ N warning · f2
to view`` (a model outside the catalog, once a turn ran); a draft hides the
hints, leaving that notice alone on the row. With no status line the row under
the composer is the bare hint (``? for shortcuts``; 0.169.0 ``← for agents · ?
for shortcuts``) with ``N% context left`` right-aligned. In Plan mode the
status row (up to 0.155.1) or the hint row (0.169.0) ends with ``Plan mode
(shift+tab to cycle)``, right-aligned, ``Plan mode`` in magenta; on 0.169.0 the
hint row keeps only that indicator while a draft is typed, and drops
``(shift+tab to cycle)`` while a turn runs.

A person at the composer while a turn runs (every pinned version) changes the
last row, in the bare footer's place or the hint row's: ``tab to queue
message`` once they type (with ``N% context left`` where the bare footer has
it), ``Shell mode`` right-aligned after it in shell mode, the history search's
dim ``reverse-i-search:`` and its query, or (0.169.0 on) the shortcuts' ``? /
esc close``. Up to 0.155.1 the lists a person opens stand under the composer in
the footer's place (`PersonRows`).
"""

from __future__ import annotations

import enum
import re

import attrs

from akk.profiles.codex.reader import Reader
from akk.profiles.observation import Unproven


@attrs.frozen
class Notice:
    """A notice drawn right-aligned at the end of a composer footer row (``100% context left``)."""

    text: re.Pattern[str]
    right_pad: int  # blank columns between the notice and the pane's right edge


@attrs.frozen
class ModeIndicator:
    """The collaboration mode a version draws at the right end of its hint row (0.169.0)."""

    labels: tuple[str, ...]  # as drawn, e.g. "Plan mode (shift+tab to cycle)"
    fg: str  # the colour of the label's first word
    right_pad: int  # blank columns between the label and the pane's right edge


class PersonRow(enum.Enum):
    """What a person at the composer put on its last row (`PersonRows`)."""

    QUEUE = "queue"  # they typed a draft while a turn runs
    SHELL = "shell"  # the shell mode, while a turn runs
    SEARCH = "history_search"  # the history search (at any time)
    SHORTCUTS = "shortcuts"  # the shortcuts a '?' shows, over the composer (0.169.0 on)
    LIST = "list"  # a list under the composer, in the footer's place (up to 0.155.1)


@attrs.frozen
class PersonRows:
    """What a version draws for a person at the composer, in the place of the bare footer
    or the hint row: the queue hint once they type while a turn runs (then the context
    left, or `shell` right-aligned in shell mode), the history search's row, the shortcuts'
    hint row; or, up to 0.155.1, the lists they open, under the composer."""

    shell: ModeIndicator
    # Up to 0.155.1 the lists a person opens (the command menu, the mention popup, the
    # shortcuts) stand under the composer, in the footer's place; from 0.169.0 above it,
    # over the footer as ever, the shortcuts' hint row saying `shortcuts`.
    lists_below: bool
    shortcuts: str | None = None
    # In Plan mode the queue hint shares its row with the mode: after it, as this text (up to
    # 0.155.1, None: none), or as the version's mode indicator (0.169.0 on).
    queue_plan: str | None = None
    queue: str = "tab to queue message"
    shell_glyph: str = "!"  # the composer's glyph in shell mode, in the shell label's colour
    search: str = "reverse-i-search:"  # dim, the person's query after it
    # The lists under the composer (`lists_below`), each from the row after a blank one:
    # command rows ("/name" and its description), mention rows (one marked ">") over a blank
    # row and a footer that says "esc close", or the shortcuts over their last row.
    command_row: re.Pattern[str] = re.compile(r"  /[a-z][\w-]*  +\S.*")
    command_wrap: re.Pattern[str] = re.compile(r" {5,}\S.*")  # a description's next row
    mention_row: re.Pattern[str] = re.compile(r"[> ] \S.*")
    mention_footer: str = " esc close "
    shortcuts_end: str = "  customize shortcuts with /keymap"


@attrs.frozen
class FooterTop:
    """Where the composer's footer starts, and the person's row that ends it, if any."""

    row: int
    person: PersonRow | None = None


def first_row(r: Reader, last: int) -> FooterTop:
    """The first row of the composer's footer, which ends at row `last`.

    Either the status rows (the first in the status colour; a long status line
    wraps), then the version's hint row if any, or, with no status line, one
    bare footer row ending with the context left. A person's row (`PersonRows`)
    takes the place of the hint row or of the bare footer.
    """
    p = r.p
    person = _person_row(r, last)
    if person is not None and last > 0 and not r.lines[last - 1]:
        return FooterTop(last, person)
    listed = _list_below(r, last)
    if listed is not None:
        return FooterTop(listed, PersonRow.LIST)
    bare = _left_of(r, last, p.context_left)
    if bare is not None and bare[:2] == "  " and bare[2:] in p.bare_footer:
        return FooterTop(last)
    y = last - 1 if person is not None or _hint_row(r, last) else last
    if y < 0 or not r.lines[y]:
        raise Unproven("no prompt and no composer status row at the bottom of the screen")
    top = r.run_above(y, "the composer status row")
    if (
        y - top >= p.status_max_rows
        or not all(r.indented(row, 2) for row in range(top, y + 1))
        or r.grid.cell(2, top).fg != p.status_fg
        or not all(_status_items(r, row) for row in range(top + 1, y + 1))
    ):
        raise Unproven("no prompt and no composer status row at the bottom of the screen")
    return FooterTop(top, person)


def _person_row(r: Reader, y: int) -> PersonRow | None:
    """Which person's row (`PersonRows`) row `y` is, if any."""
    rows, line = r.p.person_rows, r.lines[y]
    if line.startswith(f"  {rows.search}") and r.grid.cell(2, y).dim:
        return PersonRow.SEARCH
    if rows.shortcuts is not None and line == f"  {rows.shortcuts}":
        return PersonRow.SHORTCUTS
    queued = (f"  {rows.queue}", f"  {rows.queue}{rows.queue_plan or ''}")
    if line in queued or _left_of(r, y, r.p.context_left) in queued:
        return PersonRow.QUEUE
    mode = r.p.mode_indicator
    if mode is not None and _indicated(r, y, mode) == queued[0]:
        return PersonRow.QUEUE
    if _indicated(r, y, rows.shell) == f"  {rows.queue}":
        return PersonRow.SHELL
    return None


def _list_below(r: Reader, last: int) -> int | None:
    """The first row of a list a person opened under the composer (`PersonRows.lists_below`),
    ending at row `last`: the command menu, the mention popup or the shortcuts; else None."""
    rows, lines = r.p.person_rows, r.lines
    if not rows.lists_below:
        return None
    top = r.run_above(last, "a list")
    if rows.command_row.fullmatch(lines[top]) and all(
        rows.command_row.fullmatch(lines[y]) or rows.command_wrap.fullmatch(lines[y])
        for y in range(top + 1, last + 1)
    ):
        return top
    if top != last or last < 2 or lines[last - 1] or not lines[last - 2]:
        return None  # the popups below end with one row of their own under a blank one
    first = r.run_above(last - 2, "a list")
    if rows.mention_footer in lines[last]:
        if all(rows.mention_row.fullmatch(lines[y]) for y in range(first, last - 1)):
            return first
    elif lines[last] == rows.shortcuts_end:
        return first
    return None


def _indicated(r: Reader, y: int, mode: ModeIndicator) -> str | None:
    """Row `y`'s text left of `mode`'s label if the row ends with one, right-aligned in its
    colour; else None."""
    row, cols = r.grid.row(y), r.grid.cols
    for label in mode.labels:
        start = cols - mode.right_pad - len(label)
        if (
            start > 2
            and "".join(cell.char for cell in row[start : start + len(label)]) == label
            and row[start].fg == mode.fg
            and all(cell.char == " " for cell in row[start + len(label) :])
            and row[start - 1].char == " "
        ):
            return "".join(cell.char for cell in row[:start]).rstrip()
    return None


def _status_items(r: Reader, y: int) -> bool:
    """Whether row `y` continues a wrapped status line: items in their colours, `·` between."""
    return all(cell.fg != "default" or cell.char in (" ", "·", "") for cell in r.grid.row(y)[2:])


def _left_of(r: Reader, y: int, notice: Notice) -> str | None:
    """Row `y`'s text left of `notice` if the row ends with it, right-aligned; else None."""
    row, cols = r.grid.row(y), r.grid.cols
    match = re.search(rf"(?<=  )(?:{notice.text.pattern})$", r.lines[y])
    if match is None:
        return None
    text = match.group()
    start = cols - notice.right_pad - len(text)
    if start < 1 or "".join(cell.char for cell in row[start : start + len(text)]) != text:
        return None
    if any(cell.char != " " for cell in row[start + len(text) :]) or row[start - 1].char != " ":
        return None
    return r.lines[y][: match.start()].rstrip()


def _hint_row(r: Reader, y: int) -> bool:
    """Whether row `y` is the hint row under the status row (0.169.0).

    It starts with one of the version's hints, or ends with its collaboration
    mode indicator, or both (Plan mode with a draft shows the indicator alone);
    a notice (warnings) may end it after the hints instead of the indicator, and
    stands alone while a draft hides the hints (codex_after_warning-draft).
    """
    p = r.p
    left = r.lines[y]
    for notice in p.hint_notices:
        rest = _left_of(r, y, notice)
        if rest is not None:
            return not rest or any(rest[2:].startswith(hint) for hint in p.status_hints)
    if p.mode_indicator is not None:
        indicated = _indicated(r, y, p.mode_indicator)
        if indicated is not None:
            if not indicated:
                return True
            left = indicated
    return any(left[2:].startswith(hint) for hint in p.status_hints)
