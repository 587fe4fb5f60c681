"""Interactions against the real pinned clients: how fast a prompt is announced and answered.

Each client runs in a lab pane (`akk.qualify.launcher.launch`) watched by `akk
serve` in this process (`tools.lab.akk_runner.serving`, its listing poll
interval unchanged), and the lab's model server runs in this process too, so
one clock (`time.monotonic`) times every end. A round is one fresh Turn: a
controller sends the task, the model answers with a tool call, the client shows
its prompt, AKK announces it, the controller calls `status` and answers (a
questionnaire with `respond_interaction`, a permission with `approve`), and the
Turn ends. The pane is reused: every step of the lab scenario repeats, so each
round's task brings the prompt again. Clients: claude 2.1.263 and 2.1.328 (an
AskUserQuestion questionnaire and a Bash permission; `--kind file` a new file's
Write, removed before each round) and codex 0.169.0 (an exec approval; `--kind
questionnaire` asks request_user_input in Plan mode instead).

Per round:

  announce     the model server writing the tool call reply's final event
               (`ModelServer.finished_at`) -> the controller receiving
               `interaction_required` / `approval_required`.
  paint        a probe that captures the pane every ~5 ms over its own tmux
               control client (from the task's arrival at the model server
               until it sees the prompt's anchor) records first sight, which
               lags the paint by up to its window (printed); the event's
               arrival minus that. It splits
               into the client drawing (tool call written -> first paint) and
               AKK: first paint -> the event's `created_at` (the Turn recorded
               the appearance; wall clock, mapped onto the monotonic one) ->
               the event received.
  answer       the `respond_interaction` / `approve` call issued -> the tool
               result arriving at the model server; on the way, the probe's
               first capture without the prompt's anchor (the keys took); and
               the call's own round trip.

A Bash or exec approval runs the command before the tool result goes out, so
its answer latency includes that command. Medians and p99 (nearest rank; with
20 samples it is the max).

    .venv/bin/python -m tools.bench_interactions [--rounds 20] [--agent claude|codex]
        [--version V] [--kind questionnaire|permission|file] [--probe-period 0.005] [--no-probe]
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

from akk.client import Controller, connect
from akk.qualify import scenarios as sc
from akk.qualify.client import AGENTS, Agent
from akk.qualify.launcher import LabSession, launch
from akk.qualify.model_server import ModelServer, RecordedRequest
from akk.tmux.activity import DEFAULT_INTERVAL
from akk.tmux.control import ControlClient, open_control_client
from tools.bench_turns import load, ready_terminal, spread, table
from tools.lab import clients
from tools.lab.akk_runner import OUTCOMES, serving
from tools.lab.clients import Client

Event = dict[str, Any]
Kind = Literal["questionnaire", "permission", "file"]
KINDS: tuple[Kind, ...] = ("questionnaire", "permission", "file")
DEFAULT_KINDS: Mapping[Agent, tuple[Kind, ...]] = {"claude": KINDS, "codex": ("permission",)}
"""What runs without --kind. Codex's questionnaire needs Plan mode (a send there is its
own risk); its exec approval needs nothing special, so it is the Codex default."""

DEFAULT_CLIENTS = ("claude-2.1.263", "claude-2.1.328", "codex-0.169.0")
SERVING_POLL_INTERVAL = 0.1
"""The listing poll interval `serving()` gives `akk serve` (tools/lab/akk_runner.py)."""
WAKE_UPS = frozenset({"interaction_required", "approval_required"})
ANSWER_LABEL = "Blue"
"""The option every questionnaire round chooses (the scenarios ask Red / Blue / Green)."""

PROBE_PERIOD = 0.005
PROBE_GRACE = 2.0
"""Seconds the probe may go on looking for the anchor after the event arrived."""
EVENT_TIMEOUT = 30.0
MODEL_TIMEOUT = 30.0
OUTCOME_TIMEOUT = 60.0
ROUND_TIMEOUT = 150.0
MAX_LAUNCHES = 3
"""Lab panes a cell may start: a failed round leaves its pane unknown, so a fresh one goes on."""


@attrs.frozen
class Shape:
    """One kind of prompt in the lab: the scenario that brings it, and how to know it."""

    kind: Kind
    scenario: str
    anchor: str
    """Text the prompt's first paint shows (what the probe looks for)."""
    answered: str
    """Text of the tool result the answer makes the client send."""
    plan_mode: bool = False
    fresh: str | None = None
    """A file of the working directory each round removes first (a new file's Write)."""


