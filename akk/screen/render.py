"""Render one `tmux capture-pane -p -e` capture into a `Grid` with pyte.

tmux has already composited the pane (alternate screen, scrolling, cursor
motion), so a capture is only text, SGR style changes and line ends. Each
captured line becomes one screen row; rows are joined with "\\r\\n" so pyte never
depends on LNM, and the SGR state carries across rows exactly as tmux assumes
(tmux emits attributes only where they change, not at every line start).

pyte 0.8.2 is extended here in three deliberate ways:

- SGR is parsed by this module, because pyte ignores dim (2), hidden (8) and
  colon sub-parameters ("4:3", "38:2::r:g:b", which tmux emits), and would
  draw the tail of such a sequence as text.
- `draw` keeps the exact grapheme (combining marks, variation selectors and
  zero-width joiners join the cell to their left, never a wide continuation;
  no NFC normalisation), writes interned `Cell` values directly, and refuses a
  line wider than the pane instead of wrapping it into the next row.
- Plain text and SGR take a regex fast path; anything else still goes through
  pyte's own parser.
"""

from __future__ import annotations

import functools
import re
from itertools import repeat
from typing import Any, NamedTuple, NoReturn, cast

import attrs
import pyte
import pyte.graphics
import pyte.modes
from wcwidth import wcwidth

from akk.screen.grid import Cell, Grid


class CaptureMismatch(ValueError):
    """The capture does not fit the pane size it was rendered at."""


class _Pen(NamedTuple):
    # Field names match pyte.screens.Char so pyte's own methods can `_replace`
    # on it; `dim` and `hidden` are the attributes pyte lacks.
    data: str = " "
    fg: str = "default"
    bg: str = "default"
    bold: bool = False
    italics: bool = False
    underscore: bool = False
    strikethrough: bool = False
    reverse: bool = False
    blink: bool = False
    dim: bool = False
    hidden: bool = False


_ZWJ = "\u200d"
_BLANK_PEN = _Pen()
_REVERSED_BLANK_PEN = _Pen(reverse=True)
_PALETTE = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
_SGR_FLAGS: dict[int, tuple[tuple[str, bool], ...]] = {
    1: (("bold", True),),
    2: (("dim", True),),
    3: (("italics", True),),
    4: (("underscore", True),),
    5: (("blink", True),),
    6: (("blink", True),),
    7: (("reverse", True),),
    8: (("hidden", True),),
    9: (("strikethrough", True),),
    21: (("underscore", True),),
    22: (("bold", False), ("dim", False)),
    23: (("italics", False),),
    24: (("underscore", False),),
    25: (("blink", False),),
    27: (("reverse", False),),
    28: (("hidden", False),),
    29: (("strikethrough", False),),
}
_SGR_CACHE_LIMIT = 4096
_sgr_cache: dict[tuple[_Pen, str], _Pen] = {}


def _int(text: str) -> int:
    return min(int(text), 9999) if text.isdigit() else 0


def _indexed_colour(index: int) -> str | None:
    if index < 8:
        return _PALETTE[index]
    if index < 16:
        return "bright" + _PALETTE[index - 8]
    if index < 256:
        return str(pyte.graphics.FG_BG_256[index])
    return None


def _rgb(red: int, green: int, blue: int) -> str:
    return f"{min(red, 255):02x}{min(green, 255):02x}{min(blue, 255):02x}"


def _extended_colour(head: list[str], fields: list[str], index: int) -> tuple[str | None, int]:
    """Parse the colour after 38/48/58; return it and the index of the next field."""
    if len(head) > 1:
        # Colon form, one field: "38:5:N", "38:2::R:G:B" or "38:2:R:G:B".
        kind = _int(head[1])
        if kind == 5 and len(head) >= 3:
            return _indexed_colour(_int(head[2])), index
        if kind == 2 and len(head) >= 5:
            red, green, blue = (_int(part) for part in head[-3:])
            return _rgb(red, green, blue), index
        return None, index
    # Semicolon form spans fields: "38;5;N" or "38;2;R;G;B".
    kind = _int(fields[index]) if index < len(fields) else 0
    if kind == 5 and index + 1 < len(fields):
        return _indexed_colour(_int(fields[index + 1])), index + 2
    if kind == 2 and index + 3 < len(fields):
        red, green, blue = (_int(part) for part in fields[index + 1 : index + 4])
        return _rgb(red, green, blue), index + 4
    return None, len(fields)


