"""What the two wire-format modules hand the HTTP server: a reply as bytes to send.

`anthropic_api` and `openai_api` turn a scenario reply into a `WireReply`; the
server in `model_server` only moves bytes and waits at `Hold` markers, so the
formats stay pure and testable without sockets.
"""

from __future__ import annotations

import json

import attrs


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


def split_first_word(text: str) -> tuple[str, str]:
    """Split text after its first word, so a slow stream shows something before it holds."""
    head, sep, tail = text.partition(" ")
    return head + sep, tail