SHAPES: Mapping[tuple[Agent, Kind], Shape] = {
    ("claude", "questionnaire"): Shape(
        "questionnaire", "questionnaire_single3", "Enter to select", sc.ANSWERED_CLAUDE
    ),
    ("claude", "permission"): Shape(
        "permission", "claude_bash", "Do you want to proceed?", sc.BASH_MARKER
    ),
    ("claude", "file"): Shape(
        "file",
        "claude_write",
        "Do you want to create",
        "File created successfully",
        fresh=sc.WRITE_FILE,
    ),
    # Codex renders request_user_input only in Plan mode (LAB.md).
    ("codex", "questionnaire"): Shape(
        "questionnaire", "codex_rui_one", "enter to submit answer", sc.ANSWERED_CODEX, True
    ),
    ("codex", "permission"): Shape(
        "permission", "codex_exec", "Would you like to run the following command?", sc.EXEC_MARKER
    ),
}


def monotonic_of(created_at: str) -> float:
    """An ISO wall-clock timestamp on the `time.monotonic` scale (the offset read now)."""
    wall = datetime.datetime.fromisoformat(created_at).timestamp()
    return wall - (time.time() - time.monotonic())


class RoundFailed(Exception):
    """A round could not go on; the message says what happened instead."""


# -- the controller's side


@attrs.define
class Inbox:
    """Every event of one connection with its arrival time; acks run beside, never in the way."""

    received: list[tuple[float, Event]] = attrs.Factory(list)
    ended: bool = False
    _changed: trio.Event = attrs.Factory(trio.Event)

    async def read(self, ctl: Controller) -> None:
        """Read (and ack) until the connection ends or the task is cancelled."""
        to_ack, acks = trio.open_memory_channel[str](math.inf)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._ack, ctl, acks)
                async with aclosing(ctl.events()) as events:
                    async for event in events:
                        self.received.append((time.monotonic(), event))
                        self._wake()
                        to_ack.send_nowait(event["event_id"])
                nursery.cancel_scope.cancel()
        finally:
            self.ended = True
            self._wake()

    async def first(self, wanted: Callable[[Event], bool], timeout: float) -> tuple[float, Event]:
        """The first event (received already or still to come) `wanted` accepts.

        Raises trio.TooSlowError at the timeout, LookupError if the connection ended first.
        """
        checked = 0
        with trio.fail_after(timeout):
            while True:
                for at, event in self.received[checked:]:
                    if wanted(event):
                        return at, event
                checked = len(self.received)
                if self.ended:
                    raise LookupError("the controller's connection ended first")
                await self._changed.wait()

    @staticmethod
    async def _ack(ctl: Controller, acks: trio.MemoryReceiveChannel[str]) -> None:
        async for event_id in acks:
            await ctl.ack(event_id)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


@asynccontextmanager
async def controller(url: str, token: str) -> AsyncIterator[tuple[Controller, Inbox]]:
    """A connected controller whose events an Inbox reads (and acks) in the background."""
    async with connect(url, token) as ctl, trio.open_nursery() as nursery:
        inbox = Inbox()
        nursery.start_soon(inbox.read, ctl)
        yield ctl, inbox
        nursery.cancel_scope.cancel()


