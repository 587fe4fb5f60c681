"""Lab: Turns on the real `codex app-server`, driven through `akk serve` (no tmux pane).

Every pinned Codex. The model server is the oracle: each task reaches it exactly
once, in the thread the session decision names; an answer reaches it once; the
usage AKK reports is the usage the server sent for that turn's requests. Every
app-server message both ways must match that version's committed schema.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.backends.codex_app_server import schema
from akk.client import AkkError, Controller, connect
from akk.config import TurnSettings
from akk.qualify import scenarios as sc
from akk.qualify.launcher import run_processes
from akk.qualify.model_server import ModelServer, RecordedRequest
from akk.qualify.run_files import PATCH_ASKS, Preseed, RunFiles
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK, SCENARIOS
from tests.lab.conftest import ensure_installed
from tests.lab.test_interactions import SECRET_ANSWER, choose, prompt, secret_question_refused
from tools.lab import clients
from tools.lab.akk_runner import outcome, serving_backend
from tools.lab.clients import Client

CODEX = [client for client in clients.PINNED if client.agent == "codex"]
QUESTIONS = Preseed(codex_features=("default_mode_request_user_input",))


@attrs.define
class Backend:
    """One `akk serve` with the app-server backend, its model server and two controllers."""

    ctl: Controller
    other: Controller
    files: RunFiles
    model: ModelServer
    invalid: list[str]

    def send(self, text: str, role: str = "executor", request_id: str | None = None,
             **more: Any) -> dict[str, Any]:  # fmt: skip
        return {
            "scope": {"task": "task-1", "role": role},
            "backend": "codex_app_server",
            "cwd": str(self.files.workdir),
            "request": text,
            "client_request_id": request_id or text,
            **more,
        }


@asynccontextmanager
async def backend(
    client: Client,
    tmp_path: Path,
    scenario: str,
    preseed: Preseed | None = None,
    turns: TurnSettings | None = None,
) -> AsyncIterator[Backend]:
    await ensure_installed(client)
    protocol = schema.load(client.version)
    invalid: list[str] = []

    def check(message: schema.Message) -> None:
        try:
            protocol.check(message)
        except schema.MessageInvalid as exc:
            invalid.append(str(exc))

    model = ModelServer(SCENARIOS[scenario])
    with trio.fail_after(150):
        async with trio.open_nursery() as nursery:
            await nursery.start(model.serve)
            async with (
                serving_backend(
                    client, tmp_path, model, "ctl", "other", preseed=preseed, tap=check, turns=turns
                ) as (served, files),  # fmt: skip
                connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
                connect(served.endpoint.url, served.tokens["other"]) as other,
            ):
                yield Backend(ctl, other, files, model, invalid)
                root = files.workdir.parent
            nursery.cancel_scope.cancel()
    assert invalid == []
    assert run_processes(root) == []


def _requests_of(model: ModelServer, text: str) -> list[RecordedRequest]:
    return [r for r in model.main_requests() if text in r.newest_input]


def _usage_sent(model: ModelServer, first: RecordedRequest) -> dict[str, int]:
    """What the model server reported for every request of ``first``'s Codex turn."""
    mine = [r for r in model.main_requests() if r.codex_turn_id == first.codex_turn_id]
    return {
        "input_tokens": sum(r.usage.input_tokens for r in mine),
        "output_tokens": sum(r.usage.output_tokens for r in mine),
        "cache_read_tokens": sum(r.usage.cache_read_input_tokens for r in mine),
    }


async def _done(ctl: Controller, sent: dict[str, Any], kind: str = "done") -> dict[str, Any]:
    event = await outcome(ctl, sent["turn_id"], timeout=60)
    assert event["kind"] == kind, event
    status = await ctl.call("status", {"turn_id": sent["turn_id"]})
    turn: dict[str, Any] = status["turn"]
    return turn


