"""Interactions end to end: AKK answers real clients' prompts by meaning, once, under proof.

A controller sends a task through `akk serve`, gets the `interaction_required`
(or `approval_required`) event, calls `status`, and answers by the projection's
ids. The model server is the oracle: the agent's next request must carry
exactly that answer, once; an approved command must have run, a rejected one
not. Misuse (no status, another controller, a replay, a forged or stale id) is
refused with its reason and sends nothing.

Where a scenario serves a next task from the composer the last one left (its
`_repeating` variant), one pane per client takes every case in turn, each under
its own `akk serve` and counted at the model server from its own first request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk import faults
from akk.client import AkkError, Controller
from akk.faults import Point
from akk.profiles.claude.profile import EDITOR_MARGIN
from akk.profiles.composer import render
from akk.profiles.registry import PROFILES
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from akk.qualify.model_server import RecordedRequest
from akk.qualify.run_files import PATCH_ASKS
from akk.store.database import open_reader
from tests.lab.conftest import lab_params
from tests.lab.test_claude_plans import settings_untouched
from tools.lab.akk_runner import OUTCOMES, KeyLog, Served, idle_terminal, two_controllers

WAKE_UPS = ("interaction_required", "approval_required")


async def send_task(ctl: Controller, text: str) -> str:
    row = await idle_terminal(ctl, timeout=30)
    sent = await ctl.call(
        "send", {"terminal_id": row["terminal_id"], "request": text, "client_request_id": text}
    )
    return str(sent["turn_id"])


async def next_event(
    ctl: Controller, kinds: tuple[str, ...], timeout: float = 30
) -> dict[str, Any]:
    """The next event of one of ``kinds`` (every event on the way is acked)."""
    with trio.fail_after(timeout):
        async with aclosing(ctl.events()) as events:
            async for event in events:
                await ctl.ack(event["event_id"])
                if event["kind"] in kinds:
                    return event
    raise AssertionError("the connection closed first")


async def prompt(ctl: Controller, turn_id: str, timeout: float = 30) -> dict[str, Any]:
    """Wait for the wake-up, then `status`: the interaction it offers."""
    try:
        event = await next_event(ctl, WAKE_UPS, timeout)
    except trio.TooSlowError:
        status = await ctl.call("status", {"turn_id": turn_id})
        raise AssertionError(f"no wake-up within {timeout} s; status: {status}") from None
    assert event["turn_id"] == turn_id
    assert event["interaction"]["interaction_id"].startswith("int_")
    status = await ctl.call("status", {"turn_id": turn_id})
    interaction: dict[str, Any] = status["interaction"]
    assert interaction is not None and interaction["state"] == "pending", status
    return interaction


SECRET_ANSWER = "lab-not-a-key"
"""What a controller tries to answer a secret question with: it must never reach the model."""


async def secret_question_refused(ctl: Controller, turn_id: str) -> dict[str, Any]:
    """The wake-up for a question asking for a secret: `secret_input`, nothing to answer
    with, and an answer sent anyway refused `manual_required`. The interaction shown."""
    woken = await next_event(ctl, WAKE_UPS, 60)
    shown: dict[str, Any] = woken["interaction"]
    assert (woken["turn_id"], shown["kind"], shown["state"], shown["manual_reason"]) == (
        turn_id, "questionnaire", "manual_required", "secret_input"
    ), woken  # fmt: skip
    assert shown["questions"] == [], shown
    answer = {"question_id": "q_lab", "response_kind": "free_text", "text": SECRET_ANSWER}
    params = {"interaction_id": shown["interaction_id"], "turn_id": turn_id, "answers": [answer]}
    with pytest.raises(AkkError) as refused:
        await ctl.call("respond_interaction", params)
    assert refused.value.reason == "manual_required", refused.value
    assert "secret_input" in refused.value.message
    return shown


def option_ids(interaction: dict[str, Any], *labels: str) -> list[str]:
    (question,) = interaction["questions"]
    by_label = {option["label"]: option["option_id"] for option in question["options"]}
    return [by_label[label] for label in labels]


def choose(interaction: dict[str, Any], *labels: str) -> dict[str, Any]:
    (question,) = interaction["questions"]
    return {
        "interaction_id": interaction["interaction_id"],
        "turn_id": interaction["turn_id"],
        "answers": [
            {
                "question_id": question["question_id"],
                "response_kind": question["response_kind"],
                "selected_option_ids": option_ids(interaction, *labels),
            }
        ],
    }


def audit_rows(served: Served, actor: str) -> list[tuple[Any, ...]]:
    """``actor``'s audit rows: action, outcome and the Turn and interaction they are filed under."""
    conn = open_reader(served.state.store_path)
    try:
        return list(
            conn.execute(
                "SELECT action, outcome, turn_id, interaction_id FROM audit WHERE actor = ? "
                "ORDER BY audit_id",
                (actor,),
            )
        )
    finally:
        conn.close()


async def reached(
    lab: LabSession, predicate: Callable[[RecordedRequest], bool], first: int = 0
) -> RecordedRequest:
    """The first agent turn from request index ``first`` on that ``predicate`` accepts."""
    return await lab.server.wait_for_request(
        lambda r: r.index >= first and not r.auxiliary and predicate(r), timeout=30
    )


def count_since(lab: LabSession, first: int, text: str) -> int:
    """How many agent turns from request index ``first`` on carry ``text`` (titles left out)."""
    return sum(text in r.newest_input for r in lab.server.main_requests() if r.index >= first)


@contextmanager
def one_case(lab: LabSession, tmp_path: Path, name: str) -> Iterator[Path]:
    """One case of several in the shared pane: its own state directory; a failure names it."""
    state = tmp_path / name
    state.mkdir()
    try:
        yield state
    except BaseException as exc:
        exc.add_note(f"case {name!r} on {lab.agent} {lab.version}")
        raise


@asynccontextmanager
async def case_controllers(
    lab: LabSession, tmp_path: Path
) -> AsyncIterator[tuple[Served, Controller, Controller]]:
    """`two_controllers` for one case of several in a pane: stopped once the pane is still.

    The next case's `akk serve` then starts on a settled screen.
    """
    async with two_controllers(lab, tmp_path) as controllers:
        yield controllers
        await lab.wait_stable()


async def settled(ctl: Controller, turn_id: str) -> dict[str, Any]:
    event = await next_event(ctl, tuple(OUTCOMES), timeout=60)
    assert event["turn_id"] == turn_id
    return event


# ------------------------------------------------------------------ Claude


