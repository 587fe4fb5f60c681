"""What an app-server server request asks, projected for controllers, and the answer to send.

Pure. A server request is the backend's prompt. It is fingerprinted over its
canonical content and ids (method, request id, params, and the process
generation that sent it), so the ids minted from it change whenever any of
those do, exactly as a screen prompt's ids change with its cells. The
projection has the same schema as a terminal's (PROTOCOL.md); ids are opaque,
labels presentation only, and raw wire values never appear.

Decisions: only what the request's `availableDecisions` lists is ever sent (a
request without the list: the version's one-time decisions), and never a
persistent one (`acceptForSession`, execpolicy or network amendments).
`approve_once` is `accept`; `reject` is `decline`, else `cancel`. A question
marked `isSecret` is `manual_required`: AKK never relays secret input.

A controller approves only what it was shown (`detail`): a command approval with
no command to show (input written to a running command, whose text the request
does not carry; a kind AKK does not know; nothing at all), one whose network host
does not show whole, a file change whose changes do not show whole, and a file
change that grants writes under a root for the rest of the session (`grantRoot`: a
persistent grant) offer `reject` only. A file change approval does not carry its
changes: they come in its fileChange item (`FileChanges`, which the board keeps),
and its fingerprint covers them, so an answer fenced against it approves those very
changes.
Questions whose ids repeat are `manual_required` (`repeated_question`): their
answers, keyed by id, could not say which is which.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from akk.backends.codex_app_server.rpc import ServerRequest
from akk.backends.questions import each_answer
from akk.profiles.observation import InteractionKind, OptionRole, ResponseKind
from akk.protocol.errors import Reason, RpcError
from akk.protocol.projection import (
    BACKEND_TEXT_MAX,
    as_manual,
    backend_option,
    backend_projection,
    backend_text,
    unseen,
    unseen_refusal,
    unshowable,
    within_frame,
)
from akk.protocol.redaction import asks_secret_question
from akk.protocol.text_check import check_text
from akk.screen.fingerprint import Appearance, IdMinter

COMMAND = "item/commandExecution/requestApproval"
FILE_CHANGE = "item/fileChange/requestApproval"
PERMISSIONS: Mapping[str, str] = {
    COMMAND: "Run this command?",
    FILE_CHANGE: "Apply these file changes?",
}
QUESTIONS = "item/tool/requestUserInput"

_STDIN = "writeStdin"
_ASKS: Mapping[str, str] = {_STDIN: "Write input to a running command?"}
_NETWORK_ASKS = "Allow this network access?"

_ONE_TIME = ("accept", "decline", "cancel")
"""Wire decisions that decide this request only; everything else persists."""


@attrs.frozen
class AsyncQuestion:
    """A question the agent left for later: an agentMessage item delivered `async`.

    It blocks nothing. While its turn runs, an answer joins that turn
    (`steer_current_turn`: turn/steer, fenced by the turn's id); once the turn
    ended, the answer starts the Turn's next round (`queue_next_turn`).
    """

    thread_id: str
    native_turn_id: str
    item_id: str
    questions: tuple[tuple[str, tuple[str, ...]], ...]
    """(title, option labels) of each question the item asks."""


@attrs.frozen
class FileChanges:
    """What one fileChange item proposes, kept as far as a controller may be shown it.

    A file change approval names its item (`itemId`) and carries no changes; the item
    does (item/started, item/fileChange/patchUpdated, item/completed). Only the bounded
    text is kept, never a diff of megabytes.
    """

    digest: str
    """SHA-256 of the changes as the app-server sent them: any change to them changes the
    fingerprint (so the ids) of the request that would apply them."""
    text: str | None
    """Each change, `kind path` over its diff (None: it cannot show whole, `why` says why)."""
    why: str | None = None


FILE_CHANGE_KINDS = frozenset({"add", "delete", "update"})
"""The `kind.type` of a change (PatchChangeKind on every pinned version)."""


def file_changes(changes: object) -> FileChanges:
    """The `FileChanges` of a fileChange item's ``changes`` (any JSON value).

    Text is kept only if every change has the pinned shape (a text path and diff, a
    known kind, a text `move_path` if any) and all of it fits `detail` whole; the
    digest is of whatever came.
    """
    canonical = json.dumps(changes, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    if not isinstance(changes, list):
        return FileChanges(digest, None, "changes of a shape AKK does not know")
    if not changes:
        return FileChanges(digest, None, "the item lists no change")
    limit, parts, length = BACKEND_TEXT_MAX["detail"], [], -1
    for change in changes:
        line = _change_line(change)
        if line is None:
            return FileChanges(digest, None, "a change of a shape AKK does not know")
        length += len(line) + 1 + len(change["diff"]) + 1  # and the newline before it
        if length > limit:
            return FileChanges(digest, None, f"longer than `detail` shows ({limit:,} characters)")
        parts.append(f"{line}\n{change['diff']}")
    return FileChanges(digest, "\n".join(parts))


def _change_line(change: object) -> str | None:
    """`kind path` (and where an update moves the file) of one change; None: not the
    pinned shape, or a path that would not read as one line (a control character)."""
    if not isinstance(change, dict):
        return None
    path, diff, kind = change.get("path"), change.get("diff"), change.get("kind")
    if not (_one_line(path) and isinstance(diff, str) and isinstance(kind, dict)):
        return None
    name, moved = kind.get("type"), kind.get("move_path")
    if name not in FILE_CHANGE_KINDS or not (moved is None or _one_line(moved)):
        return None
    if moved is not None and name != "update":
        return None
    return f"{name} {path}" + ("" if moved is None else f" (moved to {moved})")


def _one_line(value: object) -> bool:
    return isinstance(value, str) and value.isprintable() and bool(value)


@attrs.frozen
class BackendPrompt:
    """One server request as an interaction: its appearance, projection and wire facts."""

    request_id: int | str
    method: str
    kind: InteractionKind
    thread_id: str | None
    native_turn_id: str | None
    seen: Appearance
    projection: dict[str, Any]
    decisions: Mapping[str, str] = attrs.field(factory=dict)
    """Public decision -> the wire decision sent for it (available, one-time ones only)."""
    questions: tuple[Mapping[str, Any], ...] = ()
    running: bool = True
    """An async question's turn still runs (its answer can join it)."""
    unapprovable: str | None = None
    """Why `approve_once` is not offered though the request may list `accept`: the controller
    was not shown what it would approve, or it is a persistent grant (None: it is offered
    if listed). The refusal's message."""

    @property
    def interaction_id(self) -> str:
        return str(self.projection["interaction_id"])

    @property
    def actionable(self) -> bool:
        return "manual_reason" not in self.projection


def fingerprint(
    request: ServerRequest, generation: int, changes: FileChanges | None = None
) -> bytes:
    """SHA-256 of the request's canonical content and ids, and the process that sent it
    (and for a file change approval, of the changes its item showed: ``changes``)."""
    content = {"generation": generation, "id": request.id, "method": request.method,
               "params": request.params}  # fmt: skip
    if changes is not None:
        content["changes"] = changes.digest
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # A lone surrogate (JSON's "\\ud800") is text to the app-server: hashed, never a crash.
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()


def prompt_of(
    request: ServerRequest,
    *,
    generation: int,
    ids: IdMinter,
    turn_id: str | None,
    changes: FileChanges | None = None,
) -> BackendPrompt:
    """The interaction ``request`` is (any method: an unknown one is projected manual_required).

    ``changes``: for a file change approval, what its item proposes (None: not known)."""
    params = request.params if isinstance(request.params, dict) else {}
    seen = Appearance(fingerprint(request, generation, changes), generation)
    make = functools.partial(
        BackendPrompt,
        request_id=request.id,
        method=request.method,
        thread_id=_text(params.get("threadId")),
        native_turn_id=_text(params.get("turnId")),
        seen=seen,
    )
    if request.method in PERMISSIONS:
        projection, decisions, unapprovable = _permission(
            request.method, params, changes, seen, ids, turn_id
        )
        return make(
            kind=InteractionKind.PERMISSION,
            projection=projection,
            decisions=decisions,
            unapprovable=unapprovable,
        )
    if request.method == QUESTIONS:
        listed = params.get("questions")
        questions = (
            tuple(q for q in listed if isinstance(q, dict)) if isinstance(listed, list) else ()
        )
        projection = _questionnaire(questions, seen, ids, turn_id)
        if projection["state"] != "manual_required" and _repeated(questions):
            projection = as_manual(projection, "repeated_question")
        return make(kind=InteractionKind.QUESTIONNAIRE, projection=projection, questions=questions)
    projection = backend_projection(
        InteractionKind.CONFIRMATION, seen, ids, agent="codex", turn_id=turn_id, questions=[]
    )
    projection = as_manual(projection, f"unsupported_request: {request.method[:80]}")
    return make(kind=InteractionKind.CONFIRMATION, projection=projection)


def async_fingerprint(question: AsyncQuestion, generation: int) -> bytes:
    """SHA-256 of the async question's content and ids, and the process that reported it."""
    canonical = json.dumps(
        {"generation": generation, "item": question.item_id, "thread": question.thread_id,
         "turn": question.native_turn_id, "questions": question.questions},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )  # fmt: skip
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()


def async_prompt_of(
    question: AsyncQuestion,
    *,
    generation: int,
    ids: IdMinter,
    turn_id: str | None,
    running: bool,
) -> BackendPrompt:
    """The interaction an async question is: while its turn runs, and (another appearance,
    so other ids) once it ended."""
    seen = Appearance(async_fingerprint(question, generation), generation * 2 + (not running))
    asked = tuple(
        {"id": question.item_id, "header": "", "question": title,
         "options": [{"label": label} for label in labels]}
        for title, labels in question.questions
    )  # fmt: skip
    projection = _questionnaire(asked, seen, ids, turn_id)
    projection["kind"] = InteractionKind.ASYNC_QUESTION.value
    if "manual_reason" not in projection:  # a manual one (a secret) offers no way to answer
        projection |= {
            "delivery_modes": ["steer_current_turn", "queue_next_turn"],
            "capabilities": {"batch_response": False, "free_text": False, "multi_select": False},
        }
        for shown in projection["questions"]:
            shown["free_text"] = False
    if len(asked) != 1 or not asked[0]["options"]:
        projection = as_manual(projection, "unsupported_async_question")
    return BackendPrompt(
        request_id=question.item_id,
        method="async_question",
        kind=InteractionKind.ASYNC_QUESTION,
        thread_id=question.thread_id,
        native_turn_id=question.native_turn_id,
        seen=seen,
        projection=projection,
        questions=asked,
        running=running,
    )


def async_message(
    prompt: BackendPrompt, answers: Sequence[Mapping[str, Any]], ids: IdMinter
) -> str:
    """The user message an async answer is (as Codex's own picker sends it): the question
    quoted, a blank line, the chosen option."""
    if not prompt.actionable or len(prompt.questions) != 1:
        raise RpcError(
            Reason.MANUAL_REQUIRED,
            "AKK answers an async question with one single-select question only; answer this "
            "one in Codex",
        )
    question_id = ids.question_id(prompt.seen, 0)
    if len(answers) != 1 or answers[0].get("question_id") != question_id:
        raise RpcError(
            Reason.INVALID_PARAMS,
            "answers must hold exactly one answer, for the question_id status shows",
        )
    if answers[0].get("response_kind") != ResponseKind.SINGLE_SELECT.value:
        raise RpcError(Reason.INVALID_PARAMS, "an async question takes one option (single_select)")
    (label,) = _one(prompt, 0, answers[0], ids)
    title = str(prompt.questions[0].get("question"))
    message = "> " + title.replace("\n", "\n> ") + "\n\n" + label
    check_text(message, "the async answer (the question quoted, then the option)")
    return message


def decision_result(prompt: BackendPrompt, value: str) -> dict[str, Any]:
    """`approve {decision}`: the result to send, or RpcError (nothing sent)."""
    if prompt.kind is not InteractionKind.PERMISSION:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"the pending interaction is a {prompt.kind.value}, not a permission; answer it "
            "with respond_interaction",
        )
    wire = prompt.decisions.get(value)
    if wire is None and value == "approve_once" and prompt.unapprovable is not None:
        raise RpcError(Reason.INVALID_PARAMS, prompt.unapprovable)
    if wire is None:
        raise RpcError(
            Reason.MANUAL_REQUIRED,
            f"the app-server does not offer a one-time {value} for this request (it lists "
            f"{sorted(prompt.decisions) or 'no one-time decision'}); AKK sends nothing else",
        )
    return {"decision": wire}


