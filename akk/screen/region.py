"""Rectangular regions of a grid and the generic frame primitives profiles build on.

A `Region` is half-open on both axes, exactly like Python slices: it covers rows
``top <= y < bottom`` and columns ``left <= x < right``. Version-specific anchors
(which glyphs a given client draws where) belong to the profiles, not here; this
module only answers grid-level questions such as "is this row a rule" or "is
this rectangle a closed box".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from akk.screen.grid import Grid

HORIZONTAL = frozenset("─━═╌╍┄┅┈┉")
VERTICAL = frozenset("│┃║╎╏┆┇┊┋")
TOP_LEFT = frozenset("┌┍┎┏╒╓╔╭")
TOP_RIGHT = frozenset("┐┑┒┓╕╖╗╮")
BOTTOM_LEFT = frozenset("└┕┖┗╘╙╚╰")
BOTTOM_RIGHT = frozenset("┘┙┚┛╛╜╝╯")
# A separator row inside a box meets the sides with tees instead of plain verticals.
LEFT_SIDE = VERTICAL | frozenset("├┝┞┟┠┡┢┣╞╟╠")
RIGHT_SIDE = VERTICAL | frozenset("┤┥┦┧┨┩┪┫╡╢╣")


def _non_negative(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"Region.{attribute.name} must be >= 0, got {value}")


@attrs.frozen
class Region:
    """Rows ``top..bottom-1`` and columns ``left..right-1`` of a grid (half-open, never empty)."""

    top: int = attrs.field(validator=_non_negative)
    bottom: int = attrs.field(validator=_non_negative)
    left: int = attrs.field(validator=_non_negative)
    right: int = attrs.field(validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        if self.bottom <= self.top or self.right <= self.left:
            raise ValueError(
                f"empty region {self!r}: need top < bottom and left < right "
                "(bounds are half-open, like slices)"
            )

    @property
    def height(self) -> int:
        """Number of rows covered."""
        return self.bottom - self.top

    @property
    def width(self) -> int:
        """Number of columns covered."""
        return self.right - self.left

    def contains(self, x: int, y: int) -> bool:
        """Whether the cell at column `x`, row `y` lies inside the region."""
        return self.top <= y < self.bottom and self.left <= x < self.right

    def fits(self, cols: int, rows: int) -> bool:
        """Whether the region lies entirely within a grid of the given size."""
        return self.bottom <= rows and self.right <= cols


def is_box_drawing(char: str) -> bool:
    """Whether `char` is a single glyph from the Unicode Box Drawing block (U+2500-U+257F)."""
    return len(char) == 1 and "\u2500" <= char <= "\u257f"


def is_frame_row(
    grid: Grid,
    y: int,
    left: int = 0,
    right: int | None = None,
    glyphs: frozenset[str] | None = None,
) -> bool:
    """Whether every cell of row `y` in columns ``left..right-1`` is a frame glyph.

    With `glyphs` given, every cell must be one of them (for instance `HORIZONTAL`
    for a rule); otherwise any box-drawing glyph counts.
    """
    stop = grid.cols if right is None else right
    if not 0 <= left < stop <= grid.cols:
        return False
    cells = grid.row(y)[left:stop]
    if glyphs is None:
        return all(is_box_drawing(cell.char) for cell in cells)
    return all(cell.char in glyphs for cell in cells)


def is_blank_row(grid: Grid, y: int, left: int = 0, right: int | None = None) -> bool:
    """Whether row `y` holds only spaces in columns ``left..right-1``, whatever their style."""
    stop = grid.cols if right is None else right
    return all(cell.char == " " for cell in grid.row(y)[left:stop])


def is_closed_box(grid: Grid, region: Region) -> bool:
    """Whether the perimeter of `region` is one closed box of frame glyphs.

    Corners must be corner glyphs, top and bottom edges horizontal glyphs, and the
    sides vertical glyphs (tees allowed where an inner separator meets them). The
    region must be at least 2x2 and inside the grid.
    """
    if not region.fits(grid.cols, grid.rows) or region.height < 2 or region.width < 2:
        return False
    top, bottom, left, right = region.top, region.bottom - 1, region.left, region.right - 1
    corners_ok = (
        grid.cell(left, top).char in TOP_LEFT
        and grid.cell(right, top).char in TOP_RIGHT
        and grid.cell(left, bottom).char in BOTTOM_LEFT
        and grid.cell(right, bottom).char in BOTTOM_RIGHT
    )
    if not corners_ok:
        return False
    if right - left > 1 and not (
        is_frame_row(grid, top, left + 1, right, HORIZONTAL)
        and is_frame_row(grid, bottom, left + 1, right, HORIZONTAL)
    ):
        return False
    return all(
        grid.cell(left, y).char in LEFT_SIDE and grid.cell(right, y).char in RIGHT_SIDE
        for y in range(top + 1, bottom)
    )


def box_above(grid: Grid, y: int, left: int) -> Region | None:
    """The closed box whose bottom-left corner is at column `left`, row `y`, or None.

    Meant for bottom-up scans: find a bottom border, then prove the whole frame.
    Follows the bottom edge right to its corner, then both sides up to the top
    corners. Returns None unless every glyph of the perimeter is proven.
    """
    if not (0 <= y < grid.rows and 0 <= left < grid.cols):
        return None
    row = grid.row(y)
    if row[left].char not in BOTTOM_LEFT:
        return None
    right = left + 1
    while right < grid.cols and row[right].char in HORIZONTAL:
        right += 1
    if right >= grid.cols or row[right].char not in BOTTOM_RIGHT:
        return None
    top = y - 1
    while top >= 0 and grid.cell(left, top).char in LEFT_SIDE:
        top -= 1
    if top < 0:
        return None
    region = Region(top=top, bottom=y + 1, left=left, right=right + 1)
    return region if is_closed_box(grid, region) else None
