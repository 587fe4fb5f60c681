"""A child AKK starts in its own process group and speaks to in lines over stdin and stdout.

The transport under every child spoken to in newline-delimited JSON (the Codex
app-server, headless Claude); the owner keeps only its protocol. `spawn` starts
the child with three pipes in its own session; a `LinePipe` writes whole lines
under a lock (shielded, bounded by a write timeout), frames stdout into lines
without ever buffering one over `max_line_bytes`, keeps a bounded stderr tail,
closes once with the first reason, and ends the child on `children.stop`'s
ladder. `running` holds the reader and the stderr drain for the owner's block;
`Piped` gives the owner the child's facts (pid, identity, memory, stderr).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import attrs
import trio

from akk.discovery import children


@attrs.frozen
class Ended:
    """How a child ended, as its owner's `aclose` saw it (each owner names its own kind)."""

    how: children.How
    """exited: by itself once stdin closed (or before); terminated: after SIGTERM;
    killed: after SIGKILL; unreaped: still there after SIGKILL (needs a person)."""
    returncode: int | None
    reaped: bool
    """The process was waited for and its pid no longer names it."""
    seconds: float
    """From the start of `aclose` to the end."""
    reason: str
    """Why the connection ended (`closed by akk`, or the failure that closed it first)."""
    stragglers: tuple[int, ...]
    """Processes left in the child's process group after it ended (killed)."""
    stderr_tail: str


EndedT = TypeVar("EndedT", bound=Ended)


async def spawn(
    argv: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str]
) -> trio.Process:
    """Start `argv` with stdin, stdout and stderr piped, in its own session (process group).

    Raises OSError if it cannot start (the owner says what to check).
    """
    return await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=os.fspath(cwd),
        env=dict(env),
        start_new_session=True,
    )


@attrs.define(eq=False)
class LinePipe:
    """The line connection to one child `spawn` started, closed once with the first reason.

    `on_close` runs once, synchronously, when the connection closes (the owner
    fails what waits on it). `stopped_reading` and `closed_output` are the
    reasons the owner gives for a broken stdin and an ended stdout.
    """

    process: trio.Process
    ticks: int | None
    """The child's start time (clock ticks since boot): with the pid, its identity."""
    max_line_bytes: int
    stderr_tail_bytes: int
    write_seconds: float
    """How long one line may take to go into the pipe before the connection counts as stuck."""
    stopped_reading: str
    closed_output: str
    on_close: Callable[[str], None]
    before_write: Callable[[bytes], None] | None = None
    """Sees each line just before it is written (it must not raise)."""
    _closed_reason: str | None = None
    _input_closed: bool = False
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock)
    _stderr: bytearray = attrs.field(factory=bytearray)
    _stderr_done: trio.Event = attrs.field(factory=trio.Event)

    @property
    def closed_reason(self) -> str | None:
        """None while the connection is open, else why it closed."""
        return self._closed_reason

    def stderr_tail(self) -> str:
        """The last `stderr_tail_bytes` the child wrote to stderr."""
        return self._stderr.decode("utf-8", "replace")

    def fail(self, reason: str) -> None:
        """Close the connection (first reason wins) and tell the owner."""
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        self.on_close(reason)

    async def send(self, line: bytes) -> str | None:
        """Write one whole line to stdin; returns None, or why the connection is closed.

        Shielded once started: a line is written whole or the connection fails
        (a half-written line would corrupt every later one). Nothing is written
        once the connection or stdin is closed.
        """
        stdin = self.process.stdin
        assert stdin is not None
        async with self._send_lock:
            if self.closed_reason is not None:
                return self.closed_reason
            if self._input_closed:
                return "stdin is closed (the process is finishing)"
            if self.before_write is not None:
                self.before_write(line)
            with trio.CancelScope(shield=True):
                with trio.move_on_after(self.write_seconds) as scope:
                    try:
                        await stdin.send_all(line)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self.fail(self.stopped_reading)
                if scope.cancelled_caught:
                    self.fail(f"a line took over {self.write_seconds} s to write")
            return self.closed_reason

    async def close_input(self) -> None:
        """Close stdin once no line is being written."""
        async with self._send_lock:
            await self.hang_up()

    async def hang_up(self) -> None:
        """Close stdin now (shielded): the child's cue to exit."""
        stdin = self.process.stdin
        assert stdin is not None
        self._input_closed = True
        with trio.CancelScope(shield=True):
            await stdin.aclose()

    async def read(
        self, on_line: Callable[[bytes], None], on_too_long: Callable[[str], None]
    ) -> None:
        """Frame stdout into lines until it ends or the connection closes.

        `on_line` gets each non-blank line without its newline; `on_too_long`
        gets how long a line over `max_line_bytes` was (it is skipped to its
        newline, never buffered). The end of stdout closes the connection.
        """
        stdout = self.process.stdout
        assert stdout is not None
        buffer = bytearray()
        scanned = 0  # bytes of `buffer` known to hold no newline
        skipping = False  # inside a line already reported as too long
        limit = self.max_line_bytes
        while self.closed_reason is None:
            try:
                chunk = await stdout.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                self.fail(self.closed_output)
                break
            buffer += chunk
            while self.closed_reason is None:
                newline = buffer.find(b"\n", scanned)
                if newline < 0:
                    scanned = len(buffer)
                    if scanned > limit:
                        if not skipping:
                            on_too_long(f"over {limit} bytes")
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
                    on_too_long(f"{len(line)} bytes")
                elif line.strip():
                    on_line(line)

    async def drain_stderr(self) -> None:
        """Keep the last `stderr_tail_bytes` of stderr until it ends."""
        stderr = self.process.stderr
        assert stderr is not None
        keep = self.stderr_tail_bytes
        try:
            while chunk := await stderr.receive_some(1 << 16):
                self._stderr += chunk
                if len(self._stderr) > keep:
                    del self._stderr[: len(self._stderr) - keep]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._stderr_done.set()

    async def end(self, kind: type[EndedT], ladder: children.Ladder) -> EndedT:
        """End the child on `ladder` (`children.stop`), close the connection, return how it ended.

        Shielded from cancellation, bounded by the ladder's seconds (plus one for
        the stderr tail). The connection closes `closed by akk` unless it closed first.
        """
        with trio.CancelScope(shield=True):
            began = trio.current_time()
            stopped = await children.stop(self.process, self.ticks, self.hang_up, ladder)
            self.fail("closed by akk")
            with trio.move_on_after(1.0):
                await self._stderr_done.wait()
            assert self.closed_reason is not None
            ended = kind(
                how=stopped.how,
                returncode=stopped.returncode,
                reaped=stopped.reaped,
                seconds=trio.current_time() - began,
                reason=self.closed_reason,
                stragglers=stopped.stragglers,
                stderr_tail=self.stderr_tail(),
            )
        return ended


