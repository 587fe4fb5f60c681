"""What one peer can make the endpoint hold, and what its calls do when it goes.

A real `ControllerServer` on 127.0.0.1, port 0, with a method table whose
`list` calls block until the test releases them: a call that was read runs to
its end whoever ends its connection, its slots stay held until then, and one
credential holds at most its share of connections and of call slots.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    WebSocketConnection,
    open_websocket_url,
)

from akk.client import ConnectError, connect
from akk.config import EndpointLimits
from akk.methods.common import Peer
from akk.server.auth import CredentialBook
from akk.server.connections import NO_HELLO, REVOKED, ConnectionRegistry
from akk.server.endpoint import ControllerServer, ServerSettings
from akk.server.instance import new_nonce
from akk.store.credentials import Credential, Scope, mint_controller_token, token_digest

CONTROLLERS = ("a", "b", "c", "d")


@attrs.define
class HeldCalls:
    """The method table: hello claims; each `list` waits for `release`, then counts as ended."""

    connections: ConnectionRegistry
    release: trio.Event = attrs.field(factory=trio.Event)
    entered: int = 0
    ended: int = 0
    cancelled: int = 0
    hellos: int = 0

    async def call(self, peer: Peer, method: str, params: dict[str, Any]) -> Any:
        if method == "hello":
            self.hellos += 1
            peer.said_hello = True
            self.connections.claim(peer.controller_id, peer.connection,
                                   exclusive=not peer.operator)  # fmt: skip
            return {"controller_id": peer.controller_id}
        self.entered += 1
        try:
            await self.release.wait()
        except trio.Cancelled:
            self.cancelled += 1
            raise
        self.ended += 1
        return {"ended": self.ended}


@attrs.frozen
class Served:
    server: ControllerServer
    methods: HeldCalls
    connections: ConnectionRegistry
    url: str
    operator: str
    tokens: dict[str, str]
    stop: trio.CancelScope

    def headers(self, who: str) -> list[tuple[bytes, bytes]]:
        token = self.operator if who == "operator" else self.tokens[who]
        return [(b"Authorization", f"Bearer {token}".encode())]


@asynccontextmanager
async def serving(limits: EndpointLimits) -> AsyncIterator[Served]:
    operator = secrets.token_urlsafe(32)
    tokens = {name: mint_controller_token() for name in CONTROLLERS}
    book = CredentialBook(
        operator,
        {token_digest(t): Credential(name, Scope.CONTROLLER) for name, t in tokens.items()},
    )
    connections = ConnectionRegistry()
    methods = HeldCalls(connections)
    server = ControllerServer(
        ServerSettings(port=0, limits=limits), methods,  # type: ignore[arg-type]
        book=book, connections=connections, nonce=new_nonce(),
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve)
        url = f"ws://127.0.0.1:{port}/v1"
        yield Served(server, methods, connections, url, operator, tokens, nursery.cancel_scope)
        nursery.cancel_scope.cancel()


async def until(condition: Callable[[], bool]) -> None:
    """Return once ``condition`` holds (the caller's deadline bounds the wait)."""
    while not condition():
        await trio.testing.wait_all_tasks_blocked(0.01)


async def rpc(ws: WebSocketConnection, call_id: int, method: str) -> dict[str, Any]:
    await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": call_id, "method": method}))
    reply: dict[str, Any] = json.loads(await ws.get_message())
    return reply


@asynccontextmanager
async def said_hello(served: Served, who: str) -> AsyncIterator[WebSocketConnection]:
    async with open_websocket_url(served.url, extra_headers=served.headers(who)) as ws:
        assert "result" in await rpc(ws, 0, "hello")
        yield ws


async def test_a_call_runs_to_its_end_after_its_peer_hangs_up() -> None:
    """The peer goes mid-call: the handler is not cancelled, ends, and frees its slots."""
    with trio.fail_after(10):
        async with serving(EndpointLimits()) as served:
            server, methods = served.server, served.methods
            async with said_hello(served, "a") as ws:
                await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "list"}))
                await until(lambda: methods.entered == 1)
            await until(lambda: server.shares.connections == 0)
            # The connection is gone; its call runs on and holds its slots.
            assert served.connections.current("a") is None
            assert (methods.ended, methods.cancelled) == (0, 0)
            assert server.shares.held("a") == (0, 1)
            assert server.shares.calls == 1
            methods.release.set()
            await until(lambda: server.shares.calls == 0)
            assert (methods.ended, methods.cancelled) == (1, 0)
            assert server.shares.held("a") == (0, 0)
            assert (server.shares.calls, server.stats.replies_dropped) == (0, 1)


