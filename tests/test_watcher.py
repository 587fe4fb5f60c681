"""Discovery and version binding through `akk serve`, with stand-in agents in real tmux.

A stand-in is a real native process named `claude` that prints a version the
profiles do not pin (or none at all): AKK must list it with no profile and a
reason, and never classify its screen.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import AkkError, Controller, connect
from akk.service import ServiceConfig, run_service
from akk.store.database import open_reader
from akk.store.location import StateDir
from tools.lab.akk_runner import mint_offline

_FAKE_AGENT = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        puts("9.9.9 (Claude Code)");
        return 0;
    }
    puts("a stand-in agent, waiting");
    fflush(stdout);
    pause();
    return 0;
}
"""


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    """bin/unpinned/claude prints an unpinned version; bin/silent/claude prints none."""
    unpinned = tmp_path / "bin" / "unpinned"
    silent = tmp_path / "bin" / "silent"
    unpinned.mkdir(parents=True)
    silent.mkdir(parents=True)
    source = tmp_path / "agent.c"
    source.write_text(_FAKE_AGENT)
    subprocess.run(["cc", "-O", "-o", str(unpinned / "claude"), str(source)], check=True)
    sleep = shutil.which("sleep")
    assert sleep is not None
    shutil.copy(sleep, silent / "claude")
    return tmp_path / "bin"


@pytest.fixture
def tmux_socket(tmp_path: Path) -> Iterator[str]:
    socket = str(tmp_path / "tmux.sock")
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


async def _wait_rows(ctl: Controller, count: int) -> list[dict[str, Any]]:
    with trio.fail_after(20):
        while len(rows := await _rows(ctl)) != count:
            await trio.sleep(0.05)
    return rows


async def test_unpinned_and_unprovable_versions_get_no_profile(
    agents: Path, tmux_socket: str, tmp_path: Path
) -> None:
    state = StateDir(tmp_path / "akk")
    config = ServiceConfig(state=state, port=0, tmux_sockets=(tmux_socket,), poll_interval=0.1)
    tmux = ["tmux", "-S", tmux_socket]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            async with connect(endpoint.url, state.token()) as ctl:
                # A shell pane is no terminal; agents appear as their panes open.
                assert await _wait_rows(ctl, 0) == []
                await trio.run_process(
                    [*tmux, "new-window", "-d", str(agents / "unpinned" / "claude")]
                )
                (row,) = await _wait_rows(ctl, 1)
                assert (row["agent"], row["version"], row["profile"]) == ("claude", "9.9.9", None)
                assert row["profile_reason"].startswith("unpinned_version")
                assert row["activity_state"] == "unknown"
                # Listed as soon as it is found; its screen follows with the first capture.
                with trio.fail_after(10):
                    while not (
                        status := await ctl.call("status", {"terminal_id": row["terminal_id"]})
                    )["screen_excerpt"]:
                        await trio.sleep(0.05)
                assert status["interaction"] is None
                assert status["terminal"]["observation"]["actionable"] is False
                assert "a stand-in agent, waiting" in status["screen_excerpt"]

                # Started by a shell a moment after the pane opened, drawing nothing (so
                # the listing sees no change: the sweep finds it), unable to say its version.
                shell = f"sh -c 'sleep 0.3; {agents / 'silent' / 'claude'} 100000; echo done'"
                await trio.run_process([*tmux, "new-window", "-d", shell])
                rows = await _wait_rows(ctl, 2)
                silent = next(r for r in rows if r["terminal_id"] != row["terminal_id"])
                assert (silent["version"], silent["profile"]) == (None, None)
                assert silent["profile_reason"] == "version_unknown"

                # The operator's table shows both, with what binds them.
                listed = await trio.run_process(
                    [sys.executable, "-m", "akk", "list"], capture_stdout=True,
                    env={**os.environ, "AKK_STATE_DIR": str(state.path), "COLUMNS": "250"},
                )  # fmt: skip
                table = listed.stdout.decode()
                assert "claude" in table and "9.9.9" in table
                assert "unpinned_version" in table and "version_unknown" in table

                # Panes going away take their terminals with them.
                await trio.run_process([*tmux, "kill-window", "-t", row["pane"]])
                (left,) = await _wait_rows(ctl, 1)
                assert left["terminal_id"] == silent["terminal_id"]
            nursery.cancel_scope.cancel()
    reader = open_reader(state.store_path)
    recorded = dict(reader.execute("SELECT terminal_id, gone_at IS NOT NULL FROM terminals"))
    assert recorded == {row["terminal_id"]: 1, silent["terminal_id"]: 1}


async def test_a_send_to_an_unpinned_version_is_refused_with_zero_keys(
    agents: Path, tmux_socket: str, tmp_path: Path
) -> None:
    state = StateDir(tmp_path / "akk")
    token = mint_offline(state, "ctl")["ctl"]
    config = ServiceConfig(state=state, port=0, tmux_sockets=(tmux_socket,), poll_interval=0.1)
    tmux = ["tmux", "-S", tmux_socket]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            async with connect(endpoint.url, token) as ctl:
                await trio.run_process(
                    [*tmux, "new-window", "-d", str(agents / "unpinned" / "claude")]
                )
                (row,) = await _wait_rows(ctl, 1)
                pane = ["capture-pane", "-p", "-t", row["pane"]]
                before = (await trio.run_process([*tmux, *pane], capture_stdout=True)).stdout
                with pytest.raises(AkkError) as refused:
                    await ctl.call(
                        "send",
                        {"terminal_id": row["terminal_id"], "request": "lab: hi",
                         "client_request_id": "u"},
                    )  # fmt: skip
                assert refused.value.reason == "unsupported_version"
                after = (await trio.run_process([*tmux, *pane], capture_stdout=True)).stdout
                assert after == before
                assert (await ctl.call("list"))["turns"] == []
            nursery.cancel_scope.cancel()
