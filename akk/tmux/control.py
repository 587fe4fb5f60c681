"""A tmux control-mode client: one command channel per tmux server.

`open_control_client` starts `tmux -C attach-session` on a server's socket as a
Trio subprocess and yields a `ControlClient`. Commands are written one per line
and answered strictly in order by `%begin`/`%end` (or `%error`) blocks, so the
client keeps a FIFO of waiters. Lines outside blocks are notifications, fanned
out to `Subscription`s.

How the client stays out of a person's way:

- It never starts a server: the socket must already answer, and `-f /dev/null`
  means that even if tmux raced into starting one, it would load no config,
  have no session, and exit at once.
- It attaches with `ignore-size` (never resizes a window), `read-only` and
  `no-output`. `no-output` matters most: a control client that reads pane
  output can make tmux stop reading a pane while the client lags behind
  (tmux's control-mode flow control), which would stall the agent in it.
  Without output, tmux never waits for us.
- Pane output is only ever read by *output clients* (`output=True`, see
  `akk.tmux.output`), and only while a no-output client is attached to the
  same server: tmux stops reading a pane only when every attached client is
  a control client that cannot take more of its output, and a no-output
  client never counts as one (`server_client_check_pane_buffer` in tmux
  3.2-3.5). Output clients add `pause-after` so tmux drops, rather than
  hoards, output they fall behind on. Their `%output` lines reach
  subscribers as the pane id alone: the bytes are dropped as they are read.
- A control client must be attached to some session (an unattached one exits
  after its first command), and it counts in `#{session_attached}`. So it
  attaches to a session a person already has attached when there is one.
- It sends no keys and sets no options; closing stdin detaches it.

A control client does not keep a server alive: when the last session goes,
tmux exits and the client sees `%exit` and EOF, which it reports to every
waiter and subscriber as `ControlClientClosed`.
"""

from __future__ import annotations

import collections
import os
import re
import socket
import subprocess
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path

import attrs
import trio

ATTACH_FLAGS = "ignore-size,read-only,no-output"
"""Client flags for the attach: no resizing, no key input, no pane output stream."""

PAUSE_AFTER_SECONDS = 1
"""An output client's pane is paused once its unread output is this old (whole seconds)."""

OUTPUT_ATTACH_FLAGS = f"ignore-size,read-only,pause-after={PAUSE_AFTER_SECONDS}"
"""Client flags for an output client: pane output as `%extended-output`, paused when stale."""

DATA_NOTIFICATIONS = frozenset({"output", "extended-output"})
"""Notifications that carry pane bytes; they are parsed to the pane id and the bytes dropped."""

_SAFE_WORD = re.compile(r"[A-Za-z0-9_%@.,:/=+-]+")
_CONDITION_LIKE = re.compile(r"%(?![%0-9]*$)")
_GUARD = re.compile(r"%(begin|end|error) (\d+) (\d+) (\d+)")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "$": "\\$", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_READ_CHUNK = 65536
_DATA_PREFIXES = (b"%output ", b"%extended-output ")
_DATA_HEAD = 64  # bytes of a data line worth keeping: its name and pane id
_START_TIMEOUT = 10.0
_CLOSE_TIMEOUT = 5.0
_FLAG_FROM_CONTROL = 1  # %begin flag bit: the command came from our stdin
_WHY_GONE_SECONDS = 1.0  # a failed write waits this long for the output to say why (%exit)

# How many leading space-separated fields a notification has before a free-text tail
# (a name or a value that may itself contain spaces). Unlisted ones split fully.
_TAIL_AFTER = {
    "exit": 0,
    "session-changed": 1,
    "client-session-changed": 2,
    "session-renamed": 0,
    "window-renamed": 1,
    "unlinked-window-renamed": 1,
    "message": 0,
    "config-error": 0,
}

TOPOLOGY_NOTIFICATIONS = frozenset(
    {
        "window-add",
        "window-close",
        "unlinked-window-add",
        "unlinked-window-close",
        "sessions-changed",
        "layout-change",
    }
)
"""Notifications after which the set of panes may differ (list them again)."""


