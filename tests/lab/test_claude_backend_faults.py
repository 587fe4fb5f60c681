"""SIGKILL `akk serve` at every Claude headless fault point, then start it again and check.

A send on the Claude headless backend passes six named points, from before the
process starts to after its `result`. At each, the server is killed (the
Claude it started loses its pipes: with no message it exits; with one it may
go on to its `result`), started again, and must reconcile the Turn read-only
from the session's transcript: the model never gets the task twice, exactly
one outcome reaches the controller (one `event_id`), a round found settled
records its real outcome, one that may have been sent but is not in the
transcript is `uncertain`, and the role's next send is not blocked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import Controller, connect
from akk.faults import CLAUDE_POINTS, Point
from akk.qualify.model_server import ModelServer
from akk.qualify.scenarios import ECHO_TASK, SCENARIOS
from tests.lab.conftest import ensure_installed
from tests.lab.test_faults import _events_until_outcome
from tools.lab import clients
from tools.lab.akk_runner import OUTCOMES, backend_child, outcome
from tools.lab.clients import Client

CLAUDE = [client for client in clients.PINNED if client.agent == "claude"]

NOT_WRITTEN = (Point.CLAUDE_SPAWN, Point.CLAUDE_SPAWNED)
"""Points at which the user message was never written: the model never gets the task."""

_CUT_OFF = ("interrupted_by_restart", "uncertain")
"""Reasons a round the crash cut off may fail with (its process ended with AKK's pipes)."""


def _params(cwd: Path, text: str, request_id: str) -> dict[str, Any]:
    return {
        "scope": {"task": "faults", "role": "executor"},
        "backend": "claude_headless",
        "cwd": str(cwd),
        "request": text,
        "client_request_id": request_id,
    }


async def _send(ctl: Controller, params: dict[str, Any]) -> dict[str, Any] | None:
    """Send; None if the server died before it answered."""
    try:
        result: dict[str, Any] = await ctl.call("send", params)
    except Exception:
        return None
    return result


@pytest.mark.lab
@pytest.mark.parametrize("point", CLAUDE_POINTS, ids=str)
@pytest.mark.parametrize("client", [CLAUDE[0], CLAUDE[-1]], ids=lambda client: client.name)
async def test_sigkill_at_each_claude_point_then_restart(
    client: Client, tmp_path: Path, point: Point
) -> None:
    seen: list[dict[str, Any]] = []
    await ensure_installed(client)
    model = ModelServer(SCENARIOS["echo"])
    async with backend_child(client, tmp_path, model) as lab:
        akk, args = lab.akk, lab.serve_args
        params = _params(lab.files.workdir, ECHO_TASK, "f1")
        url = await trio.to_thread.run_sync(akk.start, f"{point}:crash", *args)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                await _send(ctl, params)
                await _events_until_outcome(ctl, seen, timeout=40)
        await trio.to_thread.run_sync(akk.died_at, point)
        url = await trio.to_thread.run_sync(akk.start, None, *args)
        with trio.fail_after(90):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                # The same client_request_id names the original record: never a second Turn.
                again = await ctl.call("send", params)
                already = any(e["kind"] in OUTCOMES for e in seen)
                if not already:
                    assert await _events_until_outcome(ctl, seen, timeout=60), (point, seen)
                status = await ctl.call("status", {"turn_id": again["turn_id"]})
                await _events_until_outcome(ctl, seen, timeout=1.5)  # nothing more comes
                after = await ctl.call("send", _params(lab.files.workdir, "lab: after", "f2"))
                assert after["session_decision"]["action"] in ("create", "resume", "rebuild")
                assert (await outcome(ctl, after["turn_id"], timeout=60))["kind"] == "done"
    print(f"\n{client.name} {point}: {status['turn']['state']} {status['turn']['reason']}")
    outcomes = [e for e in seen if e["kind"] in OUTCOMES and e["turn_id"] == again["turn_id"]]
    assert len({e["event_id"] for e in outcomes}) == 1, outcomes
    model_got = model.count_inputs_containing(ECHO_TASK)
    turn = status["turn"]
    if point in NOT_WRITTEN:
        assert model_got == 0, model.summary()
        assert turn["state"] == "failed" and turn["reason"] == "not_sent", turn
    else:
        assert model_got <= 1, model.summary()
        assert turn["state"] in ("done", "failed"), turn
        if turn["state"] == "done":
            assert model_got == 1, model.summary()
        else:
            # An uncertain window, reported: the task may have reached Claude.
            assert turn["reason"] in _CUT_OFF, turn
    if point is Point.CLAUDE_RESULT:
        assert turn["state"] == "done", turn
    assert model.count_inputs_containing("lab: after") == 1
