"""Managed Turns against the real pinned clients: send and done latency, and a SIGKILL matrix.

Every part runs `akk serve` as a child process (`tools.lab.akk_runner.AkkProcess`)
beside a lab pane (`akk.qualify.launcher.launch`, scenario `echo`), whose model
server runs in this process, so one monotonic clock times both ends:

  latency  N sends per pinned client (default 20; every pinned client unless
           --clients), one after another, each once the pane is idle again.
           Send latency: the `send` call issued -> the task reaching the model
           server. Done latency: the model server writing the final event of
           the Turn's last reply (`ModelServer.finished_at`) -> the controller
           receiving `done`. Median, p99 (nearest rank; with 20 samples it is
           the max) and max.
  faults   For every point a send passes (akk.faults.SEND_POINTS),
           T trials (default 20) per client (default: the newest Claude and
           Codex): `akk serve` armed to SIGKILL itself there, a send, then a
           restart without the fault and a check of what the controller got
           and what the model server saw. Trials of one (client, point) share
           one lab pane (each with its own state directory and task text); cells
           run `--parallel` at a time (default 2), each in its own pane: on this
           2-core machine that doubles the throughput without slowing any trial
           (the default run takes about 20-25 minutes).

    .venv/bin/python -m tools.bench_turns [--only latency|faults]
        [--clients claude-2.1.328 codex-0.169.0] [--sends 20]
        [--fault-clients ...] [--trials 20] [--points reserved enter_sent ...] [--parallel 2]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.client import Controller, connect
from akk.faults import BEFORE_ENTER, SEND_POINTS, Point
from akk.qualify import client as qualify_client
from akk.qualify.launcher import CLAUDE_PROMPT, CODEX_PROMPT, LabError, LabSession, launch
from akk.qualify.scenarios import SCENARIOS
from tools.lab import clients
from tools.lab.akk_runner import OUTCOMES, AkkProcess
from tools.lab.clients import Client

Event = dict[str, Any]


FAULT_CLIENTS = ("claude-2.1.328", "codex-0.169.0")
"""The newest pinned client of each family: the fault matrix's default."""
READY_TIMEOUT = 30.0
"""Seconds for AKK to show the lab pane idle under its exact profile."""
OUTCOME_TIMEOUT = 60.0
FIRST_LIFE_TIMEOUT = 60.0
"""Seconds from the armed server's start to its death (a point never reached counts)."""
AFTER_RESTART_TIMEOUT = 60.0
"""Seconds the restarted server has to deliver the Turn's outcome."""
GRACE = 1.5
"""Seconds of listening after the outcome, for a second outcome under another event_id."""
TRIAL_TIMEOUT = 240.0
PANE_SETTLE_TIMEOUT = 30.0
DRAFT_MARK = "lab: fault"
"""Every fault trial's task starts with this, so a left-over draft is recognizable."""
PROMPT = {"claude": CLAUDE_PROMPT, "codex": CODEX_PROMPT}


def parse_client(name: str) -> Client:
    agent, _, version = name.partition("-")
    try:
        return clients.get(agent, version)
    except clients.UnsupportedClient as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def nearest_rank(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of ``samples`` by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def spread(samples: Sequence[float]) -> tuple[float, float, float]:
    """Median, p99 (nearest rank) and max of ``samples``."""
    ordered = sorted(samples)
    return ordered[(len(ordered) - 1) // 2], nearest_rank(ordered, 0.99), ordered[-1]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print an aligned plain-text table (first column left, the rest right)."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        line = "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        print(f"  {line}")
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))
    sys.stdout.flush()