@pytest.mark.parametrize("lab", lab_params("questionnaire_single3"), indirect=True)
async def test_claude_single_select_answer_reaches_the_model_once(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (served, ctl, other):
        assert served.keys is not None
        keys = served.keys.keys
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        assert shown["kind"] == "questionnaire"
        call = choose(shown, "Green")
        typed = len(keys())
        # Misuse first: each is refused and sends nothing.
        with pytest.raises(AkkError) as foreign:
            await other.call("respond_interaction", call)
        assert foreign.value.reason == "not_owner"
        with pytest.raises(AkkError) as hostile:
            await other.call("respond_interaction", call | {"interaction_id": "\x1b[2J<b>[/]"})
        assert hostile.value.reason == "invalid_params"
        forged = call | {"interaction_id": "int_" + "A" * 22}
        with pytest.raises(AkkError) as unknown:
            await ctl.call("respond_interaction", forged)
        assert unknown.value.reason == "not_found"
        with pytest.raises(AkkError) as as_permission:
            await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"})
        assert as_permission.value.reason == "status_required"
        assert len(keys()) == typed  # the key layer's own record: the refusals wrote nothing
        reply = await ctl.call("respond_interaction", call)
        assert reply["outcome"] == "dispatched"
        answered = await reached(lab, lambda r: sc.ANSWERED_CLAUDE in r.newest_input)
        assert '"Which color do you prefer?"="Green"' in answered.newest_input
        with pytest.raises(AkkError) as replay:
            await ctl.call("respond_interaction", call)
        assert replay.value.reason in ("conflict", "closed")
        answer_keys = len(keys())
        outcome = await settled(ctl, turn_id)
        assert outcome["kind"] == "done"
        assert len(keys()) == answer_keys  # after the Turn ended: the replay wrote nothing
        status = await ctl.call("status", {"turn_id": turn_id})
        (receipt,) = [d for d in status["dispatches"] if d["kind"] == "answer"]
        assert receipt["stage"] == "accepted" and receipt["controller_id"] == "ctl"
        assert receipt["interaction_id"] == shown["interaction_id"]
        # Every call of the owner left a receipt (who, which interaction, outcome), no
        # answer text; the intruder's refusal is its own row, never in the Turn's trail.
        audited = [(r["controller_id"], r["action"], r["outcome"]) for r in status["receipts"]]
        assert audited == [
            ("ctl", "respond_interaction", "not_found"),
            ("ctl", "approve", "status_required"),
            ("ctl", "respond_interaction", "dispatched"),
            ("ctl", "respond_interaction", replay.value.reason),
        ]
        assert "Green" not in json.dumps(status["receipts"])
        assert audit_rows(served, "other") == [("respond_interaction", "not_owner", None, None)]
    assert lab.server.count_inputs_containing(sc.ANSWERED_CLAUDE) == 1
    assert lab.server.count_inputs_containing(sc.ASK_TASK) == 1


MULTI_CHOICES = (("Blue",), ("Red", "Yellow"), ("Red", "Blue", "Green", "Yellow"))


@pytest.mark.parametrize("lab", lab_params("questionnaire_multi_repeating"), indirect=True)
async def test_claude_multi_select_toggles_each_box_then_submits_the_review(
    lab: LabSession, tmp_path: Path
) -> None:
    for labels in MULTI_CHOICES:
        with one_case(lab, tmp_path, "+".join(labels)) as state:
            await _multi_select(lab, state, labels)


async def _multi_select(lab: LabSession, tmp_path: Path, labels: tuple[str, ...]) -> None:
    first = len(lab.server.requests)
    async with case_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        assert shown["capabilities"]["multi_select"] is True
        assert (await ctl.call("respond_interaction", choose(shown, *labels)))["outcome"] == (
            "dispatched"
        )
        review = await prompt(ctl, turn_id)
        assert review["interaction_id"] != shown["interaction_id"]
        assert review["step"]["index"] >= 1
        await submit_review(ctl, turn_id, review)
        answered = await reached(lab, lambda r: sc.ANSWERED_CLAUDE in r.newest_input, first)
        await settled(ctl, turn_id)
    assert f'"Which colors do you like?"="{", ".join(labels)}"' in answered.newest_input
    assert count_since(lab, first, sc.ANSWERED_CLAUDE) == 1


async def submit_review(ctl: Controller, turn_id: str, review: dict[str, Any]) -> None:
    """Choose the review's Submit row."""
    (question,) = review["questions"]
    submit = [o["option_id"] for o in question["options"] if o.get("role") == "submit"]
    answer = {
        "question_id": question["question_id"],
        "response_kind": "confirm",
        "selected_option_ids": submit,
    }
    params = {"interaction_id": review["interaction_id"], "turn_id": turn_id, "answers": [answer]}
    assert (await ctl.call("respond_interaction", params))["outcome"] == "dispatched"


@pytest.mark.parametrize(
    "lab", lab_params("questionnaire_four_questions", cols=60, rows=40)[-1:], indirect=True
)
async def test_four_questions_in_a_narrow_pane_are_answered_and_their_review_submitted(
    lab: LabSession, tmp_path: Path
) -> None:
    """Four questions with 12-character headers at 60 columns: the review's tab row wraps
    (each header's rest under its glyph), and the review is read and submitted."""
    chosen = [question.options[1].label for question in sc.FOUR_QUESTIONS]
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        for label in chosen:
            shown = await prompt(ctl, turn_id)
            reply = await ctl.call("respond_interaction", choose(shown, label))
            assert reply["outcome"] == "dispatched"
        review = await prompt(ctl, turn_id)
        assert review["step"] == {"index": 5, "total": 5}, review  # the Submit tab
        await submit_review(ctl, turn_id, review)
        answered = await reached(lab, lambda r: sc.ANSWERED_CLAUDE in r.newest_input)
        assert (await settled(ctl, turn_id))["kind"] == "done"
    for question, label in zip(sc.FOUR_QUESTIONS, chosen, strict=True):
        assert f'"{question.question}"="{label}"' in answered.newest_input
    assert lab.server.count_inputs_containing(sc.ANSWERED_CLAUDE) == 1


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("claude_bash_description_long_repeating"),
        # At 60 columns the auto-mode row's muted hint wraps too.
        *lab_params("claude_bash_description_long_repeating", cols=60, rows=40)[-1:],
    ],
    indirect=True,
)
async def test_claude_bash_permission_approve_runs_it_reject_does_not(
    lab: LabSession, tmp_path: Path
) -> None:
    """The model's description of the command is as long as a model writes one: it wraps."""
    # Approve first: the reject then ends the pane's conversation, so its tool result
    # never shares a user message with a later task.
    for decision in ("approve_once", "reject"):
        with one_case(lab, tmp_path, decision) as state:
            # Gone before each case: only this case's run may leave it.
            (lab.workdir / f"{sc.BASH_MARKER}.txt").unlink(missing_ok=True)
            await _claude_bash(lab, state, decision)


