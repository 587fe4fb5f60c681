"""The Anthropic Messages API as Claude Code uses it: reading requests, writing replies.

Claude Code posts `/v1/messages?beta=true` (streaming SSE) for the conversation
and also sends side requests (token counting, titles, probes) that are not the
conversation; see tools/lab/NOTES.md for the shapes observed per version.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from akk.qualify import wire
from akk.qualify.scenarios import (
    ApiError,
    ApplyPatch,
    AskUserQuestion,
    Bash,
    ClaudeTool,
    ExecCommand,
    Reply,
    RequestUserInput,
    RequestUserInputAsync,
    SlowText,
    Text,
)
from akk.qualify.wire import Hold, Usage, WireReply, json_reply, sse_event

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}

KEEPALIVE = sse_event({"type": "ping"})

_SYSTEM_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.DOTALL)


def _wants_json(body: Mapping[str, object] | None) -> bool:
    """True when the request asks for JSON-schema output (`output_config.format`)."""
    return wire.asks_json_schema(body.get("output_config") if body else None)


def is_auxiliary(method: str, path: str, body: Mapping[str, object] | None) -> bool:
    """True unless this is a conversation turn: a POST to /v1/messages that offers tools.

    Title generation and probes are posts to /v1/messages too, but without tools.
    """
    return wire.is_side_request(method, path, body, "/v1/messages", _wants_json(body))


def _text_of(content: object) -> str:
    """The text blocks of a message, without the `<system-reminder>` context Claude Code adds."""
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, Sequence):
        texts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        ]
    else:
        return ""
    stripped = (_SYSTEM_REMINDER.sub("", text).strip() for text in texts)
    return "\n".join(text for text in stripped if text)


def newest_input(body: Mapping[str, object] | None) -> str:
    """The last user message: its tool_result texts if it carries any, else its text.

    The message list may end with non-user entries (a `system` role), so the
    last `user` message is the one that counts.
    """
    messages = body.get("messages") if body else None
    if not isinstance(messages, Sequence):
        return ""
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, Sequence) and not isinstance(content, str):
            results = [
                _text_of(block.get("content"))
                for block in content
                if isinstance(block, Mapping) and block.get("type") == "tool_result"
            ]
            if results:
                return "\n".join(results)
        return _text_of(content)
    return ""


def auxiliary_reply(body: Mapping[str, object] | None) -> Text:
    """A side request's answer: a JSON title when the client asks for structured output.

    Claude Code names sessions with a tool-less request whose
    `output_config.format` is a JSON schema with a `title` property.
    """
    return wire.side_reply(_wants_json(body))


def _usage_json(usage: Usage) -> dict[str, object]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": usage.output_tokens,
    }


def tool_input(reply: AskUserQuestion | Bash | ClaudeTool) -> tuple[str, Mapping[str, object]]:
    """The tool name and input Claude Code expects for a tool-call reply."""
    if isinstance(reply, Bash):
        return "Bash", {"command": reply.command, "description": reply.description}
    if isinstance(reply, ClaudeTool):
        return reply.name, reply.input
    return "AskUserQuestion", {
        "questions": [
            {
                "question": q.question,
                "header": q.header,
                "multiSelect": q.multi_select,
                "options": [{"label": o.label, "description": o.description} for o in q.options],
            }
            for q in reply.questions
        ]
    }


def error_reply(status: int, message: str) -> WireReply:
    """An Anthropic error body with the error type that belongs to the status."""
    kind = _ERROR_TYPES.get(status, "api_error")
    return json_reply(status, {"type": "error", "error": {"type": kind, "message": message}})


def render(
    reply: Reply,
    *,
    body: Mapping[str, object] | None,
    usage: Usage,
    ordinal: int,
) -> WireReply:
    """The HTTP response carrying `reply`, streamed if the request asked for a stream."""
    if isinstance(reply, ApiError):
        return error_reply(reply.status, reply.message)
    if isinstance(reply, RequestUserInput | RequestUserInputAsync | ExecCommand | ApplyPatch):
        return error_reply(
            400,
            f"lab: {type(reply).__name__} is Codex-only; use a Claude reply kind here",
        )
    model = str(body.get("model", "lab-model")) if body else "lab-model"
    message_id = f"msg_lab_{ordinal}"
    streaming = bool(body and body.get("stream"))
    if isinstance(reply, Text | SlowText):
        block: dict[str, object] = {"type": "text", "text": reply.text}
        stop_reason = "end_turn"
    else:
        name, arguments = tool_input(reply)
        block = {"type": "tool_use", "id": f"toolu_lab_{ordinal}", "name": name, "input": arguments}
        stop_reason = "tool_use"
    if not streaming:
        return json_reply(
            200,
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": _usage_json(usage),
            },
        )
    parts: list[bytes | Hold] = [
        sse_event(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**_usage_json(usage), "output_tokens": 1},
                },
            }
        )
    ]
    if isinstance(reply, Text | SlowText):
        parts.append(
            sse_event(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
            )
        )
        parts += wire.streamed(
            reply,
            lambda chunk: sse_event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": chunk},
                }
            ),
        )
    else:
        parts.append(
            sse_event(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {**block, "input": {}},
                }
            )
        )
        parts.append(
            sse_event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": json.dumps(block["input"]),
                    },
                }
            )
        )
    parts.append(sse_event({"type": "content_block_stop", "index": 0}))
    if isinstance(reply, Bash) and reply.close_held is not None:
        parts.append(Hold(reply.close_held))
    parts.append(
        sse_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": _usage_json(usage),
            }
        )
    )
    parts.append(sse_event({"type": "message_stop"}))
    return WireReply(200, "text/event-stream", tuple(parts), KEEPALIVE)


def count_tokens_reply(usage: Usage) -> WireReply:
    """Reply to /v1/messages/count_tokens."""
    return json_reply(200, {"input_tokens": usage.input_tokens})
