"""Lab: a headless Claude Turn's permissions and questions, answered through `akk serve`.

On the oldest and newest pinned Claude, one set-up each (one `akk serve`, one
model server, two controllers, one session resumed round after round): a Bash
call approved once (its marker file exists, its output reaches the model once),
another rejected (no marker; the deny message reaches the model once), with the
fence on the way (`approve` after the wake-up but before `status` is
status_required, another controller is not_owner, a replay is conflict); then
one AskUserQuestion whose three questions are answered in one call,
single-select, multi-select and free text, each at the model exactly once with
the chosen labels (a partial answer is refused first and sends nothing). The
model server is the oracle. The seconds from each answer call to the answer at
the model are printed and kept in the test's user_properties.

Apart, `akk serve` is SIGKILLed at each `claude_answer_*` point of an approval
and started again: the Turn gets exactly one outcome, an answer cut off before
its stage was recorded is `uncertain` with one `response_uncertain` event (at
`claude_answer_reserved` it never reached the model), a replay is refused, the
answer reaches the model at most once, and the role's next send works.

Apart, a plan approval (`ExitPlanMode`), which AKK never answers: see
`test_a_plan_approval_is_manual_required_and_only_cancel_ends_it`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.backends.claude_headless import prompts
from akk.client import AkkError, Controller, connect
from akk.faults import CLAUDE_ANSWER_POINTS, CLAUDE_INTERRUPT_POINTS, Point
from akk.qualify.launcher import run_processes
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import RunFiles
from akk.qualify.scenarios import (
    ANSWERED_CLAUDE,
    SCENARIOS,
    SECRET_ASK_TASK,
    AskUserQuestion,
    Bash,
    ClaudeTool,
    Option,
    Question,
    Scenario,
    Step,
    Text,
)
from tests.lab.conftest import ensure_installed
from tests.lab.test_faults import _events_until_outcome
from tests.lab.test_interactions import (
    SECRET_ANSWER,
    WAKE_UPS,
    next_event,
    prompt,
    secret_question_refused,
)
from tools.lab import clients
from tools.lab.akk_runner import OUTCOMES, backend_child, outcome, serving_backend
from tools.lab.clients import Client

OLDEST_AND_NEWEST = [
    client
    for client in clients.PINNED
    if client.agent == "claude" and client.version in ("2.1.263", "2.1.332")
]

ALLOW_TASK = "lab: run the allowed command"
ALLOW_MARKER = "lab-allowed-ran"
REJECT_TASK = "lab: run the rejected command"
REJECT_MARKER = "lab-rejected-ran"
ASK_TASK = "lab: ask three kinds of question"
FREE_TEXT = "Magenta, with a thin border"
AFTER_TASK = "lab: the next task"

COLOR = Question(
    "Which color do you prefer?",
    "Color",
    (Option("Red", "warm"), Option("Blue", "cool"), Option("Green", "leaves")),
)
EXTRAS = Question(
    "Which extras do you want?",
    "Extras",
    (Option("Emoji", "a"), Option("Signature", "b"), Option("Date", "c"), Option("Border", "d")),
    multi_select=True,
)
NAME = Question("What should it be called?", "Name", (Option("Card", "c"), Option("Note", "n")))
ANSWERED = (
    f'"{COLOR.question}"="Blue", "{EXTRAS.question}"="Emoji, Border", '
    f'"{NAME.question}"="{FREE_TEXT}"'
)


def _bash(marker: str) -> Bash:
    return Bash(f"touch {marker}.txt && echo {marker}", f"Create {marker}.txt")


SCENARIO = Scenario(
    "claude_backend_answers",
    task=ALLOW_TASK,
    agents=frozenset({"claude"}),
    steps=(
        Step(ALLOW_TASK, _bash(ALLOW_MARKER)),
        Step(ALLOW_MARKER, Text("The allowed command ran.")),
        Step(REJECT_TASK, _bash(REJECT_MARKER)),
        Step(prompts.REJECTED, Text("I did not run it.")),
        Step(ASK_TASK, AskUserQuestion((COLOR, EXTRAS, NAME))),
        Step(f'"{NAME.question}"=', Text("Noted the three answers.")),
        Step(AFTER_TASK, Text("Done after the crash.")),
    ),
)


PLAN_TASK = "lab: plan it, then ask to leave plan mode"
ENTERED_PLAN = "Entered plan mode"
"""The start of EnterPlanMode's tool result on every pinned Claude."""
PLAN = "1. Write the card\n2. Run the tests"
AFTER_PLAN_TASK = "lab: the task after the plan"

