"""A permission or question whose screen differs from the agent's pending call is refused,
zero keys.

The real client shows its Bash / exec approval for the scenario's command and
records that call in its transcript or rollout. The test then appends what the
file would hold if the prompt hid the end of a longer command: the shown
call answered, and a pending call for the command with more after it. An
approval offered before is refused as ``prompt_changed`` (the fingerprint binds
the call), the prompt is ``manual_required`` with ``pending_call_mismatch``,
and nothing ran: no marker file, no tool result at the model, the prompt still
on screen until the person answers it.

A question likewise (newest Claude Code and Codex): the file's pending
AskUserQuestion / request_user_input call is made to ask one label otherwise
than the screen shows it. The answer offered before is refused, the question is
``manual_required`` with ``pending_call_mismatch``, nothing is typed, and the
model gets the person's answer once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.backends.terminal.observer import PENDING_GRACE
from akk.client import AkkError, Controller
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tests.lab.test_interactions import WAKE_UPS, choose, next_event, send_task, settled
from tools.lab.akk_runner import two_controllers

PROMPT = {
    "claude": "Do you want to proceed?",
    "codex": "Would you like to run the following command?",
}


def _forged(lab: LabSession, command: str) -> list[dict[str, Any]]:
    """The records of a file whose pending call is `command` plus more, the shown one answered."""
    longer = f"{command} && echo hidden-tail"
    if lab.agent == "claude":
        (real,) = [block["id"] for block in _tool_uses(lab)]
        result = {"type": "tool_result", "tool_use_id": real, "content": "done"}
        call = {
            "type": "tool_use",
            "id": "toolu_hidden",
            "name": "Bash",
            "input": {"command": longer},
        }
        return [
            {"type": "user", "message": {"role": "user", "content": [result]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [call]}},
        ]
    (real,) = [
        record["payload"]["call_id"]
        for record in lab.transcript_records()
        if isinstance(record, dict) and record.get("type") == "response_item"
        and record["payload"].get("type") == "function_call"
    ]  # fmt: skip
    arguments = json.dumps({"cmd": longer, "sandbox_permissions": "require_escalated"})
    return [
        {"type": "response_item",
         "payload": {"type": "function_call_output", "call_id": real, "output": "done"}},
        {"type": "response_item",
         "payload": {"type": "function_call", "name": "exec_command", "arguments": arguments,
                     "call_id": "call_hidden"}},
    ]  # fmt: skip


async def _interaction(ctl: Controller, turn_id: str, state: str) -> dict[str, Any]:
    with trio.fail_after(30):
        while True:
            shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
            if shown is not None and shown["state"] == state:
                return dict(shown)
            await trio.sleep(0.05)


@pytest.mark.parametrize(
    "lab", [*lab_params("claude_bash"), *lab_params("codex_exec")], indirect=True
)
async def test_a_permission_that_is_not_the_files_pending_call_is_manual_with_zero_keys(
    lab: LabSession, tmp_path: Path
) -> None:
    marker = sc.BASH_MARKER if lab.agent == "claude" else sc.EXEC_MARKER
    # Where each scenario's command writes its marker (Codex's: outside the workspace).
    ran = (
        lab.workdir / f"{marker}.txt"
        if lab.agent == "claude"
        else lab.workdir.parent / f"{marker}.txt"
    )
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.RUN_TASK)
        assert (await next_event(ctl, WAKE_UPS))["kind"] == "approval_required"
        offered = await _interaction(ctl, turn_id, "pending")
        (question,) = offered["questions"]
        command = question["detail"].split("\n\n")[0]
        (path,) = lab.transcript_files()
        with path.open("a") as file:
            for record in _forged(lab, command):
                file.write(json.dumps(record) + "\n")
        with pytest.raises(AkkError) as changed:
            await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"})
        assert changed.value.reason == "prompt_changed"
        manual = await _interaction(ctl, turn_id, "manual_required")
        assert manual["manual_reason"] == "pending_call_mismatch"
        assert manual["interaction_id"] != offered["interaction_id"]
        with pytest.raises(AkkError) as refused:
            await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"})
        assert refused.value.reason in ("prompt_changed", "status_required", "manual_required")
        # Zero keys: the prompt is still there, unanswered, and nothing ran.
        assert PROMPT[lab.agent] in await lab.text()
        assert lab.server.count_inputs_containing(marker) == 0
        await lab.send_keys("Escape")  # the person at the terminal rejects it
        await settled(ctl, turn_id)
    assert not ran.exists()
    assert lab.server.count_inputs_containing(marker) == 0
    assert lab.server.count_inputs_containing(sc.RUN_TASK) == 1


@pytest.mark.parametrize("lab", lab_params("claude_bash_late_close")[-1:], indirect=True)
async def test_a_permission_drawn_before_its_message_closes_is_left_to_a_person(
    lab: LabSession, tmp_path: Path
) -> None:
    """Claude draws a Bash permission once the call's block is whole, but writes the call
    only with the message's close, which it leaves unread while the prompt waits (every
    pinned version, tools/lab/NOTES.md). So the prompt is held for `PENDING_GRACE`, then
    woken about as ``manual_required`` / ``pending_call_unknown``, and gets no key, even
    after the close arrives. The newest pinned version only: the others behave alike."""
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.RUN_TASK)
        await lab.wait_for_screen(lambda screen: PROMPT["claude"] in screen, 30, what="the prompt")
        drawn = trio.current_time()
        event = await next_event(ctl, WAKE_UPS)
        held = trio.current_time() - drawn
        assert event["kind"] == "approval_required"
        assert event["interaction"]["state"] == "manual_required", event
        assert event["interaction"]["manual_reason"] == "pending_call_unknown"
        # Held, not published at once (the test may see the prompt later than AKK did).
        assert held >= PENDING_GRACE / 2, f"woken {held:.1f} s after the prompt was drawn"
        assert lab.transcript_records() and not _tool_uses(lab)
        lab.server.signal(sc.CLOSE_SIGNAL)
        with pytest.raises(AkkError) as refused:
            await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"})
        assert refused.value.reason == "manual_required"
        # Zero keys: the prompt is still there, unanswered, and nothing ran.
        assert PROMPT["claude"] in await lab.text()
        assert lab.server.count_inputs_containing(sc.BASH_MARKER) == 0
        await lab.send_keys("Escape")  # the person at the terminal rejects it
        await settled(ctl, turn_id)
        print(f"{lab.client.name}: manual_required {held:.1f} s after the prompt was drawn")
    assert not (lab.workdir / f"{sc.BASH_MARKER}.txt").exists()
    assert lab.server.count_inputs_containing(sc.BASH_MARKER) == 0


def _tool_uses(lab: LabSession) -> list[dict[str, Any]]:
    """The tool calls Claude's transcript records."""
    return [
        block
        for record in lab.transcript_records()
        if isinstance(record, dict) and record.get("type") == "assistant"
        for block in record["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]


def _forged_question(lab: LabSession) -> list[dict[str, Any]]:
    """The records of a file whose pending question call names its first option "Rose" (the
    screen shows "Red"), the shown call answered."""
    if lab.agent == "claude":
        (real,) = _tool_uses(lab)
        asked = json.loads(json.dumps(real["input"]).replace('"Red"', '"Rose"'))
        result = {"type": "tool_result", "tool_use_id": real["id"], "content": "done"}
        call = {"type": "tool_use", "id": "toolu_other", "name": "AskUserQuestion", "input": asked}
        return [
            {"type": "user", "message": {"role": "user", "content": [result]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [call]}},
        ]
    (payload,) = [
        record["payload"]
        for record in lab.transcript_records()
        if isinstance(record, dict) and record.get("type") == "response_item"
        and record["payload"].get("type") == "function_call"
    ]  # fmt: skip
    arguments = payload["arguments"].replace('"Red"', '"Rose"')
    return [
        {"type": "response_item",
         "payload": {"type": "function_call_output", "call_id": payload["call_id"],
                     "output": "done"}},
        {"type": "response_item",
         "payload": {"type": "function_call", "name": "request_user_input",
                     "arguments": arguments, "call_id": "call_other"}},
    ]  # fmt: skip


@pytest.mark.parametrize(
    "lab",
    [*lab_params("questionnaire_single3")[-1:], *lab_params("codex_rui_one", plan_mode=True)[-1:]],
    indirect=True,
)
async def test_a_question_that_is_not_the_files_pending_call_is_manual_with_zero_keys(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        assert served.keys is not None
        turn_id = await send_task(ctl, sc.ASK_TASK)
        assert (await next_event(ctl, WAKE_UPS))["kind"] == "interaction_required"
        offered = await _interaction(ctl, turn_id, "pending")
        typed = len(served.keys.keys())
        (path,) = lab.transcript_files()
        with path.open("a") as file:
            for record in _forged_question(lab):
                file.write(json.dumps(record) + "\n")
        with pytest.raises(AkkError) as changed:
            await ctl.call("respond_interaction", choose(offered, "Blue"))
        assert changed.value.reason == "prompt_changed"
        manual = await _interaction(ctl, turn_id, "manual_required")
        assert manual["manual_reason"] == "pending_call_mismatch"
        assert manual["interaction_id"] != offered["interaction_id"]
        assert manual["questions"] == []
        # Zero keys: the question is still there, unanswered.
        assert len(served.keys.keys()) == typed
        assert "Which color do you prefer?" in await lab.text()
        await lab.send_keys("Enter")  # the person at the terminal answers it: Red
        await settled(ctl, turn_id)
        assert len(served.keys.keys()) == typed
    # The person's answer, the first row, reached the model once.
    assert lab.server.count_inputs_containing("Red") == 1, lab.server.summary()
    assert lab.server.count_inputs_containing(sc.ASK_TASK) == 1
