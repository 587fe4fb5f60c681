"""How a wrapped row of a model's text joins the row above it: with a space, or between
two wide characters at a full row, with none.

Both agents break the text a model wrote (a question, an option's label or
description, a command's description or reason) at a space where they can, and
cut a word longer than the row at the row's edge. The profiles read the rows
back joined with one space, and prove that each break is one the client could
have made at a space.

Text in Chinese or Japanese has no spaces: each run of it is one word to the
client, cut at the edge wherever it is longer than the row. So a row that ends
full, in a wide character, above a row that starts in one, reads two ways: the
one word cut (no space), or a word that ended exactly at the edge and a space
the break ate. Those scripts put no space between two of their characters, so
AKK takes the first reading. The second is a model's space between two wide
characters at that very break: the projection lacks that one space, which
changes no character and no option's number, and the fingerprint still holds
every cell of the screen. Anything else at a full row's edge (a cut ASCII word,
a wide character beside a narrow one) stays unreadable, as before.
"""

from __future__ import annotations

from wcwidth import wcwidth


def wide(char: str) -> bool:
    """Whether `char` takes two cells (CJK ideographs, kana, Hangul, fullwidth forms)."""
    return wcwidth(char) == 2


def cut_between_wide(upper: str, lower: str, *, full: bool) -> bool:
    """Whether a break between rows ending `upper` and starting `lower` is a wide word's cut.

    `full`: the first character of `lower` would not have fit on the row above.
    Both edge characters must be wide.
    """
    return full and bool(upper) and bool(lower) and wide(upper[-1]) and wide(lower[0])


def joiner(upper: str, lower: str, *, full: bool) -> str:
    """What stands between row texts `upper` and `lower` once joined: nothing where the
    break cut a wide word (`cut_between_wide`), else one space."""
    return "" if cut_between_wide(upper, lower, full=full) else " "
