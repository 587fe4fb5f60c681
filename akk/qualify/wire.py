"""What the two wire-format modules hand the HTTP server: a reply as bytes to send.

`anthropic_api` and `openai_api` turn a scenario reply into a `WireReply`; the
server in `model_server` only moves bytes and waits at `Hold` markers, so the
formats stay pure and testable without sockets.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import attrs

from akk.qualify.scenarios import SlowText, Text


@attrs.frozen
class Usage:
    """Token counts the scripted model reports for one reply (deterministic per turn)."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @classmethod
    def for_turn(cls, turn: int) -> Usage:
        """Usage of the `turn`-th main request (1-based): every count is a multiple of `turn`."""
        return cls(
            input_tokens=100 * turn,
            output_tokens=10 * turn,
            cache_creation_input_tokens=20 * turn,
            cache_read_input_tokens=50 * turn,
        )


AUXILIARY_USAGE = Usage(input_tokens=5, output_tokens=1)

TITLE = "Lab session"
"""The title the scripted model gives every session when a client asks for one."""


@attrs.frozen
class Hold:
    """Pause point in a stream: wait for the named signal (None: until cancelled)."""

    signal: str | None


@attrs.frozen
class WireReply:
    """An HTTP response: status, content type, body parts, and a keep-alive for holds."""

    status: int
    content_type: str
    parts: tuple[bytes | Hold, ...]
    keepalive: bytes = b""

    @property
    def streaming(self) -> bool:
        """True for an SSE body (sent chunked, part by part)."""
        return self.content_type == "text/event-stream"


def json_reply(status: int, payload: object) -> WireReply:
    """A complete JSON body."""
    return WireReply(status, "application/json", (json.dumps(payload).encode(),))


def sse_event(payload: dict[str, object]) -> bytes:
    """One server-sent event named after the payload's `type`."""
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


def streamed(reply: Text | SlowText, delta: Callable[[str], bytes]) -> list[bytes | Hold]:
    """The `delta` events that stream `reply`'s text, and a slow reply's hold among them.

    A `SlowText` is split after its first word, so the client shows something
    before the stream holds; the rest follows the hold. Empty pieces send nothing.
    """
    if isinstance(reply, SlowText):
        head, sep, tail = reply.text.partition(" ")
        chunks: tuple[str | Hold, ...] = (head + sep, Hold(reply.hold), tail)
    else:
        chunks = (reply.text,)
    return [chunk if isinstance(chunk, Hold) else delta(chunk) for chunk in chunks if chunk]


def asks_json_schema(config: object) -> bool:
    """True when a request's output settings (`output_config`, `text`) name a JSON-schema format."""
    output_format = config.get("format") if isinstance(config, Mapping) else None
    return isinstance(output_format, Mapping) and output_format.get("type") == "json_schema"


def is_side_request(
    method: str, path: str, body: Mapping[str, object] | None, endpoint: str, structured: bool
) -> bool:
    """True unless this is a conversation turn: a POST to `endpoint` that offers tools.

    `structured` is whether the body asks for JSON-schema output: side requests
    do (a JSON title), and some carry tools too (Codex with a model catalog entry
    offers request_user_input_async on titles).
    """
    if method != "POST" or path.split("?")[0] != endpoint or body is None:
        return True
    return not body.get("tools") or structured


def side_reply(structured: bool) -> Text:
    """A side request's answer: the session's JSON title when it asks for structured output."""
    return Text(json.dumps({"title": TITLE})) if structured else Text("ok")
