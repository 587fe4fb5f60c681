"""Claude Code's questionnaire (AskUserQuestion): one question of its tabs, and its open editor.

What the pinned versions draw, bottom-up: footer ``Enter to select · …``, a
``Chat about this`` row under a rule, numbered options (``[ ]`` boxes for
multi-select) with descriptions, the automatic ``Type something.`` row, the
question (a longer one under a dim ``│`` gutter), a tab row and a full-width
rule on top. With the cursor on ``Type something.`` that row is an open
editor: the typed text in place of the label, soft-wrapped rows under its first
character (`ClaudeProfile.editor_matches`). A multi-select question stays a
multi-select step there (Enter would only tick or untick the typed text). A
question, label or description longer than the row wraps between words at the
pane's edge, its further rows at its first column (a description's in the
muted colour); each such row must be a wrap Claude could have made there
(`akk.profiles.claude.menu.prove_wrap`: a break that may fall inside a word
cannot be read back, save a word of CJK text cut at a full row, which joins with
nothing: `akk.profiles.wrap`). Claude draws no variation selector
(``❤️`` shows ``❤``), so a question holding a character that takes one (or the
U+FFFD Claude draws for a zero-width space) is refused.
"""

from __future__ import annotations

import re

import attrs

from akk.profiles.claude.menu import (
    MenuShape,
    Row,
    fits_above,
    menu_row,
    menu_rows,
    option_view,
    prove_cursor,
    prove_numbers,
    prove_wrap,
    prove_wraps,
    wrap_joiner,
)
from akk.profiles.claude.reader import Reader
from akk.profiles.claude.tabs import question_frame
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
from akk.profiles.readback import prove_readable, unreadable
from akk.screen.region import Region

_UNREADABLE = unreadable("\ufffd")
"""What Claude's questions cannot hold (`akk.profiles.readback`), and U+FFFD, which Claude
shows for a zero-width space or a soft hyphen."""


@attrs.frozen
class QuestionnaireShape:
    """AskUserQuestion: the tab row, the question, its options and the automatic rows."""

    menu: MenuShape = attrs.field(default=MenuShape(cursor_col=0, number_col=2))
    rule_fg: str = "949494"
    footer_prefix: str = "Enter to select · "
    footer_suffix: str = " · Esc to cancel"  # the footer whole, however it wrapped
    tab_bg: str = "afd7ff"  # background of the current tab
    tab_glyphs: str = "☐☒✔"  # open, answered, the Submit tab
    tab_arrows: tuple[str, str] = ("←", "→")
    submit_tab: str = "Submit"
    question_fg: str = "ffffff"  # bold
    # A longer question is drawn under this gutter (dim) in every row, whatever the
    # width (69 characters were drawn without it, 95 with it): its text starts after it.
    question_gutter: str = "│ "
    single_description_indent: int = 5
    multi_description_indent: int = 2
    free_text_single: str = "Type something."
    free_text_multi: str = "Type something"
    # The open editor wraps its text at the pane width less its label column less
    # this (the text input keeps one column for its cursor, as the composer does).
    editor_wrap_margin: int = 1
    multi_submit: str = "Submit"
    multi_submit_indent: int = 5
    chat: str = "Chat about this"
    unchecked: str = "[ ] "
    checked: str = "[✔] "
    review_title: str = "Review your answers"
    review_prompt: str | None = "Ready to submit your answers?"  # 2.1.328 drops this row
    review_submit: str = "Submit answers"
    review_cancel: str = "Cancel"
    review_question_mark: str = "●"
    review_answer_mark: str = "→"
    # Every pinned version draws a question without its variation selectors ("❤️ Heart"
    # shows as "❤ Heart", "⌚︎" as "⌚") and U+FFFD for a zero-width space or a soft
    # hyphen: text holding a character that may stand for another cannot be read back
    # exactly, so such a question is refused.
    unreadable: re.Pattern[str] = _UNREADABLE