class TmuxCommandError(Exception):
    """tmux answered a command with `%error`; `lines` is what it said.

    Its message names the command only: the arguments of `send-keys` and
    `set-buffer` are a task's or an answer's text, which no log, record or
    reply may carry (``argv`` keeps them for the caller's own checks).
    """

    def __init__(self, argv: tuple[str, ...], lines: list[str]) -> None:
        super().__init__(
            f"tmux rejected `{argv[0] if argv else '?'}`: {self.said_by(lines)}. "
            "Check the target still exists (panes and sessions come and go)."
        )
        self.argv = argv
        self.lines = lines

    @staticmethod
    def said_by(lines: list[str]) -> str:
        return "; ".join(lines)[:150] or "no message"

    @property
    def said(self) -> str:
        """What tmux said, after the command's name (never its arguments)."""
        return f"{self.argv[0] if self.argv else 'tmux'}: {self.said_by(self.lines)}"


class UnencodableCommand(TmuxCommandError):
    """A command argument holds a code point UTF-8 cannot encode (a lone surrogate).

    Nothing of the command was written: the key layer writes only the exact
    UTF-8 of its text, so a text that slipped past the text rule is an error
    here, never a byte it does not spell.
    """

    def __init__(self, argv: tuple[str, ...], error: UnicodeEncodeError) -> None:
        bad = error.object[error.start : error.end]
        super().__init__(
            argv[:1],
            [
                f"not written: an argument holds U+{ord(bad[0]):04X}, which UTF-8 cannot "
                "encode (a lone surrogate); the text rule should have refused it"
            ],
        )


class ControlClientClosed(Exception):
    """The control client is gone: the server exited, the session closed, or it was closed.

    Open a new client with `open_control_client` if the server still runs.
    """

    def __init__(self, socket_path: str, reason: str) -> None:
        super().__init__(
            f"tmux control client for {socket_path} closed: {reason}. "
            "If the server still runs, open a new control client."
        )
        self.socket_path = socket_path
        self.reason = reason


class ControlProtocolError(ControlClientClosed):
    """tmux sent something the block protocol does not allow; the channel was closed."""


class ControlEventsLost(Exception):
    """A subscriber fell more than its buffer behind; resynchronise from a fresh listing."""


@attrs.frozen
class ControlEvent:
    """One `%name args...` line tmux sent outside a command block.

    `args` are the space-separated fields; a trailing free-text field (a session
    name, `%exit`'s reason) is kept whole as the last item. Pane output
    (`DATA_NOTIFICATIONS`) keeps only the pane id: the bytes are a signal that
    the pane changed, never data AKK reads.
    """

    name: str
    args: tuple[str, ...]

    @classmethod
    def parse(cls, line: str) -> ControlEvent:
        """Parse a line that starts with `%`."""
        head, _, rest = line[1:].partition(" ")
        fields = _TAIL_AFTER.get(head)
        if not rest:
            return cls(head, ())
        if head in DATA_NOTIFICATIONS:
            return cls(head, (rest.partition(" ")[0],))
        if fields is None:
            return cls(head, tuple(rest.split(" ")))
        return cls(head, tuple(rest.split(" ", fields)))

    @property
    def pane_id(self) -> str | None:
        """The `%N` pane this notification is about, if it names one first."""
        if self.args and self.args[0].startswith("%"):
            return self.args[0]
        return None


def default_socket() -> str:
    """The socket of tmux's default server for this user."""
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return str(Path(base) / f"tmux-{os.getuid()}" / "default")


