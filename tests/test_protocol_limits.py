"""Hostile params against a live server: nesting depth, hostile strings, conflicts, audit by caller.

Every frame gets a JSON-RPC error with a reason other than ``internal`` and a
next step, the connection stays usable, and the server keeps serving. A call
refused on another controller's Turn is audited as the caller's own row.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio_websocket import WebSocketConnection, open_websocket_url

from akk.protocol.errors import Reason, RpcError
from akk.protocol.jsonrpc import MAX_DEPTH, MAX_ITEMS, parse_request
from akk.protocol.schema import ID_PATTERN, METHODS, OPERATOR_METHODS
from akk.screen.fingerprint import Appearance, IdMinter
from akk.store import audit, sessions, turns
from akk.store.database import open_store
from akk.store.location import StateDir
from tests.conftest import LiveServer
from tests.test_server import assert_error_reply
from tests.tier import examples

TURN = "turn_" + "0" * 24  # of the right shape, never minted
TERMINAL = "term_" + "0" * 32

BASELINES: dict[str, list[dict[str, Any]]] = {
    "send": [
        {"terminal_id": TERMINAL, "request": "hi", "client_request_id": "r"},
        {"session_id": "sess_0", "request": "hi", "client_request_id": "r"},
        {
            "scope": {"task": "t", "role": "r", "unit": "u"},
            "backend": "codex_app_server",
            "cwd": "/nonexistent/akk-test",
            "request": "hi",
            "client_request_id": "r",
            "handoff": "h",
        },
    ],
    "status": [{"turn_id": TURN}, {"watch_id": TURN}, {"terminal_id": TERMINAL}],
    "respond_interaction": [
        {
            "interaction_id": "int_0",
            "turn_id": TURN,
            "answers": [
                {
                    "question_id": "q_0",
                    "response_kind": "single_select",
                    "selected_option_ids": ["opt_0"],
                },
                {"question_id": "q_1", "response_kind": "free_text", "text": "t"},
            ],
            "delivery_mode": "steer_current_turn",
        }
    ],
    "approve": [{"turn_id": TURN, "decision": "approve_once"}],
    "respond": [{"turn_id": TURN, "request": "hi", "client_request_id": "r"}],
    "cancel": [{"turn_id": TURN}],
    "close": [{"turn_id": TURN}],
    "watch": [
        {"terminal_id": TERMINAL},
        {"thread_id": "01a22d2c-f249-7693-9f76-b873572d1b60", "codex_home": "/nonexistent"},
        {
            "claude_session_id": "fe073203-b653-4840-a846-a6841eab0343",
            "claude_config_dir": "/nonexistent",
        },
    ],
    "unwatch": [{"watch_id": TURN}],
    "renew": [{"watch_id": TURN, "minutes": 5}, {"turn_id": TURN}],
    "recover": [{"watch_id": TURN}, {"turn_id": TURN}],
    "retry_callback": [{"watch_id": TURN, "notification_id": "ntf_0"}, {"turn_id": TURN}],
    "ack": [{"event_id": "evt_0"}],
    "token_revoke": [{"controller_id": "nobody"}],
    "token_create": [{"controller_id": "nobody"}],
    "qualification_record": [
        {
            "agent": "claude",
            "version": "0.0.1",
            "binary_sha256": "0" * 64,
            "base_profile": "claude-code@0.0.0",  # pinned by no profile: never recorded
            "plan_digest": "0" * 64,
            "qualified_at": 1.0,
            "report": {},
        }
    ],
    "qualification_revoke": [{"agent": "claude", "version": "0.0.1"}],
}
"""Params of each method that name nothing that exists (hello is probed on its own)."""

HOSTILE = [
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\udcc2\udc9b",
    "\x1b[31mred",
    "\x1b]52;c;aGk=\x07",
    "\x9b201~",
    "a\x7fb",
    "line\nbreak",
    "a\u202eb",
    "zw\u200dj",
    "soft\u00adhyphen",
    "\u2028",
    "<script>[/]",
    "x" * 5_000,
    "",
]


def _string_leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _string_leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _string_leaves(item, (*path, index))


def _replaced(params: dict[str, Any], path: tuple[Any, ...], text: str) -> dict[str, Any]:
    copy: Any = json.loads(json.dumps(params))
    node = copy
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = text
    assert isinstance(copy, dict)
    return copy


Probe = tuple[str, int, tuple[Any, ...], str]
"""A method, which of its baselines, the path of one string in it, and the text put there."""

CASES = [
    (method, index, path)
    for method, baselines in BASELINES.items()
    for index, params in enumerate(baselines)
    for path in _string_leaves(params)
]


def _schema_string_fields(schema: Any) -> Iterator[str]:
    """Names of every string-valued property anywhere in a params schema."""
    if isinstance(schema, dict):
        for name, sub in schema.get("properties", {}).items():
            types = sub.get("type") if isinstance(sub, dict) else None
            if types == "string" or (isinstance(sub, dict) and "enum" in sub):
                yield name
            yield from _schema_string_fields(sub)
        for key in ("items", "oneOf", "anyOf"):
            sub = schema.get(key)
            for part in sub if isinstance(sub, list) else [sub]:
                yield from _schema_string_fields(part)


def test_the_baselines_cover_every_string_field_of_every_method() -> None:
    for method, spec in (METHODS | OPERATOR_METHODS).items():
        wanted = set(_schema_string_fields(spec["params"]))
        probed = {path[-1] for m, _, path in CASES if m == method} | {
            str(path[-2]) for m, _, path in CASES if m == method and len(path) > 1
        }
        missing = wanted - probed - ({"controller_id", "name"} if method == "hello" else set())
        assert not missing, f"{method}: no hostile probe of {sorted(missing)}"


def _headers(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"Authorization", f"Bearer {token}".encode())]


async def _call(ws: WebSocketConnection, call_id: int, method: str, params: Any) -> dict[str, Any]:
    await ws.send_message(
        json.dumps({"jsonrpc": "2.0", "id": call_id, "method": method, "params": params})
    )
    reply: dict[str, Any] = json.loads(await ws.get_message())
    assert reply["id"] == call_id
    return reply


async def _hello(ws: WebSocketConnection) -> None:
    assert "result" in await _call(ws, 0, "hello", {})


def _token_for(live_server: LiveServer, method: str) -> str:
    return live_server.token if method in OPERATOR_METHODS else live_server.controllers["c1"]


async def _probe(
    live_server: LiveServer, probes: list[tuple[str, int, tuple[Any, ...], str]]
) -> int:
    """Send each probe; every reply is an error whose reason is not internal. Returns the count."""
    by_token: dict[str, list[Probe]] = {}
    for probe in probes:
        by_token.setdefault(_token_for(live_server, probe[0]), []).append(probe)
    sent = 0
    for token, batch in by_token.items():
        async with open_websocket_url(live_server.url, extra_headers=_headers(token)) as ws:
            await _hello(ws)
            for n, (method, index, path, text) in enumerate(batch, start=1):
                params = _replaced(BASELINES[method][index], path, text)
                reply = assert_error_reply(json.dumps(await _call(ws, n, method, params)))
                reason = reply["error"]["data"]["reason"]
                assert reason != "internal", (method, path, text[:20], reply)
                sent += 1
            # The connection is still usable.
            assert "result" in await _call(ws, 10**6, "list", {})
    return sent


async def test_hostile_strings_in_every_string_field_are_refused_never_internal(
    live_server: LiveServer,
) -> None:
    probes = [(m, i, p, text) for m, i, p in CASES for text in HOSTILE]
    with trio.fail_after(120):
        sent = await _probe(live_server, probes)
    assert sent == len(CASES) * len(HOSTILE)
    print(f"\n{sent} hostile-string calls over {len(CASES)} string fields: none internal")


@pytest.mark.parametrize("text", [t for t in HOSTILE if t and t != "<script>[/]" and len(t) < 100])
@pytest.mark.parametrize("field", ["controller_id", "name"])
async def test_a_hostile_hello_is_refused_and_the_connection_can_say_hello_again(
    live_server: LiveServer, field: str, text: str
) -> None:
    with trio.fail_after(10):
        async with open_websocket_url(
            live_server.url, extra_headers=_headers(live_server.controllers["c3"])
        ) as ws:
            reply = assert_error_reply(json.dumps(await _call(ws, 1, "hello", {field: text})))
            assert reply["error"]["data"]["reason"] == "invalid_params"
            message = reply["error"]["message"]
            assert "akk schema" in message or "send valid UTF-16" in message
            await _hello(ws)


FUZZED = [case for case in CASES if case[0] not in OPERATOR_METHODS]
"""Operator methods are probed with HOSTILE only: a random printable name is a valid one."""
_CONTROL_CATEGORIES = ["Cc", "Cs", "Cf", "Co", "Cn", "Zl", "Zp"]
hostile_text = st.one_of(
    st.sampled_from(HOSTILE),
    st.tuples(
        st.text(max_size=6),
        st.text(st.characters(categories=_CONTROL_CATEGORIES), min_size=1, max_size=4),
        st.text(max_size=6),
    ).map("".join),
    st.text(min_size=1, max_size=40),
)


@settings(
    max_examples=examples(40),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(batch=st.lists(st.tuples(st.sampled_from(FUZZED), hostile_text), min_size=20, max_size=20))
def test_fuzzed_strings_in_any_field_never_fail_internally(
    live_server: LiveServer, batch: list[tuple[tuple[str, int, tuple[Any, ...]], str]]
) -> None:
    probes = [(m, i, p, text) for (m, i, p), text in batch]

    async def run() -> None:
        with trio.fail_after(60):
            await _probe(live_server, probes)

    trio.run(run)


# ---- nesting depth ----------------------------------------------------------------------


def _nested(depth: int, method: str = "status") -> str:
    """A request whose deepest value sits ``depth`` arrays and objects down (the request is 1)."""
    inner = '{"a":' * (depth - 2) + "1" + "}" * (depth - 2)
    return f'{{"jsonrpc":"2.0","id":5,"method":"{method}","params":{{"turn_id":{inner}}}}}'


def _depth(text: str) -> int:
    depth = deepest = 0
    for c in text:
        depth += c in "[{"
        depth -= c in "]}"
        deepest = max(deepest, depth)
    return deepest


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 30_000])
async def test_nesting_past_the_limit_gets_a_reply_and_the_connection_survives(
    live_server: LiveServer, depth: int
) -> None:
    frame = _nested(depth) if depth < 1000 else "[" * depth + "]" * depth
    if depth < 1000:
        assert _depth(frame) == depth
    with trio.fail_after(10):
        async with open_websocket_url(
            live_server.url, extra_headers=_headers(live_server.controllers["c2"])
        ) as ws:
            await _hello(ws)
            await ws.send_message(frame)
            reply = assert_error_reply(await ws.get_message())
            data = reply["error"]["data"]
            assert data["reason"] == "invalid_params"
            if depth > MAX_DEPTH:
                assert data["detail"] == "too_deep"
                assert reply["id"] == (5 if depth < 1000 else None)
                assert "flatter" in reply["error"]["message"]
            else:  # within the limit: the schema answers (turn_id is no object)
                assert "detail" not in data
                assert "status: turn_id" in reply["error"]["message"]
            assert "result" in await _call(ws, 6, "list", {})


async def test_every_depth_up_to_the_parsers_own_limit_is_answered(live_server: LiveServer) -> None:
    """The window just under json's recursion limit once closed the connection with no reply."""
    with trio.fail_after(60):
        async with open_websocket_url(
            live_server.url, extra_headers=_headers(live_server.controllers["c2"])
        ) as ws:
            await _hello(ws)
            for depth in range(MAX_DEPTH + 1, 1_100, 3):
                for method in ("status", "respond_interaction"):
                    await ws.send_message(_nested(depth, method))
                    reply = assert_error_reply(await ws.get_message())
                    assert reply["error"]["data"]["detail"] == "too_deep", depth
            assert "result" in await _call(ws, 6, "list", {})


