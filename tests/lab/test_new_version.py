"""`python -m tools.lab new-version` end to end, on a pinned Codex version taken as new.

The whole pipeline runs (install check, capture on the real client into a
scratch directory, classification under the nearest profile, report) for a
few plans at every size. A pinned version is its own nearest version, so every
capture must classify the way its committed fixture does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from akk.qualify.plans.codex import CODEX_VARIANT_SIZES
from akk.qualify.plans.plan import SIZES
from tools.lab import clients
from tools.lab import new_version as nv
from tools.lab.clients import Client

VERSION = "0.169.0"
PLANS = ("echo", "codex_exec", "codex_rui_one", "codex_rui_async_text")
"""Idle, finished, an exec approval and a Plan-mode question; one version-kept plan."""


@pytest.mark.lab
@pytest.mark.long
async def test_a_pinned_codex_taken_as_new_is_the_same_everywhere(tmp_path: Path) -> None:
    client = Client("codex", VERSION)
    assert client in clients.PINNED
    result = await nv.run("codex", VERSION, tmp_path, plans=PLANS)

    assert result.nearest == client
    points = {(c.point.plan, c.point.cols, c.point.rows) for c in result.comparisons}
    sizes = (*SIZES, *CODEX_VARIANT_SIZES)
    assert {plan for plan, _, _ in points} == set(PLANS)
    assert {(p, c, r) for p, c, r in points if p != "codex_rui_async_text"} == {
        (plan, cols, rows) for plan in PLANS[:3] for cols, rows in sizes
    }
    text = result.text()
    not_same = [c for c in result.comparisons if c.status != "same"]
    assert not not_same, text
    assert all(c.note is None for c in result.comparisons), text  # each had a fixture
    assert f"summary: {len(result.comparisons)} same, 0 differ, 0 not producible" in text

    # The captures went into the scratch directory, one screen per capture point.
    screens = sorted((tmp_path / "codex" / VERSION).rglob("*.ansi"))
    assert len(screens) == len(result.comparisons)
    phases = {phase.name: phase.seconds for phase in result.phases}
    assert phases["install"] >= 0 and phases["capture"] > 0