async def _reached(model: ModelServer, text: str) -> RecordedRequest:
    return await model.wait_for_request(lambda r: not r.auxiliary and text in r.newest_input,
                                        timeout=30)  # fmt: skip


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_create_resume_and_another_role(client: Client, tmp_path: Path) -> None:
    async with backend(client, tmp_path, "echo") as lab:
        ctl, model = lab.ctl, lab.model
        first = await ctl.call("send", lab.send(ECHO_TASK, request_id="r1"))
        assert first["session_decision"] == {"action": "create", "reason": "new_scope_or_role"}
        turn = await _done(ctl, first)
        assert turn["final_message"] == ECHO_REPLY
        assert turn["backend"] == "codex_app_server"
        assert turn["session_id"] == first["session_id"]
        (asked,) = _requests_of(model, ECHO_TASK)
        sent_usage = _usage_sent(model, asked)
        usage = turn["usage"]
        assert usage["usage_status"] == "complete"
        assert {k: usage[k] for k in sent_usage} == sent_usage

        second = await ctl.call("send", lab.send("lab: second task", request_id="r2"))
        assert second["session_decision"] == {"action": "resume", "reason": "same_scope_and_role"}
        assert second["session_id"] == first["session_id"]
        turn2 = await _done(ctl, second)
        (asked2,) = _requests_of(model, "lab: second task")
        history = json.dumps(asked2.body)
        assert ECHO_TASK in history and ECHO_REPLY in history, "not the same thread"
        # Only this turn's tokens, never the thread's running totals.
        assert {k: turn2["usage"][k] for k in sent_usage} == _usage_sent(model, asked2)

        third = await ctl.call("send", lab.send("lab: review it", "reviewer", request_id="r3"))
        assert third["session_decision"]["action"] == "create"
        assert third["session_id"] != first["session_id"]
        await _done(ctl, third)
        (asked3,) = _requests_of(model, "lab: review it")
        assert ECHO_TASK not in json.dumps(asked3.body), "a reviewer saw the executor's thread"

        again = await ctl.call("send", lab.send("lab: second task", request_id="r2"))
        assert again["turn_id"] == second["turn_id"]
        # An explicit session continues too (its eligibility checked the same way).
        explicit = {"session_id": first["session_id"], "request": "lab: by id",
                    "client_request_id": "r4"}  # fmt: skip
        by_id = await ctl.call("send", explicit)
        assert by_id["session_decision"] == {"action": "resume", "reason": "same_scope_and_role"}
        assert by_id["session_id"] == first["session_id"]
        await _done(ctl, by_id)
        with pytest.raises(AkkError) as foreign:
            await lab.other.call("send", explicit | {"client_request_id": "r5"})
        assert foreign.value.reason == "not_found"
        listed = await ctl.call("list")
        roles = {s["scope"]["role"]: s for s in listed["sessions"]}
        assert set(roles) == {"executor", "reviewer"}
        assert roles["executor"]["thread_id"] != roles["reviewer"]["thread_id"]
    for text in (ECHO_TASK, "lab: second task", "lab: review it", "lab: by id"):
        assert model.count_inputs_containing(text) == 1, model.summary()


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
@pytest.mark.parametrize("decision", ["approve_once", "reject"])
async def test_exec_approval_approve_runs_once_reject_never_runs(
    client: Client, tmp_path: Path, decision: str
) -> None:
    async with backend(client, tmp_path, "codex_exec") as lab:
        marker = lab.files.workdir.parent / f"{sc.EXEC_MARKER}.txt"
        sent = await lab.ctl.call("send", lab.send(sc.RUN_TASK))
        with pytest.raises(AkkError) as no_status:
            # Nothing was shown to this controller yet: nothing may be answered.
            await lab.ctl.call("approve", {"turn_id": sent["turn_id"], "decision": decision})
        assert no_status.value.reason == "status_required"
        shown = await prompt(lab.ctl, sent["turn_id"])
        assert shown["kind"] == "permission" and shown["agent"] == "codex"
        assert shown["decisions"] == ["approve_once", "reject"]
        (question,) = shown["questions"]
        assert sc.EXEC_MARKER in question["detail"]
        assert [o["role"] for o in question["options"]] == ["approve_once", "reject"]
        with pytest.raises(AkkError) as foreign:
            await lab.other.call("approve", {"turn_id": sent["turn_id"], "decision": decision})
        assert foreign.value.reason == "not_owner"
        reply = await lab.ctl.call("approve", {"turn_id": sent["turn_id"], "decision": decision})
        assert reply["outcome"] == "dispatched"
        with pytest.raises(AkkError) as replay:
            await lab.ctl.call("approve", {"turn_id": sent["turn_id"], "decision": decision})
        assert replay.value.reason in ("conflict", "closed", "prompt_changed")
        if decision == "approve_once":
            ran = await _reached(lab.model, sc.EXEC_MARKER)
            assert "Process exited with code 0" in ran.newest_input
            await _done(lab.ctl, sent)
        else:
            turn = await _done(lab.ctl, sent, "cancelled")
            assert turn["reason"] == "rejected"
        status = await lab.ctl.call("status", {"turn_id": sent["turn_id"]})
        assert [d["kind"] for d in status["dispatches"]] == ["approval"]
        assert [d["stage"] for d in status["dispatches"]] == ["accepted"]
    assert marker.exists() is (decision == "approve_once")
    assert lab.model.count_inputs_containing(sc.EXEC_MARKER) == (decision == "approve_once")
    assert lab.model.count_inputs_containing(sc.RUN_TASK) == 1
    # The persistent decision (an execpolicy amendment) was never sent: no rule was written.
    assert not list((lab.files.codex_home or Path()).glob("rules/*")), "a rule was persisted"


