"""The WebSocket endpoint against a live server: auth, calls, and fuzzed frames."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from akk.client import AkkError, ConnectError, connect
from akk.protocol.errors import Reason
from akk.protocol.schema import METHODS
from tests.conftest import LiveServer
from tests.tier import examples

REASONS = {reason.value for reason in Reason}


def _headers(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"Authorization", f"Bearer {token}".encode())]


def assert_error_reply(text: str | bytes) -> dict[str, Any]:
    """A well-formed JSON-RPC 2.0 error reply with a known reason and a message."""
    reply = json.loads(text)
    assert reply["jsonrpc"] == "2.0"
    assert "result" not in reply
    error = reply["error"]
    assert isinstance(error["code"], int)
    assert isinstance(error["message"], str) and error["message"]
    assert error["data"]["reason"] in REASONS
    return reply


async def test_hello_and_empty_list(live_server: LiveServer) -> None:
    with trio.fail_after(10):
        async with connect(live_server.url, live_server.controllers["c1"]) as ctl:
            assert ctl.server["protocol"] == 1
            assert {"hello", "list"} <= set(ctl.server["capabilities"]["methods"])
            assert await ctl.call("list") == {
                "terminals": [],
                "turns": [],
                "watches": [],
                "sessions": [],
                "omitted": {"turns": 0, "watches": 0, "sessions": 0, "terminals": 0},
            }


@pytest.mark.parametrize("value", [None, "Bearer wrong-token", "Basic {token}", "{token}"])
async def test_bad_token_is_refused_with_401(live_server: LiveServer, value: str | None) -> None:
    headers = (
        []
        if value is None
        else [(b"Authorization", value.format(token=live_server.token).encode())]
    )
    with trio.fail_after(10), pytest.raises(ConnectionRejected) as rejected:
        async with open_websocket_url(live_server.url, extra_headers=headers):
            pass
    assert rejected.value.status_code == 401


async def test_client_reports_a_wrong_token_with_next_step(live_server: LiveServer) -> None:
    with trio.fail_after(10), pytest.raises(ConnectError, match="akk token"):
        async with connect(live_server.url, "nope", controller_id="c1"):
            pass


async def test_calls_before_hello_are_refused(live_server: LiveServer) -> None:
    with trio.fail_after(10):
        async with open_websocket_url(
            live_server.url, extra_headers=_headers(live_server.controllers["c2"])
        ) as ws:
            await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "list"}))
            reply = assert_error_reply(await ws.get_message())
            assert reply["id"] == 1
            assert reply["error"]["data"]["reason"] == "unauthorized"
            assert "hello" in reply["error"]["message"]


@pytest.mark.parametrize(
    ("method", "params", "reason"),
    [
        ("nope", {}, "not_found"),
        ("hello", {"controller_id": "c1", "extra": 1}, "invalid_params"),
        ("status", {"turn_id": "a", "watch_id": "b"}, "invalid_params"),
        ("status", {}, "invalid_params"),
        ("approve", {"turn_id": "t", "decision": "approve_always"}, "invalid_params"),
        ("send", {"terminal_id": "t", "request": "x", "client_request_id": "r"}, "not_found"),
    ],
)
async def test_bad_calls_get_reasoned_errors(
    live_server: LiveServer, method: str, params: dict[str, Any], reason: str
) -> None:
    with trio.fail_after(10):
        async with connect(live_server.url, live_server.controllers["c1"]) as ctl:
            with pytest.raises(AkkError) as error:
                await ctl.call(method, params)
            assert error.value.reason == reason
            assert error.value.message
            # The connection survives the error.
            assert (await ctl.call("list"))["terminals"] == []


async def test_oversized_frame_gets_an_error_and_the_connection_survives(
    live_server: LiveServer,
) -> None:
    big = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "hello", "params": {"controller_id": "x" * 70_000}}
    )
    with trio.fail_after(10):
        async with open_websocket_url(
            live_server.url, extra_headers=_headers(live_server.controllers["c2"])
        ) as ws:
            await ws.send_message(big)
            reply = assert_error_reply(await ws.get_message())
            assert reply["error"]["data"]["detail"] == "frame_too_large"
            await ws.send_message(
                json.dumps({"jsonrpc": "2.0", "id": 8, "method": "hello", "params": {}})
            )
            assert json.loads(await ws.get_message())["result"]["protocol"] == 1


async def test_a_huge_frame_closes_only_that_connection(live_server: LiveServer) -> None:
    with trio.fail_after(10):
        async with open_websocket_url(
            live_server.url,
            extra_headers=_headers(live_server.controllers["c2"]),
            max_message_size=1 << 24,
        ) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.send_message("x" * (1 << 20))
                await ws.get_message()
            assert closed.value.reason.code == 1009
        async with connect(live_server.url, live_server.controllers["c1"]) as ctl:
            assert (await ctl.call("list"))["turns"] == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)

frames = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200),
    json_values.map(json.dumps),
    st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "id": json_values},
        optional={
            "method": st.sampled_from([*METHODS, "x", ""]) | json_values,
            "params": json_values,
        },
    ).map(json.dumps),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(1000, 100_000)),
    st.builds(
        lambda n: json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x" * n}),
        st.integers(60_000, 200_000),
    ),
)


FUZZ_BATCHES = examples(400)
FUZZ_BATCH_SIZE = 25  # 10,000 frames in all (2,000 in the fast tier)


@settings(
    max_examples=FUZZ_BATCHES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(batch=st.lists(frames, min_size=FUZZ_BATCH_SIZE, max_size=FUZZ_BATCH_SIZE))
def test_fuzzed_frames_always_get_well_formed_errors(
    live_server: LiveServer, batch: list[str | bytes]
) -> None:
    async def run() -> None:
        with trio.fail_after(60):
            async with open_websocket_url(
                live_server.url,
                extra_headers=_headers(live_server.controllers["c2"]),
                max_message_size=1 << 24,
            ) as ws:
                said_hello = False
                for frame in batch:
                    await ws.send_message(frame)
                    reply = json.loads(await ws.get_message())
                    if "result" in reply:
                        # Only a valid hello can succeed before hello.
                        assert said_hello or json.loads(frame)["method"] == "hello"
                        said_hello = True
                    else:
                        assert_error_reply(json.dumps(reply))
            # The server still serves a well-behaved controller.
            async with connect(live_server.url, live_server.controllers["after"]) as ctl:
                assert "terminals" in await ctl.call("list")

    trio.run(run)
