"""The captured screens of fixtures/: each read, rendered and classified once per test process.

A dozen test modules pick their cases from the same ~2,400 screens, several of
them at collection, and rendering and classifying one screen takes milliseconds:
a loader in each module paid for the corpus again and again, in every xdist
worker. Here each label, grid and observation is made on first use and shared.

Nothing shared may change: a Grid and an Observation are frozen (a changed
screen is a new Grid), and a label is the dict its JSON reads as, which no test
writes to. A screen is named by its label's path under ROOT.

A check that holds for every screen of a list runs as one test per folder (one
version at one size) through `each`, not one per screen: pytest and xdist spend
about 3.5 ms of CPU on every test they run, more than most such checks take.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from akk.profiles.observation import Observation
from akk.profiles.registry import PROFILES, Profile
from akk.screen import Grid, render

ROOT = Path(__file__).resolve().parent.parent / "fixtures"

T = TypeVar("T")
RAN, FAILED = "corpus_ran", "corpus_failed"
"""The user properties of an `each` test: the names of the items it checks, and of those
that failed (absent if the test stopped before the end: then all count as failed)."""
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


def each(
    items: Sequence[T],
    named: Callable[[T], str] = name,  # type: ignore[assignment]  # for items that are paths
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A check of one item (a screen, or a case named by its screen) made a test per folder.

    The test of a folder runs the check on each of its items (a check with several
    parameters takes an item's fields as its arguments) and fails if any failed,
    naming every item that did and why, its traceback the first one's.
    """
    folders: dict[str, list[T]] = {}
    for item in items:
        folders.setdefault(named(item).rpartition("/")[0], []).append(item)

    def per_folder(check: Callable[..., None]) -> Callable[..., None]:
        spread = len(inspect.signature(check).parameters) > 1  # an item per parameter

        def test(screens: list[T], record_property: Callable[[str, object], None]) -> None:
            __tracebackhide__ = True  # the first failure's own traceback is shown above it
            # For the run's summary (tests/conftest.py): which items ran, which failed.
            record_property(RAN, [named(item) for item in screens])
            failed: list[tuple[str, Exception]] = []
            for item in screens:
                try:
                    if spread:
                        check(*item)  # type: ignore[misc]
                    else:
                        check(item)
                except Exception as exc:  # every failure is listed, then raised
                    failed.append((named(item), exc))
            record_property(FAILED, [item for item, _ in failed])
            if failed:
                listing = "\n".join(
                    f"  {item}: {type(exc).__name__}: {str(exc).partition(chr(10))[0]}"
                    for item, exc in failed
                )
                raise AssertionError(
                    f"{len(failed)} of {len(screens)} failed:\n{listing}"
                ) from failed[0][1]

        test.__name__, test.__qualname__ = check.__name__, check.__qualname__
        test.__doc__, test.__module__ = check.__doc__, check.__module__
        return pytest.mark.parametrize("screens", list(folders.values()), ids=list(folders))(test)

    return per_folder
