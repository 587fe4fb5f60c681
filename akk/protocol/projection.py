"""The interaction projection controllers see (PROTOCOL.md), built from a PromptView.

Ids are minted from the prompt's appearance (its fingerprint and appearance
number) with the server's secret, so they change whenever the prompt changes,
differ each time the same prompt is asked again, and cannot be guessed. Rows a controller may
never choose (persistent approvals, "Chat about this") are not projected; keys,
menu numbers, regions and fingerprints never are. Every text field is redacted
(a permission's command may carry a key), together with every stretch masked on
the screen it was read off, so a key the screen wrapped and the profile joined
leaves no piece; the fingerprint, and so every id, is of the unredacted cells.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from akk.profiles.observation import (
    InteractionKind,
    OptionRole,
    PromptView,
    ResponseKind,
    StepKind,
)
from akk.protocol.errors import Reason, RpcError
from akk.protocol.redaction import RedactedScreen, redact, redact_head, withheld
from akk.screen.fingerprint import Appearance, IdMinter

SCHEMA = "agent-knock-knock/terminal-interaction"

# Rows a controller may choose, by the role they have. A review or confirm
# step's own rows are its answers; on other steps a Submit row only moves the
# widget on, which AKK's key plan does itself.
_ANSWER_ROLES = frozenset(
    {OptionRole.CHOICE, OptionRole.NONE_OF_THE_ABOVE, OptionRole.APPROVE_ONCE, OptionRole.REJECT}
)
_CONFIRM_ROLES = frozenset(
    {OptionRole.SUBMIT, OptionRole.CANCEL, OptionRole.PROCEED, OptionRole.GO_BACK}
)


def shown_roles(step: StepKind) -> frozenset[OptionRole]:
    """The rows a controller sees (and so may choose) on a step of this kind."""
    if step in (StepKind.REVIEW, StepKind.CONFIRM):
        return _ANSWER_ROLES | _CONFIRM_ROLES
    return _ANSWER_ROLES


def project(
    prompt: PromptView,
    *,
    seen: Appearance,
    ids: IdMinter,
    agent: str,
    turn_id: str | None,
    screen: RedactedScreen | None = None,
) -> dict[str, Any]:
    """The JSON object `status` returns for a prompt on screen, answerable.

    A prompt AKK will not answer (secret input, a shape the profile refuses) is
    this projection passed through `as_manual`. ``screen`` is the redacted screen
    the prompt was read off: pass it whenever there is one.
    """
    text = redact if screen is None else screen.text
    roles = shown_roles(prompt.step)
    questions = []
    for q_index, question in enumerate(prompt.offered):
        options = [
            _option(
                option.label,
                option.role,
                option.description,
                ids.option_id(seen, q_index, o_index),
                text,
            )
            for o_index, option in enumerate(question.options)
            if option.role in roles
        ]
        entry: dict[str, Any] = {
            "question_id": ids.question_id(seen, q_index),
            "header": text(question.header or ""),
            "prompt": text(question.prompt),
            "required": question.required,
            "response_kind": question.response_kind.value,
            "options": options,
        }
        if question.detail:
            entry["detail"] = text(question.detail)
        questions.append(entry)
    kinds = {q.response_kind for q in prompt.questions}
    free_text = (
        any(
            o.role in (OptionRole.FREE_TEXT, OptionRole.NONE_OF_THE_ABOVE)
            for q in prompt.questions
            for o in q.options
        )
        or ResponseKind.FREE_TEXT in kinds
    )
    projection: dict[str, Any] = {
        "schema": SCHEMA,
        "version": 1,
        "interaction_id": ids.interaction_id(seen),
        "turn_id": turn_id,
        "agent": agent,
        "kind": prompt.kind.value,
        "state": "pending",
        # A queued async question has no step to show until it is opened.
        "step": None
        if prompt.step is StepKind.QUEUED
        else {"index": prompt.step_index, "total": prompt.step_total},
        "questions": questions,
        "capabilities": {
            "batch_response": False,
            "free_text": free_text,
            "multi_select": ResponseKind.MULTI_SELECT in kinds,
        },
    }
    if prompt.kind is InteractionKind.ASYNC_QUESTION:
        # Codex takes a picker's answer into the running turn while the agent works
        # (steer_current_turn); once it is idle the answer starts the Turn's next round
        # (queue_next_turn). A queued one shows no questions: `answers: []` opens it.
        projection["delivery_modes"] = ["steer_current_turn", "queue_next_turn"]
    if prompt.kind is InteractionKind.PERMISSION:
        projection["decisions"] = [
            decision
            for decision, role in (
                ("approve_once", OptionRole.APPROVE_ONCE),
                ("reject", OptionRole.REJECT),
            )
            if any(o.role is role for q in prompt.questions for o in q.options)
        ]
    return projection


def _option(
    label: str, role: OptionRole, description: str, option_id: str, text: Callable[[str], str]
) -> dict[str, Any]:
    option: dict[str, Any] = {"option_id": option_id, "label": text(label)}
    if description:
        option["description"] = text(description)
    if role is not OptionRole.CHOICE:
        option["role"] = role.value
    return option


def backend_projection(
    kind: InteractionKind,
    seen: Appearance,
    ids: IdMinter,
    *,
    agent: str,
    turn_id: str | None,
    questions: list[dict[str, Any]],
) -> dict[str, Any]:
    """The projection of a backend's prompt (no screen): one pending step, no capabilities yet.

    The backend's prompt module fills in `capabilities`, `decisions` or
    `manual_reason` for what its request offers.
    """
    return {
        "schema": SCHEMA,
        "version": 1,
        "interaction_id": ids.interaction_id(seen),
        "turn_id": turn_id,
        "agent": agent,
        "kind": kind.value,
        "state": "pending",
        "step": {"index": 1, "total": 1},
        "questions": questions,
        "capabilities": {"batch_response": False, "free_text": False, "multi_select": False},
    }


def backend_option(option_id: str, label: object, description: object) -> dict[str, Any]:
    """One option of a backend's question, its texts bounded and redacted (`backend_text`)."""
    shown = {"option_id": option_id, "label": backend_text(label, "label")}
    if isinstance(description, str) and description:
        shown["description"] = backend_text(description, "description")
    return shown


