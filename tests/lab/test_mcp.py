"""`akk mcp` end to end: an MCP client drives a real Codex through the bridge and `akk serve`.

The SDK's stdio client session talks to `akk mcp` (a process), which talks to
`akk serve` (a process) watching the newest pinned Codex in a lab pane. The
model server is the oracle: it must receive the task and the answer chosen by
ids exactly once. Another controller's bridge is refused the Turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest
import trio
from mcp import ClientSession

from akk.mcp.bridge import EVENTS_URI
from akk.mcp.events import EventBuffer
from akk.mcp.link import Link, Target
from akk.mcp.tools import PREFIX, WAIT_EVENTS
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tests.test_mcp import Notified, bridge, check_tools, structured
from tools.lab.akk_runner import AkkProcess


async def call(session: ClientSession, method: str, **arguments: Any) -> dict[str, Any]:
    """``agent_knock_knock_<method>``'s structured result; AssertionError on a tool error."""
    result = await session.call_tool(PREFIX + method, arguments)
    assert not result.is_error, result.content
    return structured(result)


async def refused(session: ClientSession, method: str, **arguments: Any) -> dict[str, Any]:
    """The structured tool error of ``agent_knock_knock_<method>`` (it must fail)."""
    result = await session.call_tool(PREFIX + method, arguments)
    assert result.is_error, result.content
    return structured(result)


async def next_event(session: ClientSession, kind: str) -> dict[str, Any]:
    """The oldest unacked event once it is of ``kind`` (earlier ones are acked on the way)."""
    with trio.fail_after(60):
        while True:
            waited = await session.call_tool(WAIT_EVENTS, {"timeout_seconds": 20, "max": 1})
            for event in structured(waited)["events"]:
                if event["kind"] == kind:
                    return dict(event)
                await call(session, "ack", event_id=event["event_id"])


async def idle_terminal(session: ClientSession) -> dict[str, Any]:
    with trio.fail_after(30):
        while True:
            rows = (await call(session, "list"))["terminals"]
            if rows and rows[0]["profile"] and rows[0]["activity_state"] == "idle":
                return dict(rows[0])
            await trio.sleep(0.1)


# Hosts on the handshake era (2025-11-25) subscribe with resources/subscribe, which the
# SDK's client flags as removed in 2026-07-28; the bridge serves both eras.
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
@pytest.mark.parametrize(
    "lab", lab_params("codex_rui_one", agents=("codex",), plan_mode=True)[-1:], indirect=True
)
async def test_an_mcp_client_answers_a_codex_question_by_ids_once(
    lab: LabSession, tmp_path: Path
) -> None:
    akk = AkkProcess(lab, tmp_path, "ctl", "other")
    state = ("--state-dir", str(akk.state.path))
    notified = Notified()
    try:
        await trio.to_thread.run_sync(akk.start)
        async with (
            bridge(*state, token=akk.tokens["ctl"], errlog=tmp_path / "a.err", notified=notified)
            as ctl,
            bridge(*state, token=akk.tokens["other"], errlog=tmp_path / "b.err") as other,
        ):  # fmt: skip
            check_tools((await ctl.list_tools()).tools)
            await ctl.subscribe_resource(EVENTS_URI)
            row = await idle_terminal(ctl)
            sent = await call(
                ctl, "send", terminal_id=row["terminal_id"], request=sc.ASK_TASK,
                client_request_id="mcp-ask",
            )  # fmt: skip
            turn_id = sent["turn_id"]
            asked = await next_event(ctl, "interaction_required")
            assert asked["turn_id"] == turn_id
            # The push: a subscriber was told the event resource changed.
            updated = await notified.first(mt.ResourceUpdatedNotification)
            assert updated.params.uri == EVENTS_URI
            shown = (await call(ctl, "status", turn_id=turn_id))["interaction"]
            assert shown["state"] == "pending" and shown["kind"] == "questionnaire"
            (question,) = shown["questions"]
            blue = [o["option_id"] for o in question["options"] if o["label"] == "Blue"]
            answer = {
                "interaction_id": shown["interaction_id"],
                "turn_id": turn_id,
                "answers": [
                    {
                        "question_id": question["question_id"],
                        "response_kind": question["response_kind"],
                        "selected_option_ids": blue,
                    }
                ],
            }
            # Another controller's bridge may neither read nor answer this Turn.
            assert (await refused(other, "status", turn_id=turn_id))["reason"] == "not_owner"
            intruder = await refused(other, "respond_interaction", **answer)
            assert intruder["reason"] == "not_owner"
            assert lab.server.count_inputs_containing(sc.ANSWERED_CODEX) == 0
            assert (await call(ctl, "respond_interaction", **answer))["outcome"] == "dispatched"
            await call(ctl, "ack", event_id=asked["event_id"])
            done = await next_event(ctl, "done")
            assert done["turn_id"] == turn_id
            await call(ctl, "ack", event_id=done["event_id"])
            left = await ctl.call_tool(WAIT_EVENTS, {"timeout_seconds": 0})
            assert structured(left)["events"] == []
            # The same send again returns the original record and types nothing.
            again = await call(
                ctl, "send", terminal_id=row["terminal_id"], request=sc.ASK_TASK,
                client_request_id="mcp-ask",
            )  # fmt: skip
            assert again["turn_id"] == turn_id
    finally:
        await trio.to_thread.run_sync(akk.stop)
    answered = [r for r in lab.server.main_requests() if sc.ANSWERED_CODEX in r.newest_input]
    assert len(answered) == 1
    assert "Blue" in answered[0].newest_input and "Red" not in answered[0].newest_input
    assert lab.server.count_inputs_containing(sc.ASK_TASK) == 1


