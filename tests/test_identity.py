"""A controller is who its credential says: impersonation, revocation, takeover, ordering."""

from __future__ import annotations

import json
import time
from typing import Any

import apsw
import pytest
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from akk.client import AkkError, ConnectError, connect
from akk.server.connections import REVOKED, SUPERSEDED
from akk.store import turns
from akk.store.credentials import OPERATOR_ID
from tests.conftest import LiveServer


def _headers(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"Authorization", f"Bearer {token}".encode())]


def _frame(call_id: int, method: str, params: dict[str, Any] | None = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": call_id, "method": method, "params": params or {}})


async def _mint(server: LiveServer, name: str) -> str:
    async with connect(server.url, server.token) as operator:
        result = await operator.call("token_create", {"controller_id": name})
    assert result["controller_id"] == name
    token: str = result["token"]
    return token


def _insert_turn(server: LiveServer, controller_id: str, client_request_id: str) -> str:
    """A Turn row owned by ``controller_id``, written beside the server (WAL allows it)."""
    conn = apsw.Connection(str(server.state.store_path))
    conn.set_busy_timeout(5000)
    now = time.time()
    with conn:
        conn.execute(
            "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (controller_id, controller_id, now, now),
        )
        conn.execute(
            "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
            "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
            "VALUES ('t-test', 's', '%1', 1, 'claude', 2, 3, 'claude', 0, 0) "
            "ON CONFLICT DO NOTHING"
        )
        turn = turns.insert(
            conn, controller_id=controller_id, client_request_id=client_request_id,
            terminal_id="t-test", request_sha256="0" * 64, request_chars=1,
            evidence_status="unknown", evidence=None, evidence_limit="test",
            inactivity_seconds=60, lifetime_seconds=60, now=now,
        )  # fmt: skip
    conn.close()
    return turn.turn_id


async def test_hello_names_the_credentials_controller(live_server: LiveServer) -> None:
    with trio.fail_after(10):
        async with connect(live_server.url, live_server.controllers["c1"]) as ctl:
            assert ctl.server["controller_id"] == "c1"
            assert ctl.server["scope"] == "controller"
            assert "token_create" not in ctl.server["capabilities"]["methods"]
        async with connect(live_server.url, live_server.controllers["c1"], controller_id="c1"):
            pass


async def test_a_credential_cannot_say_hello_as_another_controller(
    live_server: LiveServer,
) -> None:
    with trio.fail_after(10), pytest.raises(AkkError) as refused:
        async with connect(live_server.url, live_server.controllers["c1"], controller_id="c2"):
            pass
    assert refused.value.reason == "unauthorized"
    assert "akk token create" in refused.value.message


async def test_the_operator_credential_is_only_the_operator(live_server: LiveServer) -> None:
    with trio.fail_after(10):
        with pytest.raises(AkkError) as refused:
            async with connect(live_server.url, live_server.token, controller_id="c1"):
                pass
        assert refused.value.reason == "unauthorized"
        async with connect(live_server.url, live_server.token) as operator:
            assert operator.server["controller_id"] == OPERATOR_ID
            assert operator.server["scope"] == "operator"
            assert {"token_create", "token_revoke", "doctor"} <= set(
                operator.server["capabilities"]["methods"]
            )
            with pytest.raises(AkkError) as taken:
                await operator.call("token_create", {"controller_id": OPERATOR_ID})
            assert taken.value.reason == "conflict"
            with pytest.raises(AkkError) as bad_name:
                await operator.call("token_create", {"controller_id": "has space"})
            assert bad_name.value.reason == "invalid_params"


async def test_a_controller_cannot_call_operator_methods(live_server: LiveServer) -> None:
    with trio.fail_after(10):
        async with connect(live_server.url, live_server.controllers["c1"]) as ctl:
            for method, params in (
                ("token_create", {"controller_id": "mine"}),
                ("token_list", {}),
                ("token_revoke", {"controller_id": "c2"}),
                ("doctor", {}),
            ):
                with pytest.raises(AkkError) as refused:
                    await ctl.call(method, params)
                assert refused.value.reason == "unauthorized", method


async def test_list_shows_only_the_callers_own_turns(live_server: LiveServer) -> None:
    a, b = await _mint(live_server, "owner-a"), await _mint(live_server, "owner-b")
    turn_of_b = _insert_turn(live_server, "owner-b", "req-b")
    with trio.fail_after(10):
        async with connect(live_server.url, a) as ctl_a:
            assert (await ctl_a.call("list"))["turns"] == []
        async with connect(live_server.url, b) as ctl_b:
            listed = (await ctl_b.call("list"))["turns"]
            assert [t["turn_id"] for t in listed] == [turn_of_b]
        async with connect(live_server.url, live_server.token) as operator:
            listed = (await operator.call("list"))["turns"]
            assert {(t["turn_id"], t["controller_id"]) for t in listed} >= {(turn_of_b, "owner-b")}


async def test_revoking_refuses_the_credential_and_closes_its_connections(
    live_server: LiveServer,
) -> None:
    token = await _mint(live_server, "to-revoke")
    with trio.fail_after(10):
        async with connect(live_server.url, token) as ctl:
            async with connect(live_server.url, live_server.token) as operator:
                revoked = await operator.call("token_revoke", {"controller_id": "to-revoke"})
            assert revoked == {
                "controller_id": "to-revoke",
                "revoked": True,
                "connections_closed": 1,
            }
            with pytest.raises(ConnectionClosed) as closed:
                await ctl.call("list")
            assert closed.value.reason.code == REVOKED
        with pytest.raises(ConnectionRejected) as rejected:
            async with open_websocket_url(live_server.url, extra_headers=_headers(token)):
                pass
        assert rejected.value.status_code == 401
        with pytest.raises(ConnectError, match="revoked"):
            async with connect(live_server.url, token):
                pass


async def test_a_new_connection_takes_over_and_the_old_one_is_told_why(
    live_server: LiveServer,
) -> None:
    token = await _mint(live_server, "takeover")
    with trio.fail_after(10):
        async with (
            connect(live_server.url, token) as first,
            connect(live_server.url, token) as second,
        ):
            with pytest.raises(ConnectionClosed) as closed:
                await first.call("list")
            assert closed.value.reason.code == SUPERSEDED
            assert "superseded" in (closed.value.reason.reason or "")
            assert "terminals" in await second.call("list")


async def test_pipelined_calls_after_hello_see_it(live_server: LiveServer) -> None:
    """200 trials: hello and list written back to back; list is always served."""
    token = live_server.controllers["c3"]
    with trio.fail_after(60):
        for trial in range(200):
            async with open_websocket_url(live_server.url, extra_headers=_headers(token)) as ws:
                await ws.send_message(_frame(1, "hello"))
                await ws.send_message(_frame(2, "list"))
                replies = {}
                for _ in range(2):
                    reply = json.loads(await ws.get_message())
                    replies[reply["id"]] = reply
                assert "result" in replies[1], (trial, replies)
                assert "result" in replies[2], (trial, replies)


async def test_concurrent_hellos_on_one_connection(live_server: LiveServer) -> None:
    """200 trials: of two pipelined hellos naming different controllers, only the true one wins."""
    token = live_server.controllers["c3"]
    with trio.fail_after(60):
        for _ in range(200):
            async with open_websocket_url(live_server.url, extra_headers=_headers(token)) as ws:
                await ws.send_message(_frame(1, "hello", {"controller_id": "c2"}))
                await ws.send_message(_frame(2, "hello", {"controller_id": "c3"}))
                await ws.send_message(_frame(3, "list"))
                replies = {}
                for _ in range(3):
                    reply = json.loads(await ws.get_message())
                    replies[reply["id"]] = reply
                assert replies[1]["error"]["data"]["reason"] == "unauthorized"
                assert replies[2]["result"]["controller_id"] == "c3"
                assert "result" in replies[3]


async def test_long_ids_are_refused_not_echoed(live_server: LiveServer) -> None:
    with trio.fail_after(10):
        async with open_websocket_url(
            live_server.url, extra_headers=_headers(live_server.controllers["c2"])
        ) as ws:
            await ws.send_message(
                json.dumps({"jsonrpc": "2.0", "id": "i" * 5000, "method": "hello"})
            )
            reply = await ws.get_message()
            assert len(reply) < 1000
            assert json.loads(reply)["id"] is None
