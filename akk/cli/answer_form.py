"""What a person types at `akk answer`, read against the prompt it was shown.

The prompt is the projection of a status reply (PROTOCOL's interaction). The
person's replies (an option's number, a decision, a line of text) become the one
call that answers it, `approve {decision}` or `respond_interaction` with the ids
of that very projection, so the answer names exactly what the person saw: if
the prompt changes in between, its ids do too, and the server refuses the call
with nothing sent. Nothing here calls the server; a reply that is not one of
the choices is asked again, and leaving a required question empty ends the
answer unsent (`Unanswered`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from akk.cli.status_text import OWN_TEXT, TEXT_ROLES, unlisted_text_row

Ask = Callable[[str], "str | None"]
"""Show a prompt line and return what the person typed, or None at the end of input."""

Say = Callable[[str], None]
"""Tell the person one line (why a reply was not taken)."""

TRIES = 3
"""Replies read for one question before the answer is given up, unsent."""

_T = TypeVar("_T")


class Unanswered(Exception):
    """The person left the prompt unanswered; nothing was sent."""


@attrs.frozen
class Call:
    """The answer as the protocol call that carries it."""

    method: str
    params: dict[str, Any]


def read_call(projection: Mapping[str, Any], ask: Ask, say: Say, *, settled: bool) -> Call:
    """The call that answers ``projection`` (pending) with what the person types.

    ``settled``: the Turn's round is over, so an async question's answer starts its
    next round (`queue_next_turn`); while it runs, the answer joins it.
    Raises Unanswered at the end of input, or after `TRIES` replies that were not
    choices, or when the person declines to open a queued question.
    """
    turn_id = projection["turn_id"]
    if projection["kind"] == "permission":
        decisions: Sequence[str] = projection.get("decisions") or ()
        if not decisions:
            raise Unanswered("it offers no decision AKK may send; a person answers it at the pane")
        decision = _pick(ask, say, "decision", decisions, decisions, multi=False, required=True)
        assert decision is not None
        return Call("approve", {"turn_id": turn_id, "decision": decision[0]})
    params: dict[str, Any] = {"interaction_id": projection["interaction_id"], "turn_id": turn_id}
    if "queue_next_turn" in (projection.get("delivery_modes") or ()) and settled:
        params["delivery_mode"] = "queue_next_turn"
    questions = projection["questions"]
    if not questions:  # Codex's queued question: opening it is the one step
        reply = ask("open it at the terminal, to show its options? [y/N] ")
        if (reply or "").strip().lower() not in ("y", "yes"):
            raise Unanswered("the question stays queued")
        return Call("respond_interaction", params | {"answers": []})
    answers = [
        answer
        for question in questions
        if (answer := _answer(question, ask, say, unlisted_text_row(projection, question)))
        is not None
    ]
    return Call("respond_interaction", params | {"answers": answers})


def _answer(
    question: Mapping[str, Any], ask: Ask, say: Say, text_row: bool
) -> dict[str, Any] | None:
    """One question's answer, or None when the person leaves an optional one empty.
    ``text_row``: it also takes the person's own text, on a row after its options."""
    required = question.get("required", True) is not False
    name = question.get("header") or question["prompt"]
    kind = question["response_kind"]
    if kind == "free_text":
        text = _text(ask, say, f"{name}: your answer: ", required)
        return None if text is None else _free(question, text)
    unlisted = [{"label": OWN_TEXT, "role": "free_text"}] if text_row else []
    options = [*question["options"], *unlisted]
    labels = [option["label"] for option in options]
    picked = _pick(ask, say, name, labels, options, multi=kind == "multi_select", required=required)
    if picked is None:
        return None
    own = [option for option in picked if option.get("role") in TEXT_ROLES]
    if own:
        if len(picked) > 1:
            raise Unanswered(f"“{own[0]['label']}” takes your own text, alone")
        label = own[0]["label"]
        what = "your own text" if label == OWN_TEXT else f"your text for “{label}”"
        text = _text(ask, say, f"{name}: {what}: ", True)
        assert text is not None
        return _free(question, text)
    return {
        "question_id": question["question_id"],
        "response_kind": kind,
        "selected_option_ids": [option["option_id"] for option in picked],
    }


def _free(question: Mapping[str, Any], text: str) -> dict[str, Any]:
    return {"question_id": question["question_id"], "response_kind": "free_text", "text": text}


def _pick(
    ask: Ask,
    say: Say,
    name: str,
    labels: Sequence[str],
    items: Sequence[_T],
    *,
    multi: bool,
    required: bool,
) -> list[_T] | None:
    """The items the person names by number (or by exact label, case aside): one, or with
    ``multi`` one or more separated by commas. None: an optional question left empty."""
    how = "numbers, e.g. 1,3" if multi else "a number"
    for _ in range(TRIES):
        reply = ask(f"{name}: choose ({how}{'' if required else ', empty to skip'}): ")
        if reply is None:
            raise Unanswered("the input ended")
        words = [w.strip() for w in (reply.split(",") if multi else [reply]) if w.strip()]
        if not words:
            if not required:
                return None
            say("this question needs an answer")
            continue
        rows = [_row(word, labels) for word in words]
        if None in rows or len(set(rows)) != len(rows):
            say(f"choose {how} from 1 to {len(labels)}, each once")
            continue
        return [items[row] for row in rows if row is not None]
    raise Unanswered(f"no choice was taken after {TRIES} replies")


def _row(word: str, labels: Sequence[str]) -> int | None:
    if word.isdecimal():
        number = int(word)
        return number - 1 if 1 <= number <= len(labels) else None
    matches = [row for row, label in enumerate(labels) if label.casefold() == word.casefold()]
    return matches[0] if len(matches) == 1 else None


def _text(ask: Ask, say: Say, prompt: str, required: bool) -> str | None:
    for _ in range(TRIES):
        reply = ask(prompt)
        if reply is None:
            raise Unanswered("the input ended")
        if reply.strip():
            return reply
        if not required:
            return None
        say("this question needs an answer")
    raise Unanswered(f"no answer was taken after {TRIES} replies")
