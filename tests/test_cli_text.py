"""The one rule for text shown on an operator's terminal (akk.cli.text), over all code points."""

from __future__ import annotations

import io
import json
import logging
import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from akk.cli.text import LogFormatter, json_text, printable, shown

ANY_TEXT = st.text(
    st.characters(codec=None, exclude_categories=())
    | st.sampled_from("\x1b\x07\x7f\x9b\x85\u202e\u2066\u200b\xad\u2028\ud800\udcc2\n\t\r")
)
"""Every code point, lone surrogates included, with the ones that matter drawn often."""

PRINTABLE_TEXT = st.lists(
    st.text(st.characters(codec=None, exclude_categories=())).filter(str.isprintable)
    | st.sampled_from(["[/]", "[bold]", "[/bold]", "[link=https://example.test]", ":smile:", "\\["])
).map("".join)
"""Text Python calls printable, with rich markup and emoji codes drawn often."""

BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Unicode's Bidi_Control characters (written out here, independent of the module)."""

HOSTILE = (
    "[/] [bold]b[/bold] [link=https://example.test]l[/link] :smile: "
    "\x1b]52;c;aGk=\x07 \x1b[2J \x9b31m \u202eevil\u202c \x1bP1$q\x1b\\ \ud800 \x7f\x00"
)


def _acted_on(char: str, lines: bool) -> bool:
    """A character no output may carry: a terminal or a reader's eye would act on it."""
    if lines and char in "\n\t":
        return False
    category = unicodedata.category(char)
    return (
        char in BIDI
        or category in ("Cc", "Cs", "Zl", "Zp")
        or (category == "Cf" and char not in "\u200c\u200d")
    )


@given(ANY_TEXT, st.booleans())
def test_output_has_no_control_bidi_or_surrogate(text: str, lines: bool) -> None:
    out = printable(text, lines=lines)
    assert not [char for char in out if _acted_on(char, lines)], out
    out.encode("utf-8")  # strict: nothing left that cannot be written to a terminal


@given(PRINTABLE_TEXT)
def test_printable_text_comes_back_unchanged_and_is_shown_literally(text: str) -> None:
    assert printable(text) == text
    console = Console(record=True, width=10_000, color_system=None, file=io.StringIO())
    console.print(shown(text), end="")
    assert console.export_text() == text  # markup and emoji codes are not parsed


@given(ANY_TEXT)
def test_json_text_is_printable_ascii_and_loads_back(text: str) -> None:
    out = json_text({"text": text, "list": [text]})
    assert all(0x20 <= ord(char) < 0x7F for char in out), out
    assert json.loads(out) == {"text": text, "list": [text]}


def test_json_text_escapes_del_c1_bidi_and_surrogates() -> None:
    assert json_text("\x7f\x9b\u202e\ud800") == '"\\u007f\\u009b\\u202e\\ud800"'


def test_hostile_text_is_shown_escaped_whole() -> None:
    assert printable(HOSTILE) == (
        "[/] [bold]b[/bold] [link=https://example.test]l[/link] :smile: "
        "\\x1b]52;c;aGk=\\x07 \\x1b[2J \\x9b31m \\u202eevil\\u202c \\x1bP1$q\\x1b\\ \\ud800 "
        "\\x7f\\x00"
    )
    assert printable("one\ntwo\tthree\r") == "one\\ntwo\\tthree\\r"
    assert printable("one\ntwo\tthree\r", lines=True) == "one\ntwo\tthree\\r"
    assert printable("👨\u200d👩\u200d👧 and ZWNJ\u200c") == "👨\u200d👩\u200d👧 and ZWNJ\u200c"
    console = Console(record=True, width=200, color_system=None, file=io.StringIO())
    console.print(shown(HOSTILE))
    assert console.export_text().rstrip("\n") == printable(HOSTILE)


def test_log_lines_are_shown_escaped_with_their_tracebacks_on_lines() -> None:
    record = logging.LogRecord("akk", logging.ERROR, __file__, 1, "watching %s", (HOSTILE,), None)
    assert LogFormatter("%(message)s").format(record) == "watching " + printable(HOSTILE)
    try:
        raise ValueError("\x1b[2J")
    except ValueError:
        record.exc_info = sys.exc_info()
    logged = LogFormatter("%(message)s").format(record)
    assert "\nTraceback (most recent call last):\n" in logged
    assert logged.endswith("ValueError: \\x1b[2J"), logged
