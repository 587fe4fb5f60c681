"""`akk mcp` as a process, driven by the SDK's own stdio client, against a real `akk serve`.

The tools and their schemas against the shipped JSON Schema; bad arguments; a
wrong, missing or loose credential; the bridge outliving its server; events
pushed to either MCP era (in process); the bound on calls in flight. The
questionnaire flow with a real agent is in tests/lab/test_mcp.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import mcp.types as mt
import pytest
import trio
import trio.testing
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.server.subscriptions import ResourceUpdated
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from akk.mcp.bridge import CALLS_AT_ONCE, EVENTS_URI, Bridge
from akk.mcp.events import EventBuffer
from akk.mcp.link import Link, Target
from akk.mcp.tools import BRIDGED, PREFIX, WAIT_EVENTS
from akk.protocol.rules import RULES
from akk.protocol.schema import METHODS
from akk.store.location import StateDir
from tests.conftest import LiveServer
from tools.lab.akk_runner import AkkProcess


@attrs.define
class Notified:
    """The notifications a bridge sent, as the client session received them."""

    received: list[mt.ServerNotification] = attrs.field(factory=list)
    _arrived: trio.Event = attrs.field(factory=trio.Event)

    async def note(self, message: mt.ServerNotification | Exception) -> None:
        if not isinstance(message, Exception):
            self.received.append(message)
            self._arrived.set()
            self._arrived = trio.Event()

    async def first(self, kind: type[mt.ServerNotification], timeout: float = 10) -> Any:
        """The first notification of ``kind`` (waiting up to ``timeout`` seconds for it)."""
        with trio.fail_after(timeout):
            while not (found := [n for n in self.received if isinstance(n, kind)]):
                await self._arrived.wait()
        return found[0]


@asynccontextmanager
async def bridge(
    *args: str, token: str, errlog: Path, notified: Notified | None = None
) -> AsyncIterator[ClientSession]:
    """`akk mcp ARGS` with ``token`` as $AKK_TOKEN, initialized by the SDK's client session.

    Its stderr goes to ``errlog``; its notifications are noted in ``notified``.
    """

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "akk", "mcp", *args],
        env={"AKK_TOKEN": token},
        cwd=os.getcwd(),
    )
    with errlog.open("w") as stderr:
        async with (
            stdio_client(params, errlog=stderr) as (read, write),
            ClientSession(read, write, message_handler=(notified or Notified()).note) as session,
        ):
            with trio.fail_after(30):
                await session.initialize()
            yield session


def structured(result: mt.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def _state(live: LiveServer) -> tuple[str, str]:
    return ("--state-dir", str(live.state.path))


def check_tools(listed: list[mt.Tool]) -> None:
    """The listed tools are the protocol's methods (and the wait tool), each with its
    params schema from the shipped JSON Schema, any top-level choice lifted and stated."""
    by_name = {tool.name: tool for tool in listed}
    assert set(by_name) == {PREFIX + m for m in METHODS if m != "hello"} | {WAIT_EVENTS}
    assert set(BRIDGED) == set(METHODS) - {"hello"}
    for method in BRIDGED:
        tool = by_name[PREFIX + method]
        params = METHODS[method]["params"]
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert not {"oneOf", "anyOf", "allOf"} & set(schema), method
        branches = params.get("oneOf", [])
        # Every property of the method (and of each of its shapes), with its own schema.
        expected = dict(params.get("properties", {}))
        for branch in branches:
            expected |= branch.get("properties", {})
        assert schema["properties"] == expected, method
        assert schema.get("additionalProperties") is False
        assert set(schema.get("required", ())) == set(params.get("required", ())) | (
            set.intersection(*(set(b.get("required", ())) for b in branches)) if branches else set()
        )
        # The lifted choice is stated, shape by shape, and the rules are in every description.
        for branch in branches:
            assert "{" + ", ".join(branch["required"]) + "}" in (tool.description or "")
        assert RULES in (tool.description or "")
        jsonschema.Draft202012Validator.check_schema(schema)
    watch = by_name[PREFIX + "watch"].description or ""
    assert "exactly one of these shapes, and none of another's: {terminal_id} | " in watch


async def test_tools_are_the_protocol_methods_with_their_schemas(
    live_server: LiveServer, tmp_path: Path
) -> None:
    token = live_server.controllers["c1"]
    async with bridge(*_state(live_server), token=token, errlog=tmp_path / "err") as s:
        check_tools((await s.list_tools()).tools)


async def test_bad_arguments_are_tool_errors_and_the_bridge_carries_on(
    live_server: LiveServer, tmp_path: Path
) -> None:
    token = live_server.controllers["c2"]
    async with bridge(*_state(live_server), token=token, errlog=tmp_path / "err") as s:
        wrong = await s.call_tool(PREFIX + "status", {"turn_id": 42})
        assert wrong.is_error and structured(wrong)["reason"] == "invalid_params"
        both = await s.call_tool(PREFIX + "watch", {"terminal_id": "t", "thread_id": "x"})
        assert both.is_error and structured(both)["reason"] == "invalid_params"
        waited = await s.call_tool(WAIT_EVENTS, {"timeout_seconds": "soon"})
        assert waited.is_error and structured(waited)["reason"] == "invalid_params"
        assert "timeout_seconds" in waited.content[0].text  # type: ignore[union-attr]
        missing = await s.call_tool(PREFIX + "status", {"turn_id": "turn_nope"})
        assert missing.is_error and structured(missing)["reason"] == "not_found"
        listed = await s.call_tool(PREFIX + "list", {})
        assert not listed.is_error
        assert set(structured(listed)) >= {"terminals", "turns", "watches"}
        empty = await s.call_tool(WAIT_EVENTS, {"timeout_seconds": 0})
        assert structured(empty) == {"events": [], "dropped": 0}


async def _start(live: LiveServer, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`akk mcp ARGS` with ``token`` as $AKK_TOKEN ("" for none), run to its end."""
    env = {k: v for k, v in os.environ.items() if k != "AKK_TOKEN"}
    if token:
        env["AKK_TOKEN"] = token
    argv = [sys.executable, "-m", "akk", "mcp", *_state(live), *args]
    return await trio.to_thread.run_sync(
        lambda: subprocess.run(
            argv, env=env, input="", capture_output=True, text=True, timeout=60, check=False
        )
    )


