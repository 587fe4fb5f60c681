"""Claude Code's stream-json lines (akk.backends.claude_headless.wire) on captured fixtures.

fixtures/claude_headless/<version>/stdout.jsonl is what a real pinned Claude wrote
in the lab (echo, Bash allowed, Bash denied, an interrupted slow stream, an
AskUserQuestion denied), and stdin.jsonl what the lab wrote to it; both are
replayed here (`python -m tools.lab.headless_capture` records them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import FrameType
from typing import cast

import pytest

from akk.backends.claude_headless import prompts, wire
from akk.evidence import Tokens
from akk.screen.fingerprint import IdMinter
from tools.lab import clients

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_headless"
VERSIONS = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())


def _stdout(version: str) -> list[wire.Message]:
    lines = (FIXTURES / version / "stdout.jsonl").read_bytes().splitlines()
    return [wire.parse_line(line) for line in lines]


def _stdin(version: str) -> list[bytes]:
    """The lines written, byte for byte (each with its newline)."""
    return (FIXTURES / version / "stdin.jsonl").read_bytes().splitlines(keepends=True)


def test_fixtures_cover_every_pinned_claude() -> None:
    pinned = {client.version for client in clients.PINNED if client.agent == "claude"}
    assert pinned <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_captured_session_types_every_line(version: str) -> None:
    messages = _stdout(version)
    inits = [m for m in messages if isinstance(m, wire.Init)]
    results = [m for m in messages if isinstance(m, wire.Result)]
    assert not [m for m in messages if isinstance(m, wire.Other)]
    session = inits[0].session_id
    assert {m.session_id for m in inits} == {session}
    assert inits[0].permission_mode == "default"
    assert {"Bash", "AskUserQuestion"} <= set(inits[0].tools)
    assert inits[0].cwd.endswith("/work")
    if version == "2.1.332":
        assert inits[0].claude_code_version == "2.1.332"
    # echo, Bash allowed, Bash denied, interrupted, question denied: one result each.
    assert [(r.subtype, r.is_error, r.result) for r in results] == [
        ("success", False, "Hello from the lab model."),
        ("success", False, "The command ran."),
        ("success", False, "ok"),
        ("error_during_execution", True, None),
        ("success", False, "ok"),
    ]
    assert [r.terminal_reason for r in results][:4] == [
        "completed",
        "completed",
        "completed",
        "aborted_streaming",
    ]
    # Usage is the invocation's own model requests summed (the lab sends 100*n input).
    assert results[0].usage == Tokens(input=100, output=10, cache_read=50, cache_write=20)
    assert results[1].usage == Tokens(input=500, output=50, cache_read=250, cache_write=100)
    assert results[3].usage == Tokens(input=0, output=0, cache_read=0, cache_write=0)
    assert {r.session_id for r in results} == {session}


@pytest.mark.parametrize("version", VERSIONS)
def test_can_use_tool_requests_and_the_answers_that_worked(version: str) -> None:
    messages = _stdout(version)
    requests = [m for m in messages if isinstance(m, wire.ControlRequest)]
    assert [r.subtype for r in requests] == ["can_use_tool"] * 3
    assert [r.request["tool_name"] for r in requests] == ["Bash", "Bash", "AskUserQuestion"]
    asked = requests[2].request["input"]
    assert isinstance(asked, dict)
    assert [q["question"] for q in asked["questions"]] == ["Which color do you prefer?"]
    first = requests[0]
    assert first.request["tool_name"] == "Bash"
    tool_input = first.request["input"]
    assert isinstance(tool_input, dict)
    assert tool_input["command"] == "touch lab-bash-ran.txt && echo lab-bash-ran"
    # What the lab wrote (stdin.jsonl) is byte for byte what the builders make.
    sent = _stdin(version)
    allow = wire.control_success(
        first.request_id, {"behavior": "allow", "updatedInput": tool_input}
    )
    deny = wire.control_success(
        requests[1].request_id, {"behavior": "deny", "message": "The operator rejected this."}
    )
    assert (sent[2], sent[4]) == (allow, deny)
    echoes = [m for m in messages if isinstance(m, wire.UserEcho)]
    results = [b for e in echoes if not isinstance(e.content, str) for b in e.content]
    assert results[0]["content"] == "lab-bash-ran"
    assert results[0]["is_error"] is False
    assert results[1]["content"] == "The operator rejected this."
    assert results[1]["is_error"] is True


@pytest.mark.parametrize("version", VERSIONS)
def test_the_interrupt_is_acknowledged_then_the_invocation_ends(version: str) -> None:
    messages = _stdout(version)
    sent = _stdin(version)
    assert sent[5:7] == [wire.user_message("lab: work slowly"), wire.interrupt("akk-int-1")]
    acks = [m for m in messages if isinstance(m, wire.ControlResponse)]
    assert acks == [wire.ControlResponse("akk-int-1", "success", {"still_queued": []}, None)]
    after = messages[messages.index(acks[0]) :]
    assert any(
        isinstance(m, wire.UserEcho) and "[Request interrupted by user]" in json.dumps(m.content)
        for m in after
    )
    ended = next(m for m in after if isinstance(m, wire.Result))
    assert (ended.subtype, ended.is_error) == ("error_during_execution", True)


def test_assistant_text_and_tool_uses() -> None:
    messages = _stdout("2.1.263")
    assistants = [m for m in messages if isinstance(m, wire.Assistant)]
    assert assistants[0].text == "Hello from the lab model."
    assert assistants[0].tool_uses == ()
    assert [t["name"] for t in assistants[1].tool_uses] == ["Bash"]
    assert assistants[1].text == ""


def test_builders_write_one_line_each() -> None:
    line = wire.user_message("two\nlines \u2028 and ünïcode")
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line)["message"]["content"] == "two\nlines \u2028 and ünïcode"
    error = json.loads(wire.control_error("r1", "no"))
    assert error == {
        "type": "control_response",
        "response": {"subtype": "error", "request_id": "r1", "error": "no"},
    }


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"not json", "not_json"),
        (b"\xff\xfe", "not_json"),
        (b"[1, 2]", "not_object"),
        (b'{"type": 3}', "not_object"),
        (b'{"subtype": "init"}', "not_object"),
        (b'{"type": "system", "subtype": "init", "session_id": "s"}', "malformed"),
        (b'{"type": "result", "subtype": "success", "is_error": "no"}', "malformed"),
        (
            b'{"type": "result", "subtype": "success", "is_error": false, "session_id": "s",'
            b' "usage": {"input_tokens": -1}}',
            "malformed",
        ),
        (b'{"type": "control_request", "request_id": "r", "request": []}', "malformed"),
        (
            b'{"type": "assistant", "session_id": "s", "message": {"id": "m", "model": "x"}}',
            "malformed",
        ),
        (b'{"type": "control_response", "response": {"subtype": "success"}}', "malformed"),
    ],
)
def test_bad_lines_are_typed_errors(line: bytes, reason: str) -> None:
    with pytest.raises(wire.WireError) as caught:
        wire.parse_line(line)
    assert caught.value.reason == reason


def test_a_line_over_the_bound_is_refused_before_parsing() -> None:
    line = b'{"type":"other","x":"' + b"a" * wire.MAX_LINE_BYTES + b'"}'
    with pytest.raises(wire.WireError) as caught:
        wire.parse_line(line)
    assert caught.value.reason == "line_too_long"


def test_unknown_types_and_subtypes_are_kept_whole() -> None:
    status = wire.parse_line(b'{"type": "system", "subtype": "api_retry", "attempt": 1}')
    assert status == wire.Other("system", "api_retry", {})
    assert isinstance(status, wire.Other)
    assert status.raw["attempt"] == 1
    event = wire.parse_line(b'{"type": "stream_event", "event": {}}')
    assert isinstance(event, wire.Other)
    assert event.subtype is None
    cancel = wire.parse_line(b'{"type": "control_cancel_request", "request_id": "r9"}')
    assert cancel == wire.ControlCancel("r9")


def test_a_user_message_can_carry_the_uuid_its_transcript_record_gets() -> None:
    named = json.loads(wire.user_message("hi", uuid="6f1c2b9e-6a8d-4c1e-9b7a-2d5e8f0a1b3c"))
    assert named == {
        "type": "user",
        "uuid": "6f1c2b9e-6a8d-4c1e-9b7a-2d5e8f0a1b3c",
        "message": {"role": "user", "content": "hi"},
    }
    assert "uuid" not in json.loads(wire.user_message("hi"))


def _nested(depth: int) -> bytes:
    """A can_use_tool request whose input holds arrays nested so that the line is
    ``depth`` levels deep in all (the line, its request and its input are three)."""
    inner = "[" * (depth - 3) + "]" * (depth - 3)
    return (
        '{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool",'
        f'"tool_name":"Bash","input":{{"command":"ls","x":{inner}}},"tool_use_id":"t"}}}}'
    ).encode()


@pytest.mark.parametrize("opened", [b"[" * 200_000, b'{"type":"x","a":' + b"[" * 200_000])
def test_a_line_nested_past_the_parser_s_limit_is_a_bad_line(opened: bytes) -> None:
    """200 KB of `[` (closed or not) is a WireError, never a RecursionError."""
    for line in (opened, opened + b"]" * 200_000 + b"}"):
        with pytest.raises(wire.WireError) as caught:
            wire.parse_line(line)
        assert caught.value.reason in ("too_deep", "not_json")


def test_a_line_deeper_than_the_bound_is_a_bad_line_and_one_at_it_is_typed() -> None:
    at_bound = wire.parse_line(_nested(wire.MAX_DEPTH))
    assert isinstance(at_bound, wire.ControlRequest)
    for depth in (wire.MAX_DEPTH + 1, 500):
        with pytest.raises(wire.WireError) as caught:
            wire.parse_line(_nested(depth))
        assert caught.value.reason == "too_deep"


def test_a_request_at_the_bound_is_fingerprinted_and_projected_deep_in_a_stack() -> None:
    """What parse_line types can be walked again (json.dumps of a fingerprint, a detail)
    with only a little of Python's recursion limit left."""
    message = wire.parse_line(_nested(wire.MAX_DEPTH))
    assert isinstance(message, wire.ControlRequest)

    def project(levels: int) -> dict[str, object]:
        if levels:
            return project(levels - 1)
        prompt = prompts.prompt_of(
            message.request_id, message.request, generation=1, ids=IdMinter(b"k" * 32),
            turn_id=None,
        )  # fmt: skip
        return prompt.projection

    frames, frame = 0, cast(FrameType | None, sys._getframe())
    while frame is not None:
        frames, frame = frames + 1, frame.f_back
    shown = project(sys.getrecursionlimit() - frames - 120)
    assert shown["decisions"] == ["approve_once", "reject"]