def _patch_outputs(request: RecordedRequest) -> list[str]:
    """The apply_patch results in ``request``'s input (those of its custom tool calls)."""
    items = request.body.get("input") if request.body else None
    assert isinstance(items, list), request.body
    calls = {i["call_id"] for i in items if i.get("type") == "custom_tool_call"}
    return [i["output"] for i in items
            if i.get("type") == "custom_tool_call_output" and i["call_id"] in calls]  # fmt: skip


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
@pytest.mark.parametrize("decision", ["approve_once", "reject"])
async def test_file_change_approval_shows_its_diff_approve_applies_once_reject_never(
    client: Client, tmp_path: Path, decision: str
) -> None:
    async with backend(client, tmp_path, "codex_patch", preseed=PATCH_ASKS) as lab:
        target = lab.files.workdir.parent / sc.PATCH_FILE
        sent = await lab.ctl.call("send", lab.send(sc.PATCH_TASK))
        shown = await prompt(lab.ctl, sent["turn_id"])
        assert shown["kind"] == "permission" and shown["agent"] == "codex"
        # The changes come from the fileChange item (the request carries none), whole.
        assert shown["decisions"] == ["approve_once", "reject"]
        (question,) = shown["questions"]
        assert question["detail"] == f"add {target}\n{sc.PATCH_LINE}\n"
        assert [o["role"] for o in question["options"]] == ["approve_once", "reject"]
        assert not target.exists(), "written before the answer"
        reply = await lab.ctl.call("approve", {"turn_id": sent["turn_id"], "decision": decision})
        assert reply["outcome"] == "dispatched"
        with pytest.raises(AkkError) as replay:
            await lab.ctl.call("approve", {"turn_id": sent["turn_id"], "decision": decision})
        assert replay.value.reason in ("conflict", "closed", "prompt_changed")
        turn = await _done(lab.ctl, sent)
        approved = decision == "approve_once"
        assert turn["final_message"] == (sc.PATCH_DONE if approved else sc.PATCH_DECLINED)
        status = await lab.ctl.call("status", {"turn_id": sent["turn_id"]})
        assert [(d["kind"], d["stage"]) for d in status["dispatches"]] == [("approval", "accepted")]
    if approved:
        assert target.read_text() == f"{sc.PATCH_LINE}\n"
    else:
        assert not target.exists()
    # The agent's turns: the task, then the patch's result, once (title requests aside).
    asked, answered = lab.model.main_requests()
    assert asked.newest_input == sc.PATCH_TASK
    assert answered.codex_turn_id == asked.codex_turn_id
    (result,) = _patch_outputs(answered)
    assert result == answered.newest_input
    if approved:
        assert f"Success. Updated the following files:\nA ../{sc.PATCH_FILE}\n" in result
    else:
        assert result == sc.REJECTED_CODEX_PATCH


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_questions_are_answered_together_and_reach_the_model_once(
    client: Client, tmp_path: Path
) -> None:
    async with backend(client, tmp_path, "codex_rui_three", QUESTIONS) as lab:
        sent = await lab.ctl.call("send", lab.send(sc.ASK_TASK))
        shown = await prompt(lab.ctl, sent["turn_id"])
        assert shown["kind"] == "questionnaire"
        assert shown["capabilities"]["batch_response"] is True
        assert [q["header"] for q in shown["questions"]] == ["Color", "Size", "Shape"]
        by_header = {q["header"]: q for q in shown["questions"]}
        one = choose({**shown, "questions": [by_header["Color"]]}, "Blue")
        with pytest.raises(AkkError) as partial:
            await lab.ctl.call("respond_interaction", one)
        assert partial.value.reason == "invalid_params"
        size = by_header["Size"]
        answers = [
            *one["answers"],
            {"question_id": size["question_id"], "response_kind": "free_text",
             "text": "Medium, please"},
            choose({**shown, "questions": [by_header["Shape"]]}, "Hexagon")["answers"][0],
        ]  # fmt: skip
        reply = await lab.ctl.call("respond_interaction", {**one, "answers": answers})
        assert reply["outcome"] == "dispatched"
        answered = await _reached(lab.model, sc.ANSWERED_CODEX)
        turn = await _done(lab.ctl, sent)
        assert turn["final_message"] == "Thanks, I noted your answers."
    wire = json.loads(answered.newest_input)["answers"]
    assert wire == {
        "q1": {"answers": ["Blue"]},
        "q2": {"answers": ["Medium, please"]},
        "q3": {"answers": ["Hexagon"]},
    }
    assert lab.model.count_inputs_containing(sc.ANSWERED_CODEX) == 1


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX[-1:], ids=lambda client: client.name)
async def test_a_question_asking_for_a_secret_is_a_person_s_and_cancel_ends_it(
    client: Client, tmp_path: Path
) -> None:
    """Codex asks "Enter your API key:" without marking it secret: its own words do. The
    owner sees it manual_required (`secret_input`, nothing to answer with), an answer is
    refused, and the owner's cancel ends the Turn with no answer ever at the model."""
    async with backend(client, tmp_path, "codex_rui_secret", QUESTIONS) as lab:
        sent = await lab.ctl.call("send", lab.send(sc.SECRET_ASK_TASK))
        await secret_question_refused(lab.ctl, sent["turn_id"])
        await lab.ctl.call("cancel", {"turn_id": sent["turn_id"]})
        await _done(lab.ctl, sent, "cancelled")
    assert lab.model.count_inputs_containing(sc.ANSWERED_CODEX) == 0, lab.model.summary()
    assert lab.model.count_inputs_containing(SECRET_ANSWER) == 0


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_a_busy_thread_waits_cancel_interrupts_and_the_thread_goes_on(
    client: Client, tmp_path: Path
) -> None:
    async with backend(client, tmp_path, "slow") as lab:
        ctl, model = lab.ctl, lab.model
        slow = await ctl.call("send", lab.send(sc.SLOW_TASK))
        await _reached(model, sc.SLOW_TASK)
        for role, reason in (("executor", "thread_busy"), ("reviewer", "workspace_busy")):
            with pytest.raises(AkkError) as wait:
                await ctl.call("send", lab.send(ECHO_TASK, role, request_id=f"busy-{role}"))
            assert wait.value.reason == "reconcile_required"
            decision = wait.value.data["session_decision"]
            assert (decision["action"], decision["reason"]) == ("wait", reason)
            assert decision["turn_id"] == slow["turn_id"]
            assert slow["turn_id"] in wait.value.message
        # Another controller in the same workspace waits too, and is never told whose Turn
        # holds it (neither its id nor its session's).
        with pytest.raises(AkkError) as theirs:
            await lab.other.call("send", lab.send(ECHO_TASK, request_id="busy-other"))
        assert theirs.value.reason == "reconcile_required"
        assert theirs.value.data["session_decision"] == {
            "action": "wait",
            "reason": "workspace_busy",
        }
        assert "another controller's Turn" in theirs.value.message
        assert slow["turn_id"] not in str(theirs.value) and slow["session_id"] not in str(
            theirs.value
        )
        recovered = await ctl.call("recover", {"turn_id": slow["turn_id"]})
        assert recovered["supervised"] is True
        assert recovered["verification"]["invocation"]["dispatch"] == "accepted"
        assert (await ctl.call("cancel", {"turn_id": slow["turn_id"]}))["state"] == "cancelling"
        turn = await _done(ctl, slow, "cancelled")
        assert turn["reason"] is None
        status = await ctl.call("status", {"turn_id": slow["turn_id"]})
        assert status["invocation"]["outcome"] == "cancelled"
        assert status["invocation"]["cleanup"] == "confirmed"
        after = await ctl.call("send", lab.send(ECHO_TASK, request_id="after"))
        assert after["session_decision"] == {"action": "resume", "reason": "same_scope_and_role"}
        assert after["session_id"] == slow["session_id"]
        await _done(ctl, after)
        with pytest.raises(AkkError) as respond:
            await ctl.call("respond", {"turn_id": after["turn_id"], "request": "more"})
        assert respond.value.reason == "invalid_params"
    assert model.count_inputs_containing(ECHO_TASK) == 1, model.summary()
    assert model.count_inputs_containing(sc.SLOW_TASK) == 1, model.summary()


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_rebuild_on_fresh_context_and_on_a_binding_change(
    client: Client, tmp_path: Path
) -> None:
    async with backend(client, tmp_path, "echo") as lab:
        ctl, model = lab.ctl, lab.model
        first = await ctl.call("send", lab.send(ECHO_TASK, request_id="one"))
        await _done(ctl, first)
        handoff = "lab: handoff - the greeting was already said"
        fresh = await ctl.call("send", lab.send("lab: go on", request_id="two", handoff=handoff))
        assert fresh["session_decision"] == {
            "action": "rebuild",
            "reason": "fresh_context_requested",
        }
        assert fresh["session_id"] != first["session_id"]
        await _done(ctl, fresh)
        (asked,) = _requests_of(model, "lab: go on")
        assert handoff in asked.newest_input
        assert ECHO_REPLY not in json.dumps(asked.body), "the new thread saw the old one"
        status = await ctl.call("status", {"turn_id": fresh["turn_id"]})
        assert status["session"]["replaces"] == first["session_id"]
        assert status["session"]["generation"] == 2
        assert status["invocation"]["attempt"] == 2  # the task's counter goes on
        # The person changes the model's effort in CODEX_HOME: the thread's binding changed.
        config = (lab.files.codex_home or Path()) / "config.toml"
        config.write_text('model_reasoning_effort = "high"\n' + config.read_text())
        changed = await ctl.call("send", lab.send("lab: third", request_id="three"))
        assert changed["session_decision"] == {"action": "rebuild", "reason": "binding_changed"}
        await _done(ctl, changed)
        listed = await ctl.call("list")
        retired = [s for s in listed["sessions"] if s["retired_at"] is not None]
        assert {s["retire_reason"] for s in retired} == {
            "fresh_context_requested",
            "binding_changed",
        }
    for text in (ECHO_TASK, "lab: go on", "lab: third"):
        assert model.count_inputs_containing(text) == 1, model.summary()


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX[-1:], ids=lambda client: client.name)
async def test_a_stalled_turn_blocks_its_thread_until_recover_confirms_its_cleanup(
    client: Client, tmp_path: Path
) -> None:
    quick = TurnSettings(inactivity_minutes=0.05)  # 3 s without a word from the app-server
    async with backend(client, tmp_path, "slow", turns=quick) as lab:
        ctl = lab.ctl
        slow = await ctl.call("send", lab.send(sc.SLOW_TASK))
        stalled = await _done(ctl, slow, "stalled")
        assert stalled["reason"] == "stalled"
        status = await ctl.call("status", {"turn_id": slow["turn_id"]})
        if status["invocation"]["cleanup"] != "confirmed":
            with pytest.raises(AkkError) as wait:
                await ctl.call("send", lab.send(ECHO_TASK, request_id="blocked"))
            assert wait.value.data["session_decision"]["reason"] == ("previous_cleanup_unconfirmed")
        with trio.fail_after(30):
            while True:
                recovered = await ctl.call("recover", {"turn_id": slow["turn_id"]})
                if recovered["verification"]["invocation"]["cleanup"] == "confirmed":
                    break
                assert recovered["verification"]["thread"] == "running", recovered
                await trio.sleep(0.2)
        after = await ctl.call("send", lab.send(ECHO_TASK, request_id="after"))
        assert after["session_decision"]["action"] == "resume"
        await _done(ctl, after)
    assert lab.model.count_inputs_containing(sc.SLOW_TASK) == 1


