"""Lab: a real MCP host drives AKK (issue 22): Claude Code, with `akk mcp` as its MCP server.

The newest pinned Claude Code runs headless (`claude -p`, `tools.demo.mcp_host`)
with `akk mcp` added by `claude mcp add` and its tools pre-approved, against
its own scripted model server, whose tool calls take their ids from earlier
tool results (`scenarios.ComputedStep`). It lists the terminals, sends a task
to the newest pinned Codex in its own tmux pane (Plan mode, its own model
server, supervised by a real `akk serve`), waits for the event, acks it, reads
`status`, answers the question with `respond_interaction` by the ids `status`
showed, waits for `done` and acks it. Both model servers are the oracle: the
Codex one receives the task and the chosen answer exactly once, the Claude one
receives every tool result (the `done` event's among them) exactly once.

The same host first drives a trivial stdio MCP server of this test's own that
checks every id it is given, so the plumbing (Claude's MCP client, the
pre-approval, the computed tool inputs) is proven apart from AKK.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.qualify import scenarios as sc
from tests.lab.conftest import ensure_installed
from tools.demo.mcp_host import claude_host
from tools.lab import clients

pytestmark = pytest.mark.lab

Json = dict[str, Any]

CLAUDE = clients.newest("claude")

FAKE_AKK = '''
"""A trivial stdio MCP server shaped like `akk mcp`: fixed ids, every call logged, ids checked."""
import json, os, sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("fake-akk")
LOG = os.environ["FAKE_AKK_LOG"]
QUESTION = {"question_id": "q_1", "header": "Language", "response_kind": "single_select",
            "prompt": "Which language should the greeting be in?",
            "options": [{"option_id": "o_en", "label": "English"},
                        {"option_id": "o_fr", "label": "French"}]}
INTERACTION = {"interaction_id": "int_1", "turn_id": "turn_1", "kind": "questionnaire",
               "state": "pending", "questions": [QUESTION]}
state = {"answered": False, "acked": []}


def log(method, params):
    with open(LOG, "a") as out:
        out.write(json.dumps([method, params]) + "\\n")


@server.tool()
def agent_knock_knock_list() -> dict:
    log("list", {})
    return {"terminals": [{"terminal_id": "term_claude", "agent": "claude"},
                          {"terminal_id": "term_codex", "agent": "codex"}],
            "turns": [], "watches": []}


@server.tool()
def agent_knock_knock_send(terminal_id: str, request: str, client_request_id: str) -> dict:
    log("send", {"terminal_id": terminal_id, "request": request})
    assert terminal_id == "term_codex", terminal_id
    return {"turn_id": "turn_1", "session_id": "ses_1", "watch_id": "turn_1",
            "state": "sent", "session_decision": {"action": "create", "reason": "new"}}


@server.tool()
def agent_knock_knock_wait_events(timeout_seconds: float = 30, max: int = 10) -> dict:
    log("wait_events", {"timeout_seconds": timeout_seconds})
    if state["answered"]:
        event = {"event_id": "ev_2", "kind": "done", "turn_id": "turn_1", "summary": "Bonjour"}
    else:
        event = {"event_id": "ev_1", "kind": "interaction_required", "turn_id": "turn_1",
                 "interaction": INTERACTION}
    return {"events": [e for e in [event] if e["event_id"] not in state["acked"]]}


@server.tool()
def agent_knock_knock_ack(event_id: str) -> dict:
    log("ack", {"event_id": event_id})
    state["acked"].append(event_id)
    return {"event_id": event_id, "state": "accepted"}


@server.tool()
def agent_knock_knock_status(turn_id: str) -> dict:
    log("status", {"turn_id": turn_id})
    assert turn_id == "turn_1", turn_id
    return {"turn_id": turn_id, "state": "awaiting_input", "interaction": INTERACTION}


@server.tool()
def agent_knock_knock_respond_interaction(
    interaction_id: str, turn_id: str, answers: list[dict]
) -> dict:
    log("respond_interaction", {"interaction_id": interaction_id, "answers": answers})
    assert interaction_id == "int_1" and turn_id == "turn_1", (interaction_id, turn_id)
    assert answers == [{"question_id": "q_1", "response_kind": "single_select",
                        "selected_option_ids": ["o_fr"]}], answers
    state["answered"] = True
    return {"outcome": "dispatched"}


server.run("stdio")
'''

HOST_CALLS = [
    "list",
    "send",
    "wait_events",
    "ack",
    "status",
    "respond_interaction",
    "wait_events",
    "ack",
]
"""The AKK methods the host's scripted model calls, in order."""


def tool_uses(messages: Sequence[Json]) -> list[Json]:
    """The tool_use blocks of the host's assistant messages, in order."""
    return [
        block
        for message in messages
        if message.get("type") == "assistant"
        for block in message["message"]["content"]
        if block.get("type") == "tool_use"
    ]