async def _claude_bash(lab: LabSession, tmp_path: Path, decision: str) -> None:
    marker = lab.workdir / f"{sc.BASH_MARKER}.txt"
    first = len(lab.server.requests)
    async with case_controllers(lab, tmp_path) as (_, ctl, other):
        turn_id = await send_task(ctl, sc.RUN_TASK)
        event = await next_event(ctl, WAKE_UPS)
        assert event["kind"] == "approval_required"
        with pytest.raises(AkkError) as no_status:
            await ctl.call("approve", {"turn_id": turn_id, "decision": decision})
        assert no_status.value.reason == "status_required"
        shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
        assert shown["kind"] == "permission"
        assert shown["decisions"] == ["approve_once", "reject"]
        assert [q["detail"] for q in shown["questions"]] == [sc.BASH_CALL.command]
        labels = [o["label"] for q in shown["questions"] for o in q["options"]]
        assert not any("don't ask again" in label for label in labels)
        with pytest.raises(AkkError) as foreign:
            await other.call("approve", {"turn_id": turn_id, "decision": decision})
        assert foreign.value.reason == "not_owner"
        reply = await ctl.call("approve", {"turn_id": turn_id, "decision": decision})
        assert reply["outcome"] == "dispatched"
        if decision == "approve_once":
            ran = await reached(lab, lambda r: sc.BASH_MARKER in r.newest_input, first)
            assert sc.BASH_MARKER in ran.newest_input
            assert marker.exists()
        outcome = await settled(ctl, turn_id)
        # Approved once, and nothing more: no mode switched, no rule kept for next time.
        assert "auto mode on" not in await lab.text()
        settings_untouched(lab)
        with pytest.raises(AkkError) as replay:
            await ctl.call("approve", {"turn_id": turn_id, "decision": decision})
        assert replay.value.reason in ("conflict", "closed")
    if decision == "reject":
        assert not marker.exists()
        assert outcome["kind"] in ("done", "cancelled", "failed")
    assert count_since(lab, first, sc.RUN_TASK) == 1


@attrs.frozen
class FileCase:
    """What a scenario's Write or Edit is offered as, and what its file holds once approved."""

    path: str
    before: str | None  # what the working directory holds before the task (None: no file)
    detail: str
    after: str
    result: str  # what Claude's tool result says once it wrote the file


def file_case(scenario: sc.Scenario) -> FileCase:
    (tool,) = [step.reply for step in scenario.steps if isinstance(step.reply, sc.ClaudeTool)
               and step.reply.name in ("Write", "Edit")]  # fmt: skip
    given = {key: value for key, value in tool.input.items() if isinstance(value, str)}
    path = given["file_path"]
    before = dict(scenario.files).get(path)
    if tool.name == "Write":
        # Claude records the call (and writes the file) without the lines' trailing spaces.
        written = "\n".join(line.rstrip(" ") for line in given["content"].split("\n"))
        result = "File created successfully" if before is None else "has been updated"
        return FileCase(path, before, f"{path}\n\n{written}", written, result)
    old, new = given["old_string"], given["new_string"]
    assert before is not None and before.count(old) == 1
    removed = "\n".join("-" + line for line in old.split("\n"))
    added = "\n".join("+" + line for line in new.split("\n"))
    detail = f"{path}\n\n{removed}\n{added}"
    return FileCase(path, before, detail, before.replace(old, new), "has been updated")


@pytest.mark.parametrize("decision", ["approve_once", "reject"])
@pytest.mark.parametrize(
    "lab",
    [
        *[
            lab_params(name, cols=80, rows=24)[i]
            for name in ("claude_write_shapes", "claude_edit_shapes")
            for i in (0, -1)
        ],
        lab_params("claude_write")[-1],
        lab_params("claude_edit")[-1],
        lab_params("claude_overwrite")[-1],
        # Taller than the pane: its title and first lines scrolled off the top.
        lab_params("claude_write_long", cols=80, rows=24)[0],
        lab_params("claude_write_long")[-1],
        *[lab_params("claude_overwrite_shapes", cols=80, rows=24)[i] for i in (0, -1)],
    ],
    indirect=True,
)
async def test_a_file_is_written_once_exactly_as_offered_or_left_as_it_was(
    lab: LabSession, tmp_path: Path, decision: str
) -> None:
    """Claude's Write of a new file or over one that exists, and Edit of one: shown as the
    call holds them (what the preview draws otherwise, and the lines in whole, where a
    write over a file draws only its changes), approved the file is then exactly so and
    the model hears it once, rejected it is as it was; no
    accept-edits mode is switched on. (One pane per case: Claude does not read again a
    file it read before, 2.1.263 even once it changed, so the model would not ask again.)"""
    case = file_case(lab.scenario)
    target = lab.workdir / case.path
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, lab.scenario.task)
        event = await next_event(ctl, WAKE_UPS)
        assert event["kind"] == "approval_required", event
        shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
        assert (shown["kind"], shown["state"]) == ("permission", "pending"), shown.get("reason")
        assert shown["decisions"] == ["approve_once", "reject"]
        (question,) = shown["questions"]
        assert question["detail"] == case.detail
        assert [o["role"] for o in question["options"]] == ["approve_once", "reject"]
        assert (target.read_text() if target.exists() else None) == case.before
        reply = await ctl.call("approve", {"turn_id": turn_id, "decision": decision})
        assert reply["outcome"] == "dispatched"
        if decision == "approve_once":
            await reached(lab, lambda r: case.result in r.newest_input)
            assert target.read_text() == case.after
        outcome = await settled(ctl, turn_id)
        assert "accept edits on" not in await lab.text()
        settings_untouched(lab)
    if decision == "reject":
        assert (target.read_text() if target.exists() else None) == case.before
        assert outcome["kind"] in ("done", "cancelled", "failed")
    else:
        assert outcome["kind"] == "done"
    assert count_since(lab, 0, case.result) == int(decision == "approve_once")
    assert count_since(lab, 0, lab.scenario.task) == 1


_EXPANDING = {
    "claude_bash_expansion": (sc.EXPANSION_COMMAND, sc.EXPANSION_MARKER, "lab-expansion.txt"),
    "claude_bash_long": (sc.LONG_COMMAND, sc.LONG_MARKER, "lab-long.txt"),
}
"""Scenario: its command, the marker its output carries, and the file whose first line it
writes with `$(whoami)` expanded."""


@pytest.mark.parametrize(
    "lab",
    [*lab_params("claude_bash_expansion"), *lab_params("claude_bash_long", cols=80, rows=24)],
    indirect=True,
)
async def test_a_wrapped_expansion_command_is_projected_whole_and_approved_once_runs_exactly_it(
    lab: LabSession, tmp_path: Path
) -> None:
    """`$(…)`, `$HOME`, redirects, `&&` and pipes, under Claude's gutter: one row at 120
    columns, and a 343-character command wrapped over five rows at 80."""
    command, marker, name = _EXPANDING[lab.scenario.name]
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.RUN_TASK)
        await next_event(ctl, WAKE_UPS)
        shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
        (question,) = shown["questions"]
        assert question["detail"].split("\n\n")[0] == command
        assert shown["decisions"] == ["approve_once", "reject"]
        reply = await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"})
        assert reply["outcome"] == "dispatched"
        ran = await reached(lab, lambda r: marker in r.newest_input)
        await settled(ctl, turn_id)
    # The shell ran it as written, `$(whoami)` expanded, once.
    line = (lab.workdir / name).read_text().splitlines()[0]
    assert line.startswith(f"{marker} ") and "$(" not in line and "$HOME" not in line
    assert line in ran.newest_input
    assert lab.server.count_inputs_containing(marker) == 1


