"""The bounded, redacted screen excerpt `status` returns.

It lets a controller (or a person reading its log) see roughly what the pane
shows, never a secret: token-like strings are masked, the excerpt is bounded
in lines and width, and screens classified as secret input are not excerpted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_LINES = 24
MAX_WIDTH = 240
MASK = "[redacted]"

# Long runs that look like keys or tokens: provider key prefixes, JWTs, long
# hex or base64 blobs. Ordinary words and paths do not match.
_SECRET = re.compile(
    r"""
    \b(?:sk|pk|rk|ghp|gho|ghu|ghs|github_pat|xox[abprs]|glpat|AKIA)[-_A-Za-z0-9]{12,}
    | \beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}
    | \b[A-Fa-f0-9]{32,}\b
    | \b[A-Za-z0-9+/_-]{40,}={0,2}
    """,
    re.VERBOSE,
)


def redact(line: str) -> str:
    """Mask token-like strings in one line."""
    return _SECRET.sub(MASK, line)


def excerpt(lines: Sequence[str]) -> list[str]:
    """The last non-blank stretch of the screen, bounded and redacted."""
    kept = [line.rstrip() for line in lines]
    while kept and not kept[-1]:
        kept.pop()
    kept = kept[-MAX_LINES:]
    while kept and not kept[0]:
        kept.pop(0)
    return [redact(line)[:MAX_WIDTH] for line in kept]
