"""The operator CLI on each session backend, as real `akk` processes.

`akk serve` runs as a child process (`--codex-bin --codex-home` with the newest
pinned Codex, or `--claude-bin --claude-config-dir` with the newest pinned
Claude, the lab's home and model server); a person then runs `akk send
--scope task-1/executor --wait`, `akk sessions` and a second `akk send --scope`.
The model server is the oracle: the task reaches it exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.qualify.model_server import ModelServer
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK, SCENARIOS
from tests.lab.conftest import ensure_installed
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess, backend_child
from tools.lab.clients import Client

NEWEST = [clients.newest("codex"), clients.newest("claude")]
BACKEND = {"codex": "codex_app_server", "claude": "claude_headless"}
SECOND_TASK = "lab: one more thing"


async def run_akk(
    akk: AkkProcess, *args: str, timeout: float = 60, typed: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run `python -m akk ARGS` against ``akk``'s state directory (off the event loop), with
    ``typed`` as what a person types on its standard input."""
    env = {**os.environ, "AKK_STATE_DIR": str(akk.state.path), "COLUMNS": "200"}
    argv = [sys.executable, "-m", "akk", *args]
    return await trio.to_thread.run_sync(
        lambda: subprocess.run(
            argv,
            env=env,
            input=typed,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    )


def _row_of(table: str, *cells: str) -> str | None:
    """The table line that has every one of ``cells`` as a whole cell."""
    for line in table.splitlines():
        found = {cell.strip() for cell in line.replace("┃", "│").split("│")}
        if all(cell in found for cell in cells):
            return line
    return None


@pytest.mark.lab
@pytest.mark.parametrize("client", NEWEST, ids=lambda client: client.name)
async def test_send_scope_wait_then_sessions_then_a_resumed_send(
    client: Client, tmp_path: Path
) -> None:
    await ensure_installed(client)
    model = ModelServer(SCENARIOS["echo"])
    async with backend_child(client, tmp_path, model) as lab:
        akk, codex, files = lab.akk, lab.serve_args, lab.files
        scope = ("--scope", "task-1/executor", "--backend", BACKEND[client.agent])
        workdir = ("--cwd", str(files.workdir))
        with trio.fail_after(60):
            await trio.to_thread.run_sync(akk.start, None, *codex)
            sent = await run_akk(akk, "send", *scope, *workdir, "--wait", ECHO_TASK)
            sessions = await run_akk(akk, "sessions")
            listed = await run_akk(akk, "sessions", "--json")
            again = await run_akk(akk, "send", *scope, *workdir, "--json", SECOND_TASK)
            assert again.returncode == 0, again.stderr
            resumed: dict[str, Any] = json.loads(again.stdout)
            shown = await run_akk(akk, "status", resumed["turn_id"], "--json")
            # The second Turn runs to its end before the server stops.
            await model.wait_for_request(lambda r: SECOND_TASK in r.newest_input, timeout=30)
            while json.loads(shown.stdout)["turn"]["state"] not in ("done", "failed"):
                shown = await run_akk(akk, "status", resumed["turn_id"], "--json")

    assert sent.returncode == 0, (sent.stdout, sent.stderr)
    assert "state:    done" in sent.stdout, sent.stdout
    assert f"message:  {ECHO_REPLY}" in sent.stdout, sent.stdout
    assert model.count_inputs_containing(ECHO_TASK) == 1, model.summary()

    assert sessions.returncode == 0, sessions.stderr
    assert _row_of(sessions.stdout, "task-1", "executor", "create") is not None, sessions.stdout
    rows = json.loads(listed.stdout)["sessions"]
    assert [(r["scope"]["task"], r["scope"]["role"]) for r in rows] == [("task-1", "executor")]
    assert rows[0]["backend"] == BACKEND[client.agent], rows
    assert rows[0]["decision"]["action"] == "create", rows

    assert resumed["session_decision"]["action"] == "resume", resumed
    assert resumed["session_id"] == rows[0]["session_id"], (resumed, rows)
    status = json.loads(shown.stdout)
    assert status["turn"]["state"] == "done", status
    assert status["session"]["thread_id"] == rows[0]["thread_id"], (status, rows)
    assert model.count_inputs_containing(SECOND_TASK) == 1, model.summary()
    assert model.count_inputs_containing(ECHO_TASK) == 1, model.summary()
