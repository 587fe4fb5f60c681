"""`DEMO_CONTROLLER=claude make demo`: an agent drives an agent through AKK, no account.

A real Claude Code (the newest pinned, headless, `tools.demo.mcp_host`) has
`akk mcp` added as its MCP server and its tools pre-approved. Its scripted model
lists the terminals, sends a task to a real Codex (the newest pinned, in its own
tmux pane in Plan mode, with a model server of its own, supervised by a real
`akk serve`), waits for the event, reads `status`, answers the Codex agent's
question with `respond_interaction` by the ids `status` showed, and reads
`done`. This module prints each tool call and the result the host's model got
back, and what reached the Codex pane's model; then what it proves.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession, launch
from akk.qualify.model_server import RecordedRequest
from tools.demo.mcp_host import CONTROLLER_ID, ClaudeHost, claude_host, tool_results, tool_uses
from tools.demo.run import (
    ATTACH_SECONDS,
    ModelFeed,
    Printer,
    Settings,
    conclude,
    ms,
    pretty,
    quoted,
    serving_demo,
    wait_to_attach,
)
from tools.lab import clients
from tools.lab.installer import install_many

Json = dict[str, Any]

RESULTS_NOTE = (
    "(each result below is an excerpt: the model gets the whole of akk mcp's result as JSON)"
)
LOADED = "(tool references only: Claude Code now offers these tools with their schemas)"
"""What ToolSearch's result is: it names the tools it loaded, with no text."""
TERMINAL_KEYS = ("terminal_id", "agent", "profile", "activity_state")
EVENT_KEYS = ("event_id", "kind", "turn_id", "summary")


def excerpt(result: Any) -> Any:
    """The part of a tool result the host's model acts on (the model got all of it).

    Terminals by id, agent, profile and state; events by id, kind, Turn and
    summary; an interaction by its ids, questions and options.
    """
    if result == "":
        return LOADED
    if not isinstance(result, dict):
        return result
    if "terminals" in result:
        return {"terminals": [_keys(row, TERMINAL_KEYS) for row in result["terminals"]]}
    if "events" in result:
        return {"events": [_event(event) for event in result["events"]]}
    if result.get("interaction"):
        return {"interaction": _interaction(result["interaction"])}
    return result


def _keys(record: Json, keys: tuple[str, ...]) -> Json:
    return {key: record[key] for key in keys if record.get(key) is not None}


def _event(event: Json) -> Json:
    shown = _keys(event, EVENT_KEYS)
    if event.get("interaction"):
        shown["interaction"] = _interaction(event["interaction"])
    return shown


def _interaction(interaction: Json) -> Json:
    questions = [
        _keys(question, ("question_id", "prompt", "response_kind"))
        | {"options": [_keys(option, ("option_id", "label")) for option in question["options"]]}
        for question in interaction.get("questions", ())
    ]
    return _keys(interaction, ("interaction_id", "kind", "state")) | {"questions": questions}


@attrs.define
class HostNarrator:
    """Prints the host session's tool calls and results, and the Codex model's requests."""

    out: Printer
    called_at: float = 0.0

    def message(self, message: Json) -> None:
        """One stream-json message of the host session."""
        kind = message.get("type")
        if kind == "system" and message.get("subtype") == "init":
            akk = [s for s in message.get("mcp_servers", ()) if s.get("name") == sc.MCP_SERVER]
            state = akk[0].get("status", "?") if akk else "missing"
            self.out.line("claude", f"session {message['session_id']}: MCP server akk {state}")
        elif kind == "assistant":
            for block in message["message"]["content"]:
                if block.get("type") == "tool_use":
                    self.called_at = time.monotonic()
                    name = block["name"].removeprefix(f"mcp__{sc.MCP_SERVER}__")
                    self.out.line("claude ->", f"{name} {json.dumps(block['input'])}")
                elif block.get("type") == "text":
                    self.out.line("claude", repr(block["text"]))
        elif kind == "user":
            for result in tool_results([message]).values():
                took = ms(time.monotonic() - self.called_at)
                self.out.line("<- result", f"⏱ {took} after the call")
                shown = excerpt(result)
                self.out.block(shown if isinstance(shown, str) else pretty(shown))
        elif kind == "result":
            self.out.line("claude", f"session ended: {message.get('subtype')}")

    def codex_request(self, request: RecordedRequest) -> None:
        """A conversation request the Codex pane's model received."""
        self.out.line("codex <-", f"#{request.index} {quoted(request)}")