def read(r: Reader, footer: int, last: int | None = None) -> Observation:
    """The questionnaire whose footer starts at row `footer` and ends at row `last` (the
    footer's wrap, in a narrow pane); sets `r.editor` when its editor is open."""
    shape = r.p.questionnaire
    menu = shape.menu
    footer_end = footer if last is None else last
    if footer_end != footer:
        prove_wrap(r, footer, 0, footer_end, 0)
    if not " ".join(r.texts[y].strip() for y in range(footer, footer_end + 1)).endswith(
        shape.footer_suffix
    ):
        raise Unproven(f"the questionnaire footer at row {footer} is cut short")
    r.expect_blank(footer - 1, "above the questionnaire footer")
    chat = menu_row(r, footer - 2, menu, boxes=False)
    if chat is None or chat.label != shape.chat:
        raise Unproven(f"row {footer - 2} is not the '{shape.chat}' row")
    lower = footer - 3
    if lower < 0 or not r.rule(lower, r.p.composer.rule, shape.rule_fg):
        raise Unproven(f"row {lower} is not the rule above '{shape.chat}'")
    top, tabs, tab, y = question_frame(r, lower - 1)
    if tabs[tab] == shape.submit_tab:
        raise Unproven("the Submit tab is current but the review is not shown")
    r.single_prompt(top)
    # A longer question, or one of several lines, is drawn under a dim gutter, every row
    # of it: there a row the one above could have taken more of starts a line the model
    # wrote, and a row of the gutter alone is a blank line of its.
    start = len(shape.question_gutter) if r.question_gutter(y, 0) else 0
    question: list[str] = []
    while y < lower and not r.blank(y):
        if start and r.question_gutter(y, 0) and not r.texts[y][start:].strip():
            if not question or question[-1] == "\n":
                raise Unproven(f"row {y} of the question's gutter holds no line of it")
            question.append("\n")
            y += 1
            continue
        cell = r.cells[y][start]
        if not (cell.bold and cell.fg == shape.question_fg):
            raise Unproven(f"unexpected row {y} in the question")
        if bool(start) != r.question_gutter(y, 0):
            raise Unproven(f"row {y} of the question is drawn apart from its gutter")
        text = r.texts[y][start:].strip()
        if question and question[-1] == "\n":
            text = "\n" + text  # the line after a blank one
        elif question and start and fits_above(r, y - 1, start, y, start):
            text = "\n" + text  # a line of its own, not the row above's wrap
        elif question:
            prove_wrap(r, y - 1, start, y, start)
            text = wrap_joiner(r, y - 1, start, y, start, 0) + text
        question.append(text)
        y += 1
    if question and question[-1] == "\n":
        raise Unproven(f"row {y - 1} of the question's gutter holds no line of it")
    if not question:
        raise Unproven("questionnaire shows no question")
    r.expect_blank(y, "under the question")
    first_option = y + 1
    multi = menu_row(r, first_option, menu, boxes=True) is not None
    end = lower
    submit: Row | None = None
    if multi:
        end = lower - 1
        submit = _multi_submit_row(r, end)
    indent = shape.multi_description_indent if multi else shape.single_description_indent
    rows = menu_rows(r, first_option, end, menu, boxes=multi, description=indent)
    return _observation(r, top, footer_end, tabs, tab, "".join(question), rows, submit, chat)


def _multi_submit_row(r: Reader, y: int) -> Row:
    shape = r.p.questionnaire
    menu = shape.menu
    row = r.cells[y]
    text = r.texts[y]
    cursor = row[menu.cursor_col]
    current = cursor.char == menu.cursor and cursor.fg == menu.highlight_fg
    if not current and cursor.char != " ":
        raise Unproven(f"row {y} is not the multi-select Submit row")
    col = shape.multi_submit_indent
    if (
        text[menu.cursor_col + 1 : col].strip()
        or text[col:].rstrip() != shape.multi_submit
        or not row[col].bold
    ):
        raise Unproven(f"row {y} is not the multi-select Submit row")
    return Row(
        y=y,
        number=None,
        label=shape.multi_submit,
        label_col=col,
        current=current,
        highlighted=current,
    )


