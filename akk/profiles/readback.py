"""Characters no pane shows as the model sent them: a question holding one cannot be read back.

An emoji variation sequence is a character that U+FE0F draws as emoji (two cells)
or U+FE0E as text (one), as wcwidth lists them. The client and the terminal each
decide its width on their own. Claude drops the selector (``❤️`` shows ``❤``).
Codex keeps it, but lays the row out for another width than tmux draws, so the
spaces around the character shift: ``❤️ Heart`` gains one, which splits the label
from its own tail as if at the description's gap, and ``⌚︎ Watch`` loses one. The
keycap mark U+20E3, after a digit, ``#`` or ``*`` and its selector ("1️⃣"), is of
the same kind. A text holding any of these is refused wherever a profile projects
a model's question, whatever the rest reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from wcwidth.table_vs15 import VS15_WIDE_TO_NARROW
from wcwidth.table_vs16 import VS16_NARROW_TO_WIDE

from akk.profiles.observation import Unproven


def _selector_characters() -> str:
    """The characters of `unreadable`'s class: those with a variation sequence outside
    ASCII (an ASCII digit, ``#`` or ``*`` takes one only before the keycap mark), and the
    keycap mark."""
    ranges = (*VS16_NARROW_TO_WIDE["9.0.0"], *VS15_WIDE_TO_NARROW["9.0.0"])
    spans = "".join(
        f"{re.escape(chr(max(low, 0x80)))}-{re.escape(chr(high))}"
        for low, high in ranges
        if high >= 0x80
    )
    return f"{spans}\u20e3"


SELECTOR_CHARACTERS = _selector_characters()
"""A regular expression character class's body (no brackets): see the module's docstring."""

_REFUSAL = (
    "the question holds a character the screen may not show as sent (an emoji's "
    "variation selector, a replaced character): its text cannot be read back"
)


def unreadable(extra: str = "") -> re.Pattern[str]:
    """A pattern finding any such character, or one of `extra` (characters a client draws
    in place of others, e.g. Claude's U+FFFD for a zero-width space)."""
    return re.compile(f"[{SELECTOR_CHARACTERS}{re.escape(extra)}]")


def prove_readable(texts: Iterable[str], pattern: re.Pattern[str]) -> None:
    """Refuse (`Unproven`) a question any of whose `texts` holds a character `pattern`
    (an `unreadable` one) finds."""
    if any(pattern.search(text) for text in texts):
        raise Unproven(_REFUSAL)
