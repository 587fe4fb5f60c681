"""A question in other scripts, answered through `akk serve`: the exact label, once.

- The newest pinned Claude Code, 120x40: the 4-option question of CJK, emoji (a
  ZWJ sequence), right-to-left and plain labels is offered with exactly the
  scenario's labels, answered by option id, and the model server (the oracle)
  receives that label exactly once in the tool result.
- A question and descriptions in Chinese, wider than the row, which each client
  cuts at the pane's edge (oldest and newest pinned Claude Code and Codex, at
  80x24 and 120x40): offered exactly as asked, with no space where a row was
  cut, and the label chosen reaches the model once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from akk.client import connect
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tests.lab.test_interactions import choose, prompt, reached, send_task, settled
from tools.lab.akk_runner import serving


@pytest.mark.parametrize(
    "lab", lab_params("questionnaire_unicode", agents=("claude",))[-1:], indirect=True
)
async def test_a_unicode_label_reaches_the_model_once(lab: LabSession, tmp_path: Path) -> None:
    question = sc.UNICODE_QUESTION
    labels = [option.label for option in question.options]
    label = labels[1]  # a rocket, text, then a ZWJ family of three and more text
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        (offered,) = shown["questions"]
        assert offered["prompt"] == question.question
        assert [option["label"] for option in offered["options"]][: len(labels)] == labels
        reply = await ctl.call("respond_interaction", choose(shown, label))
        assert reply["outcome"] == "dispatched"
        answered = await reached(lab, lambda r: sc.ANSWERED_CLAUDE in r.newest_input)
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
    ],
    indirect=True,
)
async def test_a_chinese_question_cut_at_the_pane_s_edge_is_offered_exactly_and_answered_once(
    lab: LabSession, tmp_path: Path
) -> None:
    question = sc.CJK_ASKED
    labels = [option.label for option in question.options]
    noted = sc.ANSWERED_CLAUDE if lab.agent == "claude" else sc.ANSWERED_CODEX
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
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