@attrs.define
class Inbox:
    """Every event one controller connection received, with its arrival time; acks each."""

    received: list[tuple[float, Event]] = attrs.Factory(list)
    answered: int = 0
    """How many received events' acks got an answer (or failed: the server died)."""
    ended: bool = False
    _changed: trio.Event = attrs.Factory(trio.Event)

    async def read(self, ctl: Controller) -> None:
        """Read until the connection ends; an ack that fails (the server died) is not retried."""
        try:
            async with aclosing(ctl.events()) as events:
                async for event in events:
                    self.received.append((time.monotonic(), event))
                    self._wake()
                    try:
                        await ctl.ack(event["event_id"])
                    except Exception:
                        return
                    finally:
                        self.answered += 1
                        self._wake()
        finally:
            self.ended = True
            self._wake()

    def outcomes(self, turn_id: str | None = None) -> list[tuple[float, Event]]:
        return [
            (at, e)
            for at, e in self.received
            if e["kind"] in OUTCOMES and turn_id in (None, e.get("turn_id"))
        ]

    async def outcome(self, turn_id: str | None, timeout: float) -> tuple[float, Event] | None:
        """The first outcome event (of `turn_id`, or any); None at the timeout or connection end."""
        with trio.move_on_after(timeout):
            while not (found := self.outcomes(turn_id)) and not self.ended:
                await self._changed.wait()
            return found[0] if found else None
        return None

    async def acks_answered(self, timeout: float) -> None:
        """Wait until every ack sent so far was answered (an armed `acked` point fires then)."""
        with trio.move_on_after(timeout):
            while self.answered < len(self.received) and not self.ended:
                await self._changed.wait()

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


async def ready_terminal(ctl: Controller, timeout: float = READY_TIMEOUT) -> str:
    """The lab pane's terminal_id once AKK shows it idle (activity and screen) under a profile."""
    with trio.fail_after(timeout):
        while True:
            rows = (await ctl.call("list"))["terminals"]
            if rows:
                row = rows[0]
                observed = (row.get("observation") or {}).get("state")
                if row["profile"] and row["activity_state"] == "idle" and observed == "idle":
                    return str(row["terminal_id"])
            await trio.sleep(0.05)


async def start_akk(akk: AkkProcess, fault: str | None, *options: str) -> str:
    # `start` blocks while the child boots; off the loop, the model servers keep answering.
    return await trio.to_thread.run_sync(lambda: akk.start(fault, *options))


async def kill_akk(akk: AkkProcess) -> None:
    with trio.CancelScope(shield=True):
        await trio.to_thread.run_sync(akk.kill)


# -- latency


@attrs.define
class Latencies:
    """One client's samples (seconds) and what went wrong."""

    client: Client
    send: list[float] = attrs.Factory(list)
    done: list[float] = attrs.Factory(list)
    call: list[float] = attrs.Factory(list)
    """`send` call issued -> its reply (the dispatch receipt)."""
    requests_per_turn: list[int] = attrs.Factory(list)
    not_done: list[str] = attrs.Factory(list)
    took: float = 0.0


SEND_TIMEOUT = READY_TIMEOUT + OUTCOME_TIMEOUT + 30.0
"""Seconds one latency send may take, from waiting for the idle pane to its outcome."""


async def _timed_send(
    lab: LabSession, ctl: Controller, inbox: Inbox, n: int, samples: Latencies
) -> None:
    terminal_id = await ready_terminal(ctl)
    text = f"lab: say hello {n:03d}"
    issued = time.monotonic()
    sent = await ctl.call(
        "send", {"terminal_id": terminal_id, "request": text, "client_request_id": f"l{n}"}
    )
    samples.call.append(time.monotonic() - issued)
    got = await inbox.outcome(sent["turn_id"], OUTCOME_TIMEOUT)
    task = [r for r in lab.server.main_requests() if text in r.newest_input]
    if task:
        samples.send.append(task[0].at - issued)
    if got is None or got[1]["kind"] != "done" or len(task) != 1:
        kind = got[1]["kind"] if got else "no outcome"
        samples.not_done.append(f"send {n}: {kind}, model got the task {len(task)}x")
        return
    received, _ = got
    turn = [r for r in lab.server.main_requests() if r.index >= task[0].index and r.at <= received]
    samples.requests_per_turn.append(len(turn))
    finished = lab.server.finished_at.get(turn[-1].index)
    if finished is None:
        samples.not_done.append(f"send {n}: the final reply was not written completely")
        return
    samples.done.append(received - finished)


async def measure_latency(client: Client, sends: int, root: Path) -> Latencies:
    """N sends into one pane through one `akk serve`; an error ends the client's run early."""
    started = time.monotonic()
    samples = Latencies(client)
    try:
        async with launch(client, SCENARIOS["echo"]) as lab:
            akk = AkkProcess(lab, root / f"latency-{client.name}")
            try:
                url = await start_akk(akk, None)
                async with controller(url, akk.tokens["ctl"]) as (ctl, inbox):
                    for n in range(sends):
                        with trio.fail_after(SEND_TIMEOUT):
                            await _timed_send(lab, ctl, inbox, n, samples)
            finally:
                await kill_akk(akk)
    except Exception as exc:  # reported with the table; the other clients still run
        samples.not_done.append(f"aborted: {type(exc).__name__}: {exc}"[:300])
    samples.took = time.monotonic() - started
    return samples