async def test_a_wait_for_nan_seconds_is_a_tool_error_on_the_raw_wire(
    live_server: LiveServer,
) -> None:
    """JSON's NaN (which the SDK's parser takes) passes the schema's bounds; it is refused
    with a reason, as any bad argument, not raised as an untyped error."""

    def wait(call_id: int, arguments: str) -> str:  # raw: json.dumps would not write NaN
        name = json.dumps(WAIT_EVENTS)
        return (
            f'{{"jsonrpc":"2.0","id":{call_id},"method":"tools/call",'
            f'"params":{{"name":{name},"arguments":{arguments}}}}}'
        )

    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        wait(2, '{"timeout_seconds":NaN}'),
    ]  # fmt: skip
    env = {**os.environ, "AKK_TOKEN": live_server.controllers["c1"]}
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "akk", "mcp", *_state(live_server)],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    replies: dict[object, Any] = {}
    try:
        with trio.fail_after(30):
            await process.stdin.send_all(("\n".join(lines) + "\n").encode())
            pending = b""
            while 2 not in replies:  # stdin stays open until the answer: EOF ends the bridge
                chunk = await process.stdout.receive_some()
                assert chunk, "the bridge ended without answering"
                *whole, pending = (pending + chunk).split(b"\n")
                replies |= {reply.get("id"): reply for reply in map(json.loads, whole)}
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
    refused = replies[2]["result"]
    assert refused["isError"] and refused["structuredContent"]["reason"] == "invalid_params"
    assert "timeout_seconds" in refused["content"][0]["text"]


