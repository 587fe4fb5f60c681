"""JSON-RPC 2.0 framing: one text frame in, one validated Request or an RpcError out.

Before any schema check a frame must nest at most ``MAX_DEPTH`` arrays and
objects and hold no lone surrogate in any string (no store, digest or key can
take one); both are refused as ``invalid_params`` with a next step, like every
other fault of a frame, so no input reaches a method that the schema has not
passed.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from typing import Any

import attrs
import jsonschema

from akk.protocol.errors import Code, Reason, RpcError
from akk.protocol.schema import (
    LABEL_FORMAT,
    MAX_ID_CHARS,
    METHODS,
    OPERATOR_METHODS,
    PATH_FORMAT,
)

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a frame may have; the request object is depth 1."""
_MAX_INT_ID = 2**53  # the integers a JSON peer can represent exactly
RequestId = str | int | None  # None only in replies to frames whose id could not be read

_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks(LABEL_FORMAT)
def _is_label(value: object) -> bool:
    """Printable text only (what a person reads in `akk sessions` or an audit row)."""
    return not isinstance(value, str) or value.isprintable()


@_FORMATS.checks(PATH_FORMAT)
def _is_path(value: object) -> bool:
    """No control character: the OS refuses NUL, and the rest are never a real workspace."""
    return not isinstance(value, str) or not any(
        unicodedata.category(c) in ("Cc", "Cs") for c in value
    )


_VALIDATORS = {
    name: jsonschema.Draft202012Validator(spec["params"], format_checker=_FORMATS)
    for name, spec in (METHODS | OPERATOR_METHODS).items()
}


def _most_items(schema: object) -> int:
    """The largest ``maxItems`` of any array ``schema`` allows (asserting each has one)."""
    if isinstance(schema, list):
        return max((_most_items(part) for part in schema), default=0)
    if not isinstance(schema, dict):
        return 0
    most = max((_most_items(part) for part in schema.values()), default=0)
    kind = schema.get("type")
    if kind == "array" or (isinstance(kind, list) and "array" in kind):
        assert "maxItems" in schema, f"a params array without maxItems: {schema}"
        most = max(most, schema["maxItems"])
    return most


MAX_ITEMS = max(_most_items(spec["params"]) for spec in (METHODS | OPERATOR_METHODS).values())
"""The longest array any method's params take: a longer one is refused before the schema
checks its items (which costs the thread about 50 µs an item: 0.65 s for 12,000 answers)."""


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
    except RecursionError:
        # Deeper than the parser's own recursion limit, far past MAX_DEPTH.
        raise _too_deep(None) from None
    except ValueError:
        raise _error(
            None, Code.PARSE_ERROR, "the frame is not valid JSON; send one JSON object"
        ) from None
    if not isinstance(message, dict):
        raise _error(None, Code.INVALID_REQUEST, "send one JSON-RPC request object per frame")
    request_id = message.get("id")
    # A JSON-RPC notification (no id) is refused with a reply, against the spec's silence:
    # every method's result matters, and one run unanswered could type into a pane unseen
    # (docs/limits.md).
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        raise _error(
            None, Code.INVALID_REQUEST, "every call needs an 'id' that is a string or an integer"
        )
    if (isinstance(request_id, str) and len(request_id) > MAX_ID_CHARS) or (
        isinstance(request_id, int) and abs(request_id) > _MAX_INT_ID
    ):
        raise _error(
            None,
            Code.INVALID_REQUEST,
            f"a call's 'id' may be at most {MAX_ID_CHARS} characters or an integer within "
            "±2^53; use a shorter id",
        )
    _check_structure(request_id, message)
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
    error = _meant(_VALIDATORS[method].iter_errors(params))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "params"
        raise _error(
            request_id,
            Code.INVALID_PARAMS,
            f"{method}: {where}: {_shorten(_explain(error), 400)}; nothing was sent or "
            f"recorded; `akk schema` shows the params of {method}",
        )
    return Request(id=request_id, method=method, params=params)


@attrs.frozen
class Encoded:
    """A result already encoded as JSON text; its reply frame carries ``json`` as it is."""

    json: str


def result_frame(request_id: RequestId, result: Any) -> str:
    if isinstance(result, Encoded):
        return f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "result": {result.json}}}'
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_frame(request_id: RequestId, error: RpcError) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()})


