"""`akk mcp`: the MCP server on stdio that serves the controller protocol to an MCP host.

It runs on Trio (the SDK runs on anyio, which runs on Trio), so the bridge's
controller connection (`akk.mcp.link`, built on `akk.client`) shares its loop.
Tools (`akk.mcp.tools`) forward to the server one call each; the wait tool reads
the event buffer (`akk.mcp.events`).

Events are also pushed, for hosts that can react (`wait_events` stays the
portable path): the resource ``akk://events`` holds the unacked events, and a
subscriber is told ``notifications/resources/updated`` when one arrives, by
``resources/subscribe`` on a handshake-era connection or a
``subscriptions/listen`` stream on a 2026-07-28 one. The notification carries
only the URI, so it can neither lose an event nor leak one: the host reads the
resource (or calls the wait tool) and acks as always. Logging messages were not
chosen: the logging capability is deprecated as of 2026-07-28, and there it may
only answer a request, so it cannot wake a host.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema
import mcp.types as mt
import trio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from akk import __version__
from akk.cli.text import json_text
from akk.client import AkkError
from akk.mcp import results
from akk.mcp.events import EventBuffer
from akk.mcp.link import CredentialRefused, Link, Target, Unavailable
from akk.mcp.tools import (
    BY_NAME,
    TOOLS,
    WAIT_EVENTS_SCHEMA,
    WAIT_MAX_DEFAULT,
    WAIT_MAX_LIMIT,
    WAIT_TIMEOUT_DEFAULT,
    ToolSpec,
)
from akk.protocol.rules import RULES

EVENTS_URI = "akk://events"
CALLS_AT_ONCE = 64
"""Tool calls in flight at once; the SDK spawns a task per request and bounds none, so a
call beyond this is refused at once (`busy`) rather than held."""
INSTRUCTIONS = (
    "AKK drives the Claude Code and Codex sessions people run in tmux. List terminals, send "
    "a task, wait for events (agent_knock_knock_wait_events, or subscribe to akk://events), "
    "read status, answer by ids, ack each event. " + RULES
)
_WAIT_ARGS = jsonschema.Draft202012Validator(WAIT_EVENTS_SCHEMA)


class Bridge:
    """The MCP server's handlers over one `Link` and its `EventBuffer`."""

    def __init__(self, link: Link, buffer: EventBuffer) -> None:
        self._link = link
        self._buffer = buffer
        self._bus = InMemorySubscriptionBus()
        self._calls = trio.CapacityLimiter(CALLS_AT_ONCE)
        self._subscriber: ServerSession | None = None
        """The handshake-era host that subscribed to akk://events (stdio has one host)."""
        self.server: Server[Any] = Server(
            "akk",
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=ListenHandler(self._bus, max_subscriptions=8),
        )

    async def announce(self) -> None:
        """Tell subscribers each time events arrive (bursts coalesce into one notification)."""
        seen = 0
        while True:
            await self._buffer.arrived(seen)
            seen = self._buffer.arrivals
            if self._subscriber is not None:
                await self._subscriber.send_resource_updated(EVENTS_URI)
            await self._bus.publish(ResourceUpdated(EVENTS_URI))

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(
            tools=[
                mt.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
                for t in TOOLS
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        tool = BY_NAME.get(params.name)
        if tool is None:
            raise MCPError(mt.INVALID_PARAMS, f"unknown tool {params.name!r}")
        try:
            self._calls.acquire_nowait()
        except trio.WouldBlock:
            return results.failure(
                "busy",
                f"{CALLS_AT_ONCE} tool calls are already in flight; wait for one to return "
                "and call again (nothing was sent)",
            )
        try:
            return await self._forward(tool, params.arguments or {})
        finally:
            self._calls.release()

    async def _forward(self, tool: ToolSpec, arguments: dict[str, Any]) -> mt.CallToolResult:
        if tool.method is None:
            return await self._wait_events(arguments)
        try:
            result = await self._link.call(tool.method, arguments)
        except AkkError as exc:
            return results.failure(exc.reason, exc.message, exc.data)
        except Unavailable as exc:
            return results.failure(exc.reason, exc.message)
        return results.success(tool.name, result)

    async def _wait_events(self, arguments: dict[str, Any]) -> mt.CallToolResult:
        problem = jsonschema.exceptions.best_match(_WAIT_ARGS.iter_errors(arguments))
        if problem is not None:
            return results.failure(
                "invalid_params",
                f"{problem.message} (at {problem.json_path}); pass timeout_seconds "
                f"(0 to 300) and max (1 to {WAIT_MAX_LIMIT}), or nothing",
            )
        timeout = arguments.get("timeout_seconds", WAIT_TIMEOUT_DEFAULT)
        if not math.isfinite(timeout):  # JSON's NaN passes the schema's bounds
            return results.failure(
                "invalid_params",
                f"timeout_seconds is {timeout}, not a number of seconds; pass 0 to 300",
            )
        held = await self._buffer.wait(arguments.get("max", WAIT_MAX_DEFAULT), timeout)
        return results.events(held, self._buffer.dropped)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourcesResult:
        events = mt.Resource(
            uri=EVENTS_URI,
            name="events",
            description="This controller's events not yet acked, oldest first (JSON); "
            "subscribe to be told when one arrives",
            mime_type="application/json",
        )
        return mt.ListResourcesResult(resources=[events])

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: mt.ReadResourceRequestParams
    ) -> mt.ReadResourceResult:
        _known(params.uri)
        held = {"events": self._buffer.pending(WAIT_MAX_LIMIT), "dropped": self._buffer.dropped}
        contents = mt.TextResourceContents(
            uri=EVENTS_URI, mime_type="application/json", text=json_text(held)
        )
        return mt.ReadResourceResult(contents=[contents])

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: mt.SubscribeRequestParams
    ) -> mt.EmptyResult:
        _known(params.uri)
        self._subscriber = ctx.session
        return mt.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: mt.UnsubscribeRequestParams
    ) -> mt.EmptyResult:
        _known(params.uri)
        self._subscriber = None
        return mt.EmptyResult()


def _known(uri: str) -> None:
    if uri != EVENTS_URI:
        raise MCPError(mt.INVALID_PARAMS, f"no resource {uri!r}; the one resource is {EVENTS_URI}")


async def serve(target: Target, token: str) -> str | None:
    """Serve MCP on stdin/stdout until the host closes stdin.

    Returns None, or why the bridge could not start (the server refused the
    credential). A server that is not running is no reason: calls report it
    until it runs, and the bridge connects by itself.
    """
    buffer = EventBuffer()
    link = Link(target, token, buffer)
    bridge = Bridge(link, buffer)
    async with trio.open_nursery() as nursery:
        try:
            await nursery.start(link.run)
        except CredentialRefused as exc:
            nursery.cancel_scope.cancel()
            return str(exc)
        nursery.start_soon(bridge.announce)
        async with stdio_server() as (read, write):
            await bridge.server.run(read, write, bridge.server.create_initialization_options())
        nursery.cancel_scope.cancel()
    return None