PLAN_SCENARIO = Scenario(
    "claude_backend_plan",
    task=PLAN_TASK,
    agents=frozenset({"claude"}),
    steps=(
        # In the default mode AKK runs Claude in, ExitPlanMode fails without asking ("You
        # are not in plan mode"); EnterPlanMode asks nothing and makes the next call ask.
        Step(PLAN_TASK, ClaudeTool("EnterPlanMode", {})),
        Step(ENTERED_PLAN, ClaudeTool("ExitPlanMode", {"plan": PLAN})),
        Step(AFTER_PLAN_TASK, Text("Back to work.")),
    ),
)


FILE_TASK = "lab: write the long file"
FILE_EDIT_TASK = "lab: now edit it"
FILE_NAME = "lab-headless.txt"
FILE_CONTENT = "".join(f"line {n} of a file longer than a command's detail\n" for n in range(1, 81))
FILE_OLD, FILE_NEW = "line 40 of a file", "line forty, edited, of a file"
CREATED, UPDATED = "File created successfully", "has been updated"
"""The start of a Write's result, and a part of an Edit's, on every pinned Claude."""

FILE_SCENARIO = Scenario(
    "claude_backend_files",
    task=FILE_TASK,
    agents=frozenset({"claude"}),
    steps=(
        Step(FILE_TASK, ClaudeTool("Write", {"file_path": FILE_NAME, "content": FILE_CONTENT})),
        Step(CREATED, Text("Written.")),
        Step(
            FILE_EDIT_TASK,
            ClaudeTool(
                "Edit", {"file_path": FILE_NAME, "old_string": FILE_OLD, "new_string": FILE_NEW}
            ),
        ),
        Step(UPDATED, Text("Edited.")),
    ),
)


@attrs.define
class Lab:
    """One `akk serve` with the headless Claude backend, its model server, two controllers."""

    ctl: Controller
    other: Controller
    files: RunFiles
    model: ModelServer

    def send(self, text: str) -> dict[str, Any]:
        return _params(self.files.workdir, text)

    async def at_model(self, text: str, since: float) -> float:
        """Seconds from ``since`` (time.monotonic) to the first model request carrying ``text``."""
        reached = await self.model.wait_for_request(
            lambda r: not r.auxiliary and text in r.newest_input, timeout=30
        )
        return reached.at - since


@asynccontextmanager
async def serving(
    client: Client, tmp_path: Path, scenario: Scenario = SCENARIO
) -> AsyncIterator[Lab]:
    await ensure_installed(client)
    model = ModelServer(scenario)
    with trio.fail_after(200):
        async with trio.open_nursery() as nursery:
            await nursery.start(model.serve)
            async with (
                serving_backend(client, tmp_path, model, "ctl", "other") as (served, files),
                connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
                connect(served.endpoint.url, served.tokens["other"]) as other,
            ):
                yield Lab(ctl, other, files, model)
                root = files.workdir.parent
            nursery.cancel_scope.cancel()
    assert run_processes(root) == []


async def _done(lab: Lab, sent: dict[str, Any]) -> dict[str, Any]:
    event = await outcome(lab.ctl, sent["turn_id"], timeout=60)
    assert event["kind"] == "done", event
    status = await lab.ctl.call("status", {"turn_id": sent["turn_id"]})
    turn: dict[str, Any] = status["turn"]
    return turn


def _answers(shown: dict[str, Any]) -> list[dict[str, Any]]:
    """Blue; Emoji and Border; the free text for the name."""
    by_header = {q["header"]: q for q in shown["questions"]}

    def pick(header: str, *labels: str) -> dict[str, Any]:
        question = by_header[header]
        return {
            "question_id": question["question_id"],
            "response_kind": question["response_kind"],
            "selected_option_ids": [
                o["option_id"] for o in question["options"] if o["label"] in labels
            ],
        }

    name = by_header["Name"]
    free = {"question_id": name["question_id"], "response_kind": "free_text", "text": FREE_TEXT}
    return [pick("Color", "Blue"), pick("Extras", "Border", "Emoji"), free]