async def test_a_wrong_or_missing_credential_stops_the_start(
    live_server: LiveServer, tmp_path: Path
) -> None:
    files = {name: tmp_path / name for name in ("loose", "refused", "malformed")}
    files["loose"].write_text("akkc_" + "y" * 43 + "\n")
    files["refused"].write_text("akkc_" + "y" * 43 + "\n")
    files["malformed"].write_text("not a token\n")
    for name, path in files.items():
        path.chmod(0o644 if name == "loose" else 0o600)
    runs: dict[str, subprocess.CompletedProcess[str]] = {}

    async def start(name: str, token: str, *args: str) -> None:
        runs[name] = await _start(live_server, token, *args)

    async with trio.open_nursery() as nursery:  # each is its own process: all at once
        nursery.start_soon(start, "missing", "")
        nursery.start_soon(start, "wrong", "akkc_" + "x" * 43)
        for name, path in files.items():
            nursery.start_soon(start, name, "", "--token-file", str(path))
    assert all(run.returncode == 2 for run in runs.values())
    assert all(run.stdout == "" for run in runs.values())  # stdout is the MCP wire
    assert "no credential" in runs["missing"].stderr
    assert "akk token create" in runs["missing"].stderr
    assert "refused the credential (HTTP 401)" in runs["wrong"].stderr
    assert f"chmod 600 {files['loose']}" in runs["loose"].stderr
    assert "refused the credential (HTTP 401)" in runs["refused"].stderr
    assert "does not hold a credential" in runs["malformed"].stderr
    assert "not a token" not in runs["malformed"].stderr  # a secret file is never quoted


async def _logged(errlog: Path, text: str, count: int = 1) -> None:
    """Wait until the bridge's stderr holds ``text`` ``count`` times (the bridge's own account)."""
    with trio.fail_after(30):
        while (await trio.Path(errlog).read_text()).count(text) < count:
            await trio.sleep(0.05)


async def test_the_bridge_outlives_its_server_and_finds_it_again(tmp_path: Path) -> None:
    akk = AkkProcess(None, tmp_path, "ctl")
    errlog = tmp_path / "bridge.err"
    try:
        await trio.to_thread.run_sync(akk.start)
        state = ("--state-dir", str(akk.state.path))
        async with bridge(*state, token=akk.tokens["ctl"], errlog=errlog) as s:
            assert not (await s.call_tool(PREFIX + "list", {})).is_error
            await trio.to_thread.run_sync(akk.kill)
            await _logged(errlog, "the server closed the connection; retrying")
            for _ in range(2):  # each call says so, and sends nothing
                gone = await s.call_tool(PREFIX + "status", {"turn_id": "turn_x"})
                assert gone.is_error and structured(gone)["reason"] == "server_not_running"
                text = gone.content[0].text  # type: ignore[union-attr]
                assert text.startswith("server_not_running: server not running")
                assert "Start `akk serve`" in text and "Nothing was sent" in text
            await trio.to_thread.run_sync(akk.start)  # the same state directory, a new port
            await _logged(errlog, "connected to", count=2)  # by itself, before any call
            listed = await s.call_tool(PREFIX + "list", {})
            assert not listed.is_error and "terminals" in structured(listed)
    finally:
        await trio.to_thread.run_sync(akk.stop)


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_arriving_event_is_pushed_to_a_subscriber_of_either_era(
    mode: str, tmp_path: Path
) -> None:
    """A handshake-era host subscribes with resources/subscribe; a 2026-07-28 one ("auto"
    negotiates it here) listens with subscriptions/listen. Either is told the resource
    changed, reads the same events from it, and an event leaves only when acked."""
    buffer = EventBuffer()
    link = Link(Target(None, StateDir(tmp_path / "none")), "akkc_" + "x" * 43, buffer)
    bridged = Bridge(link, buffer)
    notified = Notified()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bridged.announce)
        async with Client(bridged.server, mode=mode, message_handler=notified.note) as client:
            held = {"event_id": "evt_1", "kind": "done", "turn_id": "turn_1", "summary": "ok"}
            if mode == "legacy":
                assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
                await client.subscribe_resource(EVENTS_URI)
                buffer.add(held)
                updated = await notified.first(mt.ResourceUpdatedNotification)
                assert updated.params.uri == EVENTS_URI
            else:
                assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
                async with client.listen(resource_subscriptions=[EVENTS_URI]) as subscription:
                    buffer.add(held)
                    with trio.fail_after(10):
                        pushed = await subscription.__anext__()
                assert pushed == ResourceUpdated(EVENTS_URI)
            read = await client.read_resource(EVENTS_URI)
            assert read.contents[0].text == json.dumps({"events": [held], "dropped": 0})  # type: ignore[union-attr]
            waited = await client.call_tool(WAIT_EVENTS, {"timeout_seconds": 0})
            assert structured(waited) == {"events": [held], "dropped": 0}
        nursery.cancel_scope.cancel()


