"""The endpoint under attack and under load: descriptors, memory, `list` latency.

Each part runs a fresh `akk serve` subprocess under `ulimit -n` (soft = hard),
with a throwaway state directory and no tmux server to watch, and talks to it
over 127.0.0.1 only:

  handshakes  N connections (default 1,100) that stall before or inside the
              HTTP upgrade: is the server alive, how many descriptors does it
              hold, is a legitimate controller served (and how fast)?
  memory      K controllers (default 8) each send M frames (default 60) of
              ~1 MiB of '€' (~3 MiB on the wire) and never read a reply: the
              server's RSS before, at peak (sampled every 50 ms) and after.
  list        C controllers (default 200, then 1,000) stay connected and call
              `list` in rounds, all at once; then one controller calls it
              sequentially while the others idle: p50/p99/max latency. The
              server watches P idle agent panes (default 200, a private tmux
              server, as `tools.bench_serve_idle` makes them) and each
              controller owns R settled Turns (default 5, written offline),
              so every reply carries P terminal rows and R records. Then
              the same controllers and rounds against `tools.ws_floor`, a
              server that only answers with that result: the floor; and
              once more with an empty `list` result, what a call costs
              whatever its reply.

    .venv/bin/python -m tools.bench_endpoint [--only handshakes|memory|list]
        [--controllers 200 1000] [--panes 200] [--records 5]

`--before DIR` measures the pre-credential server for comparison: DIR is a
checkout of it (`git worktree add /tmp/akk-before <commit>`), run with this
venv's python. That server had one shared token and controllers named
themselves in `hello`, so the bench does the same there, and skips what it
lacked (`--max-connections`, the operator's `doctor` stats).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import itertools
import json
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from akk.client import connect
from akk.store import credentials, turns
from akk.store.credentials import MAX_CREDENTIALS
from akk.store.database import open_store
from akk.store.location import StateDir
from akk.store.turns import TurnState
from tools.bench_serve_idle import idle_agent_bin, start_panes

Rows = list[tuple[str, str]]

HOST = "127.0.0.1"
REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
PROBE_TIMEOUT = 20.0
"""Seconds a legitimate controller gets to connect and call `list`."""
SAMPLE_EVERY = 0.05
SETTLE = 2.0
"""Seconds given to the server to drop what an attack left before measuring 'after'."""
LINGER = 12.0
"""Seconds after the attackers close by which the server's 10 s handshake timeout has passed."""
STALL_TIMEOUT = 60.0
FLOOD_TIMEOUT = 180.0
GONE_TERMINAL = "term_bench_gone"
"""The pane the bench's records ran on: a terminal row long gone."""
RECEIVE_BYTES = 1 << 16
"""What a bench controller reads at once (trio-websocket's 4 KiB would read a reply in 20 parts)."""
PANES_TIMEOUT = 120.0
"""Seconds the server gets to list every pane the bench started."""
CONNECT_TIMEOUT = 180.0
ROUND_TIMEOUT = 60.0
RELEASE_TIMEOUT = 30.0
CONNECT_ATTEMPTS = 3
EMPTY_LIST = json.dumps({"terminals": [], "turns": [], "watches": []}, separators=(",", ":"))
"""The smallest `list` result: a floor that moves no rows measures the calls alone."""
HALF_REQUEST = b"GET /v1 HTTP/1.1\r\nHost: x\r\n"
_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl


@attrs.frozen
class Identity:
    """How one controller authenticates."""

    token: str
    controller_id: str | None
    """Named in hello (the pre-credential server); None when the credential names it."""


@attrs.define
class Process:
    """A running server subprocess the bench talks to over ``url``."""

    proc: subprocess.Popen[bytes]
    url: str

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def status(self) -> str:
        code = self.proc.poll()
        return "alive" if code is None else f"DEAD (exit code {code})"

    def descriptors(self) -> int | None:
        try:
            return len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except OSError:
            return None

    def rss_mib(self) -> float | None:
        try:
            lines = Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return None

    def cpu_seconds(self) -> float:
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@attrs.define
class Server(Process):
    """A running `akk serve` subprocess."""

    state: StateDir
    stderr: Path
    stopped: str = ""

    def operator_token(self) -> str:
        return (self.state.path / "token").read_text().strip()


