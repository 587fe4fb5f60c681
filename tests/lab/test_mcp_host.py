"""Lab: a real MCP host drives AKK (issue 22): Claude Code, with `akk mcp` as its MCP server.

The newest pinned Claude Code runs headless (`claude -p`, `tools.demo.mcp_host`)
with `akk mcp` added by `claude mcp add` and its tools pre-approved, against
its own scripted model server, whose tool calls take their ids from earlier
tool results (`scenarios.ComputedStep`). It loads the tools' schemas with
ToolSearch (2.1.332 defers MCP tools), lists the terminals, sends a task
to the newest pinned Codex in its own tmux pane (Plan mode, its own model
server, supervised by a real `akk serve`), waits for the event, acks it, reads
`status`, answers the question with `respond_interaction` by the ids `status`
showed, waits for `done` and acks it. Both model servers are the oracle: the
Codex one receives the task and the chosen answer exactly once, the Claude one
receives every tool result (the `done` event's among them) exactly once.

The same host first drives a trivial stdio MCP server of this test's own that
checks every id it is given, so the plumbing (Claude's MCP client, the
pre-approval, the computed tool inputs) is proven apart from AKK; and the
oldest and newest pinned Codex read and write the `[mcp_servers.akk]` table
that docs/mcp_host.md gives.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import connect
from akk.mcp.bridge import INSTRUCTIONS
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession, run_processes
from akk.qualify.model_server import RecordedRequest
from tests.lab.conftest import ensure_installed, lab_params
from tests.lab.test_model_server import claude_body, connected, serving, text_block
from tools.demo.mcp_host import CONTROLLER_ID, claude_host, tool_results, tool_uses
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess, idle_terminal

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

HOST_CALLS = list(sc.MCP_HOST_METHODS)
"""The AKK methods the host's scripted model calls, in order (after one ToolSearch)."""
AKK_TOOLS = {
    "list", "send", "status", "respond_interaction", "approve", "respond", "cancel", "close",
    "watch", "unwatch", "renew", "recover", "retry_callback", "ack", "wait_events",
}  # fmt: skip
"""The tools `akk mcp` serves (`agent_knock_knock_` + each)."""


def akk_calls(messages: list[Json]) -> list[tuple[str, Json]]:
    """The host's tool calls after its first, ToolSearch (checked): (AKK method, tool_use)."""
    first, *calls = tool_uses(messages)
    assert first["name"] == "ToolSearch" and first["input"] == {"query": sc.MCP_TOOL_SEARCH}
    return [(use["name"].removeprefix(sc.MCP_TOOL_PREFIX), use) for use in calls]


def loaded_schemas(request: RecordedRequest) -> dict[str, Json]:
    """The input schemas of the akk tools a request offered in full (once ToolSearch loaded)."""
    assert request.body is not None
    tools = request.body["tools"]
    assert isinstance(tools, list)
    return {
        tool["name"].removeprefix(sc.MCP_TOOL_PREFIX): tool["input_schema"]
        for tool in tools
        if tool["name"].startswith(sc.MCP_TOOL_PREFIX)
    }


def akk_status(messages: list[Json]) -> str:
    """The akk server's status in the session's init message (`connected` once it is up)."""
    (init,) = [m for m in messages if m.get("type") == "system" and m.get("subtype") == "init"]
    (akk,) = [server for server in init["mcp_servers"] if server["name"] == sc.MCP_SERVER]
    return str(akk["status"])


def offered_akk_tools(request: RecordedRequest) -> set[str]:
    """The akk tools a conversation request told the host's model of (without the prefix).

    In its `tools`, or by name only: Claude Code 2.1.332 defers MCP tools, naming
    them in the system prompt for the model to load with ToolSearch.
    """
    names = re.findall(rf"{sc.MCP_TOOL_PREFIX}(\w+)", json.dumps(request.body))
    return set(names)


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
        # As JSON alone, or after a summary line as `akk mcp` writes it.
        shown = json.dumps(result, indent=2) if number % 2 else f"ok\n{json.dumps(result)}"
        text = [{"type": "text", "text": shown}]
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


async def test_the_model_server_replies_and_records_the_computed_tool_call() -> None:
    scenario = sc.Scenario(
        "computed",
        task="go",
        steps=(
            sc.ComputedStep('"turn_id"', sc.ClaudeTool("status", {}), compute=newest_turn),
            sc.ComputedStep("nothing", sc.ClaudeTool("status", {}), compute=newest_turn),
        ),
    )
    sent = {"turn_id": "turn_1", "session_decision": {"action": "create"}}
    result = {"type": "tool_result", "tool_use_id": "u1",
              "content": [text_block(f"send ok: turn_id=turn_1\n{json.dumps(sent)}")]}  # fmt: skip
    with trio.fail_after(10):
        async with serving(scenario) as server, connected(server) as client:
            read = await client.request("POST", "/v1/messages", claude_body(result, stream=False))
            unread = claude_body(text_block("nothing to read"), stream=False)
            missing = await client.request("POST", "/v1/messages", unread)
    (block,) = read.json()["content"]  # type: ignore[misc]
    assert block["type"] == "tool_use" and block["input"] == {"turn_id": "turn_1"}
    assert server.requests[0].reply == sc.ClaudeTool("status", {"turn_id": "turn_1"})
    (said,) = missing.json()["content"]  # type: ignore[misc]
    assert said["type"] == "text" and said["text"].startswith("lab: no input for status: KeyError")
    assert server.requests[1].reply == sc.Text(said["text"])