def _ms(values: Sequence[float]) -> list[str]:
    if not values:
        return ["-", "-", "-"]
    return [f"{1000 * v:.0f}" for v in spread(values)]


def _p90(values: Sequence[float]) -> list[str]:
    return [f"{1000 * nearest_rank(values, 0.9):.0f}"] if values else ["-"]


def report_latency(results: Sequence[Latencies]) -> None:
    print("\nsend latency: `send` issued -> task at the model server (ms)")
    rows = []
    for r in results:
        median, *tail = _ms(r.send)
        rows.append([r.client.name, len(r.send), median, *_p90(r.send), *tail, *_ms(r.call)])
    header = ["client", "n", "median", "p90", "p99", "max", "call median", "call p99", "call max"]
    table(header, rows)
    print("\ndone latency: final reply event written -> controller receives `done` (ms)")
    rows = [[r.client.name, len(r.done), *_ms(r.done)] for r in results]
    families = sorted({r.client.agent for r in results})
    for family in families:
        pooled = [d for r in results if r.client.agent == family for d in r.done]
        if sum(r.client.agent == family for r in results) > 1:
            rows.append([f"{family} (all)", len(pooled), *_ms(pooled)])
    table(["client", "n", "median", "p99", "max"], rows)
    for family in families:
        pooled = [d for r in results if r.client.agent == family for d in r.done]
        if pooled:
            p99 = spread(pooled)[1]
            verdict = "meets" if p99 <= 1.0 else "MISSES"
            print(f"  {family}: done p99 {1000 * p99:.0f} ms {verdict} the 1 s target")
    for r in results:
        shapes = sorted(set(r.requests_per_turn))
        print(
            f"  {r.client.name}: model requests per Turn {shapes}; took {r.took:.1f} s"
            + (f"; NOT DONE: {'; '.join(r.not_done)}" if r.not_done else "")
        )
    sys.stdout.flush()


# -- faults


@attrs.define
class Trial:
    """What one SIGKILL trial left behind."""

    client: qualify_client.Client
    point: Point
    number: int
    misfire: str | None = "the trial ended before its death was checked"
    """Why the armed crash did not end the first life (`AkkProcess.died_at`); None if it did."""
    turn_id: str | None = None
    model_got: int = 0
    outcome_ids: set[str] = attrs.Factory(set)
    """Distinct event_ids of outcome events, over both lives (a redelivery keeps its id)."""
    deliveries: int = 0
    kinds: list[str] = attrs.Factory(list)
    state: str | None = None
    reason: str | None = None
    stages: list[str] = attrs.Factory(list)
    draft_left: bool = False
    error: str | None = None
    took: float = 0.0

    @property
    def duplicate(self) -> bool:
        return self.model_got > 1

    @property
    def lost(self) -> bool:
        return self.turn_id is not None and not self.outcome_ids

    @property
    def verdict(self) -> str:
        """done | failed | uncertain (failed, reason uncertain) | no_record | other | error."""
        if self.error is not None:
            return "error"
        if self.turn_id is None:
            return "no_record"
        if self.state == "failed" and self.reason == "uncertain":
            return "uncertain"
        if self.state in ("done", "failed"):
            return self.state
        return "other"

    def anomalies(self) -> list[str]:
        """What tests/lab/test_faults.py forbids or does not expect, in words."""
        found = []
        if self.error is not None:
            found.append(f"error: {self.error}")
        if self.misfire is not None:
            found.append(f"the armed point did not kill the server: {self.misfire}")
        if self.model_got > 1:
            found.append(f"the model server received the task {self.model_got}x")
        if len(self.outcome_ids) > 1:
            found.append(f"{len(self.outcome_ids)} outcome events with distinct event_ids")
        if self.lost:
            found.append("a Turn record exists but no outcome event was delivered")
        if self.turn_id is None and self.model_got:
            found.append("no Turn record, yet the task reached the model")
        if self.turn_id is None and self.point is not Point.EVIDENCE_SNAPSHOT:
            found.append("no Turn record after the reservation point")
        if self.point in BEFORE_ENTER and self.model_got:
            found.append("a task cut off before its Enter reached the model")
        if self.point not in BEFORE_ENTER and self.turn_id and self.model_got == 0:
            found.append("Enter was sent but the task never reached the model")
        if self.verdict == "other":
            found.append("the Turn ended neither done nor failed")
        if self.verdict == "uncertain" and self.point not in (*BEFORE_ENTER, Point.ENTER_SENT):
            found.append("uncertain although the Enter was recorded")
        if self.verdict == "failed":
            found.append("failed for a reason other than uncertain")
        return found

    def describe(self) -> str:
        return (
            f"turn {self.turn_id}: state={self.state} reason={self.reason} "
            f"dispatches={self.stages} events={self.kinds} model_got={self.model_got} "
            f"outcome deliveries={self.deliveries}"
        )


