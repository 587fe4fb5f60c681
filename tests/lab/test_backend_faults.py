"""SIGKILL `akk serve` at every backend fault point (and, apart, the app-server), then check.

A send on the Codex app-server backend passes eight named points, from before
thread/start to after turn/completed. At each, the server is killed (its
app-server dies with it: its pipes were the server's), started again, and must
reconcile the Turn read-only from the thread: the model server never gets the
task twice, exactly one outcome reaches the controller (one `event_id`), a turn
found settled records its real outcome, one that may have been sent but is not
in the thread is `uncertain`, and the next send of the same role is not blocked.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import Controller, connect
from akk.discovery.process import start_ticks
from akk.faults import BACKEND_POINTS, Point
from akk.qualify.model_server import ModelServer
from akk.qualify.scenarios import ECHO_TASK, SCENARIOS, SLOW_SIGNAL, SLOW_TASK
from tests.lab.conftest import ensure_installed
from tests.lab.test_faults import _events_until_outcome
from tools.lab import clients
from tools.lab.akk_runner import OUTCOMES, backend_child, backend_processes, outcome
from tools.lab.clients import Client

CODEX = [client for client in clients.PINNED if client.agent == "codex"]

NOT_WRITTEN = (
    Point.BACKEND_THREAD_START,
    Point.BACKEND_THREAD_STARTED,
    Point.BACKEND_THREAD_PERSISTED,
    Point.BACKEND_TURN_SENDING,
)
"""Points at which turn/start was never written: the model never gets the task."""


_INTERRUPTED = ("interrupted", "interrupted_by_restart")
_CUT_OFF = {
    # turn/start answered, its answer not stored: if the dead app-server wrote nothing of
    # the turn, the thread cannot show it (or the thread itself): uncertain, never resent.
    Point.BACKEND_TURN_WRITTEN: (*_INTERRUPTED, "uncertain"),
    # Stored, but the app-server died before it wrote the thread's first rollout lines.
    Point.BACKEND_TURN_ACCEPTED: (*_INTERRUPTED, "history_missing"),
}
"""Reasons a Turn cut off at these points may fail with, besides an interruption."""


def _params(cwd: Path, text: str, request_id: str) -> dict[str, Any]:
    return {
        "scope": {"task": "faults", "role": "executor"},
        "backend": "codex_app_server",
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
@pytest.mark.parametrize(
    "point", [Point.BACKEND_INTERRUPT_RESERVED, Point.BACKEND_INTERRUPT_SENT], ids=str
)
async def test_sigkill_at_each_cancel_point_then_restart(tmp_path: Path, point: Point) -> None:
    """The owner cancels a running turn and AKK dies before its turn/interrupt, or after it
    before its record. Started again, the stored cancel step says the owner asked: the turn
    the thread shows interrupted is `cancelled`, not `failed` / `interrupted`; the step is
    `uncertain`, never sent again. The newest Codex: the step is AKK's own."""
    seen: list[dict[str, Any]] = []
    client = CODEX[-1]
    await ensure_installed(client)
    model = ModelServer(SCENARIOS["slow"])
    async with backend_child(client, tmp_path, model) as lab:
        akk, codex = lab.akk, lab.serve_args
        url = await trio.to_thread.run_sync(akk.start, f"{point}:crash", *codex)
        with trio.fail_after(90):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                sent = await ctl.call("send", _params(lab.files.workdir, SLOW_TASK, "c1"))
                turn_id = sent["turn_id"]
                await model.wait_for_request(lambda r: SLOW_TASK in r.newest_input, timeout=60)
                while (await ctl.call("status", {"turn_id": turn_id}))["turn"]["state"] != (
                    "running"
                ):
                    await trio.sleep(0.1)
                with pytest.raises(Exception):  # noqa: B017  the server dies under the call
                    await ctl.call("cancel", {"turn_id": turn_id})
        await trio.to_thread.run_sync(akk.died_at, point)
        url = await trio.to_thread.run_sync(akk.start, None, *codex)
        with trio.fail_after(120):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                assert await _events_until_outcome(ctl, seen, timeout=60), (point, seen)
                status = await ctl.call("status", {"turn_id": turn_id})
    outcomes = [e for e in seen if e["kind"] in OUTCOMES and e["turn_id"] == turn_id]
    assert [e["kind"] for e in outcomes] == ["cancelled"], outcomes
    assert status["turn"]["state"] == "cancelled", status["turn"]
    cancels = [d["stage"] for d in status["dispatches"] if d["kind"] == "cancel"]
    assert cancels == ["uncertain"], status["dispatches"]
    assert len(model.main_requests()) >= 1 and model.count_inputs_containing(SLOW_TASK) >= 1


