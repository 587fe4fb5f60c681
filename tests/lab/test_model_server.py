"""The scripted model server: HTTP-level behaviour, then the real clients accepting it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import h11
import pytest
import trio
import trio.testing

from akk.qualify import scenarios as sc
from akk.qualify.model_server import ModelServer, RecordedRequest, RequestTimeout
from akk.qualify.wire import Usage

# ---------------------------------------------------------------- HTTP client


@attrs.frozen
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        parsed = json.loads(self.body)
        assert isinstance(parsed, dict)
        return parsed

    def events(self) -> list[dict[str, object]]:
        """The SSE `data:` payloads, in order."""
        return [
            json.loads(line[len("data: ") :])
            for block in self.body.decode().split("\n\n")
            for line in block.splitlines()
            if line.startswith("data: ")
        ]


class Client:
    """One HTTP/1.1 connection to the server, driven with h11."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.connection = h11.Connection(h11.CLIENT)

    async def send(self, method: str, path: str, body: object = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        headers = [("host", "lab"), ("content-type", "application/json")]
        if method != "GET" and method != "HEAD":
            headers.append(("content-length", str(len(data))))
        out = self.connection.send(h11.Request(method=method, target=path, headers=headers))
        if data:
            out += self.connection.send(h11.Data(data=data))
        out += self.connection.send(h11.EndOfMessage())
        await self.stream.send_all(out)

    async def next_event(self) -> h11.Event:
        while True:
            event = self.connection.next_event()
            if event is not h11.NEED_DATA:
                assert isinstance(event, h11.Event)
                return event
            self.connection.receive_data(await self.stream.receive_some(65536))

    async def receive(self) -> Reply:
        response = await self.next_event()
        assert isinstance(response, h11.Response)
        body = b""
        while not isinstance(event := await self.next_event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data)
            body += event.data
        headers = {k.decode(): v.decode() for k, v in response.headers}
        return Reply(response.status_code, headers, body)

    async def receive_until(self, marker: bytes) -> bytes:
        """Body bytes of a streamed reply, up to and including the part containing `marker`."""
        response = await self.next_event()
        assert isinstance(response, h11.Response)
        body = b""
        while marker not in body:
            event = await self.next_event()
            assert isinstance(event, h11.Data), f"stream ended before {marker!r}: {body!r}"
            body += event.data
        return body

    async def request(self, method: str, path: str, body: object = None) -> Reply:
        await self.send(method, path, body)
        reply = await self.receive()
        self.connection.start_next_cycle()
        return reply


@asynccontextmanager
async def serving(scenario: sc.Scenario) -> AsyncIterator[ModelServer]:
    server = ModelServer(scenario)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        yield server
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def connected(server: ModelServer) -> AsyncIterator[Client]:
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        yield Client(stream)


TOOLS = [{"name": "Bash"}, {"name": "AskUserQuestion"}]


def claude_body(*content: object, stream: bool = True) -> dict[str, object]:
    """A Messages request whose last user message carries `content` blocks."""
    return {
        "model": "claude-lab",
        "stream": stream,
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": [{"type": "text", "text": "..."}]},
            {"role": "user", "content": list(content)},
            {
                "role": "system",
                "content": [{"type": "text", "text": "<total_tokens>1</total_tokens>"}],
            },
        ],
    }


def text_block(text: str) -> dict[str, object]:
    return {"type": "text", "text": text}


def codex_body(*items: object, stream: bool = True) -> dict[str, object]:
    """A Responses request whose input ends with `items`."""
    return {
        "model": "lab-model",
        "stream": stream,
        "tools": [{"type": "function", "name": "exec_command"}],
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "x"}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ctx"}]},
            *items,
        ],
    }


def user_item(text: str) -> dict[str, object]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def usage_of(turn: int) -> dict[str, int]:
    usage = Usage.for_turn(turn)
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": usage.output_tokens,
    }


# ---------------------------------------------------------------- Anthropic