def composer_line(screen: str, agent: str) -> str:
    """The composer: the lowest line that starts with the agent's prompt character."""
    lines = [line for line in screen.splitlines() if line.startswith(PROMPT[agent])]
    return lines[-1] if lines else ""


async def settle_pane(lab: LabSession) -> None:
    """Empty a trial's left-over draft, wait for the idle composer; raises LabError if not."""
    with trio.move_on_after(PANE_SETTLE_TIMEOUT):
        while DRAFT_MARK in composer_line(await lab.text(), lab.agent):
            await lab.send_keys("C-u")
            await trio.sleep(0.3)
    await lab.wait_idle(PANE_SETTLE_TIMEOUT)
    if DRAFT_MARK in composer_line(await lab.text(), lab.agent):
        raise LabError(f"{lab.client.name}: a trial's draft stays in the composer")


def _take(trial: Trial, inbox: Inbox) -> None:
    outcomes = inbox.outcomes()
    trial.kinds += [e["kind"] for _, e in inbox.received]
    trial.deliveries += len(outcomes)
    trial.outcome_ids |= {e["event_id"] for _, e in outcomes}


async def _misfire(akk: AkkProcess, point: Point) -> str | None:
    """Why the armed server did not die of SIGKILL at `point`, or None (it is killed if it runs)."""
    try:
        await trio.to_thread.run_sync(lambda: akk.died_at(point, 10))
    except AssertionError as exc:
        await kill_akk(akk)
        return str(exc)
    return None


async def run_trial(
    lab: LabSession, point: Point, number: int, root: Path, options: Sequence[str]
) -> Trial:
    """SIGKILL at `point`, restart, check; never raises (an error is recorded in the Trial)."""
    trial = Trial(lab.client, point, number)
    started = time.monotonic()
    text = f"{DRAFT_MARK} {point.value} {number:03d}"
    akk = AkkProcess(lab, root / f"{lab.client.name}-{point}-{number}")
    try:
        with trio.fail_after(TRIAL_TIMEOUT):
            url = await start_akk(akk, f"{point}:crash", *options)
            sent: dict[str, Any] | None = None
            with trio.fail_after(FIRST_LIFE_TIMEOUT):
                async with controller(url, akk.tokens["ctl"]) as (ctl, inbox):
                    terminal_id = await ready_terminal(ctl)
                    try:
                        sent = await ctl.call(
                            "send",
                            {"terminal_id": terminal_id, "request": text, "client_request_id": "f"},
                        )
                    except Exception:
                        sent = None  # the server died before it answered
                    await inbox.outcome(None, FIRST_LIFE_TIMEOUT)
                    await inbox.acks_answered(FIRST_LIFE_TIMEOUT)
                    _take(trial, inbox)
            trial.misfire = await _misfire(akk, point)
            url = await start_akk(akk, None, *options)
            async with controller(url, akk.tokens["ctl"]) as (ctl, inbox):
                listed = (await ctl.call("list"))["turns"]
                turn_id = sent["turn_id"] if sent else (listed[0]["turn_id"] if listed else None)
                trial.turn_id = turn_id
                if turn_id is not None:
                    if not trial.outcome_ids:
                        await inbox.outcome(turn_id, AFTER_RESTART_TIMEOUT)
                    status = await ctl.call("status", {"turn_id": turn_id})
                    trial.state, trial.reason = status["turn"]["state"], status["turn"]["reason"]
                    trial.stages = [f"{d['kind']}:{d['stage']}" for d in status["dispatches"]]
                    await trio.sleep(GRACE)  # a second outcome would arrive meanwhile
                _take(trial, inbox)
    except Exception as exc:  # recorded and reported; the next trial starts clean
        trial.error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        await kill_akk(akk)
    trial.model_got = lab.server.count_inputs_containing(text)
    with trio.move_on_after(10):
        trial.draft_left = text in composer_line(await lab.text(), lab.agent)
    trial.took = time.monotonic() - started
    shutil.rmtree(akk.state.path.parent, ignore_errors=True)
    return trial


