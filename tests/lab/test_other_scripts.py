"""A question in other scripts, answered through `akk serve`: the exact label, once.

- The newest pinned Claude Code and Codex, 120x40: the 4-option question of CJK,
  emoji (a ZWJ sequence), right-to-left and plain labels is offered with exactly
  the scenario's labels, answered by option id, and the model server (the
  oracle) receives that label exactly once in the tool result.
- A question and descriptions in Chinese, wider than the row, which each client
  cuts at the pane's edge (oldest and newest pinned Claude Code and Codex, at
  80x24 and 120x40): offered exactly as asked, with no space where a row was
  cut, and the label chosen reaches the model once. With a space the model wrote
  just where the row is cut (newest of each, 80x24), which no screen shows, it is
  offered with that space: in the words of its call in the agent's file. So is a
  question of three lines, one of them blank (oldest at 80x24, newest at 120x40),
  and its multi-select review is read (oldest Claude Code, 80x24).
- The same question as a multi-select (oldest pinned Claude Code at 80x24, newest
  at 120x40): its review lists the long question under a gutter; the review is
  read and submitted, and the label ticked reaches the model once.
- A label neither client shows as sent ("❤️ Heart", "⌚︎ Watch"; newest pinned
  Claude Code and Codex): the owner is woken, AKK types nothing, and the person
  answers at the pane.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from akk.client import Controller, connect
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tests.lab.test_interactions import (
    WAKE_UPS,
    choose,
    next_event,
    prompt,
    reached,
    send_task,
    settled,
    submit_review,
)
from tools.lab.akk_runner import outcome, serving, two_controllers


def answered_text(lab: LabSession) -> str:
    """What the model gets once a question is answered, on this agent."""
    return sc.ANSWERED_CLAUDE if lab.agent == "claude" else sc.ANSWERED_CODEX


def asked_in(lab: LabSession) -> sc.Question:
    """The one question the lab's scenario asks."""
    (reply, *_) = [step.reply for step in lab.scenario.steps
                   if isinstance(step.reply, sc.AskUserQuestion | sc.RequestUserInput)]  # fmt: skip
    assert isinstance(reply, sc.AskUserQuestion | sc.RequestUserInput)
    (question,) = reply.questions
    return question