async def test_anthropic_stream_text_reply_with_usage() -> None:
    with trio.fail_after(10):
        async with serving(sc.SCENARIOS["echo"]) as server, connected(server) as client:
            body = claude_body(
                text_block("<system-reminder>\ncontext\n</system-reminder>"),
                text_block(sc.ECHO_TASK),
            )
            reply = await client.request("POST", "/v1/messages?beta=true", body)
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream"
    events = reply.events()
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[2]["delta"] == {"type": "text_delta", "text": sc.ECHO_REPLY}
    assert events[4]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert events[4]["usage"] == usage_of(1)
    [request] = server.requests
    assert request.newest_input == sc.ECHO_TASK  # system reminders stripped
    assert not request.auxiliary
    assert request.reply == sc.Text(sc.ECHO_REPLY)


async def test_anthropic_non_streaming_count_tokens_title_and_probes_are_auxiliary() -> None:
    with trio.fail_after(10):
        async with serving(sc.SCENARIOS["echo"]) as server, connected(server) as client:
            plain = await client.request(
                "POST", "/v1/messages", claude_body(text_block(sc.ECHO_TASK), stream=False)
            )
            title = await client.request(
                "POST",
                "/v1/messages?beta=true",
                {
                    "model": "claude-lab",
                    "tools": [],
                    "stream": False,
                    "output_config": {"format": {"type": "json_schema", "schema": {}}},
                    "messages": [{"role": "user", "content": "name this session"}],
                },
            )
            count = await client.request("POST", "/v1/messages/count_tokens", {"messages": []})
            head = await client.request("HEAD", "/api/hello")
    assert plain.json()["content"] == [{"type": "text", "text": sc.ECHO_REPLY}]
    assert plain.json()["usage"] == usage_of(1)
    assert json.loads(title.json()["content"][0]["text"]) == {"title": "Lab session"}
    assert count.json() == {"input_tokens": 5}
    assert head.status == 200 and head.body == b""
    assert [r.auxiliary for r in server.requests] == [False, True, True, True]
    assert [r.api for r in server.requests] == ["anthropic"] * 4
    assert len(server.main_requests()) == 1


async def test_anthropic_tool_use_then_tool_result_drives_next_step() -> None:
    scenario = sc.SCENARIOS["questionnaire_single2"]
    with trio.fail_after(10):
        async with serving(scenario) as server, connected(server) as client:
            ask = await client.request(
                "POST", "/v1/messages?beta=true", claude_body(text_block(sc.ASK_TASK))
            )
            answer = (
                'Your questions have been answered: "Which color do you prefer?"="Blue". '
                "You can now continue with these answers in mind."
            )
            result = {"type": "tool_result", "tool_use_id": "toolu_lab_0", "content": answer}
            thanks = await client.request("POST", "/v1/messages?beta=true", claude_body(result))
    start = ask.events()[1]["content_block"]
    assert start == {
        "type": "tool_use",
        "id": "toolu_lab_0",
        "name": "AskUserQuestion",
        "input": {},
    }
    tool_input = json.loads(ask.events()[2]["delta"]["partial_json"])
    assert tool_input == {
        "questions": [
            {
                "question": "Which color do you prefer?",
                "header": "Color",
                "multiSelect": False,
                "options": [
                    {"label": "Red", "description": "A warm color"},
                    {"label": "Blue", "description": "A cool color"},
                ],
            }
        ]
    }
    assert ask.events()[4]["delta"]["stop_reason"] == "tool_use"
    assert thanks.events()[2]["delta"]["text"] == "Thanks, I noted your answers."
    assert thanks.events()[4]["usage"] == usage_of(2)
    assert server.requests[1].newest_input == answer
    assert server.count_inputs_containing('"Blue"') == 1


async def test_codex_reply_kind_on_anthropic_is_a_400_naming_the_mistake() -> None:
    scenario = sc.Scenario("wrong", steps=(sc.Step("go", sc.ExecCommand("true")),))
    with trio.fail_after(10):
        async with serving(scenario) as server, connected(server) as client:
            reply = await client.request("POST", "/v1/messages", claude_body(text_block("go")))
    assert reply.status == 400
    assert "Codex-only" in reply.json()["error"]["message"]  # type: ignore[index]


