"""One `claude -p` process in stream-json mode that AKK starts and owns.

`open_claude` starts the process for a `NewSession` (the id AKK chose and stored,
passed as `--session-id`) or a `Resume` (`--resume ID`), in a working directory,
with `CLAUDE_CONFIG_DIR` set and the rest of the environment inherited, and yields
a `ClaudeProcess`; however the block ends, the process is ended and reaped
(`ClaudeProcess.aclose`).

Claude starts its invocation when the first user message arrives (`system/init`
comes then, not at start-up) and ends each one with a `result`; closing stdin
after a `result` makes it exit 0. Everything it can make us hold is bounded: a
stdout line (`Limits.max_line_bytes`: a longer one is delivered as a `WireError`
and skipped, never buffered), messages not yet taken (`Limits.messages`: past it
the connection closes), and the stderr kept for the audit (a tail). A line is
written once; whether Claude acted on it is for the caller to reconcile (from the
session's transcript), never by writing it again.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Literal

import attrs
import trio

from akk.backends.claude_headless import wire
from akk.discovery import children, pipes
from akk.discovery.process import start_ticks

STREAM_FLAGS = (
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--permission-prompt-tool",
    "stdio",
    "--permission-mode",
    "default",
)
"""The flags of every headless run (every pinned Claude has them).

`--permission-mode default` because 2.1.328 otherwise starts in auto mode, which
asks no permission."""


@attrs.frozen
class NewSession:
    """Start a new conversation under `session_id`, a UUID AKK chose (and stored) first."""

    session_id: str = attrs.field()

    @session_id.validator
    def _is_uuid(self, _: object, value: str) -> None:
        if str(uuid.UUID(value)) != value:
            raise ValueError(f"session id {value!r} is not a lower-case hyphenated UUID")


@attrs.frozen
class Resume:
    """Continue the stored conversation `session_id` (its transcript under the config dir)."""

    session_id: str


Start = NewSession | Resume


def argv(binary: str | os.PathLike[str], start: Start) -> list[str]:
    """The command line of one headless run."""
    flag = "--session-id" if isinstance(start, NewSession) else "--resume"
    return [os.fspath(binary), *STREAM_FLAGS, flag, start.session_id]


@attrs.frozen
class Limits:
    """Bounds on what one Claude process's connection holds, and how long ending it may take."""

    max_line_bytes: int = wire.MAX_LINE_BYTES
    messages: int = 4096
    """Messages received and not yet taken from `ClaudeProcess.messages`."""
    stderr_tail_bytes: int = 64 << 10
    write_seconds: float = 10.0
    """How long one line may take to go into the pipe before the connection counts as stuck."""
    interrupt_seconds: float = 10.0
    """After an interrupt (or its Turn's deadline), how long Claude has to end its round
    before AKK ends the process (`ladder`)."""
    ladder: children.Ladder = attrs.field(factory=children.Ladder)
    """After the `result` (stdin closed), after `interrupt_seconds`, or at a bound: how long
    the process has to exit before SIGTERM, then SIGKILL."""


@attrs.frozen
class Exit(pipes.Ended):
    """How a Claude process ended, as `ClaudeProcess.aclose` saw it.

    `returncode` is 0 after a clean end of input; 1 when the last invocation ended
    in an error result (an interrupt included); negative: killed by that signal.
    """

    @property
    def signal(self) -> int | None:
        """The signal that ended the process, if one did."""
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None


class ClaudeError(Exception):
    """Base of everything this module raises about a Claude process."""


class StartError(ClaudeError):
    """The process could not be started."""


