"""A JSON-RPC client of one `codex app-server` process that AKK starts and owns.

The wire is newline-delimited JSON on the process's stdin and stdout. `open_app_server`
starts the process, performs `initialize` and the `initialized` notification, and
yields an `AppServer`; leaving the block closes it (see `AppServer.aclose`).

Everything the peer can make us hold is bounded: one line (`WireLimits.max_line_bytes`)
and how deep its JSON nests (`max_depth`), buffered notifications and undelivered
server requests, server requests awaiting an answer, late answers to abandoned
requests, and the stderr kept (a tail). Past a bound the connection is closed with a
reason, never silently trimmed. A request is sent once: on timeout or a closed
connection it raises, and whether the server acted on it is unknown to this module
(the caller reconciles; it never retries).

A server request awaits an answer until it is answered, until the server says it is
resolved (`serverRequest/resolved`), or, for one of a turn (`TURN_BOUND`), until that
turn completes: only those awaiting count toward `WireLimits.server_requests`, and
only those can be answered (`AppServer.awaiting`).
"""

from __future__ import annotations

import itertools
import json
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeGuard

import attrs
import trio

import akk
from akk.backends.codex_app_server.schema import Kind, Message
from akk.discovery import children, pipes
from akk.discovery.process import start_ticks
from akk.protocol.redaction import redact

RequestId = int | str
RESOLVED = "serverRequest/resolved"
"""The server's notice that a server request needs no answer any more."""
TURN_COMPLETED = "turn/completed"
TURN_BOUND = frozenset(
    {
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "item/permissions/requestApproval",
        "item/tool/requestUserInput",
    }
)
"""Server requests that belong to one turn (their params name it): its completion leaves
them moot, as Codex's own client treats them. Any other awaits until answered or resolved."""
SETTLING = frozenset({RESOLVED, TURN_COMPLETED})
"""Notifications after which fewer server requests may await an answer."""
Tap = Callable[[Message], None]
"""Sees every message both ways, sent before it is written, received before it is delivered.

It must not raise (an exception from it ends the connection's tasks); tests use it to
check each message against the version's schema."""


@attrs.frozen
class WireLimits:
    """Bounds on what one app-server connection holds, and how long closing may take."""

    max_line_bytes: int = 16 << 20
    max_depth: int = 200
    """How deep one message's arrays and objects may nest. Codex's own JSON parser stops at
    128 (a tool's arguments), so no message of it nests much deeper; the bound keeps every
    later walk of a message (fingerprints, receipts) far from Python's recursion limit."""
    notifications: int = 4096
    """Notifications received and not yet taken from `AppServer.notifications`."""
    server_requests: int = 64
    """Server requests awaiting an answer (see the module's docstring)."""
    abandoned: int = 256
    """Timed-out or cancelled requests whose late answer is recognised (then dropped)."""
    stderr_tail_bytes: int = 64 << 10
    write_seconds: float = 10.0
    """How long one line may take to go into the pipe before the connection counts as stuck."""
    close_seconds: float = 5.0
    """After stdin closes (the app-server's cue to exit), before SIGTERM."""
    term_seconds: float = 2.0
    """After SIGTERM, before SIGKILL."""
    kill_seconds: float = 5.0
    """After SIGKILL, before giving up on the reap (reported, never hidden)."""


@attrs.frozen
class ClientInfo:
    """What `initialize` tells the app-server about its client."""

    name: str = "akk"
    version: str = akk.__version__
    title: str | None = "AKK"


@attrs.frozen
class ServerNotification:
    """A server notification (no reply)."""

    method: str
    params: Any


@attrs.frozen
class ServerRequest:
    """A server request; answer it once with `AppServer.respond` or `respond_error`."""

    id: RequestId
    method: str
    params: Any


@attrs.frozen
class Exit(pipes.Ended):
    """How an app-server process ended, as `AppServer.aclose` saw it."""


class AppServerError(Exception):
    """Base of everything this module raises about an app-server."""


class StartError(AppServerError):
    """The process could not be started or did not finish `initialize`."""