@attrs.define
class Peak:
    """The most descriptors and memory the server held while being sampled."""

    descriptors: int = 0
    rss_mib: float = 0.0

    async def track(self, server: Server) -> None:
        while True:
            self.descriptors = max(self.descriptors, server.descriptors() or 0)
            self.rss_mib = max(self.rss_mib, server.rss_mib() or 0.0)
            await trio.sleep(SAMPLE_EVERY)


@attrs.frozen
class Settings:
    """The parsed command line."""

    nofile: int
    stalled: int
    flooders: int
    frames: int
    controllers: tuple[int, ...]
    rounds: int
    sequential: int
    list_nofile: int
    panes: int
    records: int
    before: Path | None


def _limited(nofile: int) -> Callable[[], None]:
    def in_child() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        # Die with the bench, even if it is killed outright.
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return in_child


@contextmanager
def serving(
    state: StateDir, settings: Settings, *, nofile: int, flags: list[str]
) -> Iterator[Server]:
    """Run `akk serve --port 0` for ``state`` under ``ulimit -n nofile``; stop it on exit."""
    work = state.path.parent
    tmux = work / "tmux"
    tmux.mkdir(exist_ok=True)
    env = {**os.environ, "TMUX_TMPDIR": str(tmux)}
    cwd = REPO
    if settings.before is not None:
        env["PYTHONPATH"] = str(settings.before)
        cwd = settings.before
    out, err = work / "serve.out", work / "serve.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "akk", "serve", "--port", "0", "--state-dir",
             str(state.path), "--log-level", "WARNING", *flags],
            cwd=cwd, env=env, stdout=stdout, stderr=stderr, preexec_fn=_limited(nofile),
        )  # fmt: skip
    server = None
    try:
        server = Server(proc, _listening(proc, out, err, "akk serve"), state, err)
        yield server
    finally:
        note = _stop(proc)
        if server is not None:
            server.stopped = note


@contextmanager
def floor_serving(work: Path, result: str, *, nofile: int) -> Iterator[Process]:
    """Run `tools.ws_floor` answering every call with ``result``; stop it on exit."""
    (work / "floor.json").write_text(result)
    out, err = work / "floor.out", work / "floor.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tools.ws_floor", str(work / "floor.json")],
            cwd=REPO, stdout=stdout, stderr=stderr, preexec_fn=_limited(nofile),
        )  # fmt: skip
    try:
        yield Process(proc, _listening(proc, out, err, "the floor"))
    finally:
        _stop(proc)


