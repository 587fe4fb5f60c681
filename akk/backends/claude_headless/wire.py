"""Claude Code's stream-json protocol as typed values, both ways; pure, no I/O.

`claude -p --input-format stream-json --output-format stream-json --verbose
--permission-prompt-tool stdio` reads one JSON object per stdin line and writes one
per stdout line. `parse_line` turns one stdout line into a `Message`; a line over
`MAX_LINE_BYTES`, not UTF-8 JSON, nested deeper than `MAX_DEPTH`, not an object, or a
known type missing a field it must carry raises `WireError` with a reason code (never
anything else). So every value a `Message` holds is at most `MAX_DEPTH` deep, and any
later walk of it (`json.dumps` for a fingerprint or a projection) cannot reach
Python's recursion limit, however deep in a stack it runs. Types this
module does not know, and known types with subtypes it does not model, come back as
`Other`, whole. `user_message`, `control_success`, `control_error` and `interrupt`
build stdin lines (each ends in one newline).

The facts behind every shape are in docs/claude_headless.md (proven per pinned
version in tests/lab/test_claude_headless.py, fixtures in fixtures/claude_headless/).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

import attrs

from akk.discovery.pipes import nests_deeper
from akk.evidence.model import Tokens

MAX_LINE_BYTES = 16 << 20
"""The longest stdout line accepted (a tool result or a file read can be megabytes)."""

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a line may hold (Claude's own lines hold a
handful of levels; a tool's input is the model's JSON, bounded here)."""

WireReason = Literal["line_too_long", "not_json", "too_deep", "not_object", "malformed"]


class WireError(ValueError):
    """A stdout line that is not a stream-json message this module can type.

    `reason`: line_too_long (over `MAX_LINE_BYTES`), not_json (not UTF-8 JSON),
    too_deep (arrays and objects nested deeper than `MAX_DEPTH`), not_object (JSON,
    but not an object with a string `type`), malformed (a known
    type without a field it must carry, or with the wrong kind of value).
    """

    def __init__(self, reason: WireReason, detail: str) -> None:
        super().__init__(f"claude stream-json {reason}: {detail}")
        self.reason: WireReason = reason
        self.detail = detail


@attrs.frozen
class Init:
    """`system`/`init`: what the process runs as, before its first model request.

    Sent at the start of every user message's invocation (not at start-up).
    """

    session_id: str
    cwd: str
    model: str
    permission_mode: str
    tools: tuple[str, ...]
    claude_code_version: str | None
    """None if a version omits it (every pinned one sends it)."""
    raw: Mapping[str, object] = attrs.field(eq=False, repr=False)


@attrs.frozen
class Assistant:
    """One assistant message (a model response), its content blocks as given."""

    session_id: str
    message_id: str
    model: str
    content: tuple[Mapping[str, object], ...]
    parent_tool_use_id: str | None
    raw: Mapping[str, object] = attrs.field(eq=False, repr=False)

    @property
    def text(self) -> str:
        """The message's text blocks, joined (empty when it has none)."""
        return "".join(
            str(block.get("text", "")) for block in self.content if block.get("type") == "text"
        )

    @property
    def tool_uses(self) -> tuple[Mapping[str, object], ...]:
        """The message's `tool_use` blocks (id, name, input)."""
        return tuple(block for block in self.content if block.get("type") == "tool_use")


@attrs.frozen
class UserEcho:
    """A `user` message Claude reports: a tool result, or "[Request interrupted by user]".

    The user messages AKK writes are not echoed (no `--replay-user-messages`).
    `content` is the message's content as given: a string or content blocks.
    """

    session_id: str
    content: str | tuple[Mapping[str, object], ...]
    parent_tool_use_id: str | None
    raw: Mapping[str, object] = attrs.field(eq=False, repr=False)


@attrs.frozen
class Result:
    """`result`: the end of one user message's invocation, with its usage.

    subtype `success` (is_error false, `result` the final text) or an error subtype
    such as `error_during_execution` (an interrupt; `result` None, usage zero).
    """

    subtype: str
    is_error: bool
    result: str | None
    stop_reason: str | None
    usage: Tokens
    session_id: str
    terminal_reason: str | None
    """`completed`, `aborted_streaming`, ...; None where the version omits it."""
    raw: Mapping[str, object] = attrs.field(eq=False, repr=False)


