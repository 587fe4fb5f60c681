"""Benchmark `akk.screen.render` on realistic captures at 120x40 and 250x60.

Run: `.venv/bin/python -m tools.bench_render [--runs N]`. For each size and
style density it prints the first (cold cache) render and the median and p99
over N renders, both in CPU time of this thread (robust when the machine is
busy) and in wall time.

The captures imitate what `tmux capture-pane -p -e` emits for an agent TUI:
every row full of text, styles (bold, dim, reverse, palette, 256-colour and
truecolour, tmux's "0m 39m 49m" resets) changing either about four times a row
("typical") or at every word ("dense"), a rounded box-drawing frame, and CJK rows.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time

import attrs

from akk.screen import render

_STYLES = (
    "\x1b[1m",
    "\x1b[2m",
    "\x1b[7m",
    "\x1b[31m",
    "\x1b[38;5;174m",
    "\x1b[38;2;177;185;249m",
    "\x1b[48;2;55;55;55m",
    "\x1b[0m\x1b[39m\x1b[49m",
)
_WORDS = ("Read", "file", "src/akk/screen.py", "\u276f", "1.", "Yes,", "and", "don't", "ask")
_CJK = "中文字符测试日本語한국어"


def _text_row(rng: random.Random, cols: int, style_every: int) -> str:
    parts: list[str] = []
    used = 0
    for index in itertools.count():
        word = rng.choice(_WORDS) + " "
        if used + len(word) > cols:
            break
        parts.append((rng.choice(_STYLES) if index % style_every == 0 else "") + word)
        used += len(word)
    return "".join(parts)


def _cjk_row(rng: random.Random, cols: int) -> str:
    chars = "".join(rng.choice(_CJK) for _ in range(cols // 2 - 2))
    return "\x1b[38;2;215;119;87m" + chars + "\x1b[0m\x1b[39m\x1b[49m"


def _frame(cols: int, body: list[str]) -> list[str]:
    inner = cols - 2
    rows = ["\x1b[38;5;244m╭" + "─" * inner + "╮"]
    rows += ["│\x1b[39m" + line[:inner].ljust(inner) + "\x1b[38;5;244m│" for line in body]
    rows.append("╰" + "─" * inner + "╯\x1b[39m")
    return rows


def make_capture(cols: int, rows: int, *, style_every: int = 1, seed: int = 0) -> str:
    """A synthetic capture of a full `cols` x `rows` agent screen, newline-terminated.

    A new style starts every `style_every` words.
    """
    rng = random.Random(seed)
    frame_body = ["Do you want to proceed?", "\u276f 1. Yes", "  2. No, and tell Claude"]
    lines: list[str] = []
    for y in range(rows - len(frame_body) - 2):
        lines.append(_cjk_row(rng, cols) if y % 7 == 3 else _text_row(rng, cols, style_every))
    lines += _frame(cols, frame_body)
    return "\n".join(lines) + "\n"


@attrs.frozen
class Timing:
    """Render times in milliseconds for one capture."""

    first_cpu: float
    median_cpu: float
    p99_cpu: float
    median_wall: float
    p99_wall: float


def _median_p99(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def bench(capture: str, cols: int, rows: int, runs: int) -> Timing:
    """Time `runs` renders of `capture` after one cold first render."""
    start = time.thread_time()
    render(capture, cols, rows)
    first = time.thread_time() - start
    cpu, wall = [], []
    for _ in range(runs):
        start_wall, start_cpu = time.perf_counter(), time.thread_time()
        render(capture, cols, rows)
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    median_cpu, p99_cpu = _median_p99(cpu)
    median_wall, p99_wall = _median_p99(wall)
    return Timing(first * 1e3, median_cpu, p99_cpu, median_wall, p99_wall)


def main() -> None:
    """Print render timings for both sizes and both style densities."""
    parser = argparse.ArgumentParser(description="Benchmark akk.screen.render.")
    parser.add_argument("--runs", type=int, default=500)
    args = parser.parse_args()
    for cols, rows in ((120, 40), (250, 60)):
        for name, style_every in (("typical", 5), ("dense", 1)):
            capture = make_capture(cols, rows, style_every=style_every)
            sgr = capture.count("\x1b[")
            t = bench(capture, cols, rows, args.runs)
            print(
                f"{cols}x{rows} {name:7} ({sgr:4} SGR): first {t.first_cpu:5.2f} ms; "
                f"cpu median {t.median_cpu:.3f} p99 {t.p99_cpu:.3f} ms; "
                f"wall median {t.median_wall:.3f} p99 {t.p99_wall:.3f} ms"
            )


if __name__ == "__main__":
    main()
