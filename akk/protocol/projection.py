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

from collections.abc import Callable
from typing import Any

import attrs

from akk.profiles.observation import (
    InteractionKind,
    OptionRole,
    PromptView,
    ResponseKind,
    StepKind,
)
from akk.protocol.redaction import RedactedScreen, redact
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
    manual_reason: str | None = None,
    screen: RedactedScreen | None = None,
) -> dict[str, Any]:
    """The JSON object `status` returns for a prompt on screen.

    A prompt AKK will not answer (``manual_reason``: secret input, a shape the
    profile refuses) is still projected, with ``state: manual_required`` and
    the reason, so a controller knows a person must answer it. ``screen`` is
    the redacted screen the prompt was read off: pass it whenever there is one.
    """
    text = redact if screen is None else screen.text
    roles = shown_roles(prompt.step)
    questions = []
    for q_index, question in enumerate(prompt.questions):
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
        "state": "pending" if manual_reason is None else "manual_required",
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
    if manual_reason is not None:
        projection["manual_reason"] = manual_reason
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
    """One option of a backend's question, its texts redacted (a non-text is shown empty)."""
    shown = {"option_id": option_id, "label": redact(label if isinstance(label, str) else "")}
    if isinstance(description, str) and description:
        shown["description"] = redact(description)
    return shown


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
