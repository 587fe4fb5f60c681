"""What a Codex rollout's records prove about one Turn (pure; no I/O).

Record shapes, verified on 0.153.4, 0.154.0, 0.155.1 and 0.169.0 (fixtures in
fixtures/evidence/codex/). Every line is ``{"timestamp", "type", "payload"}``
and one writer appends them in order.

- ``session_meta`` (first line): ``payload.id`` is the thread id, also the
  rollout file name's suffix.
- A Turn: ``event_msg`` ``task_started`` (``turn_id``), the model-visible
  ``response_item`` user message, then ``event_msg`` ``item_completed`` whose
  ``item`` is ``{"type": "UserMessage", "content": [{"type": "text", "text"}]}``
  with the Turn's ``turn_id`` - the record taken as acceptance. The text is
  the paste exactly, with tabs kept, but leading and trailing whitespace
  trimmed (and CR turned into LF by tmux's paste).
- Usage: ``event_msg`` ``token_count`` carries ``info.total_token_usage``, a
  running total for the thread in this process (``info`` is null when there
  is nothing new, e.g. at an interrupt). Counted only when a response
  completes; a response cut by Esc is never counted.
- End: ``event_msg`` ``task_complete`` with the ``turn_id`` and
  ``last_agent_message``; after an API error it also has ``error.message``
  (the error body as text) and ``last_agent_message: null``.
- Interrupt (Esc, also Esc on an approval prompt): ``event_msg``
  ``turn_aborted`` with the ``turn_id`` and ``reason: "interrupted"``.
- A message a person sends (Enter) while the turn runs is steered into it: one more
  ``item_completed`` ``UserMessage`` with the Turn's ``turn_id``. It goes on with the turn's
  next request, or at once, cutting the reply under way (0.153.4 and 0.171.0 cut a streaming
  reply; 0.169.0 and 0.171.0 cut one held before its first byte, which 0.153.4-0.155.1 wait
  for). Tab queues it instead, as the next turn. An answer to the agent's own async
  question is a ``UserMessage`` too, ``> TITLE\n\nANSWER``, under the ``AgentMessage``
  (``delivery: "async"``) whose ``questions`` hold that title.
- A tool call: ``response_item`` ``function_call`` (``call_id``, ``name``,
  ``arguments`` a JSON text; ``exec_command``'s ``cmd`` is the command string).
  Its answer is a ``function_call_output`` with that ``call_id``, also when the
  approval is refused (``aborted by user``). The call is in the rollout
  ~0.8-0.9 s before its approval prompt is drawn on every pinned version
  (tools/lab/NOTES.md).
- A patch: ``response_item`` ``custom_tool_call`` (``call_id``, ``name``
  ``apply_patch``, ``input`` the patch text, ``*** Begin Patch`` to ``*** End Patch``),
  answered by a ``custom_tool_call_output`` with that ``call_id``. Its relative paths are
  from the ``cwd`` of the turn's ``turn_context`` record, written before it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from akk.evidence.model import (
    Outcome,
    PendingCall,
    Progress,
    Record,
    Tokens,
    UsageStatus,
    asked_questions,
    file_patch,
    input_digest,
    request_digest,
)

PATCH_TOOL = "apply_patch"
"""The custom tool a Codex patch is a call of."""

FAILURE_CHARS = 200
"""Longest `Progress.failure` text."""

_ENDS = ("task_complete", "turn_aborted")


def prompt_text(data: Mapping[str, Any]) -> str | None:
    """The user's text of an accepted user message record; None for other records."""
    item = _payload(data, "item_completed").get("item")
    if not isinstance(item, dict) or item.get("type") != "UserMessage":
        return None
    content = item.get("content")
    if not isinstance(content, list) or len(content) != 1:
        return None
    part = content[0]
    if not isinstance(part, dict) or part.get("type") != "text":
        return None
    text = part.get("text")
    return text if isinstance(text, str) else None


def is_request(data: Mapping[str, Any], request_sha256: str) -> bool:
    """True for a user message record whose text has this digest."""
    text = prompt_text(data)
    return text is not None and request_digest(text) == request_sha256


def session_id(data: Mapping[str, Any]) -> str | None:
    """The thread id of a ``session_meta`` record; None for other records."""
    if data.get("type") != "session_meta":
        return None
    payload = data.get("payload")
    value = payload.get("id") if isinstance(payload, dict) else None
    return value if isinstance(value, str) else None


def last_total(records: Sequence[Record]) -> Tokens | None:
    """The newest running total among `records`; None if they hold none."""
    for record in reversed(records):
        total = _total(record.data)
        if total is not None:
            return total
    return None