@pytest.mark.lab
@pytest.mark.parametrize("point", BACKEND_POINTS, ids=str)
@pytest.mark.parametrize("client", [CODEX[0], CODEX[-1]], ids=lambda client: client.name)
async def test_sigkill_at_each_backend_point_then_restart(
    client: Client, tmp_path: Path, point: Point
) -> None:
    seen: list[dict[str, Any]] = []
    await ensure_installed(client)
    model = ModelServer(SCENARIOS["echo"])
    async with backend_child(client, tmp_path, model) as lab:
        akk, codex = lab.akk, lab.serve_args
        params = _params(lab.files.workdir, ECHO_TASK, "f1")
        url = await trio.to_thread.run_sync(akk.start, f"{point}:crash", *codex)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                await _send(ctl, params)
                await _events_until_outcome(ctl, seen, timeout=40)
        await trio.to_thread.run_sync(akk.died_at, point)
        url = await trio.to_thread.run_sync(akk.start, None, *codex)
        with trio.fail_after(90):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                # The same client_request_id names the original record: never a second Turn.
                again = await ctl.call("send", params)
                already = any(e["kind"] in OUTCOMES for e in seen)
                if not already:
                    assert await _events_until_outcome(ctl, seen, timeout=60), (point, seen)
                status = await ctl.call("status", {"turn_id": again["turn_id"]})
                await _events_until_outcome(ctl, seen, timeout=1.5)  # nothing more comes
                # The role's next task is not blocked by what the crash left.
                after = await ctl.call("send", _params(lab.files.workdir, "lab: after", "f2"))
                assert after["session_decision"]["action"] in ("resume", "rebuild"), after
                assert (await outcome(ctl, after["turn_id"], timeout=60))["kind"] == "done"
    outcomes = [e for e in seen if e["kind"] in OUTCOMES and e["turn_id"] == again["turn_id"]]
    assert len({e["event_id"] for e in outcomes}) == 1, outcomes
    model_got = model.count_inputs_containing(ECHO_TASK)
    turn = status["turn"]
    if point in NOT_WRITTEN:
        assert model_got == 0, model.summary()
        assert turn["state"] == "failed" and turn["reason"] in ("not_sent", "uncertain"), turn
    else:
        # Found in the thread: its real outcome. The app-server that ran it died with AKK,
        # which may have cut the turn off, even before it asked the model.
        assert model_got <= 1, model.summary()
        assert turn["state"] in ("done", "failed"), turn
        if turn["state"] == "done":
            assert model_got == 1, model.summary()
        else:
            assert turn["reason"] in _CUT_OFF.get(point, _INTERRUPTED), turn
    assert model.count_inputs_containing("lab: after") == 1


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_a_killed_app_server_fails_its_turn_once_and_a_new_process_serves_the_next(
    client: Client, tmp_path: Path
) -> None:
    seen: list[dict[str, Any]] = []
    await ensure_installed(client)
    model = ModelServer(SCENARIOS["slow"])
    async with backend_child(client, tmp_path, model) as lab:
        akk = lab.akk
        url = await trio.to_thread.run_sync(akk.start, None, *lab.serve_args)
        with trio.fail_after(90):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                sent = await ctl.call("send", _params(lab.files.workdir, SLOW_TASK, "s1"))
                await model.wait_for_request(lambda r: SLOW_TASK in r.newest_input, timeout=30)
                assert akk.proc is not None
                victims = backend_processes(akk.proc.pid, "app-server")
                assert len(victims) == 1, victims
                os.kill(victims[0], signal.SIGKILL)
                ended = await outcome(ctl, sent["turn_id"], timeout=60)
                status = await ctl.call("status", {"turn_id": sent["turn_id"]})
                await _events_until_outcome(ctl, seen, timeout=1.5)
                model.signal(SLOW_SIGNAL)
                after = await ctl.call("send", _params(lab.files.workdir, ECHO_TASK, "s2"))
                assert (await outcome(ctl, after["turn_id"], timeout=60))["kind"] == "done"
                assert start_ticks(victims[0]) is None
    assert ended["kind"] == "failed", ended
    assert status["turn"]["reason"] in ("interrupted", "interrupted_by_restart"), status
    assert [e for e in seen if e["kind"] in OUTCOMES] == []
    assert model.count_inputs_containing(SLOW_TASK) == 1, model.summary()
    assert model.count_inputs_containing(ECHO_TASK) == 1, model.summary()
