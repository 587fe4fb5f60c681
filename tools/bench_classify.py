"""Benchmark render + classify over the captured corpus, per size, and at 250x60.

Run: `.venv/bin/python -m tools.bench_classify [--agent claude] [--runs N]`.
For every fixture of the agent at each captured size (80x24, 100x30, 120x40,
132x43, and Claude's 200x50) it times `akk.screen.render` and the exact version's `classify` (CPU
time of this thread, robust when the machine is busy) and prints the median and
p99 per size over all screens and runs.

There is no 250x60 corpus, so each 120x40 capture is widened: rows that are one
full-width run of a box-drawing glyph (the clients' rules) are stretched to the
new width and blank rows are added on top, which keeps the screen bottom-anchored
as the clients draw it. The tool also reports how many widened screens classify
to the same state as the original, so a shape the classifier only accepts at one
width shows up here.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

import attrs

from akk.profiles.registry import PROFILES, Profile
from akk.screen import render

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_SGR = re.compile(r"\x1b\[[0-9;:]*m")


@attrs.frozen
class Screen:
    """One capture at one size and the profile of the version it came from."""

    name: str
    capture: str
    cols: int
    rows: int
    profile: Profile


def widen(capture: str, cols: int, rows: int, new_cols: int, new_rows: int) -> str:
    """The same screen drawn on a larger pane: rules stretched, blank rows on top."""
    lines = capture.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    wide = []
    for line in lines:
        plain = _SGR.sub("", line)
        glyph = plain[:1]
        if len(plain) == cols and "\u2500" <= glyph <= "\u257f" and plain == glyph * cols:
            line = line.replace(glyph * cols, glyph * new_cols)
        wide.append(line)
    return "\n".join([""] * (new_rows - rows) + wide) + "\n"


def corpus(agent: str, size: tuple[int, int]) -> list[Screen]:
    """Every 120x40 fixture of `agent`, at `size` (widened when larger)."""
    screens = []
    for label_path in sorted(FIXTURES.glob(f"{agent}/*/*.json")):
        label = json.loads(label_path.read_text())
        capture = label_path.with_suffix(".ansi").read_text()
        cols, rows = label["cols"], label["rows"]
        if (cols, rows) != size:
            capture = widen(capture, cols, rows, *size)
        profile = PROFILES[(label["agent"], label["version"])]
        name = str(label_path.relative_to(FIXTURES))
        screens.append(Screen(name, capture, size[0], size[1], profile))
    return screens


def captured(agent: str) -> dict[tuple[int, int], list[Screen]]:
    """Every corpus fixture of `agent` (all versions), by the size it was captured at."""
    sizes: dict[tuple[int, int], list[Screen]] = {}
    for label_path in sorted(FIXTURES.glob(f"{agent}/[0-9]*/**/*.json")):
        label = json.loads(label_path.read_text())
        size = (label["cols"], label["rows"])
        profile = PROFILES[(label["agent"], label["version"])]
        capture = label_path.with_suffix(".ansi").read_text()
        name = str(label_path.relative_to(FIXTURES))
        sizes.setdefault(size, []).append(Screen(name, capture, size[0], size[1], profile))
    return dict(sorted(sizes.items()))


def _median_p99(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered):.3f} ms, p99 {p99:.3f} ms"


def bench(screens: list[Screen], runs: int) -> tuple[list[float], list[float]]:
    """Render and classify times (ms) of every screen, `runs` times each after a warm-up."""
    render_ms: list[float] = []
    classify_ms: list[float] = []
    for screen in screens:
        screen.profile.classify(render(screen.capture, screen.cols, screen.rows))
        for _ in range(runs):
            start = time.thread_time()
            # A fresh grid every time: row texts are memoised per grid.
            grid = render(screen.capture, screen.cols, screen.rows)
            rendered = time.thread_time()
            screen.profile.classify(grid)
            done = time.thread_time()
            render_ms.append((rendered - start) * 1e3)
            classify_ms.append((done - rendered) * 1e3)
    return render_ms, classify_ms


def same_states(original: list[Screen], widened: list[Screen]) -> int:
    """How many widened screens classify to the same state as their original."""
    return sum(
        a.profile.classify(render(a.capture, a.cols, a.rows)).state
        == b.profile.classify(render(b.capture, b.cols, b.rows)).state
        for a, b in zip(original, widened, strict=True)
    )


def main() -> None:
    """Print render and classify timings per size for the agent's fixtures."""
    parser = argparse.ArgumentParser(description="Benchmark render + classify on fixtures.")
    parser.add_argument("--agent", default="claude", choices=("claude", "codex"))
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    for size, screens in captured(args.agent).items():
        render_ms, classify_ms = bench(screens, args.runs)
        print(
            f"{args.agent} {size[0]}x{size[1]} captured ({len(screens)} screens x {args.runs}): "
            f"render {_median_p99(render_ms)}; classify {_median_p99(classify_ms)}"
        )
    base = corpus(args.agent, (120, 40))
    wide = corpus(args.agent, (250, 60))
    render_ms, classify_ms = bench(wide, args.runs)
    print(
        f"{args.agent} 250x60 widened from 120x40 ({len(wide)} screens x {args.runs}): "
        f"render {_median_p99(render_ms)}; classify {_median_p99(classify_ms)}; "
        f"same state as 120x40: {same_states(base, wide)}/{len(wide)}"
    )


if __name__ == "__main__":
    main()
