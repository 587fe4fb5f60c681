"""From a prompt's first paint in the pane to its form in the operator console.

A lab pane (the newest pinned Claude, or --client) runs the repeating
single-select questionnaire against the scripted model server; `akk serve`
runs in this process; the console is open in Debian's headless Chromium,
logged in through `akk ui`'s link. Each round a controller sends the task;
one thread reads the pane with `tmux capture-pane` every few milliseconds and
notes when the question is first drawn, while the page itself notes (a
MutationObserver, on the same wall clock) when the form holding it appears.
The controller then answers and waits for `done`, and the pane settles before
the next round.

    .venv/bin/python -m tools.bench_console_latency [--rounds 20] [--client claude-2.1.332]

Prints each round's latency, then the median and p99 (nearest rank; with 20
rounds, the max).
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs
import trio
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from akk.client import Controller, connect
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession, launch
from akk.qualify.scenarios import SCENARIOS
from tools.lab import clients
from tools.lab.akk_runner import OUTCOMES, Served, idle_terminal, serving
from tools.lab.browser import chromium

QUESTION = "Which color do you prefer?"
SCENARIO = "questionnaire_single3_repeating"
# Notes, on the page's own wall clock (ms since the epoch), when a form showing QUESTION
# appears; the bench reads and clears the list each round.
WATCH_FORMS = """
window.akkFormsAt = [];
new MutationObserver(() => {
  const form = document.querySelector('[data-testid="interaction-form"]');
  const seen = form !== null && form.textContent.includes(arguments[0]);
  if (seen && !window.akkFormShown) window.akkFormsAt.push(Date.now());
  window.akkFormShown = seen;
}).observe(document.body, {subtree: true, childList: true, characterData: true});
"""


def first_paint(lab: LabSession, stop: threading.Event, seen: list[float]) -> None:
    """Capture the pane every 5 ms until QUESTION shows; note the wall clock then."""
    while not stop.is_set():
        shown = subprocess.run(
            ["tmux", "-S", str(lab.socket), "capture-pane", "-p", "-t", lab.pane],
            capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        if QUESTION in shown:
            seen.append(time.time() * 1000)
            return
        time.sleep(0.005)


async def login_link(served: Served) -> str:
    done = await trio.run_process(
        [sys.executable, "-m", "akk", "ui", "--state-dir", str(served.state.path)],
        capture_stdout=True,
    )
    return done.stdout.decode().strip().splitlines()[-1]


@attrs.frozen
class Round:
    """One round's times, in seconds from the question's first paint in the pane."""

    event: float  # the controller got its interaction_required
    form: float  # the console showed the form


async def round_trip(lab: LabSession, ctl: Controller, driver: Any, n: int) -> Round:
    """One round: the task sent, the question painted, the form shown, answered, done."""
    terminal = await idle_terminal(ctl, timeout=30)
    stop, painted, woke = threading.Event(), list[float](), list[float]()
    watcher = threading.Thread(target=first_paint, args=(lab, stop, painted), daemon=True)
    watcher.start()
    request = f"{sc.ASK_TASK} (round {n})"
    sent = await ctl.call("send", {"terminal_id": terminal["terminal_id"], "request": request,
                                   "client_request_id": request})  # fmt: skip
    turn_id, form_seen = sent["turn_id"], trio.Event()

    def form_shown() -> float:
        WebDriverWait(driver, 30, poll_frequency=0.01).until(
            lambda d: d.execute_script("return window.akkFormsAt.length") > 0
        )
        return float(driver.execute_script("return window.akkFormsAt.shift();"))

    async def controller() -> None:
        """Note the wake-up; answer once the console showed the form; wait for the outcome."""
        async with aclosing(ctl.events()) as events:
            async for event in events:
                await ctl.ack(event["event_id"])
                if event["kind"] == "interaction_required" and event["turn_id"] == turn_id:
                    woke.append(time.time() * 1000)
                    await form_seen.wait()
                    status = await ctl.call("status", {"turn_id": turn_id})
                    await ctl.call("respond_interaction", answer(status["interaction"]))
                if event["kind"] in OUTCOMES and event["turn_id"] == turn_id:
                    return

    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(controller)
            shown_at = await trio.to_thread.run_sync(form_shown)
            form_seen.set()
    stop.set()
    watcher.join(5)
    assert painted and woke, "the pane never drew the question, or no wake-up came"
    await lab.wait_stable()
    return Round((woke[0] - painted[0]) / 1000, (shown_at - painted[0]) / 1000)


def answer(interaction: dict[str, Any]) -> dict[str, Any]:
    (question,) = interaction["questions"]
    return {
        "interaction_id": interaction["interaction_id"],
        "turn_id": interaction["turn_id"],
        "answers": [{"question_id": question["question_id"],
                     "response_kind": question["response_kind"],
                     "selected_option_ids": [question["options"][0]["option_id"]]}],
    }  # fmt: skip


async def main_async(client: clients.Client, count: int) -> list[Round]:
    with tempfile.TemporaryDirectory(prefix="akk-bench-console-") as tmp:
        async with (
            launch(client, SCENARIOS[SCENARIO]) as lab,
            serving(lab, Path(tmp), "ctl") as served,
            connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
        ):
            link = await login_link(served)
            with chromium() as driver:
                await trio.to_thread.run_sync(driver.get, link)
                await trio.to_thread.run_sync(
                    lambda: WebDriverWait(driver, 20).until(
                        lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid^="terminal-"]')
                    )
                )
                driver.execute_script(WATCH_FORMS, QUESTION)
                rounds = []
                for n in range(count):
                    rounds.append(await round_trip(lab, ctl, driver, n))
                    print(f"round {n + 1:2}: controller woken {rounds[-1].event * 1000:5.0f} ms, "
                          f"form shown {rounds[-1].form * 1000:5.0f} ms", flush=True)  # fmt: skip
                return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--client", help="a pinned client, e.g. claude-2.1.332 (default newest)")
    args = parser.parse_args()
    client = (
        clients.newest("claude")
        if args.client is None
        else clients.get(*args.client.rsplit("-", 1))
    )
    rounds = trio.run(main_async, client, args.rounds)
    print(f"{client.name}, {len(rounds)} rounds, from the question's first paint in the pane:")
    for what, took in (("controller woken", [r.event for r in rounds]),
                       ("form in the console", [r.form for r in rounds]),
                       ("form after the wake-up", [r.form - r.event for r in rounds])):  # fmt: skip
        took.sort()
        p99 = took[max(0, math.ceil(0.99 * len(took)) - 1)]
        print(f"  {what:<23} median {statistics.median(took) * 1000:4.0f} ms, "
              f"p99 {p99 * 1000:4.0f} ms, min {took[0] * 1000:4.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