class ConnectionClosed(AppServerError):
    """The connection is closed (by us, by a bound, or because the process went away)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"app-server connection closed: {reason}")
        self.reason = reason


class RequestTimeout(AppServerError):
    """No answer in time. The server may still act on the request: it is never retried."""

    def __init__(self, method: str, request_id: RequestId, timeout: float) -> None:
        super().__init__(
            f"app-server gave no answer to {method} (id {request_id}) within {timeout} s; "
            "it may still act on it: reconcile before sending anything like it again"
        )
        self.method = method
        self.request_id = request_id


class NotAwaited(AppServerError):
    """The server request awaits no answer (answered already, resolved by the server, its
    turn completed, or not from this connection): nothing was sent."""


class ErrorReply(AppServerError):
    """The app-server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"app-server refused {method}: {message} (code {code})")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


@attrs.define
class _Pending:
    method: str
    done: trio.Event = attrs.field(factory=trio.Event)
    result: Any = None
    error: AppServerError | None = None


@attrs.define(eq=False)
class AppServer(pipes.Piped):
    """One running `codex app-server` and its JSON-RPC connection.

    Take notifications from `notifications` and server requests from
    `server_requests` promptly: past their bounds the connection closes. Both
    channels end (EndOfChannel) when the connection closes.
    """

    process: trio.Process
    limits: WireLimits
    notifications: trio.MemoryReceiveChannel[ServerNotification]
    server_requests: trio.MemoryReceiveChannel[ServerRequest]
    tap: Tap | None
    started_at: float
    """`trio.current_time()` just before the process was started."""
    initialize_seconds: float | None = None
    """From start to the `initialize` result."""
    initialize_result: Any = None
    _start_ticks: int | None = None
    _notify_send: trio.MemorySendChannel[ServerNotification] | None = None
    _request_send: trio.MemorySendChannel[ServerRequest] | None = None
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _pending: dict[RequestId, _Pending] = attrs.field(factory=dict)
    _abandoned: OrderedDict[RequestId, str] = attrs.field(factory=OrderedDict)
    _unanswered: dict[RequestId, ServerRequest] = attrs.field(factory=dict)
    _pipe: pipes.LinePipe = attrs.field(init=False)
    _exit: Exit | None = None

    def __attrs_post_init__(self) -> None:
        self._pipe = pipes.LinePipe(
            self.process,
            self._start_ticks,
            max_line_bytes=self.limits.max_line_bytes,
            stderr_tail_bytes=self.limits.stderr_tail_bytes,
            write_seconds=self.limits.write_seconds,
            stopped_reading="the app-server stopped reading its input",
            closed_output="the app-server closed its output (it exited or crashed)",
            on_close=self._closed,
        )

    async def request(self, method: str, params: Any = None, *, timeout: float) -> Any:
        """Send one request and return its result.

        Raises ErrorReply (the server's error), RequestTimeout, or ConnectionClosed.
        Cancelled or timed out, the request stays sent: a late answer is dropped.
        """
        request_id = next(self._ids)
        pending = _Pending(method)
        self._pending[request_id] = pending
        body: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        try:
            with trio.move_on_after(timeout):
                await self._send(Message("client", "request", method, body))
                await pending.done.wait()
        finally:
            if not pending.done.is_set():
                self._abandon(request_id, method)
        if not pending.done.is_set():
            raise RequestTimeout(method, request_id, timeout)
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a client notification (no answer)."""
        body: dict[str, Any] = {"method": method}
        if params is not None:
            body["params"] = params
        await self._send(Message("client", "notification", method, body))

    def awaiting(self, request_id: RequestId) -> bool:
        """Whether server request ``request_id`` still awaits an answer (see the module)."""
        return _is_id(request_id) and request_id in self._unanswered

    async def respond(self, request: ServerRequest, result: Any) -> None:
        """Answer a server request with a result (each request once).

        Raises NotAwaited (nothing sent) if it awaits no answer any more."""
        method = self._answering(request)
        body = {"id": request.id, "result": result}
        await self._send(Message("client", "result", method, body))

    async def respond_error(self, request: ServerRequest, code: int, message: str) -> None:
        """Answer a server request with a JSON-RPC error (each request once; NotAwaited as
        `respond`)."""
        self._answering(request)
        body = {"id": request.id, "error": {"code": code, "message": message}}
        await self._send(Message("client", "error", request.method, body))

    async def aclose(self) -> Exit:
        """Close the connection and end the process; always reap it. Returns how it ended.

        Closes stdin, waits `WireLimits.close_seconds` for the process to exit, then
        SIGTERMs and SIGKILLs its process group, each after a bounded wait, and
        kills what is left in the group. Idempotent (returns the same Exit);
        shielded from cancellation, bounded by the sum of the WireLimits' seconds.
        """
        if self._exit is None:
            # First, so pending requests fail at once, not after the ladder.
            self._pipe.fail("closed by akk")
            ladder = children.Ladder(
                self.limits.close_seconds, self.limits.term_seconds, self.limits.kill_seconds
            )
            self._exit = await self._pipe.end(Exit, ladder)
        return self._exit

    def _answering(self, request: ServerRequest) -> str:
        if not self.awaiting(request.id):
            raise NotAwaited(
                f"server request {request.id!r} ({request.method}) is not awaiting an answer "
                "(answered already, resolved by the app-server, its turn completed, or not "
                "from this connection); nothing was sent"
            )
        return self._unanswered.pop(request.id).method

    def _abandon(self, request_id: RequestId, method: str) -> None:
        del self._pending[request_id]
        self._abandoned[request_id] = method
        while len(self._abandoned) > self.limits.abandoned:
            self._abandoned.popitem(last=False)

    async def _send(self, message: Message) -> None:
        if self.closed_reason is not None:
            raise ConnectionClosed(self.closed_reason)
        self._tapped(message)
        line = json.dumps(message.body, separators=(",", ":"), ensure_ascii=False)
        closed = await self._pipe.send(line.encode() + b"\n")
        if closed is not None:
            raise ConnectionClosed(closed)

    def _closed(self, reason: str) -> None:
        """The connection closed (`LinePipe.fail`): fail pending requests, end the channels."""
        for pending in self._pending.values():
            pending.error = ConnectionClosed(reason)
            pending.done.set()
        self._pending.clear()
        for channel in (self._notify_send, self._request_send):
            if channel is not None:
                channel.close()

    async def _read(self) -> None:
        """Dispatch each stdout line; then close stdin (the app-server's cue to exit)."""
        await self._pipe.read(self._dispatch, self._too_long)
        await self._pipe.hang_up()

    def _too_long(self, _: str) -> None:
        self._pipe.fail(f"a line longer than {self.limits.max_line_bytes} bytes (refused)")

    def _dispatch(self, line: bytes) -> None:
        try:
            body = json.loads(line)
        except ValueError:
            self._pipe.fail("a line that is not JSON")
            return
        except RecursionError:
            self._pipe.fail("a line that is not JSON Python can read (nested too deeply)")
            return
        if not isinstance(body, dict):
            self._pipe.fail("a JSON line that is not an object")
            return
        if pipes.nests_deeper(line, body, self.limits.max_depth):
            self._pipe.fail(f"a JSON line nested deeper than {self.limits.max_depth} (refused)")
            return
        method = body.get("method")
        if "id" in body and method is None and ("result" in body or "error" in body):
            self._answer(body)
        elif isinstance(method, str) and "id" in body:
            self._server_request(body, method)
        elif isinstance(method, str):
            self._tapped(Message("server", "notification", method, body))
            if method in SETTLING:
                self._settle(method, body.get("params"))
            if self._notify_send is not None:
                self._deliver(self._notify_send, ServerNotification(method, body.get("params")))
        else:
            self._pipe.fail("a JSON object that is no JSON-RPC message")

    def _answer(self, body: dict[str, Any]) -> None:
        request_id = body["id"]
        kind: Kind = "error" if "error" in body else "result"
        if not _is_id(request_id):
            self._pipe.fail("an answer with an invalid id")
            return
        pending = self._pending.pop(request_id, None)
        late = self._abandoned.pop(request_id, None) if pending is None else None
        if pending is None and late is None:
            self._pipe.fail(f"an answer to id {request_id!r}, which no request of ours had")
            return
        method = pending.method if pending is not None else late
        self._tapped(Message("server", kind, method, body))
        if pending is None:
            return  # the caller gave up on it already
        if kind == "error":
            error = body["error"] if isinstance(body["error"], dict) else {}
            code = error.get("code")
            pending.error = ErrorReply(
                pending.method,
                code if isinstance(code, int) else 0,
                str(error.get("message", "")),
                error.get("data"),
            )
        else:
            pending.result = body["result"]
        pending.done.set()

    def _server_request(self, body: dict[str, Any], method: str) -> None:
        request_id = body["id"]
        if not _is_id(request_id) or request_id in self._unanswered:
            self._pipe.fail(f"a server request with an invalid or repeated id {request_id!r:.80}")
            return
        if len(self._unanswered) >= self.limits.server_requests:
            self._pipe.fail(f"over {self.limits.server_requests} server requests unanswered")
            return
        self._tapped(Message("server", "request", method, body))
        request = self._unanswered[request_id] = ServerRequest(
            request_id, method, body.get("params")
        )
        if self._request_send is not None:
            self._deliver(self._request_send, request)

    def _settle(self, method: str, params: object) -> None:
        """A request the server resolved, or the requests of a turn that completed, await no
        answer from now on (a notification of another shape settles nothing)."""
        if not isinstance(params, dict):
            return
        if method == RESOLVED:
            request_id = params.get("requestId")
            if _is_id(request_id):
                self._unanswered.pop(request_id, None)
            return
        turn, thread_id = params.get("turn"), params.get("threadId")
        turn_id = turn.get("id") if isinstance(turn, dict) else None
        if not (isinstance(turn_id, str) and isinstance(thread_id, str)):
            return
        moot = [
            request.id
            for request in self._unanswered.values()
            if request.method in TURN_BOUND
            and isinstance(request.params, dict)
            and request.params.get("turnId") == turn_id
            and request.params.get("threadId") == thread_id
        ]
        for request_id in moot:
            del self._unanswered[request_id]

    def _tapped(self, message: Message) -> None:
        if self.tap is not None:
            self.tap(message)

    def _deliver(self, channel: trio.MemorySendChannel[Any], item: object) -> None:
        try:
            channel.send_nowait(item)
        except trio.WouldBlock:
            self._pipe.fail(f"{type(item).__name__}s not taken fast enough (buffer full)")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            if isinstance(item, ServerRequest):
                self._pipe.fail("a server request arrived and nobody takes them")


@asynccontextmanager
async def open_app_server(
    binary: str | os.PathLike[str],
    *,
    codex_home: str | os.PathLike[str],
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    client_info: ClientInfo = ClientInfo(),
    limits: WireLimits = WireLimits(),
    initialize_timeout: float = 30.0,
    tap: Tap | None = None,
) -> AsyncIterator[AppServer]:
    """Start `binary app-server`, initialize it, and yield the connection.

    `env` defaults to this process's environment; CODEX_HOME is set to `codex_home`
    either way. The process runs in its own session (process group). Raises
    StartError if it cannot start or does not answer `initialize`. However the
    block ends, the process is closed and reaped (`AppServer.aclose`).
    """
    environment = dict(os.environ if env is None else env)
    environment["CODEX_HOME"] = str(codex_home)
    started_at = trio.current_time()
    try:
        process = await pipes.spawn([os.fspath(binary), "app-server"], cwd=cwd, env=environment)
    except OSError as exc:
        raise StartError(
            f"cannot start {os.fspath(binary)} app-server: {exc}; check --codex-bin"
        ) from exc
    notify_send, notify_receive = trio.open_memory_channel[ServerNotification](limits.notifications)
    # At most `server_requests` await an answer; one resolved before the host took it still
    # holds its place until taken, and past the bound the connection closes (`_deliver`).
    request_send, request_receive = trio.open_memory_channel[ServerRequest](limits.server_requests)
    server = AppServer(
        process=process,
        limits=limits,
        notifications=notify_receive,
        server_requests=request_receive,
        tap=tap,
        started_at=started_at,
        start_ticks=start_ticks(process.pid),
        notify_send=notify_send,
        request_send=request_send,
    )
    async with pipes.running(server._pipe, server._read, server.aclose):
        await _initialize(server, client_info, initialize_timeout)
        yield server


async def _initialize(server: AppServer, client_info: ClientInfo, timeout: float) -> None:
    info = {k: v for k, v in attrs.asdict(client_info).items() if v is not None}
    try:
        result = await server.request("initialize", {"clientInfo": info}, timeout=timeout)
        await server.notify("initialized")
    except AppServerError as exc:
        await server.aclose()
        # Redacted here: the text goes to the log, the host's board and a send's refusal,
        # and a failing client's stderr may print its environment (an API key).
        tail = redact(server.stderr_tail()[-4_000:])[-500:]
        raise StartError(
            f"app-server (pid {server.pid}) did not initialize: {redact(str(exc))}; "
            f"its stderr ends: {tail!r}"
        ) from exc
    server.initialize_seconds = trio.current_time() - server.started_at
    server.initialize_result = result


def _is_id(value: object) -> TypeGuard[RequestId]:
    """A JSON-RPC id as this module matches ids: a text or a true integer (JSON `true` is
    not the id 1, though Python's `True == 1`)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
