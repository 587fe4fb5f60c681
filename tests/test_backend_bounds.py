"""A backend's prompt is bounded before a controller sees it (akk.protocol.projection).

The texts and counts in an app-server or headless request are the model's: a
hostile repository can make them megabytes. Every text is cut to its field's
bound (with a mark saying how long the whole was) after only its head is
redacted; too many questions or options, or a projection still too large as
JSON, make the prompt one a person must answer. So every event fits the 1 MiB
frame controllers' libraries accept. The real clients' 1.2 MB command is in
tests/lab/test_huge_prompts.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from akk.actors.terminal_board import TerminalSnapshot, project_snapshot, terminal_row
from akk.backends.claude_headless import prompts as claude
from akk.backends.codex_app_server import prompts as codex
from akk.backends.codex_app_server.rpc import ServerRequest
from akk.profiles.observation import (
    InteractionKind,
    OptionRole,
    OptionView,
    PromptView,
    QuestionView,
    ResponseKind,
    StepKind,
)
from akk.protocol.errors import Reason, RpcError
from akk.protocol.projection import (
    BACKEND_MAX_OPTIONS,
    BACKEND_MAX_QUESTIONS,
    BACKEND_TEXT_MAX,
    PROJECTION_MAX_BYTES,
    backend_text,
)
from akk.protocol.redaction import MASK, redact, withheld
from akk.screen.fingerprint import IdMinter
from akk.screen.region import Region
from tests import corpus
from tests.test_redaction import permission, snapshot_with

IDS = IdMinter(b"k" * 32)
FRAME = 1 << 20
"""The largest frame trio-websocket and websockets accept by default."""
KEY = "ghp_" + "Zx9Qm3Lp7Rt2Vb8Nc1Kd" * 2


def _codex_questions(questions: list[dict[str, Any]]) -> dict[str, Any]:
    request = ServerRequest(7, codex.QUESTIONS, {"threadId": "thr", "questions": questions})
    return codex.prompt_of(request, generation=1, ids=IDS, turn_id="t").projection


def _claude_questions(questions: list[dict[str, Any]]) -> dict[str, Any]:
    request = {"subtype": "can_use_tool", "tool_name": claude.QUESTION_TOOL,
               "input": {"questions": questions}, "tool_use_id": "toolu_1"}  # fmt: skip
    return claude.prompt_of("r1", request, generation=1, ids=IDS, turn_id="t").projection


BACKENDS: dict[str, Callable[[list[dict[str, Any]]], dict[str, Any]]] = {
    "codex": _codex_questions,
    "claude": _claude_questions,
}


def _questions(count: int, options: int, text: str = "") -> list[dict[str, Any]]:
    """`count` questions of `options` options each; every text `text` plus what tells it apart."""
    return [
        {"id": f"q{q}", "header": f"{text}H{q}", "question": f"{text}Question {q}?",
         "options": [{"label": f"{text}L{q}.{o}", "description": f"{text}D{o}"}
                     for o in range(options)]}
        for q in range(count)
    ]  # fmt: skip


def _event_bytes(projection: dict[str, Any]) -> int:
    """The size of the wake-up frame carrying `projection`, serialized as the endpoint does."""
    event = {"kind": "interaction_required", "event_id": "evt_" + "0" * 32, "turn_id": "t",
             "interaction": projection}  # fmt: skip
    return len(json.dumps({"jsonrpc": "2.0", "method": "event", "params": event}))


def test_a_text_over_its_bound_is_cut_with_its_whole_length_and_its_head_redacted() -> None:
    limit = BACKEND_TEXT_MAX["detail"]
    command = f"export GITHUB_TOKEN={KEY}; echo lab\n" + "echo lab\n" * 200_000
    shown = backend_text(command, "detail")
    assert shown.startswith(f"export GITHUB_TOKEN={MASK}; echo lab\necho lab\n")
    assert shown == redact(command[:5_000])[:limit] + f"…[cut: {len(command):,} characters in all]"
    assert backend_text("ls -la", "detail") == "ls -la"
    assert backend_text(None, "header") == "" and backend_text(12, "prompt") == ""


@given(st.text(alphabet=st.sampled_from("ab ghp_Zx9Qm3Lp7Rt2\n=:"), max_size=1_500),
       st.sampled_from(["header", "label", "description"]))  # fmt: skip
def test_a_shown_text_is_its_redaction_or_that_cut_and_marked(text: str, field: str) -> None:
    limit, whole = BACKEND_TEXT_MAX[field], redact(text)
    cut = (
        whole if len(whole) <= limit else f"{whole[:limit]}…[cut: {len(text):,} characters in all]"
    )
    assert backend_text(text, field) == cut


def test_a_megabyte_permission_stays_rejectable_and_fits_a_frame() -> None:
    command = "cat <<'EOF'\n" + ("\U0001f600\x01" * 100 + "\n") * 6_000 + "EOF"
    params = {"threadId": "thr", "command": command, "cwd": "/" + "d" * 10_000,
              "reason": "\U0001f600" * 100_000,
              "availableDecisions": ["accept", "decline"]}  # fmt: skip
    shown = codex.prompt_of(
        ServerRequest(1, "item/commandExecution/requestApproval", params),
        generation=1, ids=IDS, turn_id="t",
    ).projection  # fmt: skip
    assert shown["state"] == "pending" and shown["decisions"] == ["reject"]  # seen in part
    request = {"subtype": "can_use_tool", "tool_name": "Bash" * 10_000,
               "description": "\x01" * 100_000, "input": {"command": command},
               "tool_use_id": "toolu_1"}  # fmt: skip
    headless = claude.prompt_of("r1", request, generation=1, ids=IDS, turn_id="t").projection
    assert headless["state"] == "pending" and headless["decisions"] == ["reject"]
    for projection in (shown, headless):
        (question,) = projection["questions"]
        for field in ("header", "prompt", "detail", "cwd"):
            if field in question:
                assert len(question[field]) <= BACKEND_TEXT_MAX[field] + 40, field
        assert _event_bytes(projection) < PROJECTION_MAX_BYTES


def test_a_command_too_costly_to_show_offers_reject_only() -> None:
    """A command of one 5 MB line costs more than the redaction's budget: `detail` shows
    nothing of it, so approving would be blind. Only reject is offered, and approve is
    refused before anything is built."""
    command = "echo " + "lab " * 1_250_000
    params = {"threadId": "thr", "command": command, "cwd": "/w",
              "availableDecisions": ["accept", "decline"]}  # fmt: skip
    app_server = codex.prompt_of(
        ServerRequest(1, "item/commandExecution/requestApproval", params),
        generation=1, ids=IDS, turn_id="t",
    )  # fmt: skip
    request = {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": command},
               "tool_use_id": "toolu_1"}  # fmt: skip
    headless = claude.prompt_of("r1", request, generation=1, ids=IDS, turn_id="t")
    for prompt in (app_server, headless):
        shown = prompt.projection
        assert shown["state"] == "pending" and shown["decisions"] == ["reject"]
        (question,) = shown["questions"]
        assert question["detail"] == withheld(len(command))
        assert [option["role"] for option in question["options"]] == ["reject"]
    with pytest.raises(RpcError, match="offers reject only") as refused:
        codex.decision_result(app_server, "approve_once")
    assert refused.value.reason is Reason.INVALID_PARAMS
    with pytest.raises(RpcError, match="offers reject only"):
        claude.decision_response(headless, "approve_once")
    assert codex.decision_result(app_server, "reject") == {"decision": "decline"}
    assert claude.decision_response(headless, "reject")["behavior"] == "deny"


def test_a_command_cut_at_its_bound_offers_reject_only_and_one_within_it_approve() -> None:
    """A command of many lines: its head is redacted and shown, but a controller approves
    only what it saw whole (the hidden tail could be `; curl … | sh`). One that fits the
    bound whole stays approvable."""
    limit = BACKEND_TEXT_MAX["detail"]
    for command, approvable in (("echo lab\n" * 600_000, False), ("e" * limit, True)):
        params = {"threadId": "thr", "command": command,
                  "availableDecisions": ["accept", "decline"]}  # fmt: skip
        app_server = codex.prompt_of(
            ServerRequest(1, "item/commandExecution/requestApproval", params),
            generation=1, ids=IDS, turn_id="t",
        )  # fmt: skip
        bash = {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": command},
                "tool_use_id": "toolu_1"}  # fmt: skip
        headless = claude.prompt_of("r1", bash, generation=1, ids=IDS, turn_id="t")
        offered = ["approve_once", "reject"] if approvable else ["reject"]
        assert app_server.projection["decisions"] == headless.projection["decisions"] == offered
        if approvable:
            assert codex.decision_result(app_server, "approve_once") == {"decision": "accept"}
            continue
        with pytest.raises(RpcError, match="does not show whole") as refused:
            codex.decision_result(app_server, "approve_once")
        assert refused.value.reason is Reason.INVALID_PARAMS
        with pytest.raises(RpcError, match="does not show whole") as refused:
            claude.decision_response(headless, "approve_once")
        assert refused.value.reason is Reason.INVALID_PARAMS


@pytest.mark.parametrize("agent", sorted(BACKENDS))
def test_questions_at_the_count_bounds_are_answerable(agent: str) -> None:
    shown = BACKENDS[agent](_questions(BACKEND_MAX_QUESTIONS, BACKEND_MAX_OPTIONS))
    assert shown["state"] == "pending"
    assert len(shown["questions"]) == BACKEND_MAX_QUESTIONS
    assert {len(q["options"]) for q in shown["questions"]} == {BACKEND_MAX_OPTIONS}


@pytest.mark.parametrize("agent", sorted(BACKENDS))
@pytest.mark.parametrize(
    ("count", "options", "reason"),
    [
        (BACKEND_MAX_QUESTIONS + 1, 2, f"too_many_questions: {BACKEND_MAX_QUESTIONS + 1} "
                                       f"(at most {BACKEND_MAX_QUESTIONS})"),
        (1, 100_000, f"too_many_options: 100000 in one question (at most {BACKEND_MAX_OPTIONS})"),
    ],
)  # fmt: skip
def test_too_many_questions_or_options_are_for_a_person(
    agent: str, count: int, options: int, reason: str
) -> None:
    shown = BACKENDS[agent](_questions(count, options))
    assert (shown["state"], shown["manual_reason"], shown["questions"]) == (
        "manual_required", reason, [])  # fmt: skip
    assert shown["capabilities"] == {"batch_response": False, "free_text": False,
                                     "multi_select": False}  # fmt: skip


@pytest.mark.parametrize("agent", sorted(BACKENDS))
def test_texts_too_long_in_all_are_for_a_person_before_any_is_redacted(agent: str) -> None:
    long = _questions(BACKEND_MAX_QUESTIONS, BACKEND_MAX_OPTIONS, "x" * 5_000)
    shown = BACKENDS[agent](long)
    assert (shown["state"], shown["questions"]) == ("manual_required", [])
    assert shown["manual_reason"] == (
        f"too_large: {16 * (200 + 4_000 + 64 * 1_500):,} characters of text (at most 64,000)"
    )


@pytest.mark.parametrize("agent", sorted(BACKENDS))
def test_a_projection_too_large_as_json_is_for_a_person_and_fits_a_frame(agent: str) -> None:
    # 40,000 characters, under the text bound, but JSON escapes each to 12 bytes.
    wide = "\U0001f600" * 1_000
    shown = BACKENDS[agent](_questions(3, 8, wide))
    assert shown["state"] == "manual_required" and shown["questions"] == []
    assert shown["manual_reason"].startswith("too_large: ")
    assert shown["manual_reason"].endswith(" bytes as JSON (at most 262,144)")
    assert "decisions" not in shown
    assert _event_bytes(shown) < 4_096
    fits = BACKENDS[agent](_questions(3, 8, wide[:300]))
    assert fits["state"] == "pending" and PROJECTION_MAX_BYTES / 2 < _event_bytes(fits) < FRAME


def test_a_prompt_read_off_a_huge_pane_is_for_a_person_and_fits_a_frame() -> None:
    """A screen prompt is bounded by its pane, but a pane can be thousands of cells wide: one
    whose projection passes the bound is the same prompt, manual, saying where to look."""
    wide = "漢字" * 40_000  # 80,000 characters, 480 KB as JSON in each of four fields
    shown = project_snapshot(snapshot_with(permission(wide)), IDS, turn_id="t")
    assert shown is not None and not shown.actionable
    projection = shown.projection
    assert projection["state"] == "manual_required" and projection["questions"] == []
    assert projection["reason"] == projection["manual_reason"]
    assert projection["manual_reason"].startswith("too_large: ")
    assert (projection["terminal_id"], projection["pane"]) == ("t1", "%1")
    assert "decisions" not in projection and _event_bytes(projection) < 4_096
    fits = project_snapshot(snapshot_with(permission("漢字 ok")), IDS, turn_id="t")
    assert fits is not None and fits.actionable and fits.projection["decisions"]


def test_a_screen_prompt_the_profile_refuses_carries_no_answerable_id() -> None:
    """A prompt on screen that AKK will not answer says why and where, and offers nothing to
    answer with: no question or option id, no decision (PROTOCOL.md)."""
    refused = snapshot_with(permission("Enter your password"))
    refused = attrs.evolve(
        refused, observation=attrs.evolve(refused.observation, reason="secret_input")
    )
    shown = project_snapshot(refused, IDS, turn_id="t")
    assert shown is not None and not shown.actionable
    projection = shown.projection
    assert projection["state"] == "manual_required"
    assert projection["reason"] == projection["manual_reason"] == "secret_input"
    assert (projection["terminal_id"], projection["pane"]) == ("t1", "%1")
    assert projection["questions"] == [] and "decisions" not in projection
    assert "password" not in json.dumps(projection)


def test_a_screen_question_that_asks_for_a_secret_is_left_to_a_person() -> None:
    """A question whose own words ask for a secret is answerable by nobody but the person at
    the pane: its excerpt is withheld, and its answer must never be relayed either."""

    def asking(text: str) -> TerminalSnapshot:
        question = QuestionView(
            prompt=text,
            response_kind=ResponseKind.SINGLE_SELECT,
            options=(
                OptionView("Use the saved one", OptionRole.CHOICE, 1, current=True),
                OptionView("Type something.", OptionRole.FREE_TEXT, 2),
            ),
            header="Key",
        )
        region = Region(top=0, bottom=1, left=0, right=1)
        prompt = PromptView(InteractionKind.QUESTIONNAIRE, StepKind.SINGLE_SELECT,
                            (question,), region)  # fmt: skip
        return snapshot_with(prompt)

    for text in ("Enter your API key:", "Please enter the password for the staging database:"):
        shown = project_snapshot(asking(text), IDS, turn_id="t")
        assert shown is not None and not shown.actionable, text
        assert shown.projection["manual_reason"] == "secret_input"
        assert shown.projection["questions"] == []
    shown = project_snapshot(asking("Which API key should I use?"), IDS, turn_id="t")
    assert shown is not None and shown.actionable
    assert shown.projection["state"] == "pending"


REVIEWS = sorted(corpus.ROOT.glob("claude/*/questionnaire_multi_question-review.json"))


@pytest.mark.parametrize("path", REVIEWS, ids=corpus.name)
def test_a_review_lists_the_questions_it_shows_answered(path: Path) -> None:
    _, observation = corpus.observed(path)
    assert observation.prompt is not None and observation.prompt.step is StepKind.REVIEW
    assert observation.prompt.reviewed == (
        "Which color do you prefer?",
        "Which size should the widget be?",
        "Which shape should it have?",
    )


def test_a_review_of_a_secret_question_is_left_to_a_person() -> None:
    """A review lists the answers: a person's typed key among them is never shown, and the
    person submits it."""
    review = QuestionView(
        prompt="Review your answers",
        response_kind=ResponseKind.CONFIRM,
        options=(
            OptionView("Submit answers", OptionRole.SUBMIT, 1, current=True),
            OptionView("Cancel", OptionRole.CANCEL, 2),
        ),
    )
    region = Region(top=0, bottom=1, left=0, right=1)
    for reviewed, manual in (
        (("Which color do you prefer?", "Enter your API key:"), True),
        (("Which color do you prefer?", "Which API key should I use?"), False),
    ):
        prompt = PromptView(InteractionKind.CONFIRMATION, StepKind.REVIEW, (review,), region,
                            reviewed=reviewed)  # fmt: skip
        shown = project_snapshot(snapshot_with(prompt), IDS, turn_id="t")
        assert shown is not None and shown.actionable is not manual, reviewed
        assert (shown.projection.get("manual_reason") == "secret_input") is manual


def test_a_reason_that_quotes_the_screen_is_redacted_wherever_it_is_shown() -> None:
    """A profile's reason may quote a row of the screen (a permission's title): the
    terminal's row and the manual projection show it redacted."""
    key = "ghp_Zx8Qw2Er5Ty7Ui9OpAs3Df6GhJk1Lz4Xc7V"
    quoting = snapshot_with(permission("Run it?"))
    quoting = attrs.evolve(
        quoting,
        observation=attrs.evolve(quoting.observation, reason=f"unknown title: export T={key}"),
    )
    shown = project_snapshot(quoting, IDS, turn_id="t")
    assert shown is not None
    row = terminal_row(quoting)
    for said in (shown.projection["reason"], row["observation"]["reason"]):
        assert said == f"unknown title: export T={MASK}"