def _within(frames: int, call: Any) -> Any:
    return call() if frames == 0 else _within(frames - 1, call)


@pytest.mark.parametrize("method", sorted(BASELINES))
def test_the_schema_walk_is_bounded_even_on_a_deep_stack(method: str) -> None:
    """At the depth limit, in every position, validation needs far less than the stack left."""
    params = BASELINES[method][0]
    for path in _string_leaves(params):
        nested: Any = "x"
        for _ in range(MAX_DEPTH - 1 - len(path)):
            nested = [nested]
        frame = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": _replaced(params, path, "")}
        )
        deep = json.loads(frame)
        node = deep["params"]
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = nested
        text = json.dumps(deep)
        assert _depth(text) == MAX_DEPTH
        headroom = sys.getrecursionlimit() - 400
        with pytest.raises(RpcError) as refused:
            _within(headroom, lambda: parse_request(text))  # noqa: B023
        assert refused.value.reason.value == "invalid_params"
        assert refused.value.detail != "too_deep"


@pytest.mark.parametrize("brackets", ["[]", '{"a":}'])
def test_a_hundred_thousand_deep_frame_is_refused_without_recursing(brackets: str) -> None:
    opening, closing = brackets[:-1], brackets[-1]
    frame = opening * 100_000 + "1" + closing * 100_000
    with pytest.raises(RpcError) as refused:
        parse_request(frame)
    assert refused.value.detail == "too_deep"