async def test_api_error_repeats_with_anthropic_error_shape() -> None:
    with trio.fail_after(10):
        async with serving(sc.SCENARIOS["api_error"]) as server, connected(server) as client:
            body = claude_body(text_block(sc.ERROR_TASK))
            first = await client.request("POST", "/v1/messages?beta=true", body)
            again = await client.request("POST", "/v1/messages?beta=true", body)
    for reply in (first, again):
        assert reply.status == 400
        assert reply.json() == {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "lab: simulated invalid request"},
        }
    assert server.count_inputs_containing(sc.ERROR_TASK) == 2


# ---------------------------------------------------------------- OpenAI


async def test_openai_stream_text_reply_usage_and_title() -> None:
    with trio.fail_after(10):
        async with serving(sc.SCENARIOS["echo"]) as server, connected(server) as client:
            reply = await client.request(
                "POST", "/v1/responses", codex_body(user_item(sc.ECHO_TASK))
            )
            title_body = codex_body(user_item("Generate a title"))
            title_body["tools"] = [{"type": "function", "name": "request_user_input_async"}]
            title_body["text"] = {"format": {"type": "json_schema", "schema": {}}}
            title = await client.request("POST", "/v1/responses", title_body)
            models = await client.request("GET", "/v1/models")
    events = reply.events()
    assert [e["type"] for e in events] == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    item = events[2]["item"]
    assert item["content"] == [{"type": "output_text", "text": sc.ECHO_REPLY, "annotations": []}]  # type: ignore[index]
    assert events[3]["response"]["usage"] == {  # type: ignore[index]
        "input_tokens": 150,
        "input_tokens_details": {"cached_tokens": 50},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 160,
    }
    title_item = title.events()[2]["item"]
    assert json.loads(title_item["content"][0]["text"]) == {"title": "Lab session"}  # type: ignore[index]
    assert models.json() == {}
    # (A GET's family comes from Codex's `originator` header, which this client lacks.)
    assert [(r.api, r.auxiliary) for r in server.requests[:2]] == [
        ("openai", False),
        ("openai", True),
    ]
    assert server.requests[2].auxiliary


async def test_openai_non_streaming_reply() -> None:
    with trio.fail_after(10):
        async with serving(sc.SCENARIOS["echo"]) as server, connected(server) as client:
            body = codex_body(user_item(sc.ECHO_TASK), stream=False)
            reply = await client.request("POST", "/v1/responses", body)
    assert reply.json()["status"] == "completed"
    assert reply.json()["output"][0]["content"][0]["text"] == sc.ECHO_REPLY  # type: ignore[index]
    assert server.requests[0].usage == Usage.for_turn(1)


async def test_openai_function_calls_and_function_call_output() -> None:
    scenario = sc.Scenario(
        "calls",
        steps=(
            sc.Step("exec", sc.ExecCommand("touch ../x")),
            sc.Step("ask", sc.SCENARIOS["codex_rui_one"].steps[0].reply),
            sc.Step("async", sc.SCENARIOS["codex_rui_async"].steps[0].reply),
            sc.Step(sc.ANSWERED_CODEX, sc.Text("thanks")),
        ),
    )
    with trio.fail_after(10):
        async with serving(scenario) as server, connected(server) as client:
            calls = [
                (
                    await client.request("POST", "/v1/responses", codex_body(user_item(task)))
                ).events()[2]["item"]
                for task in ("exec", "ask", "async")
            ]
            output = {
                "type": "function_call_output",
                "call_id": "call_lab_1",
                "output": '{"answers":{"q1":{"answers":["Blue"]}}}',
            }
            thanks = await client.request("POST", "/v1/responses", codex_body(output))
    exec_call, ask_call, async_call = calls
    assert exec_call["name"] == "exec_command"  # type: ignore[index]
    assert json.loads(exec_call["arguments"]) == {  # type: ignore[index]
        "cmd": "touch ../x",
        "sandbox_permissions": "require_escalated",
        "justification": sc.ExecCommand("x").justification,
    }
    assert ask_call["name"] == "request_user_input"  # type: ignore[index]
    question = json.loads(ask_call["arguments"])["questions"][0]  # type: ignore[index]
    assert question["id"] == "q1" and question["header"] == "Color"
    assert [o["label"] for o in question["options"]] == ["Red", "Blue", "Green"]
    assert async_call["name"] == "request_user_input_async"  # type: ignore[index]
    assert json.loads(async_call["arguments"]) == {  # type: ignore[index]
        "questions": [{"title": "Which color do you prefer?", "options": ["Red", "Blue", "Green"]}]
    }
    assert thanks.events()[2]["item"]["content"][0]["text"] == "thanks"  # type: ignore[index]
    assert server.requests[-1].newest_input == output["output"]