def quote_argument(arg: str) -> str:
    """Quote one argument for tmux's command parser so it arrives unchanged.

    Double quotes with escapes for the characters the parser treats specially
    inside them (backslash, quote, `$`) and for line breaks, which would
    otherwise end the control-mode command line. A leading `~` is written as
    an octal escape: tmux expands it to a home directory even inside double
    quotes. A bare word is left alone, except one that starts with `%` and is
    not just `%` and digits (a pane id): tmux would read it as a directive
    such as `%if` (or reject `%3:pause`).
    """
    if _SAFE_WORD.fullmatch(arg) and not arg.startswith("~") and not _CONDITION_LIKE.match(arg):
        return arg
    out = []
    for index, ch in enumerate(arg):
        if ch == "~" and index == 0:
            out.append("\\176")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def command_line(argv: Iterable[str]) -> str:
    """One control-mode command line (without the newline) for `argv`."""
    words = [quote_argument(a) for a in argv]
    if not words:
        raise ValueError("empty tmux command: an empty line would detach the control client")
    return " ".join(words)


def encode_command(argv: tuple[str, ...]) -> bytes:
    """The exact bytes written for `argv`: its command line and a newline, strict UTF-8.

    Raises `UnencodableCommand` (nothing to write) for an argument UTF-8 cannot
    encode, so no text ever reaches tmux as bytes it does not spell.
    """
    try:
        return (command_line(argv) + "\n").encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UnencodableCommand(argv, exc) from None


@attrs.define(eq=False)
class _Waiter:
    """One command awaiting its block."""

    argv: tuple[str, ...]
    done: trio.Event = attrs.field(factory=trio.Event)
    lines: list[str] = attrs.field(factory=list)
    error: BaseException | None = None


@attrs.define(eq=False)
class Subscription:
    """A buffered stream of notifications; iterate it with `async for`.

    Raises `ControlEventsLost` if more than `limit` notifications piled up
    unread, and `ControlClientClosed` once the client is gone.
    """

    limit: int
    _queue: collections.deque[ControlEvent] = attrs.field(factory=collections.deque)
    _wakeup: trio.Event = attrs.field(factory=trio.Event)
    _error: BaseException | None = None

    def _push(self, note: ControlEvent) -> None:
        if self._error is not None:
            return
        if len(self._queue) >= self.limit:
            self._fail(ControlEventsLost(f"more than {self.limit} notifications unread"))
            return
        self._queue.append(note)
        self._wakeup.set()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._wakeup.set()

    @property
    def overflowed(self) -> bool:
        """True once notifications were lost; this subscription yields nothing more."""
        return isinstance(self._error, ControlEventsLost)

    def pending(self) -> list[ControlEvent]:
        """Take every notification already buffered, without waiting."""
        taken = list(self._queue)
        self._queue.clear()
        return taken

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> ControlEvent:
        while not self._queue:
            if self._error is not None:
                raise self._error
            await self._wakeup.wait()
            self._wakeup = trio.Event()
        return self._queue.popleft()


