"""The headless Claude process owner (akk.backends.claude_headless.process) on a stand-in.

The stand-in is a real process (a small Python script given as the binary) that
plays the parts of Claude's stdout the owner must survive: lines that are not JSON,
lines over the bound, a flood nobody reads, a child left in its group, a process
that ignores the end of its input and SIGTERM. What real Claude sends is proven
in tests/lab/test_claude_headless.py.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
import trio

from akk.backends.claude_headless import wire
from akk.backends.claude_headless.process import (
    STREAM_FLAGS,
    ConnectionClosed,
    Limits,
    NewSession,
    Received,
    Resume,
    StartError,
    argv,
    open_claude,
)
from akk.discovery import children
from akk.discovery.process import start_ticks

INIT = (
    '{"type":"system","subtype":"init","session_id":"S","cwd":"/w","model":"m",'
    '"permissionMode":"default","tools":["Bash"]}'
)
RESULT = (
    '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"S",'
    '"usage":{"input_tokens":1,"output_tokens":2}}'
)
FAST = Limits(ladder=children.Ladder(close_seconds=10.0, term_seconds=0.5, kill_seconds=5.0))
"""A stand-in that exits once its input ends does so in milliseconds, and is given ample time
to on a loaded machine (a parallel run once saw one not exit within 1 s)."""
IMPATIENT = Limits(ladder=children.Ladder(close_seconds=1.0, term_seconds=0.5, kill_seconds=5.0))
"""For a stand-in that never exits on its own: the whole ladder, quickly."""


def _stand_in(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "claude"
    script.write_text(
        f"#!{sys.executable}\nimport os, signal, subprocess, sys, time\n"
        "out = sys.stdout\n"
        "def say(line):\n    out.write(line + '\\n'); out.flush()\n" + body
    )
    script.chmod(0o755)
    return script


def test_argv_names_the_session_exactly() -> None:
    new = str(uuid.uuid4())
    assert argv("/bin/claude", NewSession(new)) == [
        "/bin/claude",
        *STREAM_FLAGS,
        "--session-id",
        new,
    ]
    assert argv("claude", Resume("abc"))[-2:] == ["--resume", "abc"]
    assert "--permission-prompt-tool" in STREAM_FLAGS
    assert STREAM_FLAGS[STREAM_FLAGS.index("--permission-mode") + 1] == "default"
    with pytest.raises(ValueError, match="UUID"):
        NewSession("not-a-uuid")
    with pytest.raises(ValueError, match="UUID"):
        NewSession(new.upper())


async def test_lines_are_typed_and_bad_ones_are_reported_not_fatal(tmp_path: Path) -> None:
    body = f"""
say({INIT!r})
say("not json at all")
say('{{"type":"other","pad":"' + "x" * 500 + '"}}')
out.write("y" * 300); out.flush(); time.sleep(0.05); out.write("y" * 300 + "\\n"); out.flush()
say('{{"type":"system","subtype":"api_retry"}}')
for line in sys.stdin:
    say({RESULT!r})
"""
    binary = _stand_in(tmp_path, body)
    limits = Limits(max_line_bytes=200, ladder=FAST.ladder)
    seen: list[Received] = []
    tapped: list[tuple[str, bytes]] = []
    with trio.fail_after(20):
        async with open_claude(
            binary,
            NewSession(str(uuid.uuid4())),
            cwd=tmp_path,
            config_dir=tmp_path,
            limits=limits,
            tap=lambda direction, line: tapped.append((direction, line)),
        ) as claude:
            await claude.send(wire.user_message("hello"))
            async for message in claude.messages:
                seen.append(message)
                if isinstance(message, wire.Result):
                    break
            await claude.close_input()
            with pytest.raises(ConnectionClosed):
                await claude.send(wire.user_message("again"))
            async for message in claude.messages:
                seen.append(message)
        ended = await claude.aclose()
    kinds = [m.reason if isinstance(m, wire.WireError) else type(m).__name__ for m in seen]
    assert kinds == ["Init", "not_json", "line_too_long", "line_too_long", "Other", "Result"]
    # The tap saw every whole line both ways, the over-long ones excepted.
    assert [d for d, _ in tapped] == ["stdin", "stdout", "stdout", "stdout", "stdout"]
    assert tapped[0][1] == wire.user_message("hello")
    assert tapped[1][1] == INIT.encode() + b"\n"
    assert (ended.how, ended.returncode, ended.reaped, ended.signal) == ("exited", 0, True, None)
    assert start_ticks(claude.pid) is None


async def test_config_dir_is_set_and_stderr_kept_as_a_tail(tmp_path: Path) -> None:
    body = """
