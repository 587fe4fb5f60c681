"""How many examples the costliest Hypothesis properties draw in this run.

`make test` (what CI runs) draws every property's full count. `make test-fast`,
the inner loop, sets ``AKK_TEST_TIER=fast``: the properties that cost the most
seconds draw a fifth of their examples there, and every test still runs. A
property whose assertions need its full count (one that must reach every case)
never goes through here.
"""

from __future__ import annotations

import os

_TIERS = ("full", "fast")
TIER = os.environ.get("AKK_TEST_TIER") or "full"
if TIER not in _TIERS:
    raise RuntimeError(
        f"AKK_TEST_TIER={TIER!r} is not a test tier; use one of {', '.join(_TIERS)} "
        "(or leave it unset for the full count)"
    )


def examples(full: int) -> int:
    """`full`, or a fifth of it (at least 2) in the fast tier."""
    return full if TIER == "full" else max(2, full // 5)