@attrs.define(eq=False)
class ControlClient:
    """A live `tmux -C` client. Create it with `open_control_client`.

    `command` may be called from many tasks at once; answers are matched to
    callers in the order the lines were written.
    """

    socket_path: str
    session_id: str
    _process: trio.Process
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock)
    _waiters: collections.deque[_Waiter] = attrs.field(factory=collections.deque)
    _subscribers: list[Subscription] = attrs.field(factory=list)
    _closed: ControlClientClosed | None = None
    _exit_reason: str | None = None
    _attach: _Waiter | None = None
    _read_ended: trio.Event = attrs.field(factory=trio.Event)

    @property
    def closed(self) -> ControlClientClosed | None:
        """Why the client is closed, or None while it is usable."""
        return self._closed

    async def command(self, *argv: str) -> list[str]:
        """Run one tmux command and return its output lines.

        Raises `TmuxCommandError` on `%error` (`UnencodableCommand`, before
        anything is written, for an argument strict UTF-8 cannot encode) and
        `ControlClientClosed` if the client is or becomes closed. If the
        caller is cancelled after the line was written, the answer is read and
        dropped, so later commands stay in step.
        """
        data = encode_command(argv)  # before the waiter: a refused line leaves no answer owed
        waiter = _Waiter(argv)
        async with self._send_lock:
            self._raise_if_closed()
            self._waiters.append(waiter)
            stdin = self._process.stdin
            assert stdin is not None
            try:
                with trio.CancelScope(shield=True):
                    # A half-written line would desynchronise every later answer.
                    await stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                # The client process is going: its output says why (%exit, EOF) if it ends soon.
                with trio.move_on_after(_WHY_GONE_SECONDS):
                    await self._read_ended.wait()
                self._close(f"writing to tmux failed ({exc!r})")
        await waiter.done.wait()
        if waiter.error is not None:
            raise waiter.error
        return waiter.lines

    @contextmanager
    def subscribe(self, limit: int = 1024) -> Iterator[Subscription]:
        """Receive every notification that arrives while the block is open."""
        sub = Subscription(limit)
        if self._closed is not None:
            sub._fail(self._closed)
        self._subscribers.append(sub)
        try:
            yield sub
        finally:
            self._subscribers.remove(sub)

    def _raise_if_closed(self) -> None:
        if self._closed is not None:
            raise self._closed

    def _close(self, reason: str, error: type[ControlClientClosed] = ControlClientClosed) -> None:
        if self._closed is not None:
            return
        self._closed = error(self.socket_path, reason)
        for waiter in [*self._waiters, *([self._attach] if self._attach else [])]:
            waiter.error = self._closed
            waiter.done.set()
        self._waiters.clear()
        for sub in self._subscribers:
            sub._fail(self._closed)

    async def _read_loop(self) -> None:
        """Read stdout until EOF, answering waiters and fanning out notifications."""
        stdout = self._process.stdout
        assert stdout is not None
        buffer = b""
        # (its %begin's "time number flags", lines): tmux ends the block with the same three,
        # so a pane row that spells a guard of another time or command does not end it.
        block: tuple[str, list[str]] | None = None
        block_flags = 0
        try:
            while True:
                chunk = await stdout.receive_some(_READ_CHUNK)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    if block is None and raw.startswith(_DATA_PREFIXES):
                        raw = raw[:_DATA_HEAD]  # pane bytes are never decoded
                    line = raw.decode("utf-8", "surrogateescape")
                    if block is not None:
                        guard = _GUARD.fullmatch(line)
                        if guard and guard[1] != "begin" and line.split(" ", 1)[1] == block[0]:
                            self._finish_block(block[1], guard[1] == "error", block_flags)
                            block = None
                        else:
                            block[1].append(line)
                        continue
                    guard = _GUARD.fullmatch(line)
                    if guard and guard[1] == "begin":
                        block = (line.split(" ", 1)[1], [])
                        block_flags = int(guard[4])
                    elif line.startswith("%") and not guard:
                        self._notify(ControlEvent.parse(line))
                    else:
                        self._close(
                            f"unexpected line outside a block: {line[:80]!r}", ControlProtocolError
                        )
                        return
                if block is None and len(buffer) > _DATA_HEAD and buffer.startswith(_DATA_PREFIXES):
                    # A long output line still arriving: keep its head, not its bytes.
                    buffer = buffer[:_DATA_HEAD]
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._close(f"reading from tmux failed ({exc!r})")
        finally:
            self._read_ended.set()
        self._close(self._exit_reason or "tmux closed the control channel")

    def _finish_block(self, lines: list[str], failed: bool, flags: int) -> None:
        if not flags & _FLAG_FROM_CONTROL:
            # The attach command itself (from argv), not one of ours.
            if self._attach is not None:
                self._attach.lines = lines
                if failed:
                    self._attach.error = TmuxCommandError(self._attach.argv, lines)
                self._attach.done.set()
                self._attach = None
            return
        if not self._waiters:
            self._close("an answer arrived with no command waiting", ControlProtocolError)
            return
        waiter = self._waiters.popleft()
        waiter.lines = lines
        if failed:
            waiter.error = TmuxCommandError(waiter.argv, lines)
        waiter.done.set()

    def _notify(self, note: ControlEvent) -> None:
        if note.name == "exit":
            self._exit_reason = (
                f"tmux sent %exit ({note.args[0]})"
                if note.args
                else "tmux sent %exit: the server exited or the attached session closed"
            )
        for sub in list(self._subscribers):
            sub._push(note)