def answer_call(shape: Shape, turn_id: str, shown: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The method and params that answer the prompt `status` showed."""
    if shape.kind in ("permission", "file"):
        return "approve", {"turn_id": turn_id, "decision": "approve_once"}
    (question,) = shown["questions"]
    chosen = [o["option_id"] for o in question["options"] if o["label"] == ANSWER_LABEL]
    return "respond_interaction", {
        "interaction_id": shown["interaction_id"],
        "turn_id": turn_id,
        "answers": [
            {
                "question_id": question["question_id"],
                "response_kind": question["response_kind"],
                "selected_option_ids": chosen,
            }
        ],
    }


# -- the probe


@attrs.define
class Sighting:
    """When the probe first saw a prompt's anchor on the pane."""

    at: float | None = None
    """Monotonic time the first capture showing the anchor returned."""
    window: float | None = None
    """From the previous capture's start to `at`: the paint happened in there."""
    stale: bool = False
    """The probe's very first capture showed it already: no first paint to time."""


@attrs.frozen
class Probe:
    """Captures one pane through its own no-output tmux control client (no process per capture)."""

    client: ControlClient
    pane: str
    period: float

    async def sight(
        self, server: ModelServer, task: Callable[[RecordedRequest], bool], anchor: str
    ) -> Sighting:
        """Capture every `period` s from the task's arrival at `server` until `anchor` shows.

        Gives up (an empty Sighting) after EVENT_TIMEOUT; cancel it when it is no longer wanted.
        """
        seen = Sighting()
        with trio.move_on_after(EVENT_TIMEOUT):
            await server.wait_for_request(task, timeout=EVENT_TIMEOUT)
            previous: float | None = None
            while True:
                issued = time.monotonic()
                screen = await self.client.command("capture-pane", "-p", "-t", self.pane)
                if any(anchor in line for line in screen):
                    seen.at = time.monotonic()
                    seen.stale = previous is None
                    seen.window = None if previous is None else seen.at - previous
                    return seen
                previous = issued
                await trio.sleep(max(0.0, issued + self.period - time.monotonic()))
        return seen

    async def gone(self, anchor: str) -> float | None:
        """When `anchor` was first off the pane (the keys took); None after EVENT_TIMEOUT."""
        with trio.move_on_after(EVENT_TIMEOUT):
            while True:
                issued = time.monotonic()
                screen = await self.client.command("capture-pane", "-p", "-t", self.pane)
                if not any(anchor in line for line in screen):
                    return time.monotonic()
                await trio.sleep(max(0.0, issued + self.period - time.monotonic()))
        return None


@asynccontextmanager
async def probing(lab: LabSession, period: float | None) -> AsyncIterator[Probe | None]:
    """A Probe on the lab pane, or None when `period` is None (no probe)."""
    if period is None:
        yield None
        return
    async with open_control_client(lab.socket) as client:
        yield Probe(client, lab.pane, period)


# -- measuring


@attrs.define
class Round:
    """One round's times in seconds (None: not measured, e.g. without the probe)."""

    announce: float | None = None
    emit_to_paint: float | None = None
    paint_to_event: float | None = None
    paint_to_created: float | None = None
    created_to_event: float | None = None
    probe_window: float | None = None
    paint_to_call: float | None = None
    answer: float | None = None
    prompt_gone: float | None = None
    call: float | None = None
    notes: list[str] = attrs.Factory(list)


@attrs.define
class Samples:
    """One (client, kind) cell's completed rounds, and what went wrong."""

    client: Client
    shape: Shape
    rounds: list[Round] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    watchers: list[dict[str, Any]] = attrs.Factory(list)
    launches: int = 0
    took: float = 0.0

    def values(self, field: str) -> list[float]:
        """One measure over the completed rounds that have it."""
        found = (getattr(r, field) for r in self.rounds)
        return [v for v in found if v is not None]


async def one_round(
    lab: LabSession, ctl: Controller, inbox: Inbox, n: int, shape: Shape, probe: Probe | None
) -> Round:
    """Send the task, time the prompt's announcement and its answer, wait for the outcome.

    Raises RoundFailed (or trio.TooSlowError, RequestTimeout) when the round cannot finish.
    """
    done = Round()
    terminal_id = await ready_terminal(ctl)
    text = f"{lab.scenario.task} #{n:03d}"
    if shape.fresh is not None:
        (lab.workdir / shape.fresh).unlink(missing_ok=True)

    def is_task(r: RecordedRequest) -> bool:
        return not r.auxiliary and text in r.newest_input

    async with trio.open_nursery() as nursery:
        sighting = Sighting()
        if probe is not None:

            async def look(probe: Probe) -> None:
                nonlocal sighting
                sighting = await probe.sight(lab.server, is_task, shape.anchor)

            nursery.start_soon(look, probe)
        sent = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": text, "client_request_id": f"i{n}"}
        )
        turn_id = sent["turn_id"]
        received, event = await inbox.first(
            lambda e: e["kind"] in WAKE_UPS | OUTCOMES and e.get("turn_id") == turn_id,
            EVENT_TIMEOUT,
        )
        if event["kind"] in OUTCOMES:
            raise RoundFailed(f"the Turn ended {event['kind']} first: {event.get('summary')}")
        # A probe that has not seen the anchor yet gets a moment more, then stops.
        nursery.cancel_scope.deadline = trio.current_time() + PROBE_GRACE
    task = await lab.server.wait_for_request(is_task, timeout=1.0)
    emitted = lab.server.finished_at.get(task.index)
    if emitted is None:
        done.notes.append("the tool call reply was not written completely")
    else:
        done.announce = received - emitted
    created = monotonic_of(event["created_at"])
    done.created_to_event = received - created
    if sighting.stale:
        done.notes.append("the anchor was on screen before the probe started")
    elif sighting.at is not None and sighting.window is not None:
        done.paint_to_event = received - sighting.at
        done.paint_to_created = created - sighting.at
        done.probe_window = sighting.window
        if emitted is not None:
            done.emit_to_paint = sighting.at - emitted
    elif probe is not None:
        done.notes.append(f"the probe never saw {shape.anchor!r}")

    shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
    if shown is None:
        raise RoundFailed("`status` showed no interaction after the wake-up")
    method, params = answer_call(shape, turn_id, shown)
    async with trio.open_nursery() as nursery:
        issued = time.monotonic()
        if sighting.at is not None and not sighting.stale:
            done.paint_to_call = issued - sighting.at
        if probe is not None:

            async def watch_gone(probe: Probe) -> None:
                if (at := await probe.gone(shape.anchor)) is not None:
                    done.prompt_gone = at - issued

            nursery.start_soon(watch_gone, probe)
        reply = await ctl.call(method, params)
        done.call = time.monotonic() - issued
    if reply.get("outcome") != "dispatched":
        done.notes.append(f"{method} answered {reply.get('outcome')!r}")
    answered = await lab.server.wait_for_request(
        lambda r: not r.auxiliary and r.index > task.index and shape.answered in r.newest_input,
        timeout=MODEL_TIMEOUT,
    )
    done.answer = answered.at - issued
    _, outcome = await inbox.first(
        lambda e: e["kind"] in OUTCOMES and e.get("turn_id") == turn_id, OUTCOME_TIMEOUT
    )
    if outcome["kind"] != "done":
        done.notes.append(f"the Turn ended {outcome['kind']}")
    return done


