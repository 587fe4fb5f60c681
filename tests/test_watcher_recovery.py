"""A watcher's troubles stay its own: a crash-looping pane, a `--version` that failed once,
one tmux server named by two socket paths. Real tmux (a private server per test, killed in
its fixture's finally), real stand-in agents, a real `akk serve`."""

from __future__ import annotations

import functools
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import akk.service
from akk.backends.terminal import observer
from akk.backends.terminal import watcher as watcher_module
from akk.backends.terminal.watcher import distinct_servers
from akk.cli.doctor import server_checks
from akk.client import Controller, connect
from akk.config import ServiceConfig
from akk.discovery.process import VersionCache
from akk.profiles.observation import Observation
from akk.screen.grid import Grid
from akk.service import run_service
from akk.store.location import StateDir

_AGENT = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        if (access(SLOW_WHILE, F_OK) == 0) sleep(5);  /* a machine under load */
        puts(VERSION " (Claude Code)");
        return 0;
    }
    puts(argc > 1 ? argv[1] : "a stand-in agent, waiting");
    fflush(stdout);
    pause();
    return 0;
}
"""


def _agent(tmp_path: Path, version: str, slow_while: Path) -> Path:
    """A stand-in `claude` printing ``version``; its `--version` hangs while ``slow_while`` is."""
    directory = tmp_path / "bin" / version
    directory.mkdir(parents=True)
    (tmp_path / "agent.c").write_text(_AGENT)
    binary = directory / "claude"
    subprocess.run(
        ["cc", "-O", f'-DVERSION="{version}"', f'-DSLOW_WHILE="{slow_while}"',
         "-o", str(binary), str(tmp_path / "agent.c")],
        check=True,
    )  # fmt: skip
    return binary


@pytest.fixture
def tmux_socket(tmp_path: Path) -> Iterator[str]:
    socket = str(tmp_path / "real" / "tmux.sock")
    os.mkdir(tmp_path / "real")
    subprocess.run(
        ["tmux", "-S", socket, "-f", "/dev/null", "new-session", "-d", "-s", "base",
         "-x", "120", "-y", "40", "sleep 100000"],
        check=True,
    )  # fmt: skip
    try:
        yield socket
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, check=False)


async def _rows(ctl: Controller) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = (await ctl.call("list"))["terminals"]
    return rows


async def _until_rows(ctl: Controller, seconds: float, ok: Any) -> list[dict[str, Any]]:
    """The terminals listed once ``ok(rows)`` holds (polled, within ``seconds``)."""
    with trio.fail_after(seconds):
        while not ok(rows := await _rows(ctl)):
            await trio.sleep(0.05)
    return rows


async def _until_health(ctl: Controller, seconds: float, ok: Any) -> dict[str, Any]:
    """The server's health once ``ok(health)`` holds (polled, within ``seconds``)."""
    with trio.fail_after(seconds):
        while not ok(health := await ctl.call("doctor")):
            await trio.sleep(0.05)
    return health


def _held(health: dict[str, Any]) -> dict[str, Any]:
    (watcher,) = health["watchers"]
    held: dict[str, Any] = watcher["held_terminals"]
    return held


