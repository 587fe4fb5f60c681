"""Pane output as a dirty signal: output clients, pause/continue, the refresh pacer, on real tmux.

The pacer is checked against its rules with Hypothesis on Trio's autojump
clock; everything that touches tmux runs a private server per test.
"""

from __future__ import annotations

import collections
import itertools
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from akk.backends.terminal.watcher import RefreshPacer
from akk.client import Controller, connect
from akk.config import ServiceConfig
from akk.runtime.actor import Rank, act_as, current_actor
from akk.service import run_service
from akk.store.location import StateDir
from akk.tmux import capture, open_control_client
from akk.tmux import output as tmux_output
from akk.tmux.control import DATA_NOTIFICATIONS, OUTPUT_ATTACH_FLAGS, ControlClient
from akk.tmux.output import OutputWatch
from tests.test_tmux_control import TmuxServer, running_tmux
from tools.lab.akk_runner import mint_offline

COUNTER = "i=0; while :; do i=$((i+1)); echo $i; done"
"""A pane that prints without pause (a numbered line each time)."""


@pytest.fixture
def server() -> Iterator[TmuxServer]:
    with running_tmux("akk-dirty-") as srv:
        yield srv
    assert not srv.answers(), "the test's tmux server outlived it"


@attrs.define
class Signals:
    """Records `on_output` calls; tests wait for a pane's count to reach a number."""

    counts: collections.Counter[str] = attrs.field(factory=collections.Counter)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def __call__(self, pane_id: str) -> None:
        self.counts[pane_id] += 1
        self._changed.set()
        self._changed = trio.Event()

    async def reach(self, pane_id: str, count: int) -> None:
        while self.counts[pane_id] < count:
            await self._changed.wait()


def session_of(srv: TmuxServer, pane_id: str) -> str:
    return srv.tmux("display", "-p", "-t", pane_id, "#{session_id}").strip()


def output_clients(srv: TmuxServer) -> list[str]:
    """Names of the server's attached output clients (control clients with pause-after)."""
    lines = srv.tmux("list-clients", "-F", "#{client_name} #{client_flags}").splitlines()
    return [line.split()[0] for line in lines if "pause-after" in line]


async def until(predicate: Callable[[], bool]) -> None:
    """Poll a condition that has no event to wait on (another process's state)."""
    while not predicate():
        await trio.sleep(0.01)


async def last_number(client: ControlClient, pane_id: str) -> int:
    numbers = [int(w) for w in (await capture(client, pane_id)).split() if w.isdigit()]
    return max(numbers, default=0)


@asynccontextmanager
async def watching(
    srv: TmuxServer, weights: dict[str, int], *, max_clients: int = 8
) -> AsyncIterator[tuple[OutputWatch, Signals, ControlClient]]:
    """A no-output command client, and an OutputWatch on `weights`' sessions once attached.

    Yields once each watched pane gave its first signal: the one every pane
    gives when its session's client attaches.
    """
    signals = Signals()
    async with open_control_client(srv.socket, session="main") as keeper:
        watch = OutputWatch(srv.socket, signals, max_clients=max_clients)
        async with trio.open_nursery() as nursery:
            await nursery.start(watch.run)
            watch.watch(weights)
            for session in watch.sessions:
                for pane in srv.tmux("list-panes", "-s", "-t", session, "-F", "#{pane_id}").split():
                    await signals.reach(pane, 1)
            yield watch, signals, keeper
            nursery.cancel_scope.cancel()


# ------------------------------------------------------------------ output clients


async def test_output_signals_its_pane_at_once(server: TmuxServer) -> None:
    pane = server.new_session("agent", "cat")  # the tty echoes what is typed
    with trio.fail_after(10):
        async with watching(server, {session_of(server, pane): 1}) as (_, signals, _):
            started = trio.current_time()
            server.tmux("send-keys", "-t", pane, "hello")
            await signals.reach(pane, 2)
            # No listing runs here: only the pane's own output can have said so.
            assert trio.current_time() - started < 0.5
    assert output_clients(server) == []  # detached on exit