sys.stderr.write("e" * 5000 + "END"); sys.stderr.flush()
say('{"type":"env","dir":"' + os.environ["CLAUDE_CONFIG_DIR"] + '"}')
sys.stdin.read()
"""
    binary = _stand_in(tmp_path, body)
    limits = Limits(stderr_tail_bytes=100, ladder=FAST.ladder)
    with trio.fail_after(20):
        async with open_claude(
            binary,
            Resume("s"),
            cwd=tmp_path,
            config_dir=tmp_path / "cfg",
            env={"PATH": os.environ["PATH"]},
            limits=limits,
        ) as claude:
            message = await claude.messages.receive()
        ended = await claude.aclose()
    assert isinstance(message, wire.Other)
    assert message.raw["dir"] == str(tmp_path / "cfg")
    assert ended.stderr_tail.endswith("END") and len(ended.stderr_tail) == 100


async def test_a_flood_nobody_takes_closes_the_connection(tmp_path: Path) -> None:
    binary = _stand_in(tmp_path, f"for _ in range(50):\n    say({RESULT!r})\nsys.stdin.read()\n")
    limits = Limits(messages=4, ladder=FAST.ladder)
    with trio.fail_after(20):
        async with open_claude(
            binary, Resume("s"), cwd=tmp_path, config_dir=tmp_path, limits=limits
        ) as claude:
            while claude.closed_reason is None:
                await trio.sleep(0.01)
            assert "buffer full" in claude.closed_reason
            with pytest.raises(ConnectionClosed, match="buffer full"):
                await claude.send(wire.user_message("x"))
        ended = await claude.aclose()
    assert ended.reaped and "buffer full" in ended.reason


async def test_a_child_left_in_the_group_is_killed(tmp_path: Path) -> None:
    body = """
child = subprocess.Popen(["sleep", "60"])
say('{"type":"child","pid":%d}' % child.pid)
sys.stdin.read()
os._exit(0)
"""
    binary = _stand_in(tmp_path, body)
    with trio.fail_after(20):
        async with open_claude(
            binary, Resume("s"), cwd=tmp_path, config_dir=tmp_path, limits=FAST
        ) as claude:
            message = await claude.messages.receive()
        ended = await claude.aclose()
    assert isinstance(message, wire.Other)
    grandchild = message.raw["pid"]
    assert ended.how == "exited" and ended.stragglers == (grandchild,)
    # Reparented, it is reaped by whoever adopts it; in the group nothing lives any more.
    assert children.group_members(claude.pid) == []


async def test_a_process_that_ignores_its_input_and_sigterm_is_killed(tmp_path: Path) -> None:
    body = """
signal.signal(signal.SIGTERM, signal.SIG_IGN)
say('{"type":"ready"}')
sys.stdin.read()
while True:
    time.sleep(1)
"""
    binary = _stand_in(tmp_path, body)
    with trio.fail_after(30):
        async with open_claude(
            binary, Resume("s"), cwd=tmp_path, config_dir=tmp_path, limits=IMPATIENT
        ) as claude:
            await claude.messages.receive()
        ended = await claude.aclose()
    assert (ended.how, ended.returncode, ended.signal, ended.reaped) == ("killed", -9, 9, True)
    assert await claude.aclose() is ended


async def test_cancelled_at_once_it_is_still_reaped(tmp_path: Path) -> None:
    binary = _stand_in(tmp_path, 'say(\'{"type":"ready"}\')\nsys.stdin.read()\n')
    with trio.move_on_after(5) as scope:
        async with open_claude(
            binary, Resume("s"), cwd=tmp_path, config_dir=tmp_path, limits=FAST
        ) as claude:
            await claude.messages.receive()
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    ended = await claude.aclose()
    assert ended.reaped and ended.how == "exited"
    assert start_ticks(claude.pid) is None


async def test_only_whole_lines_are_written_and_a_missing_binary_is_a_start_error(
    tmp_path: Path,
) -> None:
    binary = _stand_in(tmp_path, "sys.stdin.read()\n")
    async with open_claude(
        binary, Resume("s"), cwd=tmp_path, config_dir=tmp_path, limits=FAST
    ) as claude:
        for bad in (b"no newline", b"two\nlines\n"):
            with pytest.raises(ValueError, match="newline"):
                await claude.send(bad)
    with pytest.raises(StartError, match="--claude-bin"):
        async with open_claude(tmp_path / "absent", Resume("s"), cwd=tmp_path, config_dir=tmp_path):
            pass