def tool_results(messages: Sequence[Json]) -> dict[str, Any]:
    """Each tool_result the host sent back, by tool_use id, as JSON (a string if it is not)."""
    found: dict[str, Any] = {}
    for message in messages:
        if message.get("type") != "user":
            continue
        content = message["message"]["content"]
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_result":
                user = {"role": "user", "content": [block]}
                (found[block["tool_use_id"]],) = sc.tool_results([user])
    return found


def test_computed_steps_read_their_ids_from_earlier_tool_results() -> None:
    steps = sc.SCENARIOS["mcp_host_claude"].steps
    options = [{"option_id": "a", "label": "English"}, {"option_id": "b", "label": sc.MCP_CHOICE}]
    question = {"question_id": "q", "response_kind": "single_select", "options": options}
    status = {"turn_id": "t", "interaction": {"interaction_id": "i", "turn_id": "t",
                                              "questions": [question]}}  # fmt: skip
    terminals = [{"terminal_id": "x", "agent": "claude"}, {"terminal_id": "y", "agent": "codex"}]
    results = [
        {"terminals": terminals},
        {"turn_id": "t", "session_decision": {"action": "create"}},
        {"events": [{"event_id": "e1", "kind": "interaction_required", "interaction": {}}]},
        {"event_id": "e1", "state": "accepted"},
        status,
    ]  # fmt: skip
    messages: list[object] = [{"role": "user", "content": sc.MCP_HOST_TASK}]
    for number, result in enumerate(results):
        text = [{"type": "text", "text": json.dumps(result, indent=2)}]
        block = {"type": "tool_result", "tool_use_id": f"u{number}", "content": text}
        messages += [{"role": "assistant", "content": []}, {"role": "user", "content": [block]}]
    computed = {
        step.reply.name.removeprefix(sc.MCP_TOOL_PREFIX): step.resolve(messages)
        for step in steps
        if isinstance(step, sc.ComputedStep)
    }
    assert computed["send"] == sc.ClaudeTool(
        sc.MCP_TOOL_PREFIX + "send",
        {"terminal_id": "y", "request": sc.MCP_CODEX_TASK, "client_request_id": sc.MCP_REQUEST_ID},
    )
    assert computed["status"] == sc.ClaudeTool(sc.MCP_TOOL_PREFIX + "status", {"turn_id": "t"})
    answer = {"question_id": "q", "response_kind": "single_select", "selected_option_ids": ["b"]}
    assert computed["respond_interaction"] == sc.ClaudeTool(
        sc.MCP_TOOL_PREFIX + "respond_interaction",
        {"interaction_id": "i", "turn_id": "t", "answers": [answer]},
    )
    # Nothing to read from yet: the reply says why and ends the turn, it calls nothing.
    (ack,) = [s for s in steps if isinstance(s, sc.ComputedStep) and s.when == '"done"']
    why = "LookupError('no done event in any tool result')"
    assert ack.resolve(messages) == sc.Text(f"lab: no input for {sc.MCP_TOOL_PREFIX}ack: {why}")


async def test_claude_code_calls_a_stdio_mcp_server_with_ids_read_from_its_results(
    tmp_path: Path,
) -> None:
    await ensure_installed(CLAUDE)
    server = tmp_path / "fake_akk.py"
    server.write_text(FAKE_AKK)
    calls = tmp_path / "calls.jsonl"
    with trio.fail_after(120):
        async with claude_host(CLAUDE, sc.SCENARIOS["mcp_host_claude"]) as host:
            added = await host.add_server(
                sc.MCP_SERVER, [sys.executable, str(server)], {"FAKE_AKK_LOG": str(calls)}
            )
            listed = await host.claude("mcp", "list")
            messages = await host.run(sc.MCP_HOST_TASK, sc.MCP_SERVER)
            requests = host.model.main_requests()
    assert f"Added stdio MCP server {sc.MCP_SERVER}" in added, added
    assert f"{sc.MCP_SERVER}: {sys.executable} {server}" in listed and "Connected" in listed, listed
    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    # `claude mcp list` connects to check health and calls nothing.
    assert [method for method, _ in logged] == HOST_CALLS, logged
    uses = tool_uses(messages)
    assert [use["name"].removeprefix(sc.MCP_TOOL_PREFIX) for use in uses] == HOST_CALLS
    results = tool_results(messages)
    done = {"event_id": "ev_2", "kind": "done", "turn_id": "turn_1", "summary": "Bonjour"}
    assert [results[use["id"]] for use in uses][-2:] == [
        {"events": [done]},
        {"event_id": "ev_2", "state": "accepted"},
    ]
    assert messages[-1]["type"] == "result" and messages[-1]["result"] == sc.MCP_HOST_DONE
    # The host's model saw each result once: one conversation request per tool call, plus the task.
    assert len(requests) == len(HOST_CALLS) + 1, host.model.summary()
    for use, request in zip(uses, requests[1:], strict=True):
        assert request.body is not None
        assert sc.tool_results(request.body["messages"])[-1] == results[use["id"]]  # type: ignore[arg-type]