# ---------------------------------------------------------------- script semantics


async def test_steps_fire_once_unless_repeat_and_default_is_ok() -> None:
    scenario = sc.Scenario(
        "semantics",
        steps=(sc.Step("once", sc.Text("first")), sc.Step("again", sc.Text("each"), repeat=True)),
    )
    with trio.fail_after(10):
        async with serving(scenario) as server, connected(server) as client:
            texts = []
            for task in ("once", "once", "again", "again", "other"):
                reply = await client.request("POST", "/v1/responses", codex_body(user_item(task)))
                texts.append(reply.events()[2]["item"]["content"][0]["text"])  # type: ignore[index]
    assert texts == ["first", "ok", "each", "each", "ok"]
    assert server.count_inputs_containing("once") == 2
    assert [r.usage for r in server.main_requests()] == [Usage.for_turn(n) for n in range(1, 6)]


async def test_wait_for_holds_the_reply_until_signalled() -> None:
    scenario = sc.Scenario("gated", steps=(sc.Step("go", sc.Text("released"), wait_for="gate"),))
    signalled_at: list[float] = []
    replies: list[Reply] = []
    with trio.fail_after(10):
        async with serving(scenario) as server, connected(server) as client:
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    replies.append(
                        await client.request("POST", "/v1/responses", codex_body(user_item("go")))
                    )

                nursery.start_soon(ask)
                request = await server.wait_for_request(lambda r: "go" in r.newest_input, timeout=5)
                await trio.testing.wait_all_tasks_blocked()
                assert request.index not in server.outcomes
                assert not replies
                signalled_at.append(trio.current_time())
                server.signal("gate")
            assert await server.wait_for_outcome(request.index, timeout=5) == "completed"
    assert replies[0].events()[2]["item"]["content"][0]["text"] == "released"  # type: ignore[index]


async def test_slow_text_holds_then_finishes_on_signal() -> None:
    with trio.fail_after(10):
        async with serving(sc.SCENARIOS["slow"]) as server, connected(server) as client:
            await client.send(
                "POST", "/v1/messages?beta=true", claude_body(text_block(sc.SLOW_TASK))
            )
            head = await client.receive_until(b"text_delta")
            assert b"message_stop" not in head
            server.signal(sc.SLOW_SIGNAL)
            rest = b""
            while not isinstance(event := await client.next_event(), h11.EndOfMessage):
                assert isinstance(event, h11.Data)
                rest += event.data
            assert await server.wait_for_outcome(0, timeout=5) == "completed"
    text = "".join(
        e["delta"]["text"]  # type: ignore[index]
        for e in Reply(200, {}, head + rest).events()
        if e["type"] == "content_block_delta"
    )
    assert text == sc.SLOW_REPLY


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_client_disconnect_during_hold_is_recorded_and_server_keeps_serving(api: str) -> None:
    scenario = sc.Scenario(
        "forever", steps=(sc.Step("slow", sc.SlowText("never finished", hold=None)),)
    )
    path, body, marker = (
        ("/v1/messages?beta=true", claude_body(text_block("slow")), b"text_delta")
        if api == "anthropic"
        else ("/v1/responses", codex_body(user_item("slow")), b"output_text.delta")
    )
    with trio.fail_after(10):
        async with serving(scenario) as server:
            async with connected(server) as client:
                await client.send("POST", path, body)
                await client.receive_until(marker)
            assert await server.wait_for_outcome(0, timeout=5) == "disconnected"
            async with connected(server) as client:
                reply = await client.request("POST", "/v1/responses", codex_body(user_item("next")))
            assert await server.wait_for_outcome(1, timeout=5) == "completed"
    assert reply.status == 200
    assert server.outcomes == {0: "disconnected", 1: "completed"}


