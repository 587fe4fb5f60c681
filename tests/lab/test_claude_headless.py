"""Lab: AKK's headless Claude transport against every pinned Claude Code, no pane, no tmux.

One set-up per version (one model server, one HOME): a new session (AKK's
--session-id) that echoes, runs an allowed Bash, refuses a denied one, answers one
with a control error and is interrupted in a slow stream; a --resume of it whose
next request carries the first task, in a slow turn that still finishes after its
stdin closes; another new session that carries none of that history and is
SIGKILLed mid-turn; and one whose pending permission an interrupt withdraws. The
model server is the oracle: each task reaches it exactly once, usage equals what
it sent, and a stopped stream is closed. Start time and idle RSS per version are
recorded in the test's user_properties and printed (docs/claude_headless.md has
the numbers).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from akk.backends.claude_headless import wire
from akk.backends.claude_headless.process import (
    ClaudeProcess,
    NewSession,
    Received,
    Resume,
    open_claude,
)
from akk.discovery.process import start_ticks
from akk.qualify.launcher import run_processes
from akk.qualify.model_server import ModelServer, RecordedRequest, served_tokens
from akk.qualify.run_files import prepare
from akk.qualify.scenarios import (
    BASH_MARKER,
    ECHO_REPLY,
    ECHO_TASK,
    RUN_TASK,
    SLOW_REPLY,
    SLOW_TASK,
    Bash,
    Scenario,
    SlowText,
    Step,
    Text,
)
from tests.lab.conftest import ensure_installed
from tools.lab import clients
from tools.lab.clients import Client

CLAUDE = [client for client in clients.PINNED if client.agent == "claude"]

DENY_TASK = "lab: run the refused command"
DENY_MARKER = "lab-refused-ran"
ERROR_TASK = "lab: run the errored command"
ERROR_MARKER = "lab-errored-ran"
RECALL_TASK = "lab: what did I ask first?"
RECALL_REPLY = "You asked me to say hello."
WITHDRAWN_TASK = "lab: run the withdrawn command"
WITHDRAWN_MARKER = "lab-withdrawn-ran"
RESUMED = "(resumed)"
RELEASE = "release"
DENIED = "The operator rejected this."
ERRORED = "AKK could not answer this request."


def _bash(marker: str) -> Bash:
    return Bash(f"touch {marker}.txt && echo {marker}", f"Create {marker}.txt")


SCENARIO = Scenario(
    "claude_headless",
    task=ECHO_TASK,
    agents=frozenset({"claude"}),
    steps=(
        Step(ECHO_TASK, Text(ECHO_REPLY)),
        Step(RUN_TASK, _bash(BASH_MARKER)),
        Step(BASH_MARKER, Text("The command ran.")),
        Step(DENY_TASK, _bash(DENY_MARKER)),
        Step(ERROR_TASK, _bash(ERROR_MARKER)),
        Step(WITHDRAWN_TASK, _bash(WITHDRAWN_MARKER)),
        Step(RECALL_TASK, Text(RECALL_REPLY)),
        Step(RESUMED, SlowText("Finished after all.", hold=RELEASE)),
        # Held until the client hangs up: interrupt, closed stdin and SIGKILL each end one.
        Step(SLOW_TASK, SlowText(SLOW_REPLY), repeat=True),
    ),
)


async def _until(
    claude: ClaudeProcess, kind: type, seen: list[Received], timeout: float = 30
) -> Received:
    """Take messages into `seen` until one of `kind` arrives; fails on a wire error."""
    with trio.fail_after(timeout):
        async for message in claude.messages:
            seen.append(message)
            assert not isinstance(message, wire.WireError), message
            if isinstance(message, kind):
                return message
    raise AssertionError(f"messages ended before a {kind.__name__}: {seen[-3:]}")


async def _rest(claude: ClaudeProcess, timeout: float = 30) -> list[Received]:
    """Everything until Claude closes its output."""
    seen: list[Received] = []
    with trio.fail_after(timeout):
        async for message in claude.messages:
            seen.append(message)
    return seen


async def _model_request(server: ModelServer, text: str, after: float) -> RecordedRequest:
    return await server.wait_for_request(
        lambda r: not r.auxiliary and text in r.newest_input and r.at >= after, timeout=30
    )


def _transcript(config_dir: Path, cwd: Path, session_id: str) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in str(cwd))
    return config_dir / "projects" / slug / f"{session_id}.jsonl"


def _history(request: RecordedRequest) -> str:
    assert request.body is not None
    return json.dumps(request.body.get("messages"))


async def _turn(
    claude: ClaudeProcess, server: ModelServer, text: str
) -> tuple[list[Received], wire.Result, list[RecordedRequest], float]:
    """Send `text`; return what came, its result, its model requests, send->model seconds."""
    first = len(server.main_requests())
    sent = time.monotonic()
    await claude.send(wire.user_message(text))
    seen: list[Received] = []
    reached = await _model_request(server, text, sent)
    result = await _until(claude, wire.Result, seen)
    assert isinstance(result, wire.Result)
    return seen, result, server.main_requests()[first:], reached.at - sent


def _allow(request: wire.ControlRequest) -> bytes:
    """Allow with the input unchanged (the only allow AKK sends)."""
    decision = {"behavior": "allow", "updatedInput": request.request["input"]}
    return wire.control_success(request.request_id, decision)


def _deny(request: wire.ControlRequest) -> bytes:
    return wire.control_success(request.request_id, {"behavior": "deny", "message": DENIED})


def _error(request: wire.ControlRequest) -> bytes:
    return wire.control_error(request.request_id, ERRORED)


async def _answer_bash(
    claude: ClaudeProcess, task: str, answer: Callable[[wire.ControlRequest], bytes]
) -> tuple[list[Received], wire.Result]:
    """Send `task`, take its Bash can_use_tool, write `answer(request)`; to the result."""
    await claude.send(wire.user_message(task))
    seen: list[Received] = []
    request = await _until(claude, wire.ControlRequest, seen)
    assert isinstance(request, wire.ControlRequest)
    assert (request.subtype, request.request["tool_name"]) == ("can_use_tool", "Bash")
    await claude.send(answer(request))
    result = await _until(claude, wire.Result, seen)
    assert isinstance(result, wire.Result)
    return seen, result


def _tool_results(seen: list[Received]) -> list[dict[str, object]]:
    return [
        dict(block)
        for m in seen
        if isinstance(m, wire.UserEcho) and not isinstance(m.content, str)
        for block in m.content
        if block.get("type") == "tool_result"
    ]


@pytest.mark.lab
@pytest.mark.parametrize("client", CLAUDE, ids=lambda client: client.name)
async def test_headless_sessions_permissions_interrupt_and_exits(
    client: Client, request: pytest.FixtureRequest
) -> None:
    await ensure_installed(client)
    server = ModelServer(SCENARIO)
    root = Path(tempfile.mkdtemp(prefix="akk-lab-"))
    measured: dict[str, object] = {}
    try:
        with trio.fail_after(240):
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)
                files = prepare(client, root, server.port)
                config = files.home / ".claude"
                work = files.workdir
                first_id = str(uuid.uuid4())

                # --- A: a new session under AKK's id.
                async with open_claude(
                    client.binary(),
                    NewSession(first_id),
                    cwd=work,
                    config_dir=config,
                    env=files.env,
                ) as claude:
                    sent = time.monotonic()
                    await claude.send(wire.user_message(ECHO_TASK))
                    seen: list[Received] = []
                    init = await _until(claude, wire.Init, seen)
                    measured["start_to_init_s"] = round(time.monotonic() - sent, 3)
                    assert isinstance(init, wire.Init)
                    assert init.session_id == first_id
                    assert init.cwd == str(work)
                    assert init.permission_mode == "default"
                    assert {"Bash", "AskUserQuestion"} <= set(init.tools)
                    reached = await _model_request(server, ECHO_TASK, sent)
                    measured["start_to_model_s"] = round(reached.at - sent, 3)
                    result = await _until(claude, wire.Result, seen)
                    assert isinstance(result, wire.Result)
                    assert (result.subtype, result.is_error, result.result) == (
                        "success",
                        False,
                        ECHO_REPLY,
                    )
                    assert result.session_id == first_id
                    assert result.usage == served_tokens(server.main_requests())
                    assert server.count_inputs_containing(ECHO_TASK) == 1, server.summary()
                    measured["idle_rss_mb"] = round((claude.rss_bytes() or 0) / 2**20, 1)

                    # Bash allowed with its input unchanged: it runs once.
                    before = len(server.main_requests())
                    seen, result = await _answer_bash(claude, RUN_TASK, _allow)
                    assert (work / f"{BASH_MARKER}.txt").exists()
                    ran = _tool_results(seen)
                    assert [(r["content"], r["is_error"]) for r in ran] == [(BASH_MARKER, False)]
                    assert result.result == "The command ran."
                    assert server.count_inputs_containing(BASH_MARKER) == 1
                    assert result.usage == served_tokens(server.main_requests()[before:])

                    # Bash denied: unrun, the model gets the message.
                    seen, result = await _answer_bash(claude, DENY_TASK, _deny)
                    assert not (work / f"{DENY_MARKER}.txt").exists()
                    assert [(r["content"], r["is_error"]) for r in _tool_results(seen)] == [
                        (DENIED, True)
                    ]
                    assert server.count_inputs_containing(DENIED) == 1

                    # A control error instead of a decision: the tool is not run either.
                    seen, result = await _answer_bash(claude, ERROR_TASK, _error)
                    assert not (work / f"{ERROR_MARKER}.txt").exists()
                    errored = [(r["content"], r["is_error"]) for r in _tool_results(seen)]
                    assert errored == [(f"Tool permission request failed: Error: {ERRORED}", True)]

                    # A second message in the live process (what a per-session process saves).
                    _, result, turn_requests, warm = await _turn(claude, server, RECALL_TASK)
                    measured["warm_send_to_model_s"] = round(warm, 3)
                    assert ECHO_TASK in _history(turn_requests[0])

                    # Interrupt during a slow stream: acknowledged, error result, stream closed.
                    sent = time.monotonic()
                    await claude.send(wire.user_message(SLOW_TASK))
                    slow = await _model_request(server, SLOW_TASK, sent)
                    await claude.send(wire.interrupt("akk-interrupt-1"))
                    seen = []
                    ack = await _until(claude, wire.ControlResponse, seen)
                    assert ack == wire.ControlResponse(
                        "akk-interrupt-1", "success", ack.response, None
                    )
                    result = await _until(claude, wire.Result, seen)
                    assert isinstance(result, wire.Result)
                    assert (result.subtype, result.is_error) == ("error_during_execution", True)
                    assert result.terminal_reason == "aborted_streaming"
                    assert any(
                        "[Request interrupted by user]" in json.dumps(m.content)
                        for m in seen
                        if isinstance(m, wire.UserEcho)
                    )
                    assert await server.wait_for_outcome(slow.index, timeout=10) == "disconnected"
                    assert server.count_inputs_containing(SLOW_TASK) == 1

                    await claude.close_input()
                    assert await _rest(claude) == []
                ended = await claude.aclose()
                # The last invocation ended in an error result (the interrupt): exit 1.
                assert (ended.how, ended.returncode, ended.reaped) == ("exited", 1, True), ended
                assert _transcript(config, work, first_id).exists()

                # --- B: --resume carries the first task; stdin closed mid-turn.
                async with open_claude(
                    client.binary(), Resume(first_id), cwd=work, config_dir=config, env=files.env
                ) as claude:
                    resumed = time.monotonic()
                    await claude.send(wire.user_message(f"{SLOW_TASK} {RESUMED}"))
                    seen = []
                    init = await _until(claude, wire.Init, seen)
                    assert isinstance(init, wire.Init) and init.session_id == first_id
                    held = await _model_request(server, f"{SLOW_TASK} {RESUMED}", resumed)
                    measured["resume_to_model_s"] = round(held.at - resumed, 3)
                    assert ECHO_TASK in _history(held) and RECALL_REPLY in _history(held)
                    # Closing stdin mid-turn does not stop the turn: it finishes, then Claude exits.
                    await claude.close_input()
                    server.signal(RELEASE)
                    tail = await _rest(claude)
                    finished = [m for m in tail if isinstance(m, wire.Result)]
                    assert [(r.subtype, r.result) for r in finished] == [
                        ("success", "Finished after all.")
                    ], tail
                    assert await server.wait_for_outcome(held.index, timeout=10) == "completed"
                ended = await claude.aclose()
                assert (ended.how, ended.returncode, ended.reaped) == ("exited", 0, True), ended

                # --- C: another new session has none of that history; SIGKILL mid-turn.
                other_id = str(uuid.uuid4())
                async with open_claude(
                    client.binary(),
                    NewSession(other_id),
                    cwd=work,
                    config_dir=config,
                    env=files.env,
                ) as claude:
                    sent = time.monotonic()
                    await claude.send(wire.user_message(SLOW_TASK + " (other)"))
                    held = await _model_request(server, SLOW_TASK + " (other)", sent)
                    assert ECHO_TASK not in _history(held)
                    pid = claude.pid
                    os.kill(pid, signal.SIGKILL)
                    tail = await _rest(claude)
                    assert not [m for m in tail if isinstance(m, wire.Result)], tail
                    assert await server.wait_for_outcome(held.index, timeout=10) == "disconnected"
                ended = await claude.aclose()
                assert (ended.returncode, ended.signal, ended.reaped) == (-9, 9, True), ended
                assert start_ticks(pid) is None

                # --- D: an interrupt while a permission is pending withdraws it; a late
                # answer to it is ignored. (A fresh session: Claude folds the rejected tool
                # result into the next user message, which would hide that task's text.)
                async with open_claude(
                    client.binary(),
                    NewSession(str(uuid.uuid4())),
                    cwd=work,
                    config_dir=config,
                    env=files.env,
                ) as claude:
                    await claude.send(wire.user_message(WITHDRAWN_TASK))
                    seen = []
                    pending = await _until(claude, wire.ControlRequest, seen)
                    assert isinstance(pending, wire.ControlRequest)
                    await claude.send(wire.interrupt("akk-interrupt-2"))
                    seen = []
                    result = await _until(claude, wire.Result, seen)
                    assert isinstance(result, wire.Result)
                    assert (result.subtype, result.is_error) == ("error_during_execution", True)
                    assert result.stop_reason == "tool_use"
                    kinds = [type(m).__name__ for m in seen]
                    assert seen[0] == wire.ControlCancel(pending.request_id), kinds
                    assert seen[1] == wire.ControlResponse(
                        "akk-interrupt-2", "success", {"still_queued": []}, None
                    ), kinds
                    withdrawn = _tool_results(seen)
                    assert len(withdrawn) == 1 and withdrawn[0]["is_error"] is True, withdrawn
                    await claude.send(_allow(pending))
                    await claude.close_input()
                    assert [type(m).__name__ for m in await _rest(claude)] == []
                ended = await claude.aclose()
                # Its last result was an error (the interrupt): exit 1, as in A.
                assert (ended.how, ended.returncode, ended.reaped) == ("exited", 1, True), ended
                assert not (work / f"{WITHDRAWN_MARKER}.txt").exists()
                assert server.count_inputs_containing(WITHDRAWN_TASK) == 1
                nursery.cancel_scope.cancel()
        assert run_processes(root) == []
        assert server.count_inputs_containing(ECHO_TASK) == 1
    finally:
        request.node.user_properties.append(("claude_headless", {client.version: measured}))
        print(f"\nclaude_headless {client.version} {json.dumps(measured)}")
        shutil.rmtree(root, ignore_errors=True)
