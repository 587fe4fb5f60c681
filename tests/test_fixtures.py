"""Every captured screen classifies to the label the capture tool wrote for it.

The labels come from the lab scenarios' own data, never from parsing screens,
so this is the ground truth for every pinned version at both sizes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from akk.profiles.observation import Observation, OptionRole, ResponseKind, StepKind
from akk.profiles.registry import PROFILES
from akk.screen.render import render

ROOT = Path(__file__).resolve().parent.parent / "fixtures"
LABELS = sorted(ROOT.glob("*/*/*.json")) + sorted(ROOT.glob("*/*/*/*.json"))
QUIET_STATES = {"idle", "idle_draft", "working"}
CONFIRM_ROLES = (OptionRole.SUBMIT, OptionRole.CANCEL, OptionRole.PROCEED, OptionRole.GO_BACK)


def load(label_path: Path) -> tuple[dict[str, Any], Observation]:
    """The label and what the exact version's profile makes of its screen."""
    label = json.loads(label_path.read_text())
    screen = label_path.with_suffix(".ansi").read_text()
    grid = render(screen, label["cols"], label["rows"])
    profile = PROFILES[(label["agent"], label["version"])]
    return label, profile.classify(grid)


def test_every_pinned_version_has_a_corpus_at_both_sizes() -> None:
    for agent, version in PROFILES:
        wide = list((ROOT / agent / version).glob("*.json"))
        narrow = list((ROOT / agent / version / "80x24").glob("*.json"))
        assert len(wide) >= 15 and len(narrow) >= 15, (agent, version, len(wide), len(narrow))
    versions = {
        (p.parent.name if p.parent.name != "80x24" else p.parent.parent.name) for p in LABELS
    }
    assert versions == {v for _, v in PROFILES}


@pytest.mark.parametrize("label_path", LABELS, ids=lambda p: str(p.relative_to(ROOT)))
def test_fixture_classifies_to_its_label(label_path: Path) -> None:
    label, observation = load(label_path)
    expected = label["expected"]
    state = "blocked" if expected["manual_only"] else expected["state"]
    assert observation.state.value == state, observation.reason
    if state in QUIET_STATES:
        assert observation.prompt is None and observation.reason is None
        return
    if state in ("blocked", "unknown"):
        assert not observation.actionable and observation.reason
        return
    if not expected["questions"] and not expected["decisions"]:
        # A prompt is there but shows nothing to answer yet (Codex's queued async question).
        assert not observation.actionable and observation.reason
        return
    assert observation.actionable, observation.reason
    prompt = observation.prompt
    assert prompt is not None
    assert prompt.kind.value == expected["kind"]
    if expected["step"] is not None:
        assert (prompt.step_index, prompt.step_total) == (
            expected["step"]["index"],
            expected["step"]["total"],
        )
    if expected["decisions"]:
        assert prompt.kind.value == "permission"
        (question,) = prompt.questions
        assert question.response_kind is ResponseKind.CONFIRM
        assert expected["command"] in question.detail
        roles = [o.role for o in question.options]
        assert roles.count(OptionRole.APPROVE_ONCE) == 1 and roles.count(OptionRole.REJECT) == 1
        return
    assert len(prompt.questions) == len(expected["questions"])
    for question, wanted in zip(prompt.questions, expected["questions"], strict=True):
        assert question.prompt == wanted["prompt"]
        assert question.header == wanted["header"]
        assert question.response_kind.value == wanted["response_kind"]
        # A review or confirm step's own rows are its options; elsewhere a Submit
        # row is how the widget moves on, not an answer.
        confirming = prompt.step in (StepKind.REVIEW, StepKind.CONFIRM)
        choices = [
            o.label
            for o in question.options
            if o.role is OptionRole.CHOICE or (confirming and o.role in CONFIRM_ROLES)
        ]
        extras = [o.label for o in question.options if o.label not in choices]
        assert choices == wanted["options"]
        assert extras == wanted["extra_rows"]
        current = [o.label for o in question.options if o.current]
        assert current == [wanted["current_row"]]
        assert [o.label for o in question.options if o.checked] == wanted["checked"]


def test_states_cover_every_kind_of_screen() -> None:
    states = {json.loads(p.read_text())["expected"]["state"] for p in LABELS}
    assert states >= {"idle", "idle_draft", "working", "permission", "questionnaire", "blocked"}
