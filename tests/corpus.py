"""The captured screens of fixtures/: each read, rendered and classified once per test process.

A dozen test modules pick their cases from the same ~2,400 screens, several of
them at collection, and rendering and classifying one screen takes milliseconds:
a loader in each module paid for the corpus again and again, in every xdist
worker. Here each label, grid and observation is made on first use and shared.

Nothing shared may change: a Grid and an Observation are frozen (a changed
screen is a new Grid), and a label is the dict its JSON reads as, which no test
writes to. A screen is named by its label's path under ROOT.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from akk.profiles.observation import Observation
from akk.profiles.registry import PROFILES, Profile
from akk.screen import Grid, render

ROOT = Path(__file__).resolve().parent.parent / "fixtures"

Label = dict[str, Any]
"""What the capture tool wrote of a screen: agent, version, cols, rows, plan, expected, ..."""


def labels(*folders: str) -> list[Path]:
    """Both clients' labels in `<agent>/<version>/<folder>/`, sorted ("": the version's own)."""
    return sorted(
        path
        for agent in ("claude", "codex")
        for folder in folders
        for path in (ROOT / agent).glob(str(Path("*", folder, "*.json")))
    )


def every(agent: str) -> list[Path]:
    """All of ``agent``'s labels: each version's own, sorted, then those in its folders."""
    return sorted((ROOT / agent).glob("*/*.json")) + sorted((ROOT / agent).glob("*/*/*.json"))


MAIN = labels("", "80x24")
"""The main corpus: every pinned version's screens at 120x40 and at 80x24."""


def name(path: Path) -> str:
    """The label's path under ROOT: how test ids name a screen."""
    return str(path.relative_to(ROOT))


@functools.cache
def label(path: Path) -> Label:
    """The label at ``path``, read without rendering its screen (to pick screens by it)."""
    found: Label = json.loads(path.read_text())
    return found


@functools.cache
def screen(path: Path) -> tuple[Label, Grid]:
    """The label at ``path`` and its screen (the ``.ansi`` beside it) at the label's size."""
    found = label(path)
    return found, render(path.with_suffix(".ansi").read_text(), found["cols"], found["rows"])


@functools.cache
def observed(path: Path) -> tuple[Profile, Observation]:
    """The profile of the label's exact agent and version, and what it makes of the screen."""
    found, grid = screen(path)
    profile = PROFILES[(found["agent"], found["version"])]
    return profile, profile.classify(grid)