async def test_a_crash_looping_pane_is_held_and_retried_while_its_siblings_and_the_server_live_on(
    tmp_path: Path, tmux_socket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = _agent(tmp_path, "9.9.9", tmp_path / "never")
    real = observer.classify

    def classify(grid: Grid, *args: Any) -> Observation:
        if any("POISON" in line for line in grid.lines()):
            raise RuntimeError("a profile bug on one odd screen")
        return real(grid, *args)

    monkeypatch.setattr(observer, "classify", classify)
    monkeypatch.setattr(watcher_module, "HELD_RETRY", 0.5)
    state = StateDir(tmp_path / "akk")
    config = ServiceConfig(state=state, port=0, tmux_sockets=(tmux_socket,), poll_interval=0.1)
    tmux = ["tmux", "-S", tmux_socket]
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            async with connect(endpoint.url, state.token()) as ctl:
                await trio.run_process([*tmux, "new-window", "-d", f"{binary} healthy"])
                (healthy,) = await _until_rows(ctl, 20, lambda rows: len(rows) == 1)
                poison = (
                    (
                        await trio.run_process(
                            [
                                *tmux,
                                "new-window",
                                "-d",
                                "-P",
                                "-F",
                                "#{pane_id}",
                                f"{binary} POISON",
                            ],
                            capture_stdout=True,
                        )
                    )
                    .stdout.decode()
                    .strip()
                )

                # Its actor crashed past the pane's own restart intensity: held off the
                # board with the reason, and tried again after the hold (crashes counted up).
                await _until_health(
                    ctl, 30, lambda h: any(t["crashes"] >= 2 for t in _held(h).values())
                )
                # Held for long from the next time on, so that the board is looked at while
                # it is surely held.
                monkeypatch.setattr(watcher_module, "HELD_RETRY", 3600.0)
                health = await _until_health(
                    ctl, 30, lambda h: any(t["crashes"] >= 3 for t in _held(h).values())
                )
                (held,) = _held(health).values()
                assert held["pane"] == poison
                assert held["reason"] == "RuntimeError: a profile bug on one odd screen"
                # `akk doctor` names it, why, and when it is tried again.
                (check,) = [c for c in server_checks(health) if c.name == f"terminal {poison}"]
                assert not check.ok and "held off the board" in check.detail
                assert held["reason"] in check.detail and "tried again at" in check.next_step
                # Doubled each time, at most HELD_MAX_RETRY, less at most half of it (jitter).
                assert held["retry_at"] - held["held_at"] >= watcher_module.HELD_MAX_RETRY / 2
                # Nobody else paid: the sibling kept its terminal, the watcher and the
                # server never restarted, and a pane opened now is watched as usual.
                rows = await _rows(ctl)
                assert [r["terminal_id"] for r in rows] == [healthy["terminal_id"]]
                assert health["supervisor"] == {"restarts": {}, "escalations": 0}
                (watcher,) = health["watchers"]
                assert watcher["attached"] and watcher["failures"] == 0
                another = (
                    (
                        await trio.run_process(
                            [
                                *tmux,
                                "new-window",
                                "-d",
                                "-P",
                                "-F",
                                "#{pane_id}",
                                f"{binary} another",
                            ],
                            capture_stdout=True,
                        )
                    )
                    .stdout.decode()
                    .strip()
                )
                await _until_rows(ctl, 20, lambda rows: another in {r["pane"] for r in rows})

                # The pane closing ends its hold.
                await trio.run_process([*tmux, "kill-pane", "-t", poison])
                await _until_health(ctl, 20, lambda h: _held(h) == {})
            nursery.cancel_scope.cancel()


async def test_a_version_probe_that_failed_is_asked_again_and_the_pane_binds(
    tmp_path: Path, tmux_socket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first `--version` times out (a loaded machine); FAILED_VERSION_RETRY later it
    answers, and the same terminal binds the profile of its (pinned) version."""
    loaded = tmp_path / "loaded"
    loaded.write_text("")
    binary = _agent(tmp_path, "2.1.332", loaded)
    # VERSION_TIMEOUT and FAILED_VERSION_RETRY, scaled down.
    monkeypatch.setattr(
        akk.service, "VersionCache",
        functools.partial(VersionCache, timeout=0.5, retry_failed_after=1.0),
    )  # fmt: skip
    state = StateDir(tmp_path / "akk")
    config = ServiceConfig(state=state, port=0, tmux_sockets=(tmux_socket,), poll_interval=0.1)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            async with connect(endpoint.url, state.token()) as ctl:
                await trio.run_process(["tmux", "-S", tmux_socket, "new-window", "-d", str(binary)])
                (first,) = await _until_rows(ctl, 20, lambda rows: len(rows) == 1)
                assert (first["version"], first["profile"]) == (None, None)
                assert first["profile_reason"] == "version_unknown"
                loaded.unlink()  # the load is over: `--version` answers at once
                (bound,) = await _until_rows(
                    ctl, 20, lambda rows: len(rows) == 1 and rows[0]["profile"] is not None
                )
                assert bound["terminal_id"] == first["terminal_id"]
                assert bound["version"] == "2.1.332"
                assert bound["profile_reason"] is None
            nursery.cancel_scope.cancel()


async def test_one_server_reached_by_two_socket_paths_is_watched_once(
    tmp_path: Path, tmux_socket: str
) -> None:
    binary = _agent(tmp_path, "9.9.9", tmp_path / "never")
    os.symlink(tmp_path / "real", tmp_path / "link")
    state = StateDir(tmp_path / "akk")
    aliased = (tmux_socket, str(tmp_path / "link" / "tmux.sock"))
    config = ServiceConfig(state=state, port=0, tmux_sockets=aliased, poll_interval=0.1)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            async with connect(endpoint.url, state.token()) as ctl:
                watchers = (await ctl.call("doctor"))["watchers"]
                assert [w["socket"] for w in watchers] == [tmux_socket]
                await trio.run_process(["tmux", "-S", tmux_socket, "new-window", "-d", str(binary)])
                (row,) = await _until_rows(ctl, 20, lambda rows: len(rows) == 1)
                assert row["tmux_socket"] == tmux_socket
            nursery.cancel_scope.cancel()


def test_distinct_servers_by_real_path_and_by_socket_identity(
    tmp_path: Path, tmux_socket: str, caplog: pytest.LogCaptureFixture
) -> None:
    real = tmp_path / "real"
    os.symlink(real, tmp_path / "link")
    os.link(tmux_socket, tmp_path / "hard.sock")  # another name of the same socket
    later = tmp_path / "later.sock"  # no server yet: watched, waiting for one
    with caplog.at_level(logging.INFO, logger="akk.watcher"):
        kept = distinct_servers(
            [
                tmux_socket,
                str(tmp_path / "link" / "tmux.sock"),
                str(tmp_path / "hard.sock"),
                str(later),
                str(tmp_path / "link" / ".." / "later.sock"),
                str(tmp_path / "link" / "later.sock"),
            ]
        )
    assert kept == [tmux_socket, str(later), str(real / "later.sock")]
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"tmux socket {tmp_path / 'link' / 'tmux.sock'} reaches the server of {tmux_socket}: "
        "watched once",
        f"tmux socket {tmp_path / 'hard.sock'} reaches the server of {tmux_socket}: watched once",
        f"tmux socket {tmp_path / 'link' / '..' / 'later.sock'} reaches the server of "
        f"{later}: watched once",
    ]