def open_calls(records: Sequence[Record]) -> list[PendingCall]:
    """The function and custom tool calls among `records` that no output among them answers,
    in file order."""
    calls: dict[str, PendingCall] = {}
    answered: set[str] = set()
    cwd: str | None = None
    for record in records:
        payload = record.data.get("payload")
        if not isinstance(payload, dict):
            continue
        if record.data.get("type") == "turn_context":
            given_cwd = payload.get("cwd")
            cwd = given_cwd if isinstance(given_cwd, str) else None
            continue
        if record.data.get("type") != "response_item":
            continue
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            continue
        if payload.get("type") in ("function_call_output", "custom_tool_call_output"):
            answered.add(call_id)
        elif payload.get("type") == "custom_tool_call" and isinstance(payload.get("name"), str):
            given = payload.get("input")
            calls.setdefault(
                call_id,
                PendingCall(
                    call_id,
                    payload["name"],
                    None,
                    input_digest(given),
                    patches=file_patch(given, cwd) if payload["name"] == PATCH_TOOL else None,
                ),
            )
        elif payload.get("type") == "function_call" and isinstance(payload.get("name"), str):
            given = _arguments(payload.get("arguments"))
            calls.setdefault(
                call_id,
                PendingCall(
                    call_id,
                    payload["name"],
                    _command(given),
                    input_digest(given),
                    asked_questions(given),
                ),
            )
    return [call for call_id, call in calls.items() if call_id not in answered]


def _arguments(raw: object) -> object:
    """A call's arguments: the JSON object its text holds, else the text itself."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _command(given: object) -> str | None:
    """The command string of an ``exec_command`` call (``cmd``); None for any other shape.

    Only ``cmd`` is verified on the pinned versions: a call whose command comes
    in another shape (an argv list) is never matched to a screen.
    """
    cmd = given.get("cmd") if isinstance(given, dict) else None
    return cmd if isinstance(cmd, str) else None


def progress(records: Sequence[Record], anchor: int, baseline: Tokens | None) -> Progress:
    """What the records prove about the Turn whose user message is ``records[anchor]``.

    `baseline` is the running total at the binding point (None: unknown).
    `session_id` and `end_offset` are left for the caller to fill in.
    """
    turn_id = _payload(records[anchor].data, "item_completed").get("turn_id")
    total: Tokens | None = None
    end: Mapping[str, Any] = {}
    asked: list[str] = []  # the titles of the async questions the turn asked so far
    person = 0
    for record in records[anchor + 1 :]:
        counted = _total(record.data)
        if counted is not None:
            total = counted
        item = _payload(record.data, "item_completed")
        if item.get("turn_id") == turn_id:
            asked.extend(_asked(item.get("item")))
            text = prompt_text(record.data)
            if text is not None and not any(text.startswith(f"> {t}\n\n") for t in asked):
                person += 1
        payload = record.data.get("payload")
        if (
            record.data.get("type") == "event_msg"
            and isinstance(payload, dict)
            and payload.get("type") in _ENDS
            and payload.get("turn_id") == turn_id
        ):
            end = payload
            break
    outcome: Outcome | None = None
    final_message = failure = None
    if end.get("type") == "turn_aborted":
        if end.get("reason") == "interrupted":
            outcome = "cancelled"
        else:
            outcome, failure = "failed", f"turn_aborted: {end.get('reason')}"
    elif end.get("type") == "task_complete":
        error = end.get("error")
        if isinstance(error, dict):
            outcome = "failed"
            failure = f"api_error: {_error_message(error.get('message'))}"[:FAILURE_CHARS]
        else:
            outcome = "done"
            message = end.get("last_agent_message")
            final_message = message if isinstance(message, str) else None
    usage = None if baseline is None else (baseline if total is None else total) - baseline
    if usage is None or usage.negative:
        usage, status = None, UsageStatus.UNKNOWN
    elif outcome in ("done", "failed"):
        status = UsageStatus.COMPLETE
    else:
        status = UsageStatus.PARTIAL
    return Progress(
        accepted=True,
        session_id=None,
        outcome=outcome,
        final_message=final_message,
        failure=failure,
        usage=usage,
        usage_status=status,
        person_messages=person,
    )


def _asked(item: object) -> list[str]:
    """The question titles of an async question's ``AgentMessage`` (none for other items)."""
    if not isinstance(item, dict) or item.get("delivery") != "async":
        return []
    questions = item.get("questions")
    if not isinstance(questions, list):
        return []
    return [
        q["title"] for q in questions if isinstance(q, dict) and isinstance(q.get("title"), str)
    ]


def _payload(data: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    payload = data.get("payload")
    if data.get("type") != "event_msg" or not isinstance(payload, dict):
        return {}
    return payload if payload.get("type") == kind else {}


def _total(data: Mapping[str, Any]) -> Tokens | None:
    """The running total of a ``token_count`` event, mapped to `Tokens`."""
    info = _payload(data, "token_count").get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict):
        return None

    def count(key: str) -> int:
        value = total.get(key)
        return value if isinstance(value, int) else 0

    cached, written = count("cached_input_tokens"), count("cache_write_input_tokens")
    return Tokens(
        input=count("input_tokens") - cached - written,
        output=count("output_tokens"),
        cache_read=cached,
        cache_write=written,
    )


def _error_message(raw: object) -> str:
    """The API's own message when the error text is a JSON error body, else the text."""
    text = str(raw)
    try:
        body = json.loads(text)
    except ValueError:
        return text
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else text