def _listening(proc: subprocess.Popen[bytes], out: Path, err: Path, what: str) -> str:
    """The URL ``proc`` says it listens on (its "listening on" line in ``out``)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while "listening on" not in (line := out.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start:\n{line}{err.read_text()[-2000:]}")
        time.sleep(0.05)
    return next(word for word in line.split() if word.startswith(("ws://", "wss://")))


def _stop(proc: subprocess.Popen[bytes]) -> str:
    if proc.poll() is not None:
        return f"had exited (code {proc.returncode})"
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        return f"NO: still running {STOP_TIMEOUT:.0f} s after SIGINT, killed"
    return f"yes, in {time.monotonic() - started:.1f} s"


def mint(state: StateDir, names: list[str], records: int = 0) -> dict[str, str]:
    """Credentials for ``names``, each owning ``records`` settled Turns, written offline (as
    `akk token create` does with no server)."""
    state.ensure()
    conn = open_store(state.store_path)
    try:
        with conn:
            minted = [credentials.create(conn, name, time.time(), actor="bench") for name in names]
            if records:
                conn.execute(
                    "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
                    "agent_pid, process_start, executable, first_seen_at, last_seen_at, gone_at) "
                    "VALUES (?, '/gone', '%0', 1, 'claude', 1, 0, 'claude', 0, 0, 0)",
                    (GONE_TERMINAL,),
                )
            for name, m in zip(names, minted, strict=True):
                credentials.record_use(conn, m.controller_id, name, time.time())
                for n in range(records):
                    _settled_turn(conn, m.controller_id, n)
    finally:
        conn.close()
    return {m.controller_id: m.token for m in minted}


def _settled_turn(conn: Any, controller_id: str, n: int) -> None:
    """One done Turn of ``controller_id`` on a pane long gone (nothing resumes it, and no
    event is queued: its outcome counts as delivered)."""
    now = time.time()
    turn = turns.insert(
        conn, controller_id=controller_id, client_request_id=f"bench-{n}",
        terminal_id=GONE_TERMINAL, request_sha256="0" * 64, request_chars=1,
        evidence_status="unknown", evidence=None, evidence_limit=None,
        inactivity_seconds=600.0, lifetime_seconds=3600.0, now=now,
    )  # fmt: skip
    turns.update(
        conn, turn, state=TurnState.DONE, settled_at=now, final_message=f"bench record {n}"
    )


@contextmanager
def panes(work: Path, count: int) -> Iterator[list[str]]:
    """A private tmux server with ``count`` idle agent panes: the serve flags that watch it."""
    if count == 0:
        yield []
        return
    sock = str(work / "panes.sock")
    try:
        start_panes(sock, idle_agent_bin(work), count, 0)
        yield ["--tmux-socket", sock]
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True, check=False)


async def listed_panes(server: Server, count: int) -> str:
    """Wait until the operator's `list` shows ``count`` terminals; say how long it took."""
    started = time.perf_counter()
    shown = 0
    with trio.move_on_after(PANES_TIMEOUT):
        async with connect(server.url, server.operator_token()) as ctl:
            while shown < count:
                shown = len((await ctl.call("list"))["terminals"])
                await trio.sleep(SAMPLE_EVERY)
    took = time.perf_counter() - started
    if shown < count:
        raise SystemExit(f"akk serve listed {shown} of {count} panes after {took:.0f} s")
    return f"{count} listed after {took:.1f} s"


def run_part(
    root: Path,
    name: str,
    settings: Settings,
    bench: Callable[[Server, list[Identity]], Awaitable[Rows]],
    *,
    controllers: int,
    nofile: int,
    flags: list[str],
    records: int = 0,
) -> Rows:
    """Serve a fresh state directory and run ``bench`` with ``controllers`` identities."""
    state = StateDir(root / name / "state")
    state.path.parent.mkdir()
    names = [f"bench-{i}" for i in range(controllers)]
    minted = {} if settings.before else mint(state, names, records)
    flags = [] if settings.before else flags
    with serving(state, settings, nofile=nofile, flags=flags) as server:
        if settings.before:
            ids = [Identity(server.operator_token(), n) for n in names]
        else:
            ids = [Identity(minted[n], None) for n in names]
        rows = trio.run(bench, server, ids)
    rows.append(("server stopped on SIGINT", server.stopped))
    rows.extend(log_summary(server.stderr))
    return rows


def log_summary(stderr: Path) -> Rows:
    """The server's warnings and errors, counted by message (timestamps stripped)."""
    text = stderr.read_text(errors="replace")
    records = collections.Counter(
        f"{m.group(1)} {m.group(2)[:90]}"
        for m in re.finditer(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) (.*)$", text, re.M)
    )
    tracebacks = text.count("Traceback (most recent call last)")
    rows: Rows = [
        ("server log", f"{sum(records.values())} warnings/errors, {tracebacks} tracebacks")
    ]
    rows.extend((f"  {count}×", message) for message, count in records.most_common(4))
    return rows


def describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:110]