MAX_RELAUNCHES = 3
"""Fresh lab panes a cell may start after its pane could not be brought back to idle."""


@attrs.frozen
class Cell:
    client: Client
    point: Point


async def run_cell(
    cell: Cell, trials: int, root: Path, options: Sequence[str], record: Callable[[Trial], None]
) -> list[str]:
    """`trials` trials of one (client, point) in one pane (relaunched if it gets stuck)."""
    notes: list[str] = []
    done = 0
    for _ in range(MAX_RELAUNCHES + 1):
        try:
            async with launch(cell.client, SCENARIOS["echo"]) as lab:
                while done < trials:
                    await settle_pane(lab)
                    record(await run_trial(lab, cell.point, done, root, options))
                    done += 1
            return notes
        except LabError as exc:
            notes.append(f"pane relaunched after trial {done}: {str(exc).splitlines()[0]}")
    notes.append(f"gave up after {MAX_RELAUNCHES} relaunches; {trials - done} trials not run")
    return notes


@attrs.frozen
class Matrix:
    trials: list[Trial]
    notes: dict[Cell, list[str]]
    took: float


async def run_matrix(
    cells: Sequence[Cell], trials: int, parallel: int, root: Path, options: Sequence[str]
) -> Matrix:
    """Run every cell, `parallel` at a time (each in its own pane and `akk serve`)."""
    started = time.monotonic()
    results: list[Trial] = []
    notes: dict[Cell, list[str]] = {}

    def record(trial: Trial) -> None:
        results.append(trial)
        flag = "; ".join(trial.anomalies())
        print(
            f"  [{time.monotonic() - started:6.0f} s] {trial.client.name} {trial.point} "
            f"#{trial.number}: {trial.verdict} model_got={trial.model_got} "
            f"{trial.took:.1f} s{'  !! ' + flag if flag else ''}",
            file=sys.stderr,
            flush=True,
        )

    send_cells, receive_cells = trio.open_memory_channel[Cell](len(cells))
    for cell in cells:
        send_cells.send_nowait(cell)
    send_cells.close()

    async def worker() -> None:
        async for cell in receive_cells:
            notes[cell] = await run_cell(cell, trials, root, options, record)

    async with trio.open_nursery() as nursery:
        for _ in range(parallel):
            nursery.start_soon(worker)
    return Matrix(results, notes, time.monotonic() - started)


