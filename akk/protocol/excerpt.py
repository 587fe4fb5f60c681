"""The bounded, redacted screen excerpt `status` returns.

It lets a controller (or a person reading its log) see roughly what the pane
shows, never a secret: secrets are masked (`akk.protocol.redaction`), the
excerpt is bounded in lines and width, and a screen that asks for secret
input is not excerpted at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from akk.protocol.redaction import asks_for_secret, redact_screen

MAX_LINES = 24
MAX_WIDTH = 240


def excerpt(
    lines: Sequence[str], *, secret: bool = False, seen: frozenset[str] = frozenset()
) -> list[str] | None:
    """The last non-blank stretch of the screen, bounded and redacted (``seen``: pieces
    masked on its earlier drawings, `redact_screen`).

    None when the screen asks for secret input (or ``secret``: its prompt does, in a
    question's own words): then nothing of it is shown.
    """
    if secret or asks_for_secret(lines):
        return None
    # The whole screen is redacted, padding and all, before the stretch is
    # chosen: a key block that starts above the stretch is still masked inside
    # it, and a row's padding tells whether it wrapped onto the next. Lines are
    # cut to width only after, so a secret straddling the cut is masked whole.
    kept = [line.rstrip() for line in redact_screen(lines, seen).lines]
    while kept and not kept[-1]:
        kept.pop()
    kept = kept[-MAX_LINES:]
    while kept and not kept[0]:
        kept.pop(0)
    return [line[:MAX_WIDTH] for line in kept]
