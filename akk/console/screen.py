"""A pane's screen as the console draws it: styled runs from AKK's own grid, redacted.

What leaves here is what `status` would let out of the same screen, with colour:
the whole screen is redacted first (`akk.protocol.redaction.redact_screen`, as
the excerpt does), a row redaction changed loses its styling (a masked secret
must not survive as the shape of its style runs), and a screen that asks for
secret input is withheld whole (`asks_for_secret`). The result is bounded to
`MAX_ROWS` x `MAX_COLS` and ready for `json.dumps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from wcwidth import wcwidth

from akk.protocol.redaction import asks_for_secret, redact_screen
from akk.screen.grid import Grid, Style

MAX_ROWS = 500
"""The most rows shown: the bottom ones, where prompts and the composer are."""

MAX_COLS = 500
"""The most columns of a row shown, from its left edge."""

WITHHELD_SECRET_INPUT = "secret_input"
"""The `withheld` reason of a screen that asks a person to type or confirm a secret."""

_DEFAULT = Style()
_FLAGS = tuple(field.name for field in attrs.fields(Style) if field.name not in ("fg", "bg"))

_Row = list[tuple[str, Style]]


def screen_view(
    lines: Sequence[str],
    grid: Grid | None,
    *,
    secret: bool = False,
    seen: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The screen ``lines`` (a snapshot's) shows, styled from ``grid``, for the console
    (``seen``: pieces masked on its earlier drawings, `redact_screen`).

    ``{"rows": [[[text, style], ...], ...], "styles": [{...}, ...], "cols": n,
    "withheld": None}``: each row a list of runs, each run its text and an index
    into ``styles``. A style holds its non-default colours (``fg``, ``bg``: a
    palette name or ``rrggbb``) and its true flags only; index 0 is the default
    style ``{}`` and equal styles share one index. A row keeps the grid's runs
    only while its redacted text is exactly the grid's row; otherwise, and with no
    grid, it is its redacted text in one default run. Trailing blank rows and
    invisible trailing spaces are left out.

    When the screen asks for secret input (or ``secret``: its prompt does, in a question's
    own words) nothing of it is returned:
    ``{"rows": [], "styles": [], "cols": n, "withheld": "secret_input"}``.
    """
    width = grid.cols if grid is not None else max((_columns(line) for line in lines), default=0)
    cols = min(width, MAX_COLS)
    if secret or asks_for_secret(lines):
        return {"rows": [], "styles": [], "cols": cols, "withheld": WITHHELD_SECRET_INPUT}
    rows: list[_Row] = []
    for y, redacted in enumerate(redact_screen(lines, seen).lines):
        if grid is not None and y < grid.rows and redacted == grid.row_text(y):
            rows.append(_styled_row(grid, y))
        else:
            rows.append(_plain_row(redacted))
    while rows and not rows[-1]:
        rows.pop()
    styles: dict[Style, int] = {_DEFAULT: 0}
    shown = [
        [[text, styles.setdefault(style, len(styles))] for text, style in row]
        for row in rows[-MAX_ROWS:]
    ]
    return {
        "rows": shown,
        "styles": [_style_json(style) for style in styles],
        "cols": cols,
        "withheld": None,
    }


def _styled_row(grid: Grid, y: int) -> _Row:
    """Row ``y`` of ``grid`` as runs, cut at `MAX_COLS` (never inside a wide character)."""
    row = grid.row(y)
    stop = min(grid.cols, MAX_COLS)
    if stop < grid.cols and row[stop].continuation:
        stop -= 1  # the wide character left of the cut would lose its second column
    runs: _Row = []
    for run in grid.runs(y):
        if run.left >= stop:
            break
        text = run.text
        if run.right > stop:
            text = "".join(cell.char for cell in row[run.left : stop])
        runs.append((text, run.style))
    while runs and _invisible_tail(runs[-1][1]):
        text, style = runs[-1]
        text = text.rstrip(" ")
        if text:
            runs[-1] = (text, style)
            break
        runs.pop()
    return runs


def _invisible_tail(style: Style) -> bool:
    """Whether a space in ``style`` draws nothing (so trailing ones can go)."""
    return style.bg == "default" and not (style.reverse or style.underline or style.strikethrough)


def _plain_row(text: str) -> _Row:
    """``text`` as one default run, cut to `MAX_COLS` columns."""
    shown = _cut(text, MAX_COLS).rstrip(" ")
    return [(shown, _DEFAULT)] if shown else []


def _style_json(style: Style) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    if style.fg != "default":
        shown["fg"] = style.fg
    if style.bg != "default":
        shown["bg"] = style.bg
    for flag in _FLAGS:
        if getattr(style, flag):
            shown[flag] = True
    return shown


def _columns(text: str) -> int:
    """The cells ``text`` fills on a screen (a wide character fills two)."""
    if text.isascii():
        return len(text)
    return sum(max(wcwidth(char), 0) for char in text)


def _cut(text: str, columns: int) -> str:
    """The longest start of ``text`` that fits in ``columns`` cells."""
    if text.isascii():
        return text[:columns]
    used = 0
    for index, char in enumerate(text):
        used += max(wcwidth(char), 0)
        if used > columns:
            return text[:index]
    return text