async def test_wait_for_request_returns_past_and_future_requests_and_times_out_clearly() -> None:
    with trio.fail_after(10):
        async with serving(sc.SCENARIOS["echo"]) as server, connected(server) as client:
            await client.request("POST", "/v1/responses", codex_body(user_item("first")))
            past = await server.wait_for_request(lambda r: r.newest_input == "first", timeout=1)
            assert past.index == 0
            with pytest.raises(RequestTimeout, match="first"):
                await server.wait_for_request(lambda r: r.newest_input == "never", timeout=0.2)

            async def later() -> None:
                await trio.testing.wait_all_tasks_blocked()
                await client.request("POST", "/v1/responses", codex_body(user_item("second")))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(later)
                future: RecordedRequest = await server.wait_for_request(
                    lambda r: r.newest_input == "second", timeout=5
                )
    assert future.index == 1
    assert future.at >= past.at


# ---------------------------------------------------------------- real clients
# A minimal local tmux setup (LAB.md) until these tests share the lab launcher.

LAB_CACHE = Path.home() / ".cache" / "akk-lab"
CLAUDE_KEY = "sk-ant-lab-0123456789abcdefghijklmnopqrstuvwxyz"
CODEX_PASTE_WINDOW = 0.3
"""Codex turns an Enter that follows typed text within ~120 ms into a newline."""


def client_binary(agent: str, version: str) -> Path:
    prefix = LAB_CACHE / f"{agent}-{version}" / "node_modules"
    binary = (
        prefix / "@anthropic-ai/claude-code-linux-x64/claude"
        if agent == "claude"
        else prefix / "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    )
    assert binary.exists(), f"{agent} {version} is not installed at {binary}; run make lab-clients"
    return binary


@attrs.frozen
class Pane:
    """One client in a tmux pane on a private socket."""

    socket: Path

    async def tmux(self, *args: str) -> str:
        result = await trio.run_process(
            ["tmux", "-S", str(self.socket), *args], capture_stdout=True
        )
        return result.stdout.decode()

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-t", "lab")

    async def wait_for_text(self, text: str, *, timeout: float) -> None:
        """Poll the composited screen until `text` shows (a screen has no change event)."""
        with trio.move_on_after(timeout):
            while True:
                if text in await self.screen():
                    return
                await trio.sleep(0.05)
        raise AssertionError(f"{text!r} never showed; screen:\n{await self.screen()}")

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", "lab", *keys)

    async def type_task(self, text: str) -> None:
        """Type `text` until the composer shows it (early keys can be dropped), then Enter."""
        for _attempt in range(5):
            await self.tmux("send-keys", "-t", "lab", "-l", text)
            with trio.move_on_after(2):
                while True:
                    if text in await self.screen():
                        break
                    await trio.sleep(0.05)
                break
        else:
            raise AssertionError(f"the composer never showed {text!r}:\n{await self.screen()}")
        await trio.sleep(CODEX_PASTE_WINDOW)
        await self.keys("Enter")


@asynccontextmanager
async def running(argv: list[str], cwd: Path, ready: str) -> AsyncIterator[Pane]:
    pane = Pane(cwd.parent / "tmux.sock")
    try:
        await trio.run_process(
            [
                *("tmux", "-S", str(pane.socket), "new-session", "-d", "-s", "lab"),
                *("-x", "120", "-y", "40", "-c", str(cwd), *argv),
            ]
        )
        await pane.wait_for_text(ready, timeout=20)
        yield pane
    finally:
        with trio.CancelScope(shield=True):
            await trio.run_process(["tmux", "-S", str(pane.socket), "kill-server"], check=False)


async def git_repo(path: Path) -> Path:
    await trio.run_process(["git", "init", "-q", str(path)])
    return path


@asynccontextmanager
async def start_claude(version: str, port: int, root: Path) -> AsyncIterator[Pane]:
    binary = client_binary("claude", version)
    work = await git_repo(root / "work")
    home = root / "home"
    home.mkdir()
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "theme": "dark",
                "customApiKeyResponses": {"approved": [CLAUDE_KEY[-20:]], "rejected": []},
                "projects": {str(work): {"hasTrustDialogAccepted": True, "allowedTools": []}},
                "autoUpdates": False,
            }
        )
    )
    env = [
        f"HOME={home}",
        f"ANTHROPIC_BASE_URL=http://127.0.0.1:{port}",
        f"ANTHROPIC_API_KEY={CLAUDE_KEY}",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
        "DISABLE_AUTOUPDATER=1",
        "TERM=xterm-256color",
    ]
    argv = ["env", *env, str(binary), "--permission-mode", "default"]
    async with running(argv, work, "? for shortcuts") as pane:
        yield pane