async def test_a_call_runs_to_its_end_after_the_server_closes_its_connection() -> None:
    """A revoked credential's connection closes at once (4003); its call still ends."""
    with trio.fail_after(10):
        async with serving(EndpointLimits()) as served:
            server, methods = served.server, served.methods
            async with said_hello(served, "a") as ws:
                await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "list"}))
                await until(lambda: methods.entered == 1)
                assert served.connections.revoke("a") == 1
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.get_message()
                assert closed.value.reason.code == REVOKED
            await until(lambda: server.shares.connections == 0)
            assert (methods.ended, methods.cancelled) == (0, 0)
            methods.release.set()
            await until(lambda: server.shares.calls == 0)
            assert (methods.ended, methods.cancelled) == (1, 0)
            assert server.stats.replies_dropped == 1


async def test_server_shutdown_still_cancels_the_calls_in_flight() -> None:
    with trio.fail_after(10):
        async with serving(EndpointLimits()) as served, said_hello(served, "a") as ws:
            await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "list"}))
            await until(lambda: served.methods.entered == 1)
            served.stop.cancel()
            with pytest.raises(ConnectionClosed):
                await ws.get_message()
        assert (served.methods.ended, served.methods.cancelled) == (0, 1)


async def test_reconnecting_does_not_free_the_slots_of_calls_left_running() -> None:
    """A credential's calls left behind by a hang-up keep its share: its new connection's
    first call (its hello) waits for one to end, while another controller is served."""
    limits = EndpointLimits(calls_per_connection=8, calls_per_credential=2)
    with trio.fail_after(10):
        async with serving(limits) as served:
            server, methods = served.server, served.methods
            async with said_hello(served, "a") as ws:
                for call_id in (1, 2):
                    await ws.send_message(
                        json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "list"})
                    )
                await until(lambda: methods.entered == 2)
            await until(lambda: server.shares.connections == 0)
            async with (
                open_websocket_url(served.url, extra_headers=served.headers("a")) as again,
                said_hello(served, "b") as other,
            ):
                await again.send_message(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "hello"}))
                await other.send_message(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "list"}))
                await until(lambda: methods.entered == 3)  # b's call
                await trio.testing.wait_all_tasks_blocked(0.05)
                assert methods.hellos == 2, "a's hello took a slot its old calls hold"
                assert server.shares.held("a") == (1, 2)
                methods.release.set()
                assert json.loads(await again.get_message())["id"] == 3
                assert json.loads(await other.get_message())["id"] == 4
            await until(lambda: server.shares.calls == 0)
            assert methods.hellos == 3
            assert (methods.entered, methods.ended, methods.cancelled) == (3, 3, 0)


async def test_one_credential_cannot_take_every_call_slot() -> None:
    """Across two connections, one controller holds at most its share of the server's calls;
    another controller's calls still run."""
    limits = EndpointLimits(calls_per_connection=3, calls_per_credential=4, calls_in_flight=6)
    with trio.fail_after(10):
        async with serving(limits) as served:
            server, methods = served.server, served.methods
            async with (
                # Like a flood of calls that never reads its replies: no hello needed to hold
                # slots (each call's reply is the refusal), and no takeover between the two.
                open_websocket_url(served.url, extra_headers=served.headers("a")) as first,
                open_websocket_url(served.url, extra_headers=served.headers("a")) as second,
                said_hello(served, "b") as other,
            ):
                for ws, ids in ((first, (1, 2, 3)), (second, (4, 5, 6))):
                    for call_id in ids:
                        await ws.send_message(
                            json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "list"})
                        )
                await until(lambda: methods.entered == 4)
                await trio.testing.wait_all_tasks_blocked(0.05)
                assert server.shares.held("a")[1] == 4
                assert methods.entered == 4
                for call_id in (7, 8):
                    await other.send_message(
                        json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "list"})
                    )
                await until(lambda: methods.entered == 6)
                assert server.shares.held("b")[1] == 2
                methods.release.set()
                assert {json.loads(await other.get_message())["id"] for _ in range(2)} == {7, 8}
            await until(lambda: server.shares.calls == 0)
            assert methods.cancelled == 0


