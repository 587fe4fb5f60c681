"""App-server requests as interactions (akk.backends.codex_app_server.prompts).

Projection, decisions, answers.

The request shapes are the ones the real app-server sent in the lab (0.154.0 and
0.169.0): `item/commandExecution/requestApproval` with `availableDecisions`, and
`item/tool/requestUserInput` with three questions.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akk.backends.codex_app_server import prompts as codex
from akk.backends.codex_app_server.prompts import (
    answers_result,
    decision_result,
    fingerprint,
    prompt_of,
)
from akk.backends.codex_app_server.rpc import ServerRequest
from akk.protocol.errors import Reason, RpcError
from akk.protocol.redaction import MASK
from akk.screen.fingerprint import IdMinter

IDS = IdMinter(b"k" * 32)
KEY = "ghp_" + "Zx9Qm3Lp7Rt2Vb8Nc1Kd" * 2

EXEC: dict[str, Any] = {
    "kind": "command",
    "threadId": "thr",
    "turnId": "trn",
    "itemId": "call_lab_0",
    "startedAtMs": 1796051729208,
    "reason": "The lab scenario needs to run this command outside the sandbox.",
    "command": "/bin/bash -lc 'touch ../lab-exec-ran.txt && echo lab-exec-ran'",
    "cwd": "/tmp/work",
    "proposedExecpolicyAmendment": ["touch", "../lab-exec-ran.txt"],
    "availableDecisions": [
        "accept",
        {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "x"]}},
        "cancel",
    ],
}


def _question(qid: str, header: str, labels: list[str], **more: Any) -> dict[str, Any]:
    options = [{"label": label, "description": f"about {label}"} for label in labels]
    return {"id": qid, "header": header, "question": f"{header}?", "isOther": True,
            "isSecret": False, "options": options, **more}  # fmt: skip


QUESTIONS: dict[str, Any] = {
    "threadId": "thr",
    "turnId": "trn",
    "itemId": "call_lab_0",
    "isBlocking": False,
    "questions": [
        _question("q1", "Color", ["Red", "Blue", "Green"]),
        _question("q2", "Size", ["Small", "Large"]),
    ],
}


UPDATE: dict[str, Any] = {
    "path": "/tmp/work/notes.txt",
    "kind": {"type": "update", "move_path": None},
    "diff": "@@ -1 +1 @@\n-draft\n+final\n",
}
"""One change of a fileChange item (FileUpdateChange, as every pinned version sends it)."""


def _prompt(method: str, params: dict[str, Any], request_id: int = 7, generation: int = 1) -> Any:
    request = ServerRequest(request_id, method, params)
    return prompt_of(request, generation=generation, ids=IDS, turn_id="turn_x")


def test_an_exec_request_offers_only_its_listed_one_time_decisions() -> None:
    prompt = _prompt("item/commandExecution/requestApproval", EXEC)
    shown = prompt.projection
    assert shown["kind"] == "permission" and shown["agent"] == "codex"
    assert shown["decisions"] == ["approve_once", "reject"]
    (question,) = shown["questions"]
    assert question["detail"] == EXEC["command"]
    assert [o["role"] for o in question["options"]] == ["approve_once", "reject"]
    assert decision_result(prompt, "approve_once") == {"decision": "accept"}
    # `decline` is not listed: reject is the listed `cancel`, never the amendment.
    assert decision_result(prompt, "reject") == {"decision": "cancel"}
    text = repr(shown)
    assert "Amendment" not in text and "availableDecisions" not in text


def test_decline_is_preferred_and_a_request_with_no_one_time_decision_is_manual() -> None:
    declinable = _prompt(
        "item/commandExecution/requestApproval", EXEC | {"availableDecisions": ["decline"]}
    )
    assert declinable.projection["decisions"] == ["reject"]
    assert decision_result(declinable, "reject") == {"decision": "decline"}
    with pytest.raises(RpcError) as refused:
        decision_result(declinable, "approve_once")
    assert refused.value.reason.value == "manual_required"
    persistent = _prompt(
        "item/commandExecution/requestApproval",
        EXEC | {"availableDecisions": ["acceptForSession", {"applyNetworkPolicyAmendment": {}}]},
    )
    manual = persistent.projection
    assert manual["state"] == "manual_required" and manual["reason"] == "no_one_time_decision"
    assert "decisions" not in manual and manual["questions"] == []  # nothing to answer with
    assert not persistent.actionable


def test_a_file_change_request_without_the_list_gets_the_one_time_decisions() -> None:
    params = {"threadId": "thr", "turnId": "trn", "itemId": "i", "startedAtMs": 1,
              "reason": "write the file"}  # fmt: skip
    request = ServerRequest(7, "item/fileChange/requestApproval", params)
    changes = codex.file_changes([UPDATE])
    prompt = prompt_of(request, generation=1, ids=IDS, turn_id="turn_x", changes=changes)
    assert decision_result(prompt, "approve_once") == {"decision": "accept"}
    assert decision_result(prompt, "reject") == {"decision": "decline"}


def test_questions_are_answered_together_by_their_ids() -> None:
    prompt = _prompt("item/tool/requestUserInput", QUESTIONS)
    shown = prompt.projection
    assert shown["capabilities"]["batch_response"] is True
    color, size = shown["questions"]
    blue = next(o for o in color["options"] if o["label"] == "Blue")
    answers = [
        {"question_id": color["question_id"], "response_kind": "single_select",
         "selected_option_ids": [blue["option_id"]]},
        {"question_id": size["question_id"], "response_kind": "free_text", "text": "Medium"},
    ]  # fmt: skip
    assert answers_result(prompt, answers, IDS) == {
        "answers": {"q1": {"answers": ["Blue"]}, "q2": {"answers": ["Medium"]}}
    }
    for wrong in (answers[:1], [*answers, answers[0]], [answers[0] | {"question_id": "q_x"}]):
        with pytest.raises(RpcError) as refused:
            answers_result(prompt, wrong, IDS)
        assert refused.value.reason.value == "invalid_params"


def test_a_secret_question_is_never_answered() -> None:
    params = QUESTIONS | {"questions": [_question("q1", "Token", [], isSecret=True)]}
    prompt = _prompt("item/tool/requestUserInput", params)
    assert prompt.projection["state"] == "manual_required"
    assert prompt.projection["reason"] == prompt.projection["manual_reason"] == "secret_input"
    assert prompt.projection["questions"] == []  # no id to answer with, and no question text
    # Even the question's id (minted as an answerable one would be) is refused.
    answer = {"question_id": IDS.question_id(prompt.seen, 0), "response_kind": "free_text",
              "text": "s"}  # fmt: skip
    with pytest.raises(RpcError) as refused:
        answers_result(prompt, [answer], IDS)
    assert refused.value.reason.value == "manual_required"


def test_a_question_that_asks_for_a_secret_is_a_person_s_even_unflagged() -> None:
    # A question's own words ask for a key: the same rule as a screen's prompt row.
    asking = _question("q2", "Key", ["Skip"]) | {"question": "Enter your API key:"}
    prompt = _prompt("item/tool/requestUserInput", QUESTIONS | {"questions": [asking]})
    assert (prompt.projection["state"], prompt.projection["reason"]) == (
        "manual_required",
        "secret_input",
    )
    naming = _question("q2", "Key", ["Skip"]) | {"question": "Which API key should I use?"}
    prompt = _prompt("item/tool/requestUserInput", QUESTIONS | {"questions": [naming]})
    assert prompt.projection["state"] == "pending"


def test_an_async_question_that_asks_for_a_secret_offers_no_way_to_answer() -> None:
    for title, manual in (("What is your API key?", True), ("Which color?", False)):
        question = codex.AsyncQuestion("thr", "trn", "item", ((title, ("Skip", "Later")),))
        prompt = codex.async_prompt_of(question, generation=1, ids=IDS, turn_id="t", running=True)
        assert prompt.projection["kind"] == "async_question"
        assert (prompt.projection.get("manual_reason") == "secret_input") is manual, title
        assert ("delivery_modes" in prompt.projection) is not manual, prompt.projection


def test_an_unknown_request_is_projected_manual_required() -> None:
    prompt = _prompt("mcpServer/elicitation/request", {"threadId": "thr", "turnId": "trn"})
    assert prompt.projection["state"] == "manual_required"
    assert prompt.projection["manual_reason"].startswith("unsupported_request")
    with pytest.raises(RpcError):
        decision_result(prompt, "approve_once")


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _paths(v, (*path, i))]
    return [path]


LEAVES = _paths(EXEC)


@given(st.sampled_from(LEAVES), st.text(min_size=1, max_size=5))
def test_any_change_to_a_request_changes_its_fingerprint_and_ids(
    path: tuple[Any, ...], suffix: str
) -> None:
    changed = copy.deepcopy(EXEC)
    node: Any = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = f"{node[path[-1]]}{suffix}"
    method = "item/commandExecution/requestApproval"
    before, after = _prompt(method, EXEC), _prompt(method, changed)
    assert before.seen.fingerprint != after.seen.fingerprint
    assert before.interaction_id != after.interaction_id


def test_the_same_request_in_another_process_or_with_another_id_is_another_interaction() -> None:
    method = "item/commandExecution/requestApproval"
    base = _prompt(method, EXEC)
    assert _prompt(method, EXEC).interaction_id == base.interaction_id
    assert _prompt(method, EXEC, request_id=8).interaction_id != base.interaction_id
    assert _prompt(method, EXEC, generation=2).interaction_id != base.interaction_id
    assert fingerprint(ServerRequest(7, method, EXEC), 1) == base.seen.fingerprint


COMMAND = "item/commandExecution/requestApproval"
BASE: dict[str, Any] = {"threadId": "thr", "turnId": "trn", "itemId": "i", "startedAtMs": 1}


@pytest.mark.parametrize(
    ("params", "detail", "refusal"),
    [
        # A network approval has no command: its host is what the controller approves.
        (BASE | {"command": None,
                 "networkApprovalContext": {"host": "api.example.net", "protocol": "https"}},
         "network access to api.example.net (https)", None),
        (BASE | {"command": "curl https://api.example.net",
                 "networkApprovalContext": {"host": "api.example.net", "protocol": "https"}},
         "network access to api.example.net (https)\ncurl https://api.example.net", None),
        # Input to a running command: the request does not carry the input.
        (BASE | {"command": None, "kind": "writeStdin"}, None, "the input is not in the request"),
        (BASE | {"command": "python", "kind": "writeStdin"}, "python",
         "the input is not in the request"),
        (BASE | {"command": "ls", "kind": "humanCommand"}, "ls", "of a kind AKK does not know"),
        (BASE | {"command": None}, None, "shows nothing to approve"),
        (BASE | {"command": ""}, None, "shows nothing to approve"),
        # A host that does not show whole (unreadable, cut, or redacted) is not approvable.
        (BASE | {"command": None, "networkApprovalContext": {"protocol": "https"}}, None,
         "does not show whole"),
        (BASE | {"command": "ls", "networkApprovalContext": {"host": "h" * 3_000}},
         f"network access to {'h' * 1_982}…[cut: 3,021 characters in all]",
         "does not show whole"),
        (BASE | {"command": "ls", "networkApprovalContext": {"host": KEY + ".example.net"}},
         f"network access to {MASK}.example.net\nls", "does not show whole"),
    ],
)  # fmt: skip
def test_a_command_approval_offers_approve_only_for_what_it_shows(
    params: dict[str, Any], detail: str | None, refusal: str | None
) -> None:
    prompt = codex.prompt_of(ServerRequest(5, COMMAND, params), generation=1, ids=IDS, turn_id="t")
    (question,) = prompt.projection["questions"]
    assert question.get("detail") == detail
    assert codex.decision_result(prompt, "reject") == {"decision": "decline"}
    if refusal is None:
        assert prompt.projection["decisions"] == ["approve_once", "reject"]
        assert codex.decision_result(prompt, "approve_once") == {"decision": "accept"}
        return
    assert prompt.projection["state"] == "pending" and prompt.projection["decisions"] == ["reject"]
    assert [option["role"] for option in question["options"]] == ["reject"]
    with pytest.raises(RpcError, match=refusal) as refused:
        codex.decision_result(prompt, "approve_once")
    assert refused.value.reason is Reason.INVALID_PARAMS
    assert "offers reject only" in refused.value.message


def test_a_network_or_stdin_approval_says_what_it_asks() -> None:
    network = BASE | {"command": None, "networkApprovalContext": {"host": "h", "protocol": "http"}}
    stdin = BASE | {"command": None, "kind": "writeStdin"}
    asked = [
        codex.prompt_of(
            ServerRequest(5, COMMAND, p), generation=1, ids=IDS, turn_id="t"
        ).projection["questions"][0]["prompt"]
        for p in (network, stdin, stdin | {"reason": "feed the REPL"})
    ]
    assert asked == ["Allow this network access?", "Write input to a running command?",
                     "feed the REPL"]  # fmt: skip


def test_a_file_change_granting_a_root_for_the_session_offers_reject_only() -> None:
    """`grantRoot` asks to write under that root for the rest of the session: its accept is a
    persistent grant. Reject (decline, once) stays, so the turn can go on without it."""
    params = BASE | {"grantRoot": "/", "reason": "write outside the workspace"}
    prompt = codex.prompt_of(
        ServerRequest(5, "item/fileChange/requestApproval", params), generation=1, ids=IDS,
        turn_id="t",
    )  # fmt: skip
    (question,) = prompt.projection["questions"]
    assert question["detail"] == "/" and prompt.projection["decisions"] == ["reject"]
    with pytest.raises(RpcError, match="persistent grant AKK never approves"):
        codex.decision_result(prompt, "approve_once")
    assert codex.decision_result(prompt, "reject") == {"decision": "decline"}


@pytest.mark.parametrize("ids", [["q1", "q1"], ["q1", None], ["1", 1]])
def test_questions_whose_ids_repeat_are_for_a_person(ids: list[Any]) -> None:
    """Answers go back keyed by question id: with an id repeated (or none, or not text), two
    answers would merge into one. As Claude's `repeated_question`."""
    questions = [
        {"id": qid, "header": f"H{n}", "question": f"Question {n}?", "options": [{"label": "A"}]}
        for n, qid in enumerate(ids)
    ]
    request = ServerRequest(7, codex.QUESTIONS, {"threadId": "thr", "questions": questions})
    prompt = codex.prompt_of(request, generation=1, ids=IDS, turn_id="t")
    assert prompt.projection["state"] == "manual_required"
    assert prompt.projection["manual_reason"] == "repeated_question"
    answers = [
        {"question_id": q["question_id"], "response_kind": "single_select",
         "selected_option_ids": [q["options"][0]["option_id"]]}
        for q in prompt.projection["questions"]
    ]  # fmt: skip
    with pytest.raises(RpcError) as refused:
        codex.answers_result(prompt, answers, IDS)
    assert refused.value.reason is Reason.MANUAL_REQUIRED


