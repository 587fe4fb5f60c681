"""Smoke tests: every pinned client starts, takes a task once, shows the reply, records it.

The far end is the evidence: the model server must receive the task exactly
once, and the client's own transcript (Claude) or rollout (Codex) must hold it.
A second group proves the launcher leaves no process, socket or file behind,
also when the test body fails.
"""

from __future__ import annotations

import pytest
import trio

from akk.qualify.launcher import LabSession, launch, run_processes
from akk.qualify.model_server import RecordedRequest
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK, SCENARIOS
from tests.lab.conftest import lab_params
from tools.lab import clients, installer
from tools.lab.clients import Client


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