async def probe(server: Server, identity: Identity) -> str:
    """Connect as a legitimate controller and call `list`; say how it went and how long."""
    started = time.perf_counter()
    try:
        with trio.fail_after(PROBE_TIMEOUT):
            async with connect(
                server.url, identity.token, controller_id=identity.controller_id
            ) as ctl:
                await ctl.call("list")
    except Exception as exc:
        return f"NO after {time.perf_counter() - started:.2f} s ({describe(exc)})"
    return f"yes, connect + list in {1000 * (time.perf_counter() - started):.0f} ms"


async def doctor_stats(server: Server, before: bool) -> Rows:
    """The server's non-zero counters from the operator's `doctor` call."""
    if before:
        return [("server counters (doctor)", "n/a (no doctor method)")]
    try:
        with trio.fail_after(PROBE_TIMEOUT):
            async with connect(server.url, server.operator_token()) as ctl:
                report = await ctl.call("doctor")
    except Exception as exc:
        return [("server counters (doctor)", f"unavailable ({describe(exc)})")]
    counters = ", ".join(f"{k} {v}" for k, v in report["server"].items() if v)
    limits = report["limits"]
    return [
        ("server counters (doctor)", counters or "all zero"),
        ("limits in force", f"{limits['max_connections']} connections, "
                            f"{limits['max_handshakes']} handshakes"),
    ]  # fmt: skip


def _fds(server: Server) -> str:
    count = server.descriptors()
    return "-" if count is None else str(count)


async def _stall(port: int, half: bool) -> trio.SocketStream | None:
    """Connect and stall; None if that failed or took over 2 s."""
    stream = None
    with trio.move_on_after(2):
        try:
            stream = await trio.open_tcp_stream(HOST, port)
            if half:
                await stream.send_all(HALF_REQUEST)
            return stream
        except (OSError, trio.BrokenResourceError):
            pass
    if stream is not None:
        await trio.aclose_forcefully(stream)
    return None


def bench_handshakes(settings: Settings) -> Callable[[Server, list[Identity]], Awaitable[Rows]]:
    async def bench(server: Server, ids: list[Identity]) -> Rows:
        rows: Rows = [("server descriptors at start", _fds(server))]
        peak = Peak()
        attackers: list[trio.SocketStream] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peak.track, server)
            started = time.perf_counter()
            failed = 0
            with trio.move_on_after(STALL_TIMEOUT):
                for i in range(settings.stalled):
                    stream = await _stall(server.port, half=i % 2 == 1)
                    if stream is None:
                        failed += 1
                    else:
                        attackers.append(stream)
            opened = time.perf_counter() - started
            rows.append((
                "stalled connections opened",
                f"{len(attackers)} in {opened:.1f} s, {failed} failed "
                f"(of {settings.stalled}; half sent part of an upgrade)",
            ))  # fmt: skip
            rows.append(("controller served while they stall", await probe(server, ids[0])))
            rows.append(("server while they stall", server.status()))
            rows.append(("server descriptors while they stall", _fds(server)))
            rows.extend(await doctor_stats(server, settings.before is not None))
            for stream in attackers:
                await trio.aclose_forcefully(stream)
            await trio.sleep(SETTLE)
            rows.append(("server descriptors at peak", str(peak.descriptors)))
            rows.append((f"server descriptors {SETTLE:.0f} s after they close", _fds(server)))
            rows.append(("controller served after they close", await probe(server, ids[0])))
            await trio.sleep(LINGER - SETTLE)
            rows.append((f"server descriptors {LINGER:.0f} s after they close", _fds(server)))
            rows.append(("server at the end", server.status()))
            nursery.cancel_scope.cancel()
        return rows

    return bench


@attrs.define
class Flood:
    """How one non-reading controller's flood went."""

    sent: int = 0
    ended: str = "timed out"


async def _flood(server: Server, identity: Identity, frame: str, count: int, flood: Flood) -> None:
    headers = [(b"Authorization", f"Bearer {identity.token}".encode())]
    try:
        async with open_websocket_url(
            server.url, extra_headers=headers, message_queue_size=0,
            connect_timeout=PROBE_TIMEOUT, disconnect_timeout=2,
        ) as ws:  # fmt: skip
            for _ in range(count):
                await ws.send_message(frame)
                flood.sent += 1
        flood.ended = "sent all"
    except ConnectionClosed as exc:
        flood.ended = f"closed by server ({exc.reason.code if exc.reason else '?'})"
    except Exception as exc:
        flood.ended = describe(exc).split(":")[0]


