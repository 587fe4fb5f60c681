"""The OpenAI Responses API as Codex uses it: reading requests, writing replies.

Codex posts `/v1/responses` (SSE) for the conversation and for side requests
such as thread titles, which carry no tools; see tools/lab/NOTES.md.
"""

from __future__ import annotations

import json
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

_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}

_OUTPUT_ITEM_TYPES = ("function_call_output", "custom_tool_call_output")


def _wants_json(body: Mapping[str, object] | None) -> bool:
    """True when the request asks for JSON-schema output (`text.format`)."""
    return wire.asks_json_schema(body.get("text") if body else None)


def is_auxiliary(method: str, path: str, body: Mapping[str, object] | None) -> bool:
    """True unless this is a conversation turn: a POST to /v1/responses that offers tools."""
    return wire.is_side_request(method, path, body, "/v1/responses", _wants_json(body))


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("input_text", "output_text")
        )
    return ""


def newest_input(body: Mapping[str, object] | None) -> str:
    """The newest user message text or function_call_output in the request's `input`."""
    items = body.get("input") if body else None
    if isinstance(items, str):
        return items
    if not isinstance(items, Sequence):
        return ""
    for item in reversed(items):
        if not isinstance(item, Mapping):
            continue
        if item.get("type") in _OUTPUT_ITEM_TYPES:
            return _text_of(item.get("output"))
        if item.get("role") == "user" and item.get("type", "message") == "message":
            return _text_of(item.get("content"))
    return ""


def auxiliary_reply(body: Mapping[str, object] | None) -> Text:
    """A side request's answer: a JSON title when the client asks for structured output.

    Codex names threads with a tool-less request whose `text.format` is a
    JSON schema with a `title` property.
    """
    return wire.side_reply(_wants_json(body))


def usage_json(usage: Usage) -> dict[str, object]:
    """Responses-API usage: `input_tokens` includes the cached part, as OpenAI reports it."""
    total_input = usage.input_tokens + usage.cache_read_input_tokens
    return {
        "input_tokens": total_input,
        "input_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total_input + usage.output_tokens,
    }


def function_arguments(
    reply: RequestUserInput | RequestUserInputAsync | ExecCommand,
) -> tuple[str, dict[str, object]]:
    """The function name and arguments Codex expects for a tool-call reply."""
    if isinstance(reply, RequestUserInputAsync):
        return "request_user_input_async", {
            "questions": [
                {"title": q.question, "options": [o.label for o in q.options]}
                for q in reply.questions
            ]
        }
    if isinstance(reply, ExecCommand):
        arguments: dict[str, object] = {"cmd": reply.cmd}
        if reply.escalated:
            arguments["sandbox_permissions"] = "require_escalated"
            arguments["justification"] = reply.justification
        return "exec_command", arguments
    return "request_user_input", {
        "questions": [
            {
                "id": f"q{number}",
                "header": q.header,
                "question": q.question,
                "options": [{"label": o.label, "description": o.description} for o in q.options],
                **({"isSecret": True} if q.secret else {}),
            }
            for number, q in enumerate(reply.questions, start=1)
        ]
    }


