"""Codex's async question picker (0.154.0, 0.155.1): a queued question, opened.

What those versions draw: a queued question sits above the composer
(``• Queued follow-up inputs`` / ``? 1 question`` / ``shift + ← to answer``:
ASYNC_QUESTION, not actionable, read with the composer); its picker replaces the
composer: the heading, the question in the prompt colour, numbered options
ending in ``Other``, and the footer ``enter submit   ctrl + ] skip   alt + ↓
main prompt``. Opened while a turn runs, the agent works on above it.
"""

from __future__ import annotations

import re

import attrs

from akk.profiles.codex.menu import asked, menu
from akk.profiles.codex.reader import Footer, Reader
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


@attrs.frozen
class AsyncShape:
    """How a version shows a queued async question and its picker (0.154.0, 0.155.1)."""

    anchor: str  # the bullet row heading the queued inputs, above the picker too
    queued: re.Pattern[str]  # the queued-question row under the anchor
    queued_hint: str  # the row telling how to open the picker
    footer: Footer  # the picker's footer
    other: str  # the picker's own free-text row


def read(r: Reader, footer: Footer, footer_top: int, last: int) -> Observation:
    """The picker whose footer spans rows footer_top..last."""
    p = r.p
    shape = p.async_question
    assert shape is not None, "only dispatched for versions with an async picker"
    r.blank(footer_top - 1, "above the picker footer")
    menu_top = r.run_above(footer_top - 2, "picker options")
    rows = menu(r, menu_top, footer_top - 1, p.question_menu)
    r.blank(menu_top - 1, "above the picker options")
    prompt_top = r.run_above(menu_top - 2, "the async question")
    prompt_rows = range(prompt_top, menu_top - 1)
    if not all(
        r.indented(row, 2) and r.grid.cell(2, row).fg == p.question_prompt_fg for row in prompt_rows
    ):
        raise Unproven("async question not drawn in the prompt colour")
    r.blank(prompt_top - 1, "above the async question")
    top = prompt_top - 2
    if top < 0 or r.lines[top] != f"• {shape.anchor}" or (top and r.lines[top - 1]):
        raise Unproven("the picker is not under its queued-inputs heading")
    options = []
    for row in rows:
        role = OptionRole.CHOICE
        if row.label == shape.other:
            if row.number != len(rows):
                raise Unproven(f"'{shape.other}' is not the last row")
            role = OptionRole.FREE_TEXT
        options.append(OptionView(row.label, role, row.number, row.description, row.current))
    question = QuestionView(
        asked(r, [prompt_rows], rows),
        ResponseKind.SINGLE_SELECT,
        tuple(options),
    )
    prompt = PromptView(
        InteractionKind.ASYNC_QUESTION,
        StepKind.SINGLE_SELECT,
        (question,),
        Region(top=top, bottom=last + 1, left=0, right=r.grid.cols),
    )
    # Opened while the turn runs, the agent works on above it: an answer steers that turn.
    working = any(p.working_marker in line for line in r.lines[:top])
    return Observation(State.WORKING if working else State.ASYNC_QUESTION, p.id, prompt)
