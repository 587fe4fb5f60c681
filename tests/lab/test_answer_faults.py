"""SIGKILL `akk serve` between an answer's reservation and its postcondition, then restart.

For each answer kind and each point: the restarted server reports the answer
as `response_uncertain` (event and receipt), never sends it again (a replay is
refused with zero keys), and the model server received the answer at most
once: never when the kill came before the first key, exactly once after.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import AkkError, Controller, connect
from akk.faults import ANSWER_POINTS, Point
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tools.lab.akk_runner import AkkProcess, idle_terminal

WAKE_UPS = ("interaction_required", "approval_required")
CASES = [
    *lab_params("questionnaire_single3", agents=("claude",))[-1:],
    *lab_params("codex_exec", agents=("codex",))[-1:],
]
# Free text alone passes answer_editor and answer_text_injected; these answers go from
# their keys to `sent`.
TYPED_ONLY = (Point.ANSWER_EDITOR, Point.ANSWER_TEXT_INJECTED)
POINTS = [point for point in ANSWER_POINTS if point not in TYPED_ONLY]
UNSENT = (Point.ANSWER_RESERVED, *TYPED_ONLY)
"""Points before the key that submits an answer: the model must never receive it."""


async def _next(ctl: Controller, kinds: tuple[str, ...], timeout: float) -> dict[str, Any]:
    with trio.fail_after(timeout):
        async for event in ctl.events():
            await ctl.ack(event["event_id"])
            if event["kind"] in kinds:
                return event
    raise AssertionError("the connection closed first")


FREE_TEXT = "Teal, if you have it: " + " ".join(f"t{i:04d}" for i in range(200))
"""1,221 characters: Claude's plan types them in two pieces, the first proven before the
second (`TypeText.piece_bytes`), so the kills fall between pieces too."""


def _answer_call(
    lab: LabSession, turn_id: str, shown: dict[str, Any], typed: bool = False
) -> tuple[str, dict[str, Any]]:
    if shown["kind"] == "permission":
        return "approve", {"turn_id": turn_id, "decision": "approve_once"}
    (question,) = shown["questions"]
    if typed:
        answer = {"question_id": question["question_id"], "response_kind": "free_text"}
        return "respond_interaction", {
            "interaction_id": shown["interaction_id"],
            "turn_id": turn_id,
            "answers": [answer | {"text": FREE_TEXT}],
        }
    green = [o["option_id"] for o in question["options"] if o["label"] == "Green"]
    return "respond_interaction", {
        "interaction_id": shown["interaction_id"],
        "turn_id": turn_id,
        "answers": [
            {
                "question_id": question["question_id"],
                "response_kind": "single_select",
                "selected_option_ids": green,
            }
        ],
    }


def _answers_received(lab: LabSession) -> int:
    if lab.agent == "codex":
        return lab.server.count_inputs_containing(sc.EXEC_MARKER)
    return lab.server.count_inputs_containing('"Which color do you prefer?"=')


@pytest.mark.parametrize("point", POINTS, ids=str)
@pytest.mark.parametrize("lab", CASES, indirect=True)
async def test_sigkill_inside_an_answer_is_reported_uncertain_and_never_resent(
    lab: LabSession, tmp_path: Path, point: Point
) -> None:
    await _killed_inside_an_answer(lab, tmp_path, point, typed=False)


@pytest.mark.parametrize("point", ANSWER_POINTS, ids=str)
@pytest.mark.parametrize("lab", CASES[:1], indirect=True)
async def test_sigkill_inside_a_free_text_answer_never_submits_it_twice(
    lab: LabSession, tmp_path: Path, point: Point
) -> None:
    await _killed_inside_an_answer(lab, tmp_path, point, typed=True)


async def _killed_inside_an_answer(
    lab: LabSession, tmp_path: Path, point: Point, *, typed: bool
) -> None:
    akk = AkkProcess(lab, tmp_path)
    try:
        url = akk.start(f"{point}:crash")
        with trio.fail_after(90):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                row = await idle_terminal(ctl, timeout=30)
                task = sc.ASK_TASK if lab.agent == "claude" else sc.RUN_TASK
                sent = await ctl.call(
                    "send",
                    {"terminal_id": row["terminal_id"], "request": task, "client_request_id": "t"},
                )
                turn_id = sent["turn_id"]
                await _next(ctl, WAKE_UPS, timeout=30)
                shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
                method, params = _answer_call(lab, turn_id, shown, typed)
                with pytest.raises(Exception):  # noqa: B017 - the server dies under the call
                    await ctl.call(method, params)
        await trio.to_thread.run_sync(akk.died_at, point)
        url = akk.start(None)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                event = await _next(ctl, ("response_uncertain",), timeout=30)
                assert event["turn_id"] == turn_id
                assert event["interaction_id"] == shown["interaction_id"]
                status = await ctl.call("status", {"turn_id": turn_id})
                (receipt,) = [
                    d for d in status["dispatches"] if d["kind"] in ("answer", "approval")
                ]
                assert receipt["stage"] == "uncertain"
                assert status["turn"]["reason"] == "response_uncertain" or status["turn"][
                    "state"
                ] in ("done", "failed")
                with pytest.raises(AkkError) as replay:
                    await ctl.call(method, params)
                assert replay.value.reason in ("conflict", "prompt_changed", "closed")
                if point in UNSENT:
                    # Killed before the submitting key: the prompt still waits for a person.
                    assert _answers_received(lab) == 0
                    if typed and point is Point.ANSWER_TEXT_INJECTED and lab.agent == "claude":
                        # Killed after the first piece's keys: the second never went out.
                        screen = await lab.text()
                        assert "t0166" in screen and "t0199" not in screen, screen
                else:
                    await lab.server.wait_for_request(
                        lambda r: (
                            not r.auxiliary
                            and ('prefer?"=' in r.newest_input or sc.EXEC_MARKER in r.newest_input)
                        ),
                        timeout=20,
                    )
    finally:
        akk.kill()
    assert _answers_received(lab) == (0 if point in UNSENT else 1)


@pytest.mark.parametrize("point", [Point.ANSWER_TOGGLE, Point.ANSWER_SENT], ids=str)
@pytest.mark.parametrize(
    "lab", lab_params("questionnaire_multi", agents=("claude",))[-1:], indirect=True
)
async def test_sigkill_inside_a_multi_select_answer_never_toggles_again(
    lab: LabSession, tmp_path: Path, point: Point
) -> None:
    """Killed before a toggle's keys (or after the step's last key): reported, never resumed.

    After the last key the review is the next step; the restarted server
    announces it as a new interaction, and submitting it sends the answer once.
    """
    akk = AkkProcess(lab, tmp_path)
    try:
        url = akk.start(f"{point}:crash")
        with trio.fail_after(90):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                row = await idle_terminal(ctl, timeout=30)
                sent = await ctl.call(
                    "send",
                    {
                        "terminal_id": row["terminal_id"],
                        "request": sc.ASK_TASK,
                        "client_request_id": "t",
                    },
                )
                turn_id = sent["turn_id"]
                await _next(ctl, WAKE_UPS, timeout=30)
                shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
                (question,) = shown["questions"]
                chosen = [
                    o["option_id"] for o in question["options"] if o["label"] in ("Red", "Green")
                ]
                params = {
                    "interaction_id": shown["interaction_id"],
                    "turn_id": turn_id,
                    "answers": [
                        {
                            "question_id": question["question_id"],
                            "response_kind": "multi_select",
                            "selected_option_ids": chosen,
                        }
                    ],
                }
                with pytest.raises(Exception):  # noqa: B017 - the server dies under the call
                    await ctl.call("respond_interaction", params)
        await trio.to_thread.run_sync(akk.died_at, point)
        url = akk.start(None)
        with trio.fail_after(60):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                event = await _next(ctl, ("response_uncertain",), timeout=30)
                assert event["interaction_id"] == shown["interaction_id"]
                with pytest.raises(AkkError) as replay:
                    await ctl.call("respond_interaction", params)
                assert replay.value.reason in ("conflict", "prompt_changed")
                if point is Point.ANSWER_SENT:
                    review = await _next(ctl, WAKE_UPS, timeout=30)
                    assert review["interaction"]["kind"] == "confirmation"
                    shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
                    (question,) = shown["questions"]
                    submit = [
                        o["option_id"] for o in question["options"] if o.get("role") == "submit"
                    ]
                    await ctl.call(
                        "respond_interaction",
                        {
                            "interaction_id": shown["interaction_id"],
                            "turn_id": turn_id,
                            "answers": [
                                {
                                    "question_id": question["question_id"],
                                    "response_kind": "confirm",
                                    "selected_option_ids": submit,
                                }
                            ],
                        },
                    )
                    await lab.server.wait_for_request(
                        lambda r: not r.auxiliary and sc.ANSWERED_CLAUDE in r.newest_input,
                        timeout=20,
                    )
    finally:
        akk.kill()
    received = lab.server.count_inputs_containing('"Which colors do you like?"="Red, Green"')
    assert received == (1 if point is Point.ANSWER_SENT else 0)
    assert lab.server.count_inputs_containing(sc.ANSWERED_CLAUDE) == received