def _next_pen(pen: _Pen, params: str, blank: _Pen) -> _Pen:
    """Apply one SGR parameter string (what sits between "ESC [" and "m") to `pen`."""
    changes: dict[str, Any] = {}
    fields = params.split(";")
    index = 0
    while index < len(fields):
        head = fields[index].split(":")
        index += 1
        code = _int(head[0])
        if code == 0:
            changes = dict(blank._asdict())
        elif code == 4 and len(head) > 1:
            # "4:0" ends underlining; "4:1".."4:5" are underline styles.
            changes["underscore"] = _int(head[1]) != 0
        elif code in _SGR_FLAGS:
            changes.update(_SGR_FLAGS[code])
        elif 30 <= code <= 37:
            changes["fg"] = _PALETTE[code - 30]
        elif 40 <= code <= 47:
            changes["bg"] = _PALETTE[code - 40]
        elif 90 <= code <= 97:
            changes["fg"] = "bright" + _PALETTE[code - 90]
        elif 100 <= code <= 107:
            changes["bg"] = "bright" + _PALETTE[code - 100]
        elif code == 39:
            changes["fg"] = "default"
        elif code == 49:
            changes["bg"] = "default"
        elif code in (38, 48, 58):
            colour, index = _extended_colour(head, fields, index)
            # 58 is the underline colour: consumed so its numbers are not read
            # as attributes, but not kept (no profile needs it).
            if colour is not None and code != 58:
                changes["fg" if code == 38 else "bg"] = colour
        # Anything else (overline, fonts, ...) does not change a Cell.
    return pen._replace(**changes)._replace(data=" ")


_SGR = re.compile(r"\x1b\[([0-9:;]*)m")


def _after_sgr_run(pen: _Pen, run: str, blank: _Pen) -> _Pen:
    """Apply a run of consecutive SGR sequences (as captured) to `pen`.

    Memoised for the ordinary blank pen, the only one a tmux capture resets to.
    """
    key = (pen, run)
    cached = _sgr_cache.get(key) if blank is _BLANK_PEN else None
    if cached is None:
        cached = pen
        for params in _SGR.findall(run):
            cached = _next_pen(cached, params, blank)
        if blank is _BLANK_PEN:
            if len(_sgr_cache) >= _SGR_CACHE_LIMIT:
                _sgr_cache.clear()
            _sgr_cache[key] = cached
    return cached


# Characters known to take exactly one column; a run made only of them takes
# the fast path in `draw`. Grows as new characters are seen, up to a cap.
_NARROW = set(map(chr, range(0x20, 0x7F)))
_NARROW_LIMIT = 65536


@functools.cache
def _width(char: str) -> int:
    width = int(wcwidth(char))
    if width == 1 and len(_NARROW) < _NARROW_LIMIT:
        _NARROW.add(char)
    return width


class _PenCells(dict[str, Cell]):
    """The interned cells of one pen, keyed by grapheme; filled on first use."""

    def __init__(self, pen: _Pen, interner: _CellInterner) -> None:
        super().__init__()
        self._pen = pen
        self._interner = interner

    def __missing__(self, char: str) -> Cell:
        pen = self._pen
        cell = Cell(
            char=char,
            fg=pen.fg,
            bg=pen.bg,
            bold=pen.bold,
            dim=pen.dim,
            italic=pen.italics,
            underline=pen.underscore,
            blink=pen.blink,
            reverse=pen.reverse,
            hidden=pen.hidden,
            strikethrough=pen.strikethrough,
            width=0 if char == "" else (2 if _width(char) == 2 else 1),
        )
        self[char] = cell
        self._interner.size += 1
        return cell


