"""The one rule for controller text that can become keys or an agent's message.

Every text a controller hands AKK to type or to pass on (`send` and `respond`
requests, free-text answers, async answers, backend requests and handoffs)
goes through `akk.protocol.text_check.check_text` before anything is reserved,
digested or asked of an actor; a refused text sends zero keys. The rule is
pure (characters only), so the profiles' key plans use it below the protocol.
docs/input.md has the reasoning.

Two layers, one function each:

- `character_refusal`, for every text: no lone surrogates (Cs), control
  characters (Cc: C0, DEL, C1; the line break only where lines are allowed),
  format characters (Cf: bidi controls, zero-width characters, the soft
  hyphen), unassigned code points (Cn, in the Unicode version of this
  Python), private-use characters (Co), line or paragraph separators (Zl, Zp),
  and no text that is not NFC. A backend request has no screen, so it needs
  only this layer.
- `screen_refusal`, for text typed into a terminal: the character rule, plus
  what no screen can show exactly (leading or trailing whitespace, spaces
  before a line break, other whitespace, characters a terminal does not draw
  one or two cells wide) and what the profile's version turns into something
  other than literal text (`Special`: a shell mode, a command menu, a mention
  popup).

Each refusal names the first offending character as U+XXXX, says why, and
says what to do next.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import attrs
from wcwidth import wcwidth


@attrs.frozen
class Special:
    """Text a client version turns into something other than literal text.

    `pattern` is a regular expression searched in the text (``^!``: a leading
    ``!``); `becomes` says what the client does with it, for the refusal.
    """

    pattern: str
    becomes: str

    def found(self, text: str) -> re.Match[str] | None:
        return re.search(self.pattern, text)


@attrs.frozen
class TextRefusal:
    """Why a text is refused: the reason (naming the character) and the next step."""

    reason: str
    step: str

    def message(self, field: str) -> str:
        """The error message for the parameter ``field``: reason, next step, zero keys."""
        return f"{field} {self.reason}; {self.step}. Nothing was sent"


_CATEGORY_REASONS = {
    "Cs": "a lone surrogate (half of a UTF-16 pair, not a character)",
    "Cc": "a control character (C0, DEL or C1) that a terminal acts on instead of drawing",
    "Cf": "a format character (a bidi control, a zero-width character or a soft hyphen) "
    "that no screen shows as itself",
    "Cn": f"a code point Unicode {unicodedata.unidata_version} does not assign",
    "Co": "a private-use character, whose look depends on the font",
    "Zl": "a line separator (use a line break, U+000A)",
    "Zp": "a paragraph separator (use a line break, U+000A)",
}


def _name(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def character_refusal(text: str, *, lines: bool) -> TextRefusal | None:
    """Why ``text`` is refused as any input at all, or None; ``lines``: line breaks allowed."""
    if not text.strip():
        return TextRefusal("is empty", "send the text")
    for index, ch in enumerate(text):
        if ch == "\n":
            if lines:
                continue
            return TextRefusal(
                f"holds U+000A (a line break) at index {index}, which would submit this "
                "one-line answer early",
                "send it as one line",
            )
        category = unicodedata.category(ch)
        why = _CATEGORY_REASONS.get(category)
        if why is not None:
            return TextRefusal(
                f"holds {_name(ch)} at index {index}, {why}", f"remove or replace {_name(ch)}"
            )
    if not unicodedata.is_normalized("NFC", text):
        normal = unicodedata.normalize("NFC", text)
        index = next(
            (i for i, (a, b) in enumerate(zip(text, normal, strict=False)) if a != b),
            min(len(text), len(normal)),
        )
        where = f"{_name(text[index])} at index {index}" if index < len(text) else "its end"
        return TextRefusal(
            f"is not NFC-normalised Unicode ({where} composes differently)",
            "normalise it to NFC first (unicodedata.normalize('NFC', text))",
        )
    return None


def screen_refusal(
    text: str, specials: Sequence[Special] = (), *, lines: bool = True
) -> TextRefusal | None:
    """Why ``text`` cannot be typed and proven on a screen (with these client specials)."""
    refused = character_refusal(text, lines=lines)
    if refused is not None:
        return refused
    if text != text.strip():
        return TextRefusal(
            "starts or ends with whitespace, which the clients trim", "strip it first"
        )
    if any(line != line.rstrip(" ") for line in text.split("\n")):
        return TextRefusal("has a line that ends with spaces (the clients drop them)", "strip them")
    for index, ch in enumerate(text):
        if ch not in (" ", "\n") and (ch.isspace() or wcwidth(ch) not in (1, 2)):
            return TextRefusal(
                f"holds {_name(ch)} at index {index}, which a terminal does not draw as "
                "itself (a tab, other whitespace, a combining or zero-width character)",
                f"replace {_name(ch)}",
            )
    for special in specials:
        match = special.found(text)
        if match is not None:
            shown = match.group(0).strip() or repr(match.group(0))
            return TextRefusal(
                f"has {shown!r} at index {match.start()}, which this client turns into "
                f"{special.becomes} instead of typing it",
                "reword it (a leading space is trimmed too), or type it at the pane yourself",
            )
    return None
