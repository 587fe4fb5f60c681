"""The checks every questionnaire answer passes on a backend whose questions are requests.

A request (an app-server's, or Claude's `AskUserQuestion`) takes all its
questions together (`batch_response`). Each backend turns one answer into its
own wire shape; the rules for the whole call are here, once. A refused call
builds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from akk.profiles.observation import InteractionKind
from akk.protocol.errors import Reason, RpcError
from akk.screen.fingerprint import Appearance, IdMinter

T = TypeVar("T")


class Asked(Protocol):
    """A backend's pending request as its answers see it."""

    @property
    def kind(self) -> InteractionKind: ...

    @property
    def seen(self) -> Appearance: ...

    @property
    def projection(self) -> dict[str, Any]: ...

    @property
    def questions(self) -> tuple[Mapping[str, Any], ...]: ...

    @property
    def actionable(self) -> bool: ...


def each_answer(
    prompt: Asked,
    answers: Sequence[Mapping[str, Any]],
    ids: IdMinter,
    one: Callable[[int, Mapping[str, Any]], T],
) -> dict[int, T]:
    """Every question's answer by its index, each built by ``one(index, answer)``.

    Raises RpcError for a request that is not a questionnaire (invalid_params) or that
    AKK does not answer (manual_required), a question id that is not this request's, a
    question answered twice or not at all; ``one`` raises for a bad answer.
    """
    if prompt.kind is not InteractionKind.QUESTIONNAIRE:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"this interaction is a {prompt.kind.value}; answer a permission with approve "
            "{turn_id, decision}",
        )
    if not prompt.actionable:
        raise RpcError(
            Reason.MANUAL_REQUIRED,
            f"AKK does not answer this request ({prompt.projection['manual_reason']}); a person "
            "must",
        )
    by_id = {ids.question_id(prompt.seen, i): i for i in range(len(prompt.questions))}
    given: dict[int, T] = {}
    for answer in answers:
        index = by_id.get(str(answer.get("question_id")))
        if index is None or index in given:
            raise RpcError(
                Reason.INVALID_PARAMS,
                "each answer must name one question_id of this interaction, once (ids change "
                "whenever the request does); call status and use its ids",
            )
        given[index] = one(index, answer)
    if len(given) != len(prompt.questions):
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"this request asks {len(prompt.questions)} questions and takes them together: "
            "send one answer for each (batch_response)",
        )
    return given
