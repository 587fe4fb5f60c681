"""Fixtures shared across the test suite."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import HealthCheck, settings

from akk.config import EndpointLimits, ServiceConfig
from akk.qualify.launcher import end_abandoned
from akk.server.instance import Endpoint
from akk.service import run_service
from akk.store.location import StateDir
from tests import corpus
from tests.lab.conftest import CLIENT_PROPERTY, START_PROPERTY
from tools.lab.akk_runner import mint_offline

# Hypothesis fails an example that ran past a deadline once and within it when replayed
# ("unreliable test timings"), and a test whose first examples were slow to draw. On two
# cores shared with the lab's real clients both are flakes, not findings: speed is what
# the benchmarks under tools/ measure, never a test. A test's own `suppress_health_check`
# replaces this one's, so each such list names `too_slow` again.
settings.register_profile("akk", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("akk")


@attrs.frozen
class LiveServer:
    """An `akk serve` running in a background thread on a free port."""

    endpoint: Endpoint
    token: str
    """The operator CLI's credential (`akk-cli`)."""
    state: StateDir
    controllers: dict[str, str]
    """Controller credentials minted before start, by controller_id."""

    @property
    def url(self) -> str:
        return self.endpoint.url


LIVE_CONTROLLERS = ("c1", "c2", "c3", "after")


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real server (store, supervisor, WebSocket) shared by a module's tests.

    Its Claude headless backend is unavailable (its --claude-bin names no file).
    """
    state = StateDir(tmp_path_factory.mktemp("state") / "akk")
    config = ServiceConfig(
        state=state, port=0, limits=EndpointLimits(max_frame_bytes=64 * 1024), tmux_sockets=(),
        claude_bin=str(state.path.parent / "no-claude"),
    )  # fmt: skip
    controllers = mint_offline(state, *LIVE_CONTROLLERS)
    started = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        box["token"] = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            box["scope"] = nursery.cancel_scope
            box["endpoint"] = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            started.set()

    def thread_main() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # reported to the test thread below
            box["error"] = exc
        finally:
            started.set()

    thread = threading.Thread(target=thread_main, name="akk-serve", daemon=True)
    thread.start()
    started.wait(30)
    if "error" in box:
        raise RuntimeError("the live server failed to start") from box["error"]  # type: ignore[arg-type]
    endpoint = box["endpoint"]
    assert isinstance(endpoint, Endpoint)
    yield LiveServer(endpoint=endpoint, token=state.token(), state=state, controllers=controllers)
    trio.from_thread.run_sync(
        box["scope"].cancel,  # type: ignore[attr-defined]
        trio_token=box["token"],  # type: ignore[arg-type]
    )
    thread.join(30)
    assert not thread.is_alive(), "the live server did not shut down"
    assert "error" not in box, f"the live server failed: {box.get('error')!r}"


@pytest.fixture
def state_dir(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "akk")


CORPUS_TEST = "tests/test_fixtures.py::test_fixture_classifies_to_its_label["
"""The regression gate: every captured screen classifies to its label."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` first (a stable sort: otherwise the order stays), then the lab
    (collected before the other tests), so that the longest ones start at once and the
    run ends on quick tests, never on one that runs alone (`make test` hands each worker
    the next test as it frees up)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


ABANDONED = pytest.StashKey[list[Path]]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """End the lab runs of a test worker that was killed (a crash, a signal).

    A killed worker cannot run its lab teardown; the controller runs last, after
    every worker has ended, so it ends their tmux servers, clients and servers.
    """
    if not hasattr(session.config, "workerinput"):
        session.config.stash[ABANDONED] = trio.run(end_abandoned)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _corpus_summary(terminalreporter)
    _lab_summary(terminalreporter)
    if ended := terminalreporter.config.stash.get(ABANDONED, []):
        terminalreporter.section("lab runs of a killed process, ended after the run")
        for root in ended:
            terminalreporter.write_line(str(root))


def _corpus_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Screens per pinned version and per labelled state, as this run's gate checked them."""
    screens: dict[str, Counter[str]] = {}
    failed: Counter[str] = Counter()
    for outcome in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if not nodeid.startswith(CORPUS_TEST) or report.when != "call":
                continue
            properties = dict(report.user_properties)
            ran = properties.get(corpus.RAN, ())
            failing = properties.get(corpus.FAILED, ran if outcome != "passed" else ())
            for name in ran:
                label = corpus.label(corpus.ROOT / name)
                expected = label["expected"]
                state = "blocked" if expected["manual_only"] else expected["state"]
                version = f"{label['agent']} {label['version']}"
                screens.setdefault(version, Counter())[state] += 1
                if name in failing:
                    failed[version] += 1
    if not screens:
        return
    terminalreporter.section("screen corpus (tests/test_fixtures.py)")
    for version in sorted(screens):
        counts = screens[version]
        states = " · ".join(f"{state} {n}" for state, n in sorted(counts.items()))
        terminalreporter.write_line(
            f"{version:16} {sum(counts.values()):4} screens, {failed[version]} failed: {states}"
        )


def _lab_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print per-client start-up times of this run's lab tests."""
    starts: dict[str, list[float]] = {}
    durations: list[float] = []
    for outcome in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            properties = dict(getattr(report, "user_properties", []))
            if START_PROPERTY not in properties or report.when != "call":
                continue
            starts.setdefault(str(properties[CLIENT_PROPERTY]), []).append(
                float(properties[START_PROPERTY])
            )
            durations.append(report.duration)
    if not starts:
        return
    terminalreporter.section("lab client start-up (launch to idle composer)")
    for name in sorted(starts):
        times = starts[name]
        terminalreporter.write_line(
            f"{name:16} n={len(times):<3} mean {sum(times) / len(times):5.2f} s  "
            f"max {max(times):5.2f} s"
        )
    terminalreporter.write_line(
        f"lab test calls: {len(durations)}, summed call time {sum(durations):.1f} s"
    )