@asynccontextmanager
async def start_codex(version: str, port: int, root: Path) -> AsyncIterator[Pane]:
    binary = client_binary("codex", version)
    work = await git_repo(root / "work")
    home = root / "codex"
    home.mkdir()
    (home / "config.toml").write_text(
        f"""model = "lab-model"
model_provider = "lab"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
[model_providers.lab]
name = "lab"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
env_key = "LAB_KEY"
[projects."{work}"]
trust_level = "trusted"
[features]
daemon_auto_start = false
"""
    )
    env = [f"HOME={home}", f"CODEX_HOME={home}", "LAB_KEY=lab", "TERM=xterm-256color"]
    async with running(["env", *env, str(binary)], work, "lab-model default") as pane:
        yield pane


async def answer_until_sent(pane: Pane, server: ModelServer, key: str) -> RecordedRequest:
    """Press `key` until the answer reaches the model.

    Claude's questionnaire drops (does not queue) keys that arrive within about
    200 ms of its first paint (2.1.263 and 2.1.328), so a key is pressed again
    only while the questionnaire is still up and no answer has arrived 2 s later
    (sooner, a key a loaded machine is still taking would be pressed twice).
    """
    for _attempt in range(5):
        await pane.keys(key)
        try:
            return await server.wait_for_request(
                lambda r: sc.ANSWERED_CLAUDE in r.newest_input, timeout=2.0
            )
        except RequestTimeout:
            pass
        assert "Enter to select" in await pane.screen(), "questionnaire gone, no answer sent"
    raise AssertionError(f"the answer never reached the model: {server.summary()}")


@pytest.mark.lab
@pytest.mark.parametrize("version", ["2.1.263", "2.1.328"])
async def test_claude_accepts_questionnaire_and_sends_answer_once(
    version: str, tmp_path: Path
) -> None:
    with trio.fail_after(60):
        async with (
            serving(sc.SCENARIOS["questionnaire_single2"]) as server,
            start_claude(version, server.port, tmp_path) as pane,
        ):
            await pane.type_task(sc.ASK_TASK)
            await pane.wait_for_text("Enter to select", timeout=15)
            answer = await answer_until_sent(pane, server, "2")  # Blue: one question, one key
            await pane.wait_for_text("Thanks, I noted your answers.", timeout=15)
    assert '"Which color do you prefer?"="Blue"' in answer.newest_input
    assert server.count_inputs_containing('="Blue"') == 1
    assert server.count_inputs_containing(sc.ASK_TASK) == 1


@pytest.mark.lab
@pytest.mark.parametrize("version", ["0.153.4", "0.169.0"])
async def test_codex_accepts_escalated_exec_and_runs_it_once(version: str, tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with (
            serving(sc.SCENARIOS["codex_exec"]) as server,
            start_codex(version, server.port, tmp_path) as pane,
        ):
            await pane.type_task(sc.RUN_TASK)
            await pane.wait_for_text("Would you like to run the following command?", timeout=15)
            await pane.keys("y")
            ran = await server.wait_for_request(
                lambda r: sc.EXEC_MARKER in r.newest_input and not r.auxiliary, timeout=15
            )
            await pane.wait_for_text("The command ran.", timeout=15)
    assert "Process exited with code 0" in ran.newest_input
    assert (tmp_path / f"{sc.EXEC_MARKER}.txt").exists()
    assert server.count_inputs_containing(sc.RUN_TASK) == 1
