"""The BackendBoard folds what the app-server says; a notification of the wrong shape is
skipped and logged, never raised into the host (a raise there ends the app-server and
every Turn on it, and a few in a row escalate its supervisor)."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akk.backends.codex_app_server import board as boards
from akk.backends.codex_app_server import prompts
from akk.backends.codex_app_server.board import BackendBoard
from akk.backends.codex_app_server.rpc import ServerNotification, ServerRequest
from akk.evidence import UsageStatus
from akk.screen.fingerprint import IdMinter
from akk.store.turns import Turn

SECRET = "ghp_" + "Zx9Qm3Lp7Rt2Vb8Nc1Kd" * 2
COUNTS = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens")

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8,
)  # fmt: skip
"""Any JSON value."""


def _maybe(shape: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The right shape, or any JSON value in its place."""
    return shape | JSON


_TEXT = _maybe(st.sampled_from(["thr", "t1", "inProgress", "completed"]))
_USAGE_COUNTS = st.dictionaries(st.sampled_from([*COUNTS, "totalTokens"]), _maybe(st.integers()))
PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "threadId": _TEXT,
        "turnId": _TEXT,
        "turn": _maybe(st.fixed_dictionaries({}, optional={
            "id": _TEXT, "status": _TEXT, "items": JSON,
            "error": _maybe(st.fixed_dictionaries({"message": _TEXT})),
        })),
        "tokenUsage": _maybe(st.fixed_dictionaries({}, optional={
            "total": _maybe(_USAGE_COUNTS), "last": _maybe(_USAGE_COUNTS),
            "modelContextWindow": _maybe(st.integers()),
        })),
        "item": _maybe(st.fixed_dictionaries({}, optional={
            "id": _TEXT, "delivery": _maybe(st.just("async")),
            "questions": _maybe(st.lists(_maybe(st.fixed_dictionaries({}, optional={
                "title": _TEXT, "options": _maybe(st.lists(_TEXT, max_size=3)),
            })), max_size=3)),
        })),
    },
)  # fmt: skip
"""Params of the folded notifications, each field right, or anything in its place."""
FOLDED = ["turn/started", "turn/completed", "thread/tokenUsage/updated", "item/completed"]


@given(st.lists(st.tuples(st.sampled_from(FOLDED), _maybe(PARAMS)), max_size=6))
def test_no_notification_raises_and_what_is_folded_has_its_types(
    notes: list[tuple[str, Any]],
) -> None:
    board = BackendBoard()
    for method, params in notes:
        board.apply(ServerNotification(method, params))
    for native in board.turns.values():
        assert isinstance(native.status, str)
        assert native.final_message is None or isinstance(native.final_message, str)
        assert native.error is None or isinstance(native.error, str)
        for counts in (native.usage_start, native.usage_total):
            assert counts is None or all(type(v) is int for v in counts.values())
        assert native.context_tokens is None or type(native.context_tokens) is int
        assert native.context_window is None or type(native.context_window) is int
        native.usage()
    for question in board.questions.values():
        assert all(isinstance(t, str) and all(isinstance(o, str) for o in options)
                   for t, options in question.questions)  # fmt: skip