def answers_result(
    prompt: BackendPrompt, answers: Sequence[Mapping[str, Any]], ids: IdMinter
) -> dict[str, Any]:
    """`respond_interaction {answers}` on a question request: one answer per question."""
    given = each_answer(
        prompt, answers, ids, lambda index, answer: _one(prompt, index, answer, ids)
    )
    wire = {str(prompt.questions[i].get("id")): {"answers": values} for i, values in given.items()}
    # A prompt whose ids repeat is manual (`_repeated`): `each_answer` refused it already.
    assert len(wire) == len(given), "answers of repeated question ids"
    return {"answers": wire}


def _one(prompt: BackendPrompt, index: int, answer: Mapping[str, Any], ids: IdMinter) -> list[str]:
    question = prompt.questions[index]
    options = _options(question)
    if answer.get("response_kind") == ResponseKind.FREE_TEXT.value:
        text = answer.get("text")
        if not (question.get("isOther") or not options) or not isinstance(text, str):
            raise RpcError(
                Reason.INVALID_PARAMS,
                "this question takes no free text; answer with selected_option_ids from status",
            )
        check_text(text, "the free text")  # no screen: the character rule
        return [text]
    chosen = answer.get("selected_option_ids") or []
    by_id = {ids.option_id(prompt.seen, index, row): row for row in range(len(options))}
    rows = [by_id.get(str(option_id)) for option_id in chosen]
    if len(rows) != 1 or rows[0] is None:
        raise RpcError(
            Reason.INVALID_PARAMS,
            "choose exactly one option_id of this question (single_select); ids change "
            "whenever the request does: call status and use its ids",
        )
    if answer.get("response_kind") != ResponseKind.SINGLE_SELECT.value:
        raise RpcError(Reason.INVALID_PARAMS, "this question's response_kind is single_select")
    return [str(options[rows[0]].get("label"))]