def bench_memory(settings: Settings) -> Callable[[Server, list[Identity]], Awaitable[Rows]]:
    async def bench(server: Server, ids: list[Identity]) -> Rows:
        flooders, checker = ids[:-1], ids[-1]
        # Just under 1 MiB of characters, three bytes each in UTF-8: over the limit in
        # bytes, under it in characters (which the pre-credential server counted).
        name = "€" * ((1 << 20) - 200)
        frames = []
        for n, identity in enumerate(flooders):
            params: dict[str, Any] = {"name": name}
            if identity.controller_id is not None:
                params["controller_id"] = identity.controller_id
            request = {"jsonrpc": "2.0", "id": n, "method": "hello", "params": params}
            frames.append(json.dumps(request, ensure_ascii=False))
        size = len(frames[0].encode())
        await trio.sleep(SETTLE)
        baseline = server.rss_mib() or 0.0
        peak = Peak(rss_mib=baseline)
        floods = [Flood() for _ in flooders]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peak.track, server)
            started = time.perf_counter()
            with trio.move_on_after(FLOOD_TIMEOUT):
                async with trio.open_nursery() as attack:
                    for identity, frame, flood in zip(flooders, frames, floods, strict=True):
                        attack.start_soon(_flood, server, identity, frame, settings.frames, flood)
            took = time.perf_counter() - started
            await trio.sleep(SETTLE)
            nursery.cancel_scope.cancel()
        after = server.rss_mib()
        endings = collections.Counter(flood.ended for flood in floods)
        return [
            ("frame", f"{len(frames[0]):,} characters, {size:,} bytes on the wire"),
            ("flood", f"{len(flooders)} controllers × {settings.frames} frames, "
                      f"{sum(f.sent for f in floods)} frames sent in {took:.1f} s"),
            ("how each flood ended", ", ".join(f"{n}× {e}" for e, n in endings.items())),
            ("server RSS baseline", f"{baseline:.0f} MiB"),
            ("server RSS peak", f"{peak.rss_mib:.0f} MiB (+{peak.rss_mib - baseline:.0f})"),
            (f"server RSS {SETTLE:.0f} s after",
             "-" if after is None else f"{after:.0f} MiB (+{after - baseline:.0f})"),
            ("server after the flood", server.status()),
            ("controller served after the flood", await probe(server, checker)),
            *await doctor_stats(server, settings.before is not None),
        ]  # fmt: skip

    return bench


def spread(samples: list[float]) -> str:
    """p50 / p99 / max of ``samples`` (seconds) in milliseconds, nearest rank."""
    if not samples:
        return "no samples"
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]

    return (
        f"p50 {rank(0.5):.1f} / p99 {rank(0.99):.1f} / max {1000 * ordered[-1]:.1f} ms "
        f"(n={len(ordered)})"
    )


@attrs.define
class Caller:
    """One controller's connection that times each call to its whole reply, undecoded.

    The bench's one core cannot decode a thousand replies of ~90 KB (200 rows)
    in the time the server takes to send them, so a decoding client would time
    itself, not the server: each reply is kept as it came and checked (its id,
    its rows) by ``check`` once the round is over.
    """

    ws: WebSocketConnection
    expect: tuple[int, int]
    """The terminals and Turns each `list` must show."""
    ids: Iterator[int] = attrs.field(factory=itertools.count)
    replies: list[tuple[int, str]] = attrs.field(factory=list)
    last: str = ""
    """The last reply, kept past ``check`` (the floor serves its result)."""

    async def call(self, method: str, params: dict[str, Any]) -> str:
        call_id = next(self.ids)
        request = {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}
        await self.ws.send_message(json.dumps(request))
        while True:
            frame = await self.ws.get_message()
            assert isinstance(frame, str)
            if '"method": "event"' not in frame[:64]:  # an event notification is not the reply
                self.replies.append((call_id, frame))
                self.last = frame
                return frame

    def check(self, errors: list[str]) -> None:
        """Decode the replies kept so far; count each wrong one in ``errors``."""
        for call_id, frame in self.replies:
            reply = json.loads(frame)
            result = reply.get("result")
            if reply.get("id") != call_id or not isinstance(result, dict):
                errors.append(f"reply to {call_id}: {str(reply.get('error'))[:80]}")
            elif (len(result["terminals"]), len(result["turns"])) != self.expect:
                errors.append(
                    f"list showed {len(result['terminals'])} terminals and "
                    f"{len(result['turns'])} turns, not {self.expect}"
                )
        self.replies.clear()


