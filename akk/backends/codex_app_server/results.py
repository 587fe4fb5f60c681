"""What AKK reads of the app-server's answers to its own requests, each checked first.

Pure. A result of another shape than the pinned protocol's (`thread/start` without a
text `thread.id`, `thread/read` with a `status` that is no object) is the app-server
misbehaving: `WrongShape`, which the BackendActor makes that step's failure, recorded
as what may have happened. Never an exception out of the actor: that would end the
process and every Turn on it, and the next look would ask again and end the next one.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.board import final_message
from akk.evidence import request_digest
from akk.protocol.redaction import redact_head

T = TypeVar("T")


class WrongShape(rpc.AppServerError):
    """The app-server answered one of AKK's requests with a result of the wrong shape."""

    def __init__(self, method: str, why: str) -> None:
        super().__init__(f"the app-server answered {method} with a result of the wrong shape "
                         f"({why})")  # fmt: skip
        self.method = method
        self.why = why


@attrs.frozen
class NativeRecord:
    """One turn as the thread's own history holds it."""

    turn_id: str
    status: str
    request_sha256: str | None
    """Digest of the turn's user message text (what AKK sent, if AKK sent it)."""
    final_message: str | None
    error: str | None


@attrs.frozen
class ThreadFacts:
    found: bool
    """False: the app-server does not know the thread (missing)."""
    status: str | None
    turns: tuple[NativeRecord, ...] = ()
    why: str = ""


@attrs.frozen
class Unreadable:
    """The app-server answered thread/read with a result of the wrong shape: nothing is
    known of the thread (``why`` names the field, never its content)."""

    why: str


def config_of(result: object) -> dict[str, Any]:
    """config/read: its `config` (absent or null: none set)."""
    config = _optional(result, "config/read", "config", dict)
    return {} if config is None else config


def thread_id_of(result: object) -> str:
    """thread/start: the new thread's id."""
    thread = _field(result, "thread/start", "thread", dict)
    return _field(thread, "thread/start", "thread.id", str)


def turn_id_of(result: object) -> str:
    """turn/start: the new turn's id."""
    turn = _field(result, "turn/start", "turn", dict)
    return _field(turn, "turn/start", "turn.id", str)


def thread_facts(result: object) -> ThreadFacts:
    """thread/read (with turns): the thread's status and its turns, oldest first."""
    method = "thread/read"
    thread = _field(result, method, "thread", dict)
    status = _optional(thread, method, "thread.status", dict) or {}
    kind = _optional(status, method, "thread.status.type", str)
    listed = _optional(thread, method, "thread.turns", list) or []
    return ThreadFacts(True, kind, tuple(_native_record(turn) for turn in listed))


def _native_record(turn: object) -> NativeRecord:
    method = "thread/read"
    turn_id = _field(turn, method, "thread.turns[].id", str)
    status = _field(turn, method, "thread.turns[].status", str)
    error = _optional(turn, method, "thread.turns[].error", dict)
    message = None if error is None else _field(error, method, "thread.turns[].error.message", str)
    items = _optional(turn, method, "thread.turns[].items", list) or []
    texts = [
        part["text"]
        for item in items
        if isinstance(item, dict) and item.get("type") == "userMessage"
        for part in item.get("content") or []
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ]
    return NativeRecord(
        turn_id=turn_id,
        status=status,
        request_sha256=request_digest(texts[0]) if texts else None,
        final_message=final_message(items),
        error=None if message is None else redact_head(message, 300),
    )


def _field(value: object, method: str, path: str, kind: type[T]) -> T:
    """``value``'s field named by the last part of ``path``, of type ``kind``; else
    WrongShape naming ``path``."""
    found = _optional(value, method, path, kind)
    if found is None:
        raise WrongShape(method, f"{path} is no {_NAMES[kind]}")
    return found


def _optional(value: object, method: str, path: str, kind: type[T]) -> T | None:
    """As `_field`, but None when the field is absent or null."""
    parent, _, key = path.rpartition(".")
    if not isinstance(value, dict):
        raise WrongShape(method, f"{parent or 'the result'} is no object")
    found = value.get(key)
    if found is not None and not isinstance(found, kind):
        raise WrongShape(method, f"{path} is no {_NAMES[kind]}")
    return found


_NAMES: dict[type[Any], str] = {dict: "object", list: "array", str: "text"}
