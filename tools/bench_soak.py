"""A soak: thousands of real managed Turns through one `akk serve`, pruning as it goes.

One lab pane (scenario `echo`, default the newest pinned Claude) and one `akk serve`
child (`tools.lab.akk_runner.AkkProcess`) started with `--retain-days` and
`--prune-every` small enough that pruning runs during the soak. One controller
sends N Turns (default 2,000) one after another, each once the pane is idle again,
and acks every event. Every `--every` Turns (default 250) it prints a row:

  turns     Turns ended so far (every one must end `done`, with its task at the model once)
  rss       akk serve's resident set (MiB)
  fds       akk serve's open descriptors
  store     the store's files on disk (akk.db + its WAL, KiB)
  rows      rows per table of the store (the largest ones)
  rate      Turns per second over the last block

`list` and `status` latency (median and p99 of 50 calls each, nearest rank) are
measured once at the start (after the first Turn) and once at the end. The goal
(issue 23): akk serve's RSS grows less than 10 % from Turn 500 to the end, and the
store stops growing once pruning runs. Every few blocks the bench clears the
client's conversation (`/clear` typed into the pane, as a person would) so that
the agent's own context does not grow without bound; that is the client's
memory, not AKK's, and AKK sees it as a person's action on an idle pane.

    .venv/bin/python -m tools.bench_soak [--client claude-2.1.332] [--turns 2000]
        [--every 250] [--retain-days 0.0003] [--prune-every 20]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import apsw
import attrs
import trio

from akk.client import Controller
from akk.qualify.launcher import LabSession, launch
from akk.qualify.scenarios import SCENARIOS
from akk.tmux import keys
from akk.tmux.control import open_control_client
from tools.bench_serve_idle import descriptors, rss_kib
from tools.bench_turns import (
    OUTCOME_TIMEOUT,
    Inbox,
    controller,
    kill_akk,
    load,
    parse_client,
    ready_terminal,
    spread,
    start_akk,
    table,
)
from tools.lab.akk_runner import AkkProcess
from tools.lab.clients import Client

LATENCY_CALLS = 50
"""Calls of `list` and of `status` per latency sample."""
CLEAR_EVERY_BLOCKS = 2
"""Blocks between two `/clear`s of the client's conversation."""


@attrs.frozen
class Settings:
    client: Client
    turns: int
    every: int
    retain_days: float
    prune_every: float


@attrs.define
class Soak:
    """What the soak saw; a non-empty `problems` means the run failed."""

    rows: list[list[object]] = attrs.Factory(list)
    rss_mib: list[tuple[int, float]] = attrs.Factory(list)
    store_kib: list[tuple[int, float]] = attrs.Factory(list)
    latency: dict[str, list[str]] = attrs.Factory(dict)
    problems: list[str] = attrs.Factory(list)


def _store_kib(store: Path) -> float:
    """The store's file and its WAL and shared-memory files."""
    return sum(p.stat().st_size for p in store.parent.glob(store.name + "*")) / 1024


def _row_counts(store: Path) -> dict[str, int]:
    """Rows per table, read through a read-only connection beside the server's writer."""
    conn = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = [
            str(name)
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        counts = {}
        for name in names:
            (count,) = conn.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0]
            counts[name] = int(str(count))
        return counts
    finally:
        conn.close()


async def _latencies(ctl: Controller, turn_id: str) -> list[str]:
    """Median and p99 (ms) of `list`, then of `status` of one Turn."""
    out = []
    for method, params in (("list", {}), ("status", {"turn_id": turn_id})):
        samples = []
        for _ in range(LATENCY_CALLS):
            began = time.monotonic()
            await ctl.call(method, params)
            samples.append(time.monotonic() - began)
        median, p99, _ = spread(samples)
        out.append(f"{method} {median * 1000:.1f} / {p99 * 1000:.1f} ms")
    return out


async def _turn(lab: LabSession, ctl: Controller, inbox: Inbox, n: int) -> str:
    """One Turn to `done`, its task at the model exactly once; its turn_id."""
    terminal_id = await ready_terminal(ctl)
    text = f"lab: say hello soak {n:05d}"
    sent = await ctl.call(
        "send", {"terminal_id": terminal_id, "request": text, "client_request_id": f"s{n}"}
    )
    got = await inbox.outcome(sent["turn_id"], OUTCOME_TIMEOUT)
    if got is None or got[1]["kind"] != "done":
        raise AssertionError(f"Turn {n}: {got[1]['kind'] if got else 'no outcome'}")
    reached = lab.server.count_inputs_containing(text)
    if reached != 1:
        raise AssertionError(f"Turn {n}: the task reached the model {reached} times")
    return str(sent["turn_id"])


