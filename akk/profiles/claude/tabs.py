"""The frame a Claude Code questionnaire and its review share: the top rule and the tab row.

AskUserQuestion draws a full-width rule and under it one tab per question
(``☐`` open, ``☒`` answered); a row framed by arrows ends with the Submit tab
(``←  ☐ Color  ✔ Submit  →``). The current tab has the highlight background.
The questionnaire and the review (the Submit tab) are both read from their tab
row down.

Where the tabs do not fit the pane's width on one row (four questions with
12-character headers at 60 columns, on the review), Claude gives each tab an
equal cell beginning one column left of its glyph and wraps each header inside
its cell: the row under the glyphs holds each header's rest at its cell's first
column (``☒ Deploy`` over ``st…``, ``✔`` over ``Submit``). Only such a row is
taken, and only when a header goes on in it.
"""

from __future__ import annotations

import re

from wcwidth import wcswidth

from akk.profiles.claude.reader import Reader
from akk.profiles.observation import Unproven


def question_frame(r: Reader, start: int) -> tuple[int, tuple[str, ...], int, int]:
    """Top rule above `start`, the tabs under it, the current tab index and the first row
    of the body under the frame's blank row."""
    top = r.top_rule(start, r.p.questionnaire.rule_fg)
    if top + 2 > start:
        raise Unproven("questionnaire frame truncated")
    tabs, current, rows = _tab_row(r, top + 1)
    blank = top + 1 + rows
    if blank > start:
        raise Unproven("questionnaire frame truncated")
    r.expect_blank(blank, "under the tab row")
    return top, tabs, current, blank + 1


def _tab_row(r: Reader, y: int) -> tuple[tuple[str, ...], int, int]:
    """The tab headers of row `y` (and the row under it, where they wrap), the index of the
    current (highlighted) tab and how many rows the tabs take."""
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
    # Only an arrowed row that fills the pane's width had tabs too wide for it.
    filled = inner_start and columns[len(text)] == r.grid.cols - 1
    rests = _rests(r, y, [columns[at] for at in glyphs]) if filled else [""] * len(glyphs)
    tabs: list[str] = []
    current: list[int] = []
    for index, at in enumerate(glyphs):
        end = glyphs[index + 1] if index + 1 < len(glyphs) else len(text)
        name = " ".join(part for part in (text[at + 1 : end].strip(), rests[index]) if part)
        if text[at + 1 : at + 2] != " " or not name:
            raise Unproven(f"malformed tab in row {y}")
        tabs.append(name)
        if r.cells[y][columns[at]].bg == shape.tab_bg:
            current.append(index)
    if len(current) != 1:
        raise Unproven(f"tab row {y} has {len(current)} current tabs")
    if inner_start and tabs[-1] != shape.submit_tab:
        raise Unproven(f"tab row {y} does not end with the Submit tab")
    return tuple(tabs), current[0], 2 if any(rests) else 1


def _rests(r: Reader, above: int, glyphs: list[int]) -> list[str]:
    """The rest of each tab's header on the row under row `above`, whose glyphs stand at
    columns `glyphs`: a run of text at each tab's cell's first column (one left of its
    glyph), inside the cell and on its glyph's background, or nothing. All empty unless
    that row is such a row."""
    y = above + 1
    none = [""] * len(glyphs)
    if y >= r.grid.rows or r.blank(y):
        return none
    text = r.texts[y].rstrip()
    columns = r.grid.row_columns(y)
    runs = [(columns[m.start()], m.group()) for m in re.finditer(r"\S+(?: \S+)*", text)]
    starts = [glyph - 1 for glyph in glyphs]
    ends = [*starts[1:], r.grid.cols]
    rests = list(none)
    for at, run in runs:
        if at not in starts:
            return none
        index = starts.index(at)
        end = at + wcswidth(run)
        background = r.cells[above][glyphs[index]].bg
        if rests[index] or end > ends[index] or any(c.bg != background for c in r.cells[y][at:end]):
            return none
        rests[index] = run
    return rests
