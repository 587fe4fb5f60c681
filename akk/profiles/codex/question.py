"""Codex's request_user_input question (``Question i/n (k unanswered)``) and its notes editor.

What the pinned versions draw, bottom-up: a footer (``tab to add notes | enter
to submit answer | …``; with notes open ``tab or esc to clear notes | …``),
the notes editor if open, numbered options whose descriptions wrap under their
own column, an automatic ``None of the above`` row, the prompt in the
version's prompt colour (or one plain row once answered and visited again) and
the dim header.

The notes editor (Tab on a question row) is a small composer: ``  › `` then
rows indented by four, wrapped by textwrap at the pane width less seven, an
empty row after a row the text fills exactly, a dim ``Add notes`` when empty.
It shows at most six rows and keeps the last ones in view, with no mark; a
prompt that fills the pane clips it further. More than 1000 characters typed
at once collapse into ``[Pasted Content N chars]``; 3000 show one 1024-character
paste, and Enter then submits the question unanswered (tools/lab/NOTES.md).
Notes belong to the row under the cursor (``Red`` + a note is an answer too).
"""

from __future__ import annotations

from akk.profiles.codex.menu import asked, menu
from akk.profiles.codex.reader import Footer, Reader
from akk.profiles.composer import DraftView
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    OptionRole,
    OptionView,
    PromptView,
    QuestionView,
    ResponseKind,
    State,
    StepKind,
    Unproven,
)
from akk.screen.region import Region


def read(r: Reader, footer: Footer, footer_top: int, last: int) -> Observation:
    """The question whose footer spans rows footer_top..last; sets `r.notes` when they are open."""
    p = r.p
    notes_open = footer == p.notes_footer
    r.blank(footer_top - 1, "above the question footer")
    y = footer_top - 2
    if notes_open:
        notes_end = y + 1
        if y > 0 and not r.lines[y] and _fills_notes_row(r, y - 1):
            y -= 1  # the empty row after a notes row the text fills exactly
        notes_top = r.run_above(y, "the notes editor")
        if r.lines[notes_top][:4] != f"  {p.cursor} " or not all(
            r.indented(row, 4) for row in range(notes_top + 1, y + 1)
        ):
            raise Unproven(f"unexpected row {notes_top} where the notes editor belongs")
        r.blank(notes_top - 1, "above the notes editor")
        r.notes = _notes(r, notes_top, notes_end)
        y = notes_top - 2
    menu_top = r.run_above(y, "question options")
    rows = menu(r, menu_top, y + 1, p.question_menu)
    r.blank(menu_top - 1, "above the question options")
    end = menu_top - 2  # the prompt's last row
    if p.prompt_fill_blank and end > 0 and not r.lines[end] and r.end(end - 1) == r.grid.cols - 2:
        end -= 1  # the empty row after a prompt row the text fills exactly
    top, paragraphs = _asked_rows(r, end)
    header = p.question_header.fullmatch(r.lines[top].strip())
    if header is None or not r.indented(top, 2) or not r.grid.cell(2, top).dim:
        raise Unproven(f"row {top} is not this version's question header")
    prompt_rows = [row for paragraph in paragraphs for row in paragraph]
    colours = {r.grid.cell(2, row).fg for row in prompt_rows}
    # A plain row proves nothing by its style: an answered prompt is one row only.
    answered = colours == {p.answered_prompt_fg} and len(prompt_rows) == 1
    if (
        not prompt_rows
        or not all(r.indented(row, 2) for row in prompt_rows)
        or not (colours == {p.question_prompt_fg} or answered)
    ):
        raise Unproven("question prompt missing or not drawn in the prompt colour")
    index, total = int(header.group(1)), int(header.group(2))
    if not 1 <= index <= total:
        raise Unproven(f"question {index}/{total} is out of range")
    options = []
    for row in rows:
        role = OptionRole.CHOICE
        if row.label == p.none_of_the_above:
            if row.number != len(rows):
                raise Unproven("'None of the above' is not the last row")
            role = OptionRole.NONE_OF_THE_ABOVE
        options.append(OptionView(row.label, role, row.number, row.description, row.current))
    kind = ResponseKind.FREE_TEXT if notes_open else ResponseKind.SINGLE_SELECT
    question = QuestionView(asked(r, paragraphs, rows), kind, tuple(options))
    prompt = PromptView(
        InteractionKind.QUESTIONNAIRE,
        StepKind.FREE_TEXT if notes_open else StepKind.SINGLE_SELECT,
        (question,),
        Region(top=top, bottom=last + 1, left=0, right=r.grid.cols),
        step_index=index,
        step_total=total,
    )
    return Observation(State.QUESTIONNAIRE, p.id, prompt)


def _asked_rows(r: Reader, end: int) -> tuple[int, list[range]]:
    """The question header's row, and the runs of the question's rows under it that end at
    row `end`: one per paragraph, where the model's text holds a blank line (Codex draws
    it as a blank row). The header's run holds the first paragraph."""
    top = r.run_above(end, "the question header")
    paragraphs = [range(top + 1, end + 1)]
    while not r.p.question_header.fullmatch(r.lines[top].strip()):
        if top < 2 or r.lines[top - 1] or not r.lines[top - 2]:
            raise Unproven(f"row {top} is not this version's question header")
        paragraphs[0] = range(top, paragraphs[0].stop)
        above = top - 2
        top = r.run_above(above, "the question header")
        paragraphs.insert(0, range(top + 1, above + 1))
    if not all(paragraphs):
        raise Unproven(f"a blank row under the question header at row {top}")
    return top, paragraphs


def _fills_notes_row(r: Reader, y: int) -> bool:
    """Whether row `y` is a notes row whose text ends at the notes' last column."""
    if r.lines[y][:4] not in (f"  {r.p.cursor} ", "    "):
        return False
    row = r.grid.row(y)
    end = max((x + cell.width for x, cell in enumerate(row) if cell.char.strip()), default=0)
    return end == r.grid.cols - r.p.notes_margin + 4


def _notes(r: Reader, top: int, end: int) -> DraftView:
    """The notes in rows top..end-1 as a draft (glyph and indent dropped), as the composer's."""
    p, grid = r.p, r.grid
    shown = [cell for y in range(top, end) for cell in grid.row(y)[4:] if cell.char.strip()]
    dim = [cell.dim for cell in shown]
    rows = () if all(dim) else tuple(r.lines[y][4:] for y in range(top, end))
    return DraftView(
        rows=rows,
        width=grid.cols - p.notes_margin,
        pane_rows=grid.rows,
        placeholders=r.placeholders(top, end),
        complete=(all(dim) or not any(dim)) and end - top < p.notes_max_rows,
    )
