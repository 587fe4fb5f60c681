"""Turns on a session backend against the real pinned clients: latency, start cost, leftovers.

Per pinned client (every Codex and Claude unless --client): a Codex runs the
app-server backend, a Claude the headless one. The model server (scenario
`echo`) is always in this process, so one clock (`time.monotonic()`, the clock
of `RecordedRequest.at` and `ModelServer.finished_at`) times both ends:

  sends    `akk serve` as a child process naming the client and its home
           (`tools.lab.akk_runner.backend_child`), one controller, N sends
           (default 20, --sends) of one scope (task bench, role executor), one
           after another, each after the previous one's outcome:
             task   the `send` call issued -> the task's request recorded by
                    the model server (`RecordedRequest.at`);
             done   the model server writing the final event of the turn's last
                    reply (`ModelServer.finished_at`) -> the controller
                    receiving `done`;
             call   the `send` call issued -> its reply, apart for the session
                    decision: the first send creates (its call also starts the
                    app-server: the backend starts it on first use), the others
                    resume;
             after  akk serve's RSS before the first send and after the last
                    outcome, and the backend's processes of the run then (the
                    Codex app-server stays: 1; a Claude process lives for one
                    Turn: 0).
  starts   (Codex only) N times `akk.backends.codex_app_server.rpc.open_app_server`
           directly on the lab's CODEX_HOME (`akk.qualify.run_files.prepare`):
           `initialize_seconds` (process start -> `initialize` result), RSS after
           initialize and after one echo turn (thread/start, turn/start,
           turn/completed).

Median, p99 (nearest rank: with 20 samples it is the max) and n per version.

    .venv/bin/python -m tools.bench_backend [--client codex-0.169.0] [--client claude-2.1.332]
        [--sends 20]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.backends.codex_app_server.rpc import AppServer, open_app_server
from akk.backends.names import CLAUDE_HEADLESS, CODEX_APP_SERVER
from akk.qualify.launcher import LabError, wait_gone
from akk.qualify.model_server import ModelServer, RecordedRequest
from akk.qualify.run_files import prepare
from akk.qualify.scenarios import ECHO_TASK, SCENARIOS
from tools.bench_turns import controller, load, parse_client, spread, start_akk, table
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess, BackendChild, backend_child, backend_processes
from tools.lab.clients import Client
from tools.lab.installer import install

SESSION_BACKEND = {"codex": CODEX_APP_SERVER, "claude": CLAUDE_HEADLESS}
"""The session backend each client runs on."""
BACKEND_PROCESS = {"codex": "app-server", "claude": "stream-json"}
"""An argument only that backend's client processes carry (`codex app-server`, `claude -p
--input-format stream-json ...`)."""
LIVES_ON = {"codex": 1, "claude": 0}
"""How many of the backend's processes each run keeps once every Turn ended."""
OUTCOME_TIMEOUT = 60.0
"""Seconds one send may take from its call to its outcome."""
START_TIMEOUT = 60.0
"""Seconds one app-server start and its echo turn may take."""
LEFT_SECONDS = 10.0
"""Seconds a run's processes get to end before what is left counts as left running."""
MIB = 1 << 20


@attrs.define
class Samples:
    """One version's samples (seconds, bytes) and what went wrong."""

    client: Client
    task: list[float] = attrs.Factory(list)
    task_by: dict[str, list[float]] = attrs.Factory(dict)
    """The same samples by session decision action (the create send also starts the process)."""
    done: list[float] = attrs.Factory(list)
    call: dict[str, list[float]] = attrs.Factory(dict)
    """Session decision action (create, resume, ...) -> `send` call seconds."""
    initialize: list[float] = attrs.Factory(list)
    rss_initialized: list[float] = attrs.Factory(list)
    rss_turned: list[float] = attrs.Factory(list)
    served_rss: float | None = None
    """RSS of the app-server under `akk serve` after all the sends."""
    akk_rss: tuple[float, float] | None = None
    """RSS of `akk serve` itself before the first send and after the last outcome."""
    after_sends: list[int] | None = None
    """The backend's processes of the run once the last send's outcome arrived."""
    requests_per_turn: list[int] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    left_running: list[int] = attrs.Factory(list)
    took: float = 0.0


def _params(client: Client, lab: BackendChild, text: str, request_id: str) -> dict[str, Any]:
    return {
        "scope": {"task": "bench", "role": "executor"},
        "backend": SESSION_BACKEND[client.agent],
        "cwd": str(lab.files.workdir),
        "request": text,
        "client_request_id": request_id,
    }


def _task_of(text: str) -> Callable[[RecordedRequest], bool]:
    return lambda request: not request.auxiliary and text in request.newest_input


def _rss_of(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


async def measure_sends(client: Client, sends: int, root: Path, samples: Samples) -> None:
    """N sends of one scope through one `akk serve` child; an error ends the part early."""
    model = ModelServer(SCENARIOS["echo"])
    run = root / f"sends-{client.name}-{secrets.token_hex(4)}"
    run.mkdir()
    roots: list[Path] = []
    try:
        async with backend_child(client, run, model) as lab:
            roots.append(lab.root)
            try:
                await _sends(client, sends, lab, model, samples)
            except Exception as exc:  # reported with the table; the other versions still run
                samples.problems.append(f"sends aborted: {type(exc).__name__}: {exc}"[:300])
            finally:
                await _stop_akk(lab.akk)
    except LabError as exc:  # a process of the run outlived akk serve: listed below
        samples.problems.append(str(exc)[:300])
    for lab_root in roots:
        samples.left_running += await wait_gone(lab_root, LEFT_SECONDS)


async def _sends(
    client: Client, sends: int, lab: BackendChild, model: ModelServer, samples: Samples
) -> None:
    url = await start_akk(lab.akk, None, *lab.serve_args)
    assert lab.akk.proc is not None
    rss_before = _rss_of(lab.akk.proc.pid)
    async with controller(url, lab.akk.tokens["ctl"]) as (ctl, inbox):
        for n in range(sends):
            text = f"{ECHO_TASK} {n:03d}"
            issued = time.monotonic()
            sent = await ctl.call("send", _params(client, lab, text, f"b{n}"))
            called = time.monotonic() - issued
            action = sent["session_decision"]["action"]
            samples.call.setdefault(action, []).append(called)
            task = await model.wait_for_request(_task_of(text), timeout=OUTCOME_TIMEOUT)
            samples.task.append(task.at - issued)
            samples.task_by.setdefault(action, []).append(task.at - issued)
            got = await inbox.outcome(sent["turn_id"], OUTCOME_TIMEOUT)
            if got is None or got[1]["kind"] != "done":
                kind = got[1]["kind"] if got else "no outcome"
                samples.problems.append(f"send {n}: {kind}")
                continue
            received, _ = got
            turn = [r for r in model.main_requests() if r.index >= task.index and r.at <= received]
            samples.requests_per_turn.append(len(turn))
            finished = model.finished_at.get(turn[-1].index)
            if finished is None:
                samples.problems.append(f"send {n}: the last reply was not written whole")
                continue
            samples.done.append(received - finished)
        samples.after_sends = backend_processes(lab.akk.proc.pid, BACKEND_PROCESS[client.agent])
        rss_after = _rss_of(lab.akk.proc.pid)
    if rss_before is not None and rss_after is not None:
        samples.akk_rss = (rss_before, rss_after)
    counts = [model.count_inputs_containing(f"{ECHO_TASK} {n:03d}") for n in range(sends)]
    got_twice = [n for n, count in enumerate(counts) if count != 1]
    if got_twice:
        samples.problems.append(f"sends {got_twice}: not received exactly once")
    if len(samples.after_sends) != LIVES_ON[client.agent]:
        samples.problems.append(f"{len(samples.after_sends)} backend processes after the sends")
    if client.agent == "codex" and len(samples.after_sends) == 1:
        samples.served_rss = _rss_of(samples.after_sends[0])


async def _stop_akk(akk: AkkProcess) -> None:
    with trio.CancelScope(shield=True):
        await trio.to_thread.run_sync(akk.stop)


async def _echo_turn(app: AppServer, workdir: Path) -> None:
    started = await app.request("thread/start", {"cwd": str(workdir)}, timeout=30)
    turn = await app.request(
        "turn/start",
        {"threadId": started["thread"]["id"], "input": [{"type": "text", "text": ECHO_TASK}]},
        timeout=30,
    )
    async for note in app.notifications:
        if note.method == "turn/completed" and note.params["turn"]["id"] == turn["turn"]["id"]:
            status = note.params["turn"]["status"]
            if status != "completed":
                raise RuntimeError(f"the echo turn ended {status}")
            return
    raise RuntimeError(f"the connection closed before turn/completed: {app.closed_reason}")


async def measure_starts(client: Client, starts: int, root: Path, samples: Samples) -> None:
    """N app-server starts on one CODEX_HOME, each initialized and given one echo turn."""
    model = ModelServer(SCENARIOS["echo"])
    lab = root / f"lab-{secrets.token_hex(6)}"
    lab.mkdir()
    async with trio.open_nursery() as nursery:
        await nursery.start(model.serve)
        files = prepare(client, lab, model.port)
        assert files.codex_home is not None
        try:
            for _ in range(starts):
                with trio.fail_after(START_TIMEOUT):
                    async with open_app_server(
                        client.binary(), codex_home=files.codex_home, cwd=files.workdir,
                        env=files.env,
                    ) as app:  # fmt: skip
                        assert app.initialize_seconds is not None
                        samples.initialize.append(app.initialize_seconds)
                        initialized = app.rss_bytes()
                        await _echo_turn(app, files.workdir)
                        turned = app.rss_bytes()
                    if initialized is None or turned is None:
                        samples.problems.append("an app-server's RSS was not readable")
                        continue
                    samples.rss_initialized.append(initialized)
                    samples.rss_turned.append(turned)
        except Exception as exc:
            samples.problems.append(f"starts aborted: {type(exc).__name__}: {exc}"[:300])
        finally:
            nursery.cancel_scope.cancel()
    samples.left_running += await wait_gone(lab, LEFT_SECONDS)


async def measure(client: Client, sends: int, root: Path) -> Samples:
    began = time.monotonic()
    samples = Samples(client)
    await measure_sends(client, sends, root, samples)
    if client.agent == "codex":
        await measure_starts(client, sends, root, samples)
    samples.took = time.monotonic() - began
    return samples


def _ms(values: Sequence[float]) -> list[str]:
    if not values:
        return ["-", "-", "0"]
    median, p99, _ = spread(values)
    return [f"{1000 * median:.0f}", f"{1000 * p99:.0f}", str(len(values))]


def _mib(values: Sequence[float]) -> list[str]:
    if not values:
        return ["-", "-", "0"]
    median, p99, _ = spread(values)
    return [f"{median / MIB:.0f}", f"{p99 / MIB:.0f}", str(len(values))]


def report(results: Sequence[Samples], sends: int) -> None:
    """One small table per measure; a row per version (median, p99, n)."""
    med_p99_n = ("median", "p99", "n")
    print(f"\nsend -> task at the model server; final reply event -> `done` (ms; {sends} sends)")
    table(
        ("client", *(f"task {h}" for h in med_p99_n), *(f"done {h}" for h in med_p99_n)),
        [(r.client.name, *_ms(r.task), *_ms(r.done)) for r in results],
    )
    print("\nthe `send` call itself (ms): create (a Codex's also starts its app-server) vs resume")
    table(
        ("client", *(f"create {h}" for h in med_p99_n), *(f"resume {h}" for h in med_p99_n)),
        [
            (r.client.name, *_ms(r.call.get("create", [])), *_ms(r.call.get("resume", [])))
            for r in results
        ],
    )
    print(
        "\nakk serve RSS (MiB) before the first send and after the last outcome; the backend's "
        f"processes of the run then ({sends} sends)"
    )
    table(
        ("client", "before", "after", "processes"),
        [(r.client.name, *_rss_and_processes(r)) for r in results],
    )
    codex = [r for r in results if r.client.agent == "codex"]
    if codex:
        print(f"\napp-server start: process start -> `initialize` result (ms; {sends} starts)")
        table(
            ("codex", *(f"init {h}" for h in med_p99_n)),
            [(r.client.version, *_ms(r.initialize)) for r in codex],
        )
        print("\napp-server RSS (MiB): after initialize, after a turn; under akk serve after sends")
        table(
            ("codex", *(f"init {h}" for h in med_p99_n), *(f"turn {h}" for h in med_p99_n),
             f"served@{sends}"),
            [
                (r.client.version, *_mib(r.rss_initialized), *_mib(r.rss_turned),
                 "-" if r.served_rss is None else f"{r.served_rss / MIB:.0f}")
                for r in codex
            ],
        )  # fmt: skip
    print()
    for r in results:
        other = sorted(set(r.call) - {"create", "resume"})
        created = r.task_by.get("create", [])
        resumed = _ms(r.task_by.get("resume", []))
        notes = [
            *([f"task after create {1000 * created[0]:.0f} ms"] if len(created) == 1 else []),
            f"task after resume median {resumed[0]} p99 {resumed[1]} ms (n {resumed[2]})",
            f"model requests per turn {sorted(set(r.requests_per_turn))}",
            f"took {r.took:.0f} s",
            *(f"decision {action} {len(r.call[action])}x" for action in other),
            *(f"PROBLEM: {p}" for p in r.problems),
            *([f"LEFT RUNNING: {r.left_running}"] if r.left_running else []),
        ]
        print(f"  {r.client.name}: {'; '.join(notes)}")
    sys.stdout.flush()


def _rss_and_processes(r: Samples) -> tuple[str, str, str]:
    """akk serve's RSS before and after the sends (MiB), and the backend's processes then."""
    before, after = ("-", "-") if r.akk_rss is None else (f"{v / MIB:.0f}" for v in r.akk_rss)
    return before, after, "-" if r.after_sends is None else str(len(r.after_sends))


async def run(chosen: Sequence[Client], sends: int, root: Path) -> None:
    began = time.monotonic()
    print(f"{os.cpu_count()} CPUs; load average at start {load()}")
    results = [await measure(client, sends, root) for client in chosen]
    report(results, sends)
    print(f"\nwhole run took {time.monotonic() - began:.0f} s; load now {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--client", type=parse_client, action="append", default=None,
        help="a pinned client, e.g. codex-0.169.0 or claude-2.1.332 (repeatable; default: "
        "every pinned Codex and Claude)",
    )  # fmt: skip
    parser.add_argument("--sends", type=int, default=20, help="sends (and starts) per version")
    args = parser.parse_args()
    chosen: list[Client] = args.client or [c for c in clients.PINNED if c.agent in SESSION_BACKEND]
    if args.sends < 1:
        parser.error("--sends must be >= 1")
    for client in chosen:
        install(client)
    # A plain `kill` still runs the clean-up (the akk serve child, its clients' processes).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(tempfile.mkdtemp(prefix="akk-bench-backend-"))
    try:
        trio.run(run, chosen, args.sends, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