async def watcher_health(url: str, operator_token: str) -> list[dict[str, Any]]:
    """The watchers' health as `doctor` reports it (output clients, failures)."""
    async with connect(url, operator_token) as operator:
        report = await operator.call("doctor")
    watchers: list[dict[str, Any]] = report.get("watchers", [])
    return watchers


async def measure(
    client: Client, shape: Shape, rounds: int, probe_period: float | None, root: Path
) -> Samples:
    """`rounds` Turns through one pane and one in-process `akk serve`; relaunched on a failure."""
    started = time.monotonic()
    samples = Samples(client, shape)
    scenario = sc.repeating(sc.SCENARIOS[shape.scenario])
    while len(samples.rounds) < rounds and samples.launches < MAX_LAUNCHES:
        samples.launches += 1
        here = root / f"{client.name}-{shape.kind}-{samples.launches}"
        try:
            async with (
                launch(client, scenario, plan_mode=shape.plan_mode) as lab,
                serving(lab, here) as served,
                controller(served.endpoint.url, served.tokens["ctl"]) as (ctl, inbox),
                probing(lab, probe_period) as probe,
            ):
                while len(samples.rounds) < rounds:
                    with trio.fail_after(ROUND_TIMEOUT):
                        n = len(samples.rounds)
                        samples.rounds.append(await one_round(lab, ctl, inbox, n, shape, probe))
                samples.watchers = await watcher_health(served.endpoint.url, served.state.token())
        except Exception as exc:  # reported with the table; a fresh pane goes on
            samples.notes.append(
                f"launch {samples.launches} stopped after {len(samples.rounds)} rounds: {_why(exc)}"
            )
        finally:
            shutil.rmtree(here, ignore_errors=True)
    samples.took = time.monotonic() - started
    return samples