# ------------------------------------------------------------------ Codex


@pytest.mark.parametrize("lab", lab_params("codex_rui_one", plan_mode=True), indirect=True)
async def test_codex_request_user_input_choice_reaches_the_model_once(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        assert (await ctl.call("respond_interaction", choose(shown, "Blue")))["outcome"] == (
            "dispatched"
        )
        answered = await reached(lab, lambda r: sc.ANSWERED_CODEX in r.newest_input)
        await settled(ctl, turn_id)
    assert "Blue" in answered.newest_input and "Red" not in answered.newest_input
    assert lab.server.count_inputs_containing(sc.ANSWERED_CODEX) == 1


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("codex_rui_long_labels", plan_mode=True)[:1],
        *lab_params("codex_rui_long_labels", plan_mode=True)[-1:],
    ],
    indirect=True,
)
async def test_codex_wrapped_labels_are_shown_whole_and_the_one_chosen_reaches_the_model(
    lab: LabSession, tmp_path: Path
) -> None:
    """Labels that wrap beside their descriptions: the controller sees each whole (the cut
    label's tail went into its description before) and the model gets the one chosen."""
    (asked,) = sc.SCENARIOS["codex_rui_long_labels"].steps[0].reply.questions  # type: ignore[union-attr]
    labels = [option.label for option in asked.options]
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        options = shown["questions"][0]["options"]
        assert [o["label"] for o in options][:2] == labels
        assert [o["description"] for o in options][:2] == [o.description for o in asked.options]
        reply = await ctl.call("respond_interaction", choose(shown, labels[1]))
        assert reply["outcome"] == "dispatched"
        answered = await reached(lab, lambda r: sc.ANSWERED_CODEX in r.newest_input)
        await settled(ctl, turn_id)
    assert labels[1] in answered.newest_input and labels[0] not in answered.newest_input
    assert lab.server.count_inputs_containing(sc.ANSWERED_CODEX) == 1


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("codex_exec_reason_long_repeating"),
        *lab_params("codex_exec_reason_long_repeating", cols=60, rows=40)[-1:],
        *lab_params("codex_exec_reason_cjk_repeating", cols=80, rows=24)[:1],
    ],
    indirect=True,
)
async def test_codex_exec_approve_runs_the_command_once_reject_selects_the_no_row(
    lab: LabSession, tmp_path: Path
) -> None:
    """The model's reason is as long as a model writes one: it wraps over rows (and, written
    in Chinese, is one word wider than the row, which starts under ``Reason:``)."""
    for decision in ("approve_once", "reject"):
        with one_case(lab, tmp_path, decision) as state:
            # Gone before each case: only this case's run may leave it.
            (lab.workdir.parent / f"{sc.EXEC_MARKER}.txt").unlink(missing_ok=True)
            await _codex_exec(lab, state, decision)


async def _codex_exec(lab: LabSession, tmp_path: Path, decision: str) -> None:
    marker = lab.workdir.parent / f"{sc.EXEC_MARKER}.txt"
    first = len(lab.server.requests)
    async with case_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.RUN_TASK)
        assert (await next_event(ctl, WAKE_UPS))["kind"] == "approval_required"
        shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
        assert shown["kind"] == "permission"
        assert shown["decisions"] == ["approve_once", "reject"]
        assert [q["detail"] for q in shown["questions"]] == [sc.EXEC_CALL.cmd]
        labels = [o["label"] for q in shown["questions"] for o in q["options"]]
        assert not any("don't ask again" in label.lower() for label in labels), labels
        reply = await ctl.call("approve", {"turn_id": turn_id, "decision": decision})
        assert reply["outcome"] == "dispatched"
        if decision == "approve_once":
            ran = await reached(lab, lambda r: sc.EXEC_MARKER in r.newest_input, first)
            assert "Process exited with code 0" in ran.newest_input
        await settled(ctl, turn_id)
    assert marker.exists() is (decision == "approve_once")
    assert count_since(lab, first, sc.EXEC_MARKER) == (decision == "approve_once")
    assert count_since(lab, first, sc.RUN_TASK) == 1


def _patch_cases() -> list[object]:
    """Approve on every pinned Codex (and the newest at 80x24), reject on the oldest and the
    newest; a patch of two files approved on the oldest and the newest."""
    every = lab_params("codex_patch", preseed=PATCH_ASKS)
    narrow = lab_params("codex_patch", preseed=PATCH_ASKS, cols=80, rows=24)[-1:]
    files = lab_params("codex_patch_files", preseed=PATCH_ASKS)[::4]
    return [
        pytest.param(*param.values, decision, id=f"{param.id}-{decision}", marks=param.marks)  # type: ignore[attr-defined]
        for decision, params in (("approve_once", every + narrow + files), ("reject", every[::4]))
        for param in params
    ]


@pytest.mark.parametrize(("lab", "decision"), _patch_cases(), indirect=["lab"])
async def test_codex_patch_approve_applies_it_once_reject_never(
    lab: LabSession, tmp_path: Path, decision: str
) -> None:
    """A patch approval in a pane names only its files: the controller is offered the whole
    patch of the one pending call, and the approval applies exactly that, once."""
    call = sc.SCENARIOS[lab.scenario.name].steps[0].reply
    assert isinstance(call, sc.ApplyPatch)
    names = [sc.PATCH_FILE, sc.PATCH_SECOND_FILE][: call.patch.count("*** Add File:")]
    written = [lab.workdir.parent / name for name in names]
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.PATCH_TASK)
        assert (await next_event(ctl, WAKE_UPS))["kind"] == "approval_required"
        shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
        assert (shown["kind"], shown["state"]) == ("permission", "pending"), shown.get("reason")
        assert shown["decisions"] == ["approve_once", "reject"]
        # Codex names the files sorted by path.
        offered = "\n".join(sorted(map(str, written))) + f"\n\n{call.patch}"
        assert [q["detail"] for q in shown["questions"]] == [offered]
        labels = [o["label"] for q in shown["questions"] for o in q["options"]]
        assert not any("don't ask again" in label.lower() for label in labels), labels
        reply = await ctl.call("approve", {"turn_id": turn_id, "decision": decision})
        assert reply["outcome"] == "dispatched"
        outcome = await settled(ctl, turn_id)
    assert [path.exists() for path in written] == [decision == "approve_once"] * len(written)
    assert count_since(lab, 0, sc.PATCH_TASK) == 1
    # Applied, the patch's result reaches the model once; refused, the turn ends there
    # (Codex tells the model with the next message only, as for a command).
    assert count_since(lab, 0, "Success. Updated") == (decision == "approve_once")
    if decision == "approve_once":
        assert written[0].read_text() == sc.PATCH_LINE + "\n"
        assert outcome["kind"] == "done", outcome
    else:
        assert outcome["kind"] == "cancelled", outcome


# ------------------------------------------------------------------ appearances and races


