"""Watches against the real pinned clients: how fast a person's task is observed to its end.

Each trial starts a fresh lab pane (scenario `slow`, whose reply the model
server holds until signalled), has the lab type the task as a person would,
watches it through `akk serve` (in this process, so one monotonic clock times
both ends), then releases the reply:

  watch    the `watch` call issued -> its reply (the record bound to the pane's
           exact incarnation, the evidence position taken);
  done     the model server writing the final event of the reply
           (`ModelServer.finished_at`) -> the controller receiving `done`.

Median, p99 (nearest rank) and max per client.

    .venv/bin/python -m tools.bench_watch [--clients claude-2.1.328 codex-0.169.0] [--trials 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import trio

from akk.client import connect
from akk.qualify.launcher import launch
from akk.qualify.scenarios import SCENARIOS, SLOW_SIGNAL, SLOW_TASK
from tools.bench_turns import parse_client, spread, table
from tools.lab.akk_runner import idle_terminal, outcome, serving
from tools.lab.clients import Client
from tools.lab.installer import install

NEWEST = ("claude-2.1.328", "codex-0.169.0")


async def trial(client: Client) -> tuple[float, float]:
    """One watched task: (watch call seconds, reply end -> done seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            launch(client, SCENARIOS["slow"]) as lab,
            serving(lab, Path(tmp), "ctl") as served,
            connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
        ):
            await idle_terminal(ctl, timeout=30)
            await lab.submit(SLOW_TASK)
            with trio.fail_after(20):
                while (rows := (await ctl.call("list"))["terminals"])[0][
                    "activity_state"
                ] != "working":
                    await trio.sleep(0.02)
            asked = time.monotonic()
            watched = await ctl.call("watch", {"terminal_id": rows[0]["terminal_id"]})
            watch_seconds = time.monotonic() - asked
            lab.server.signal(SLOW_SIGNAL)
            event = await outcome(ctl, watched["watch_id"])
            arrived = time.monotonic()
            assert event["kind"] == "done", event
            finished = max(lab.server.finished_at.values())
            return watch_seconds, arrived - finished


async def main(chosen: list[Client], trials: int) -> None:
    rows = []
    for client in chosen:
        samples = [await trial(client) for _ in range(trials)]
        watch = spread([w for w, _ in samples])
        done = spread([d for _, d in samples])
        rows.append((client.name, trials, *(f"{s * 1000:.0f} ms" for s in (*watch, *done))))
    print(f"watch: call and reply end -> done ({trials} trials each)")
    table(
        ("client", "n", "watch med", "p99", "max", "done med", "p99", "max"),
        rows,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", nargs="+", type=parse_client, default=None)
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    picked = args.clients or [parse_client(name) for name in NEWEST]
    for client in picked:
        install(client)
    trio.run(main, picked, args.trials)
