"""Benchmark `akk.protocol.redaction.redact_screen` on screens of wrapped output.

Run: `.venv/bin/python -m tools.bench_redaction [--runs N]`. `status`, the
console and `list`'s `asks` redact the whole screen of a pane whenever it
changed, on the server's own thread, so this is time a busy pane costs every
controller. For each size it prints the median and the worst CPU time of this
thread over N screens (each a new one: the redaction's cache never answers):

- "prose": every row one soft-wrapped stretch of ordinary words, as a long
  paragraph or a log line an agent printed fills a pane;
- "prose + keys": the same with a named secret and a key in every fifth row.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from akk.protocol.redaction import redact_screen

SIZES = ((120, 40), (250, 60), (250, 200), (900, 200))
_WORDS = ("the", "check", "returned", "value", "error", "src/akk/screen.py", "config", "path")
_SECRETS = ("password: c0rrectHorse99", "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz")


def _screen(rng: random.Random, cols: int, rows: int, keys: bool) -> tuple[str, ...]:
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < cols * rows:
        every_fifth_row = keys and rng.random() < 1 / (cols / 8 * 5)
        words.append(rng.choice(_SECRETS) if every_fifth_row else rng.choice(_WORDS))
    text = " ".join(words)
    return tuple(text[y * cols : (y + 1) * cols] for y in range(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="screens per size and kind")
    args = parser.parse_args()
    rng = random.Random(7)
    for cols, rows in SIZES:
        for kind, keys in (("prose", False), ("prose + keys", True)):
            times = []
            for _ in range(args.runs):
                screen = _screen(rng, cols, rows, keys)
                start = time.thread_time()
                redact_screen(screen)
                times.append(time.thread_time() - start)
            print(
                f"{cols}x{rows} {kind}: median {statistics.median(times) * 1e3:.1f} ms, "
                f"worst {max(times) * 1e3:.1f} ms ({args.runs} screens)"
            )


if __name__ == "__main__":
    main()
