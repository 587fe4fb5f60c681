"""JSON-RPC 2.0 framing: one text frame in, one validated Request or an RpcError out."""

from __future__ import annotations

import json
from typing import Any

import attrs
import jsonschema

from akk.protocol.errors import Code, Reason, RpcError
from akk.protocol.schema import METHODS, OPERATOR_METHODS

MAX_ID_LENGTH = 128
"""Longest string id a call may carry (every reply echoes it)."""
_MAX_INT_ID = 2**53  # the integers a JSON peer can represent exactly
RequestId = str | int | None  # None only in replies to frames whose id could not be read

_VALIDATORS = {
    name: jsonschema.Draft202012Validator(spec["params"])
    for name, spec in (METHODS | OPERATOR_METHODS).items()
}


@attrs.frozen
class Request:
    """A well-formed call to a known method with params valid for it."""

    id: str | int
    method: str
    params: dict[str, Any]


class FramingError(RpcError):
    """An RpcError that also knows which request id it answers, if any."""

    def __init__(self, request_id: RequestId, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request_id = request_id


def parse_request(frame: str | bytes) -> Request:
    """Parse and validate one frame; raise RpcError with the right code and reason.

    The RpcError's ``request_id`` attribute carries the id when it could be
    read, so the error reply can name the call it answers.
    """
    if isinstance(frame, bytes):
        raise _error(None, Code.INVALID_REQUEST, "binary frames are not accepted; send JSON text")
    try:
        message = json.loads(frame)
    except (ValueError, RecursionError):
        raise _error(
            None, Code.PARSE_ERROR, "the frame is not valid JSON; send one JSON object"
        ) from None
    if not isinstance(message, dict):
        raise _error(None, Code.INVALID_REQUEST, "send one JSON-RPC request object per frame")
    request_id = message.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        raise _error(
            None, Code.INVALID_REQUEST, "every call needs an 'id' that is a string or an integer"
        )
    if (isinstance(request_id, str) and len(request_id) > MAX_ID_LENGTH) or (
        isinstance(request_id, int) and abs(request_id) > _MAX_INT_ID
    ):
        raise _error(
            None,
            Code.INVALID_REQUEST,
            f"a call's 'id' may be at most {MAX_ID_LENGTH} characters or an integer within "
            "±2^53; use a shorter id",
        )
    if message.get("jsonrpc") != "2.0":
        raise _error(request_id, Code.INVALID_REQUEST, 'set "jsonrpc": "2.0" in every request')
    method = message.get("method")
    if not isinstance(method, str):
        raise _error(request_id, Code.INVALID_REQUEST, "'method' must be a string")
    if method not in _VALIDATORS:
        raise _error(
            request_id,
            Code.METHOD_NOT_FOUND,
            f"unknown method {method[:64]!r}; `akk schema` lists the methods",
            reason=Reason.NOT_FOUND,
        )
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise _error(request_id, Code.INVALID_PARAMS, "'params' must be a JSON object")
    error = jsonschema.exceptions.best_match(_VALIDATORS[method].iter_errors(params))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "params"
        raise _error(
            request_id,
            Code.INVALID_PARAMS,
            f"{method}: {where}: {_shorten(error.message)}; "
            f"`akk schema` shows the params of {method}",
        )
    return Request(id=request_id, method=method, params=params)


def result_frame(request_id: RequestId, result: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_frame(request_id: RequestId, error: RpcError) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()})


def _error(
    request_id: RequestId, code: Code, message: str, *, reason: Reason = Reason.INVALID_PARAMS
) -> FramingError:
    return FramingError(request_id, reason, message, code=code)


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