async def _timed_list(caller: Caller, latencies: list[float], errors: list[str]) -> None:
    started = time.perf_counter()
    try:
        await caller.call("list", {})
    except Exception as exc:
        errors.append(describe(exc))
        return
    latencies.append(time.perf_counter() - started)


async def _sequential(caller: Caller, count: int) -> tuple[list[float], list[str]]:
    latencies: list[float] = []
    errors: list[str] = []
    with trio.move_on_after(ROUND_TIMEOUT):
        for _ in range(count):
            await _timed_list(caller, latencies, errors)
            caller.check(errors)
    return latencies, errors


@attrs.define
class Fleet:
    """Controllers held connected until ``release`` is set."""

    expect: tuple[int, int]
    held: list[Caller] = attrs.field(factory=list)
    first_try_failures: list[str] = attrs.field(factory=list)
    gave_up: int = 0
    release: trio.Event = attrs.field(factory=trio.Event)

    async def hold(self, url: str, identity: Identity) -> None:
        headers = [(b"Authorization", f"Bearer {identity.token}".encode())]
        hello = {"name": "bench"}
        if identity.controller_id is not None:
            hello["controller_id"] = identity.controller_id
        for attempt in range(CONNECT_ATTEMPTS):
            try:
                async with open_websocket_url(
                    url, extra_headers=headers, connect_timeout=PROBE_TIMEOUT,
                    disconnect_timeout=2, receive_buffer_size=RECEIVE_BYTES,
                ) as ws:  # fmt: skip
                    caller = Caller(ws, self.expect)
                    said = json.loads(await caller.call("hello", hello))
                    if "result" not in said:
                        raise ConnectionError(f"hello refused: {said.get('error')}")
                    caller.replies.clear()
                    self.held.append(caller)
                    await self.release.wait()
                    return
            except Exception as exc:
                if attempt == 0:
                    self.first_try_failures.append(describe(exc))
                await trio.sleep(0.5)
        self.gave_up += 1


def _errors(errors: list[str]) -> str:
    counted = collections.Counter(errors)
    return ", ".join(f"{n}× {e}" for e, n in counted.most_common(3)) or "none"


def bench_list(settings: Settings) -> Callable[[Server, list[Identity]], Awaitable[Rows]]:
    async def bench(server: Server, ids: list[Identity]) -> Rows:
        rows: Rows = [("agent panes", await listed_panes(server, settings.panes))]
        expect = (settings.panes, 0 if settings.before else settings.records)
        fleet = Fleet(expect)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fleet.hold, server.url, ids[0])
            with trio.move_on_after(PROBE_TIMEOUT):
                while not fleet.held:
                    await trio.sleep(SAMPLE_EVERY)
            if not fleet.held:
                raise SystemExit("the first controller could not connect")
            first = fleet.held[0]
            alone, errors = await _sequential(first, settings.sequential)
            rows.append(("sequential list, one controller alone", spread(alone)))
            rows.extend(await _connect(fleet, server.url, ids[1:], nursery))
            held = f"{_fds(server)} descriptors, {server.rss_mib() or 0:.0f} MiB RSS"
            rows.append(("server with them connected", held))
            rows.extend(await _rounds(server, fleet, settings.rounds, errors))
            idle, idle_errors = await _sequential(first, settings.sequential)
            errors.extend(idle_errors)
            rows.append((f"sequential list, {len(fleet.held) - 1} others idle", spread(idle)))
            rows.append(("list errors", _errors(errors)))
            rows.append(("server at the end", server.status()))
            rows.extend(await doctor_stats(server, settings.before is not None))
            started = time.perf_counter()
            await _release(fleet, nursery)
            rows.append(("disconnect them all", f"{time.perf_counter() - started:.1f} s"))
        result = json.dumps(json.loads(first.last)["result"], separators=(",", ":"))
        work = server.state.path.parent
        rows.extend(await _floor(work, result, ids, settings, expect))
        rows.extend(await _floor(work, EMPTY_LIST, ids, settings, (0, 0)))
        return rows

    return bench