def _choose_async(shown: dict[str, Any], label: str, mode: str | None) -> dict[str, Any]:
    params = choose(shown, label)
    return params if mode is None else params | {"delivery_mode": mode}


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX[-1:], ids=lambda client: client.name)
async def test_an_async_question_asking_for_a_secret_is_never_answered(
    client: Client, tmp_path: Path
) -> None:
    """An async question left by a finished turn asks "Enter your API key:": it shows
    manual_required (`secret_input`, no delivery mode, nothing to answer with), and a
    queued answer is refused, so no next round starts."""
    async with backend(client, tmp_path, "codex_rui_async_secret", QUESTIONS) as lab:
        ctl, model = lab.ctl, lab.model
        sent = await ctl.call("send", lab.send(sc.SECRET_ASK_TASK))
        await _done(ctl, sent)
        shown = (await ctl.call("status", {"turn_id": sent["turn_id"]}))["interaction"]
        assert (shown["kind"], shown["state"], shown["manual_reason"]) == (
            "async_question", "manual_required", "secret_input"
        ), shown  # fmt: skip
        assert shown["questions"] == [] and "delivery_modes" not in shown, shown
        queued = {"interaction_id": shown["interaction_id"], "turn_id": sent["turn_id"],
                  "delivery_mode": "queue_next_turn", "answers": []}  # fmt: skip
        with pytest.raises(AkkError) as refused:
            await ctl.call("respond_interaction", queued)
        assert refused.value.reason == "manual_required", refused.value
        turn = (await ctl.call("status", {"turn_id": sent["turn_id"]}))["turn"]
        assert turn["round"] == 1, turn
    assert len(_requests_of(model, sc.SECRET_ASK_TASK)) == 1, model.summary()
    assert len(model.main_requests()) == 2, model.summary()  # the task, the tool's output


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_an_async_question_left_by_a_finished_turn_starts_its_next_round(
    client: Client, tmp_path: Path
) -> None:
    async with backend(client, tmp_path, "codex_rui_async", QUESTIONS) as lab:
        ctl, model = lab.ctl, lab.model
        sent = await ctl.call("send", lab.send(sc.ASK_TASK))
        await _done(ctl, sent)
        shown = (await ctl.call("status", {"turn_id": sent["turn_id"]}))["interaction"]
        assert shown["kind"] == "async_question" and shown["state"] == "pending"
        assert shown["delivery_modes"] == ["steer_current_turn", "queue_next_turn"]
        (question,) = shown["questions"]
        assert question["prompt"] == "Which color do you prefer?"
        with pytest.raises(AkkError) as steer:
            await ctl.call("respond_interaction", _choose_async(shown, "Blue", None))
        assert steer.value.reason == "conflict" and "queue_next_turn" in steer.value.message
        queued = _choose_async(shown, "Blue", "queue_next_turn")
        reply = await ctl.call("respond_interaction", queued)
        assert (reply["outcome"], reply["round"]) == ("dispatched", 2)
        event = await outcome(ctl, sent["turn_id"], timeout=60)
        assert (event["kind"], event["round"]) == ("done", 2), event
        turn = (await ctl.call("status", {"turn_id": sent["turn_id"]}))["turn"]
        assert turn["final_message"] == "Blue it is."
        with pytest.raises(AkkError) as again:
            await ctl.call("respond_interaction", queued)
        assert again.value.reason in ("conflict", "closed", "prompt_changed", "not_found")
    answered = [r for r in model.main_requests() if "Blue" in r.newest_input]
    assert [r.newest_input for r in answered] == ["> Which color do you prefer?\n\nBlue"]
    (asked,) = _requests_of(model, sc.ASK_TASK)
    assert answered[0].codex_turn_id != asked.codex_turn_id  # a turn of its own


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_an_async_question_answered_while_its_turn_runs_joins_that_turn(
    client: Client, tmp_path: Path
) -> None:
    async with backend(client, tmp_path, "codex_rui_async_held", QUESTIONS) as lab:
        ctl, model = lab.ctl, lab.model
        sent = await ctl.call("send", lab.send(sc.ASK_TASK))
        shown = await prompt(ctl, sent["turn_id"])
        assert shown["kind"] == "async_question"
        with pytest.raises(AkkError) as queue:
            await ctl.call("respond_interaction", _choose_async(shown, "Blue", "queue_next_turn"))
        assert queue.value.reason == "not_idle"
        shown = (await ctl.call("status", {"turn_id": sent["turn_id"]}))["interaction"]
        reply = await ctl.call("respond_interaction", _choose_async(shown, "Blue", None))
        assert reply["outcome"] == "dispatched"
        model.signal(sc.SLOW_SIGNAL)
        answered = await _reached(model, "Blue")
        event = await outcome(ctl, sent["turn_id"], timeout=60)
        assert (event["kind"], event["round"]) == ("done", 1), event
    (asked,) = _requests_of(model, sc.ASK_TASK)
    assert answered.codex_turn_id == asked.codex_turn_id  # the same, running turn
    assert model.count_inputs_containing("Blue") == 1, model.summary()