class ConnectionClosed(ClaudeError):
    """The connection is closed (by us, by a bound, or because the process went away).

    Raised by `ClaudeProcess.send` when the line may have been written in part or whole.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"claude connection closed: {reason}")
        self.reason = reason


class NotWritten(ConnectionClosed):
    """The connection or stdin was closed before the line: provably none of it was written."""


Received = wire.Message | wire.WireError
"""What `ClaudeProcess.messages` carries: a typed line, or why a line could not be typed."""

Tap = Callable[[Literal["stdin", "stdout"], bytes], None]
"""Sees every whole line both ways as bytes (a written one before it is written, a read
one before it is typed; an over-long one never). It must not raise; the lab's capture
tool uses it to record fixtures."""


@attrs.define(eq=False)
class ClaudeProcess(pipes.Piped):
    """One running `claude -p` and its stream-json connection.

    Take `messages` promptly (past `Limits.messages` the connection closes); the
    channel ends (EndOfChannel) when Claude closes its output or the connection
    closes. `send` writes whole lines only.
    """

    process: trio.Process
    start: Start
    limits: Limits
    messages: trio.MemoryReceiveChannel[Received]
    started_at: float
    """`trio.current_time()` just before the process was started."""
    tap: Tap | None
    _start_ticks: int | None
    _message_send: trio.MemorySendChannel[Received]
    _pipe: pipes.LinePipe = attrs.field(init=False)
    _exit: Exit | None = None
    _input_closed: bool = False
    """`close_input` or `aclose` began: no line is written from then on."""

    def __attrs_post_init__(self) -> None:
        self._pipe = pipes.LinePipe(
            self.process,
            self._start_ticks,
            max_line_bytes=self.limits.max_line_bytes,
            stderr_tail_bytes=self.limits.stderr_tail_bytes,
            write_seconds=self.limits.write_seconds,
            stopped_reading="claude stopped reading its input (it exited or crashed)",
            closed_output="claude closed its output (it exited or crashed)",
            on_close=lambda _: self._message_send.close(),
            before_write=None if self.tap is None else functools.partial(self.tap, "stdin"),
        )

    @property
    def session_id(self) -> str:
        """The session this process was started for."""
        return self.start.session_id

    async def send(self, line: bytes) -> None:
        """Write one stdin line (from `wire`'s builders) whole; raises ConnectionClosed.

        Shielded once started: a line is written whole or the connection fails.
        Raises NotWritten (nothing of the line was written) when the connection or stdin
        had closed before it, ConnectionClosed when it may have been written, and
        ValueError for bytes that are not exactly one line.
        """
        if not line.endswith(b"\n") or line.count(b"\n") != 1:
            raise ValueError("a stream-json line ends in its only newline")
        # Both only ever close, so a line refused here is one the pipe will never write.
        if self.closed_reason is not None:
            raise NotWritten(self.closed_reason)
        if self._input_closed:
            raise NotWritten("stdin is closed (the process is finishing)")
        closed = await self._pipe.send(line)
        if closed is not None:
            raise ConnectionClosed(closed)

    async def close_input(self) -> None:
        """Close stdin: after a `result` Claude exits (mid-turn: docs/claude_headless.md)."""
        self._input_closed = True
        await self._pipe.close_input()

    async def aclose(self) -> Exit:
        """End the process and always reap it; returns how it ended (idempotent).

        Closes stdin and gives Claude `Ladder.close_seconds` to exit before SIGTERM and
        SIGKILL of its process group (a running invocation goes on after stdin closes:
        interrupt it first). Shielded from cancellation, bounded by the ladder's seconds.
        """
        self._input_closed = True
        if self._exit is None:
            self._exit = await self._pipe.end(Exit, self.limits.ladder)
        return self._exit

    async def _read(self) -> None:
        """Deliver each stdout line typed; returns when the output ends."""
        await self._pipe.read(self._line, self._too_long)

    def _line(self, line: bytes) -> None:
        if self.tap is not None:
            self.tap("stdout", line + b"\n")
        self._deliver(_typed(line))

    def _too_long(self, size: str) -> None:
        self._deliver(wire.WireError("line_too_long", size))

    def _deliver(self, item: Received) -> None:
        try:
            self._message_send.send_nowait(item)
        except trio.WouldBlock:
            self._pipe.fail(f"over {self.limits.messages} messages not taken (buffer full)")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._pipe.fail("nobody takes the messages any more")


def _typed(line: bytes) -> Received:
    try:
        return wire.parse_line(line)
    except wire.WireError as error:
        return error


@asynccontextmanager
async def open_claude(
    binary: str | os.PathLike[str],
    start: Start,
    *,
    cwd: str | os.PathLike[str],
    config_dir: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    limits: Limits = Limits(),
    tap: Tap | None = None,
) -> AsyncIterator[ClaudeProcess]:
    """Start one headless Claude for `start` and yield its connection.

    `env` defaults to this process's environment (ANTHROPIC_BASE_URL and keys come
    from it); CLAUDE_CONFIG_DIR is set to `config_dir` either way. The process runs
    in its own session (process group). Raises StartError if it cannot start.
    However the block ends, the process is ended and reaped (`aclose`, graceful).
    """
    environment = dict(os.environ if env is None else env)
    environment["CLAUDE_CONFIG_DIR"] = os.fspath(config_dir)
    started_at = trio.current_time()
    try:
        process = await pipes.spawn(argv(binary, start), cwd=cwd, env=environment)
    except OSError as exc:
        raise StartError(f"cannot start {os.fspath(binary)}: {exc}; check --claude-bin") from exc
    message_send, message_receive = trio.open_memory_channel[Received](limits.messages)
    claude = ClaudeProcess(
        process=process,
        start=start,
        limits=limits,
        messages=message_receive,
        started_at=started_at,
        tap=tap,
        start_ticks=start_ticks(process.pid),
        message_send=message_send,
    )
    async with pipes.running(claude._pipe, claude._read, claude.aclose):
        yield claude
