"""What a refused call is told: the shapes `send` takes, and errors that name the field and
the rule it broke, never the caller's own value.

A send's fields belong to one shape (terminal, session or scope), refused before
any method runs when mixed, so nothing is reserved and the client_request_id
stays unused. A send that names a terminal conversation's session id is told
which terminal to send to, if that Turn is one `list` shows the caller.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import jsonschema
import pytest
import trio
from trio_websocket import open_websocket_url

from akk.backends.names import SESSION_BACKENDS
from akk.mcp.tools import BY_NAME, tool_name
from akk.methods.common import MethodContext
from akk.methods.sessions import SessionCalls
from akk.protocol.errors import Reason, RpcError
from akk.protocol.jsonrpc import parse_request
from akk.protocol.schema import METHODS
from akk.store import turns
from akk.store.database import open_store
from akk.store.reader import StoreReader
from tests.conftest import LiveServer
from tests.store_rows import add_rows
from tests.test_protocol_limits import BASELINES, CASES, _call, _headers, _hello, _replaced
from tests.test_server import assert_error_reply

TERMINAL = "term_" + "0" * 32
TASK = {"request": "hi", "client_request_id": "s7"}
SCOPE = {
    "scope": {"task": "t", "role": "r"},
    "backend": "codex_app_server",
    "cwd": "/nonexistent/akk-test",
}


def _refusal(method: str, params: dict[str, Any]) -> RpcError:
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    with pytest.raises(RpcError) as refused:
        parse_request(frame)
    assert refused.value.reason is Reason.INVALID_PARAMS
    return refused.value


def _accepted(method: str, params: dict[str, Any]) -> None:
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert parse_request(frame).params == params


@pytest.mark.parametrize(
    "extra",
    [
        {"backend": "codex_app_server"},
        {"cwd": "/etc"},
        {"handoff": "what happened so far"},
        {"backend": "codex_app_server", "cwd": "/etc"},
        {"session_id": "sess_0"},
        {"scope": {"task": "t", "role": "r"}},
    ],
)
def test_a_terminal_send_takes_no_field_of_another_shape(extra: dict[str, Any]) -> None:
    error = _refusal("send", {"terminal_id": TERMINAL} | TASK | extra)
    for name in extra:
        assert name in error.message
    assert "types request into that terminal's agent" in error.message or "exactly one" in (
        error.message
    )


@pytest.mark.parametrize("extra", [{"backend": "claude_headless"}, {"cwd": "/etc"}])
def test_a_session_send_takes_no_backend_or_cwd(extra: dict[str, Any]) -> None:
    error = _refusal("send", {"session_id": "sess_0"} | TASK | extra)
    (name,) = extra
    assert f"{name!r} not allowed here" in error.message
    assert "backend and cwd belong to a send with scope" in error.message


def test_each_shape_takes_its_own_fields() -> None:
    _accepted("send", {"terminal_id": TERMINAL} | TASK)
    _accepted("send", {"session_id": "sess_0", "handoff": "so far"} | TASK)
    _accepted("send", SCOPE | TASK | {"handoff": "so far"})
    for backend in SESSION_BACKENDS:
        _accepted("send", SCOPE | TASK | {"backend": backend})


def test_backend_is_the_protocols_enum_in_the_schema_and_the_tool() -> None:
    assert METHODS["send"]["params"]["properties"]["backend"]["enum"] == [
        "codex_app_server",
        "claude_headless",
    ]
    tool = BY_NAME[tool_name("send")].input_schema
    assert tool["properties"]["backend"]["enum"] == list(SESSION_BACKENDS)
    for field in ("backend", "cwd", "handoff"):
        assert "only with" in tool["properties"][field]["description"]
    error = _refusal("send", SCOPE | TASK | {"backend": "a label"})
    assert 'backend: must be one of "codex_app_server", "claude_headless"' in error.message
    assert "a label" not in error.message


async def test_a_mixed_send_reserves_nothing_and_leaves_its_request_id_unused(
    live_server: LiveServer,
) -> None:
    token = live_server.controllers["c1"]
    with trio.fail_after(20):
        async with open_websocket_url(live_server.url, extra_headers=_headers(token)) as ws:
            await _hello(ws)
            mixed = {"terminal_id": TERMINAL, "backend": "codex_app_server", "cwd": "/etc"}
            reply = assert_error_reply(json.dumps(await _call(ws, 1, "send", mixed | TASK)))
            assert reply["error"]["data"]["reason"] == "invalid_params"
            assert "'backend', 'cwd' not allowed here" in reply["error"]["message"]
            listed = (await _call(ws, 2, "list", {}))["result"]
            assert listed["turns"] == [] and listed["watches"] == []
            # The same client_request_id is still unused: not a repeat of a terminal send.
            again = await _call(ws, 3, "send", {"session_id": "sess_0"} | TASK)
            assert "has no session" in again["error"]["message"], again


# ---------------------------------------------------------------- errors name the rule


def test_a_request_too_long_says_so_without_echoing_it() -> None:
    error = _refusal("send", {"terminal_id": TERMINAL, "client_request_id": "r"} | {
        "request": "a" * 100_001
    })  # fmt: skip
    assert error.message.startswith("send: request: more than 100,000 characters; ")
    assert "aaaa" not in error.message


def test_a_free_text_answer_too_long_is_explained_by_its_own_shape() -> None:
    answer = {"question_id": "q_0", "response_kind": "free_text", "text": "b" * 100_001}
    error = _refusal(
        "respond_interaction", {"interaction_id": "int_0", "turn_id": "t", "answers": [answer]}
    )
    assert error.message.startswith("respond_interaction: answers/0/text: more than 100,000 ")
    assert "bbbb" not in error.message and "is not one of" not in error.message
    chosen = {"question_id": "q_0", "response_kind": "multi_select", "selected_option_ids": [1]}
    error = _refusal(
        "respond_interaction", {"interaction_id": "int_0", "turn_id": "t", "answers": [chosen]}
    )
    assert "answers/0/selected_option_ids/0: must be a JSON string" in error.message


MARK = "Zq9!"


@pytest.mark.parametrize(("method", "index", "path"), CASES)
def test_no_refusal_echoes_the_value_it_refused(method: str, index: int, path: Any) -> None:
    """Each string field of each method, given a long marked value: refused by its rule,
    and the message never repeats the value (a name or enum value can be any text too)."""
    params = _replaced(BASELINES[method][index], path, MARK * 30_000)
    error = _refusal(method, params)
    assert MARK not in error.message, error.message
    assert len(error.message) < 1_000


def test_which_shape_is_meant_decides_the_message() -> None:
    error = _refusal("status", {"turn_id": "turn_0", "watch_id": "turn_0"})
    assert "give the fields of exactly one of {turn_id} | {watch_id} | {terminal_id}" in (
        error.message
    )
    assert "turn_0" not in error.message
    error = _refusal("renew", {"turn_id": "turn_0", "minutes": MARK})
    assert "renew: minutes: must be a JSON integer" in error.message


# ---------------------------------------------------------------- a terminal's session id


async def test_a_terminal_conversations_session_id_points_to_its_terminal(
    tmp_path: Path,
) -> None:
    path = tmp_path / "akk.sqlite3"
    native = str(uuid.uuid4())
    conn = open_store(path)
    try:
        add_rows(conn, ("ctl_a", "ctl_b"), "term_conv")
        with conn:
            sent = turns.insert(
                conn, controller_id="ctl_a", client_request_id="r1", terminal_id="term_conv",
                request_sha256="0" * 64, request_chars=2, evidence_status="unknown",
                evidence=None, evidence_limit=None, inactivity_seconds=60.0,
                lifetime_seconds=60.0, now=time.time(),
            )  # fmt: skip
            turns.update(conn, sent, native_session=native)
    finally:
        conn.close()
    reader = StoreReader(path)
    try:
        calls = SessionCalls(cast(MethodContext, SimpleNamespace(reader=reader)))
        params = {"session_id": native, "request": "hi", "client_request_id": "r2"}
        with pytest.raises(RpcError) as mine:
            await calls.send("ctl_a", params, roots=())
        assert mine.value.reason is Reason.NOT_FOUND
        assert mine.value.message.startswith(
            f"{native} is the agent's own session id of terminal term_conv (a terminal "
            "conversation)"
        )
        assert "Send with terminal_id 'term_conv'" in mine.value.message
        # Another controller is not told whose conversation it is.
        with pytest.raises(RpcError) as theirs:
            await calls.send("ctl_b", params, roots=())
        assert theirs.value.reason is Reason.NOT_FOUND
        assert "term_conv" not in theirs.value.message
        assert "this controller has no session" in theirs.value.message
    finally:
        reader.close()


# ---------------------------------------------------------------- results


def test_the_answer_results_the_backends_return_fit_the_schema() -> None:
    """`respond_interaction` and `approve` return the interaction and dispatch ids (the
    backends' own answers are checked against the schema in their tests too)."""
    dispatched = {"outcome": "dispatched", "interaction_id": "int_0", "dispatch_id": "dsp_0"}
    for method in ("respond_interaction", "approve"):
        jsonschema.validate(dispatched, METHODS[method]["result"])
        jsonschema.validate(dispatched | {"round": 2}, METHODS[method]["result"])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"outcome": "dispatched"}, METHODS[method]["result"])