def _observation(
    r: Reader,
    top: int,
    bottom: int,
    tabs: tuple[str, ...],
    tab: int,
    question: str,
    rows: list[Row],
    submit: Row | None,
    chat: Row,
) -> Observation:
    shape = r.p.questionnaire
    multi = submit is not None
    if len(rows) < 2:
        raise Unproven("questionnaire shows no options")
    *choices, free = rows
    prove_numbers([*rows, chat])
    free_label = shape.free_text_multi if multi else shape.free_text_single
    _prove_free_text_row(free, free_label)
    # An open editor's rows wrap its own way: `editor_matches` proves them.
    prove_wraps(r, choices)
    written = (text for row in choices for text in (row.label, row.description))
    prove_readable([question, *tabs, *written], shape.unreadable)
    options = [option_view(row, OptionRole.CHOICE) for row in choices]
    options.append(
        OptionView(
            label=free_label,
            role=OptionRole.FREE_TEXT,
            number=free.number,
            current=free.current,
            checked=free.checked,
        )
    )
    if submit is not None:
        options.append(option_view(submit, OptionRole.SUBMIT))
    options.append(option_view(chat, OptionRole.CHAT))
    prove_cursor([*rows, *([submit] if submit is not None else []), chat], exempt=free)
    if multi:
        # A multi-select question's editor is one of its boxes: Enter there ticks or
        # unticks the typed text and answers nothing (lab), so the step stays
        # multi-select wherever the cursor is.
        kind, step = ResponseKind.MULTI_SELECT, StepKind.MULTI_SELECT
    elif free.current:
        kind, step = ResponseKind.FREE_TEXT, StepKind.FREE_TEXT
        r.editor = _open_editor(r, free, chat.y - 1)
    else:
        kind, step = ResponseKind.SINGLE_SELECT, StepKind.SINGLE_SELECT
    view = QuestionView(
        prompt=question, response_kind=kind, options=tuple(options), header=tabs[tab]
    )
    prompt = PromptView(
        kind=InteractionKind.QUESTIONNAIRE,
        step=step,
        questions=(view,),
        region=Region(top=top, bottom=bottom + 1, left=0, right=r.grid.cols),
        step_index=tab + 1,
        step_total=len(tabs),
        tabs=tabs,
    )
    return r.result(State.QUESTIONNAIRE, prompt)


def _open_editor(r: Reader, free: Row, end: int) -> DraftView:
    """The open editor's text: rows free.y..end-1 from the row's label column on.

    It wraps like the composer, its soft-wrapped rows under its first
    character. The empty editor shows its placeholder dim with the cursor on
    the first character: it has no rows (as an empty composer) and is never
    complete, so it matches no text.
    """
    col = free.label_col
    cells = [
        (y - free.y, x - col, r.cells[y][x])
        for y in range(free.y, end)
        for x in range(col, r.grid.cols)
    ]
    cursors = [(row, x) for row, x, cell in cells if cell.reverse]
    placeholder = any(cell.dim and cell.char.strip() for _, _, cell in cells)
    return DraftView(
        rows=() if placeholder else tuple(r.texts[y][col:].rstrip(" ") for y in range(free.y, end)),
        width=r.grid.cols - col - r.p.questionnaire.editor_wrap_margin,
        pane_rows=r.grid.rows,
        cursor=cursors[0] if len(cursors) == 1 else None,
        complete=len(cursors) <= 1 and not placeholder,
    )


def _prove_free_text_row(row: Row, label: str) -> None:
    """The last numbered option must be the automatic free-text row.

    Away from the cursor it reads exactly `label`; under the cursor it is an
    editor showing either its placeholder or the text typed so far (which
    stays inside the region, so it is part of the fingerprint).
    """
    if row.description or (not row.current and row.label != label):
        raise Unproven(f"row {row.y} is not the '{label}' row")
