"""Codex's unanswered-question confirmation: ``Submit with unanswered questions?``.

What the pinned versions draw, bottom-up: the footer ``Press enter to confirm
or esc to go back``, the rows ``Proceed`` and ``Go back`` (their digits only
move the cursor), a blank row, then the bold anchor over ``N unanswered
questions``.
"""

from __future__ import annotations

from akk.profiles.codex.menu import menu
from akk.profiles.codex.reader import Footer, Reader
from akk.profiles.observation import (
    InteractionKind,
    Observation,
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
    """The confirmation whose footer spans rows footer_top..last."""
    p = r.p
    r.blank(footer_top - 1, "above the confirmation footer")
    menu_top = r.run_above(footer_top - 2, "confirmation options")
    rows = menu(r, menu_top, footer_top - 1, p.question_menu)
    r.blank(menu_top - 1, "above the confirmation options")
    top = r.run_above(menu_top - 2, "the confirmation anchor")
    texts = [r.lines[y] for y in range(top, menu_top - 1)]
    if (
        len(texts) != 2
        or texts[0] != f"  {p.unanswered_anchor}"
        or not r.grid.cell(2, top).bold
        or not p.unanswered_count.fullmatch(texts[1].strip())
    ):
        raise Unproven("unexpected rows above the unanswered-question options")
    roles = dict(p.unanswered_roles)
    options = []
    for row in rows:
        role = roles.get(row.label)
        if role is None:
            raise Unproven(f"confirmation option {row.number} has no known meaning")
        options.append(OptionView(row.label, role, row.number, row.description, row.current))
    question = QuestionView(p.unanswered_anchor, ResponseKind.CONFIRM, tuple(options), header=None)
    prompt = PromptView(
        InteractionKind.CONFIRMATION,
        StepKind.CONFIRM,
        (question,),
        Region(top=top, bottom=last + 1, left=0, right=r.grid.cols),
    )
    return Observation(State.QUESTIONNAIRE, p.id, prompt)
