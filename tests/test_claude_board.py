"""RunBoard: real stream-json lines of the oldest and newest pinned Claude folded into a board.

The fixtures (fixtures/claude_headless/<version>/stdout.jsonl) are one process's
whole output: an echo, two Bash permissions answered, an interrupt, one more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from akk.backends.claude_headless import board as board_module
from akk.backends.claude_headless import prompts, wire
from akk.backends.claude_headless.board import RunBoard
from akk.screen.fingerprint import IdMinter

FIXTURES = Path(__file__).parent.parent / "fixtures" / "claude_headless"


def _lines(version: str) -> list[wire.Message]:
    text = (FIXTURES / version / "stdout.jsonl").read_bytes()
    return [wire.parse_line(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("version", ["2.1.263", "2.1.332"])
async def test_a_board_holds_each_invocation_s_facts(version: str) -> None:
    board = RunBoard(generation=1)
    seqs = []
    results = []
    for message in _lines(version):
        seq = board.seq
        board.apply(message)
        seqs.append(board.seq - seq)
        if isinstance(message, wire.ControlRequest):
            assert board.requests == {message.request_id: message}
        if isinstance(message, wire.Result):
            assert board.requests == {}, "a result leaves nothing pending"
            results.append((message.subtype, board.final_text, board.context_window))
        if isinstance(message, wire.Init):
            assert board.init is message
    assert set(seqs) == {1}, "every line moves the board on"
    first = results[0]
    assert first == ("success", "Hello from the lab model.", 1_000_000)
    assert [r[0] for r in results].count("error_during_execution") == 1
    # The last response's prompt: input + cache read + cache written (the context in use).
    assert board.context_tokens is not None and board.context_tokens > 0


async def test_a_withdrawn_request_leaves_the_board() -> None:
    board = RunBoard(generation=3)
    board.apply(wire.ControlRequest("r1", "can_use_tool", {"subtype": "can_use_tool"}))
    changed = board.changed
    board.apply(wire.ControlCancel("r1"))
    assert board.requests == {}
    assert changed.is_set() and not board.changed.is_set()
    assert not board.alive  # no process yet
    board.pid = 1
    assert board.alive
    board.closed = "claude closed its output"
    assert not board.alive


def _asked(request_id: str) -> wire.ControlRequest:
    return wire.ControlRequest(request_id, "can_use_tool", {"subtype": "can_use_tool"})


async def test_a_board_holds_at_most_the_bound_of_requests_unanswered_and_asked() -> None:
    board = RunBoard(generation=1)
    for n in range(board_module.MAX_REQUESTS):
        assert board.over_bound(_asked(f"r{n}")) is None
        board.apply(_asked(f"r{n}"))
    assert board.over_bound(_asked("r0")) is None  # asked again: the same request
    over = board.over_bound(_asked("one-more"))
    assert over is not None and f"over {board_module.MAX_REQUESTS}" in over
    assert board.over_bound(wire.ControlCancel("r0")) is None
    board.apply(wire.ControlCancel("r0"))
    assert board.over_bound(_asked("one-more")) is None
    # Asked and withdrawn, again and again: each is an interaction, so they count too.
    board.asked = board_module.MAX_ASKED
    over = board.over_bound(_asked("another"))
    assert over is not None and f"over {board_module.MAX_ASKED}" in over


async def test_a_waiting_request_is_made_a_prompt_once_however_often_it_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Turn's follower asks for its prompts ten times a second; making one for a command
    of a megabyte (its redaction) took 0.1 s or more each time, so the server's thread did nothing
    else while it waited. It is made again only for another request under the same id."""
    made: list[str] = []

    def counted(request_id: str, request: Any, **kwargs: Any) -> Any:
        made.append(request_id)
        return prompts.prompt_of(request_id, request, **kwargs)

    monkeypatch.setattr(board_module, "prompt_of", counted)
    ids = IdMinter(b"k" * 32)
    board = RunBoard(generation=1)
    command = {"subtype": "can_use_tool", "tool_name": "Bash", "tool_use_id": "toolu_1",
               "input": {"command": "echo " + "lab " * 300_000}}  # fmt: skip
    board.apply(wire.ControlRequest("r1", "can_use_tool", command))
    first = board.prompts(ids, "turn_x")
    for _ in range(50):
        assert board.prompts(ids, "turn_x") == first
    assert made == ["r1"]
    other = command | {"input": {"command": "ls"}}
    board.apply(wire.ControlRequest("r1", "can_use_tool", other))
    (again,) = board.prompts(ids, "turn_x")
    assert made == ["r1"] * 2 and again.seen != first[0].seen
    board.apply(wire.ControlCancel("r1"))
    assert board.prompts(ids, "turn_x") == [] and board._made == {}
