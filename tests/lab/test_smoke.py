"""Smoke tests: every pinned client starts, takes a task once, shows the reply, records it.

The far end is the evidence: the model server must receive the task exactly
once, and the client's own transcript (Claude) or rollout (Codex) must hold it.
A second group proves the launcher leaves no process, socket or file behind,
also when the test body fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import trio

from akk.qualify.launcher import LabSession, end_abandoned, launch, run_processes
from akk.qualify.model_server import RecordedRequest
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK, SCENARIOS
from tests.lab.conftest import ensure_installed, lab_params
from tools.lab import clients, installer
from tools.lab.clients import Client

REPO = Path(__file__).resolve().parents[2]


def _is_task(request: RecordedRequest) -> bool:
    return not request.auxiliary and ECHO_TASK in request.newest_input


def _user_texts(record: object) -> list[str]:
    """Texts of every user-role message anywhere in a transcript record."""
    found: list[str] = []
    if isinstance(record, dict):
        if record.get("role") == "user":
            content = record.get("content")
            if isinstance(content, str):
                found.append(content)
            elif isinstance(content, list):
                found += [str(part.get("text", "")) for part in content if isinstance(part, dict)]
        for value in record.values():
            found += _user_texts(value)
    elif isinstance(record, list):
        for value in record:
            found += _user_texts(value)
    return found


def _has_task(records: list[object]) -> bool:
    return any(ECHO_TASK in text for text in _user_texts(records))


@pytest.mark.parametrize("lab", lab_params("echo"), indirect=True)
async def test_task_reaches_model_once_and_reply_shows(lab: LabSession) -> None:
    with trio.fail_after(60):
        await lab.submit(ECHO_TASK)
        await lab.server.wait_for_request(_is_task, timeout=20)
        await lab.wait_for_screen(lambda screen: ECHO_REPLY in screen, 20, what="the reply")
        await lab.wait_idle(20)
        await lab.wait_for_transcript(_has_task, 20)

    assert lab.server.count_inputs_containing(ECHO_TASK) == 1, lab.server.summary()
    assert lab.ready_after is not None


@pytest.mark.lab
@pytest.mark.parametrize("client", clients.PINNED, ids=lambda client: client.name)
def test_installed_client_verifies_without_npm(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_npm(client: Client, prefix: object) -> None:
        raise AssertionError(f"npm ran for the already installed {client.name}")

    monkeypatch.setattr(installer, "_npm_install", no_npm)
    result = installer.install(client)

    assert not result.fresh
    assert result.binary == client.binary()
    assert installer.verify(client) is None


class _Boom(Exception):
    """A failure raised inside a lab block on purpose."""


@pytest.mark.lab
@pytest.mark.parametrize(("agent", "version"), [("claude", "2.1.328"), ("codex", "0.169.0")])
async def test_launch_leaves_nothing_behind_even_when_the_body_fails(
    agent: str, version: str
) -> None:
    with trio.fail_after(60):
        with pytest.raises(_Boom):
            async with launch(clients.get(agent, version), SCENARIOS["echo"]) as lab:
                root, socket = lab.root, lab.socket
                pids = {lab.pane_pid, lab.agent_pid}
                assert socket.exists()
                assert set(run_processes(root)) >= pids
                # A finished turn is when Codex 0.169.0 would have started its daemon.
                await lab.submit(ECHO_TASK)
                await lab.wait_for_screen(lambda screen: ECHO_REPLY in screen, 20)
                raise _Boom

    assert run_processes(root) == []
    assert not socket.exists()
    assert not root.exists()


_LAUNCH_AND_HOLD = """
import sys, trio
from akk.qualify.launcher import launch
from akk.qualify.scenarios import SCENARIOS
from tools.lab import clients

async def main() -> None:
    async with launch(clients.get(sys.argv[1], sys.argv[2]), SCENARIOS["echo"]) as lab:
        print(lab.root, flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


@pytest.mark.lab
async def test_a_run_whose_launcher_was_killed_is_ended_by_the_next_sweep() -> None:
    """A test worker killed by a signal cannot tear its run down: `end_abandoned` does."""
    client = clients.get("claude", "2.1.332")
    await ensure_installed(client)
    # Its own temp dir: the other workers' launches sweep only theirs, so none ends
    # this run before the test looks at it.
    parent = Path(tempfile.mkdtemp(prefix="akk-sweep-"))
    try:
        with trio.fail_after(60):
            launcher = await trio.lowlevel.open_process(
                [sys.executable, "-c", _LAUNCH_AND_HOLD, client.agent, client.version],
                cwd=REPO,
                env={**os.environ, "TMPDIR": str(parent)},
                stdout=subprocess.PIPE,
            )
            try:
                assert launcher.stdout is not None
                said = b""
                while not said.endswith(b"\n"):
                    chunk = await launcher.stdout.receive_some()
                    assert chunk, "the launcher exited before its client was idle"
                    said += chunk
                root = Path(said.decode().strip())
            finally:
                launcher.kill()  # SIGKILL: no teardown can run
                await launcher.wait()
            assert root.parent == parent
            assert run_processes(root), "the killed launcher's tmux server and client run on"
            assert await trio.Path(root / "tmux.sock").exists()

            assert await end_abandoned(parent) == [root]

        assert run_processes(root) == []
        assert not await trio.Path(root).exists()
        assert await end_abandoned(parent) == []
    finally:
        shutil.rmtree(parent, ignore_errors=True)
