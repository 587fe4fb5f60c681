"""A headless Claude's ``can_use_tool`` request as a controller's interaction, and its answer.

Pure. A control request is the backend's prompt. It is fingerprinted over its
canonical content and ids (request id, the whole request, and the process
generation that sent it), so the ids minted from it change whenever any of
those do. The projection has the same schema as a terminal's (PROTOCOL.md); ids
are opaque, labels presentation only, every text redacted, and raw wire values
never appear.

Proven on 2.1.263 and 2.1.332 (tests/lab/test_claude_headless_prompts.py,
fixtures/claude_headless/):

- A tool's permission (Bash, and any tool but the two below) is a `permission`
  with `approve_once` and `reject` only: `approve_once` is ``{"behavior":
  "allow", "updatedInput": <the input unchanged>}``, `reject` is
  ``{"behavior": "deny", "message": REJECTED}``. AKK never returns permission
  updates (the request's ``permission_suggestions``) and never offers "always".
  Since the whole input is approved, its `detail` shows every field of it
  (`_detail`): at most one field by its head, every other whole; an input that
  cannot be shown so offers `reject` only. A Write or an Edit whose input holds
  its own fields only shows as a terminal's does (`offered_file`: the path, then
  the content, or the removed and added lines), whole up to `FILE_SHOWN_MAX`
  characters; a longer one is shown as any other input.
- ``AskUserQuestion`` is a `questionnaire`: all its questions in one answer
  (`batch_response`), each single- or multi-select as the tool says, and free
  text on every question (the tool takes any text, as its own "Other" row
  does). The answer is ``allow`` with the input plus ``answers``: question text
  -> the chosen label, several labels joined by ", " in the options' order, or
  the free text. Because answers are keyed by question text, a request whose
  questions repeat a text, or a multi-select label holding ", ", is
  `manual_required` (AKK could not say which answer is which).
- ``ExitPlanMode`` is `manual_required`: approving it changes the session's
  permission mode, which is not AKK's to decide. So is any other control
  request, and a request whose input AKK cannot read.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from akk.backends.questions import each_answer
from akk.evidence.model import FileEdit, FileWrite, file_edit, file_write
from akk.profiles.observation import InteractionKind, OptionRole, ResponseKind
from akk.profiles.permission import FILE_SHOWN_MAX, offered_file
from akk.protocol.errors import Reason, RpcError
from akk.protocol.projection import (
    BACKEND_TEXT_MAX,
    as_manual,
    backend_option,
    backend_projection,
    backend_text,
    cut,
    unseen,
    unseen_refusal,
    unshowable,
    within_frame,
)
from akk.protocol.redaction import asks_secret_question, redact, redact_head
from akk.protocol.text_check import check_text
from akk.screen.fingerprint import Appearance, IdMinter

CAN_USE_TOOL = "can_use_tool"
QUESTION_TOOL = "AskUserQuestion"
PLAN_TOOL = "ExitPlanMode"

REJECTED = "The user rejected this tool use. Do not run it; go on without it or ask the user."
"""The `deny` message Claude passes to the model as the tool's (error) result."""

FIELDS_MAX = 1_000
"""The most characters (as JSON) a permission's input may hold besides the one field whose
head may stand for it (`_detail`); past it the permission offers reject only."""

WITHHELD = "withheld"
"""`HeadlessPrompt.unshown` of an input `detail` does not show whole (`unseen`)."""

FREE_TEXT_MAX_CHARS = 10_000
"""Longest free-text answer AKK passes on (no editor bounds it; docs/claude_headless.md)."""

_JOIN = ", "
"""How the tool joins a multi-select question's labels (its own picker does the same)."""


@attrs.frozen
class HeadlessPrompt:
    """One control request as an interaction: its appearance, projection and wire facts."""

    request_id: str
    tool: str | None
    tool_use_id: str | None
    kind: InteractionKind
    seen: Appearance
    projection: dict[str, Any]
    input: Mapping[str, Any] = attrs.field(factory=dict)
    """The tool's input as the request holds it: `approve_once` sends it back unchanged."""
    questions: tuple[Mapping[str, Any], ...] = ()
    unshown: str | None = None
    """Why `approve_once` is not offered on this permission (its `detail` cannot show the
    whole input it would approve); None: it is."""

    @property
    def interaction_id(self) -> str:
        return str(self.projection["interaction_id"])

    @property
    def actionable(self) -> bool:
        return "manual_reason" not in self.projection