FILE_CHANGE = "item/fileChange/requestApproval"
ADD = {"path": "/tmp/work/new.txt", "kind": {"type": "add"}, "diff": "hello\n"}
MOVE = UPDATE | {"kind": {"type": "update", "move_path": "/tmp/work/final.txt"}}


@pytest.mark.parametrize(
    ("changes", "detail", "refusal"),
    [
        ([UPDATE], "update /tmp/work/notes.txt\n@@ -1 +1 @@\n-draft\n+final\n", None),
        ([ADD, {"path": "/tmp/work/old.txt", "kind": {"type": "delete"}, "diff": "bye\n"}],
         "add /tmp/work/new.txt\nhello\n\ndelete /tmp/work/old.txt\nbye\n", None),
        ([MOVE], "update /tmp/work/notes.txt (moved to /tmp/work/final.txt)\n"
                 "@@ -1 +1 @@\n-draft\n+final\n", None),
        # The item was never reported (or was forgotten): nothing to show.
        (None, None, "has not reported the changes"),
        ([], None, "the item lists no change"),
        # Cut: the whole is longer than `detail` shows.
        ([UPDATE | {"diff": "+x\n" * 1_000}], None, "longer than `detail` shows"),
        ([UPDATE] * 100, None, "longer than `detail` shows"),
        # Redacted: the controller would approve a key it never saw.
        ([UPDATE | {"diff": f"+token = {KEY}\n"}],
         f"update /tmp/work/notes.txt\n+token = {MASK}\n", "part of them is redacted"),
        # Shapes AKK does not know, and paths that would not read as one line.
        ([UPDATE | {"kind": "update"}], None, "a shape AKK does not know"),
        ([UPDATE | {"kind": {"type": "chmod"}}], None, "a shape AKK does not know"),
        ([ADD | {"kind": {"type": "add", "move_path": "/x"}}], None, "a shape AKK does not know"),
        ([UPDATE | {"diff": None}], None, "a shape AKK does not know"),
        ([UPDATE | {"path": "a.txt\nupdate b.txt"}], None, "a shape AKK does not know"),
        ([MOVE | {"kind": {"type": "update", "move_path": ""}}], None,
         "a shape AKK does not know"),
        ({"path": "a.txt"}, None, "a shape AKK does not know"),
    ],
)  # fmt: skip
def test_a_file_change_shows_its_changes_and_offers_approve_only_when_they_show_whole(
    changes: Any, detail: str | None, refusal: str | None
) -> None:
    """The request names its item and carries no changes: `detail` shows the item's, each
    path with its kind and diff, and approve_once is offered only if all of it shows."""
    known = None if changes is None else codex.file_changes(changes)
    request = ServerRequest(5, FILE_CHANGE, BASE)
    prompt = codex.prompt_of(request, generation=1, ids=IDS, turn_id="t", changes=known)
    (question,) = prompt.projection["questions"]
    assert question.get("detail") == detail
    assert question["prompt"] == "Apply these file changes?"
    assert codex.decision_result(prompt, "reject") == {"decision": "decline"}
    if refusal is None:
        assert prompt.projection["decisions"] == ["approve_once", "reject"]
        assert codex.decision_result(prompt, "approve_once") == {"decision": "accept"}
        return
    assert prompt.projection["state"] == "pending" and prompt.projection["decisions"] == ["reject"]
    assert [option["role"] for option in question["options"]] == ["reject"]
    with pytest.raises(RpcError, match=refusal) as refused:
        codex.decision_result(prompt, "approve_once")
    assert refused.value.reason is Reason.INVALID_PARAMS
    assert "offers reject only" in refused.value.message