def newest_turn(messages: Sequence[object]) -> dict[str, object]:
    """A computed input: the turn_id of the newest result that has one."""
    return {"turn_id": sc.newest_with(messages, "turn_id")["turn_id"]}


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
            # Pre-approved in the settings, as for the TUI (the AKK test uses --allowedTools).
            host.allow_in_settings(sc.MCP_SERVER)
            messages = await host.run(sc.MCP_HOST_TASK, None)
            requests = host.model.main_requests()
    assert f"Added stdio MCP server {sc.MCP_SERVER}" in added, added
    assert f"{sc.MCP_SERVER}: {sys.executable} {server}" in listed and "Connected" in listed, listed
    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    # `claude mcp list` connects to check health and calls nothing.
    assert [method for method, _ in logged] == HOST_CALLS, logged
    calls = akk_calls(messages)
    assert [method for method, _ in calls] == HOST_CALLS
    uses, results = tool_uses(messages), tool_results(messages)
    done = {"event_id": "ev_2", "kind": "done", "turn_id": "turn_1", "summary": "Bonjour"}
    assert [results[use["id"]] for use in uses][-2:] == [
        {"events": [done]},
        {"event_id": "ev_2", "state": "accepted"},
    ]
    assert messages[-1]["type"] == "result" and messages[-1]["result"] == sc.MCP_HOST_DONE
    # The host's model saw each result once: one conversation request per tool call, plus the task.
    assert len(requests) == len(uses) + 1 == len(HOST_CALLS) + 2, host.model.summary()
    assert akk_status(messages) == "connected"
    assert offered_akk_tools(requests[0]) == set(HOST_CALLS)
    assert set(loaded_schemas(requests[0])) == set()  # named only, till ToolSearch loads them
    assert set(loaded_schemas(requests[1])) == set(HOST_CALLS)
    for use, request in zip(uses, requests[1:], strict=True):
        assert request.body is not None
        assert sc.tool_results(request.body["messages"])[-1] == results[use["id"]]  # type: ignore[arg-type]


