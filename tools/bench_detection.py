"""Detection lag: a prompt first visible in the pane → `status` shows it.

Runs a real pinned client in the lab with a scripted questionnaire (Claude) or
exec approval (Codex), and `akk serve` watching its private tmux server. Two
probes run side by side every 10 ms: `tmux capture-pane` looking for the
prompt's anchor text, and the controller's `status` call looking for the
interaction. The lag is the difference between their first sightings (so
each carries up to one probe period of noise); the prompt is answered at the
pane and asked again --rounds times.

Each client runs in two modes, a fresh lab and server each: `poll`, the
listing alone (no output clients: how AKK detected prompts before pane output
became a signal), and `output`, the default (pane output marks the pane dirty).

    .venv/bin/python -m tools.bench_detection [--clients claude@2.1.263 codex@0.169.0]
        [--modes poll output] [--rounds 20] [--interval 0.25]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from akk.client import Controller, connect
from akk.config import ServiceConfig
from akk.qualify.launcher import LabSession, launch
from akk.qualify.scenarios import (
    ASK_TASK,
    AskUserQuestion,
    ExecCommand,
    Option,
    Question,
    Scenario,
    Step,
)
from akk.service import run_service
from akk.store.location import StateDir
from akk.tmux import output
from tools.lab import clients
from tools.lab.akk_runner import mint_offline

PROBE = 0.01
ANCHORS = {"claude": "Enter to select", "codex": "Would you like to run"}
ANSWER_KEYS = {"claude": "Enter", "codex": "y"}
MODES = ("poll", "output")


@contextmanager
def output_signals(mode: str) -> Iterator[None]:
    """Run the watchers `akk serve` starts with (output) or without (poll) output clients."""
    saved = output.MAX_OUTPUT_CLIENTS
    if mode == "poll":
        output.MAX_OUTPUT_CLIENTS = 0
    try:
        yield
    finally:
        output.MAX_OUTPUT_CLIENTS = saved


def scenario(agent: str) -> Scenario:
    question = Question("Which color do you prefer?", "Color", (Option("Red"), Option("Blue")))
    reply = AskUserQuestion((question,)) if agent == "claude" else ExecCommand("touch ../x")
    return Scenario("detection", task=ASK_TASK, steps=(Step(ASK_TASK, reply, repeat=True),))


async def first_on_screen(lab: LabSession, anchor: str, seen: dict[str, float]) -> None:
    while anchor not in await lab.text():
        await trio.sleep(PROBE)
    seen["screen"] = trio.current_time()


async def first_in_status(ctl: Controller, terminal_id: str, seen: dict[str, float]) -> None:
    while (await ctl.call("status", {"terminal_id": terminal_id}))["interaction"] is None:
        await trio.sleep(PROBE)
    seen["status"] = trio.current_time()


async def answer(lab: LabSession) -> None:
    """Answer like a person (Claude: the first option, through any review step; Codex:
    approve the harmless command) so the next ask starts from a clean conversation."""
    anchor = ANCHORS[lab.agent]
    for _ in range(4):
        await lab.send_keys(ANSWER_KEYS[lab.agent])
        with trio.move_on_after(1.5):
            await lab.wait_for_screen(lambda screen: anchor not in screen, 5)
            return
    raise RuntimeError(f"{lab.client.name}: the prompt did not go away")


async def settled(ctl: Controller, terminal_id: str) -> None:
    """Wait until AKK, too, shows the terminal idle with no prompt."""
    while True:
        status = await ctl.call("status", {"terminal_id": terminal_id})
        if status["interaction"] is None and status["terminal"]["activity_state"] == "idle":
            return
        await trio.sleep(PROBE)


async def measure(agent: str, version: str, rounds: int, interval: float, mode: str) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="akk-bench-") as scratch, output_signals(mode):
        return await _measure(agent, version, rounds, interval, StateDir(Path(scratch) / "akk"))


async def _measure(
    agent: str, version: str, rounds: int, interval: float, state: StateDir
) -> list[float]:
    lags: list[float] = []
    token = mint_offline(state, "bench")["bench"]
    async with (
        launch(clients.get(agent, version), scenario(agent)) as lab,
        trio.open_nursery() as nursery,
    ):
        config = ServiceConfig(
            state=state, port=0, tmux_sockets=(str(lab.socket),), poll_interval=interval
        )
        endpoint = await nursery.start(
            lambda task_status: run_service(config, task_status=task_status)
        )
        async with connect(endpoint.url, token) as ctl:
            with trio.fail_after(30):
                while not (rows := (await ctl.call("list"))["terminals"]):
                    await trio.sleep(PROBE)
            terminal_id = rows[0]["terminal_id"]
            for _ in range(rounds):
                with trio.fail_after(60):
                    await lab.wait_idle()
                    await settled(ctl, terminal_id)
                    seen: dict[str, float] = {}
                    async with trio.open_nursery() as probes:
                        probes.start_soon(first_on_screen, lab, ANCHORS[agent], seen)
                        probes.start_soon(first_in_status, ctl, terminal_id, seen)
                        await lab.submit(ASK_TASK)
                    lags.append(seen["status"] - seen["screen"])
                    await answer(lab)
        nursery.cancel_scope.cancel()
    return lags


def summary(lags: list[float]) -> str:
    ordered = sorted(lags)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"median {1000 * statistics.median(ordered):4.0f} ms  p99 {1000 * p99:4.0f} ms  "
        f"max {1000 * ordered[-1]:4.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--clients", nargs="+", default=["claude@2.1.263", "codex@0.169.0"], metavar="AGENT@VER"
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.25, help="akk serve --poll-interval")
    args = parser.parse_args()
    print(f"poll interval {args.interval} s, {args.rounds} prompts per client and mode")
    for client in args.clients:
        agent, _, version = client.partition("@")
        if agent not in ANCHORS or not version:
            parser.error(f"{client!r}: expected claude@VERSION or codex@VERSION")
        for mode in args.modes:
            lags = trio.run(measure, agent, version, args.rounds, args.interval, mode)
            print(f"{agent} {version:8} {mode:6}  {summary(lags)}", flush=True)


if __name__ == "__main__":
    main()
