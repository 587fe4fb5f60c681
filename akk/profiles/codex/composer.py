"""Codex's composer: idle, draft and working, read from the composer up through the history.

What the pinned versions draw: the composer row ``› <text>`` (glyph bold, not
dim; an empty composer shows a dim placeholder) and the draft's further rows,
indented by two (an empty row follows a line that fills its row exactly; paste
placeholders are cyan elements), then the rows `akk.profiles.codex.status`
reads. A history user message also starts with ``›`` but its glyph is dim.

Working: the same composer plus a status line ``• Working (0s • esc to
interrupt)``; a running command shows ``• Running <cmd>`` (verb bold). While a
reply streams, 0.169.0 hides that line; from 0.155.1 each finished turn ends
with a dim line (``done 10:02 PM``, ``Worked for 3s • 21:52``), so idle there
also needs that line below the last sent message (or the session header on
screen and no message at all), the line ``■ Conversation interrupted - ...``
an interrupted turn ends with (Esc, a rejected command), or the red ``■ <error>``
a turn the model API failed ends with. 0.153.4 and 0.154.0
draw no such line: their idle rests on the absence of the status line alone.
A queued async question (0.154.0, 0.155.1) sits right above the composer. A
draft taller than the pane (0.169.0 on) scrolls the composer to the pane's end,
over its footer, its first row marked ``↑`` in the right margin (`scrolled`).
"""

from __future__ import annotations

from akk.profiles.codex.reader import Reader
from akk.profiles.codex.status import FooterTop, PersonRow
from akk.profiles.composer import DraftView
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    PromptView,
    State,
    StepKind,
    Unproven,
)
from akk.screen.region import Region


def read(r: Reader, footer: FooterTop) -> Observation:
    """Idle, idle_draft, working or a queued question: the composer above `footer`.

    A person's row under it (`status.PersonRows`) reads only while a turn is proven to run:
    working, with the person's draft (in shell mode or the history search, `composer_mode`
    says which). The shell mode or the history search at an idle composer is no composer
    AKK may type into.
    """
    p, grid = r.p, r.grid
    r.blank(footer.row - 1, "between the composer and its status row")
    top = _top(r, footer.row - 2, shell=footer.person is PersonRow.SHELL)
    draft = _draft(r, top, footer.row - 1)
    if footer.person is not None:
        return _person_s(r, footer.person, top, draft)
    queued = _queued_question(r, top)
    if _status_line(r, top):
        return Observation(State.WORKING, p.id, queued, draft=draft)
    for row in range(top):
        words = r.lines[row][2:].split(" ", 1)
        if (
            r.lines[row][:2] in ("• ", "◦ ")
            and words[0] in p.in_progress_verbs
            and grid.cell(2, row).bold
        ):
            raise Unproven(f"a command is still running (row {row}) with no status line")
    if queued is not None:
        return Observation(State.ASYNC_QUESTION, p.id, queued)
    if p.turn_end is not None and not _turn_finished(r, top):
        return Observation(State.WORKING, p.id, draft=draft)
    return Observation(State.IDLE if draft.empty else State.IDLE_DRAFT, p.id, draft=draft)


def _person_s(r: Reader, person: PersonRow, top: int, draft: DraftView) -> Observation:
    """The composer a person is at, read only while a turn is proven to run (its status
    line, or no end under its last message): the agent goes on behind it."""
    if not _turn_runs(r, top):
        raise Unproven(f"{person.value.replace('_', ' ')} at the composer, and no turn runs")
    mode = person.value if person in (PersonRow.SHELL, PersonRow.SEARCH) else None
    return Observation(State.WORKING, r.p.id, draft=draft, composer_mode=mode)


def scrolled(r: Reader, last: int) -> Observation | None:
    """The composer a draft taller than the pane scrolled (0.169.0 on): it runs to the pane's
    end (one blank row under it), over its footer, its first row marked in the right margin
    (`CodexProfile.scrolled_mark`, dim); None for any other screen. Read only while a turn
    is proven to run, as a person's row is: working, the draft not whole."""
    p, grid = r.p, r.grid
    if p.scrolled_mark is None or grid.rows - 1 - last > 1:
        return None
    try:
        top = _top(r, last)
    except Unproven:
        return None
    mark = grid.cell(grid.cols - 1, top)
    if mark.char != p.scrolled_mark or not mark.dim:
        return None
    if not _turn_runs(r, top):
        raise Unproven("a draft taller than the pane at the composer, and no turn runs")
    return Observation(State.WORKING, p.id, draft=_draft(r, top, last + 1))


