"""The rows that differ between two screens, and how a report lists them.

Pure: two rendered grids in, the differing rows out, aligned on their text
(a row's text, its place, or its style where the text is equal), and a bounded
listing of them. `compare` sets a new version's capture against the pinned
version's fixture with it.
"""

from __future__ import annotations

import collections
import difflib
from collections.abc import Callable, Sequence

import attrs

from akk.screen.grid import Cell, Grid, Style

DEFAULT_MAX_ROWS = 24
"""Report lines of row differences per screen before the rest is only counted."""


@attrs.frozen
class RowDiff:
    """One row that differs: its text, its place (`moved`) or, text equal, its style."""

    old_y: int | None
    new_y: int | None
    old_text: str | None
    new_text: str | None
    styles: tuple[str, ...] = ()
    """Text equal, style not: ``cols 0-119 '────': fg 808080→8a8a8a``, one per span."""
    moved: bool = False
    """The same text at another row (`old_y` in the fixture, `new_y` in the capture)."""


_STYLE_FIELDS = tuple(field.name for field in attrs.fields(Style))
_BLANK_VISIBLE = ("bg", "reverse", "underline", "strikethrough")
"""What shows on a space cell (its foreground colour or boldness does not)."""


def _cell_style(cell: Cell) -> tuple[object, ...]:
    if cell.char == " ":
        return tuple(getattr(cell, name) for name in _BLANK_VISIBLE)
    return tuple(getattr(cell, name) for name in _STYLE_FIELDS)


def _style_change(old: Cell, new: Cell) -> str:
    names = _BLANK_VISIBLE if old.char == " " else _STYLE_FIELDS
    changes = []
    for name in names:
        before, after = getattr(old, name), getattr(new, name)
        if before == after:
            continue
        if isinstance(before, bool):
            changes.append(f"{'+' if after else '-'}{name}")
        else:
            changes.append(f"{name} {before}→{after}")
    return ", ".join(changes)


def style_spans(old: Sequence[Cell], new: Sequence[Cell], *, limit: int = 4) -> tuple[str, ...]:
    """The column spans of two rows of equal text whose style differs, one line each."""
    spans: list[tuple[int, int, str]] = []
    for x, (a, b) in enumerate(zip(old, new, strict=False)):
        if _cell_style(a) == _cell_style(b):
            continue
        change = _style_change(a, b)
        # Spaces between two cells of one change belong to its span (words of one colour).
        if (
            spans
            and spans[-1][2] == change
            and all(cell.char == " " for cell in new[spans[-1][1] : x])
        ):
            spans[-1] = (spans[-1][0], x + 1, change)
        else:
            spans.append((x, x + 1, change))
    lines = []
    for left, right, change in spans[:limit]:
        text = "".join(cell.char for cell in new[left:right])
        shown = text if len(text) <= 24 else text[:23] + "…"
        where = f"col {left}" if right - left == 1 else f"cols {left}-{right - 1}"
        lines.append(f"{where} {shown!r}: {change}")
    if len(spans) > limit:
        lines.append(f"… {len(spans) - limit} more spans")
    return tuple(lines)