async def test_a_flood_signals_once_per_arm_and_the_paused_pane_runs_on(
    server: TmuxServer,
) -> None:
    pane = server.new_session("flood", COUNTER)
    with trio.fail_after(20):
        async with watching(server, {session_of(server, pane): 1}) as (watch, signals, keeper):
            await signals.reach(pane, 2)  # attached, then its first output line
            # Paused for AKK's client only: the pane keeps printing for the person.
            mark = await last_number(keeper, pane)
            while await last_number(keeper, pane) < mark + 20000:
                await trio.sleep(0.02)
            assert signals.counts[pane] == 2  # not one signal per line
            await watch.arm(pane)
            await signals.reach(pane, 3)
            assert signals.counts[pane] == 3


async def test_a_pane_tmux_paused_signals_and_is_continued_by_arm(server: TmuxServer) -> None:
    pane = server.new_session("agent", "cat")
    with trio.fail_after(10):
        async with watching(server, {session_of(server, pane): 1}) as (watch, signals, _):
            (name,) = output_clients(server)
            # What tmux does when the client falls pause-after seconds behind.
            server.tmux("refresh-client", "-t", name, "-A", f"{pane}:pause")
            await signals.reach(pane, 2)
            server.tmux("send-keys", "-t", pane, "while paused")
            await watch.arm(pane)  # continue: the pane is not left paused
            server.tmux("send-keys", "-t", pane, "after")
            await signals.reach(pane, 3)


async def test_a_client_streams_only_its_own_session_so_each_session_gets_one(
    server: TmuxServer,
) -> None:
    a = server.new_session("a", "cat")
    b = server.new_session("b", "cat")
    with trio.fail_after(15):
        async with (
            open_control_client(server.socket, session="main") as keeper,
            open_control_client(server.socket, session=session_of(server, a), output=True) as ac,
        ):
            with ac.subscribe() as notes:
                server.tmux("send-keys", "-t", b, "bbb")
                while "bbb" not in await capture(keeper, b):
                    await trio.sleep(0.01)
                server.tmux("send-keys", "-t", a, "aaa")
                async for note in notes:
                    if note.name in DATA_NOTIFICATIONS:
                        assert note.pane_id == a  # b's output never came
                        break
        weights = {session_of(server, a): 1, session_of(server, b): 1}
        async with watching(server, weights) as (_, signals, _):
            server.tmux("send-keys", "-t", a, "x")
            server.tmux("send-keys", "-t", b, "y")
            await signals.reach(a, 2)
            await signals.reach(b, 2)


async def test_output_clients_are_bounded_heaviest_sessions_first(server: TmuxServer) -> None:
    sessions = [session_of(server, server.new_session(f"s{n}")) for n in range(3)]
    weights = {sessions[0]: 1, sessions[1]: 3, sessions[2]: 2}
    with trio.fail_after(15):
        async with watching(server, weights, max_clients=2) as (watch, _, _):
            assert watch.sessions == {sessions[1], sessions[2]}
            assert len(output_clients(server)) == 2
            watch.watch({sessions[0]: 5})
            assert watch.sessions == {sessions[0]}
            await until(lambda: len(output_clients(server)) == 1 and watch.attached == 1)
            watch.watch({})
            await until(lambda: output_clients(server) == [])