def _environment() -> dict[str, str]:
    # Inside tmux, TMUX would make attach refuse to nest; the socket is explicit anyway.
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env.setdefault("LANG", "C.UTF-8")
    return env


@attrs.define(eq=False)
class ClientLink:
    """The current control client of one tmux server, swapped when its watcher reattaches.

    Terminals outlive one attachment (a person's session can end while other
    panes live on); they reach tmux through the link, never a stored client.
    """

    socket_path: str
    current: ControlClient | None = None

    def client(self) -> ControlClient:
        """The live client; raises ControlClientClosed between attachments."""
        client = self.current
        if client is None:
            raise ControlClientClosed(self.socket_path, "not attached (reattaching)")
        if client.closed is not None:
            raise client.closed
        return client


async def _choose_session(socket_path: str) -> str:
    """The session to attach to: one a person has attached, else the oldest.

    This one-off listing is the only process the client spawns besides itself.
    """
    result = await trio.run_process(
        ["tmux", "-S", socket_path, "list-sessions", "-F", "#{session_attached} #{session_id}"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        stdin=subprocess.DEVNULL,
        env=_environment(),
    )
    if result.returncode != 0:
        reason = result.stderr.decode(errors="replace").strip() or f"exit {result.returncode}"
        raise ControlClientClosed(socket_path, f"cannot list sessions: {reason}")
    sessions = []
    for line in result.stdout.decode().splitlines():
        attached, _, session_id = line.partition(" ")
        sessions.append((-int(attached), int(session_id.lstrip("$")), session_id))
    if not sessions:
        raise ControlClientClosed(socket_path, "the server has no sessions")
    return min(sessions)[2]


def _socket_answers(socket_path: str) -> bool:
    """True if something listens on the socket (checked without spawning tmux)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(socket_path)
        except OSError:
            return False
    return True


@asynccontextmanager
async def open_control_client(
    socket_path: str | os.PathLike[str],
    *,
    session: str | None = None,
    output: bool = False,
) -> AsyncIterator[ControlClient]:
    """Attach a control client to the tmux server at `socket_path`.

    `session` picks the session to attach to (default: see `_choose_session`).
    `output=True` attaches an output client (`OUTPUT_ATTACH_FLAGS`): it gets
    `%extended-output` for the panes of its session. Open one only while a
    no-output client of the same server is attached (see the module docstring).
    Raises `ControlClientClosed` if no server answers on the socket or it has
    no session. On exit the client detaches (stdin closed) and is reaped; the
    server is left running.
    """
    path = os.fspath(socket_path)
    if not await trio.to_thread.run_sync(_socket_answers, path):
        raise ControlClientClosed(path, "no tmux server answers on this socket")
    session_id = session or await _choose_session(path)
    argv = ["tmux", "-u", "-f", "/dev/null", "-S", path, "-C",
            "attach-session", "-f", OUTPUT_ATTACH_FLAGS if output else ATTACH_FLAGS,
            "-t", session_id]  # fmt: skip
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_environment(),
        start_new_session=True,  # a Ctrl-C in our terminal must not reach it
    )
    client = ControlClient(path, session_id, process)
    client._attach = _Waiter(("attach-session", "-t", session_id))
    attach = client._attach
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read_loop)
            with trio.fail_after(_START_TIMEOUT):
                await attach.done.wait()
                if attach.error is not None:
                    raise attach.error
                (client.session_id,) = await client.command(
                    "display-message", "-p", "#{session_id}"
                )
            try:
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await _detach(client)
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The reader task never raises, so the group holds the caller's own
        # exception (or ours from start-up): re-raise it bare so that callers
        # catch what they raised.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        client._close("the control client was closed")
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()


async def _detach(client: ControlClient) -> None:
    """Close stdin (tmux detaches the client on EOF) and wait for it to exit."""
    stdin = client._process.stdin
    assert stdin is not None
    with trio.move_on_after(_CLOSE_TIMEOUT):
        with suppress(trio.BrokenResourceError):
            await stdin.aclose()
        await client._process.wait()