async def _connect(fleet: Fleet, url: str, ids: list[Identity], nursery: trio.Nursery) -> Rows:
    """Connect ``ids`` at once, each held in ``fleet`` until its release."""
    started = time.perf_counter()
    before = len(fleet.held)
    for identity in ids:
        nursery.start_soon(fleet.hold, url, identity)
    with trio.move_on_after(CONNECT_TIMEOUT):
        while len(fleet.held) + fleet.gave_up < before + len(ids):
            await trio.sleep(SAMPLE_EVERY)
    rows: Rows = [(
        f"connect {len(ids)} at once",
        f"{len(fleet.held)} connected in {time.perf_counter() - started:.1f} s; "
        f"{len(fleet.first_try_failures)} failed a first try, {fleet.gave_up} gave up",
    )]  # fmt: skip
    if fleet.first_try_failures:
        rows.append(("  first-try failures", _errors(fleet.first_try_failures)))
    return rows


async def _rounds(server: Process, fleet: Fleet, rounds: int, errors: list[str]) -> Rows:
    """``rounds`` of every held controller calling `list` at once; each reply checked after."""
    latencies: list[float] = []
    round_times: list[float] = []
    cpu, own_cpu = server.cpu_seconds(), time.process_time()
    for _ in range(rounds):
        started = time.perf_counter()
        with trio.move_on_after(ROUND_TIMEOUT) as round_scope:
            async with trio.open_nursery() as calls:
                for ctl in fleet.held:
                    calls.start_soon(_timed_list, ctl, latencies, errors)
        if round_scope.cancelled_caught:
            errors.append(f"a round took over {ROUND_TIMEOUT:.0f} s")
            break
        round_times.append(time.perf_counter() - started)
        for caller in fleet.held:
            caller.check(errors)
    cpu, own_cpu = server.cpu_seconds() - cpu, time.process_time() - own_cpu
    return [
        (f"list, {len(fleet.held)} at once × {len(round_times)} rounds", spread(latencies)),
        ("  (each: request sent → reply received whole; decoded after)", ""),
        ("  one round (all of them)", spread(round_times)),
        ("  each round, in order", ", ".join(f"{1000 * t:.0f}" for t in round_times) + " ms"),
        (
            "  CPU during the rounds",
            f"server {cpu:.1f} s ({1000 * cpu / max(1, len(latencies)):.2f} ms a call), "
            f"bench {own_cpu:.1f} s, wall {sum(round_times):.1f} s, {os.cpu_count()} CPUs",
        ),
    ]


async def _release(fleet: Fleet, nursery: trio.Nursery) -> None:
    fleet.release.set()
    with trio.move_on_after(RELEASE_TIMEOUT):
        while len(nursery.child_tasks) > 0:
            await trio.sleep(SAMPLE_EVERY)
    nursery.cancel_scope.cancel()


