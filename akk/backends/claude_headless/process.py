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

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Literal

import attrs
import trio

from akk.backends.claude_headless import wire
from akk.discovery import children
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
    ladder: children.Ladder = attrs.field(factory=children.Ladder)


@attrs.frozen
class Exit:
    """How a Claude process ended, as `ClaudeProcess.aclose` saw it."""

    how: children.How
    returncode: int | None
    """0 after a clean end of input; 1 when the last invocation ended in an error result
    (an interrupt included); negative: killed by that signal."""
    reaped: bool
    seconds: float
    """From the start of `aclose` to the end."""
    reason: str
    """Why the connection ended (`closed by akk`, or what closed it first)."""
    stragglers: tuple[int, ...]
    stderr_tail: str

    @property
    def signal(self) -> int | None:
        """The signal that ended the process, if one did."""
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None


class ClaudeError(Exception):
    """Base of everything this module raises about a Claude process."""


class StartError(ClaudeError):
    """The process could not be started."""


class ConnectionClosed(ClaudeError):
    """The connection is closed (by us, by a bound, or because the process went away)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"claude connection closed: {reason}")
        self.reason = reason


Received = wire.Message | wire.WireError
"""What `ClaudeProcess.messages` carries: a typed line, or why a line could not be typed."""

Tap = Callable[[Literal["stdin", "stdout"], bytes], None]
"""Sees every whole line both ways as bytes (a written one before it is written, a read
one before it is typed; an over-long one never). It must not raise; the lab's capture
tool uses it to record fixtures."""


@attrs.define(eq=False)
class ClaudeProcess:
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
    _closed_reason: str | None = None
    _input_closed: bool = False
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock)
    _stderr: bytearray = attrs.field(factory=bytearray)
    _stderr_done: trio.Event = attrs.field(factory=trio.Event)
    _exit: Exit | None = None

    @property
    def pid(self) -> int:
        """The process's pid (also its process group id)."""
        return self.process.pid

    @property
    def session_id(self) -> str:
        """The session this process was started for."""
        return self.start.session_id

    def start_ticks(self) -> int | None:
        """The process's start time (clock ticks since boot): with the pid, its identity."""
        return self._start_ticks

    @property
    def closed_reason(self) -> str | None:
        """None while the connection is open, else why it closed."""
        return self._closed_reason

    def rss_bytes(self) -> int | None:
        """The process's resident set size now (None once it is gone)."""
        return children.rss_bytes(self.pid)

    def stderr_tail(self) -> str:
        """The last `Limits.stderr_tail_bytes` the process wrote to stderr."""
        return self._stderr.decode("utf-8", "replace")

    async def send(self, line: bytes) -> None:
        """Write one stdin line (from `wire`'s builders) whole; raises ConnectionClosed.

        Shielded once started: a line is written whole or the connection fails.
        Raises ValueError for bytes that are not exactly one line.
        """
        if not line.endswith(b"\n") or line.count(b"\n") != 1:
            raise ValueError("a stream-json line ends in its only newline")
        stdin = self.process.stdin
        assert stdin is not None
        async with self._send_lock:
            if self._closed_reason is not None:
                raise ConnectionClosed(self._closed_reason)
            if self._input_closed:
                raise ConnectionClosed("stdin is closed (the process is finishing)")
            if self.tap is not None:
                self.tap("stdin", line)
            with trio.CancelScope(shield=True):
                with trio.move_on_after(self.limits.write_seconds) as scope:
                    try:
                        await stdin.send_all(line)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self._fail("claude stopped reading its input (it exited or crashed)")
                if scope.cancelled_caught:
                    self._fail(f"a line took over {self.limits.write_seconds} s to write")
            if self._closed_reason is not None:
                raise ConnectionClosed(self._closed_reason)

    async def close_input(self) -> None:
        """Close stdin: after a `result` Claude exits (mid-turn: docs/claude_headless.md)."""
        async with self._send_lock:
            await self._hang_up()

    async def aclose(self, *, graceful: bool = True) -> Exit:
        """End the process and always reap it; returns how it ended (idempotent).

        graceful: close stdin and give Claude `Ladder.close_seconds` to exit before
        SIGTERM and SIGKILL of its process group (a running invocation goes on after
        stdin closes: interrupt it first); otherwise SIGKILL at once.
        Shielded from cancellation, bounded by the ladder's seconds.
        """
        if self._exit is not None:
            return self._exit
        with trio.CancelScope(shield=True):
            began = trio.current_time()
            stopped = await children.stop(
                self.process,
                self._start_ticks,
                self._hang_up,
                self.limits.ladder,
                graceful=graceful,
            )
            self._fail("closed by akk")
            with trio.move_on_after(1.0):
                await self._stderr_done.wait()
            assert self._closed_reason is not None
            ended = self._exit = Exit(
                how=stopped.how,
                returncode=stopped.returncode,
                reaped=stopped.reaped,
                seconds=trio.current_time() - began,
                reason=self._closed_reason,
                stragglers=stopped.stragglers,
                stderr_tail=self.stderr_tail(),
            )
        return ended

    def _fail(self, reason: str) -> None:
        """Close the connection (first reason wins) and end `messages`."""
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        self._message_send.close()

    async def _hang_up(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        self._input_closed = True
        with trio.CancelScope(shield=True):
            await stdin.aclose()

    async def _read(self) -> None:
        """Frame stdout into lines and deliver each typed; returns when the output ends."""
        stdout = self.process.stdout
        assert stdout is not None
        buffer = bytearray()
        scanned = 0  # bytes of `buffer` known to hold no newline
        skipping = False  # inside a line already reported as too long
        limit = self.limits.max_line_bytes
        while self._closed_reason is None:
            try:
                chunk = await stdout.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                self._fail("claude closed its output (it exited or crashed)")
                break
            buffer += chunk
            while self._closed_reason is None:
                newline = buffer.find(b"\n", scanned)
                if newline < 0:
                    scanned = len(buffer)
                    if scanned > limit:
                        if not skipping:
                            self._deliver(wire.WireError("line_too_long", f"over {limit} bytes"))
                        skipping = True
                        buffer.clear()
                        scanned = 0
                    break
                line = bytes(buffer[:newline])
                del buffer[: newline + 1]
                scanned = 0
                if skipping:
                    skipping = False
                elif len(line) > limit:
                    self._deliver(wire.WireError("line_too_long", f"{len(line)} bytes"))
                elif line.strip():
                    if self.tap is not None:
                        self.tap("stdout", line + b"\n")
                    self._deliver(_typed(line))

    def _deliver(self, item: Received) -> None:
        try:
            self._message_send.send_nowait(item)
        except trio.WouldBlock:
            self._fail(f"over {self.limits.messages} messages not taken (buffer full)")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._fail("nobody takes the messages any more")

    async def _drain_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        keep = self.limits.stderr_tail_bytes
        try:
            while chunk := await stderr.receive_some(1 << 16):
                self._stderr += chunk
                if len(self._stderr) > keep:
                    del self._stderr[: len(self._stderr) - keep]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._stderr_done.set()


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
        process = await trio.lowlevel.open_process(
            argv(binary, start),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=os.fspath(cwd),
            env=environment,
            start_new_session=True,
        )
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
    own_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(claude._read)
            nursery.start_soon(claude._drain_stderr)
            try:
                yield claude
            except BaseException as exc:
                own_error = exc
                raise
            finally:
                await claude.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The nursery wraps the block's own error: raise that error itself.
        if own_error is not None and group.exceptions == (own_error,):
            raise own_error from None
        raise
    finally:
        await claude.aclose()