@pytest.mark.parametrize("lab", lab_params("questionnaire_single3")[-1:], indirect=True)
async def test_a_prompt_changed_after_status_gets_prompt_changed_and_zero_keys(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        seen = await prompt(ctl, turn_id)
        # The person at the terminal moves the cursor: a different prompt than the one seen.
        # (A key within ~200 ms of the widget's first paint is dropped: press until it took.)
        moved = False
        with trio.fail_after(15):
            while not moved:
                await lab.send_keys("Down")
                with trio.move_on_after(1):
                    while not moved:
                        now = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
                        moved = now is not None and now["interaction_id"] != seen["interaction_id"]
                        await trio.sleep(0.05)
        with pytest.raises(AkkError) as changed:
            await ctl.call("respond_interaction", choose(seen, "Red"))
        assert changed.value.reason == "prompt_changed"
        # The owner is told, once, that what it was woken for is no longer asked.
        told = await next_event(ctl, ("invalidated",))
        assert told["turn_id"] == turn_id
        assert told["interaction"]["interaction_id"] == seen["interaction_id"]
        assert told["interaction"]["state"] == "gone" and "nothing was sent" in told["summary"]
        fresh = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
        assert fresh["interaction_id"] != seen["interaction_id"]
        await ctl.call("respond_interaction", choose(fresh, "Red"))
        answered = await reached(lab, lambda r: sc.ANSWERED_CLAUDE in r.newest_input)
        await settled(ctl, turn_id)
    assert '"Which color do you prefer?"="Red"' in answered.newest_input
    assert lab.server.count_inputs_containing(sc.ANSWERED_CLAUDE) == 1


@pytest.mark.parametrize("lab", lab_params("questionnaire_again"), indirect=True)
async def test_the_identical_question_asked_again_is_a_new_answerable_interaction(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        first = await prompt(ctl, turn_id)
        await ctl.call("respond_interaction", choose(first, "Red"))
        lab.server.signal(sc.ASK_AGAIN)
        again = await prompt(ctl, turn_id)
        assert again["interaction_id"] != first["interaction_id"]
        assert again["questions"][0]["prompt"] == first["questions"][0]["prompt"]
        with pytest.raises(AkkError) as replay:
            await ctl.call("respond_interaction", choose(first, "Red"))
        assert replay.value.reason == "conflict"
        await ctl.call("respond_interaction", choose(again, "Blue"))
        await reached(lab, lambda r: '="Blue"' in r.newest_input)
        await settled(ctl, turn_id)
    assert lab.server.count_inputs_containing('"Which color do you prefer?"="Red"') == 1
    assert lab.server.count_inputs_containing('"Which color do you prefer?"="Blue"') == 1


@attrs.frozen
class LostKey:
    """An answer one of whose keys was lost: the error it got, its receipt and its Turn."""

    error: AkkError
    receipt: dict[str, Any]
    turn: dict[str, Any]


@asynccontextmanager
async def answer_losing_a_key(
    lab: LabSession,
    tmp_path: Path,
    point: Point,
    answer: Callable[[dict[str, Any]], dict[str, Any]],
) -> AsyncIterator[LostKey]:
    """`answer` (the call's params for the prompt shown) sent with `point`'s key lost."""
    faults.arm(f"{point}:drop")
    try:
        async with two_controllers(lab, tmp_path) as (_, ctl, _other):
            turn_id = await send_task(ctl, sc.ASK_TASK)
            shown = await prompt(ctl, turn_id)
            with pytest.raises(AkkError) as refused:
                await ctl.call("respond_interaction", answer(shown))
            assert refused.value.reason == "response_uncertain"
            event = await next_event(ctl, ("response_uncertain",))
            assert event["interaction_id"] == shown["interaction_id"]
            status = await ctl.call("status", {"turn_id": turn_id})
            (receipt,) = [d for d in status["dispatches"] if d["kind"] == "answer"]
            yield LostKey(refused.value, receipt, status["turn"])
    finally:
        faults.disarm()


@pytest.mark.parametrize("lab", lab_params("questionnaire_multi")[-1:], indirect=True)
async def test_a_toggle_that_does_not_take_stops_the_answer_as_uncertain(
    lab: LabSession, tmp_path: Path
) -> None:
    def toggles(shown: dict[str, Any]) -> dict[str, Any]:
        return choose(shown, "Red", "Green")

    async with answer_losing_a_key(lab, tmp_path, Point.ANSWER_TOGGLE, toggles) as lost:
        assert lost.receipt["stage"] == "uncertain"
        assert lost.turn["reason"] == "response_uncertain"
        # No further key: the first box was never ticked, the second never visited.
        screen = await lab.text()
        assert "Enter to select" in screen or "Submit" in screen
    assert lab.server.count_inputs_containing(sc.ANSWERED_CLAUDE) == 0


@pytest.mark.parametrize("lab", lab_params("questionnaire_multi")[-1:], indirect=True)
async def test_a_terminal_actor_crash_inside_an_answer_is_settled_by_its_restart(
    lab: LabSession, tmp_path: Path
) -> None:
    """The TerminalActor raises before its first toggle; its supervisor restarts it, and the
    restarted actor finds the answer's step open: uncertain, reported, never sent again."""
    faults.arm(f"{Point.ANSWER_TOGGLE}:raise")
    try:
        async with two_controllers(lab, tmp_path) as (_, ctl, _other):
            turn_id = await send_task(ctl, sc.ASK_TASK)
            shown = await prompt(ctl, turn_id)
            before = await lab.text()
            with pytest.raises(AkkError) as uncertain:
                await ctl.call("respond_interaction", choose(shown, "Red", "Green"))
            assert uncertain.value.reason == "response_uncertain"
            event = await next_event(ctl, ("response_uncertain",))
            assert event["interaction_id"] == shown["interaction_id"]
            assert "interrupted_by_restart" in event["summary"]
            status = await ctl.call("status", {"turn_id": turn_id})
            (receipt,) = [d for d in status["dispatches"] if d["kind"] == "answer"]
            assert receipt["stage"] == "uncertain"
            recovered = await ctl.call("recover", {"turn_id": turn_id})
            assert recovered["reconciled_steps"] == 0  # already settled by the restart
            after = await lab.text()
            asked = before.index("Which color")  # the logo above may animate
            assert after[after.index("Which color") :] == before[asked:]  # no key went out
    finally:
        faults.disarm()
    assert lab.server.count_inputs_containing(sc.ANSWERED_CLAUDE) == 0


# ------------------------------------------------------------------ free text

SPECIAL = "Teal, \"quoted\" and 'single' — é 日本 🙂 $HOME `x` ; | & > * (done)"


def free_text(interaction: dict[str, Any], text: str) -> dict[str, Any]:
    (question,) = interaction["questions"]
    return {
        "interaction_id": interaction["interaction_id"],
        "turn_id": interaction["turn_id"],
        "answers": [
            {"question_id": question["question_id"], "response_kind": "free_text", "text": text}
        ],
    }


def _sized_text(length: int) -> str:
    words = "lab answer text with words "
    return (words * (length // len(words) + 1))[:length].strip().ljust(length, "x")


@pytest.mark.parametrize(
    "lab",
    lab_params("codex_rui_one_repeating", plan_mode=True, cols=200, rows=50),
    indirect=True,
)
async def test_codex_free_text_goes_to_none_of_the_above_notes_byte_exact(
    lab: LabSession, tmp_path: Path
) -> None:
    texts = {"special": SPECIAL, "799": _sized_text(799), "800": _sized_text(800)}
    for name, text in texts.items():
        with one_case(lab, tmp_path, name) as state:
            await _codex_free_text(lab, state, text)


async def _codex_free_text(lab: LabSession, tmp_path: Path, text: str) -> None:
    first = len(lab.server.requests)
    async with case_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        assert shown["capabilities"]["free_text"] is True
        # Too long, and a CJK line wider than the notes (Codex's breaks there are not
        # modelled): refused before a key, so the byte-exact answer below is all that lands.
        for unprovable in (_sized_text(3000), "漢字" * 100):
            with pytest.raises(AkkError) as refused:
                await ctl.call("respond_interaction", free_text(shown, unprovable))
            assert refused.value.reason == "invalid_params", refused.value
        assert (await ctl.call("respond_interaction", free_text(shown, text)))["outcome"] == (
            "dispatched"
        )
        answered = await reached(lab, lambda r: sc.ANSWERED_CODEX in r.newest_input, first)
        await settled(ctl, turn_id)
    assert json.loads(answered.newest_input)["answers"]["q1"]["answers"] == [
        "None of the above",
        f"user_note: {text}",
    ]
    assert count_since(lab, first, sc.ANSWERED_CODEX) == 1


@pytest.mark.parametrize("lab", lab_params("codex_rui_three", plan_mode=True), indirect=True)
async def test_codex_three_questions_are_answered_one_step_at_a_time(
    lab: LabSession, tmp_path: Path
) -> None:
    chosen = ("Green", "Large", "Hexagon")
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        seen: list[str] = []
        for label in chosen:
            shown = await prompt(ctl, turn_id)
            assert shown["step"]["total"] == 3
            seen.append(shown["interaction_id"])
            await ctl.call("respond_interaction", choose(shown, label))
        answered = await reached(lab, lambda r: sc.ANSWERED_CODEX in r.newest_input)
        await settled(ctl, turn_id)
    assert len(set(seen)) == 3
    answers = json.loads(answered.newest_input)["answers"]
    assert [answers[q]["answers"] for q in ("q1", "q2", "q3")] == [[c] for c in chosen]
    assert lab.server.count_inputs_containing(sc.ANSWERED_CODEX) == 1


@pytest.mark.parametrize(
    "lab", lab_params("questionnaire_single3_repeating", rows=60), indirect=True
)
async def test_claude_free_text_goes_through_type_something_byte_exact(
    lab: LabSession, tmp_path: Path
) -> None:
    texts = {
        "special": SPECIAL,
        "799": "/" + _sized_text(798),  # a leading '/' is plain text in the editor
        "800": "!" + _sized_text(799),  # and so is '!'
        "3000": _sized_text(3000),
    }
    for name, text in texts.items():
        with one_case(lab, tmp_path, name) as state:
            await _claude_free_text(lab, state, text)


@pytest.mark.parametrize(
    "lab", lab_params("questionnaire_single3_repeating", cols=60, rows=40)[-1:], indirect=True
)
async def test_claude_free_text_in_a_narrow_pane_under_its_wrapped_footer(
    lab: LabSession, tmp_path: Path
) -> None:
    """At 60 columns the editor's footer wraps onto the pane's last row."""
    with one_case(lab, tmp_path, "special") as state:
        await _claude_free_text(lab, state, SPECIAL)


async def _claude_free_text(lab: LabSession, tmp_path: Path, text: str) -> None:
    first = len(lab.server.requests)
    async with case_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        with pytest.raises(AkkError) as newline:
            await ctl.call("respond_interaction", free_text(shown, "two\nlines"))
        assert newline.value.reason == "invalid_params"
        with pytest.raises(AkkError) as too_long:
            await ctl.call("respond_interaction", free_text(shown, _sized_text(3001)))
        assert too_long.value.reason == "invalid_params"
        reply = await ctl.call("respond_interaction", free_text(shown, text))
        assert reply["outcome"] == "dispatched"
        # Claude words a typed answer "The user answered: ..."; the pair is what counts.
        pair = f'"Which color do you prefer?"="{text}"'
        await reached(lab, lambda r: pair in r.newest_input, first)
        await settled(ctl, turn_id)
    assert count_since(lab, first, pair) == 1
    assert count_since(lab, first, '"Which color do you prefer?"=') == 1


async def _shown_anew(ctl: Controller, turn_id: str, old: str, state: str) -> dict[str, Any]:
    """The interaction `status` shows once the prompt is no longer ``old`` (a person changed
    it at the terminal; AKK reads the pane within milliseconds), in ``state``."""
    with trio.fail_after(30):
        while True:
            shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
            if shown is not None and shown["interaction_id"] != old and shown["state"] == state:
                return dict(shown)
            await trio.sleep(0.05)


async def _person_s(ctl: Controller, keys: KeyLog, turn_id: str, old: str) -> dict[str, Any]:
    """The question a person is typing into, as `status` shows it: ``editor_in_use``, nothing
    to answer with; a free-text answer to it is refused with no key. It is returned."""
    shown = await _shown_anew(ctl, turn_id, old, "manual_required")
    assert (shown["manual_reason"], shown["questions"]) == ("editor_in_use", []), shown
    before = len(keys.keys())
    answer = {"question_id": "q_lab", "response_kind": "free_text", "text": EDITOR_ANSWER}
    with pytest.raises(AkkError) as refused:
        await ctl.call("respond_interaction", {"interaction_id": shown["interaction_id"],
                       "turn_id": turn_id, "answers": [answer]})  # fmt: skip
    assert refused.value.reason == "manual_required", refused.value
    assert "editor_in_use" in refused.value.message
    assert keys.keys()[before:] == []
    return shown


EDITOR_FOCUSED = {"claude": "ctrl+g to edit in Vim", "codex": "clear notes"}
"""The footer a question shows while its free-text editor (Claude's "Type something.",
Codex's notes) has focus: keys sent before it shows are dropped."""


async def open_editor(lab: LabSession, *keys: str) -> None:
    """Press ``keys`` as the person does to reach the question's editor; wait for its focus."""
    await lab.send_keys(*keys)
    await lab.wait_for_screen(lambda screen: EDITOR_FOCUSED[lab.agent] in screen, 10)


async def type_key_by_key(lab: LabSession, text: str, *, masked: bool = False) -> None:
    """Type ``text`` as a person does, one key at a time, each drawn before the next (as a
    ``*`` each where the editor is ``masked``: Codex's notes of a question marked secret)."""
    for typed in range(1, len(text) + 1):
        await lab.type_text(text[typed - 1])
        drawn = f"› {'*' * typed}\n" if masked else text[:typed]
        await lab.wait_for_screen(lambda screen, drawn=drawn: drawn in screen, 10)


async def told_until_outcome(ctl: Controller, turn_id: str) -> list[dict[str, Any]]:
    """Every event the owner is sent from now until the Turn's outcome, that included."""
    told: list[dict[str, Any]] = []
    with trio.fail_after(60):
        async with aclosing(ctl.events()) as events:
            async for event in events:
                await ctl.ack(event["event_id"])
                assert event["turn_id"] == turn_id, event
                told.append(event)
                if event["kind"] in OUTCOMES:
                    return told
    raise AssertionError(f"the connection closed first; told {told}")


EDITOR_ANSWER = "Blue zq41zq"
PERSON_S_DRAFT = "Teal"


@pytest.mark.parametrize(
    "lab",
    [
        *[lab_params("questionnaire_single3")[i] for i in (0, -1)],
        *[lab_params("codex_rui_one", plan_mode=True)[i] for i in (0, -1)],
    ],
    indirect=True,
)
async def test_a_question_a_person_types_into_is_theirs_until_they_clear_it(
    lab: LabSession, tmp_path: Path
) -> None:
    """A person opened the question's editor (Claude's "Type something.", Codex's notes) and
    types there, key by key. A controller's free text would be typed after theirs and
    never proven, so the question is the person's: ``manual_required`` for
    ``editor_in_use``, one interaction and one wake-up however many keys they type, and an
    answer is refused with zero keys. So is it (on Codex) while the notes are open on
    another option, whose note an answer would become. Once the person cleared the
    editor, the question is answerable again, and the answer reaches the model once,
    without the person's draft. (A free-text answer used to be typed after the draft,
    fail its proof, end ``response_uncertain`` and leave "TealBlue …" in the editor; and
    each key the person typed woke the owner with a new answerable interaction.)"""
    first = len(lab.server.requests)
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        assert served.keys is not None
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        await lab.wait_stable()
        if lab.agent == "codex":
            await open_editor(lab, "Tab")  # notes on the row under the cursor, Red
            shown = await _person_s(ctl, served.keys, turn_id, shown["interaction_id"])
            await lab.send_keys("Escape")
            await lab.wait_for_screen(lambda screen: "clear notes" not in screen, 10)
            await open_editor(lab, "Down", "Down", "Down", "Tab")  # None of the above's notes
        else:
            await open_editor(lab, "Down", "Down", "Down")  # onto "Type something."
        await type_key_by_key(lab, PERSON_S_DRAFT)
        await lab.wait_stable()
        shown = await _person_s(ctl, served.keys, turn_id, shown["interaction_id"])
        await lab.send_keys(*("BSpace",) * len(PERSON_S_DRAFT))  # the person clears it
        await lab.wait_for_screen(lambda screen: PERSON_S_DRAFT not in screen, 10)
        shown = await _shown_anew(ctl, turn_id, shown["interaction_id"], "pending")
        reply = await ctl.call("respond_interaction", free_text(shown, EDITOR_ANSWER))
        assert reply["outcome"] == "dispatched", reply
        await reached(lab, lambda r: EDITOR_ANSWER in r.newest_input, first)
        told = await told_until_outcome(ctl, turn_id)
    assert told[-1]["kind"] == "done", told
    in_use = [event for event in told if event["kind"] in WAKE_UPS
              and event["interaction"]["state"] == "manual_required"]  # fmt: skip
    assert [event["interaction"]["manual_reason"] for event in in_use] == ["editor_in_use"] * (
        2 if lab.agent == "codex" else 1  # Codex: Red's notes, then the typed ones
    ), told
    assert count_since(lab, first, EDITOR_ANSWER) == 1
    assert count_since(lab, first, PERSON_S_DRAFT) == 0


def _editor_rows(version: str, text: str, cols: int) -> int:
    """How many rows Claude's editor draws `text` in, at the widest it is in `cols`."""
    profile = PROFILES[("claude", version)]
    rendered = render(profile.editor_typing.wrapping, text, cols - EDITOR_MARGIN)
    assert rendered is not None
    return len(rendered[0])


@pytest.mark.parametrize(
    "lab", lab_params("questionnaire_single3", cols=80, rows=24)[::4], indirect=True
)
async def test_claude_free_text_as_tall_as_the_pane_is_proven_and_one_row_more_is_refused(
    lab: LabSession, tmp_path: Path
) -> None:
    """Under three options the question keeps 15 of the 24 rows besides its editor: 9 editor
    rows are proven and reach the model once; 10 would have Claude cut off the question's
    top, so they are refused before any key (they used to be typed, never proven, left in
    the editor and reported response_uncertain)."""
    version = lab.client.version
    words = [f"w{n:03d}" for n in range(300)]
    fits = max(n for n in range(1, 300) if _editor_rows(version, " ".join(words[:n]), 80) <= 9)
    text, tall = " ".join(words[:fits]), " ".join(words[: fits + 1])
    assert _editor_rows(version, tall, 80) == 10
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        assert served.keys is not None
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        before = len(served.keys.keys())
        with pytest.raises(AkkError) as refused:
            await ctl.call("respond_interaction", free_text(shown, tall))
        assert refused.value.reason == "invalid_params", refused.value
        assert "25 rows tall in a pane of 24" in str(refused.value), refused.value
        assert served.keys.keys()[before:] == []
        reply = await ctl.call("respond_interaction", free_text(shown, text))
        assert reply["outcome"] == "dispatched"
        pair = f'"Which color do you prefer?"="{text}"'
        await reached(lab, lambda r: pair in r.newest_input)
        await settled(ctl, turn_id)
    assert lab.server.count_inputs_containing(pair) == 1
    assert lab.server.count_inputs_containing(tall) == 0


@pytest.mark.parametrize("lab", lab_params("questionnaire_single3")[-1:], indirect=True)
async def test_an_editor_that_does_not_open_stops_the_answer_with_none_of_its_text_typed(
    lab: LabSession, tmp_path: Path
) -> None:
    """The walk's last Down is lost: the cursor rests on an option, not in the editor."""

    def teal(shown: dict[str, Any]) -> dict[str, Any]:
        return free_text(shown, "Teal, please")

    async with answer_losing_a_key(lab, tmp_path, Point.ANSWER_EDITOR, teal) as lost:
        assert "typed none of the text" in str(lost.error)
        assert lost.receipt["stage"] == "aborted"
        screen = await lab.text()
        assert "Teal" not in screen and "Enter to select" in screen
    assert lab.server.count_inputs_containing('"Which color do you prefer?"=') == 0


# ------------------------------------------------------------------ async questions

ASYNC_PICKER = ("0.154.0", "0.155.1")
"""The versions that queue an async question and open a picker for it (NOTES.md)."""


def picker_params(scenario: str) -> list[object]:
    """`lab_params` of ``scenario`` on the versions with an async picker."""
    return [
        p
        for p in lab_params(scenario)
        if p.values[0].client.version in ASYNC_PICKER  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("lab", picker_params("codex_rui_async_held"), indirect=True)
async def test_an_async_question_answered_while_the_turn_runs_steers_that_turn(
    lab: LabSession, tmp_path: Path
) -> None:
    """AKK opens the queued question (its own step), then answers the picker into the turn."""
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        queued = await prompt(ctl, turn_id)
        # Queued, its question shows only in its picker: opening it is the one step it offers.
        assert (queued["kind"], queued["step"], queued["questions"]) == ("async_question", None, [])
        opening = {"interaction_id": queued["interaction_id"], "turn_id": turn_id, "answers": []}
        with pytest.raises(AkkError) as early:
            guess = {"question_id": "q_guess", "response_kind": "single_select"}
            await ctl.call(
                "respond_interaction", opening | {"answers": [guess | {"selected_option_ids": []}]}
            )
        assert early.value.reason == "invalid_params"
        assert "shift + ← to answer" in await lab.text()  # zero keys: still queued
        assert (await ctl.call("respond_interaction", opening))["outcome"] == "dispatched"
        shown = await prompt(ctl, turn_id)
        assert shown["kind"] == "async_question" and shown["step"] == {"index": 1, "total": 1}
        assert shown["questions"][0]["prompt"] == "Which color do you prefer?"
        assert shown["delivery_modes"] == ["steer_current_turn", "queue_next_turn"]
        with pytest.raises(AkkError) as replayed:
            await ctl.call("respond_interaction", opening)
        assert replayed.value.reason in ("conflict", "prompt_changed")
        with pytest.raises(AkkError) as queued_next:
            await ctl.call(
                "respond_interaction", choose(shown, "Blue") | {"delivery_mode": "queue_next_turn"}
            )
        assert queued_next.value.reason == "not_idle"  # the turn still runs: steer it
        steer = choose(shown, "Blue") | {"delivery_mode": "steer_current_turn"}
        assert (await ctl.call("respond_interaction", steer))["outcome"] == "dispatched"
        assert len(lab.server.main_requests()) == 2  # the turn's request is still held
        lab.server.signal(sc.SLOW_SIGNAL)
        answered = await reached(lab, lambda r: "Blue" in r.newest_input)
        outcome = await settled(ctl, turn_id)
        assert outcome["kind"] == "done"
        # The answer is a message in the turn, but the agent's own question asked for it.
        assert outcome["outcome"]["person_messages"] == 0, outcome
    asked = lab.server.main_requests()[0]
    assert "Which color do you prefer?" in answered.newest_input
    assert lab.server.count_inputs_containing("\n\nBlue") == 1
    assert (
        answered.codex_turn_id == asked.codex_turn_id
    )  # steered into the asking turn, not a new one


async def offered(
    ctl: Controller, turn_id: str, wanted: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """`status` until it shows (and offers) an interaction that ``wanted`` accepts."""
    with trio.fail_after(20):
        while True:
            shown = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
            if shown is not None and wanted(shown):
                return dict(shown)
            await trio.sleep(0.05)


@pytest.mark.parametrize("lab", picker_params("codex_rui_async"), indirect=True)
async def test_an_async_question_left_when_the_turn_ended_is_answered_as_its_next_round(
    lab: LabSession, tmp_path: Path
) -> None:
    """queue_next_turn: the agent ended its turn waiting; the answer starts the Turn's round 2."""
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        first = await settled(ctl, turn_id)
        assert (first["kind"], first["round"]) == ("done", 1)
        queued = await offered(ctl, turn_id, lambda shown: shown["step"] is None)
        opening = {"interaction_id": queued["interaction_id"], "turn_id": turn_id, "answers": []}
        with pytest.raises(AkkError) as steered:
            await ctl.call("respond_interaction", opening)  # steer (the default) needs a turn
        assert steered.value.reason == "conflict"  # that round is over: only the next one
        assert "queue_next_turn" in steered.value.message
        queue = {"delivery_mode": "queue_next_turn"}
        assert (await ctl.call("respond_interaction", opening | queue))["outcome"] == "dispatched"
        picker = await offered(ctl, turn_id, lambda shown: bool(shown["questions"]))
        answered = await ctl.call("respond_interaction", choose(picker, "Blue") | queue)
        assert answered["outcome"] == "dispatched"
        second = await settled(ctl, turn_id)
        status = await ctl.call("status", {"turn_id": turn_id})
    assert (second["kind"], second["round"]) == ("done", 2)
    assert second["outcome"]["final_message"] == "Blue it is."
    assert status["turn"]["evidence"]["status"] == "bound"  # accepted by the agent's own file
    asked = lab.server.main_requests()[0]
    (blue,) = [r for r in lab.server.main_requests() if "Blue" in r.newest_input]
    assert blue.newest_input == "> Which color do you prefer?\n\nBlue"
    assert blue.codex_turn_id != asked.codex_turn_id  # a new turn: the Turn's next round


# ------------------------------------------------------------------ resize

RESIZES = ((100, 30), (132, 43), (80, 24))


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("questionnaire_single3_repeating", agents=("claude",))[-1:],
        *lab_params("codex_rui_one_repeating", agents=("codex",), plan_mode=True)[-1:],
    ],
    indirect=True,
)
async def test_a_pane_resized_mid_prompt_refuses_the_old_offer_and_answers_the_new_one(
    lab: LabSession, tmp_path: Path
) -> None:
    """The prompt re-renders at the new size: a new appearance with new ids; what status
    showed before the resize never authorises keys after it."""
    for cols, rows in RESIZES:
        with one_case(lab, tmp_path, f"to-{cols}x{rows}") as state:
            # Each case asks at the launch size, as in a pane of its own.
            await lab.tmux("resize-window", "-t", "lab", "-x", str(lab.cols), "-y", str(lab.rows))
            await lab.wait_idle()
            await _resized_mid_prompt(lab, state, (cols, rows))


async def _resized_mid_prompt(lab: LabSession, tmp_path: Path, size: tuple[int, int]) -> None:
    answered_mark = sc.ANSWERED_CLAUDE if lab.agent == "claude" else sc.ANSWERED_CODEX
    first = len(lab.server.requests)
    async with case_controllers(lab, tmp_path) as (_, ctl, _other):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        before = await prompt(ctl, turn_id)
        cols, rows = size
        await lab.tmux("resize-window", "-t", "lab", "-x", str(cols), "-y", str(rows))
        after = await offered(
            ctl, turn_id, lambda shown: shown["interaction_id"] != before["interaction_id"]
        )
        with pytest.raises(AkkError) as stale:
            await ctl.call("respond_interaction", choose(before, "Blue"))
        assert stale.value.reason == "prompt_changed"
        assert count_since(lab, first, answered_mark) == 0  # zero keys
        assert [q["prompt"] for q in after["questions"]] == [
            q["prompt"] for q in before["questions"]
        ]
        assert (await ctl.call("respond_interaction", choose(after, "Blue")))["outcome"] == (
            "dispatched"
        )
        answered = await reached(lab, lambda r: answered_mark in r.newest_input, first)
        await settled(ctl, turn_id)
    assert "Blue" in answered.newest_input
    assert count_since(lab, first, answered_mark) == 1
