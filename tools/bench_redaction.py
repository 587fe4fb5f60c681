"""Benchmark `akk.protocol.redaction` on screens of wrapped output and on long messages.

Run: `.venv/bin/python -m tools.bench_redaction [--runs N]`. `status`, the
console and `list`'s `asks` redact the whole screen of a pane whenever it
changed, on the server's own thread, so this is time a busy pane costs every
controller. For each size it prints the median and the worst CPU time of this
thread over N screens (each a new one: the redaction's cache never answers):

- "prose": every row one soft-wrapped stretch of ordinary words, as a long
  paragraph or a log line an agent printed fills a pane;
- "prose + keys": the same with a named secret and a key in every fifth row;
- "code words": the words of AKK's own source, in order from a random place,
  soft-wrapped the same way: code and its prose, where the names the rules look
  for (`token`, `key`, `password`, `://`) come as often as they do in code.

Then a final message of about a megabyte, as an agent may end a Turn with, in
five shapes (paragraphs, lines of code, paragraphs with no blank line
between them, and base64 in lines at the left edge and indented): the CPU
time of redacting all of it (`redact`) and of the first `FINAL_MESSAGE_LIMIT`
characters a Turn keeps (`redact_head`), which is what AKK does, also on its
own thread.

Last, three messages whose rows cost more than the rules may read
(`HEAD_READ_BUDGET`): 40 rows of 64 KiB of base64, 40 rows of 64 KiB of
prose each ending in a named secret, and one line of 16 MiB. `redact_head`
withholds them: the time it takes is the most a message can cost.
"""

from __future__ import annotations

import argparse
import base64
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import akk
from akk.actors.turn import FINAL_MESSAGE_LIMIT
from akk.protocol.redaction import redact, redact_head, redact_screen, withheld

SIZES = ((120, 40), (250, 60), (250, 200), (900, 200))
_WORDS = ("the", "check", "returned", "value", "error", "src/akk/screen.py", "config", "path")
_SECRETS = ("password: c0rrectHorse99", "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz")


def _screen(rng: random.Random, cols: int, rows: int, kind: str) -> tuple[str, ...]:
    words: list[str] = []
    at = rng.randrange(len(_SOURCE_WORDS) - cols * rows)
    while sum(len(word) + 1 for word in words) < cols * rows:
        if kind == "code words":
            words.append(_SOURCE_WORDS[at + len(words)])
            continue
        every_fifth_row = kind == "prose + keys" and rng.random() < 1 / (cols / 8 * 5)
        words.append(rng.choice(_SECRETS) if every_fifth_row else rng.choice(_WORDS))
    text = " ".join(words)
    return tuple(text[y * cols : (y + 1) * cols] for y in range(rows))


_SOURCE_WORDS = [
    word
    for path in sorted(Path(akk.__file__).parent.rglob("*.py"))
    for word in path.read_text().split()
]


def _messages(rng: random.Random, size: int) -> dict[str, str]:
    def line() -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(12))

    count = size // len(line())
    blob = base64.encodebytes(rng.randbytes(size * 3 // 4)).decode()
    return {
        "paragraphs": "\n\n".join(line() for _ in range(count)),
        "code": "\n".join(f"    x{n} = call(path, {n})" for n in range(size // 25)),
        "lines, no blank one": "\n".join(line() for _ in range(count)),
        "base64 in lines of 76": blob,
        "base64 in lines, indented": "\n".join("  " + row for row in blob.splitlines()),
    }


def _costly(rng: random.Random) -> dict[str, str]:
    def prose(length: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(length // 7))

    def key_row(length: int) -> str:
        return base64.b64encode(rng.randbytes(length * 3 // 4)).decode()

    return {
        "40 rows of 64 KiB of base64": "\n".join(key_row(65_536) for _ in range(40)),
        "40 rows of 64 KiB of prose ending in a named secret": "\n".join(
            prose(65_536) + " " + _SECRETS[0] for _ in range(40)
        ),
        "one line of 16 MiB of base64": key_row(16 << 20),
    }


def _cpu(work: Callable[..., object], *args: object) -> float:
    start = time.thread_time()
    work(*args)
    return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="screens per size and kind")
    args = parser.parse_args()
    rng = random.Random(7)
    for cols, rows in SIZES:
        for kind in ("prose", "prose + keys", "code words"):
            screens = [_screen(rng, cols, rows, kind) for _ in range(args.runs)]
            times = [_cpu(redact_screen, screen) for screen in screens]
            print(
                f"{cols}x{rows} {kind}: median {statistics.median(times) * 1e3:.1f} ms, "
                f"worst {max(times) * 1e3:.1f} ms ({args.runs} screens)"
            )
    for kind, text in _messages(rng, 1_000_000).items():
        whole = _cpu(redact, text)
        head = _cpu(redact_head, text, FINAL_MESSAGE_LIMIT)
        print(
            f"final message, {kind} ({len(text):,} chars): redact {whole * 1e3:.0f} ms, "
            f"redact_head({FINAL_MESSAGE_LIMIT}) {head * 1e3:.1f} ms"
        )
    for kind, text in _costly(rng).items():
        head = _cpu(redact_head, text, FINAL_MESSAGE_LIMIT)
        shown = redact_head(text, FINAL_MESSAGE_LIMIT) != withheld(len(text))
        print(
            f"too costly, {kind} ({len(text):,} chars): redact_head({FINAL_MESSAGE_LIMIT}) "
            f"{head * 1e3:.0f} ms, {'shown' if shown else 'withheld'}"
        )


if __name__ == "__main__":
    main()