def _why(exc: BaseException) -> str:
    """The innermost errors of `exc` (nurseries wrap them in groups), one short line."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_why(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"[:300].replace("\n", " | ")


# -- report


def _ms(values: Sequence[float]) -> list[str]:
    """Median, p99 and max in whole milliseconds."""
    if not values:
        return ["-", "-", "-"]
    return [f"{1000 * v:.0f}" for v in spread(values)]


MEASURES: tuple[tuple[str, str, bool], ...] = (
    ("announce: tool call written -> event", "announce", False),
    ("  client: tool call written -> first paint", "emit_to_paint", True),
    ("  akk: first paint -> event", "paint_to_event", True),
    ("    first paint -> event created_at", "paint_to_created", True),
    ("    event created_at -> received", "created_to_event", False),
    ("first paint -> answer call sent (status between)", "paint_to_call", True),
    ("answer: call sent -> tool result at model", "answer", False),
    ("  call sent -> prompt's anchor off the pane", "prompt_gone", True),
    ("  the call's round trip", "call", False),
)
"""Table rows: label, Round field, whether the probe measures it."""


def report(client: Client, cells: Sequence[Samples], probing: bool) -> None:
    print(f"\n{client.name}  (ms; median and p99, nearest rank)")
    header = ["measure"]
    for s in cells:
        header += [f"{s.shape.kind}: n", "median", "p99"]
    rows: list[list[object]] = []
    for label, field, needs_probe in MEASURES:
        if needs_probe and not probing:
            continue
        row: list[object] = [label]
        for s in cells:
            values = s.values(field)
            row += [len(values), *_ms(values)[:2]]
        rows.append(row)
    table(header, rows)
    for s in cells:
        windows = s.values("probe_window")
        window = f"{1000 * spread(windows)[0]:.1f} ms" if windows else "-"
        outputs = [w.get("output_clients", "?") for w in s.watchers]
        print(
            f"  {s.shape.kind}: {len(s.rounds)} rounds in {s.launches} launch(es), "
            f"{s.took:.0f} s; probe window median {window}; "
            f"watcher output clients at the end {outputs}"
        )
        for n, r in enumerate(s.rounds):
            for note in r.notes:
                print(f"    ! round {n}: {note}")
        for note in s.notes:
            print(f"    ! {note}")
    sys.stdout.flush()


def code_version() -> str:
    """The commit under test, and whether akk/ has uncommitted changes (read-only git)."""
    try:
        head = subprocess.run(
            ["git", "log", "--oneline", "-1"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "akk"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    changed = ", ".join(line[3:] for line in dirty)
    return f"{head[:72]}" + (f"\n  uncommitted in akk/: {changed}" if dirty else "")


# -- command line


@attrs.frozen
class Settings:
    clients: tuple[Client, ...]
    kind: Kind | None
    """None: each agent's DEFAULT_KINDS."""
    rounds: int
    probe_period: float | None


def _parse() -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="Turns per client and prompt kind")
    parser.add_argument("--agent", choices=AGENTS)
    parser.add_argument("--version", help="a pinned version of --agent (default: the bench's)")
    parser.add_argument("--kind", choices=KINDS, help="one kind of prompt (default: DEFAULT_KINDS)")
    parser.add_argument("--probe-period", type=float, default=PROBE_PERIOD)
    parser.add_argument("--no-probe", action="store_true", help="no pane captures besides AKK's")
    args = parser.parse_args()
    if args.rounds < 1 or args.probe_period <= 0:
        parser.error("--rounds and --probe-period must be positive")
    if args.version is not None and args.agent is None:
        parser.error("--version needs --agent")
    if args.kind == "file" and args.agent == "codex":
        parser.error("--kind file is Claude's (a new file's Write)")
    if args.version is not None:
        try:
            chosen = [clients.get(args.agent, args.version)]
        except clients.UnsupportedClient as exc:
            parser.error(str(exc))
    else:
        chosen = [clients.get(*name.split("-", 1)) for name in DEFAULT_CLIENTS]
        chosen = [c for c in chosen if args.agent in (None, c.agent)]
    probe_period = None if args.no_probe else args.probe_period
    return Settings(tuple(chosen), args.kind, args.rounds, probe_period)


async def run(settings: Settings, root: Path) -> None:
    began = time.monotonic()
    print(f"code: {code_version()}")
    print(
        f"akk serve in process (tools.lab.akk_runner.serving): listing poll interval "
        f"{SERVING_POLL_INTERVAL:g} s (`akk serve`'s own default is {DEFAULT_INTERVAL:g} s)"
    )
    probe = (
        f"capture-pane every {1000 * settings.probe_period:g} ms (own tmux control client) "
        "from the task's "
        "arrival at the model server to the prompt's first sight"
        if settings.probe_period is not None
        else "off"
    )
    print(f"probe: {probe}")
    print(f"{os.cpu_count()} CPUs; load average at start {load()}")
    for client in settings.clients:
        cells = [
            await measure(
                client, SHAPES[client.agent, kind], settings.rounds, settings.probe_period, root
            )
            for kind in ((settings.kind,) if settings.kind else DEFAULT_KINDS[client.agent])
            if (client.agent, kind) in SHAPES  # a new file's Write is Claude's
        ]
        report(client, cells, settings.probe_period is not None)
    print(f"\nwhole run took {time.monotonic() - began:.0f} s; load now {load()}")


def main() -> None:
    settings = _parse()
    # A plain `kill` still runs the clean-up (lab panes, akk serve's tasks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(tempfile.mkdtemp(prefix="akk-bench-interactions-"))
    try:
        trio.run(run, settings, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