async def test_one_credential_holds_at_most_its_share_of_connections() -> None:
    """Its next upgrade gets 429 with the reason; other controllers and the operator connect."""
    limits = EndpointLimits(max_connections=16, connections_per_credential=3)
    with trio.fail_after(10):
        async with serving(limits) as served:
            async with trio.open_nursery() as nursery:
                held = 0

                async def hold() -> None:
                    nonlocal held
                    async with open_websocket_url(served.url, extra_headers=served.headers("a")):
                        held += 1
                        await trio.sleep_forever()

                for _ in range(3):
                    nursery.start_soon(hold)
                await until(lambda: held == 3)
                with pytest.raises(ConnectionRejected) as refused:
                    async with open_websocket_url(served.url, extra_headers=served.headers("a")):
                        pass
                assert refused.value.status_code == 429
                assert refused.value.body is not None
                assert b"holds 3 connections already" in refused.value.body
                # AKK's own client passes the server's reason on.
                with pytest.raises(ConnectError, match=r"HTTP 429.*holds 3 connections already"):
                    async with connect(served.url, served.tokens["a"]):
                        pass
                assert served.server.stats.refused_credential_full == 2
                for who in ("b", "operator"):
                    async with said_hello(served, who) as ws:
                        assert "result" in await rpc(ws, 1, "hello")
                nursery.cancel_scope.cancel()
            await until(lambda: served.server.shares.connections == 0)
            assert served.server.shares.held("a") == (0, 0)


async def test_the_last_connections_are_the_operators() -> None:
    """Controllers that fill every other connection leave the operator room to revoke them."""
    limits = EndpointLimits(max_connections=8, connections_per_credential=2, operator_reserve=2)
    with trio.fail_after(10):
        async with serving(limits) as served, trio.open_nursery() as nursery:
            held = 0

            async def hold(who: str) -> None:
                nonlocal held
                async with open_websocket_url(served.url, extra_headers=served.headers(who)):
                    held += 1
                    await trio.sleep_forever()

            for who in ("a", "a", "b", "b", "c", "c"):
                nursery.start_soon(hold, who)
            await until(lambda: held == 6)
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(served.url, extra_headers=served.headers("d")):
                    pass
            assert refused.value.status_code == 503
            async with said_hello(served, "operator"), said_hello(served, "operator"):
                assert served.server.shares.connections == 8
            nursery.cancel_scope.cancel()


async def test_a_connection_that_never_says_hello_is_closed() -> None:
    """Closed with 4002 and the next step once the hello timeout passes; one that said
    hello, connected before it, stays."""
    limits = EndpointLimits(hello_timeout=0.3)
    with trio.fail_after(10):
        async with (
            serving(limits) as served,
            said_hello(served, "a") as greeted,
            open_websocket_url(served.url, extra_headers=served.headers("b")) as silent,
        ):
            with pytest.raises(ConnectionClosed) as closed:
                await silent.get_message()
            assert closed.value.reason.code == NO_HELLO
            assert "call hello first" in (closed.value.reason.reason or "")
            assert served.server.stats.closed_no_hello == 1
            served.methods.release.set()
            assert "result" in await rpc(greeted, 1, "list")


async def test_a_credential_past_its_share_of_parsing_waits_and_others_do_not() -> None:
    """A frame within the size limit whose parse and schema check cost far more than a's
    bucket (5 ms, refilled at a millionth of real time; 60,000 names cost some 80 ms)
    empties it: a's next frame waits, while b's frames, costing microseconds each, are
    answered."""
    limits = EndpointLimits(parse_share=1e-6, parse_burst=0.005)
    names = {f"k{n}": 0 for n in range(60_000)}
    costly = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "respond_interaction",
        "params": {"turn_id": "t", "interaction_id": "i", **names},
    })  # fmt: skip
    assert len(costly) < limits.max_frame_bytes
    with trio.fail_after(20):
        async with (
            serving(limits) as served,
            said_hello(served, "a") as hog,
            said_hello(served, "b") as other,
        ):
            server = served.server
            await hog.send_message(costly)
            assert json.loads(await hog.get_message())["error"]["data"]["reason"] == (
                "invalid_params"
            )
            await hog.send_message(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "list"}))
            await until(lambda: server.stats.parses_delayed == 1)
            served.methods.release.set()
            assert "result" in await rpc(other, 3, "list")
            assert served.methods.entered == 1  # b's; a's frame is still not parsed
            assert server.stats.parses_delayed == 1