def _decisions(params: Mapping[str, Any]) -> dict[str, str]:
    listed = params.get("availableDecisions")
    available = (
        {d for d in listed if isinstance(d, str) and d in _ONE_TIME}
        if isinstance(listed, list)
        else set(_ONE_TIME)
    )
    decisions = {}
    if "accept" in available:
        decisions["approve_once"] = "accept"
    reject = next((d for d in ("decline", "cancel") if d in available), None)
    if reject is not None:
        decisions["reject"] = reject
    return decisions


def _permission(
    method: str,
    params: Mapping[str, Any],
    changes: FileChanges | None,
    seen: Appearance,
    ids: IdMinter,
    turn_id: str | None,
) -> tuple[dict[str, Any], dict[str, str], str | None]:
    """The permission's projection, the one-time decisions it offers (wire values), and
    why approve is not among them though listed (None: it is, if listed)."""
    decisions = _decisions(params)
    if method == FILE_CHANGE:
        shown, unapprovable = _file_change(params, changes)
    else:
        shown, unapprovable = _command(params)
    if unapprovable is not None:
        decisions.pop("approve_once", None)
    labels = {"approve_once": ("Yes", OptionRole.APPROVE_ONCE), "reject": ("No", OptionRole.REJECT)}
    options = [
        {"option_id": ids.option_id(seen, 0, row), "label": label, "role": role.value}
        for row, (decision, (label, role)) in enumerate(labels.items())
        if decision in decisions
    ]
    question: dict[str, Any] = {
        "question_id": ids.question_id(seen, 0),
        "header": "Permission",
        "prompt": backend_text(_text(params.get("reason")) or _asks(method, params), "prompt"),
        "required": True,
        "response_kind": ResponseKind.CONFIRM.value,
        "options": options,
    }
    if shown is not None:
        question["detail"] = shown
    if _text(params.get("cwd")):
        question["cwd"] = backend_text(params["cwd"], "cwd")
    projection = backend_projection(
        InteractionKind.PERMISSION, seen, ids, agent="codex", turn_id=turn_id, questions=[question]
    )
    projection["decisions"] = [d for d in ("approve_once", "reject") if d in decisions]
    if not decisions:
        projection = as_manual(projection, "no_one_time_decision")
    return projection, decisions, unapprovable