BACKEND_TEXT_MAX: dict[str, int] = {
    "header": 200,
    "prompt": 4_000,
    "detail": 2_000,
    "cwd": 4_096,
    "label": 500,
    "description": 1_000,
}
"""The most characters of each text field of a backend's prompt a controller is shown.

An agent process may send a prompt as long as its wire allows (16 MiB), and the
texts in it are the model's, which a hostile repository can steer.
"""
BACKEND_MAX_QUESTIONS = 16
BACKEND_MAX_OPTIONS = 64
BACKEND_MAX_TEXT = 64_000
"""The most characters a backend's questions may show in all, each text cut to its bound:
past it nothing is redacted (redaction reads about a megabyte a second)."""
PROJECTION_MAX_BYTES = 256 << 10
"""The most a projection may take as JSON (as sent: non-ASCII escaped), so that an event
carrying it fits the 1 MiB frame controllers' libraries accept (a backend's, or a prompt
read off a pane thousands of cells wide)."""


def backend_text(value: object, field: str) -> str:
    """A backend's text as a controller sees it: redacted, and cut to its field's bound.

    A cut text ends in a mark saying how long the whole was. Only the head is
    redacted (`redact_head`), so a text of megabytes in lines costs what its
    first rows do; one too costly to redact is `withheld` (`unseen`). A
    non-text is shown empty.
    """
    if not isinstance(value, str):
        return ""
    limit = BACKEND_TEXT_MAX[field]
    return cut(redact_head(value, limit + 1), limit, whole=len(value))


