"""Claude Code's review of a questionnaire's answers (the ``Submit`` tab).

What the pinned versions draw: no footer at all; ``Submit answers`` /
``Cancel`` under ``Ready to submit your answers?`` (2.1.328 drops that row), the
answered questions (``● question`` / ``→ answer``), ``Review your answers``, the
tab row and the rule.
"""

from __future__ import annotations

from akk.profiles.claude.menu import (
    fits_above,
    menu_row,
    menu_rows,
    option_view,
    prove_cursor,
    prove_numbers,
    prove_wraps,
    wrap_joiner,
)
from akk.profiles.claude.reader import Reader
from akk.profiles.claude.tabs import question_frame
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    OptionRole,
    PromptView,
    QuestionView,
    ResponseKind,
    State,
    StepKind,
    Unproven,
)
from akk.screen.region import Region


def read(r: Reader, bottom: int) -> Observation | None:
    """The review whose last menu row is row `bottom`; None where those rows are no review."""
    shape = r.p.questionnaire
    menu = shape.menu
    y = bottom
    while y >= 0 and menu_row(r, y, menu, boxes=False) is not None:
        y -= 1
    if y < 1 or not r.blank(y):
        return None
    rows = menu_rows(r, y + 1, bottom + 1, menu, boxes=False, description=None)
    if [row.label for row in rows] != [shape.review_submit, shape.review_cancel]:
        return None
    prove_wraps(r, rows)
    answers_end = y
    if shape.review_prompt is not None:
        if r.texts[y - 1].rstrip() != shape.review_prompt:
            raise Unproven(f"row {y - 1} is not the review question")
        answers_end = y - 2
        r.expect_blank(answers_end, "above the review question")
    top, tabs, tab, title = question_frame(r, answers_end - 1)
    if tabs[tab] != shape.submit_tab or tab != len(tabs) - 1:
        raise Unproven("review shown but the Submit tab is not current")
    r.single_prompt(top)
    if r.texts[title].rstrip() != shape.review_title or not r.cells[title][0].bold:
        raise Unproven(f"row {title} is not the review title")
    r.expect_blank(title + 1, "under the review title")
    reviewed = _answers(r, title + 2, answers_end)
    prove_numbers(rows)
    options = (option_view(rows[0], OptionRole.SUBMIT), option_view(rows[1], OptionRole.CANCEL))
    prove_cursor(rows, exempt=None)
    view = QuestionView(
        prompt=shape.review_title, response_kind=ResponseKind.CONFIRM, options=options
    )
    prompt = PromptView(
        kind=InteractionKind.CONFIRMATION,
        step=StepKind.REVIEW,
        questions=(view,),
        region=Region(top=top, bottom=bottom + 1, left=0, right=r.grid.cols),
        step_index=tab + 1,
        step_total=len(tabs),
        tabs=tabs,
        reviewed=reviewed,
    )
    return r.result(State.QUESTIONNAIRE, prompt)


def _answers(r: Reader, first: int, last: int) -> tuple[str, ...]:
    """Rows first..last-1 must be ``● question`` / ``→ answer`` pairs (wrapped or not); the
    questions they list, each its rows joined."""
    shape = r.p.questionnaire
    if first >= last:
        raise Unproven("review lists no answers")
    questions: list[str] = []
    in_question = False
    guttered = False  # the question being read is drawn under the gutter
    for y in range(first, last):
        # A long question's rows stand under the gutter one column in: 3 columns.
        shift = 1 + len(shape.question_gutter) if r.question_gutter(y, 1) else 0
        rest = r.texts[y][shift:]
        text = rest.strip()
        start = shift + len(rest) - len(rest.lstrip(" "))
        asked = text.startswith(shape.review_question_mark + " ")
        marked = asked or text.startswith(shape.review_answer_mark + " ")
        if shift and not text and guttered and in_question and not questions[-1].endswith("\n"):
            questions[-1] += "\n"  # a blank line of the question, the gutter alone
            continue
        # A question's further rows start under its text: column 3, under the gutter 5.
        if not marked and (y == first or start < (5 if shift else 3) or not text):
            raise Unproven(f"unexpected row {y} in the review")
        if marked and questions and questions[-1].endswith("\n"):
            raise Unproven(f"row {y - 1} of the review's gutter holds no line of its question")
        # The gutter runs down a question's rows, and never beside an answer.
        if not asked and bool(shift) != (guttered and in_question and not marked):
            raise Unproven(f"row {y} of the review is drawn apart from its gutter")
        if asked:
            questions.append(text.removeprefix(shape.review_question_mark + " "))
            guttered = bool(shift)
        elif not marked and in_question:
            # The question's text starts at this row's column on the row above too; under
            # the gutter a row after a blank one, or one whose first word the row above
            # could have taken, starts a line of the question.
            if questions[-1].endswith("\n") or (shift and fits_above(r, y - 1, start, y, start)):
                questions[-1] += "\n" + text
            else:
                questions[-1] += wrap_joiner(r, y - 1, start, y, start, 0) + text
        in_question = asked or (in_question and not marked)
    return tuple(questions)
