"""Discovery and version binding through `akk serve`, with stand-in agents in real tmux.

A stand-in is a real native process named `claude` that prints a version the
profiles do not pin (or none at all): AKK must list it with no profile and a
reason, and never classify its screen.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.cli.qualify import record_qualification
from akk.client import AkkError, Controller, connect
from akk.config import ServiceConfig
from akk.profiles.registry import PINNED, Registry
from akk.service import run_service
from akk.store import qualifications
from akk.store.database import open_reader, open_store
from akk.store.location import StateDir
from akk.store.qualifications import Qualification
from tools.lab.akk_runner import mint_offline

_FAKE_AGENT = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        puts(VERSION " (Claude Code)");
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
    """bin/unpinned/claude prints an unpinned version, bin/as-pinned/claude 2.1.332 (a pinned
    one); bin/silent/claude prints none."""
    silent = tmp_path / "bin" / "silent"
    silent.mkdir(parents=True)
    source = tmp_path / "agent.c"
    source.write_text(_FAKE_AGENT)
    for name, version in (("unpinned", "9.9.9"), ("as-pinned", "2.1.332")):
        (tmp_path / "bin" / name).mkdir()
        binary = str(tmp_path / "bin" / name / "claude")
        subprocess.run(
            ["cc", "-O", f'-DVERSION="{version}"', "-o", binary, str(source)], check=True
        )
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


async def _wait_profile(ctl: Controller, terminal_id: str, profile: str | None) -> dict[str, Any]:
    with trio.fail_after(10):
        while True:
            row = next(r for r in await _rows(ctl) if r["terminal_id"] == terminal_id)
            if row["profile"] == profile:
                return row
            await trio.sleep(0.02)


def _akk(state: StateDir, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AKK_STATE_DIR": str(state.path), "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, "-m", "akk", *args], env=env, capture_output=True, text=True, timeout=60
    )


async def test_a_running_server_binds_a_version_when_its_binary_is_qualified_and_unbinds_on_revoke(
    agents: Path, tmux_socket: str, tmp_path: Path
) -> None:
    """The test registry lacks 2.1.332's pinned row: the stand-in printing 2.1.332 is a new
    version to this server, bound only by a qualification of its exact binary."""
    state = StateDir(tmp_path / "akk")
    token = mint_offline(state, "ctl")["ctl"]
    registry = PINNED.without("claude", "2.1.332")
    config = ServiceConfig(
        state=state, port=0, tmux_sockets=(tmux_socket,), poll_interval=0.1, registry=registry
    )
    binary = agents / "as-pinned" / "claude"
    sha = hashlib.sha256(binary.read_bytes()).hexdigest()
    row = Qualification(
        agent="claude", version="2.1.332", binary_sha256=sha, base_profile="claude-code@2.1.328",
        plan_digest="0" * 64, qualified_at=time.time(), report={"verdict": "qualified"},
    )  # fmt: skip
    qualified_id = "claude-code@2.1.332 (qualified from 2.1.328)"
    took: dict[str, float] = {}
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            async with (
                connect(endpoint.url, state.token()) as ctl,
                connect(endpoint.url, token) as controller,
            ):
                await trio.run_process(
                    [*["tmux", "-S", tmux_socket], "new-window", "-d", str(binary)]
                )
                (row_before,) = await _wait_rows(ctl, 1)
                terminal = row_before["terminal_id"]
                # Unsupported, and every place says which command qualifies it.
                step = f"akk qualify claude --binary {binary}"
                assert row_before["profile"] is None
                assert row_before["profile_reason"] == (
                    f"unpinned_version: claude 2.1.332 has no profile; qualify it with `{step}`"
                )
                with pytest.raises(AkkError) as refused:
                    await controller.call(
                        "send", {"terminal_id": terminal, "request": "hi", "client_request_id": "a"}
                    )
                assert refused.value.reason == "unsupported_version"
                assert step in refused.value.message
                doctor = await trio.to_thread.run_sync(
                    lambda: _akk(state, "doctor", "--port", "0", "--codex-bin", "/nonexistent")
                )
                assert "terminal" in doctor.stdout and "akk qualify claude" in doctor.stdout
                # Operator methods only: a controller's credential may not qualify.
                with pytest.raises(AkkError) as denied:
                    await controller.call("qualification_list")
                assert denied.value.reason == "unauthorized"
                with pytest.raises(AkkError) as bad:
                    params = {**attrs.asdict(row), "base_profile": "claude-code@2.1.332"}
                    await ctl.call("qualification_record", params)
                assert bad.value.reason == "invalid_params" and "not a pinned" in bad.value.message
                assert (await ctl.call("qualification_list"))["qualifications"] == []

                # Another process writes the store (no call reaches the server): picked up.
                began = time.monotonic()
                await trio.to_thread.run_sync(_record_directly, state, row, registry)
                bound = await _wait_profile(ctl, terminal, qualified_id)
                took["poll"] = time.monotonic() - began
                assert bound["profile_reason"] is None
                listed = await trio.to_thread.run_sync(lambda: _akk(state, "list"))
                assert "qualified from 2.1.328" in listed.stdout

                # Revoked through the server (the CLI's operator call): unbound at once.
                began = time.monotonic()
                revoked = await trio.to_thread.run_sync(
                    lambda: _akk(state, "qualify", "--revoke", "claude", "2.1.332")
                )
                assert revoked.returncode == 0, revoked.stderr
                unbound = await _wait_profile(ctl, terminal, None)
                took["revoke"] = time.monotonic() - began
                assert unbound["profile_reason"].startswith("unpinned_version")
                again = await trio.to_thread.run_sync(
                    lambda: _akk(state, "qualify", "--revoke", "claude", "2.1.332")
                )
                assert again.returncode == 2 and "no qualification" in again.stderr

                # Another binary of the same version number stays unsupported.
                other = attrs.evolve(row, binary_sha256="f" * 64)
                await trio.to_thread.run_sync(record_qualification, state, other)
                differs = await _wait_reason(ctl, terminal, "qualified_binary_differs")
                assert differs["profile"] is None and step in differs["profile_reason"]
                # Recorded through the server by the function `akk qualify` ends with.
                began = time.monotonic()
                recorded = await trio.to_thread.run_sync(record_qualification, state, row)
                assert recorded["state"] == "qualified"
                await _wait_profile(ctl, terminal, qualified_id)
                took["record"] = time.monotonic() - began
                shown = await trio.to_thread.run_sync(
                    lambda: _akk(state, "qualify", "--list", "--json")
                )
                (entry,) = json.loads(shown.stdout)["qualifications"]
                assert (entry["version"], entry["binary_sha256"]) == ("2.1.332", sha)
            nursery.cancel_scope.cancel()
    reader = open_reader(state.store_path)
    stored = reader.execute(
        "SELECT binary_sha256, profile FROM terminals WHERE terminal_id = ?", (terminal,)
    ).fetchone()
    assert stored == (sha, qualified_id)
    # Printed, not asserted: a latency is a benchmark's number, and `_wait_profile`'s deadline
    # already proves each change is picked up without a restart.
    print(f"re-bind latency: {', '.join(f'{k} {v:.2f} s' for k, v in took.items())}")


async def _wait_reason(ctl: Controller, terminal_id: str, reason: str) -> dict[str, Any]:
    with trio.fail_after(10):
        while True:
            row = next(r for r in await _rows(ctl) if r["terminal_id"] == terminal_id)
            if (row["profile_reason"] or "").startswith(reason):
                return row
            await trio.sleep(0.02)


def _record_directly(state: StateDir, row: Qualification, registry: Registry) -> None:
    """A write by another process than the server's (a second writer on the store)."""
    conn = open_store(state.store_path)
    try:
        with conn:
            qualifications.record(conn, row, registry.base_agents, actor="elsewhere")
    finally:
        conn.close()