def report_matrix(
    matrix: Matrix, cells: Sequence[Cell], parallel: int, options: Sequence[str]
) -> None:
    print(
        f"\nfault matrix: SIGKILL at a point, restart ({' '.join(options)}); "
        f"{parallel} cell(s) at a time"
    )
    print(
        "  dup = task received >1 at the model server; lost = Turn record but no outcome event;"
        "\n  uncertain = failed/uncertain; failed = failed for another reason; 2+ids = outcome"
        "\n  events with distinct event_ids; redeliv = trials whose outcome was delivered again"
        "\n  under its id; draft = task text left un-submitted in the composer (informational);"
        "\n  not fired = the first life did not die of SIGKILL at the armed point (its exit"
        "\n  status and its fault log line, AkkProcess.died_at)"
    )
    header = [
        "point", "trials", "no record", "dup", "lost", "2+ids", "uncertain", "done", "failed",
        "other", "error", "not fired", "redeliv", "draft", "s/trial",
    ]  # fmt: skip
    for client in dict.fromkeys(c.client for c in cells):
        print(f"\n{client.name}")
        rows = []
        for cell in (c for c in cells if c.client == client):
            got = [t for t in matrix.trials if t.client == client and t.point is cell.point]
            verdicts = [t.verdict for t in got]
            rows.append([
                str(cell.point), len(got), verdicts.count("no_record"),
                sum(t.duplicate for t in got), sum(t.lost for t in got),
                sum(len(t.outcome_ids) > 1 for t in got), verdicts.count("uncertain"),
                verdicts.count("done"), verdicts.count("failed"), verdicts.count("other"),
                verdicts.count("error"), sum(t.misfire is not None for t in got),
                sum(t.deliveries > len(t.outcome_ids) for t in got),
                sum(t.draft_left for t in got) if cell.point in BEFORE_ENTER else "-",
                f"{sum(t.took for t in got) / len(got):.1f}" if got else "-",
            ])  # fmt: skip
        table(header, rows)
    print(f"\n  {len(matrix.trials)} trials took {matrix.took:.0f} s")
    anomalies = [t for t in matrix.trials if t.anomalies()]
    print(f"\nanomalies: {len(anomalies)}")
    for t in anomalies:
        print(f"  {t.client.name} {t.point} #{t.number}: {'; '.join(t.anomalies())}")
        print(f"    {t.describe()}")
    for cell, notes in matrix.notes.items():
        for note in notes:
            print(f"  {cell.client.name} {cell.point}: {note}")
    sys.stdout.flush()


# -- command line


@attrs.frozen
class Settings:
    only: str | None
    clients: tuple[Client, ...]
    sends: int
    fault_clients: tuple[Client, ...]
    trials: int
    points: tuple[Point, ...]
    parallel: int
    accept_seconds: float


def _parse() -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["latency", "faults"])
    parser.add_argument(
        "--clients", type=parse_client, nargs="+",
        default=list(clients.PINNED),
        help="latency: pinned clients, e.g. claude-2.1.328 (default: every pinned client)",
    )  # fmt: skip
    parser.add_argument("--sends", type=int, default=20, help="latency: sends per client")
    parser.add_argument(
        "--fault-clients", type=parse_client, nargs="+",
        default=[parse_client(c) for c in FAULT_CLIENTS],
        help=f"faults: pinned clients (default: {' '.join(FAULT_CLIENTS)})",
    )  # fmt: skip
    parser.add_argument("--trials", type=int, default=20, help="faults: trials per point")
    parser.add_argument(
        "--points", type=Point, nargs="+", default=list(SEND_POINTS),
        help="faults: points (default: every point a send passes)",
    )  # fmt: skip
    parser.add_argument("--parallel", type=int, default=2, help="faults: cells at a time")
    parser.add_argument("--accept-seconds", type=float, default=3.0, help="faults: akk serve's")
    args = parser.parse_args()
    if args.sends < 1 or args.trials < 1 or not 1 <= args.parallel <= 4:
        parser.error("--sends and --trials must be >= 1, --parallel 1..4")
    return Settings(
        args.only, tuple(args.clients), args.sends, tuple(args.fault_clients),
        args.trials, tuple(args.points), args.parallel, args.accept_seconds,
    )  # fmt: skip


def load() -> str:
    """The machine's 1/5/15-minute load averages (other work skews every timing here)."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


async def run(settings: Settings, root: Path) -> None:
    began = time.monotonic()
    print(f"{os.cpu_count()} CPUs; load average at start {load()}")
    if settings.only in (None, "latency"):
        started = time.monotonic()
        results = [await measure_latency(c, settings.sends, root) for c in settings.clients]
        report_latency(results)
        print(f"\n  (latency part took {time.monotonic() - started:.0f} s; load now {load()})")
    if settings.only in (None, "faults"):
        cells = [Cell(c, p) for c in settings.fault_clients for p in settings.points]
        options = ("--accept-seconds", f"{settings.accept_seconds:g}")
        matrix = await run_matrix(cells, settings.trials, settings.parallel, root, options)
        report_matrix(matrix, cells, settings.parallel, options)
        print(f"\n  (fault part took {matrix.took:.0f} s; load now {load()})")
    print(f"\nwhole run took {time.monotonic() - began:.0f} s")


def main() -> None:
    settings = _parse()
    # A plain `kill` still runs the clean-up (akk serve children, lab panes).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(tempfile.mkdtemp(prefix="akk-bench-turns-"))
    try:
        trio.run(run, settings, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