def _turn_runs(r: Reader, composer_top: int) -> bool:
    """Whether a turn is proven to run: its status line stands above the composer, or the
    version closes each turn with a line and none stands under the last message."""
    p = r.p
    return _status_line(r, composer_top) or (
        p.turn_end is not None and not _turn_finished(r, composer_top)
    )


def _status_line(r: Reader, composer_top: int) -> bool:
    """Whether a turn's status line (``• Working (0s • esc to interrupt)``) stands above."""
    return any(r.p.working_marker in line for line in r.lines[:composer_top])


def _top(r: Reader, bottom: int, *, shell: bool = False) -> int:
    """The composer's first row, above its last row `bottom`.

    Draft rows are indented by two columns and may be empty (a blank line, or
    the row Codex adds after a row the text fills exactly); the first row
    carries the composer glyph, bold and not dim (in `shell` mode, the shell's
    glyph in the shell label's colour).
    """
    top = bottom
    while top > 0 and r.lines[top][:2] in ("", "  "):
        top -= 1
    glyph, shown, rows = r.grid.cell(0, top), r.lines[top][:2], r.p.person_rows
    if shell:  # the shell prompt alone is drawn with no space after it
        drawn = shown.rstrip() == rows.shell_glyph and glyph.fg == rows.shell.fg
    else:
        drawn = shown == f"{r.p.composer_glyph} "
    if not drawn or not glyph.bold or glyph.dim:
        raise Unproven(f"row {top} is not the composer")
    return top


def _draft(r: Reader, top: int, end: int) -> DraftView:
    """The draft in composer rows top..end-1, glyph and indent dropped.

    An empty composer shows a dim placeholder text. A draft mixing dim and
    plain text, or with a mark in the right margin (Codex's scroll arrows),
    cannot be read whole.
    """
    p, grid = r.p, r.grid
    shown = [
        cell for y in range(top, end) for cell in grid.row(y)[2:] if cell.char not in (" ", "")
    ]
    dim = [cell.dim for cell in shown]
    rows = () if all(dim) else tuple(r.lines[y][2:] for y in range(top, end))
    marked = any(grid.cell(grid.cols - 1, y).char != " " for y in range(top, end))
    return DraftView(
        rows=rows,
        width=grid.cols - p.composer_margin,
        pane_rows=grid.rows,
        placeholders=r.placeholders(top, end),
        complete=not marked and (all(dim) or not any(dim)),
    )


def _queued_question(r: Reader, composer_top: int) -> PromptView | None:
    """The queued async question right above the composer, as its one step: opening it.

    Its question and options show only in its picker; the region is the
    queue's heading, count and hint rows.
    """
    shape = r.p.async_question
    if shape is None or composer_top < 4 or r.lines[composer_top - 1]:
        return None
    heading, queued, hint = r.lines[composer_top - 4 : composer_top - 1]
    if (
        heading != f"• {shape.anchor}"
        or not shape.queued.fullmatch(queued.strip())
        or hint.strip() != shape.queued_hint
    ):
        return None
    return PromptView(
        InteractionKind.ASYNC_QUESTION,
        StepKind.QUEUED,
        (),
        Region(top=composer_top - 4, bottom=composer_top - 1, left=0, right=r.grid.cols),
    )


def _turn_finished(r: Reader, composer_top: int) -> bool:
    """Whether the history proves the last turn ended (its closing line is below it).

    With no turn on screen, only the session's header proves that none ran, unless a list
    a person opened over the history (a row marked in reverse video, its pick) covers it.
    """
    p = r.p
    assert p.turn_end is not None
    covered = False
    for y in range(composer_top - 1, -1, -1):
        glyph = r.grid.cell(0, y)
        covered = covered or glyph.reverse
        text = r.lines[y].strip()
        if p.turn_end.fullmatch(text) and r.indented(y, 2) and r.grid.cell(2, y).dim:
            return True
        if r.lines[y].startswith(p.interrupted) and glyph.fg == p.interrupted_fg:
            return True
        if r.lines[y].startswith(p.failed) and glyph.fg == p.failed_fg:
            return True
        if r.lines[y][:2] == f"{p.user_glyph} " and glyph.bold and glyph.dim:
            return False
    # No turn on screen: idle only if the whole session (its header) is visible.
    if not covered and any(p.banner in line for line in r.lines[:composer_top]):
        return True
    raise Unproven("cannot tell whether the last turn ended: its start scrolled away")