def diff_rows(
    old: Grid, new: Grid, *, same: Callable[[str], str] = lambda text: text
) -> list[RowDiff]:
    """The rows that differ between two screens, aligned on their text, top to bottom.

    Rows whose texts are equal once `same` has rewritten both (e.g. the run's
    temp dir) count as equal and are compared cell by cell for style; at another
    row they are `moved` (a prompt drawn lower down). Of the rest, a row whose
    text shows at another row of the other screen is `moved` too; the others are
    paired in order within each changed stretch, the rest shown on one side.
    Blank rows are never listed: gained or lost, they only move the others.
    """
    a = [old.row_text(y).rstrip() for y in range(old.rows)]
    b = [new.row_text(y).rstrip() for y in range(new.rows)]
    na, nb = [same(t) for t in a], [same(t) for t in b]
    diffs: list[RowDiff] = []
    stretches: list[tuple[list[int], list[int]]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, na, nb, autojunk=False).get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                styles = style_spans(old.row(i), new.row(j))
                shifted = i != j and bool(a[i])
                if styles or shifted:
                    diffs.append(RowDiff(i, j, a[i], b[j], styles, moved=shifted))
        else:
            stretches.append(
                ([i for i in range(i1, i2) if a[i]], [j for j in range(j1, j2) if b[j]])
            )
    arrived: dict[str, collections.deque[int]] = collections.defaultdict(collections.deque)
    for _, news in stretches:
        for j in news:
            arrived[nb[j]].append(j)
    moved: dict[int, int] = {}
    for olds, _ in stretches:
        for i in olds:
            if arrived[na[i]]:
                moved[i] = arrived[na[i]].popleft()
    taken = set(moved.values())
    for i, j in moved.items():
        diffs.append(RowDiff(i, j, a[i], b[j], style_spans(old.row(i), new.row(j)), moved=True))
    for olds, news in stretches:
        left = [i for i in olds if i not in moved]
        right = [j for j in news if j not in taken]
        for k in range(max(len(left), len(right))):
            i_, j_ = (left[k] if k < len(left) else None), (right[k] if k < len(right) else None)
            diffs.append(
                RowDiff(i_, j_, None if i_ is None else a[i_], None if j_ is None else b[j_])
            )
    return sorted(diffs, key=lambda d: d.old_y if d.old_y is not None else d.new_y or 0)


def format_row_diffs(
    diffs: Sequence[RowDiff], old_name: str, new_name: str, *, max_lines: int = DEFAULT_MAX_ROWS
) -> list[str]:
    """The differing rows, at most `max_lines` lines; the rest only counted.

    A changed row shows the fixture's row above the capture's; a run of rows
    moved by one offset is one line; a style difference lists its column spans.
    """
    width = max(len(old_name), len(new_name), len("style"), len("moved"))
    lines: list[str] = []
    shown = 0
    while shown < len(diffs):
        diff = diffs[shown]
        run = 1
        if diff.moved and not diff.styles:
            by = offset(diff)
            while (
                shown + run < len(diffs)
                and diffs[shown + run].moved
                and not diffs[shown + run].styles
                and offset(diffs[shown + run]) == by
            ):
                run += 1
            block = _moved(diffs[shown : shown + run], width)
        elif diff.styles:
            where = f"{diff.old_y}→{diff.new_y}" if diff.moved else f"{diff.new_y}"
            label = "moved" if diff.moved else "style"
            block = [
                f"{where:>3} {label:<{width}} │ {diff.new_text}",
                *(f"{'':>3} {'':<{width}} │   {span}" for span in diff.styles),
            ]
        else:
            block = [
                _side(diff.old_y, old_name, diff.old_text, width),
                _side(diff.new_y, new_name, diff.new_text, width),
            ]
        if len(lines) + len(block) > max_lines:
            break
        lines += block
        shown += run
    if shown < len(diffs):
        lines.append(f"… {len(diffs) - shown} more differing rows")
    return lines


def offset(diff: RowDiff) -> int:
    """How many rows a moved row went down (negative: up)."""
    assert diff.old_y is not None and diff.new_y is not None
    return diff.new_y - diff.old_y


def _moved(run: Sequence[RowDiff], width: int) -> list[str]:
    first, last = run[0], run[-1]
    rows = offset(first)
    way = f"{abs(rows)} row{'s' if abs(rows) > 1 else ''} {'down' if rows > 0 else 'up'}"
    span = f"rows {first.old_y}-{last.old_y}" if len(run) > 1 else f"row {first.old_y}"
    now = f"{first.new_y}-{last.new_y}" if len(run) > 1 else f"{first.new_y}"
    texts = [clip(first.new_text)] + ([clip(last.new_text)] if len(run) > 1 else [])
    return [
        f"{first.old_y:>3} {'moved':<{width}} │ {span} ({len(run)} with text) are now at "
        f"{now} ({way}): {' … '.join(texts)}"
    ]


def clip(text: str | None, limit: int = 40) -> str:
    """`text` stripped, cut to `limit` characters and quoted, for one line of a listing."""
    text = (text or "").strip()
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _side(y: int | None, name: str, text: str | None, width: int) -> str:
    if y is None:
        return f"{'-':>3} {name:<{width}} │ (no such row)"
    return f"{y:>3} {name:<{width}} │ {text}"