async def _clear(lab: LabSession, ctl: Controller) -> None:
    """Type `/clear` at the idle composer, as a person would, and wait for idle again."""
    await ready_terminal(ctl)
    async with open_control_client(lab.socket) as client:
        await keys.type_literal(client, lab.pane, "/clear")
        await lab.wait_stable(quiet=0.3)
        await keys.press(client, lab.pane, "Enter")
    await lab.wait_idle(30)


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(unreadable: {exc})"


def _sample(result: Soak, done: int, pid: int, store: Path, rate: float) -> None:
    """One row: akk serve's RSS and descriptors, the store's size and its largest tables."""
    rss, size = rss_kib(pid) / 1024, _store_kib(store)
    counts = sorted(_row_counts(store).items(), key=lambda kv: -kv[1])[:5]
    largest = " ".join(f"{k}={v}" for k, v in counts)
    result.rss_mib.append((done, rss))
    result.store_kib.append((done, size))
    result.rows.append(
        [done, f"{rss:.1f}", descriptors(pid), f"{size:.0f}", largest, f"{rate:.2f}"]
    )


async def soak(settings: Settings, root: Path) -> Soak:
    result = Soak()
    async with launch(settings.client, SCENARIOS["echo"]) as lab:
        akk = AkkProcess(lab, root)
        try:
            options = ("--retain-days", f"{settings.retain_days:g}",
                       "--prune-every", f"{settings.prune_every:g}")  # fmt: skip
            url = await start_akk(akk, None, *options)
            assert akk.proc is not None
            pid, store = akk.proc.pid, akk.state.store_path
            async with controller(url, akk.tokens["ctl"]) as (ctl, inbox):
                turn_id = await _turn(lab, ctl, inbox, 0)
                result.latency["start"] = await _latencies(ctl, turn_id)
                block_began = time.monotonic()
                for n in range(1, settings.turns):
                    turn_id = await _turn(lab, ctl, inbox, n)
                    done = n + 1
                    if done % settings.every:
                        continue
                    rate = settings.every / (time.monotonic() - block_began)
                    _sample(result, done, pid, store, rate)
                    print("  " + "  ".join(str(c) for c in result.rows[-1]), flush=True)
                    if (done // settings.every) % CLEAR_EVERY_BLOCKS == 0:
                        await _clear(lab, ctl)
                    block_began = time.monotonic()
                result.latency["end"] = await _latencies(ctl, turn_id)
        except Exception as exc:  # reported with akk serve's log; the soak ends there
            result.problems.append(f"{type(exc).__name__}: {exc}")
            result.problems.append("akk serve's log ends:\n" + _tail(akk.log_path))
        finally:
            await kill_akk(akk)
    return result


def report(settings: Settings, result: Soak) -> None:
    print()
    table(["turns", "rss MiB", "fds", "store KiB", "largest tables", "Turns/s"], result.rows)
    for when, values in result.latency.items():
        print(f"  {when}: " + ", ".join(values))
    at_500 = [rss for turns, rss in result.rss_mib if turns >= 500]
    if len(at_500) >= 2:
        growth = (at_500[-1] - at_500[0]) / at_500[0] * 100
        print(f"  RSS from Turn {result.rss_mib[-len(at_500)][0]} to the end: {growth:+.1f} %"
              " (goal: < 10 %)")  # fmt: skip
    if len(result.store_kib) >= 2:
        half = result.store_kib[len(result.store_kib) // 2 :]
        print(f"  store over the second half: {half[0][1]:.0f} -> {half[-1][1]:.0f} KiB")
    for problem in result.problems:
        print(f"  PROBLEM: {problem}")


def _parse() -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", type=parse_client, default=parse_client("claude-2.1.332"))
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--every", type=int, default=250, help="Turns between two rows")
    parser.add_argument("--retain-days", type=float, default=0.0003, help="about 26 s")
    parser.add_argument("--prune-every", type=float, default=20.0, help="seconds")
    args = parser.parse_args()
    if args.turns < 2 or args.every < 1:
        parser.error("--turns must be >= 2 and --every >= 1")
    return Settings(args.client, args.turns, args.every, args.retain_days, args.prune_every)


def main() -> None:
    settings = _parse()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(tempfile.mkdtemp(prefix="akk-bench-soak-"))
    print(f"soak: {settings.turns} Turns on {settings.client.name}; load {load()}", flush=True)
    began = time.monotonic()
    try:
        result = trio.run(soak, settings, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(settings, result)
    print(f"\nwhole run took {time.monotonic() - began:.0f} s; load now {load()}")
    sys.exit(1 if result.problems else 0)


if __name__ == "__main__":
    main()
