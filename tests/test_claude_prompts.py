"""Headless Claude's control requests as interactions, on the requests 2.1.263 and 2.1.332 sent.

The fixtures (fixtures/claude_headless/) hold each can_use_tool request as it
arrived, the response the capture run sent back, and what the model server then
received: the answer built here must be exactly that response, so what reached
the model is what AKK sends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from akk.backends.claude_headless import prompts
from akk.backends.claude_headless.prompts import HeadlessPrompt
from akk.profiles.observation import InteractionKind
from akk.profiles.permission import FILE_SHOWN_MAX
from akk.protocol.errors import Reason, RpcError
from akk.screen.fingerprint import IdMinter

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_headless"
VERSIONS = sorted(p.parent.name for p in FIXTURES.glob("*/bash_allow.json"))
IDS = IdMinter(b"k" * 32)


def _fixture(version: str, case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / version / f"{case}.json").read_text())
    return data


def _prompt(version: str, case: str, generation: int = 1) -> tuple[HeadlessPrompt, dict[str, Any]]:
    meta = _fixture(version, case)
    (control,) = meta["control_requests"]
    prompt = prompts.prompt_of(
        control["request_id"], control["request"], generation=generation, ids=IDS, turn_id="t1"
    )
    return prompt, meta


def _option_ids(prompt: HeadlessPrompt, question: int) -> list[str]:
    return [o["option_id"] for o in prompt.projection["questions"][question]["options"]]


def _single(prompt: HeadlessPrompt, question: int, row: int) -> dict[str, Any]:
    return {
        "question_id": prompt.projection["questions"][question]["question_id"],
        "response_kind": "single_select",
        "selected_option_ids": [_option_ids(prompt, question)[row]],
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_bash_is_a_one_time_permission_answered_as_the_lab_proved(version: str) -> None:
    prompt, meta = _prompt(version, "bash_allow")
    shown = prompt.projection
    assert (prompt.kind, shown["kind"], shown["state"], shown["agent"]) == (
        InteractionKind.PERMISSION,
        "permission",
        "pending",
        "claude",
    )
    assert shown["decisions"] == ["approve_once", "reject"]
    (question,) = shown["questions"]
    command = meta["control_requests"][0]["request"]["input"]["command"]
    assert (question["header"], question["prompt"], question["detail"]) == (
        "Bash",
        "Create the lab marker file",
        command,
    )
    assert [o["role"] for o in question["options"]] == ["approve_once", "reject"]
    assert "permission_suggestions" not in json.dumps(shown)
    assert prompts.decision_response(prompt, "approve_once") == meta["responses_sent"][0]
    # The lab run that sent it: the command ran once, its output reached the model.
    assert [r["newest_input"] for r in meta["model_requests"]][1] == "lab-bash-ran"


@pytest.mark.parametrize("version", VERSIONS)
def test_reject_is_a_deny_whose_message_reaches_the_model(version: str) -> None:
    prompt, meta = _prompt(version, "bash_deny")
    assert prompts.decision_response(prompt, "reject") == {
        "behavior": "deny",
        "message": prompts.REJECTED,
    }
    sent = meta["responses_sent"][0]
    assert sent["behavior"] == "deny"
    # What the capture's deny said came back to the model as the tool's result.
    assert meta["model_requests"][1]["newest_input"] == sent["message"]


def test_a_decision_outside_the_two_is_refused() -> None:
    prompt, _ = _prompt("2.1.332", "bash_allow")
    for decision in ("approve_always", "approve", ""):
        with pytest.raises(RpcError) as refused:
            prompts.decision_response(prompt, decision)
        assert refused.value.reason is Reason.INVALID_PARAMS


@pytest.mark.parametrize("version", VERSIONS)
def test_three_questions_are_one_batch_answered_with_their_labels(version: str) -> None:
    prompt, meta = _prompt(version, "ask_three")
    shown = prompt.projection
    assert (shown["kind"], shown["capabilities"]) == (
        "questionnaire",
        {"batch_response": True, "free_text": True, "multi_select": False},
    )
    assert [q["header"] for q in shown["questions"]] == ["Color", "Size", "Shape"]
    assert [q["response_kind"] for q in shown["questions"]] == ["single_select"] * 3
    answers = [_single(prompt, 0, 1), _single(prompt, 1, 1), _single(prompt, 2, 1)]
    assert prompts.answers_response(prompt, answers, IDS) == meta["responses_sent"][0]
    got = meta["model_requests"][1]["newest_input"]
    for pair in ('"Which color do you prefer?"="Blue"', '"Which shape should it have?"="Square"'):
        assert pair in got
    # Any order of the answers builds the same response.
    assert prompts.answers_response(prompt, answers[::-1], IDS) == meta["responses_sent"][0]


@pytest.mark.parametrize("version", VERSIONS)
def test_multi_select_joins_the_labels_in_option_order(version: str) -> None:
    prompt, meta = _prompt(version, "ask_multi")
    (question,) = prompt.projection["questions"]
    assert question["response_kind"] == "multi_select"
    assert prompt.projection["capabilities"]["multi_select"] is True
    ids = _option_ids(prompt, 0)
    answer = {
        "question_id": question["question_id"],
        "response_kind": "multi_select",
        "selected_option_ids": [ids[2], ids[0]],
    }
    assert prompts.answers_response(prompt, [answer], IDS) == meta["responses_sent"][0]
    assert '="Red, Green"' in meta["model_requests"][1]["newest_input"]


@pytest.mark.parametrize("version", VERSIONS)
def test_free_text_goes_back_as_the_answer_itself(version: str) -> None:
    prompt, meta = _prompt(version, "ask_free")
    (question,) = prompt.projection["questions"]
    assert question["free_text"] is True
    answer = {
        "question_id": question["question_id"],
        "response_kind": "free_text",
        "text": "Magenta, please",
    }
    assert prompts.answers_response(prompt, [answer], IDS) == meta["responses_sent"][0]
    assert '="Magenta, please"' in meta["model_requests"][1]["newest_input"]


def test_ids_change_with_the_request_and_the_process() -> None:
    prompt, meta = _prompt("2.1.332", "ask_three")
    again, _ = _prompt("2.1.332", "ask_three")
    assert again.projection == prompt.projection
    other_process, _ = _prompt("2.1.332", "ask_three", generation=2)
    assert other_process.interaction_id != prompt.interaction_id
    control = meta["control_requests"][0]
    other_request = prompts.prompt_of(
        "another-id", control["request"], generation=1, ids=IDS, turn_id="t1"
    )
    assert other_request.interaction_id != prompt.interaction_id
    assert (
        other_request.projection["questions"][0]["question_id"]
        != (prompt.projection["questions"][0]["question_id"])
    )


def _refused(prompt: HeadlessPrompt, answers: list[dict[str, Any]]) -> RpcError:
    with pytest.raises(RpcError) as refused:
        prompts.answers_response(prompt, answers, IDS)
    return refused.value


def test_bad_answers_are_refused_with_a_reason_and_build_nothing() -> None:
    prompt, _ = _prompt("2.1.332", "ask_three")
    rest = [_single(prompt, 1, 0), _single(prompt, 2, 0)]
    first = prompt.projection["questions"][0]["question_id"]
    cases: list[list[dict[str, Any]]] = [
        rest,  # a question unanswered
        [_single(prompt, 0, 0), _single(prompt, 0, 1), *rest],  # one answered twice
        [{**_single(prompt, 0, 0), "question_id": "q_nope"}, *rest],
        [{**_single(prompt, 0, 0), "selected_option_ids": ["opt_nope"]}, *rest],
        [{**_single(prompt, 0, 0), "selected_option_ids": _option_ids(prompt, 0)[:2]}, *rest],
        [{**_single(prompt, 0, 0), "selected_option_ids": []}, *rest],
        [{**_single(prompt, 0, 0), "response_kind": "multi_select"}, *rest],
        # another question's option
        [{**_single(prompt, 0, 0), "selected_option_ids": _option_ids(prompt, 1)[:1]}, *rest],
        [{"question_id": first, "response_kind": "free_text", "text": "   "}, *rest],
        [{"question_id": first, "response_kind": "free_text", "text": "x" * 10_001}, *rest],
        [{"question_id": first, "response_kind": "free_text", "text": "bell\x07"}, *rest],
        [{"question_id": first, "response_kind": "free_text"}, *rest],
    ]
    for answers in cases:
        refused = _refused(prompt, answers)
        assert refused.reason is Reason.INVALID_PARAMS, answers
        assert refused.message
    assert prompts.answers_response(prompt, [_single(prompt, 0, 0), *rest], IDS)["behavior"] == (
        "allow"
    )


def test_multi_select_refuses_a_repeated_option() -> None:
    prompt, _ = _prompt("2.1.263", "ask_multi")
    ids = _option_ids(prompt, 0)
    question = prompt.projection["questions"][0]["question_id"]
    answer = {
        "question_id": question,
        "response_kind": "multi_select",
        "selected_option_ids": [ids[1], ids[1]],
    }
    assert _refused(prompt, [answer]).reason is Reason.INVALID_PARAMS


def test_the_wrong_call_for_the_kind_is_refused() -> None:
    permission, _ = _prompt("2.1.332", "bash_allow")
    questionnaire, _ = _prompt("2.1.332", "ask_multi")
    with pytest.raises(RpcError) as as_answers:
        prompts.answers_response(permission, [], IDS)
    with pytest.raises(RpcError) as as_decision:
        prompts.decision_response(questionnaire, "approve_once")
    assert as_answers.value.reason is as_decision.value.reason is Reason.INVALID_PARAMS


def _request(tool: str, tool_input: object, subtype: str = "can_use_tool") -> dict[str, Any]:
    return {"subtype": subtype, "tool_name": tool, "input": tool_input, "tool_use_id": "toolu_1"}


def _question(text: str, labels: list[str], multi: bool = False) -> dict[str, Any]:
    return {
        "question": text,
        "header": "H",
        "multiSelect": multi,
        "options": [{"label": label, "description": ""} for label in labels],
    }


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (_request("ExitPlanMode", {"plan": "do it"}), "plan_approval"),
        ({"subtype": "hook_callback", "callback_id": "x"}, "unsupported_request: hook_callback"),
        (_request("Bash", "not an object"), "unsupported_request: can_use_tool"),
        (_request("AskUserQuestion", {"questions": []}), "unreadable_questions"),
        (_request("AskUserQuestion", {"questions": [{"question": "Q?"}]}), "unreadable_questions"),
        (
            _request(
                "AskUserQuestion", {"questions": [_question("Q?", ["a"]), _question("Q?", ["b"])]}
            ),
            "repeated_question",
        ),
        (
            _request(
                "AskUserQuestion", {"questions": [_question("Q?", ["a, b", "c"], multi=True)]}
            ),
            "ambiguous_label",
        ),
        (
            _request(
                "AskUserQuestion",
                {"questions": [_question("Q?", ["a"]), _question("Enter your API key:", ["b"])]},
            ),
            "secret_input",
        ),
    ],
)
def test_what_akk_cannot_answer_exactly_is_manual(request_: dict[str, Any], reason: str) -> None:
    prompt = prompts.prompt_of("r1", request_, generation=1, ids=IDS, turn_id=None)
    assert not prompt.actionable
    assert (prompt.projection["state"], prompt.projection["manual_reason"]) == (
        "manual_required",
        reason,
    )
    with pytest.raises(RpcError) as refused:
        if prompt.kind is InteractionKind.PERMISSION:
            prompts.decision_response(prompt, "approve_once")
        else:
            prompts.answers_response(prompt, [], IDS)
    assert refused.value.reason in (Reason.MANUAL_REQUIRED, Reason.INVALID_PARAMS)


def test_another_tool_is_a_permission_showing_its_input() -> None:
    fetch = {"url": "https://example.com/", "prompt": "the title"}
    prompt = prompts.prompt_of(
        "r1", _request("WebFetch", fetch), generation=1, ids=IDS, turn_id=None
    )
    assert prompt.kind is InteractionKind.PERMISSION and prompt.actionable
    (question,) = prompt.projection["questions"]
    assert (question["prompt"], json.loads(question["detail"])) == ("Allow WebFetch?", fetch)
    assert prompts.decision_response(prompt, "approve_once") == {
        "behavior": "allow",
        "updatedInput": fetch,
    }


@pytest.mark.parametrize(
    ("tool", "given", "detail"),
    [
        (
            "Write",
            {"file_path": "/p/notes.txt", "content": "a\tb  \nc\n"},
            "/p/notes.txt\n\na\tb  \nc\n",
        ),
        (
            "Edit",
            {"file_path": "/p/a.py", "old_string": "x = 1\ny = 2", "new_string": "x = 3"},
            "/p/a.py\n\n-x = 1\n-y = 2\n+x = 3",
        ),
        (
            "Edit",
            {"file_path": "a.py", "old_string": "x", "new_string": "y", "replace_all": True},
            "a.py\n\n-x\n+y\n\n(every occurrence)",
        ),
    ],
)
def test_a_file_s_permission_shows_its_change_as_a_terminal_s_does(
    tool: str, given: dict[str, object], detail: str
) -> None:
    """The path, then the content or the removed and added lines, exactly, whole up to
    FILE_SHOWN_MAX: a file of 10,000 characters is approved as any short one."""
    prompt = prompts.prompt_of("r1", _request(tool, given), generation=1, ids=IDS, turn_id=None)
    (question,) = prompt.projection["questions"]
    assert question["detail"] == detail
    assert prompt.projection["decisions"] == ["approve_once", "reject"]
    assert prompts.decision_response(prompt, "approve_once")["updatedInput"] == given
    long = {"file_path": "/p/notes.txt", "content": "line\n" * 2_000}
    prompt = prompts.prompt_of("r1", _request("Write", long), generation=1, ids=IDS, turn_id=None)
    assert prompt.projection["questions"][0]["detail"] == f"/p/notes.txt\n\n{long['content']}"
    assert prompt.projection["decisions"] == ["approve_once", "reject"]


def test_texts_are_redacted_but_the_approved_input_is_unchanged() -> None:
    key = "sk-ant-api03-" + "a1B2c3D4e5" * 6
    command = f'curl -H "x-api-key: {key}" http://127.0.0.1/'
    prompt = prompts.prompt_of(
        "r1",
        {**_request("Bash", {"command": command}), "description": f"Send {key}"},
        generation=1,
        ids=IDS,
        turn_id=None,
    )
    assert key not in json.dumps(prompt.projection)
    assert prompts.decision_response(prompt, "approve_once")["updatedInput"]["command"] == command


def test_a_manual_prompt_offers_no_answerable_ids() -> None:
    plan = prompts.prompt_of(
        "r1", _request("ExitPlanMode", {"plan": "do it"}), generation=1, ids=IDS, turn_id=None
    )
    repeated = prompts.prompt_of(
        "r2",
        _request(
            "AskUserQuestion", {"questions": [_question("Q?", ["a"]), _question("Q?", ["b"])]}
        ),
        generation=1,
        ids=IDS,
        turn_id=None,
    )
    for prompt in (plan, repeated):
        assert prompt.projection["questions"] == []
        assert "decisions" not in prompt.projection


def test_every_field_a_bash_approval_carries_is_shown_beside_its_command() -> None:
    """approve_once sends the input back whole, so the detail shows every field of it: the
    command, then the other fields as JSON (the sandbox flag included); the approval sends
    exactly that input."""
    bash = {"command": "ls", "dangerouslyDisableSandbox": True, "run_in_background": True}
    request = {**_request("Bash", bash), "description": "list files"}
    prompt = prompts.prompt_of("r1", request, generation=1, ids=IDS, turn_id=None)
    (question,) = prompt.projection["questions"]
    command, fields = question["detail"].split("\n\n")
    assert command == "ls"
    assert json.loads(fields) == {"dangerouslyDisableSandbox": True, "run_in_background": True}
    assert prompt.projection["decisions"] == ["approve_once", "reject"]
    sent = prompts.decision_response(prompt, "approve_once")
    assert sent == {"behavior": "allow", "updatedInput": bash}


def test_a_long_command_is_cut_but_the_fields_after_it_stay_whole() -> None:
    command = "echo " + "lab " * 5_000
    bash = {"command": command, "dangerouslyDisableSandbox": True}
    prompt = prompts.prompt_of("r1", _request("Bash", bash), generation=1, ids=IDS, turn_id=None)
    (question,) = prompt.projection["questions"]
    head, fields = question["detail"].split("\n\n")
    assert head.startswith("echo lab") and f"{len(command):,} characters in all" in head
    assert json.loads(fields) == {"dangerouslyDisableSandbox": True}
    assert prompt.projection["decisions"] == ["reject"]  # its tail is not seen
    with pytest.raises(RpcError, match="does not show whole"):
        prompts.decision_response(prompt, "approve_once")


def test_the_request_s_own_description_is_not_shown_twice_but_another_is() -> None:
    same = {**_request("Bash", {"command": "ls", "description": "list"}), "description": "list"}
    other = {**_request("Bash", {"command": "ls", "description": "quiet"}), "description": "list"}
    shown = [
        prompts.prompt_of("r1", r, generation=1, ids=IDS, turn_id=None).projection["questions"][0]
        for r in (same, other)
    ]
    assert [q["detail"] for q in shown] == ["ls", 'ls\n\n{"description": "quiet"}']


def test_fields_too_long_to_show_whole_offer_reject_only() -> None:
    bash = {"command": "ls", "env": "x" * 2_000, "dangerouslyDisableSandbox": True}
    prompt = prompts.prompt_of("r1", _request("Bash", bash), generation=1, ids=IDS, turn_id=None)
    assert prompt.projection["decisions"] == ["reject"]
    (question,) = prompt.projection["questions"]
    assert [o["role"] for o in question["options"]] == ["reject"]
    with pytest.raises(RpcError, match="offers reject only") as refused:
        prompts.decision_response(prompt, "approve_once")
    assert refused.value.reason is Reason.INVALID_PARAMS
    assert prompts.decision_response(prompt, "reject")["behavior"] == "deny"


def test_a_long_input_of_another_tool_shows_its_other_fields_whole() -> None:
    """As JSON, a long field before the path would cut the path off: the longest field is
    shown by its head, every other whole; unseen in part, it may only be rejected."""
    # (Past FILE_SHOWN_MAX, a Write is shown as any other input.)
    write = {"content": "line\n" * (FILE_SHOWN_MAX // 5 + 1), "file_path": "/etc/cron.d/job"}
    prompt = prompts.prompt_of("r1", _request("Write", write), generation=1, ids=IDS, turn_id=None)
    (question,) = prompt.projection["questions"]
    label, *_, fields = question["detail"].split("\n\n")
    assert label.startswith('"content":\nline\nline')
    assert json.loads(fields) == {"file_path": "/etc/cron.d/job"}
    assert prompt.projection["decisions"] == ["reject"]  # the content's tail is not seen
    with pytest.raises(RpcError, match="does not show whole"):
        prompts.decision_response(prompt, "approve_once")