def test_a_lone_surrogate_anywhere_is_refused_with_where_it_was() -> None:
    for params, where in (
        ({"turn_id": "t", "\udc00x": 1}, "the name 'params/\\udc00x'"),
        ({"interaction_id": "i", "turn_id": "t", "answers": [{"text": "a\ud83d"}]}, "answers/0"),
    ):
        frame = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "status", "params": params})
        with pytest.raises(RpcError) as refused:
            parse_request(frame)
        assert refused.value.detail == "lone_surrogate"
        assert where in refused.value.message
    # A proper pair is a character, not a surrogate.
    ok = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "list", "params": {}, "x": "\U0001f600"})
    assert parse_request(ok).method == "list"


def test_an_array_longer_than_any_call_takes_is_refused_before_its_items_are_checked() -> None:
    """12,000 well-formed answers once cost the server's thread 0.65 s of schema checks
    before `maxItems` refused them; now the structure walk refuses them at their length."""
    answer = {"question_id": "q", "response_kind": "free_text", "text": "a"}
    for count, refused in ((MAX_ITEMS, False), (MAX_ITEMS + 1, True), (12_000, True)):
        params = {"turn_id": "t", "interaction_id": "i", "answers": [answer] * count}
        frame = json.dumps(
            {"jsonrpc": "2.0", "id": 3, "method": "respond_interaction", "params": params}
        )
        try:
            parse_request(frame)
        except RpcError as error:
            assert refused == (f"holds {count} items" in error.message), error.message
            assert error.reason is Reason.INVALID_PARAMS
        else:
            assert not refused
    assert MAX_ITEMS == 64  # `answers` and `selected_option_ids` take 64 at most