def fingerprint(request_id: str, request: Mapping[str, Any], generation: int) -> bytes:
    """SHA-256 of the request's canonical content and id, and the process that sent it."""
    # ASCII-escaped, so a lone surrogate the request held digests too.
    canonical = json.dumps(
        {"generation": generation, "request": request, "request_id": request_id},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).digest()


def prompt_of(
    request_id: str,
    request: Mapping[str, Any],
    *,
    generation: int,
    ids: IdMinter,
    turn_id: str | None,
) -> HeadlessPrompt:
    """The interaction a control request is (any subtype: one AKK does not answer is manual)."""
    seen = Appearance(fingerprint(request_id, request, generation), generation)
    tool = _str(request.get("tool_name"))
    given = request.get("input")
    tool_input: Mapping[str, Any] = given if isinstance(given, dict) else {}
    make = functools.partial(
        HeadlessPrompt,
        request_id=request_id,
        tool=tool,
        tool_use_id=_str(request.get("tool_use_id")),
        seen=seen,
        input=tool_input,
    )
    if request.get("subtype") != CAN_USE_TOOL or tool is None or not isinstance(given, dict):
        subtype = str(request.get("subtype"))[:80]
        reason = f"unsupported_request: {subtype}"
        return make(
            kind=InteractionKind.CONFIRMATION,
            projection=_manual(InteractionKind.CONFIRMATION, seen, ids, turn_id, reason),
        )
    if tool == QUESTION_TOOL:
        questions = _questions(tool_input)
        return make(
            kind=InteractionKind.QUESTIONNAIRE,
            projection=_questionnaire(questions, seen, ids, turn_id),
            questions=tuple(questions or ()),
        )
    if tool == PLAN_TOOL:
        projection = _manual(InteractionKind.PERMISSION, seen, ids, turn_id, "plan_approval")
        return make(kind=InteractionKind.PERMISSION, projection=projection)
    projection, unshown = _permission(tool, request, tool_input, seen, ids, turn_id)
    return make(kind=InteractionKind.PERMISSION, projection=projection, unshown=unshown)


def decision_response(prompt: HeadlessPrompt, decision: str) -> dict[str, Any]:
    """`approve {decision}`: the permission result to send, or RpcError (nothing is built)."""
    if prompt.kind is not InteractionKind.PERMISSION:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"the pending interaction is a {prompt.kind.value}, not a permission; answer it "
            "with respond_interaction",
        )
    if not prompt.actionable:
        raise RpcError(
            Reason.MANUAL_REQUIRED,
            f"AKK does not answer this request ({prompt.projection['manual_reason']}); a person "
            "must",
        )
    if decision == "approve_once" and prompt.unshown == WITHHELD:
        raise unseen_refusal("the tool's input")
    if decision == "approve_once" and prompt.unshown is not None:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"the tool's input cannot be shown whole ({prompt.unshown}), and approve_once "
            "would approve all of it, so AKK offers reject only; a person may answer it",
        )
    if decision == "approve_once":
        return {"behavior": "allow", "updatedInput": dict(prompt.input)}
    if decision == "reject":
        return {"behavior": "deny", "message": REJECTED}
    raise RpcError(
        Reason.INVALID_PARAMS,
        f"decision must be approve_once or reject, not {decision[:40]!r}; AKK never answers "
        "for more than this one call",
    )


def answers_response(
    prompt: HeadlessPrompt, answers: Sequence[Mapping[str, Any]], ids: IdMinter
) -> dict[str, Any]:
    """`respond_interaction {answers}`: the ``allow`` result carrying every question's answer.

    One answer per question, all together (`batch_response`). Raises RpcError
    (nothing is built) for a question id that is not this request's, a question
    answered twice or not at all, an option id that is not the question's, the
    wrong number of options, or a free text that is empty, over
    `FREE_TEXT_MAX_CHARS` or breaks the character rule.
    """
    given = each_answer(
        prompt, answers, ids, lambda index, answer: _answer(prompt, index, answer, ids)
    )
    chosen = {str(prompt.questions[i]["question"]): text for i, text in sorted(given.items())}
    return {"behavior": "allow", "updatedInput": {**prompt.input, "answers": chosen}}