async def _floor(
    work: Path, result: str, ids: list[Identity], settings: Settings, expect: tuple[int, int]
) -> Rows:
    """The same controllers and rounds against `tools.ws_floor` serving ``result``."""
    rows: Rows = [(f"floor: tools.ws_floor answering {len(result):,} bytes, no AKK", "")]
    fleet = Fleet(expect)
    errors: list[str] = []
    with floor_serving(work, result, nofile=settings.list_nofile) as floor:
        async with trio.open_nursery() as nursery:
            rows.extend(await _connect(fleet, floor.url, ids, nursery))
            rows.extend(await _rounds(floor, fleet, settings.rounds, errors))
            await _release(fleet, nursery)
    rows.append(("  floor errors", _errors(errors)))
    return rows


def print_part(title: str, rows: Rows, took: float) -> None:
    print(f"\n{title}")
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    print(f"  {'(part took)':<{width}}  {took:.1f} s")
    sys.stdout.flush()


def _raise_own_descriptor_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _parse() -> tuple[Settings, str | None]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["handshakes", "memory", "list"])
    parser.add_argument("--nofile", type=int, default=1024, help="server's ulimit -n (attacks)")
    parser.add_argument("--stalled", type=int, default=1100, help="stalled connections")
    parser.add_argument("--flooders", type=int, default=8, help="non-reading controllers")
    parser.add_argument("--frames", type=int, default=60, help="frames each flooder sends")
    parser.add_argument(
        "--controllers", type=int, nargs="+", default=[200, 1000], help="list: C per run"
    )
    parser.add_argument("--rounds", type=int, default=20, help="list: rounds of all C at once")
    parser.add_argument("--sequential", type=int, default=200, help="list: sequential calls")
    parser.add_argument("--list-nofile", type=int, default=4096, help="server's ulimit -n (list)")
    parser.add_argument("--panes", type=int, default=200, help="list: idle agent panes watched")
    parser.add_argument(
        "--records", type=int, default=5, help="list: settled Turns each controller owns"
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="measure the pre-credential server checked out at DIR, for comparison",
    )
    args = parser.parse_args()
    before = args.before.resolve() if args.before else None
    if before is None and max(args.controllers) > MAX_CREDENTIALS:
        parser.error(f"--controllers: a store holds at most {MAX_CREDENTIALS} credentials")
    settings = Settings(
        args.nofile, args.stalled, args.flooders, args.frames, tuple(args.controllers),
        args.rounds, args.sequential, args.list_nofile, args.panes, args.records, before,
    )  # fmt: skip
    return settings, args.only


def main() -> None:
    settings, only = _parse()
    _raise_own_descriptor_limit()
    # A plain `kill` still runs the clean-up below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    code = settings.before or REPO
    print(f"akk serve from {code}" + (" (pre-credential, shared token)" if settings.before else ""))
    root = Path(tempfile.mkdtemp(prefix="akk-bench-endpoint-"))
    try:
        if only in (None, "handshakes"):
            started = time.monotonic()
            rows = run_part(
                root, "handshakes", settings, bench_handshakes(settings),
                controllers=1, nofile=settings.nofile, flags=[],
            )  # fmt: skip
            title = f"stalled handshakes: {settings.stalled:,}, server ulimit -n {settings.nofile}"
            print_part(title, rows, time.monotonic() - started)
        if only in (None, "memory"):
            started = time.monotonic()
            rows = run_part(
                root, "memory", settings, bench_memory(settings),
                controllers=settings.flooders + 1, nofile=settings.nofile, flags=[],
            )  # fmt: skip
            title = f"non-reading controllers: {settings.flooders} × {settings.frames} frames"
            print_part(title, rows, time.monotonic() - started)
        if only in (None, "list"):
            for count in settings.controllers:
                started = time.monotonic()
                work = root / f"list-{count}"
                work.mkdir()
                with panes(work, settings.panes) as watching:
                    rows = run_part(
                        work, "serve", settings, bench_list(settings),
                        controllers=count, nofile=settings.list_nofile,
                        flags=["--max-connections", str(count + 16), *watching],
                        records=settings.records,
                    )  # fmt: skip
                title = (
                    f"`list` latency: {count:,} controllers connected, {settings.panes} panes, "
                    f"{settings.records} records each, server ulimit -n {settings.list_nofile}"
                )
                print_part(title, rows, time.monotonic() - started)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