def test_other_changes_to_the_same_request_are_another_interaction() -> None:
    """The fingerprint covers the item's changes: a controller's answer is fenced against the
    very changes it was shown, and the ids it saw no longer work once they change."""
    request = ServerRequest(5, FILE_CHANGE, BASE)

    def seen(changes: Any) -> Any:
        known = None if changes is None else codex.file_changes(changes)
        return codex.prompt_of(request, generation=1, ids=IDS, turn_id="t", changes=known)

    shown = [seen(None), seen([UPDATE]), seen([UPDATE | {"diff": "+other\n"}]), seen([MOVE])]
    assert len({p.seen.fingerprint for p in shown}) == len({p.interaction_id for p in shown}) == 4
    assert seen([UPDATE]).interaction_id == shown[1].interaction_id
    assert fingerprint(request, 1, codex.file_changes([UPDATE])) == shown[1].seen.fingerprint


def test_a_lone_surrogate_in_a_request_is_fingerprinted_not_a_crash() -> None:
    """JSON's "\\ud800" decodes to a lone surrogate, which UTF-8 cannot encode: the request
    is still fingerprinted (status shows it), as every other text is."""
    params = BASE | {"command": "echo \ud800", "reason": "\udfff"}
    prompt = codex.prompt_of(ServerRequest(5, COMMAND, params), generation=1, ids=IDS, turn_id="t")
    assert prompt.projection["kind"] == "permission"
    question = codex.AsyncQuestion("thr", "trn", "item", (("Pick \ud800?", ("A",)),))
    codex.async_fingerprint(question, 1)
