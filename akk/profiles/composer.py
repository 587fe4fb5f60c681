"""The composer: what a draft looks like on screen, and whether it is exactly AKK's text.

A profile that proves a composer on screen reads it into a `DraftView`: the
draft's rows as drawn (prompt glyph and continuation indent removed, trailing
blanks stripped), the text width, any paste placeholders, and the client's own
cursor where the capture shows one. The draft is private to the server.

Each version row carries a `Typing` row, pure data: how that client wraps a
draft, when a paste collapses into one placeholder and what it reads, which
texts turn the composer into something else (a slash command, a shell, a
mention popup), and the timing a sender must respect where no screen can prove
it. `draft_matches` renders the expected text the way that client does and
compares the rows, so a soft wrap is never read as a line break, nor the other
way round.

What a screen cannot show, and so is never taken as proven:

- text the screen rule of `akk.text_rule` refuses (whitespace the
  clients trim, control, format, combining or zero-width characters, non-NFC
  text, and the version's `Special` texts such as a shell-mode `!`): the
  clients trim, drop, normalise, hide or act on them, so the rows would be the
  same for a different text;
- a draft whose top or bottom may be scrolled out of the composer;
- what lies behind a paste placeholder: only that one paste of exactly the
  expected size (characters, or line breaks) landed and nothing else.

Residual, by construction of both clients: a space that a soft wrap hides is
drawn exactly like a line break a person types at that very column; and on
Codex, which draws no cursor into the capture, whitespace after the last
character is invisible (both clients trim it on submit).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

import attrs
from wcwidth import wcwidth

from akk.text_rule import Special, TextRefusal, screen_refusal


class TypingMethod(enum.StrEnum):
    """How a sender puts text into the composer."""

    LITERAL = "literal"  # tmux `send-keys -l`: one key event per character, one line only
    PASTE = "paste"  # tmux `paste-buffer -p`: a bracketed paste, any number of lines


class Wrapping(enum.Enum):
    """The line-wrapping algorithm a client applies to its draft."""

    # Claude Code: Bun.wrapAnsi(text, width, {hard: true, trim: false}) per line,
    # then every soft-wrapped row drawn without its leading spaces.
    WRAP_ANSI = "wrap_ansi"
    # Codex: Rust textwrap, first-fit, words split at hyphens between
    # alphanumerics, words wider than a row broken at the width. Its other
    # break opportunities come from Unicode line breaking (UAX #14: after CJK,
    # emoji, `/`, `|`, `!`...), which is not reproduced here: a line that has to
    # wrap is only provable when every character is one whose UAX #14 class
    # breaks nowhere but after a space (`_PLAIN_BREAKS`).
    TEXTWRAP = "textwrap"


class LengthUnit(enum.Enum):
    """What a client counts when it measures a paste."""

    UTF16 = "utf16"  # JavaScript string length (an emoji counts twice)
    CODEPOINTS = "codepoints"  # Rust `chars().count()`


@attrs.frozen
class DraftView:
    """The composer's content as one screen shows it (never projected to controllers).

    `rows` are the draft's rows as drawn, prompt glyph and indent removed and
    trailing blanks stripped; an empty composer has no rows. `width` is the
    text width the client wraps at, `pane_rows` the pane height (Claude's paste
    rule depends on it). `placeholders` are the paste placeholders the client
    drew, in screen order. `cursor` is (row, column) of the cursor the client
    drew into the cells; None where it draws none or the capture lost it (tmux
    trims a cursor cell that ends a row). `complete` is False when the
    rows may not be the whole draft (scrolled, or drawn in a style the profile
    cannot read).
    """

    rows: tuple[str, ...]
    width: int
    pane_rows: int
    placeholders: tuple[str, ...] = ()
    cursor: tuple[int, int] | None = None
    complete: bool = True

    @property
    def empty(self) -> bool:
        return not self.rows


@attrs.frozen(kw_only=True)
class Typing:
    """How one client version takes typed and pasted text (data, one row per version).

    A paste collapses into one placeholder when it is longer than
    `paste_max_length` (in `length_unit`) or, where `paste_max_newlines` is set,
    holds more line breaks than ``min(pane_rows - paste_newline_reserve,
    paste_max_newlines)`` (at least 0). `placeholder_single` and
    `placeholder_multi` are regular expressions for the placeholder of a paste
    without and with line breaks; ``{chars}`` and ``{newlines}`` stand for its
    length and its count of line breaks. `literal_max_length` is the longest
    text `send-keys -l` keeps as typed characters (beyond it both clients take
    the burst for a paste), and `literal_max_bytes`, where set, the most UTF-8
    bytes it may hold: Claude adds each read of typed keys to the text of its
    last drawing, so a line the machine may hand it in two reads goes as a
    bracketed paste, which it takes whole. `viewport` is ``(least, reserve)`` where the
    composer shows at most ``max(least, pane_rows // 2 - reserve)`` rows and
    scrolls the rest away without a mark (None: the client marks scrolling).
    """

    wrapping: Wrapping
    literal_max_length: int
    literal_max_bytes: int | None = None
    paste_max_length: int
    length_unit: LengthUnit
    paste_max_newlines: int | None
    paste_newline_reserve: int = 0
    placeholder_single: str
    placeholder_multi: str
    specials: tuple[Special, ...]  # texts the client acts on instead of typing them
    viewport: tuple[int, int] | None
    # How a collapsed paste reaches the model: a regular expression template,
    # {text} the pasted text; None where it arrives as it is.
    collapsed_delivery: str | None = None
    # How long after the client takes the last typed key (send-keys -l) it still reads an
    # Enter as part of that burst, a newline: counted from the first screen that shows the
    # whole text (no screen shows the window itself). A bracketed paste opens none.
    enter_guard_seconds: float
    settle_seconds: float  # how long a composer must have been drawn before its first key
    evidence: str

    def length(self, text: str) -> int:
        """`text`'s length as this client counts it."""
        if self.length_unit is LengthUnit.UTF16:
            return len(text.encode("utf-16-le", "surrogatepass")) // 2
        return len(text)

    def method_for(self, text: str) -> TypingMethod:
        """LITERAL for one line this client keeps as typed characters, taken in one read;
        PASTE otherwise."""
        if "\n" in text or self.length(text) > self.literal_max_length:
            return TypingMethod.PASTE
        if self.literal_max_bytes is not None and len(text.encode()) > self.literal_max_bytes:
            return TypingMethod.PASTE
        return TypingMethod.LITERAL

    def collapses(self, text: str, pane_rows: int) -> bool:
        """Whether pasting `text` shows one placeholder instead of the text."""
        if self.length(text) > self.paste_max_length:
            return True
        if self.paste_max_newlines is None:
            return False
        limit = max(0, min(pane_rows - self.paste_newline_reserve, self.paste_max_newlines))
        return text.count("\n") > limit

    def placeholder(self, text: str) -> re.Pattern[str]:
        """The placeholder a paste of `text` shows (a full-match pattern)."""
        template = self.placeholder_multi if "\n" in text else self.placeholder_single
        return re.compile(
            template.format(chars=self.length(text), newlines=text.count("\n")), re.ASCII
        )

    def any_placeholder(self) -> re.Pattern[str]:
        """Every placeholder this client draws, whatever its numbers (for finding them)."""
        templates = (self.placeholder_single, self.placeholder_multi)
        return re.compile(
            "|".join(template.format(chars=r"\d+", newlines=r"\d+") for template in templates),
            re.ASCII,
        )

    def delivered(self, text: str, how: TypingMethod, pane_rows: int) -> re.Pattern[str]:
        """What the model receives once `text`, put in `how`, is sent (a full-match pattern)."""
        escaped = re.escape(text)
        wrapper = self.collapsed_delivery
        if wrapper is not None and how is TypingMethod.PASTE and self.collapses(text, pane_rows):
            return re.compile(wrapper.format(text=escaped))
        return re.compile(escaped)

    def visible_rows(self, pane_rows: int) -> int | None:
        """How many draft rows the composer shows before it scrolls unmarked (None: no limit)."""
        if self.viewport is None:
            return None
        least, reserve = self.viewport
        return max(least, pane_rows // 2 - reserve)


def draft_matches(typing: Typing, draft: DraftView, text: str, how: TypingMethod) -> bool:
    """Whether `draft` shows exactly `text` as this client renders it after typing it `how`.

    Pure and deterministic. False whenever the screen cannot prove it: the text
    is not provable on any screen (see the module notes) or holds one of the
    client's specials, LITERAL text holds a line break or is long enough to be read as a
    paste, the text could not be proven in this composer (`draft_refusal`), or the
    draft's rows, placeholders or cursor differ from the client's own rendering
    of `text` by one cell.
    """
    if not draft.complete or screen_refusal(text, typing.specials) is not None:
        return False
    if how is TypingMethod.LITERAL and typing.method_for(text) is not TypingMethod.LITERAL:
        return False
    expected = _expected(typing, text, how, draft.width, draft.pane_rows)
    if isinstance(expected, TextRefusal):
        return False
    if expected is None:
        return _shows_placeholder(typing, draft, text)
    rows, cursor = expected
    if draft.rows != rows or draft.placeholders:
        return False
    return draft.cursor in (None, cursor)


def draft_refusal(
    typing: Typing, text: str, width: int, pane_rows: int, *, shown_rows: int | None = None
) -> TextRefusal | None:
    """Why `text`, typed as this client takes it, could never be proven in a composer `width`
    columns wide in a pane `pane_rows` high; None where `draft_matches` may prove it.
    `shown_rows`: the most rows a box that is not the composer shows before it scrolls
    (Codex's notes), where the composer's own viewport does not say.

    Asked before a key is typed: such a text would be typed, never proven, and left
    in the composer unsent. A text holding one of the client's specials is refused
    here too, whatever rule the caller ran before: the client would act on it (a
    slash command, Codex's ``!`` shell) instead of typing it.
    """
    special = screen_refusal(text, typing.specials)
    if special is not None:
        return special
    how = typing.method_for(text)
    expected = _expected(typing, text, how, width, pane_rows, shown_rows)
    return expected if isinstance(expected, TextRefusal) else None


def _expected(
    typing: Typing,
    text: str,
    how: TypingMethod,
    width: int,
    pane_rows: int,
    shown_rows: int | None = None,
) -> TextRefusal | tuple[tuple[str, ...], tuple[int, int]] | None:
    """The rows and cursor `text` typed `how` is drawn with, None for a paste's placeholder,
    or why no screen of this composer could show it exactly."""
    found = typing.any_placeholder().search(text)
    if found is not None:
        return TextRefusal(
            f"holds {found.group(0)!r}, which this client draws for a paste, so a screen "
            "could not tell the text from a paste",
            "reword it",
        )
    if how is TypingMethod.PASTE and typing.collapses(text, pane_rows):
        return None
    rendered = render(typing.wrapping, text, width)
    if rendered is None:
        return TextRefusal(
            f"has a line wider than the {width} columns it would be typed into, which this "
            "client may break inside CJK, emoji or other such text, where AKK does not model "
            "its breaks",
            f"break it into lines of at most {width} columns, or type it at the pane yourself",
        )
    limit = typing.visible_rows(pane_rows) if shown_rows is None else shown_rows
    if limit is not None and len(rendered[0]) >= limit:
        return TextRefusal(
            f"fills {len(rendered[0])} rows of the box it would be typed into, which shows at "
            f"most {limit} before it scrolls earlier ones away without a mark",
            "shorten it, or type it at the pane yourself",
        )
    return rendered


def _shows_placeholder(typing: Typing, draft: DraftView, text: str) -> bool:
    """Exactly one placeholder, the one this paste makes, and nothing else."""
    if len(draft.rows) != 1 or draft.placeholders != draft.rows:
        return False
    (token,) = draft.rows
    if typing.placeholder(text).fullmatch(token) is None:
        return False
    return draft.cursor in (None, (0, _width(token)))


def _width(text: str) -> int:
    """Columns `text` takes; only called on provable text (widths 1 and 2)."""
    return sum(wcwidth(ch) for ch in text)


def render(
    wrapping: Wrapping, text: str, width: int
) -> tuple[tuple[str, ...], tuple[int, int]] | None:
    """The rows a client draws for `text` at `width` columns, and where its cursor ends.

    Rows are stripped of trailing blanks, as in a `DraftView`. The cursor is
    (row, column) after the last character. `text` must be provable. None when
    the client's wrapping of `text` is not reproduced here (see `Wrapping`).
    """
    rows: list[str] = []
    cursor = (0, 0)
    for line in text.split("\n"):
        if wrapping is Wrapping.WRAP_ANSI:
            wrapped = _wrap_ansi(line, width)
        elif _width(line) <= width or set(line) <= _PLAIN_BREAKS:
            wrapped = _textwrap(line, width)
        else:
            return None
        for index, row in enumerate(wrapped):
            # Claude draws a soft-wrapped row without its leading spaces; textwrap
            # never starts a wrapped row with one.
            shown = row if index == 0 else row.lstrip(" ")
            cursor = (len(rows), _width(shown))
            rows.append(shown.rstrip(" "))
        if wrapping is Wrapping.TEXTWRAP and cursor[1] >= width:
            # Codex draws a line that fills its last row exactly with an empty row
            # after it (where its cursor, or its line break, goes).
            rows.append("")
            cursor = (len(rows) - 1, 0)
    return tuple(rows), cursor


# ---------------------------------------------------------------- Claude: Bun.wrapAnsi


def _wrap_ansi(line: str, columns: int) -> list[str]:
    """One line through Bun.wrapAnsi with ``hard: true, trim: false`` (spaces kept in rows)."""
    rows = [""]
    for index, word in enumerate(line.split(" ")):
        used = _width(rows[-1])
        if index:
            if used >= columns:
                rows.append("")
                used = 0
            rows[-1] += " "
            used += 1
        size = _width(word)
        if size > columns:
            # A word wider than a row starts on a fresh row only if that saves a break.
            room = max(columns - used, 0)
            breaks_here = 1 + ((size - room - 1) // columns if size > room else 0)
            if (size - 1) // columns < breaks_here:
                rows.append("")
            _wrap_word(rows, word, columns)
            continue
        if used + size > columns and used > 0 and size > 0:
            rows.append("")
        rows[-1] += word
    return rows


def _wrap_word(rows: list[str], word: str, columns: int) -> None:
    used = _width(rows[-1])
    for index, ch in enumerate(word):
        size = _width(ch)
        if used + size <= columns:
            rows[-1] += ch
        else:
            rows.append(ch)
            used = 0
        used += size
        if used == columns and index < len(word) - 1:
            rows.append("")
            used = 0


# ---------------------------------------------------------------- Codex: textwrap

_PLAIN_BREAKS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -#&*<=>@^_`~,.:;"
)
"""Characters of UAX #14 classes AL, NU, IS, SP and HY (LineBreak-15.0.0.txt): among
them Unicode line breaking allows a break only after a space, and not even there
before an IS character (textwrap drops the breaks after a hyphen and splits hyphens
itself), so textwrap's words are the space-separated ones, joined at IS. Quotes
(QU) are left out: Codex 0.153.4 was seen keeping a quoted word with the next."""
_NO_BREAK_BEFORE = frozenset(",.:;")  # class IS


@attrs.frozen
class _Fragment:
    """A piece of a line as textwrap sees it: characters, the spaces after them, a penalty."""

    word: str
    space: str = ""
    penalty: str = ""

    @property
    def width(self) -> int:
        return _width(self.word)


def _textwrap(line: str, columns: int) -> list[str]:
    """One line through textwrap's first-fit wrap (the default options Codex uses)."""
    fragments = [
        piece
        for word in _words(line)
        for split in _hyphen_split(word)
        for piece in _break_apart(split, columns)
    ]
    lines: list[Sequence[_Fragment]] = []
    start, used = 0, 0
    for index, fragment in enumerate(fragments):
        if used + fragment.width + _width(fragment.penalty) > columns and index > start:
            lines.append(fragments[start:index])
            start, used = index, 0
        used += fragment.width + len(fragment.space)
    lines.append(fragments[start:])
    rows = []
    for pieces in lines:
        joined = "".join(piece.word + piece.space for piece in pieces[:-1])
        rows.append(joined + pieces[-1].word + pieces[-1].penalty if pieces else "")
    return rows


def _words(line: str) -> list[_Fragment]:
    """Words with the spaces that follow them; leading spaces form an empty word.

    UAX #14 forbids a break before `,.:;` even after spaces (rule LB13), so such a
    word joins the one before it, spaces and all.
    """
    parts: list[str] = []
    for part in re.findall(r"[^ ]*(?: +|$)", line):
        if parts and part[:1] in _NO_BREAK_BEFORE:
            parts[-1] += part
        elif part:
            parts.append(part)
    return [_Fragment(part.rstrip(" "), part[len(part.rstrip(" ")) :]) for part in parts]


def _hyphen_split(word: _Fragment) -> list[_Fragment]:
    """Split after each hyphen that has an alphanumeric character on both sides."""
    text = word.word
    points = [
        index + 1
        for index, ch in enumerate(text)
        if ch == "-" and 0 < index < len(text) - 1
        if text[index - 1].isalnum() and text[index + 1].isalnum()
    ]
    pieces = []
    previous = 0
    for point in points:
        pieces.append(_Fragment(text[previous:point]))
        previous = point
    pieces.append(_Fragment(text[previous:], word.space, word.penalty))
    return pieces


def _break_apart(fragment: _Fragment, columns: int) -> list[_Fragment]:
    """A fragment wider than a row, cut into row-wide pieces (the last keeps its spaces)."""
    if fragment.width <= columns:
        return [fragment]
    pieces = []
    start, used = 0, 0
    for index, ch in enumerate(fragment.word):
        size = _width(ch)
        if used > 0 and used + size > columns:
            pieces.append(_Fragment(fragment.word[start:index]))
            start, used = index, 0
        used += size
    pieces.append(_Fragment(fragment.word[start:], fragment.space, fragment.penalty))
    return pieces
