"""The immutable grid of styled cells that every profile reads.

A `Grid` is what a pane showed at one capture: `rows` rows of exactly `cols`
cells each. Columns are true terminal columns: a wide character (CJK, most
emoji) is a `Cell` of width 2 followed by a continuation cell of width 0 whose
`char` is empty, so column arithmetic never depends on the text.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator

import attrs

from akk.screen.region import Region


@attrs.frozen(cache_hash=True)
class Style:
    """Every style attribute of a cell, without its character."""

    fg: str = "default"
    bg: str = "default"
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    blink: bool = False
    reverse: bool = False
    hidden: bool = False
    strikethrough: bool = False


@attrs.frozen(cache_hash=True)
class Cell:
    """One terminal cell: its grapheme, its style and how many columns it spans.

    `char` is the full grapheme exactly as captured, combining marks, variation
    selectors and joiners included (no Unicode normalisation). `width` is 1 for a
    normal cell, 2 for the leading cell of a wide character, 0 for the
    continuation cell right after it (`char` is then "" and the style repeats the
    leading cell's).

    Colours (`fg`, `bg`) are normalised: "default"; one of the sixteen palette
    names "black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"
    and their "bright" forms ("brightred", ...) whether the program chose them by
    SGR 30-37/90-97 or by 256-colour index 0-15; otherwise six lowercase hex
    digits "rrggbb" (256-colour indexes 16-255 use xterm's palette).
    """

    char: str = " "
    fg: str = "default"
    bg: str = "default"
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    blink: bool = False
    reverse: bool = False
    hidden: bool = False
    strikethrough: bool = False
    width: int = 1

    @property
    def wide(self) -> bool:
        """Whether this is the leading cell of a two-column character."""
        return self.width == 2

    @property
    def continuation(self) -> bool:
        """Whether this is the second column of the wide character to its left."""
        return self.width == 0

    @property
    def style(self) -> Style:
        """The style of this cell as one comparable value."""
        return Style(
            fg=self.fg,
            bg=self.bg,
            bold=self.bold,
            dim=self.dim,
            italic=self.italic,
            underline=self.underline,
            blink=self.blink,
            reverse=self.reverse,
            hidden=self.hidden,
            strikethrough=self.strikethrough,
        )


BLANK = Cell()
_style_key = operator.attrgetter(*(field.name for field in attrs.fields(Style)))
"""A cell's style as a tuple in `Style`'s field order."""


@attrs.frozen
class Run:
    """A maximal stretch of one row whose cells share one style."""

    y: int
    left: int
    right: int
    text: str
    style: Style


def _columns(row: tuple[Cell, ...]) -> tuple[int, ...]:
    # A cell with combining marks holds several characters, all in its column; a wide
    # character's continuation cell holds none ("").
    columns: list[int] = []
    for x, cell in enumerate(row):
        columns.extend([x] * len(cell.char))
    return tuple(columns)


@attrs.frozen
class Grid:
    """A captured screen: `rows` rows of `cols` cells, row 0 at the top.

    Every coordinate is (column x, row y), zero-based. Row text drops wide
    continuations, so it reads naturally; use `row_columns` to map a text index
    back to its column.
    """

    cols: int
    rows: int
    _cells: tuple[tuple[Cell, ...], ...] = attrs.field(alias="cells")
    # Row texts and their column maps are derived lazily and memoised (the column map
    # only when asked: most readers need the text alone); the grid itself never changes.
    _texts: dict[int, str] = attrs.field(factory=dict, init=False, eq=False, repr=False, hash=False)
    _columns: dict[int, tuple[int, ...]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False, hash=False
    )

    def __attrs_post_init__(self) -> None:
        if self.cols < 1 or self.rows < 1:
            raise ValueError(
                f"a grid needs at least one row and column, got {self.cols}x{self.rows}"
            )
        if len(self._cells) != self.rows or any(len(row) != self.cols for row in self._cells):
            raise ValueError(
                f"grid cells do not match its size {self.cols}x{self.rows}; "
                "build grids with akk.screen.render()"
            )

    @property
    def full_region(self) -> Region:
        """The region covering the whole grid."""
        return Region(top=0, bottom=self.rows, left=0, right=self.cols)

    def cell(self, x: int, y: int) -> Cell:
        """The cell at column `x`, row `y`; raises IndexError outside the grid."""
        if not (0 <= x < self.cols and 0 <= y < self.rows):
            raise IndexError(f"cell ({x}, {y}) is outside the {self.cols}x{self.rows} grid")
        return self._cells[y][x]

    def row(self, y: int) -> tuple[Cell, ...]:
        """All `cols` cells of row `y`; raises IndexError outside the grid."""
        if not 0 <= y < self.rows:
            raise IndexError(f"row {y} is outside the {self.cols}x{self.rows} grid")
        return self._cells[y]

    def row_text(self, y: int) -> str:
        """The text of row `y`, trailing spaces kept, wide continuations dropped."""
        text = self._texts.get(y)
        if text is None:
            # A continuation cell's char is "", so a plain join drops it.
            text = self._texts[y] = "".join([cell.char for cell in self.row(y)])
        return text

    def row_columns(self, y: int) -> tuple[int, ...]:
        """For each index of `row_text(y)`, the column of the cell holding that character."""
        columns = self._columns.get(y)
        if columns is None:
            columns = self._columns[y] = _columns(self.row(y))
        return columns

    def lines(self) -> tuple[str, ...]:
        """The text of every row, top to bottom."""
        return tuple(self.row_text(y) for y in range(self.rows))

    def rows_bottom_up(self, region: Region | None = None) -> Iterator[int]:
        """Row indexes from the bottom of `region` (default: the whole grid) to its top."""
        area = self.full_region if region is None else region
        return iter(range(min(area.bottom, self.rows) - 1, area.top - 1, -1))

    def region_cells(self, region: Region) -> tuple[tuple[Cell, ...], ...]:
        """The cells of `region`, row by row; raises ValueError if it leaves the grid."""
        self._check(region)
        return tuple(
            row[region.left : region.right] for row in self._cells[region.top : region.bottom]
        )

    def runs(self, y: int) -> tuple[Run, ...]:
        """Row `y` split into maximal runs of cells that share one style, left to right."""
        row = self.row(y)
        result: list[Run] = []
        left = 0
        # Compared as plain tuples, made in C: a Style per cell would cost a screen 5,000 objects.
        style = _style_key(row[0])
        chars = [row[0].char]
        for x in range(1, self.cols):
            cell = row[x]
            cell_style = _style_key(cell)
            if cell_style != style:
                result.append(Run(y=y, left=left, right=x, text="".join(chars),
                                  style=Style(*style)))  # fmt: skip
                left, style, chars = x, cell_style, []
            chars.append(cell.char)
        result.append(Run(y=y, left=left, right=self.cols, text="".join(chars),
                          style=Style(*style)))  # fmt: skip
        return tuple(result)

    def _check(self, region: Region) -> None:
        if not region.fits(self.cols, self.rows):
            raise ValueError(
                f"{region!r} leaves the {self.cols}x{self.rows} grid; "
                "derive regions from this grid's own rows and columns"
            )