def error_reply(status: int, message: str) -> WireReply:
    """An OpenAI error body."""
    kind = _ERROR_TYPES.get(status, "server_error")
    return json_reply(
        status, {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    )


def render(
    reply: Reply,
    *,
    body: Mapping[str, object] | None,
    usage: Usage,
    ordinal: int,
) -> WireReply:
    """The HTTP response carrying `reply`: SSE unless the request set `stream: false`."""
    if isinstance(reply, ApiError):
        return error_reply(reply.status, reply.message)
    if isinstance(reply, AskUserQuestion | Bash | ClaudeTool):
        return error_reply(
            400,
            f"lab: {type(reply).__name__} is Claude-only; use a Codex reply kind here",
        )
    response_id = f"resp_lab_{ordinal}"
    item: dict[str, object]
    if isinstance(reply, Text | SlowText):
        item_id = f"msg_lab_{ordinal}"
        item = {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
    elif isinstance(reply, ApplyPatch):
        item = {
            "type": "custom_tool_call",
            "id": f"ctc_lab_{ordinal}",
            "call_id": f"call_lab_{ordinal}",
            "name": "apply_patch",
            "input": reply.patch,
            "status": "completed",
        }
    else:
        name, arguments = function_arguments(reply)
        item = {
            "type": "function_call",
            "id": f"fc_lab_{ordinal}",
            "call_id": f"call_lab_{ordinal}",
            "name": name,
            "arguments": json.dumps(arguments),
            "status": "completed",
        }
    response: dict[str, object] = {
        "id": response_id,
        "object": "response",
        "status": "completed",
        "model": str(body.get("model", "lab-model")) if body else "lab-model",
        "output": [item],
        "usage": usage_json(usage),
    }
    if body is not None and body.get("stream") is False:
        return json_reply(200, response)
    in_progress = {"id": response_id, "object": "response", "status": "in_progress"}
    parts: list[bytes | Hold] = [sse_event({"type": "response.created", "response": in_progress})]
    if isinstance(reply, SlowText):
        parts.append(
            sse_event(
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
        )
        parts += wire.streamed(
            reply,
            lambda chunk: sse_event(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": chunk,
                }
            ),
        )
    else:
        parts.append(
            sse_event({"type": "response.output_item.added", "output_index": 0, "item": item})
        )
    parts.append(sse_event({"type": "response.output_item.done", "output_index": 0, "item": item}))
    parts.append(sse_event({"type": "response.completed", "response": response}))
    keepalive = sse_event({"type": "response.in_progress", "response": in_progress})
    return WireReply(200, "text/event-stream", tuple(parts), keepalive)


def model_catalog(model: str) -> dict[str, object]:
    """A Codex `model_catalog_json` document describing the lab model.

    With it Codex knows the model (no "Model metadata ... not found" warning)
    and, because of `experimental_supported_tools`, offers the model
    `request_user_input_async` (0.153.4 through 0.169.0; see NOTES.md).
    Write it to a file and set `model_catalog_json = "<path>"` in config.toml.
    """
    entry: dict[str, object] = {
        "slug": model,
        "display_name": model,
        "description": "The AKK lab's scripted model.",
        "base_instructions": "You are the AKK lab's scripted model.",
        "prefer_websockets": False,
        "support_verbosity": True,
        "default_verbosity": "low",
        "apply_patch_tool_type": "freeform",
        "web_search_tool_type": "text_and_image",
        "input_modalities": ["text", "image"],
        "supports_image_detail_original": True,
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "supports_parallel_tool_calls": True,
        "tool_mode": None,
        "multi_agent_version": None,
        "use_responses_lite": False,
        "include_skills_usage_instructions": False,
        "include_apps_usage_instructions": False,
        "include_plugin_usage_instructions": False,
        "node_repl_auto_review_required": False,
        "node_repl_disabled": False,
        "auto_review_model_override": None,
        "model_specialty": None,
        "context_window": 272000,
        "max_context_window": 272000,
        "auto_compact_token_limit": None,
        "comp_hash": "lab",
        "default_reasoning_summary": "none",
        "default_reasoning_level": "medium",
        "supported_reasoning_levels": [
            {"effort": "low", "description": "Fast responses with lighter reasoning"},
            {"effort": "medium", "description": "Balanced reasoning"},
            {"effort": "high", "description": "Deeper reasoning"},
        ],
        "shell_type": "unified_exec",
        "visibility": "list",
        "minimal_client_version": "0.124.0",
        "supported_in_api": True,
        "availability_nux": None,
        "upgrade": None,
        "priority": 1,
        "experimental_supported_tools": ["request_user_input_async"],
        "available_in_plans": [],
        "supports_search_tool": False,
        "default_service_tier": None,
        "service_tiers": [],
        "additional_speed_tiers": [],
        "supports_reasoning_summary_parameter": True,
        "supports_reasoning_summaries": True,
    }
    return {"models": [entry]}