def _answer(prompt: HeadlessPrompt, index: int, answer: Mapping[str, Any], ids: IdMinter) -> str:
    """The text the tool records for question `index`: a label, labels joined, or free text."""
    question = prompt.questions[index]
    kind = answer.get("response_kind")
    if kind == ResponseKind.FREE_TEXT.value:
        text = answer.get("text")
        if not isinstance(text, str) or not text.strip():
            raise RpcError(Reason.INVALID_PARAMS, "a free_text answer needs a non-empty text")
        if len(text) > FREE_TEXT_MAX_CHARS:
            raise RpcError(
                Reason.INVALID_PARAMS,
                f"the free text has {len(text)} characters, more than {FREE_TEXT_MAX_CHARS}; "
                "shorten it",
            )
        check_text(text, "the free text")  # no screen: the character rule
        return text
    multi = question.get("multiSelect") is True
    expected = (ResponseKind.MULTI_SELECT if multi else ResponseKind.SINGLE_SELECT).value
    if kind != expected:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"this question's response_kind is {expected} (or free_text), not {str(kind)[:40]}",
        )
    options = question["options"]
    rows_by_id = {ids.option_id(prompt.seen, index, row): row for row in range(len(options))}
    chosen = answer.get("selected_option_ids")
    rows = [rows_by_id.get(str(o)) for o in chosen] if isinstance(chosen, list) else [None]
    if None in rows or not rows or len(set(rows)) != len(rows) or (not multi and len(rows) != 1):
        count = "one or more distinct option_ids" if multi else "exactly one option_id"
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"choose {count} of this question ({expected}); ids change whenever the request "
            "does: call status and use its ids",
        )
    return _JOIN.join(
        str(options[row]["label"]) for row in sorted(r for r in rows if r is not None)
    )