def _check_structure(request_id: RequestId, message: dict[str, Any]) -> None:
    """Refuse nesting deeper than MAX_DEPTH and lone surrogates, walking without recursion."""
    stack: list[tuple[Any, int, str]] = [(message, 1, "")]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and _has_lone_surrogate(value):
                raise _error(
                    request_id,
                    Code.INVALID_PARAMS,
                    f"{where or 'the frame'} holds a lone surrogate (an unpaired \\ud800-"
                    "\\udfff escape), which is no character; send valid UTF-16 pairs or the "
                    "characters themselves",
                    detail="lone_surrogate",
                )
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(request_id)
        if isinstance(value, list) and len(value) > MAX_ITEMS:
            raise _error(
                request_id,
                Code.INVALID_PARAMS,
                f"{where or 'the frame'} holds {len(value)} items; no call takes more than "
                f"{MAX_ITEMS} in one array. `akk schema` shows each method's params",
            )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            path = f"{where}/{key}" if where else str(key)
            stack.append((item, depth + 1, _shorten(path, 80)))
            if isinstance(key, str):  # popped first: a bad name is reported as such
                stack.append((key, depth, f"the name {_shorten(path, 80)!r}"))


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _too_deep(request_id: RequestId) -> FramingError:
    return FramingError(
        request_id,
        Reason.INVALID_PARAMS,
        f"the frame nests arrays and objects more than {MAX_DEPTH} deep; no call needs that "
        "many, so send flatter params (`akk schema` shows each method's)",
        code=Code.INVALID_REQUEST,
        detail="too_deep",
    )


def _meant(errors: Iterable[jsonschema.ValidationError]) -> jsonschema.ValidationError | None:
    """The error to report: jsonschema's best match, except that a failed ``oneOf`` is
    explained by the branch the caller evidently meant (the least `_astray`), not the first
    sibling error its ranking happens to prefer; with no such branch, by the ``oneOf``."""
    best = max(errors, key=jsonschema.exceptions.relevance, default=None)
    if best is None or best.validator != "oneOf" or not best.context:
        return None if best is None else jsonschema.exceptions.best_match([best])
    branches: dict[object, list[jsonschema.ValidationError]] = {}
    for error in best.context:
        branches.setdefault(error.relative_schema_path[0], []).append(error)
    ranked = sorted(branches.values(), key=_astray)
    if len(ranked) > 1 and _astray(ranked[0]) == _astray(ranked[1]):
        return best  # no branch stands out: say which shapes there are
    return _meant(ranked[0])


def _astray(branch: list[jsonschema.ValidationError]) -> int:
    """How plainly a oneOf branch is not the one the caller meant: each field it needs that
    is missing, each field it does not take, and each discriminating value (a ``const`` or
    ``enum`` one level down, like an answer's ``response_kind``) that does not match."""
    return sum(
        1
        for error in branch
        if (error.validator in ("required", "additionalProperties") and not error.relative_path)
        or (error.validator in ("const", "enum") and len(error.relative_path) == 1)
    )


def _explain(error: jsonschema.ValidationError) -> str:
    """What rule a field broke, in words; never the caller's value (it may be long, secret
    or made to mislead whoever reads the error)."""
    rule = error.validator
    limit: Any = error.validator_value
    instance: Any = error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}
    description = schema.get("description")
    if rule == "maxLength":
        return f"more than {limit:,} characters"
    if rule == "minLength":
        return "empty" if limit == 1 else f"fewer than {limit:,} characters"
    if rule in ("pattern", "format") and isinstance(description, str):
        return f"must be {description}"
    if rule == "pattern":
        return "is not of the allowed form"
    if rule == "format":
        return f"is not a valid {limit}"
    if rule == "maxItems":
        return f"more than {limit:,} items"
    if rule == "minItems":
        return f"fewer than {limit:,} items"
    if rule == "enum":
        return "must be one of " + ", ".join(json.dumps(choice) for choice in limit)
    if rule == "const":
        return f"must be {json.dumps(limit)}"
    if rule == "type":
        kinds = limit if isinstance(limit, list) else [limit]
        return "must be " + " or ".join(f"a JSON {kind}" for kind in kinds)
    if rule in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        words = {
            "minimum": "at least",
            "maximum": "at most",
            "exclusiveMinimum": "more than",
            "exclusiveMaximum": "less than",
        }
        return f"must be {words[rule]} {limit}"
    if rule == "required":  # names the schema's field, never a value
        missing = next(name for name in limit if name not in instance)
        choices = schema.get("properties", {}).get(missing, {}).get("enum")
        also = "" if choices is None else " (" + ", ".join(json.dumps(c) for c in choices) + ")"
        return f"{missing!r} is required{also}"
    if rule == "additionalProperties":
        # The names are the caller's (bounded by `_shorten`); the values are never shown.
        unexpected = sorted(set(instance) - set(schema.get("properties", {})))
        names = ", ".join(repr(name) for name in unexpected)
        also = f" ({description})" if isinstance(description, str) else ""
        return f"{names} not allowed here{also}"
    if rule == "oneOf":
        shapes = " | ".join("{" + ", ".join(branch.get("required", ())) + "}" for branch in limit)
        return f"give the fields of exactly one of {shapes}"
    return f"breaks the schema's {rule!r} rule"


def _error(
    request_id: RequestId,
    code: Code,
    message: str,
    *,
    reason: Reason = Reason.INVALID_PARAMS,
    detail: str | None = None,
) -> FramingError:
    return FramingError(request_id, reason, message, code=code, detail=detail)


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