@pytest.mark.lab
@pytest.mark.parametrize("client", OLDEST_AND_NEWEST, ids=lambda client: client.name)
async def test_permissions_and_questions_are_answered_once_through_the_offer(
    client: Client, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seconds: list[float] = []
    async with serving(client, tmp_path) as lab:
        ctl, work = lab.ctl, lab.files.workdir
        for text, decision, marker, reached in (
            (ALLOW_TASK, "approve_once", ALLOW_MARKER, ALLOW_MARKER),
            (REJECT_TASK, "reject", REJECT_MARKER, prompts.REJECTED),
        ):
            sent = await ctl.call("send", lab.send(text))
            approve = {"turn_id": sent["turn_id"], "decision": decision}
            woken = await next_event(ctl, WAKE_UPS, 60)
            assert (woken["kind"], woken["turn_id"]) == ("approval_required", sent["turn_id"])
            # Announced, never shown by status to this controller: nothing may answer it.
            with pytest.raises(AkkError) as no_status:
                await ctl.call("approve", approve)
            assert no_status.value.reason == "status_required"
            status = await ctl.call("status", {"turn_id": sent["turn_id"]})
            shown = status["interaction"]
            assert shown["interaction_id"] == woken["interaction"]["interaction_id"]
            with pytest.raises(AkkError) as foreign:
                await lab.other.call("approve", approve)
            assert foreign.value.reason == "not_owner"
            assert shown["kind"] == "permission" and shown["agent"] == "claude"
            assert shown["decisions"] == ["approve_once", "reject"]
            (question,) = shown["questions"]
            assert marker in question["detail"]
            assert [o["role"] for o in question["options"]] == ["approve_once", "reject"]
            started = time.monotonic()
            reply = await ctl.call("approve", approve)
            assert reply["outcome"] == "dispatched"
            seconds.append(await lab.at_model(reached, started))
            with pytest.raises(AkkError) as replay:
                await ctl.call("approve", approve)
            assert replay.value.reason == "conflict", replay.value
            turn = await _done(lab, sent)
            assert turn["backend"] == "claude_headless"
            status = await ctl.call("status", {"turn_id": sent["turn_id"]})
            assert [(d["kind"], d["stage"]) for d in status["dispatches"]] == [
                ("approval", "accepted")
            ]
        assert (work / f"{ALLOW_MARKER}.txt").exists()
        assert not (work / f"{REJECT_MARKER}.txt").exists()

        sent = await ctl.call("send", lab.send(ASK_TASK))
        shown = await prompt(ctl, sent["turn_id"], 60)
        assert shown["kind"] == "questionnaire"
        assert shown["capabilities"]["batch_response"] is True
        assert [q["header"] for q in shown["questions"]] == ["Color", "Extras", "Name"]
        assert [q["response_kind"] for q in shown["questions"]] == [
            "single_select", "multi_select", "single_select"
        ]  # fmt: skip
        answers = _answers(shown)
        call = {"turn_id": sent["turn_id"], "interaction_id": shown["interaction_id"]}
        with pytest.raises(AkkError) as partial:
            await ctl.call("respond_interaction", call | {"answers": answers[:2]})
        assert partial.value.reason == "invalid_params"
        with pytest.raises(AkkError) as foreign:
            await lab.other.call("respond_interaction", call | {"answers": answers})
        assert foreign.value.reason == "not_owner"
        started = time.monotonic()
        reply = await ctl.call("respond_interaction", call | {"answers": answers})
        assert reply["outcome"] == "dispatched"
        seconds.append(await lab.at_model(ANSWERED, started))
        with pytest.raises(AkkError) as replay:
            await ctl.call("respond_interaction", call | {"answers": answers})
        assert replay.value.reason == "conflict", replay.value
        turn = await _done(lab, sent)
        assert turn["final_message"] == "Noted the three answers."
    model = lab.model
    for text in (ALLOW_TASK, REJECT_TASK, ASK_TASK, ALLOW_MARKER, prompts.REJECTED, ANSWERED):
        assert model.count_inputs_containing(text) == 1, (text, model.summary())
    ordered = sorted(seconds)
    request.node.user_properties.append(("answer_to_model_s", ordered))
    print(f"{client.name} answer call -> model: {', '.join(f'{s:.3f}' for s in ordered)} s")


@pytest.mark.lab
@pytest.mark.parametrize("client", OLDEST_AND_NEWEST, ids=lambda client: client.name)
async def test_a_long_file_written_then_edited_is_shown_whole_and_approved_once(
    client: Client, tmp_path: Path
) -> None:
    """A Write of 3,911 characters, then an Edit of it: each shown as a terminal's (the path,
    then the content, or the removed and added lines), whole, so approve_once is offered
    (as a JSON input past 2,000 characters it was reject only); the file is then exactly
    the content with the edit made, and the model hears each result once."""
    assert len(FILE_CONTENT) > 3_500
    async with serving(client, tmp_path, FILE_SCENARIO) as lab:
        path = lab.files.workdir / FILE_NAME  # Claude asks with the path made absolute
        for task, detail, result in (
            (FILE_TASK, f"{path}\n\n{FILE_CONTENT}", CREATED),
            (FILE_EDIT_TASK, f"{path}\n\n-{FILE_OLD}\n+{FILE_NEW}", UPDATED),
        ):
            sent = await lab.ctl.call("send", lab.send(task))
            shown = await prompt(lab.ctl, sent["turn_id"], 60)
            assert shown["kind"] == "permission" and shown["decisions"] == [
                "approve_once",
                "reject",
            ]
            (question,) = shown["questions"]
            assert question["detail"] == detail
            approve = {"turn_id": sent["turn_id"], "decision": "approve_once"}
            assert (await lab.ctl.call("approve", approve))["outcome"] == "dispatched"
            await lab.at_model(result, time.monotonic())
            await _done(lab, sent)
        written = path.read_text()
    assert written == FILE_CONTENT.replace(FILE_OLD, FILE_NEW)
    for text in (FILE_TASK, FILE_EDIT_TASK, CREATED, UPDATED):
        assert lab.model.count_inputs_containing(text) == 1, (text, lab.model.summary())


@pytest.mark.lab
@pytest.mark.parametrize("client", OLDEST_AND_NEWEST, ids=lambda client: client.name)
async def test_a_plan_approval_is_manual_required_and_only_cancel_ends_it(
    client: Client, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The model enters plan mode, then calls ExitPlanMode: Claude asks (`can_use_tool`).

    The owner is woken at once with `approval_required` whose interaction is
    `manual_required` (`plan_approval`, no questions, no decisions: nothing to answer
    by id), and `status` shows the same. `approve` and `respond_interaction` are
    refused `manual_required` (the prompt is never offered: a person must act); neither
    sends anything. The Turn ends
    `cancelled`, once: a headless Turn has no person at a terminal to approve the plan,
    so the owner's `cancel` is its only way out (its interrupt withdraws the request
    and Claude ends the round with an error result). The model server is the oracle:
    the round made exactly its two requests (the task, EnterPlanMode's result), no
    answer ever reached it, and the role's next send carries the plan call rejected
    (is_error) by the interrupt, never approved.
    """
    async with serving(client, tmp_path, PLAN_SCENARIO) as lab:
        ctl, model = lab.ctl, lab.model
        sent = await ctl.call("send", lab.send(PLAN_TASK))
        turn_id = sent["turn_id"]
        woken = await next_event(ctl, WAKE_UPS, 60)
        woken_at = time.monotonic()
        (asked,) = [r for r in model.main_requests() if ENTERED_PLAN in r.newest_input]
        assert (woken["kind"], woken["turn_id"]) == ("approval_required", turn_id), woken
        shown = woken["interaction"]
        assert (shown["kind"], shown["state"], shown["manual_reason"]) == (
            "permission", "manual_required", "plan_approval"
        ), shown  # fmt: skip
        assert shown["questions"] == [] and "decisions" not in shown, shown
        status = await ctl.call("status", {"turn_id": turn_id})
        assert status["interaction"] == shown
        assert status["turn"]["state"] == "running" and status["dispatches"] == []
        requests = len(model.main_requests())
        for decision in ("approve_once", "reject"):
            with pytest.raises(AkkError) as approve:
                await ctl.call("approve", {"turn_id": turn_id, "decision": decision})
            assert approve.value.reason == "manual_required", approve.value
        with pytest.raises(AkkError) as respond:
            await ctl.call(
                "respond_interaction",
                {"turn_id": turn_id, "interaction_id": shown["interaction_id"], "answers": []},
            )
        assert respond.value.reason == "manual_required", respond.value
        status = await ctl.call("status", {"turn_id": turn_id})
        assert status["dispatches"] == [] and status["interaction"]["state"] == "manual_required"
        await ctl.call("cancel", {"turn_id": turn_id})
        seen: list[dict[str, Any]] = []
        ended = await _events_until_outcome(ctl, seen, timeout=60)
        assert ended is not None and (ended["kind"], ended["turn_id"]) == ("cancelled", turn_id)
        # The outcome waits for the process's exit: nothing of this round can reach it later.
        assert len(model.main_requests()) == requests, model.summary()
        await _events_until_outcome(ctl, seen, timeout=1.0)  # nothing more comes
        outcomes = [e for e in seen if e.get("turn_id") == turn_id and e["kind"] in OUTCOMES]
        assert len(outcomes) == 1, outcomes
        after = await ctl.call("send", lab.send(AFTER_PLAN_TASK))
        assert after["session_id"] == sent["session_id"]
        turn = await _done(lab, after)
        assert turn["final_message"] == "Back to work."
    first, plan, next_round = model.main_requests()
    assert PLAN_TASK in first.newest_input and plan is asked, model.summary()
    assert AFTER_PLAN_TASK in next_round.newest_input, model.summary()
    rejected = _plan_results(next_round.body)
    assert [r.get("is_error") for r in rejected] == [True], rejected
    for text in (PLAN_TASK, ENTERED_PLAN, AFTER_PLAN_TASK):
        assert model.count_inputs_containing(text) == 1, (text, model.summary())
    seconds = woken_at - model.finished_at[asked.index]
    request.node.user_properties.append(("plan_reply_to_wake_up_s", seconds))
    print(f"{client.name} ExitPlanMode reply -> manual_required wake-up: {seconds:.3f} s")


@pytest.mark.parametrize("client", OLDEST_AND_NEWEST[-1:], ids=lambda client: client.name)
async def test_a_question_asking_for_a_secret_is_a_person_s_and_cancel_ends_it(
    client: Client, tmp_path: Path
) -> None:
    """The model asks "Enter your API key:" through AskUserQuestion: the owner is woken with
    `secret_input` and nothing to answer with, an answer is refused, and the owner's
    cancel ends the Turn with no answer ever at the model."""
    async with serving(client, tmp_path, SCENARIOS["questionnaire_secret"]) as lab:
        ctl, model = lab.ctl, lab.model
        sent = await ctl.call("send", lab.send(SECRET_ASK_TASK))
        await secret_question_refused(ctl, sent["turn_id"])
        await ctl.call("cancel", {"turn_id": sent["turn_id"]})
        ended = await _events_until_outcome(ctl, [], timeout=60)
        assert ended is not None and (ended["kind"], ended["turn_id"]) == (
            "cancelled", sent["turn_id"]
        )  # fmt: skip
    assert model.count_inputs_containing(ANSWERED_CLAUDE) == 0, model.summary()
    assert model.count_inputs_containing(SECRET_ANSWER) == 0


def _plan_results(body: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The tool results a request carries for the conversation's ExitPlanMode calls."""
    assert body is not None
    calls = {
        block["id"]
        for message in body["messages"]
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use" and block.get("name") == "ExitPlanMode"
    }
    return [
        block
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result" and block.get("tool_use_id") in calls
    ]


@pytest.mark.lab
@pytest.mark.parametrize("point", CLAUDE_ANSWER_POINTS, ids=str)
@pytest.mark.parametrize("client", OLDEST_AND_NEWEST, ids=lambda client: client.name)
async def test_sigkill_at_each_answer_point_then_restart(
    client: Client, tmp_path: Path, point: Point
) -> None:
    seen: list[dict[str, Any]] = []
    await ensure_installed(client)
    model = ModelServer(SCENARIO)
    async with backend_child(client, tmp_path, model) as lab:
        akk, args, work = lab.akk, lab.serve_args, lab.files.workdir
        url = await trio.to_thread.run_sync(akk.start, f"{point}:crash", *args)
        with trio.fail_after(90):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                sent = await ctl.call("send", _params(work, ALLOW_TASK))
                turn_id = sent["turn_id"]
                approve = {"turn_id": turn_id, "decision": "approve_once"}
                await prompt(ctl, turn_id, 60)
                with pytest.raises(Exception):  # noqa: B017  the server dies under the call
                    await ctl.call("approve", approve)
        await trio.to_thread.run_sync(akk.died_at, point)
        url = await trio.to_thread.run_sync(akk.start, None, *args)
        with trio.fail_after(120):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                assert await _events_until_outcome(ctl, seen, timeout=60), (point, seen)
                status = await ctl.call("status", {"turn_id": turn_id})
                with pytest.raises(AkkError) as replay:
                    await ctl.call("approve", approve)
                assert replay.value.reason in ("conflict", "closed"), replay.value
                await _events_until_outcome(ctl, seen, timeout=1.5)  # nothing more comes
                after = await ctl.call("send", _params(work, AFTER_TASK))
                assert (await outcome(ctl, after["turn_id"], timeout=60))["kind"] == "done"
    mine = [e for e in seen if e.get("turn_id") == turn_id]
    outcomes = [e for e in mine if e["kind"] in OUTCOMES]
    assert len({e["event_id"] for e in outcomes}) == 1, outcomes
    ((kind, stage, dispatch_id),) = [
        (d["kind"], d["stage"], d["dispatch_id"]) for d in status["dispatches"]
    ]
    uncertain = [e for e in mine if e["kind"] == "response_uncertain"]
    if point is Point.CLAUDE_ANSWER_RECORDED:
        assert (kind, stage, uncertain) == ("approval", "accepted", []), (stage, uncertain)
    else:
        # The answer may have been written before its stage: reported once, never resent.
        assert (kind, stage) == ("approval", "uncertain"), status["dispatches"]
        assert [e["dispatch_id"] for e in uncertain] == [dispatch_id], uncertain
    ran = model.count_inputs_containing(ALLOW_MARKER)
    if point is Point.CLAUDE_ANSWER_RESERVED:
        assert ran == 0 and not (work / f"{ALLOW_MARKER}.txt").exists(), model.summary()
    assert ran <= 1, model.summary()
    assert model.count_inputs_containing(ALLOW_TASK) == 1, model.summary()
    assert model.count_inputs_containing(AFTER_TASK) == 1, model.summary()


@pytest.mark.lab
@pytest.mark.parametrize("point", CLAUDE_INTERRUPT_POINTS, ids=str)
async def test_sigkill_at_each_cancel_point_then_restart(tmp_path: Path, point: Point) -> None:
    """The owner cancels a round waiting on a permission; AKK dies between the cancel's
    reservation and its line, or between the line and its record. Started again, it knows
    the owner asked: the Turn is `cancelled` (or, where the line was never written, what
    Claude's transcript says), never `interrupted_by_restart`; the step is `uncertain`
    (never written again), the command never ran, and the role's next send runs. The
    newest Claude: the step is AKK's own, not the client's."""
    seen: list[dict[str, Any]] = []
    client = OLDEST_AND_NEWEST[-1]
    await ensure_installed(client)
    model = ModelServer(SCENARIO)
    async with backend_child(client, tmp_path, model) as lab:
        akk, args, work = lab.akk, lab.serve_args, lab.files.workdir
        url = await trio.to_thread.run_sync(akk.start, f"{point}:crash", *args)
        with trio.fail_after(90):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                sent = await ctl.call("send", _params(work, ALLOW_TASK))
                turn_id = sent["turn_id"]
                await prompt(ctl, turn_id, 60)
                with pytest.raises(Exception):  # noqa: B017  the server dies under the call
                    await ctl.call("cancel", {"turn_id": turn_id})
        await trio.to_thread.run_sync(akk.died_at, point)
        url = await trio.to_thread.run_sync(akk.start, None, *args)
        with trio.fail_after(120):
            async with connect(url, akk.tokens["ctl"]) as ctl:
                assert await _events_until_outcome(ctl, seen, timeout=60), (point, seen)
                status = await ctl.call("status", {"turn_id": turn_id})
                after = await ctl.call("send", _params(work, AFTER_TASK))
                assert (await outcome(ctl, after["turn_id"], timeout=60))["kind"] == "done"
    outcomes = [e for e in seen if e.get("turn_id") == turn_id and e["kind"] in OUTCOMES]
    assert len({e["event_id"] for e in outcomes}) == 1, outcomes
    turn = status["turn"]
    if point is Point.CLAUDE_INTERRUPT_SENT:
        assert turn["state"] == "cancelled", turn
    else:
        # The line was never written: with AKK's pipes gone Claude may still end its round
        # itself (the permission denied), and its transcript says so; never a restart's cut.
        assert turn["state"] in ("cancelled", "done"), turn
    steps = [(d["kind"], d["stage"]) for d in status["dispatches"]]
    assert steps == [("cancel", "uncertain")], status["dispatches"]
    assert model.count_inputs_containing(ALLOW_MARKER) == 0, model.summary()
    assert not (work / f"{ALLOW_MARKER}.txt").exists()
    assert model.count_inputs_containing(ALLOW_TASK) == 1, model.summary()
    assert model.count_inputs_containing(AFTER_TASK) == 1, model.summary()


def _params(cwd: Path, text: str) -> dict[str, Any]:
    return {
        "scope": {"task": "task-1", "role": "executor"},
        "backend": "claude_headless",
        "cwd": str(cwd),
        "request": text,
        "client_request_id": text,
    }
