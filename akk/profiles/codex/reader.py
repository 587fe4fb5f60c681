"""One Codex screen under one profile: its right-stripped rows and the checks every shape shares.

A `Reader` lives for a single classification; a `Footer` is how every prompt
ends, and what the skeleton knows it by. The shape modules (composer,
status, permission, question, confirmation, picker) take it and raise
`Unproven` where a row is not of a kind their shape allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
from wcwidth import wcwidth

from akk.profiles.composer import DraftView
from akk.profiles.observation import Unproven
from akk.profiles.wrap import joiner
from akk.screen.grid import Grid

if TYPE_CHECKING:
    from akk.profiles.codex.profile import CodexProfile


@attrs.frozen
class Footer:
    """A prompt footer as its ``|``-separated parts; a narrow pane may wrap it at a separator."""

    parts: tuple[str, ...]

    @property
    def words(self) -> tuple[str, ...]:
        """The footer's words without separators, as compared against the screen."""
        return tuple(word for part in self.parts for word in part.split())


class Reader:
    """One classification: the profile, the grid and its right-stripped row texts."""

    def __init__(self, profile: CodexProfile, grid: Grid) -> None:
        self.p = profile
        self.grid = grid
        self.lines = [line.rstrip() for line in grid.lines()]
        self.notes: DraftView | None = None  # the open notes editor, once a question proved it

    def blank(self, y: int, what: str) -> None:
        """Refuse unless row `y` is a blank row (`what` says where it belongs)."""
        if y < 0 or self.lines[y]:
            raise Unproven(f"expected a blank row {what} (row {y}): unexpected or truncated prompt")

    def run_above(self, y: int, what: str) -> int:
        """The top row of the non-blank run that ends at row `y`."""
        if y < 0 or not self.lines[y]:
            raise Unproven(f"missing {what} (row {y}): truncated prompt")
        while y > 0 and self.lines[y - 1]:
            y -= 1
        return y

    def column(self, y: int, index: int) -> int:
        """The column of character `index` of row `y`'s text (a wide character takes two)."""
        return self.grid.row_columns(y)[index]

    def end(self, y: int) -> int:
        """The column just past row `y`'s last drawn character (0 for a blank row)."""
        line = self.lines[y]
        if not line:
            return 0
        last = self.column(y, len(line) - 1)
        return last + self.grid.cell(last, y).width

    def wrap_joiner(self, above: int, y: int, start: int) -> str:
        """What joins row `y`'s text (from character `start`) to row `above`'s once unwrapped:
        a space, or nothing where the break cut a word of wide characters at a full row
        (`akk.profiles.wrap`). Codex's text rows end `command_margin` short of the edge."""
        lower = self.lines[y][start:]
        room = self.grid.cols - self.p.command_margin - self.end(above)
        full = bool(lower) and wcwidth(lower[0]) > room
        return joiner(self.lines[above], lower, full=full)

    def unwrapped(self, rows: Sequence[int], indent: int) -> str:
        """The text of `rows` (non-empty, each indented by `indent`), each row joined to the
        one above as Codex wrapped it (`wrap_joiner`). Codex's wrap fits a paragraph's lines
        to each other (not greedily), so a line break of the text reads as a wrap."""
        text = self.lines[rows[0]][indent:]
        for y in rows[1:]:
            text += self.wrap_joiner(y - 1, y, indent) + self.lines[y][indent:]
        return text

    def indented(self, y: int, indent: int) -> bool:
        line = self.lines[y]
        return line[:indent] == " " * indent and len(line) > indent and line[indent] != " "

    def placeholders(self, top: int, end: int) -> tuple[str, ...]:
        """The paste placeholders in rows top..end-1: elements in the placeholder colour."""
        p, grid = self.p, self.grid
        found = []
        for y in range(top, end):
            columns = grid.row_columns(y)
            for match in p.typing.any_placeholder().finditer(self.lines[y]):
                cells = [grid.cell(columns[i], y) for i in range(match.start(), match.end())]
                if all(cell.fg == p.placeholder_fg for cell in cells):
                    found.append(match.group())
        return tuple(found)