@pytest.mark.parametrize(
    ("method", "params", "why"),
    [
        ("turn/started", {"threadId": "thr", "turn": SECRET}, "turn is no object with a text id"),
        ("turn/completed", {"threadId": "thr", "turn": {"id": "t1", "status": [SECRET]}},
         "turn.status is no text"),
        ("thread/tokenUsage/updated",
         {"threadId": "thr", "turnId": "t1", "tokenUsage": {"total": {"inputTokens": SECRET}}},
         "tokenUsage.total is no object of integer counts"),
        ("thread/tokenUsage/updated",
         {"threadId": "thr", "turnId": "t1", "tokenUsage": {"total": {"inputTokens": 10**30}}},
         "tokenUsage.total is no object of integer counts"),
        ("thread/tokenUsage/updated",
         {"threadId": "thr", "turnId": "t1",
          "tokenUsage": {"total": {"inputTokens": 5}, "last": {"inputTokens": True}}},
         "tokenUsage.last or modelContextWindow holds no integer counts"),
        ("item/completed",
         {"threadId": "thr", "turnId": "t1",
          "item": {"id": "i", "delivery": "async", "questions": [{"title": "t", "options": 5}]}},
         "a question is no object with a text title and text options"),
        ("turn/started", SECRET, "params is no object"),
    ],
)  # fmt: skip
def test_a_notification_of_the_wrong_shape_is_skipped_and_logged_without_its_content(
    method: str, params: Any, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    board = BackendBoard()
    with caplog.at_level(logging.WARNING, logger="akk.backend"):
        board.apply(ServerNotification(method, params))
    (record,) = caplog.records
    assert record.getMessage() == f"app-server notification {method} skipped: {why}"
    assert SECRET not in caplog.text
    assert all(native.usage_total is None for native in board.turns.values())
    assert board.questions == {}


def test_a_turn_and_its_usage_are_folded() -> None:
    board = BackendBoard()
    usage = {"total": dict.fromkeys(COUNTS, 10) | {"inputTokens": 100},
             "last": dict.fromkeys(COUNTS, 2) | {"inputTokens": 30, "totalTokens": 36},
             "modelContextWindow": 1000}  # fmt: skip
    notes = [
        ("turn/started", {"threadId": "thr", "turn": {"id": "t1", "status": "inProgress"}}),
        ("thread/tokenUsage/updated", {"threadId": "thr", "turnId": "t1", "tokenUsage": usage}),
        ("turn/completed", {"threadId": "thr", "turn": {
            "id": "t1", "status": "completed", "error": None,
            "items": [{"type": "agentMessage", "text": {"not": "text"}},
                      {"type": "agentMessage", "text": "done"}]}}),
    ]  # fmt: skip
    for method, params in notes:
        board.apply(ServerNotification(method, params))
    native = board.turns["t1"]
    assert (native.status, native.final_message) == ("completed", "done")
    assert (native.context_tokens, native.context_window) == (36, 1000)
    used = native.usage()
    assert used.status is UsageStatus.COMPLETE and used.tokens is not None
    assert (used.tokens.input, used.tokens.output) == (26, 2)


def test_a_waiting_request_is_projected_once_however_often_it_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Turn's follower asks for its prompts ten times a second; projecting a command of a
    megabyte (its redaction) took 0.1 s or more each time, so the server's thread did nothing else
    while it waited. It is projected again only for a new process or another request."""
    made: list[str] = []

    def counted(request: ServerRequest, **kwargs: Any) -> Any:
        made.append(str(request.id))
        return prompts.prompt_of(request, **kwargs)

    monkeypatch.setattr(boards, "prompt_of", counted)
    turn = cast(Turn, type("T", (), {"unresolved": True, "turn_id": "turn_x"})())
    ids = IdMinter(b"k" * 32)
    board = BackendBoard(generation=1, alive=True)
    command = "echo " + "lab " * 300_000
    params = {"threadId": "thr", "turnId": "t1", "itemId": "c", "command": command}
    board.requests["srv-1"] = ServerRequest("srv-1", prompts.COMMAND, params)
    first = board.prompts("t1", turn, ids)
    for _ in range(50):
        assert board.prompts("t1", turn, ids) == first
    assert made == ["srv-1"]
    board.generation += 1
    (again,) = board.prompts("t1", turn, ids)
    assert made == ["srv-1"] * 2 and again.seen != first[0].seen
    board.requests["srv-1"] = ServerRequest("srv-1", prompts.COMMAND, params | {"command": "ls"})
    (other,) = board.prompts("t1", turn, ids)  # the id given again, to another request
    assert made == ["srv-1"] * 3 and other.seen != again.seen
    del board.requests["srv-1"]
    assert board.prompts("t1", turn, ids) == [] and board._made == {}
