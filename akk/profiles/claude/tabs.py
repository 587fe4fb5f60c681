"""The frame a Claude Code questionnaire and its review share: the top rule and the tab row.

AskUserQuestion draws a full-width rule and under it one tab per question
(``☐`` open, ``☒`` answered); a row framed by arrows ends with the Submit tab
(``←  ☐ Color  ✔ Submit  →``). The current tab has the highlight background.
The questionnaire and the review (the Submit tab) are both read from their tab
row down.
"""

from __future__ import annotations

from akk.profiles.claude.reader import Reader
from akk.profiles.observation import Unproven


def question_frame(r: Reader, start: int) -> tuple[int, tuple[str, ...], int]:
    """Top rule above `start`, the tabs under it and the current tab index."""
    top = r.top_rule(start, r.p.questionnaire.rule_fg)
    if top + 2 > start:
        raise Unproven("questionnaire frame truncated")
    tabs, current = _tab_row(r, top + 1)
    r.expect_blank(top + 2, "under the tab row")
    return top, tabs, current


def _tab_row(r: Reader, y: int) -> tuple[tuple[str, ...], int]:
    """The tab headers of row `y` and the index of the current (highlighted) tab."""
    shape = r.p.questionnaire
    text = r.texts[y].rstrip()
    columns = r.grid.row_columns(y)
    left, right = shape.tab_arrows
    inner_start = 0
    if text.startswith(left):
        if not text.endswith(right):
            raise Unproven(f"tab row {y} is cut off")
        inner_start = len(left)
        text = text[: -len(right)]
    glyphs = [i for i in range(inner_start, len(text)) if text[i] in shape.tab_glyphs]
    if not glyphs or text[inner_start : glyphs[0]].strip():
        raise Unproven(f"row {y} is not a tab row")
    tabs: list[str] = []
    current: list[int] = []
    for index, at in enumerate(glyphs):
        end = glyphs[index + 1] if index + 1 < len(glyphs) else len(text)
        name = text[at + 1 : end].strip()
        if text[at + 1 : at + 2] != " " or not name:
            raise Unproven(f"malformed tab in row {y}")
        tabs.append(name)
        if r.cells[y][columns[at]].bg == shape.tab_bg:
            current.append(index)
    if len(current) != 1:
        raise Unproven(f"tab row {y} has {len(current)} current tabs")
    if inner_start and tabs[-1] != shape.submit_tab:
        raise Unproven(f"tab row {y} does not end with the Submit tab")
    return tuple(tabs), current[0]