@asynccontextmanager
async def question_offered(
    lab: LabSession, tmp_path: Path
) -> AsyncIterator[tuple[Controller, str, dict[str, Any]]]:
    """`akk serve` on the pane and one controller: the question task sent, its Turn, and
    the interaction it offers."""
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        yield ctl, turn_id, await prompt(ctl, turn_id)


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("questionnaire_unicode")[-1:],
        *lab_params("codex_rui_unicode", plan_mode=True)[-1:],
    ],
    indirect=True,
)
async def test_a_unicode_label_reaches_the_model_once(lab: LabSession, tmp_path: Path) -> None:
    question = sc.UNICODE_QUESTION
    labels = [option.label for option in question.options]
    label = labels[1]  # a rocket, text, then a ZWJ family of three and more text
    async with question_offered(lab, tmp_path) as (ctl, turn_id, shown):
        (offered,) = shown["questions"]
        assert offered["prompt"] == question.question
        # Codex draws no header: it is offered as the model's call asks it.
        assert offered["header"] == question.header
        assert [option["label"] for option in offered["options"]][: len(labels)] == labels
        reply = await ctl.call("respond_interaction", choose(shown, label))
        assert reply["outcome"] == "dispatched"
        noted = answered_text(lab)
        answered = await reached(lab, lambda r: noted in r.newest_input)
        if lab.agent == "claude":
            assert f'"{question.question}"="{label}"' in answered.newest_input
        assert answered.newest_input.count(label) == 1
        assert lab.server.count_inputs_containing(label) == 1
        assert (await settled(ctl, turn_id))["kind"] == "done"


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("questionnaire_cjk", cols=80, rows=24)[:1],
        *lab_params("questionnaire_cjk")[-1:],
        *lab_params("codex_rui_cjk", plan_mode=True, cols=80, rows=24)[:1],
        *lab_params("codex_rui_cjk", plan_mode=True)[-1:],
        # A space the model wrote just where the row is cut: offered as the call asks it.
        *lab_params("questionnaire_cjk_spaced", cols=80, rows=24)[-1:],
        *lab_params("codex_rui_cjk_spaced", plan_mode=True, cols=80, rows=24)[-1:],
        # A question of three lines, one blank, each drawn on rows of its own.
        *lab_params("questionnaire_multiline", cols=80, rows=24)[:1],
        *lab_params("questionnaire_multiline")[-1:],
        *lab_params("codex_rui_multiline", plan_mode=True, cols=80, rows=24)[:1],
        *lab_params("codex_rui_multiline", plan_mode=True)[-1:],
    ],
    indirect=True,
)
async def test_a_question_over_several_rows_is_offered_exactly_and_answered_once(
    lab: LabSession, tmp_path: Path
) -> None:
    question = asked_in(lab)
    labels = [option.label for option in question.options]
    noted = answered_text(lab)
    async with question_offered(lab, tmp_path) as (ctl, turn_id, shown):
        (offered,) = shown["questions"]
        assert offered["prompt"] == question.question
        options = offered["options"][: len(labels)]
        assert [(o["label"], o["description"]) for o in options] == [
            (o.label, o.description) for o in question.options
        ]
        reply = await ctl.call("respond_interaction", choose(shown, labels[1]))
        assert reply["outcome"] == "dispatched"
        answered = await reached(lab, lambda r: noted in r.newest_input)
        assert labels[1] in answered.newest_input and labels[0] not in answered.newest_input
        assert (await settled(ctl, turn_id))["kind"] == "done"
    assert lab.server.count_inputs_containing(noted) == 1


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("questionnaire_cjk_multi", cols=80, rows=24)[:1],
        *lab_params("questionnaire_cjk_multi")[-1:],
        *lab_params("questionnaire_multiline_multi", cols=80, rows=24)[:1],
    ],
    indirect=True,
)
async def test_a_long_multi_select_question_s_review_is_read_and_submitted(
    lab: LabSession, tmp_path: Path
) -> None:
    question = asked_in(lab)
    label = question.options[1].label
    async with question_offered(lab, tmp_path) as (ctl, turn_id, shown):
        assert shown["questions"][0]["prompt"] == question.question
        reply = await ctl.call("respond_interaction", choose(shown, label))
        assert reply["outcome"] == "dispatched"
        await submit_review(ctl, turn_id, await prompt(ctl, turn_id))
        answered = await reached(lab, lambda r: sc.ANSWERED_CLAUDE in r.newest_input)
        assert f'"{question.question}"="{label}"' in answered.newest_input
        assert (await settled(ctl, turn_id))["kind"] == "done"
    assert lab.server.count_inputs_containing(sc.ANSWERED_CLAUDE) == 1


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("questionnaire_selector")[-1:],
        *lab_params("codex_rui_selector", plan_mode=True)[-1:],
    ],
    indirect=True,
)
async def test_a_label_the_pane_cannot_show_as_sent_is_the_person_s_to_answer(
    lab: LabSession, tmp_path: Path
) -> None:
    """Claude drops the variation selectors of "❤️ Heart" and "⌚︎ Watch"; Codex keeps them,
    but it and tmux disagree on their widths, so a space is gained or lost beside each. The
    owner is woken once, ``manual_required`` (``unreadable_prompt``, the reason in its
    detail) with nothing to answer; AKK types nothing; the person answers at the pane."""
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        assert served.keys is not None
        turn_id = await send_task(ctl, sc.ASK_TASK)
        woken = await next_event(ctl, WAKE_UPS, 60)
        typed = len(served.keys.keys())
        manual = woken["interaction"]
        assert (manual["state"], manual["manual_reason"], manual["questions"]) == (
            "manual_required", "unreadable_prompt", []
        ), woken  # fmt: skip
        assert "cannot be read back" in manual["detail"]
        await lab.tmux("send-keys", "-t", "lab", "Enter")  # the person takes the first row
        ended = await outcome(ctl, turn_id, timeout=60)
        assert ended["kind"] == "done", ended
        assert len(served.keys.keys()) == typed
    # The person's answer, the first row, reached the model once (Claude words its tool
    # result otherwise when the answer is an Enter on the row: "The user answered: …").
    assert lab.server.count_inputs_containing("Heart") == 1, lab.server.summary()