@attrs.frozen
class ControlRequest:
    """A `control_request` from Claude, e.g. `can_use_tool`; answer once by `request_id`.

    `request` is the request mapping as given (it includes `subtype`; for
    can_use_tool also `tool_name`, `input`, `tool_use_id`, `permission_suggestions`).
    """

    request_id: str
    subtype: str
    request: Mapping[str, object]


@attrs.frozen
class ControlResponse:
    """Claude's `control_response` to a control request AKK sent (e.g. an interrupt)."""

    request_id: str
    subtype: str
    """`success` or `error`."""
    response: Mapping[str, object] | None
    error: str | None


@attrs.frozen
class ControlCancel:
    """`control_cancel_request`: Claude withdrew the control request `request_id`.

    Sent when an interrupt ends an invocation whose can_use_tool is pending; a late
    answer to it is ignored.
    """

    request_id: str


@attrs.frozen
class Other:
    """Any other line (a `system` subtype other than init, `stream_event`, a new type), kept."""

    type: str
    subtype: str | None
    raw: Mapping[str, object] = attrs.field(eq=False, repr=False)


Message = (
    Init | Assistant | UserEcho | Result | ControlRequest | ControlResponse | ControlCancel | Other
)


def parse_line(line: bytes) -> Message:
    """Type one stdout line (without or with its trailing newline); raises `WireError`."""
    if len(line) > MAX_LINE_BYTES:
        raise WireError("line_too_long", f"{len(line)} bytes, the bound is {MAX_LINE_BYTES}")
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError("not_json", str(exc)) from None
    except RecursionError:
        raise WireError("too_deep", f"nested past the parser's limit (bound {MAX_DEPTH})") from None
    if nests_deeper(line, value, MAX_DEPTH):
        raise WireError("too_deep", f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise WireError("not_object", f"expected an object with a string type, got {line[:80]!r}")
    return _typed(value)


def _typed(value: Mapping[str, object]) -> Message:
    kind = value["type"]
    subtype = value.get("subtype")
    if kind == "system" and subtype == "init":
        return Init(
            session_id=_str(value, "session_id"),
            cwd=_str(value, "cwd"),
            model=_str(value, "model"),
            permission_mode=_str(value, "permissionMode"),
            tools=tuple(_str_list(value, "tools")),
            claude_code_version=_optional_str(value, "claude_code_version"),
            raw=value,
        )
    if kind == "assistant":
        message = _mapping(value, "message")
        return Assistant(
            session_id=_str(value, "session_id"),
            message_id=_str(message, "id"),
            model=_str(message, "model"),
            content=_blocks(message, "content"),
            parent_tool_use_id=_optional_str(value, "parent_tool_use_id"),
            raw=value,
        )
    if kind == "user":
        message = _mapping(value, "message")
        content = message.get("content")
        return UserEcho(
            session_id=_str(value, "session_id"),
            content=content if isinstance(content, str) else _blocks(message, "content"),
            parent_tool_use_id=_optional_str(value, "parent_tool_use_id"),
            raw=value,
        )
    if kind == "result":
        return Result(
            subtype=_str(value, "subtype"),
            is_error=_bool(value, "is_error"),
            result=_optional_str(value, "result"),
            stop_reason=_optional_str(value, "stop_reason"),
            usage=_usage(_mapping(value, "usage")),
            session_id=_str(value, "session_id"),
            terminal_reason=_optional_str(value, "terminal_reason"),
            raw=value,
        )
    if kind == "control_request":
        request = _mapping(value, "request")
        return ControlRequest(_str(value, "request_id"), _str(request, "subtype"), request)
    if kind == "control_response":
        response = _mapping(value, "response")
        inner = response.get("response")
        if inner is not None and not isinstance(inner, dict):
            raise WireError("malformed", "control_response.response.response is not an object")
        return ControlResponse(
            request_id=_str(response, "request_id"),
            subtype=_str(response, "subtype"),
            response=inner,
            error=_optional_str(response, "error"),
        )
    if kind == "control_cancel_request":
        return ControlCancel(_str(value, "request_id"))
    return Other(str(kind), subtype if isinstance(subtype, str) else None, value)


def _field(value: Mapping[str, object], key: str) -> object:
    if key not in value:
        raise WireError("malformed", f"{value.get('type', 'object')} has no {key!r}")
    return value[key]


def _str(value: Mapping[str, object], key: str) -> str:
    field = _field(value, key)
    if not isinstance(field, str):
        raise WireError("malformed", f"{key!r} is {type(field).__name__}, not a string")
    return field


def _optional_str(value: Mapping[str, object], key: str) -> str | None:
    field = value.get(key)
    if field is not None and not isinstance(field, str):
        raise WireError("malformed", f"{key!r} is {type(field).__name__}, not a string")
    return field


def _bool(value: Mapping[str, object], key: str) -> bool:
    field = _field(value, key)
    if not isinstance(field, bool):
        raise WireError("malformed", f"{key!r} is {type(field).__name__}, not a boolean")
    return field


def _int(value: Mapping[str, object], key: str) -> int:
    field = value.get(key, 0)
    if isinstance(field, bool) or not isinstance(field, int) or field < 0:
        raise WireError("malformed", f"{key!r} is {field!r}, not a token count")
    return field


def _mapping(value: Mapping[str, object], key: str) -> Mapping[str, object]:
    field = _field(value, key)
    if not isinstance(field, dict):
        raise WireError("malformed", f"{key!r} is {type(field).__name__}, not an object")
    return field


def _str_list(value: Mapping[str, object], key: str) -> list[str]:
    field = _field(value, key)
    if not isinstance(field, list) or not all(isinstance(item, str) for item in field):
        raise WireError("malformed", f"{key!r} is not a list of strings")
    return field


def _blocks(value: Mapping[str, object], key: str) -> tuple[Mapping[str, object], ...]:
    field = _field(value, key)
    if not isinstance(field, list) or not all(isinstance(item, dict) for item in field):
        raise WireError("malformed", f"{key!r} is not a list of content blocks")
    return tuple(field)


def _usage(usage: Mapping[str, object]) -> Tokens:
    """Missing counts are zero (Claude omits cache counts the API did not send)."""
    return Tokens(
        input=_int(usage, "input_tokens"),
        output=_int(usage, "output_tokens"),
        cache_read=_int(usage, "cache_read_input_tokens"),
        cache_write=_int(usage, "cache_creation_input_tokens"),
    )


def user_message(text: str, *, uuid: str | None = None) -> bytes:
    """The stdin line that sends `text` as the next user message.

    `uuid` names the message: every pinned Claude stores it as the user record's
    ``uuid`` in the session's transcript, where `transcript.read_round` finds it.
    """
    message: dict[str, object] = {"type": "user", "message": {"role": "user", "content": text}}
    if uuid is not None:
        message["uuid"] = uuid
    return _line(message)


def control_success(request_id: str, response: Mapping[str, object]) -> bytes:
    """The stdin line that answers control request `request_id` with `response`.

    For can_use_tool the mapping is the permission decision (`{"behavior": "allow",
    "updatedInput": ...}` or `{"behavior": "deny", "message": ...}`); its content is
    the caller's.
    """
    return _line(
        {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": response},
        }
    )


def control_error(request_id: str, message: str) -> bytes:
    """The stdin line that answers control request `request_id` with an error."""
    return _line(
        {
            "type": "control_response",
            "response": {"subtype": "error", "request_id": request_id, "error": message},
        }
    )


def interrupt(request_id: str) -> bytes:
    """The stdin line that interrupts the running invocation (every pinned version has it).

    Claude answers with a `ControlResponse` for `request_id`, then the invocation
    ends with an error `Result` (`error_during_execution`, terminal_reason
    `aborted_streaming`) and the model stream is closed.
    """
    return _line(
        {"type": "control_request", "request_id": request_id, "request": {"subtype": "interrupt"}}
    )


def _line(value: Mapping[str, object]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"