def _questions(tool_input: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The tool's questions if every one has a text and labelled options; None otherwise."""
    questions = tool_input.get("questions")
    if not isinstance(questions, list) or not questions:
        return None
    for question in questions:
        if not isinstance(question, dict) or not _str(question.get("question")):
            return None
        options = question.get("options")
        if not isinstance(options, list) or not options:
            return None
        if not all(isinstance(o, dict) and _str(o.get("label")) for o in options):
            return None
    return questions


def _questionnaire(
    questions: list[Mapping[str, Any]] | None,
    seen: Appearance,
    ids: IdMinter,
    turn_id: str | None,
) -> dict[str, Any]:
    if questions is None:
        reason: str | None = "unreadable_questions"
    else:
        reason = unshowable(questions, _listed_options) or _unanswerable(questions)
        if reason is None and any(asks_secret_question(q["question"]) for q in questions):
            reason = "secret_input"  # its answer is a person's to type, never relayed
    if reason is not None or questions is None:
        return _manual(InteractionKind.QUESTIONNAIRE, seen, ids, turn_id, reason or "")
    shown = []
    for index, question in enumerate(questions):
        multi = question.get("multiSelect") is True
        shown.append(
            {
                "question_id": ids.question_id(seen, index),
                "header": backend_text(question.get("header"), "header"),
                "prompt": backend_text(question["question"], "prompt"),
                "required": True,
                "response_kind": (
                    ResponseKind.MULTI_SELECT if multi else ResponseKind.SINGLE_SELECT
                ).value,
                "options": [
                    backend_option(
                        ids.option_id(seen, index, row), option["label"], option.get("description")
                    )
                    for row, option in enumerate(question["options"])
                ],
                "free_text": True,
            }
        )
    projection = backend_projection(
        InteractionKind.QUESTIONNAIRE, seen, ids, agent="claude", turn_id=turn_id, questions=shown
    )
    projection["capabilities"] = {
        "batch_response": True,
        "free_text": True,
        "multi_select": any(q["response_kind"] == ResponseKind.MULTI_SELECT for q in shown),
    }
    return within_frame(projection)


def _listed_options(question: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """The options of a question `_questions` read (every one a labelled mapping)."""
    options: Sequence[Mapping[str, Any]] = question["options"]
    return options


def _unanswerable(questions: list[Mapping[str, Any]]) -> str | None:
    """Why answers keyed by question text could not say which is which; None if they can."""
    texts = [str(q["question"]) for q in questions]
    if len(set(texts)) != len(texts):
        return "repeated_question"
    if any(
        q.get("multiSelect") is True and any(_JOIN in str(o["label"]) for o in q["options"])
        for q in questions
    ):
        return "ambiguous_label"
    return None


def _permission(
    tool: str,
    request: Mapping[str, Any],
    tool_input: Mapping[str, Any],
    seen: Appearance,
    ids: IdMinter,
    turn_id: str | None,
) -> tuple[dict[str, Any], str | None]:
    """The permission's projection, and why its input cannot be shown whole (then it
    offers reject only; None: approve_once too)."""
    description = _str(request.get("description"))
    change = _file_change(tool, tool_input)
    offered = None if change is None else offered_file(change)
    if offered is not None and len(offered) <= FILE_SHOWN_MAX:
        detail, unshown = redact(offered), None
    else:
        detail, unshown = _detail(tool_input, description)
    decisions = ["reject"] if unshown is not None else ["approve_once", "reject"]
    labels = (("Yes", OptionRole.APPROVE_ONCE), ("No", OptionRole.REJECT))
    name = _str(request.get("display_name")) or tool
    question: dict[str, Any] = {
        "question_id": ids.question_id(seen, 0),
        "header": backend_text(name, "header"),
        "prompt": backend_text(description or f"Allow {name}?", "prompt"),
        "required": True,
        "response_kind": ResponseKind.CONFIRM.value,
        "options": [
            {"option_id": ids.option_id(seen, 0, row), "label": label, "role": role.value}
            for row, (label, role) in enumerate(labels)
            if role is OptionRole.REJECT or "approve_once" in decisions
        ],
        "detail": detail,
    }
    projection = backend_projection(
        InteractionKind.PERMISSION, seen, ids, agent="claude", turn_id=turn_id, questions=[question]
    )
    projection["decisions"] = decisions
    return projection, unshown


FILE_FIELDS: Mapping[str, frozenset[str]] = {
    "Write": frozenset({"file_path", "content"}),
    "Edit": frozenset({"file_path", "old_string", "new_string", "replace_all"}),
}
"""The fields of a Write's and an Edit's input that `offered_file` shows."""


def _file_change(tool: str, tool_input: Mapping[str, Any]) -> FileWrite | FileEdit | None:
    """The change a Write or an Edit makes, when its input holds nothing `offered_file`
    would not show (any other field, such as a flag, is shown by `_detail`); else None."""
    fields = FILE_FIELDS.get(tool)
    if fields is None or not set(tool_input) <= fields:
        return None
    given = dict(tool_input)
    return file_write(given) if tool == "Write" else file_edit(given)


def _detail(tool_input: Mapping[str, Any], description: str | None) -> tuple[str, str | None]:
    """What a permission's `detail` shows of the input `approve_once` would approve, and why
    that is not all of it (None: every field is shown).

    The head of one field may stand for it, as a terminal shows a long command's head: a
    string `command` (shown as itself), else, for an input too long to show whole as JSON,
    its longest field. Every other field is shown whole, as JSON after a blank line
    (within `FIELDS_MAX` characters), so a flag such as Bash's
    ``dangerouslyDisableSandbox`` is never approved unseen. The input's ``description``,
    when it is the request's own (shown whole as the prompt), is not shown twice.
    """
    limit = BACKEND_TEXT_MAX["detail"]
    whole = json.dumps(tool_input, ensure_ascii=False)
    command = _str(tool_input.get("command"))
    if command is None and len(whole) <= limit:
        shown = backend_text(whole, "detail")
        return shown, WITHHELD if unseen(shown, whole, limit) else None
    if command is not None:
        key, head = "command", command
    else:
        key = max(tool_input, key=lambda k: len(json.dumps(tool_input[k], ensure_ascii=False)))
        value = tool_input[key]
        head = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    prompted = description is not None and len(description) <= BACKEND_TEXT_MAX["prompt"]
    rest = {
        k: v
        for k, v in tool_input.items()
        if k != key and not (k == "description" and prompted and v == description)
    }
    fields = json.dumps(rest, ensure_ascii=False) if rest else ""
    label = "" if command is not None else json.dumps(key, ensure_ascii=False) + ":\n"
    besides = len(fields) + len(label)
    if besides <= FIELDS_MAX:  # short: redacted whole at little cost
        label, tail = redact(label), f"\n\n{redact(fields)}" if fields else ""
        room = limit - len(label) - len(tail)
        if room >= limit // 4:
            shown = cut(redact_head(head, room + 1), room, whole=len(head))
            return label + shown + tail, WITHHELD if unseen(shown, head, room) else None
    why = f"fields_too_long: {besides:,} characters besides its {key[:40]!r} field"
    return backend_text(whole, "detail"), why


def _manual(
    kind: InteractionKind, seen: Appearance, ids: IdMinter, turn_id: str | None, reason: str
) -> dict[str, Any]:
    """A prompt a person must answer: its kind and reason, and no answerable ids."""
    projection = backend_projection(kind, seen, ids, agent="claude", turn_id=turn_id, questions=[])
    return as_manual(projection, reason)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