class _CellInterner:
    """Shares Cell values across renders; forgets everything past `limit` cells."""

    def __init__(self, limit: int) -> None:
        self._tables: dict[_Pen, _PenCells] = {}
        self._limit = limit
        self.size = 0

    def table(self, pen: _Pen) -> _PenCells:
        table = self._tables.get(pen)
        if table is None:
            if self.size >= self._limit:
                self._tables.clear()
                self.size = 0
            table = self._tables[pen] = _PenCells(pen, self)
        return table


_interner = _CellInterner(limit=100_000)


class _CaptureScreen(pyte.Screen):
    """A pyte screen whose cursor pen is a `_Pen` and whose buffer holds `Cell`s."""

    def __init__(self, columns: int, lines: int) -> None:
        self._table_pen: object = None
        self._table = _interner.table(_BLANK_PEN)
        # Per row, the column up to which it has been written; a write left of
        # it may split a wide character (tmux captures never do that).
        self._extent: dict[int, int] = {}
        # Set right after a zero-width joiner: the next character extends the
        # same grapheme (an emoji ZWJ sequence is one cell in tmux).
        self._joining = False
        super().__init__(columns, lines)

    @property
    def default_char(self) -> _Pen:  # type: ignore[override]  # a superset of pyte's Char
        return _REVERSED_BLANK_PEN if pyte.modes.DECSCNM in self.mode else _BLANK_PEN

    @property
    def pen(self) -> _Pen:
        """The cursor's current pen."""
        # Always a _Pen: only default_char and _next_pen ever install one.
        return cast(_Pen, self.cursor.attrs)

    def reset(self) -> None:
        """Reset as pyte does, with a `_Pen` as the cursor's pen."""
        super().reset()
        self.cursor.attrs = self.default_char  # type: ignore[assignment]

    def apply_sgr_run(self, run: str) -> None:
        """Apply one or more consecutive SGR sequences to the cursor pen."""
        self.cursor.attrs = _after_sgr_run(self.pen, run, self.default_char)  # type: ignore[assignment]

    def select_graphic_rendition(self, *attrs: int, private: bool = False) -> None:
        """Handle an SGR that reached pyte's own parser (the slow path)."""
        if not private:
            pen = _next_pen(self.pen, ";".join(map(str, attrs)), self.default_char)
            self.cursor.attrs = pen  # type: ignore[assignment]

    def draw(self, data: str) -> None:
        """Write `data` at the cursor; raise CaptureMismatch past the last column."""
        y, x = self.cursor.y, self.cursor.x
        # pyte types its buffer as holding Chars; this screen stores Cells in it.
        line = cast("dict[int, object]", self.buffer[y])
        pen = self.cursor.attrs
        if pen is not self._table_pen:
            self._table_pen, self._table = pen, _interner.table(self.pen)
        cells = self._table
        fresh = x >= self._extent.get(y, 0)
        if not self._joining and _NARROW.issuperset(data):
            end = x + len(data)
            if end > self.columns:
                self._overflow()
            if not fresh:
                self._split_wide(line, x, end)
            line.update(zip(range(x, end), map(cells.__getitem__, data), strict=True))
        else:
            for char in data:
                width = _width(char)
                if width == 0 or (width > 0 and self._joining):
                    joined = self._combine(line, x, char)
                    if joined or width == 0:
                        self._joining = joined and char == _ZWJ
                        continue
                if width > 0:
                    self._joining = False
                    if x + width > self.columns:
                        self._overflow()
                    if not fresh:
                        self._split_wide(line, x, x + width)
                    line[x] = cells[char]
                    if width == 2:
                        line[x + 1] = cells[""]
                    x += width
                # A negative width is a control character: it occupies no cell.
            end = x
        self.cursor.x = end
        if end > self._extent.get(y, 0):
            self._extent[y] = end

    def _overflow(self) -> NoReturn:
        raise CaptureMismatch(
            f"captured row {self.cursor.y} is wider than {self.columns} columns; "
            "the pane was resized between reading its size and capturing it — "
            "read the size again and recapture"
        )

    def _split_wide(self, line: dict[int, object], start: int, end: int) -> None:
        # Overwriting half of a wide character blanks its other half, as a
        # terminal does; tmux captures never do this, pyte fallbacks might.
        first, last = line.get(start), line.get(end - 1)
        if isinstance(first, Cell) and first.continuation and start > 0:
            lead = line.get(start - 1)
            if isinstance(lead, Cell):
                line[start - 1] = attrs.evolve(lead, char=" ", width=1)
        if isinstance(last, Cell) and last.wide and end < self.columns:
            line[end] = attrs.evolve(last, char=" ", width=1)

    def _combine(self, line: dict[int, object], x: int, mark: str) -> bool:
        # A zero-width character, or any character right after a zero-width
        # joiner, joins the grapheme to its left (skipping a wide continuation)
        # as tmux does; at column 0 there is nothing to join.
        target = x - 1
        cell = line.get(target)
        if isinstance(cell, Cell) and cell.continuation:
            target -= 1
            cell = line.get(target)
        if target < 0 or not isinstance(cell, Cell):
            return False
        line[target] = attrs.evolve(cell, char=cell.char + mark)
        return True