@pytest.mark.parametrize("lab", lab_params("mcp_host_codex", plan_mode=True)[-1:], indirect=True)
async def test_a_claude_code_mcp_host_drives_a_codex_pane_through_akk_mcp(
    lab: LabSession, tmp_path: Path
) -> None:
    await ensure_installed(CLAUDE)
    akk = AkkProcess(lab, tmp_path, CONTROLLER_ID)
    try:
        url = await trio.to_thread.run_sync(akk.start)
        async with connect(url, akk.state.token()) as operator:
            terminal_id = (await idle_terminal(operator, timeout=30))["terminal_id"]
        with trio.fail_after(150):
            async with claude_host(CLAUDE, sc.SCENARIOS["mcp_host_claude"]) as host:
                added = await host.add_akk(akk.state.path, akk.tokens[CONTROLLER_ID])
                listed = await host.claude("mcp", "list")
                messages = await host.run(sc.MCP_HOST_TASK, sc.MCP_SERVER)
                requests = host.model.main_requests()
                root = host.root
    finally:
        akk.stop()
    assert f"Added stdio MCP server {sc.MCP_SERVER} with command: " in added, added
    assert f"mcp --state-dir {akk.state.path} --token-file" in listed, listed
    assert "Connected" in listed and akk.tokens[CONTROLLER_ID] not in listed + added
    # Connected before the first request, which already named every tool of `akk mcp` and
    # carried its instructions (the rules) in the system prompt.
    assert akk_status(messages) == "connected"
    assert offered_akk_tools(requests[0]) == AKK_TOOLS
    system = json.dumps(requests[0].body, ensure_ascii=False)
    assert json.dumps(f"## {sc.MCP_SERVER}\n{INSTRUCTIONS}")[1:-1] in system
    # ToolSearch loaded the schemas `akk mcp` serves; Claude offered them from then on.
    schemas = loaded_schemas(requests[1])
    assert set(schemas) == set(HOST_CALLS), schemas
    assert set(schemas["respond_interaction"]["required"]) >= {"interaction_id", "answers"}
    uses, results = tool_uses(messages), tool_results(messages)
    calls = akk_calls(messages)
    assert [method for method, _ in calls] == HOST_CALLS, uses
    by_method = [(method, use, results[use["id"]]) for method, use in calls]
    # The ids the host's model used are the ones AKK gave it.
    (_, send, sent), (_, status, shown) = by_method[1], by_method[4]
    assert send["input"]["terminal_id"] == terminal_id
    assert status["input"] == {"turn_id": sent["turn_id"]}
    interaction = shown["interaction"]
    assert interaction["state"] == "pending" and interaction["turn_id"] == sent["turn_id"]
    (question,) = interaction["questions"]
    (french,) = [o["option_id"] for o in question["options"] if o["label"] == sc.MCP_CHOICE]
    (_, respond, dispatched) = by_method[5]
    assert respond["input"]["interaction_id"] == interaction["interaction_id"]
    assert respond["input"]["answers"] == [
        {"question_id": question["question_id"], "response_kind": question["response_kind"],
         "selected_option_ids": [french]}
    ]  # fmt: skip
    assert dispatched["outcome"] == "dispatched"
    (woken,) = sc.events_in(by_method[2][2])
    assert woken["kind"] == "interaction_required" and woken["turn_id"] == sent["turn_id"]
    assert by_method[3][1]["input"] == {"event_id": woken["event_id"]}
    (done,) = sc.events_in(by_method[6][2])
    assert done["kind"] == "done" and done["turn_id"] == sent["turn_id"]
    assert by_method[7][1]["input"] == {"event_id": done["event_id"]}
    assert messages[-1]["type"] == "result" and messages[-1]["result"] == sc.MCP_HOST_DONE
    # The Claude model server: one request per tool call, each carrying that call's result,
    # as the JSON of akk mcp's structured content (Claude passes that, not the text).
    assert len(requests) == len(uses) + 1 == len(HOST_CALLS) + 2, host.model.summary()
    for use, request in zip(uses, requests[1:], strict=True):
        assert request.body is not None
        assert sc.tool_results(request.body["messages"])[-1] == results[use["id"]]  # type: ignore[arg-type]
    for (_, _, result), request in zip(by_method, requests[2:], strict=True):
        assert json.loads(request.newest_input) == result
    # The Codex pane's model server: the task and the host's answer, each exactly once.
    assert lab.server.count_inputs_containing(sc.MCP_CODEX_TASK) == 1, lab.server.summary()
    assert lab.server.count_inputs_containing(sc.ANSWERED_CODEX) == 1, lab.server.summary()
    (answered,) = [r for r in lab.server.main_requests() if sc.ANSWERED_CODEX in r.newest_input]
    assert sc.MCP_CHOICE in answered.newest_input and "English" not in answered.newest_input
    assert run_processes(root) == [] and not root.exists()


TOKEN_FILE = "/home/me/.config/akk-codex.token"
CODEX_TABLE = f"""
[mcp_servers.akk]
command = "akk"
args = ["mcp", "--token-file", "{TOKEN_FILE}"]
tool_timeout_sec = 120
"""
"""The `config.toml` table docs/mcp_host.md gives for Codex."""

OLDEST_CODEX = next(client for client in clients.PINNED if client.agent == "codex")


@pytest.mark.parametrize("codex", [OLDEST_CODEX, clients.newest("codex")], ids=lambda c: c.name)
async def test_codex_reads_akk_mcp_from_its_config_and_adds_it_in_one_line(
    codex: clients.Client, tmp_path: Path
) -> None:
    await ensure_installed(codex)
    codex_home, scratch = tmp_path / "codex-home", tmp_path / "tmp"
    codex_home.mkdir()
    scratch.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CODEX_HOME": str(codex_home),
           "TMPDIR": str(scratch)}  # fmt: skip

    async def codex_says(*args: str) -> str:
        done = await trio.run_process(
            [str(codex.binary()), *args], env=env, capture_stdout=True, capture_stderr=True
        )
        return str(done.stdout.decode())

    stdio = {"type": "stdio", "command": "akk", "args": ["mcp", "--token-file", TOKEN_FILE],
             "env": None, "env_vars": [], "cwd": None}  # fmt: skip
    config = codex_home / "config.toml"
    config.write_text(CODEX_TABLE)
    with trio.fail_after(30):
        from_table = json.loads(await codex_says("mcp", "get", "akk", "--json"))
        config.unlink()
        added = await codex_says(
            "mcp", "add", "akk", "--", "akk", "mcp", "--token-file", TOKEN_FILE
        )
        from_add = json.loads(await codex_says("mcp", "get", "akk", "--json"))
        await codex_says("mcp", "remove", "akk")
        await codex_says("mcp", "add", "akk", "--env", "AKK_TOKEN=t0ken", "--", "akk", "mcp")
        listed = await codex_says("mcp", "list")
    assert from_table["enabled"] is True and from_table["tool_timeout_sec"] == 120
    assert from_table["transport"] == stdio, from_table
    assert "Added global MCP server 'akk'" in added, added
    assert from_add["transport"] == stdio and from_add["tool_timeout_sec"] is None, from_add
    assert 'AKK_TOKEN = "t0ken"' in config.read_text()
    assert "t0ken" not in listed and "AKK_TOKEN=*****" in listed, listed
