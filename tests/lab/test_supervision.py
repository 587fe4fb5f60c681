"""Read-only supervision end to end: `akk serve` watching real clients in tmux.

The scripted model drives each pinned client idle → working → permission →
idle while a controller watches through `list` and `status`; then the agent
is restarted in the same pane (a new incarnation) and the pane goes away.
Nothing here sends a key through AKK: the test plays the person at the pane.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import AkkError, Controller, connect
from akk.config import ServiceConfig
from akk.qualify.launcher import LabSession, launch
from akk.qualify.scenarios import (
    BASH_MARKER,
    EXEC_MARKER,
    RUN_TASK,
    SLOW_REPLY,
    SLOW_SIGNAL,
    SLOW_TASK,
    Bash,
    ExecCommand,
    Scenario,
    SlowText,
    Step,
)
from akk.service import run_service
from akk.store.location import StateDir
from tests.lab.conftest import ensure_installed
from tools.lab import clients
from tools.lab.clients import Client

POLL = 0.05


def _scenario(agent: str) -> Scenario:
    permission = (
        Bash(f"touch {BASH_MARKER}.txt && echo {BASH_MARKER}", "Create the lab marker file")
        if agent == "claude"
        else ExecCommand(f"touch ../{EXEC_MARKER}.txt && echo {EXEC_MARKER}")
    )
    return Scenario(
        "supervision",
        task=SLOW_TASK,
        steps=(
            Step(SLOW_TASK, SlowText(SLOW_REPLY, hold=SLOW_SIGNAL)),
            Step(RUN_TASK, permission),
        ),
    )


async def _wait_row(
    ctl: Controller, predicate: Callable[[dict[str, Any]], bool], what: str, timeout: float = 30
) -> dict[str, Any]:
    """Poll `list` until a terminal row satisfies predicate."""
    rows: list[dict[str, Any]] = []
    with trio.move_on_after(timeout):
        while True:
            rows = (await ctl.call("list"))["terminals"]
            for row in rows:
                if predicate(row):
                    return row
            await trio.sleep(POLL)
    raise AssertionError(f"no terminal row with {what} within {timeout} s; rows: {rows}")


async def _wait_status(
    ctl: Controller,
    terminal_id: str,
    predicate: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = 30,
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    with trio.move_on_after(timeout):
        while True:
            status = await ctl.call("status", {"terminal_id": terminal_id})
            if predicate(status):
                return status
            await trio.sleep(POLL)
    raise AssertionError(f"status never showed {what} within {timeout} s; last: {status}")


def _all_keys(value: object) -> set[str]:
    """Every object key anywhere in a JSON value."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _all_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _all_keys(v)}
    return set()


def _answerable(interaction: dict[str, Any] | None) -> bool:
    return interaction is not None and interaction["state"] == "pending"


def _state(wanted: str) -> Callable[[dict[str, Any]], bool]:
    return lambda status: status["terminal"]["activity_state"] == wanted


@pytest.mark.lab
@pytest.mark.parametrize("client", clients.PINNED, ids=lambda c: c.name)
async def test_serve_follows_a_real_client(client: Client, tmp_path: Path) -> None:
    await ensure_installed(client)
    with trio.fail_after(180):
        async with launch(client, _scenario(client.agent)) as lab:
            await _supervise(lab, tmp_path)


async def _supervise(lab: LabSession, tmp_path: Path) -> None:
    config = ServiceConfig(
        state=StateDir(tmp_path / "akk"), port=0, tmux_sockets=(str(lab.socket),),
        poll_interval=0.1,
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        endpoint = await nursery.start(
            lambda task_status: run_service(config, task_status=task_status)
        )
        token = config.state.token()
        async with connect(endpoint.url, token) as ctl:
            # The pane appears with the version read from the process and its exact profile.
            row = await _wait_row(
                ctl, lambda r: r["pane"] == lab.pane and r["activity_state"] == "idle", "idle pane"
            )
            assert row["agent"] == lab.agent
            assert row["version"] == lab.version
            assert row["profile"] is not None and lab.version in row["profile"]
            # An idle pane under an exact profile offers status and send, pre-filled.
            assert {a["method"] for a in row["available_actions"]} == {"status", "send"}
            assert all(a["params"] == {"terminal_id": row["terminal_id"]}
                       for a in row["available_actions"])  # fmt: skip
            first_id = row["terminal_id"]

            await lab.submit(SLOW_TASK)
            await _wait_status(ctl, first_id, _state("working"), "working")
            lab.server.signal(SLOW_SIGNAL)
            await _wait_status(ctl, first_id, _state("idle"), "idle after the slow reply")

            await lab.submit(RUN_TASK)
            # Answerable once Claude wrote the call (until then it is held, projected manual).
            status = await _wait_status(
                ctl, first_id,
                lambda s: _state("awaiting_approval")(s) and _answerable(s["interaction"]),
                "permission",
            )  # fmt: skip
            interaction = status["interaction"]
            assert interaction["kind"] == "permission"
            assert interaction["decisions"] == ["approve_once", "reject"]
            marker = BASH_MARKER if lab.agent == "claude" else EXEC_MARKER
            assert marker in interaction["questions"][0]["detail"]
            assert all("Yes, and" not in o["label"] for o in interaction["questions"][0]["options"])
            # Nothing private leaves the server.
            assert not {"fingerprint", "region", "keys", "plan"} & _all_keys(status)
            # The operator's view of the same pane agrees.
            captured = await trio.run_process(
                [sys.executable, "-m", "akk", "screen", "capture", lab.pane,
                 "--tmux-socket", str(lab.socket), "--json"],
                capture_stdout=True,
            )  # fmt: skip
            operator = json.loads(captured.stdout)
            assert (operator["agent"], operator["version"]) == (lab.agent, lab.version)
            assert operator["state"] == "permission"
            assert operator["projection"]["decisions"] == ["approve_once", "reject"]
            # The person rejects it at the pane; AKK only watches.
            await lab.send_keys("Escape")
            await _wait_status(ctl, first_id, lambda s: s["interaction"] is None
                               and s["terminal"]["activity_state"] in ("idle", "working"),
                               "the prompt gone")  # fmt: skip
            # Walked tolerantly: the client creates and removes lock files under its home.
            written = [
                name for _, _, names in os.walk(lab.workdir.parent) for name in names
                if name == f"{marker}.txt"
            ]  # fmt: skip
            assert written == []

            # A restarted agent in the same pane is a new incarnation.
            await lab.tmux("respawn-pane", "-k", "-t", lab.pane)
            row = await _wait_row(
                ctl,
                lambda r: r["pane"] == lab.pane and r["terminal_id"] != first_id,
                "a new incarnation",
            )
            with pytest.raises(AkkError) as gone:
                await ctl.call("status", {"terminal_id": first_id})
            assert gone.value.reason == "not_found"

            # The pane goes away (here with its whole server).
            await lab.tmux("kill-server")
            with trio.fail_after(30):
                while any(r["pane"] == lab.pane for r in (await ctl.call("list"))["terminals"]):
                    await trio.sleep(POLL)
        nursery.cancel_scope.cancel()