def test_every_minted_id_has_the_shipped_id_shape() -> None:
    shape = re.compile(ID_PATTERN)
    minter = IdMinter(b"k" * 32)
    seen = Appearance(b"\x01" * 32, 7)
    minted = [
        turns.new_turn_id(),
        sessions.new_session_id(),
        minter.interaction_id(seen),
        minter.question_id(seen, 3),
        minter.option_id(seen, 3, 9),
        "term_" + "f" * 32,
    ]
    assert all(shape.fullmatch(i) for i in minted), minted


# ---- conflicts and audit, with two controllers ---------------------------------------------


def _seed_turn(state: StateDir, controller_id: str) -> str:
    """An open Turn of ``controller_id`` on TERMINAL, written beside the running server."""
    conn = open_store(state.store_path)
    try:
        with conn:
            for name in ("c1", "c2"):
                conn.execute(
                    "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
                    "VALUES (?, ?, 0, 0) ON CONFLICT DO NOTHING",
                    (name, name),
                )
            conn.execute(
                "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
                "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
                "VALUES (?, 's', '%1', 1, 'claude', 2, 3, 'claude', 0, 0) ON CONFLICT DO NOTHING",
                (TERMINAL,),
            )
            conn.execute(
                "UPDATE turns SET closed_at = 1 WHERE terminal_id = ? AND closed_at IS NULL",
                (TERMINAL,),
            )
            turn = turns.insert(
                conn, controller_id=controller_id, client_request_id=f"seed-{time.time()}",
                terminal_id=TERMINAL, request_sha256="0" * 64, request_chars=5,
                evidence_status="unknown", evidence=None, evidence_limit="test",
                inactivity_seconds=3600, lifetime_seconds=36_000, now=time.time(),
            )  # fmt: skip
    finally:
        conn.close()
    return turn.turn_id