class Piped:
    """The facts of the child behind an owner's `_pipe` (the owner's public surface)."""

    __slots__ = ()
    _pipe: LinePipe

    @property
    def pid(self) -> int:
        """The child's pid (also its process group id)."""
        return self._pipe.process.pid

    def start_ticks(self) -> int | None:
        """The child's start time (clock ticks since boot): with the pid, its identity."""
        return self._pipe.ticks

    @property
    def closed_reason(self) -> str | None:
        """None while the connection is open, else why it closed."""
        return self._pipe.closed_reason

    def rss_bytes(self) -> int | None:
        """The child's resident set size now (None once it is gone)."""
        return children.rss_bytes(self.pid)

    def stderr_tail(self) -> str:
        """The last bytes (the owner's `stderr_tail_bytes`) the child wrote to stderr."""
        return self._pipe.stderr_tail()


@asynccontextmanager
async def running(
    pipe: LinePipe, read: Callable[[], Awaitable[None]], aclose: Callable[[], Awaitable[object]]
) -> AsyncIterator[None]:
    """Run the owner's `read` and the pipe's stderr drain for the block; `aclose` however it ends.

    The block's own error is raised as itself, not wrapped in an exception group.
    """
    own_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            nursery.start_soon(pipe.drain_stderr)
            try:
                yield
            except BaseException as exc:
                own_error = exc
                raise
            finally:
                await aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The nursery wraps the block's own error: raise that error itself.
        if own_error is not None and group.exceptions == (own_error,):
            raise own_error from None
        raise
    finally:
        await aclose()


def nests_deeper(line: bytes, value: object, limit: int) -> bool:
    """Whether ``value`` (decoded from the JSON ``line``) nests arrays and objects more
    than ``limit`` deep.

    Walked without recursion, and only for a line with more than ``limit`` brackets
    (none with fewer can nest that deep): an ordinary line costs two byte counts.
    """
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    stack: list[tuple[dict[Any, Any] | list[Any], int]] = (
        [(value, 1)] if isinstance(value, dict | list) else []
    )
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
