"""What an operator's terminal is shown of text that came from outside AKK.

Agents, models and controllers write text that the CLI prints: prompts and
final messages, scope names, reasons, event summaries. A terminal acts on some
characters instead of showing them (an OSC 52 sequence writes the clipboard,
`ESC [2J` clears the screen), bidi controls reorder what a person reads
(Trojan Source), and rich parses `[...]` as markup (`[/]` raises MarkupError).
So every such text goes through `printable`: what it cannot show literally it
shows as a Python escape, whole (`\\x1b]52;c;aGk=\\x07`, `\\u202e`), never
dropped and never acted on. `shown` hands the result to rich as a `Text`, which
rich never parses for markup or emoji codes; `json_text` is the same rule for
`--json` output, and `LogFormatter` for `akk serve`'s log lines. docs/cli.md says
what the operator sees. `out` and `err` are the consoles every command prints to.
"""

from __future__ import annotations

import datetime
import json
import logging
import unicodedata

from rich.console import Console
from rich.text import Text

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Controls (C0, DEL, C1), format characters, lone surrogates, line and paragraph separators."""

_JOINERS = frozenset("\u200c\u200d")
"""ZWNJ and ZWJ: format characters that join letters and emoji (👨‍👩‍👧); shown as they are."""

_LINE_BREAKS = frozenset("\n\t")
"""Kept when a text is shown as lines (a final message), escaped inside one line or cell."""


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with every character a terminal would act on, that reorders or hides what
    a person reads, or that cannot be encoded, written as its Python escape.

    Escaped: C0, DEL and C1 controls (so ESC starts no CSI, OSC, DCS, APC or PM
    sequence: the sequence's own printable bytes follow the visible `\\x1b`), format
    characters but ZWNJ and ZWJ (bidi controls, zero-width spaces, soft hyphens),
    lone surrogates, and U+2028/U+2029. ``lines``: keep newline and tab (a message
    shown on lines of its own); else they are escaped too (a table cell, a one-line
    field). Text Python calls printable comes back unchanged, markup included: print
    the result with markup off (`shown`). A backslash is not escaped, so a literal
    `\\x1b` in the text reads the same as an escaped ESC.
    """
    if text.isprintable():
        return text
    return "".join(
        _escape(char) if _unsafe(char) and not (lines and char in _LINE_BREAKS) else char
        for char in text
    )


def shown(value: object, *, lines: bool = False) -> Text:
    """``value`` as rich `Text` that prints exactly `printable(str(value))`: no markup, no
    emoji codes, no control sequence (a table cell or a console line)."""
    return Text(printable(str(value), lines=lines))


def json_text(value: object, *, indent: int | None = None) -> str:
    """``value`` as JSON whose every character is printable ASCII (newlines aside, with
    ``indent``): DEL, C1, bidi controls, lone surrogates and all other non-ASCII as `\\uXXXX`
    (`ensure_ascii`, which rich's `print_json` turns off). `json.loads` gives ``value`` back."""
    return json.dumps(value, ensure_ascii=True, indent=indent)


def when(stamp: float | None) -> str:
    """A table's local time of ``stamp`` to the minute, or "never"."""
    if stamp is None:
        return "never"
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M")


class LogFormatter(logging.Formatter):
    """A log line as `printable` shows it: its arguments may carry outside text (a socket
    path, an app-server's error), and `akk serve` logs to the operator's terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), lines=True)


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) in _ESCAPED_CATEGORIES and char not in _JOINERS


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
