"""The tools' input schemas against the shipped JSON Schema: a lifted choice loses nothing.

A params schema with a top-level oneOf becomes a flat object schema plus a
sentence (model APIs refuse top-level combinators). Over every combination of
the shapes' fields, the exact schema accepts a call exactly when the flat schema
does and the sentence's rule holds: the fields of exactly one shape, and none of
another's.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from akk.mcp.tools import BRIDGED, BY_NAME, input_schema, tool_name
from akk.protocol.schema import METHODS

UUID = "0b7e6a3c-1f2d-4c5b-8a9e-123456789abc"
VALUES: dict[str, Any] = {
    "thread_id": UUID,
    "claude_session_id": UUID,
    "codex_home": "/tmp/codex-home",
    "claude_config_dir": "/tmp/claude",
    "scope": {"task": "t", "role": "r"},
    "request": "a task",
    "client_request_id": "c-1",
}
CHOICES = [m for m in BRIDGED if "oneOf" in METHODS[m]["params"]]


def value(name: str) -> Any:
    return VALUES.get(name, "id_1")


def test_the_methods_with_a_choice_are_the_expected_ones() -> None:
    assert set(CHOICES) == {"send", "status", "watch", "renew", "recover", "retry_callback"}
    assert all(input_schema(METHODS[m]["params"])[1] is None for m in BRIDGED if m not in CHOICES)


@pytest.mark.parametrize("method", CHOICES)
def test_a_lifted_choice_accepts_exactly_what_the_schema_accepts(method: str) -> None:
    params = METHODS[method]["params"]
    exact = jsonschema.Draft202012Validator(params)
    flat, sentence = input_schema(params)
    assert sentence is not None and BY_NAME[tool_name(method)].input_schema == flat
    lifted = jsonschema.Draft202012Validator(flat)
    shapes = [set(branch["required"]) for branch in params["oneOf"]]
    fields = sorted(set().union(*shapes))
    base = {name: value(name) for name in params.get("required", ())}
    for size in range(len(fields) + 1):
        for chosen in itertools.combinations(fields, size):
            call = base | {name: value(name) for name in chosen}
            given = set(chosen)
            complete = [shape for shape in shapes if shape <= given]
            rule = len(complete) == 1 and given <= complete[0]
            assert exact.is_valid(call) == (lifted.is_valid(call) and rule), (method, call)


def test_a_choice_that_cannot_be_stated_is_refused() -> None:
    with pytest.raises(ValueError):
        input_schema({"type": "object", "anyOf": [{"required": ["a"]}]})
    clash = {
        "type": "object",
        "oneOf": [
            {"properties": {"a": {"type": "string"}}},
            {"properties": {"a": {"type": "integer"}}},
        ],
    }
    with pytest.raises(ValueError):
        input_schema(clash)