async def test_calls_beyond_the_bound_are_refused_at_once(tmp_path: Path) -> None:
    """The SDK bounds no requests in flight; the bridge refuses the one too many (`busy`)."""
    buffer = EventBuffer()
    link = Link(Target(None, StateDir(tmp_path / "none")), "akkc_" + "x" * 43, buffer)
    bridged = Bridge(link, buffer)
    returned: list[mt.CallToolResult] = []
    async with Client(bridged.server) as client:

        async def wait() -> None:
            returned.append(await client.call_tool(WAIT_EVENTS, {"timeout_seconds": 60}))

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for _ in range(CALLS_AT_ONCE):
                    nursery.start_soon(wait)
                await trio.testing.wait_all_tasks_blocked()
                busy = await client.call_tool(WAIT_EVENTS, {"timeout_seconds": 0})
                assert busy.is_error and structured(busy)["reason"] == "busy"
                buffer.add({"event_id": "evt_1", "kind": "done"})
        assert len(returned) == CALLS_AT_ONCE
        held = [{"event_id": "evt_1", "kind": "done"}]
        assert all(structured(r)["events"] == held for r in returned)
        freed = await client.call_tool(WAIT_EVENTS, {"timeout_seconds": 0})
        assert not freed.is_error


async def test_a_revoked_credential_ends_the_retries_and_each_call_says_so(
    tmp_path: Path,
) -> None:
    akk = AkkProcess(None, tmp_path, "ctl")
    errlog = tmp_path / "bridge.err"
    try:
        await trio.to_thread.run_sync(akk.start)
        state = ("--state-dir", str(akk.state.path))
        async with bridge(*state, token=akk.tokens["ctl"], errlog=errlog) as s:
            assert not (await s.call_tool(PREFIX + "list", {})).is_error
            revoke = [sys.executable, "-m", "akk", "token", "revoke", "ctl", *state]
            revoked = await trio.to_thread.run_sync(
                lambda: subprocess.run(revoke, capture_output=True, text=True, check=False)
            )
            assert revoked.returncode == 0, revoked.stderr
            await _logged(errlog, "calls answer unauthorized from now on")
            for _ in range(2):
                refused = await s.call_tool(PREFIX + "list", {})
                assert refused.is_error and structured(refused)["reason"] == "unauthorized"
                text = refused.content[0].text  # type: ignore[union-attr]
                assert "HTTP 401" in text and "Restart `akk mcp`" in text
    finally:
        await trio.to_thread.run_sync(akk.stop)
    # One refused attempt, then no more (every attempt refused is logged).
    assert (await trio.Path(errlog).read_text()).count("HTTP 401") == 1


async def test_url_names_the_server_without_a_state_directory(
    live_server: LiveServer, tmp_path: Path
) -> None:
    token = live_server.controllers["c3"]
    async with bridge("--url", live_server.url, token=token, errlog=tmp_path / "a") as s:
        listed = await s.call_tool(PREFIX + "list", {})
        assert not listed.is_error and "terminals" in structured(listed)
    with trio.socket.socket() as unused:  # a port nothing listens on
        await unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    nowhere = f"ws://127.0.0.1:{port}/v1"
    async with bridge("--url", nowhere, token=token, errlog=tmp_path / "b") as s:
        gone = await s.call_tool(PREFIX + "list", {})
        assert gone.is_error and structured(gone)["reason"] == "server_not_running"
        assert f"cannot connect to {nowhere}" in gone.content[0].text  # type: ignore[union-attr]
