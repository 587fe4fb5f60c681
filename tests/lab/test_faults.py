"""SIGKILL `akk serve` at every named fault point of a managed Turn, start it again, and check.

For each point: exactly one outcome reaches the controller (under one
`event_id`, however often it is delivered), the model server never receives
the task twice, a task cut off before its Enter is never submitted by the
restarted server, and what cannot be proven is reported as uncertain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed

from akk.client import Controller, connect
from akk.faults import BEFORE_ENTER, SEND_POINTS, Point
from akk.qualify.launcher import LabSession
from akk.qualify.scenarios import ECHO_TASK, SLOW_SIGNAL, SLOW_TASK
from tests.lab.conftest import lab_params, newest_of_each
from tools.lab.akk_runner import OUTCOMES, AkkProcess, idle_terminal

FAST = ("--accept-seconds", "5")  # a cut-off task is declared uncertain sooner
CLIENTS = [
    *lab_params("echo", agents=("claude",))[-1:],
    *lab_params("echo", agents=("codex",))[-1:],
]


async def _send(ctl: Controller, terminal_id: str) -> dict[str, Any] | None:
    """Send the task; None if the server died before it answered."""
    try:
        result: dict[str, Any] = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": ECHO_TASK, "client_request_id": "f"}
        )
    except Exception:
        return None
    return result


async def _events_until_outcome(
    ctl: Controller, seen: list[dict[str, Any]], timeout: float
) -> dict[str, Any] | None:
    """Collect events (acking them) until an outcome; None if the connection ends first."""
    with trio.move_on_after(timeout):
        try:
            async for event in ctl.events():
                seen.append(event)
                await ctl.ack(event["event_id"])
                if event["kind"] in OUTCOMES:
                    return event
        except Exception:
            return None
    return None


@pytest.mark.parametrize("point", SEND_POINTS, ids=str)
@pytest.mark.parametrize("lab", CLIENTS, indirect=True)
async def test_sigkill_at_each_point_then_restart(
    lab: LabSession, tmp_path: Path, point: Point
) -> None:
    akk = AkkProcess(lab, tmp_path)
    seen: list[dict[str, Any]] = []
    try:
        url = akk.start(f"{point}:crash", *FAST)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                row = await idle_terminal(ctl)
                sent = await _send(ctl, row["terminal_id"])
                await _events_until_outcome(ctl, seen, timeout=40)
        await trio.to_thread.run_sync(akk.died_at, point)
        url = akk.start(None, *FAST)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                listed = (await ctl.call("list"))["turns"]
                turn_id = sent["turn_id"] if sent else (listed[0]["turn_id"] if listed else None)
                if turn_id is None:
                    # Killed before the reservation committed: no record, and nothing typed.
                    assert point is Point.EVIDENCE_SNAPSHOT
                else:
                    already = any(e["kind"] in OUTCOMES for e in seen)
                    if not already or point in (Point.LEASED, Point.DELIVERED):
                        outcome = await _events_until_outcome(ctl, seen, timeout=45)
                        assert outcome is not None, (point, seen)
                    status = await ctl.call("status", {"turn_id": turn_id})
                    # Nothing more arrives: no second outcome under another event_id.
                    await _events_until_outcome(ctl, seen, timeout=1.5)
    finally:
        akk.kill()
    outcomes = [e for e in seen if e["kind"] in OUTCOMES]
    model_got = lab.server.count_inputs_containing(ECHO_TASK)
    assert model_got <= 1, lab.server.summary()
    if turn_id is None:
        assert outcomes == [] and model_got == 0
        return
    assert len({e["event_id"] for e in outcomes}) == 1, outcomes
    turn = status["turn"]
    if point in BEFORE_ENTER:
        # The restarted server never submits what the dead one typed.
        assert model_got == 0, lab.server.summary()
        assert (turn["state"], turn["reason"]) == ("failed", "uncertain"), turn
        assert status["dispatches"][0]["stage"] == "uncertain"
    else:
        assert model_got == 1, lab.server.summary()
        assert turn["state"] in ("done", "failed"), turn
        if turn["state"] == "failed":
            # Enter pressed but not recorded, and the file could not prove it either.
            assert point is Point.ENTER_SENT and turn["reason"] == "uncertain", turn


FOLLOW_UP = "lab: and once more"


@pytest.mark.parametrize("point", [Point.RESERVED, Point.ENTER_SENT], ids=str)
@pytest.mark.parametrize("lab", CLIENTS, indirect=True)
async def test_a_respond_repeated_after_a_sigkill_inside_it_is_never_typed_again(
    lab: LabSession, tmp_path: Path, point: Point
) -> None:
    """The server dies inside a `respond` (its reservation committed, before any key; or
    its Enter pressed and not recorded). The controller never got the reply and calls
    again with the same client_request_id once that round settled: it gets that round, and
    the model saw the follow-up once if its Enter went out, else never."""
    akk = AkkProcess(lab, tmp_path)
    asked: dict[str, Any] = {"request": FOLLOW_UP, "client_request_id": "f1"}
    try:
        url = akk.start(None, *FAST)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                row = await idle_terminal(ctl)
                sent = await _send(ctl, row["terminal_id"])
                assert sent is not None
                asked["turn_id"] = sent["turn_id"]
                first = await _events_until_outcome(ctl, [], timeout=40)
                assert first is not None and first["kind"] == "done", first
        akk.stop()
        url = akk.start(f"{point}:crash", *FAST)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                await idle_terminal(ctl)
                with pytest.raises(ConnectionClosed):  # the server dies inside the respond
                    await ctl.call("respond", asked)
        await trio.to_thread.run_sync(akk.died_at, point)
        url = akk.start(None, *FAST)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                outcome = await _events_until_outcome(ctl, [], timeout=45)
                assert outcome is not None and outcome["round"] == 2, outcome
                again = await ctl.call("respond", asked)
                status = await ctl.call("status", {"turn_id": asked["turn_id"]})
    finally:
        akk.kill()
    assert (again["turn_id"], again["round"]) == (asked["turn_id"], 2)
    assert [d["kind"] for d in status["dispatches"]] == ["task", "respond"]
    model_got = lab.server.count_inputs_containing(FOLLOW_UP)
    assert model_got == (0 if point in BEFORE_ENTER else 1), lab.server.summary()


@pytest.mark.parametrize(
    "point", [Point.INTERRUPT_RESERVED, Point.INTERRUPT_SENT, Point.INTERRUPT_RECORDED], ids=str
)
@pytest.mark.parametrize(
    "lab",
    newest_of_each("slow"),
    indirect=True,
)
async def test_sigkill_during_cancel_then_restart(
    lab: LabSession, tmp_path: Path, point: Point
) -> None:
    akk = AkkProcess(lab, tmp_path)
    seen: list[dict[str, Any]] = []
    try:
        url = akk.start(f"{point}:crash", *FAST)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                row = await idle_terminal(ctl)
                sent = await ctl.call(
                    "send",
                    {"terminal_id": row["terminal_id"], "request": SLOW_TASK,
                     "client_request_id": "c"},
                )  # fmt: skip
                turn_id = sent["turn_id"]
                while (await ctl.call("status", {"turn_id": turn_id}))["turn"]["state"] != (
                    "running"
                ):
                    await trio.sleep(0.05)
                with pytest.raises(ConnectionClosed):  # the server dies inside the cancel
                    await ctl.call("cancel", {"turn_id": turn_id})
        await trio.to_thread.run_sync(akk.died_at, point)
        url = akk.start(None, *FAST)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                if point is Point.INTERRUPT_RESERVED:
                    # No key went out: the task runs on, to its own end.
                    lab.server.signal(SLOW_SIGNAL)
                outcome = await _events_until_outcome(ctl, seen, timeout=45)
                assert outcome is not None, seen
                status = await ctl.call("status", {"turn_id": turn_id})
                await _events_until_outcome(ctl, seen, timeout=1.5)
    finally:
        akk.kill()
    outcomes = [e for e in seen if e["kind"] in OUTCOMES]
    assert len({e["event_id"] for e in outcomes}) == 1, outcomes
    expected = "done" if point is Point.INTERRUPT_RESERVED else "cancelled"
    assert status["turn"]["state"] == expected, status["turn"]
    cancel = [d for d in status["dispatches"] if d["kind"] == "cancel"]
    # Its key recorded, the cancel is the restarted follower's to settle: the interruption
    # showed. Cut off before that, the restart's reconcile calls it uncertain.
    stage = "accepted" if point is Point.INTERRUPT_RECORDED else "uncertain"
    assert [d["stage"] for d in cancel] == [stage]
    assert lab.server.count_inputs_containing(SLOW_TASK) == 1