def _audit_rows(state: StateDir, actor: str) -> list[tuple[Any, ...]]:
    conn = apsw.Connection(str(state.store_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(
            conn.execute(
                "SELECT action, outcome, turn_id, interaction_id, detail FROM audit "
                "WHERE actor = ? ORDER BY audit_id",
                (actor,),
            )
        )
    finally:
        conn.close()


@asynccontextmanager
async def _owner_and_other(
    live_server: LiveServer,
) -> AsyncIterator[tuple[WebSocketConnection, WebSocketConnection]]:
    """c1 (the owner of the seeded Turn) and c2, each connected and past its hello."""
    async with (
        open_websocket_url(
            live_server.url, extra_headers=_headers(live_server.controllers["c2"])
        ) as other,
        open_websocket_url(
            live_server.url, extra_headers=_headers(live_server.controllers["c1"])
        ) as owner,
    ):
        await _hello(other)
        await _hello(owner)
        yield owner, other


async def test_a_conflict_names_only_the_callers_own_record(live_server: LiveServer) -> None:
    turn_id = _seed_turn(live_server.state, "c1")
    send = {"terminal_id": TERMINAL, "request": "hi"}
    with trio.fail_after(10):
        async with _owner_and_other(live_server) as (owner, other):
            theirs = assert_error_reply(
                json.dumps(await _call(other, 1, "send", send | {"client_request_id": "b1"}))
            )
            assert theirs["error"]["data"]["reason"] == "conflict"
            assert turn_id not in json.dumps(theirs)
            assert "another idle terminal" in theirs["error"]["message"]
            mine = assert_error_reply(
                json.dumps(await _call(owner, 1, "send", send | {"client_request_id": "a1"}))
            )
            assert mine["error"]["data"]["reason"] == "conflict"
            assert turn_id in mine["error"]["message"]


async def test_refusals_on_another_controllers_turn_are_the_callers_own_audit_rows(
    live_server: LiveServer,
) -> None:
    turn_id = _seed_turn(live_server.state, "c1")
    forged = "int_" + "A" * 22
    answer = {"interaction_id": forged, "turn_id": turn_id, "answers": []}
    with trio.fail_after(10):
        async with _owner_and_other(live_server) as (owner, other):
            refused = [
                await _call(other, 1, "respond_interaction", answer),
                await _call(other, 2, "approve", {"turn_id": turn_id, "decision": "reject"}),
                await _call(other, 3, "respond_interaction", answer | {"turn_id": TURN}),
            ]
            reasons = [r["error"]["data"]["reason"] for r in refused]
            assert reasons == ["not_owner", "not_owner", "not_found"]
            own = await _call(owner, 4, "respond_interaction", answer)
            assert own["error"]["data"]["reason"] == "not_found"
            status = (await _call(owner, 5, "status", {"turn_id": turn_id}))["result"]
    # The owner's trail holds its own call only.
    assert [(r["controller_id"], r["action"], r["outcome"]) for r in status["receipts"]] == [
        ("c1", "respond_interaction", "not_found")
    ]
    assert status["receipts"][0]["interaction_id"] == forged
    # The other controller's refusals are its own rows, naming no Turn in their keys.
    rows = [r for r in _audit_rows(live_server.state, "c2") if turn_id in r[4] or TURN in r[4]]
    assert [(action, outcome, t, i) for action, outcome, t, i, _ in rows] == [
        ("respond_interaction", "not_owner", None, None),
        ("approve", "not_owner", None, None),
        ("respond_interaction", "not_found", None, None),
    ]
    assert json.loads(rows[0][4])["named"] == {"turn_id": turn_id, "interaction_id": forged}


@given(st.text())
def test_a_stored_string_is_bounded_and_printable(text: str) -> None:
    kept = audit.stored(text)
    assert len(kept) <= audit.MAX_STORED_CHARS
    assert kept.isprintable()
    if text.isprintable() and len(text) <= audit.MAX_STORED_CHARS:
        assert kept == text


def test_one_actors_flood_never_pushes_out_anothers_trail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit keeps each actor's newest `KEEP` rows: 100,100 refused approves by one
    controller once left none of the operator's or another controller's rows."""
    monkeypatch.setattr(audit, "KEEP", 5)
    conn = open_store(tmp_path / "akk.sqlite3")
    try:
        with conn:
            for n in range(3):
                audit.record(conn, at=n, actor="victim", action="send", outcome="ok")
            for n in range(40):
                audit.record(conn, at=10 + n, actor="flood", action="approve", outcome="not_found")
        kept = conn.execute("SELECT actor, at FROM audit ORDER BY audit_id").fetchall()
    finally:
        conn.close()
    assert kept == [("victim", 0), ("victim", 1), ("victim", 2)] + [
        ("flood", 10 + n) for n in range(35, 40)
    ]


def test_a_stored_string_escapes_what_a_terminal_would_act_on() -> None:
    kept = audit.stored("\x1b]52;c;aGk=\x07<script>[/]\u202e" + "Z" * 200)
    assert kept.startswith("\\u001b]52;c;aGk=\\u0007<script>[/]\\u202e")
    assert len(kept) == audit.MAX_STORED_CHARS and kept.endswith("…")


async def test_status_shows_a_turns_newest_dispatches_and_receipts_and_counts_the_rest(
    live_server: LiveServer,
) -> None:
    """A Turn answered 130 times (a Watch a controller answers for through weeks): `status`
    shows the newest 100 dispatches and 50 receipts, oldest first, and `omitted` the rest,
    so its reply stays within one frame however long the Turn lives."""
    turn_id = _seed_turn(live_server.state, "c1")
    conn = open_store(live_server.state.store_path)
    try:
        with conn:
            for n in range(130):
                conn.execute(
                    "INSERT INTO dispatches (dispatch_id, controller_id, turn_id, kind, stage, "
                    "created_at, updated_at) VALUES (?, 'c1', ?, 'approval', 'accepted', ?, ?)",
                    (f"dsp_{n:03d}", turn_id, 1_000 + n, 1_000 + n),
                )
                audit.record(conn, at=1_000 + n, actor="c1", action="approve", outcome="ok",
                             controller_id="c1", turn_id=turn_id, detail={"n": n})  # fmt: skip
    finally:
        conn.close()
    with trio.fail_after(10):
        async with _owner_and_other(live_server) as (owner, _other):
            status = (await _call(owner, 1, "status", {"turn_id": turn_id}))["result"]
    assert [d["dispatch_id"] for d in status["dispatches"]] == [
        f"dsp_{n:03d}" for n in range(30, 130)
    ]
    assert [r["detail"]["n"] for r in status["receipts"]] == list(range(80, 130))
    assert status["omitted"] == {"dispatches": 30, "receipts": 80}