@pytest.mark.parametrize(
    "lab", lab_params("codex_rui_one", agents=("codex",), plan_mode=True)[-1:], indirect=True
)
async def test_an_event_the_full_buffer_dropped_comes_again_once_there_is_room(
    lab: LabSession, tmp_path: Path
) -> None:
    """The bridge's link with room for one event: `done` arrives while `interaction_required`
    is held, is dropped (still unacked at the server), and once the host acks the first the
    link reconnects and the server delivers `done` again."""
    akk = AkkProcess(lab, tmp_path, "ctl")
    buffer = EventBuffer(max_events=1)
    link = Link(Target(None, akk.state), akk.tokens["ctl"], buffer)
    try:
        await trio.to_thread.run_sync(akk.start)
        async with trio.open_nursery() as nursery:
            await nursery.start(link.run)
            with trio.fail_after(30):
                while not (rows := (await link.call("list", {}))["terminals"]) or (
                    rows[0]["activity_state"] != "idle" or not rows[0]["profile"]
                ):
                    await trio.sleep(0.1)
            send = {"terminal_id": rows[0]["terminal_id"], "request": sc.ASK_TASK}
            turn_id = (await link.call("send", send | {"client_request_id": "full"}))["turn_id"]
            (asked,) = await buffer.wait(1, timeout=60)
            assert asked["kind"] == "interaction_required"
            shown = (await link.call("status", {"turn_id": turn_id}))["interaction"]
            (question,) = shown["questions"]
            answer = {
                "question_id": question["question_id"],
                "response_kind": question["response_kind"],
                "selected_option_ids": [question["options"][0]["option_id"]],
            }
            ids = {"interaction_id": shown["interaction_id"], "turn_id": turn_id}
            await link.call("respond_interaction", ids | {"answers": [answer]})
            with trio.fail_after(60):
                while not buffer.dropped:  # `done` came and found no room
                    await trio.sleep(0.05)
            assert buffer.pending(5) == [asked]
            await link.call("ack", {"event_id": asked["event_id"]})
            with trio.fail_after(30):
                (done,) = await buffer.wait(1, timeout=30)
            assert done["kind"] == "done" and done["turn_id"] == turn_id
            assert buffer.dropped == 0
            await link.call("ack", {"event_id": done["event_id"]})
            nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(akk.stop)
    assert lab.server.count_inputs_containing(sc.ANSWERED_CODEX) == 1