def _asks(method: str, params: Mapping[str, Any]) -> str:
    """What a permission without its own `reason` asks."""
    if method == COMMAND and params.get("networkApprovalContext") is not None:
        return _NETWORK_ASKS
    if method == COMMAND:
        return _ASKS.get(str(params.get("kind")), PERMISSIONS[method])
    return PERMISSIONS[method]


def _command(params: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """A command approval's `detail` (its network access first, then its command), and why
    `approve_once` is not offered (None: it may be)."""
    kind = params.get("kind")
    kind = "command" if kind is None else kind  # absent on servers older than the field
    command = _text(params.get("command")) or None
    context = params.get("networkApprovalContext")
    network = None if context is None else _network(context)
    detail = "\n".join(line for line in (network, command) if line) or None
    shown = backend_text(detail, "detail") if detail is not None else None
    if kind == _STDIN:
        return shown, (
            "this request writes input to a running command, and the input is not in the "
            "request, so AKK cannot show it; AKK offers reject only"
        )
    if kind != "command":
        return shown, (
            "this command approval is of a kind AKK does not know, so it cannot say what "
            "approving grants; AKK offers reject only"
        )
    if context is not None and (network is None or shown is None or not shown.startswith(network)):
        return shown, (
            "the network access this request asks for does not show whole in `detail` "
            "(unreadable, too long, or redacted), so AKK offers reject only"
        )
    if detail is None or shown is None:
        return None, "this request shows nothing to approve (no command), so AKK offers reject only"
    if unseen(shown, detail, BACKEND_TEXT_MAX["detail"]):
        return shown, unseen_refusal("the command").message
    return shown, None


def _network(context: object) -> str | None:
    """The line saying which network access a command approval asks for (None: unreadable)."""
    if not isinstance(context, dict) or not _text(context.get("host")):
        return None
    protocol = _text(context.get("protocol"))
    return f"network access to {context['host']}" + (f" ({protocol})" if protocol else "")


def _file_change(
    params: Mapping[str, Any], changes: FileChanges | None
) -> tuple[str | None, str | None]:
    """A file change approval's `detail` (its changes, or the root it would grant), and why
    `approve_once` is not offered (None: it may be).

    With `grantRoot`, `accept` lets the agent write under that root for the rest of the
    session, not this change only: a persistent grant, which AKK never offers. Reject
    (`decline`) stays: it refuses this request once, and the turn goes on without the grant.
    Otherwise `approve_once` is offered only when `detail` shows every change whole: not
    cut, withheld or redacted.
    """
    root = _text(params.get("grantRoot"))
    if root is not None:
        return backend_text(root, "detail"), (
            "this request also grants writes under its root (`detail`) for the rest of the "
            "session, a persistent grant AKK never approves; AKK offers reject only"
        )
    if changes is None:
        return None, (
            "the app-server has not reported the changes this request would apply (its "
            "fileChange item), so AKK cannot show them; AKK offers reject only"
        )
    if changes.text is None:
        return None, (
            f"the changes this request would apply cannot show whole in `detail` "
            f"({changes.why}), so AKK offers reject only"
        )
    shown = backend_text(changes.text, "detail")
    if shown != changes.text:
        return shown, (
            "the changes this request would apply do not show whole in `detail` (part of "
            "them is redacted), so AKK offers reject only"
        )
    return shown, None


def _repeated(questions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether answers keyed by question id could not say which is which: an id repeats,
    or one is no text."""
    keys = [q.get("id") for q in questions]
    return len(set(map(str, keys))) != len(keys) or not all(isinstance(k, str) for k in keys)


def _questionnaire(
    questions: Sequence[Mapping[str, Any]], seen: Appearance, ids: IdMinter, turn_id: str | None
) -> dict[str, Any]:
    crowded = unshowable(questions, _options)
    if crowded is not None:
        empty = backend_projection(
            InteractionKind.QUESTIONNAIRE, seen, ids, agent="codex", turn_id=turn_id, questions=[]
        )
        return as_manual(empty, crowded)
    shown = []
    for index, question in enumerate(questions):
        options = _options(question)
        shown.append(
            {
                "question_id": ids.question_id(seen, index),
                "header": backend_text(question.get("header"), "header"),
                "prompt": backend_text(question.get("question"), "prompt"),
                "required": True,
                "response_kind": (
                    ResponseKind.SINGLE_SELECT if options else ResponseKind.FREE_TEXT
                ).value,
                "options": [
                    backend_option(
                        ids.option_id(seen, index, row),
                        option.get("label"),
                        option.get("description"),
                    )
                    for row, option in enumerate(options)
                ],
                "free_text": bool(question.get("isOther")) or not options,
            }
        )
    projection = backend_projection(
        InteractionKind.QUESTIONNAIRE, seen, ids, agent="codex", turn_id=turn_id, questions=shown
    )
    projection["capabilities"] = {
        "batch_response": True,
        "free_text": any(q["free_text"] for q in shown),
        "multi_select": False,
    }
    if any(q.get("isSecret") or asks_secret_question(_text(q.get("question")) or "")
           for q in questions):  # fmt: skip
        return as_manual(projection, "secret_input")
    return within_frame(projection)


def _options(question: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    options = question.get("options")
    return [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