# One token per match: a run of SGR sequences, the row separator, a run of
# printable text, or any other single character (left to pyte's parser).
_TOKEN = re.compile(r"((?:\x1b\[[0-9:;]*m)+)|(\r\n)|([^\x00-\x1f\x7f-\x9f]+)|(.)", re.DOTALL)
_SGR_RUN, _ROW_END, _TEXT, _OTHER = 1, 2, 3, 4


class _CaptureStream(pyte.Stream):
    """A pyte stream with a fast path for text, SGR and row ends."""

    def __init__(self, screen: _CaptureScreen) -> None:
        super().__init__(screen)
        self._screen = screen

    def feed(self, data: str) -> None:
        """Consume `data`; text, SGR and row ends go straight to the screen, the rest to pyte."""
        screen = self._screen
        for token in _TOKEN.finditer(data):
            kind = token.lastindex
            # Inside a sequence pyte's parser has started, pyte gets every byte.
            if kind == _OTHER or not self._taking_plain_text:
                super().feed(token.group())
            elif kind == _TEXT:
                screen.draw(token.group())
            elif kind == _SGR_RUN:
                screen.apply_sgr_run(token.group())
            else:
                screen.carriage_return()
                screen.linefeed()


def unstyled(capture: str) -> str:
    """``capture``'s text without its SGR sequences: what its rows read, as a person sees
    them (a style change between two characters does not part them)."""
    return _SGR.sub("", capture)


def _cell_of(value: object) -> Cell:
    if isinstance(value, Cell):
        return value
    # A pen that pyte itself wrote (erase and insert operations).
    pen = cast(_Pen, value)
    return _interner.table(pen._replace(data=" "))[pen.data]


def render(capture: str, cols: int, rows: int) -> Grid:
    """Render the exact output of `tmux capture-pane -p -e` for a `cols` x `rows` pane.

    Raises CaptureMismatch when the capture has more lines than `rows` or a line
    wider than `cols` (the pane changed size around the capture). A capture with
    fewer lines leaves the remaining rows blank.
    """
    if cols < 1 or rows < 1:
        raise ValueError(f"pane size must be at least 1x1, got {cols}x{rows}")
    lines = capture.split("\n")
    if lines[-1] == "":
        # tmux ends every line, the last one included, with "\n".
        lines.pop()
    if len(lines) > rows:
        raise CaptureMismatch(
            f"capture has {len(lines)} lines but the pane has {rows} rows; "
            "read the pane size again and recapture"
        )
    screen = _CaptureScreen(cols, rows)
    _CaptureStream(screen).feed("\r\n".join(lines))
    blank = _cell_of(screen.default_char)
    blank_row = (blank,) * cols
    grid_rows = []
    for y in range(rows):
        line = cast("dict[int, object] | None", screen.buffer.get(y))
        if not line:
            grid_rows.append(blank_row)
            continue
        row = tuple(map(line.get, range(cols), repeat(blank)))
        if set(map(type, row)) == {Cell}:
            grid_rows.append(cast("tuple[Cell, ...]", row))
        else:
            grid_rows.append(tuple(map(_cell_of, row)))
    return Grid(cols=cols, rows=rows, cells=tuple(grid_rows))