def unseen(shown: str, value: str, limit: int) -> bool:
    """Whether `backend_text` (or its head, cut to ``limit``) showed less than the whole of
    ``value``: it was cut at its bound, or too costly to redact (`withheld`).

    A permission whose command or input is unseen offers `reject` only: a controller
    approves only what it saw whole (a command's hidden tail may be `; curl … | sh`).
    """
    return len(value) > limit or shown == withheld(len(value))


def unseen_refusal(what: str) -> RpcError:
    """The refusal of `approve_once` on a permission whose `what` is `unseen`."""
    return RpcError(
        Reason.INVALID_PARAMS,
        f"{what} does not show whole in `detail` (cut at its bound, or too costly to "
        "redact), so AKK offers reject only; nothing was sent. Reject it, or let a person "
        "approve it where the agent runs",
    )


def cut(text: str, limit: int, *, whole: int | None = None) -> str:
    """`text`, or if longer than `limit` characters its head with a mark giving the length
    of the whole (`whole`, default `text`'s own)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[cut: {len(text) if whole is None else whole:,} characters in all]"


def unshowable(
    questions: Sequence[Mapping[str, Any]],
    options_of: Callable[[Mapping[str, Any]], Sequence[Mapping[str, Any]]],
) -> str | None:
    """Why a backend's questions are too many or too long to project (a `manual_reason`).

    None if they can be shown. Counted before any text is redacted, so a request
    of a million options costs nothing but this count.
    """
    options = [options_of(question) for question in questions]
    if len(questions) > BACKEND_MAX_QUESTIONS:
        return f"too_many_questions: {len(questions)} (at most {BACKEND_MAX_QUESTIONS})"
    most = max(map(len, options), default=0)
    if most > BACKEND_MAX_OPTIONS:
        return f"too_many_options: {most} in one question (at most {BACKEND_MAX_OPTIONS})"
    texts = sum(
        _length(question.get("header"), "header") + _length(question.get("question"), "prompt")
        + sum(_length(o.get("label"), "label") + _length(o.get("description"), "description")
              for o in shown)
        for question, shown in zip(questions, options, strict=True)
    )  # fmt: skip
    if texts > BACKEND_MAX_TEXT:
        return f"too_large: {texts:,} characters of text (at most {BACKEND_MAX_TEXT:,})"
    return None


def _length(value: object, field: str) -> int:
    """How many characters of `value` its field shows (the cut mark aside)."""
    return min(len(value), BACKEND_TEXT_MAX[field]) if isinstance(value, str) else 0


def as_manual(projection: dict[str, Any], reason: str) -> dict[str, Any]:
    """`projection` as a prompt a person must answer, with its ``reason``: no questions,
    decisions or capabilities, so no id a controller could answer with (PROTOCOL.md
    "The interaction projection"); only the interaction's own id, which names it."""
    manual = {
        key: value
        for key, value in projection.items()
        if key not in ("decisions", "delivery_modes")
    }
    return manual | {
        "questions": [],
        "capabilities": {"batch_response": False, "free_text": False, "multi_select": False},
        "state": "manual_required",
        "reason": reason,
        "manual_reason": reason,
    }


def within_frame(projection: dict[str, Any]) -> dict[str, Any]:
    """`projection`, or if its JSON is over PROJECTION_MAX_BYTES, the same prompt manual
    (`too_large`): a controller is never sent an event it cannot receive."""
    size = len(json.dumps(projection))
    if size <= PROJECTION_MAX_BYTES:
        return projection
    return as_manual(projection, f"too_large: {size:,} bytes as JSON "
                                      f"(at most {PROJECTION_MAX_BYTES:,})")  # fmt: skip


@attrs.frozen
class Shown:
    """One prompt appearance and the projection a controller sees of it.

    ``prompt`` is None for a manual screen no profile read (nothing to answer).
    """

    seen: Appearance
    prompt: PromptView | None
    projection: dict[str, Any]

    @property
    def interaction_id(self) -> str:
        return str(self.projection["interaction_id"])

    @property
    def kind(self) -> str:
        return str(self.projection["kind"])

    @property
    def actionable(self) -> bool:
        return self.prompt is not None and "manual_reason" not in self.projection