async def test_a_lagging_output_client_never_stalls_a_pane(server: TmuxServer) -> None:
    """tmux stops reading a pane only if every attached client is a control client that
    cannot take its output; AKK's no-output command client never is one."""
    pane = server.new_session("flood", COUNTER)
    with trio.fail_after(30):
        async with open_control_client(server.socket, session="main") as keeper:
            # An output client whose output nobody reads: its pipe fills within a moment.
            lagging = await trio.lowlevel.open_process(
                ["tmux", "-S", server.socket, "-C", "attach-session", "-f",
                 OUTPUT_ATTACH_FLAGS, "-t", session_of(server, pane)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                await until(lambda: len(output_clients(server)) == 1)
                mark = await last_number(keeper, pane)
                # Far more than a pipe and tmux's buffer hold: the pane was never held back.
                while await last_number(keeper, pane) < mark + 100000:
                    await trio.sleep(0.05)
            finally:
                lagging.kill()
                await lagging.wait()


# ------------------------------------------------------------------ the pacer

INTERVAL = 0.03


@attrs.define
class PacedLog:
    """What a pacer did to one pane, on the virtual clock."""

    marks: list[float] = attrs.field(factory=list)
    runs: list[tuple[float, float]] = attrs.field(factory=list)
    running: int = 0
    most_at_once: int = 0


async def pace(marks: dict[str, list[float]], duration: float) -> dict[str, PacedLog]:
    """Mark panes at the given offsets; each refresh takes `duration`."""
    logs = {pane: PacedLog() for pane in marks}

    async def refresh(pane: str) -> None:
        log = logs[pane]
        log.running += 1
        log.most_at_once = max(log.most_at_once, log.running)
        started = trio.current_time()
        await trio.sleep(duration)
        log.runs.append((started, trio.current_time()))
        log.running -= 1

    pacer = RefreshPacer(refresh, INTERVAL)
    events = sorted((t, pane) for pane, times in marks.items() for t in times)
    async with trio.open_nursery() as nursery:
        await nursery.start(pacer.run)
        base = trio.current_time()
        for offset, pane in events:
            await trio.sleep_until(base + offset)
            logs[pane].marks.append(trio.current_time())
            pacer.mark(pane)
        while pacer.busy:
            await trio.sleep(INTERVAL)
        nursery.cancel_scope.cancel()
    return logs


async def test_a_mark_while_the_pacer_closes_starts_nothing_and_raises_nothing() -> None:
    # A pane change can mark the pacer of an `akk serve` that is stopping: between its
    # nursery closing and its own task leaving it, other tasks run and mark it.
    refreshed: list[str] = []

    async def refresh(pane: str) -> None:
        refreshed.append(pane)
        await trio.sleep_forever()

    pacer = RefreshPacer(refresh, INTERVAL)
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as hosting:
            await hosting.start(pacer.run)
            pacer.mark("%1")

            async def keep_marking() -> None:
                while True:
                    pacer.mark("%2")
                    await trio.lowlevel.checkpoint()

            outer.start_soon(keep_marking)
            await trio.sleep(INTERVAL)
            hosting.cancel_scope.cancel()
        outer.cancel_scope.cancel()
    assert refreshed[0] == "%1" and pacer.busy == 0


async def test_a_pane_marked_by_an_actor_is_refreshed_as_no_actor() -> None:
    """A TerminalActor marks its own pane from its handler (`refresh_soon`); the refresh
    asks that actor, which it could not do with the actor's rank (RankViolation)."""
    asking: list[object] = []
    marked = trio.Event()

    async def refresh(pane: str) -> None:
        asking.append(current_actor())
        marked.set()

    pacer = RefreshPacer(refresh, INTERVAL)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(pacer.run)

            async def handler() -> None:
                act_as("terminal term_x/actor", Rank.TERMINAL)
                pacer.mark("%1")

            nursery.start_soon(handler)
            await marked.wait()
            nursery.cancel_scope.cancel()
    assert asking == [None]


def check_paced(log: PacedLog) -> None:
    starts = [start for start, _ in log.runs]
    assert log.most_at_once <= 1, "two refreshes of one pane at once"
    assert all(b - a >= INTERVAL - 1e-9 for a, b in itertools.pairwise(starts))
    assert len(log.runs) <= len(log.marks)
    # No mark is lost: each one is followed by a refresh that starts at or after it.
    for mark in log.marks:
        assert any(start >= mark for start in starts), f"mark at {mark} never refreshed"


_offsets = st.lists(st.floats(0, 0.5, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=200)
@given(
    st.dictionaries(st.sampled_from(["%1", "%2", "%3"]), _offsets, min_size=1),
    st.sampled_from([0.0, 0.005, 0.05]),
)
def test_pacer_one_at_a_time_spaced_and_no_mark_lost(
    marks: dict[str, list[float]], duration: float
) -> None:
    logs = trio.run(pace, marks, duration, clock=trio.testing.MockClock(autojump_threshold=0))
    for log in logs.values():
        check_paced(log)


async def test_pacer_turns_a_burst_into_one_refresh_and_one_trailing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    logs = await pace({"%1": [0.001 * n for n in range(20)], "%2": [0.0]}, duration=0.005)
    burst = logs["%1"]
    assert [round(start, 3) for start, _ in burst.runs] == [0.0, INTERVAL]
    assert [round(start, 3) for start, _ in logs["%2"].runs] == [
        0.0
    ]  # panes do not wait on each other


async def test_pacer_bounds_the_refreshes_of_a_pane_that_never_stops(
    autojump_clock: trio.testing.MockClock,
) -> None:
    logs = await pace({"%1": [0.001 * n for n in range(1000)]}, duration=0.002)
    assert len(logs["%1"].runs) <= 1 / INTERVAL + 2  # ~33 a second, not 1000


async def test_a_refresh_that_asks_for_a_recheck_is_refreshed_again_unmarked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A held permission (`Observer.recheck`): one mark, then a refresh every `again` seconds
    while the terminal asks, a mark meanwhile refreshing at once, none after it stops asking."""
    starts: list[float] = []
    asks = [0.2, 0.2, 0.2, None]

    async def refresh(pane: str) -> float | None:
        starts.append(round(trio.current_time(), 3))
        return asks[len(starts) - 1]

    pacer = RefreshPacer(refresh, INTERVAL)
    async with trio.open_nursery() as nursery:
        await nursery.start(pacer.run)
        pacer.mark("%1")
        await trio.sleep(0.25)
        pacer.mark("%1")  # mid-wait: the pane printed
        await trio.sleep(5)
        assert pacer.busy == 0
        nursery.cancel_scope.cancel()
    assert starts == [0.0, 0.2, 0.25, 0.45]


# ------------------------------------------------------------------ through akk serve


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    """A process named `claude` that draws nothing and cannot say its version."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    (tmp_path / "bin").mkdir()
    shutil.copy(sleep, tmp_path / "bin" / "claude")
    return tmp_path / "bin" / "claude"


async def _screen(ctl: Controller, terminal_id: str) -> str:
    status = await ctl.call("status", {"terminal_id": terminal_id})
    return str(status["screen_excerpt"] or "")


@asynccontextmanager
async def serving(
    srv: TmuxServer, tmp_path: Path, poll_interval: float
) -> AsyncIterator[Controller]:
    state = StateDir(tmp_path / "akk")
    token = mint_offline(state, "ctl")["ctl"]
    config = ServiceConfig(
        state=state, port=0, tmux_sockets=(srv.socket,), poll_interval=poll_interval
    )
    async with trio.open_nursery() as nursery:
        endpoint = await nursery.start(
            lambda task_status: run_service(config, task_status=task_status)
        )
        async with connect(endpoint.url, token) as ctl:
            yield ctl
        nursery.cancel_scope.cancel()


async def _one_terminal(ctl: Controller) -> str:
    while not (rows := (await ctl.call("list"))["terminals"]):
        await trio.sleep(0.02)
    (row,) = rows
    return str(row["terminal_id"])


async def test_serve_shows_output_at_once_with_the_poll_far_away(
    server: TmuxServer, stand_in: Path, tmp_path: Path
) -> None:
    pane = server.new_session("agent", f"{stand_in} 600")
    with trio.fail_after(30):
        # The listing runs once at the start and then not for a minute.
        async with serving(server, tmp_path, poll_interval=60.0) as ctl:
            terminal_id = await _one_terminal(ctl)
            await until(lambda: len(output_clients(server)) == 1)
            for word in ("first", "second"):
                server.tmux("send-keys", "-t", pane, word)
                with trio.fail_after(2):
                    while word not in await _screen(ctl, terminal_id):
                        await trio.sleep(0.01)
    assert server.tmux("list-clients") == ""  # every client AKK attached is gone


async def test_the_poll_still_catches_output_whose_signal_was_lost(
    server: TmuxServer, stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tmux_output, "RETRY_INTERVAL", 3600.0)  # a lost client stays lost
    pane = server.new_session("agent", f"{stand_in} 600")
    with trio.fail_after(30):
        async with serving(server, tmp_path, poll_interval=0.1) as ctl:
            terminal_id = await _one_terminal(ctl)
            await until(lambda: len(output_clients(server)) == 1)
            (name,) = output_clients(server)
            server.tmux("detach-client", "-t", name)
            await until(lambda: output_clients(server) == [])
            server.tmux("send-keys", "-t", pane, "unsignalled")
            while "unsignalled" not in await _screen(ctl, terminal_id):
                await trio.sleep(0.02)