def checks(lab: LabSession, host: ClaudeHost, messages: list[Json]) -> list[tuple[bool, str]]:
    """What the run proves at both model servers, each with whether it held."""
    found: list[tuple[bool, str]] = []
    for what, text in (("the task", sc.MCP_CODEX_TASK), ("the answer", sc.ANSWERED_CODEX)):
        count = lab.server.count_inputs_containing(text)
        found.append((count == 1, f"the Codex model received {what} exactly once ({count}x)"))
    answers = [
        r.newest_input for r in lab.server.main_requests() if sc.ANSWERED_CODEX in r.newest_input
    ]
    chose = any(sc.MCP_CHOICE in answer for answer in answers)
    found.append((chose, f"the answer Codex got is the host's choice, {sc.MCP_CHOICE}"))
    uses, results = tool_uses(messages), tool_results(messages)
    got_back = all(use["id"] in results for use in uses)
    found.append((got_back, f"every one of the host's {len(uses)} tool calls got its result"))
    requests = host.model.main_requests()
    seen = len(requests) == len(uses) + 1
    found.append((seen, f"the host's model saw each result once ({len(requests)} requests)"))
    done = [e for result in results.values() for e in sc.events_in(result) if e["kind"] == "done"]
    found.append((len(done) == 1, "the host read the Codex Turn's done event"))
    final = messages[-1].get("result") if messages else None
    found.append((final == sc.MCP_HOST_DONE, f"the host's session ended with {final!r}"))
    return found


async def demo(settings: Settings) -> int:
    """Run the agent-controller demo; return 0 when every check held, else 1.

    Raises trio.TooSlowError past the deadline and InstallError when a client
    cannot be installed; everything started is gone by then either way.
    """
    out = Printer()
    host_client, codex = clients.newest("claude"), clients.newest("codex")
    out.line("demo", f"{host_client.name} drives {codex.name} through AKK's MCP tools")
    await install_many([host_client, codex])
    scenario = sc.SCENARIOS["mcp_host_codex"]
    root = Path(tempfile.mkdtemp(prefix="akk-demo-"))
    try:
        with trio.fail_after(settings.deadline):
            async with launch(codex, scenario, plan_mode=True) as lab:
                out.line(
                    "client",
                    f"{codex.name} idle after {lab.ready_after or 0:.1f} s (Plan mode), talking to "
                    f"the scripted model server on 127.0.0.1:{lab.server.port} ({scenario.name})",
                )
                out.block(f"tmux -S {lab.socket} attach -t lab")
                status = await _with_akk(settings, out, lab, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out.line("cleanup", "akk serve, both clients, tmux and both model servers stopped; removed")
    return status


async def _with_akk(settings: Settings, out: Printer, lab: LabSession, root: Path) -> int:
    async with serving_demo(out, lab, root, CONTROLLER_ID) as served:
        row = served.row
        out.line("list", f"pane {row['pane']} idle under {row['profile']}")
        async with claude_host(clients.newest("claude"), sc.SCENARIOS["mcp_host_claude"]) as host:
            token = served.akk.tokens[CONTROLLER_ID]
            return await _drive(settings, out, lab, host, served.akk.state.path, token)


async def _drive(
    settings: Settings,
    out: Printer,
    lab: LabSession,
    host: ClaudeHost,
    state_dir: Path,
    token: str,
) -> int:
    out.line("host", f"{host.client.name}, HOME {host.files.home}")
    out.block(f"scripted model server on 127.0.0.1:{host.model.port}")
    added = await host.add_akk(state_dir, token)
    out.line("mcp add", "claude mcp add akk -- akk mcp --state-dir DIR --token-file FILE")
    out.block(added.strip())
    listed = await host.claude("mcp", "list")
    out.block("$ claude mcp list\n" + listed.strip())
    await wait_to_attach(
        settings, out, lab, f"the host starts in {ATTACH_SECONDS:g} s; Enter starts it now"
    )
    out.line("claude -p", f"{sc.MCP_HOST_TASK!r}  --allowedTools mcp__akk")
    out.block(RESULTS_NOTE)
    narrator = HostNarrator(out)
    feed = ModelFeed(lab.server, narrator.codex_request)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(feed.watch)
        messages = await host.run(sc.MCP_HOST_TASK, sc.MCP_SERVER, narrator.message)
        nursery.cancel_scope.cancel()
    feed.flush()
    return await conclude(settings, out, checks(lab, host, messages))
