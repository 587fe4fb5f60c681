"""What a tool call returns: the server's result as structured content, and text a model reads.

The text is one summary line, then the result as JSON (the spec asks a tool with
structured content to repeat it as text, for hosts that show a model only text).
The text holds no control or format character (the JSON is printable ASCII, the
rest goes through `printable`): hosts print tool results in a person's terminal,
and the result carries text that agents and models wrote. Nothing is
redacted here because nothing is added: the server already redacted what it
sent (`akk.protocol.redaction`), and the bridge passes exactly that on.

An error is a tool error (``isError``) whose structured content is
``{"reason", "message", "data"}``: the server's reason code and its next step,
or the bridge's own (`server_not_running`, `connection_lost`, `no_answer`,
`unauthorized`, `busy`, and `invalid_params` for the wait tool's arguments).
"""

from __future__ import annotations

from typing import Any

import mcp.types as mt

from akk.cli.text import json_text, printable

_SUMMARY_KEYS = ("outcome", "turn_id", "watch_id", "terminal_id", "state", "event_id")


def success(tool: str, result: Any) -> mt.CallToolResult:
    """``result`` of ``tool`` as structured content (an object) with its summary and JSON."""
    structured = result if isinstance(result, dict) else {"result": result}
    return mt.CallToolResult(
        content=[mt.TextContent(text=f"{_summary(tool, structured)}\n{json_text(structured)}")],
        structured_content=structured,
    )


def failure(reason: str, message: str, data: dict[str, Any] | None = None) -> mt.CallToolResult:
    """A tool error carrying ``reason`` and ``message`` (which says what to do next)."""
    structured = {"reason": reason, "message": message, "data": data or {}}
    text = printable(f"{reason}: {message}")
    if data:
        text += f"\n{json_text(data)}"
    return mt.CallToolResult(
        content=[mt.TextContent(text=text)], structured_content=structured, is_error=True
    )


def events(held: list[dict[str, Any]], dropped: int) -> mt.CallToolResult:
    """What wait_events returns: the unacked events, and how many the bridge had no room for."""
    result: dict[str, Any] = {"events": held, "dropped": dropped}
    lines = [f"{len(held)} event(s) not yet acked; ack each once handled"]
    lines += [
        printable(f"{e.get('kind')} event_id={e.get('event_id')} turn_id={e.get('turn_id')} "
                  f"watch_id={e.get('watch_id')}: {e.get('summary', '')}")
        for e in held
    ]  # fmt: skip
    if dropped:
        lines.append(
            f"{dropped} more did not fit: ack the events you handled, and the server sends "
            "them again"
        )
    lines.append(json_text(result))
    return mt.CallToolResult(
        content=[mt.TextContent(text="\n".join(lines))], structured_content=result
    )


def _summary(tool: str, result: dict[str, Any]) -> str:
    facts = [f"{key}={result[key]}" for key in _SUMMARY_KEYS if _scalar(result.get(key))]
    interaction = result.get("interaction")
    if isinstance(interaction, dict):
        facts.append(
            f"asks {interaction.get('kind')} {interaction.get('interaction_id')} "
            f"({interaction.get('state')}): answer by the ids below"
        )
    return printable(f"{tool} ok" + (": " + ", ".join(facts) if facts else ""))


def _scalar(value: object) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)
