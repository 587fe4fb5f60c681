"""The interaction projection controllers see (PROTOCOL.md), built from a PromptView.

Ids are minted from the prompt's fingerprint with the server's secret, so they
change whenever the prompt changes and cannot be guessed. Rows a controller may
never choose (persistent approvals, "Chat about this") are not projected; keys,
menu numbers, regions and fingerprints never are. Every text field is redacted
(a permission's command may carry a key); the fingerprint, and so every id, is
of the unredacted cells.
"""

from __future__ import annotations

from typing import Any

from akk.profiles.observation import (
    InteractionKind,
    OptionRole,
    PromptView,
    ResponseKind,
    StepKind,
)
from akk.protocol.redaction import redact
from akk.screen.fingerprint import IdMinter

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


def project(
    prompt: PromptView,
    *,
    fingerprint: bytes,
    ids: IdMinter,
    agent: str,
    turn_id: str | None,
) -> dict[str, Any]:
    """The JSON object `status` returns for a prompt on screen."""
    roles = _ANSWER_ROLES
    if prompt.step in (StepKind.REVIEW, StepKind.CONFIRM):
        roles = roles | _CONFIRM_ROLES
    questions = []
    for q_index, question in enumerate(prompt.questions):
        options = [
            _option(
                option.label,
                option.role,
                option.description,
                ids.option_id(fingerprint, q_index, o_index),
            )
            for o_index, option in enumerate(question.options)
            if option.role in roles
        ]
        entry: dict[str, Any] = {
            "question_id": ids.question_id(fingerprint, q_index),
            "header": redact(question.header or ""),
            "prompt": redact(question.prompt),
            "required": question.required,
            "response_kind": question.response_kind.value,
            "options": options,
        }
        if question.detail:
            entry["detail"] = redact(question.detail)
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
        "interaction_id": ids.interaction_id(fingerprint),
        "turn_id": turn_id,
        "agent": agent,
        "kind": prompt.kind.value,
        "state": "pending",
        "step": {"index": prompt.step_index, "total": prompt.step_total},
        "questions": questions,
        "capabilities": {
            "batch_response": False,
            "free_text": free_text,
            "multi_select": ResponseKind.MULTI_SELECT in kinds,
        },
    }
    if prompt.kind is InteractionKind.PERMISSION:
        projection["decisions"] = ["approve_once", "reject"]
    return projection


def _option(label: str, role: OptionRole, description: str, option_id: str) -> dict[str, Any]:
    option: dict[str, Any] = {"option_id": option_id, "label": redact(label)}
    if description:
        option["description"] = redact(description)
    if role is not OptionRole.CHOICE:
        option["role"] = role.value
    return option
