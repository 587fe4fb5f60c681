"""The bridge's MCP tools, made from the shipped JSON Schema and the rules text.

One tool per protocol method, named ``agent_knock_knock_<method>``, whose input
schema is that method's params schema (`akk.protocol.schema.METHODS`), plus
``agent_knock_knock_wait_events``. Nothing here is written per method but the
wait tool: a method added to the schema becomes a tool.

A tool's input schema must be an object schema, and model APIs (Anthropic's
among them) refuse a tool whose schema has ``oneOf``, ``anyOf`` or ``allOf`` at
its top level. Several params schemas are exactly that (``watch`` is a top-level
``oneOf`` of three shapes; ``status``, ``send``, ``renew``, ``recover`` and
``retry_callback`` require exactly one of some ids). `input_schema` lifts the
choice out: the tool schema keeps every property of every branch with its own
schema unchanged, the fields all branches require, and ``additionalProperties:
false``; the choice itself is stated in the description ("the fields of exactly
one of these shapes, and none of another's: ..."), which with the flat schema
accepts exactly what the exact schema accepts (tests/test_mcp_tools.py). The
server still validates every call against the exact schema, so a call that
breaks the choice gets ``invalid_params`` and sends nothing.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs

from akk.protocol.rules import ANSWERING, PURPOSE, RULES
from akk.protocol.schema import METHODS

PREFIX = "agent_knock_knock_"
WAIT_EVENTS = PREFIX + "wait_events"
BRIDGED = tuple(method for method in METHODS if method != "hello")
"""Every protocol method but ``hello``, which the bridge says itself when it connects."""

WAIT_TIMEOUT_DEFAULT = 30.0
WAIT_TIMEOUT_MAX = 300.0
WAIT_MAX_DEFAULT = 20
WAIT_MAX_LIMIT = 100

WAIT_EVENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "timeout_seconds": {
            "type": "number",
            "minimum": 0,
            "maximum": WAIT_TIMEOUT_MAX,
            "description": "how long to wait for the first event when none is pending "
            f"(default {WAIT_TIMEOUT_DEFAULT:g}; 0 returns at once)",
        },
        "max": {
            "type": "integer",
            "minimum": 1,
            "maximum": WAIT_MAX_LIMIT,
            "description": f"the most events to return, oldest first (default {WAIT_MAX_DEFAULT})",
        },
    },
    "additionalProperties": False,
}

_COMBINATORS = ("oneOf", "anyOf", "allOf")


@attrs.frozen
class ToolSpec:
    """One tool: its name, the protocol method it calls (None for wait_events), its schema."""

    name: str
    method: str | None
    description: str
    input_schema: dict[str, Any]


def tool_name(method: str) -> str:
    return PREFIX + method


def input_schema(params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``params`` as a tool input schema with no top-level combinator, and the choice it lifted.

    Returns the schema and a sentence stating the lifted ``oneOf`` (None when there
    was none). Raises ValueError for a shape this cannot present faithfully (an
    ``anyOf``/``allOf`` at the top, or two branches giving one property two schemas).
    """
    schema = copy.deepcopy(params)
    if "anyOf" in schema or "allOf" in schema:
        raise ValueError("only a top-level oneOf can be lifted into the description")
    branches: list[dict[str, Any]] = schema.pop("oneOf", [])
    if not branches:
        return schema, None
    properties: dict[str, Any] = dict(schema.get("properties", {}))
    closed = schema.get("additionalProperties") is False
    common: set[str] | None = None
    for branch in branches:
        for name, sub in branch.get("properties", {}).items():
            if properties.setdefault(name, sub) != sub:
                raise ValueError(f"property {name!r} has two schemas in the branches")
        closed = closed or branch.get("additionalProperties") is False
        wanted = set(branch.get("required", ()))
        common = wanted if common is None else common & wanted
    required = sorted(set(schema.get("required", ())) | (common or set()))
    schema["type"] = "object"
    schema["properties"] = properties
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    shapes = " | ".join("{" + ", ".join(branch.get("required", ())) + "}" for branch in branches)
    rule = "Give the fields of exactly one of these shapes, and none of another's:"
    return schema, f"{rule} {shapes}."


def _description(method: str, choice: str | None) -> str:
    parts = [PURPOSE[method]]
    if choice:
        parts.append(choice)
    if method in ANSWERING:
        parts.append("Call agent_knock_knock_status first, and answer by the ids it showed.")
    parts.append(RULES)
    return " ".join(parts)


def _method_tool(method: str) -> ToolSpec:
    schema, choice = input_schema(METHODS[method]["params"])
    return ToolSpec(tool_name(method), method, _description(method, choice), schema)


WAIT_EVENTS_TOOL = ToolSpec(
    WAIT_EVENTS,
    None,
    "Return this controller's events not yet acked, oldest first, waiting up to "
    "timeout_seconds for the first one. Returning an event does not ack it: ack each with "
    "agent_knock_knock_ack once handled (delivery is at least once, by a stable event_id). "
    "The resource akk://events holds the same list, and subscribers are told when it "
    "changes. " + RULES,
    WAIT_EVENTS_SCHEMA,
)

TOOLS: tuple[ToolSpec, ...] = (*(_method_tool(method) for method in BRIDGED), WAIT_EVENTS_TOOL)
BY_NAME = {tool.name: tool for tool in TOOLS}
