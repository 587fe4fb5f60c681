"""The controller endpoint: JSON-RPC 2.0 over WebSocket (trio-websocket).

Transport only: accepting within bounds, the upgrade (credential → Peer),
framing, size limits, and one task per call so a slow call does not hold up
the connection. What each method does lives in ``akk.methods``. No frame,
however malformed, ends the connection handler or the server; every reply to
a bad frame is a JSON-RPC error with ``data.reason``.

A call that was read runs to its end, in the server's nursery rather than its
connection's: methods are not written to be cancelled halfway (a backend
``send`` between its reservation and its run would leave the Turn dispatching
for ever), and each has its own deadlines. A connection that ends, whoever
closed it, only drops the replies of its calls still running; server shutdown
cancels them.

Everything a peer can make the server hold is bounded (see ``EndpointLimits``
and `akk.server.shares`): descriptors (handshakes, connections per credential
and in all, the oldest stalled handshake evicted first), time (handshake,
hello, send and keepalive timeouts), memory (frames measured in bytes, ids
bounded, calls in flight per connection, per credential and server-wide, held
until each handler ends).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import logging
import re
import socket
import ssl
import time
from typing import Any

import attrs
import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
)
from wsproto import ConnectionType, WSConnection
from wsproto.events import BytesMessage, TextMessage

from akk.config import EndpointLimits, TlsFiles
from akk.console.http import WS_PATH, ConsoleHttp, Head, Origins, read_head, session_cookie
from akk.console.login import LoginBook
from akk.methods.common import Peer
from akk.methods.table import Methods
from akk.protocol.errors import Code, Reason, RpcError
from akk.protocol.jsonrpc import FramingError, Request, error_frame, parse_request, result_frame
from akk.runtime.actor import Rank, act_as
from akk.server.auth import CredentialBook
from akk.server.connections import NO_HELLO, NOT_READING, ConnectionRegistry
from akk.server.instance import CHALLENGE_HEADER, PROOF_HEADER, PROOF_PATH, PROOF_STATUS, proof_for
from akk.server.shares import Full, Shares
from akk.store.credentials import CONSOLE_ID, Credential, Scope
from akk.store.database import StoreUnwritable

log = logging.getLogger("akk.server")

PATH = "/v1"
DEFAULT_PORT = 7878
# Frames up to this many times the limit are read and answered with an error;
# larger ones close the connection (1009) so no peer can make us buffer without bound.
HARD_LIMIT_FACTOR = 4
EVICT_AFTER = 0.05
"""Seconds a handshake may take before a newer connection may evict it."""
_ACCEPT_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_CHALLENGE = re.compile(rb"^[0-9a-f]{64}$")
RETRY_AFTER = 1
"""Seconds an evicted handshake's peer is told to wait before it connects again."""
_BUSY_BODY = b"too many controllers are connecting at once; connect again in a second\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    b"Retry-After: %d\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
    % (RETRY_AFTER, len(_BUSY_BODY), _BUSY_BODY)
)
"""What an evicted handshake's peer reads: a controller that is merely slow retries."""
_BUSY_SECONDS = 0.5
"""How long the busy answer may take to send: a peer that does not read gets no more."""
_NOT_HERE = (
    b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 51\r\n"
    b"Connection: close\r\n\r\nthis port speaks WebSocket; connect to ws://.../v1\n"
)
TOO_BIG = 1009
LINGER = 2.0
"""Seconds a connection closed for a frame too big reads on, so its peer can read why."""
LOGGED_OUT = 4010
"""The close code of a console connection whose session ended."""


@attrs.define
class ServerStats:
    """Counters `akk doctor` shows; they only grow (what is held now is `Shares`')."""

    handshakes: int = 0
    handshakes_evicted: int = 0
    handshakes_timed_out: int = 0
    refused_full: int = 0
    refused_credential_full: int = 0
    refused_unauthorized: int = 0
    accept_errors: int = 0
    closed_not_reading: int = 0
    closed_no_hello: int = 0
    parses_delayed: int = 0
    """Frames whose parsing waited for their credential's share of the thread."""
    replies_dropped: int = 0
    """Replies not sent because their connection had ended first (their calls ran to the end)."""


@attrs.frozen
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    limits: EndpointLimits = attrs.field(factory=EndpointLimits)
    tls: ssl.SSLContext | None = attrs.field(default=None, eq=False)
    """Serve wss:// with this server-side context (None: plain ws://)."""


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` binds to is a loopback one (127.0.0.0/8, ::1).

    A name is resolved as the listener would resolve it; one that does not
    resolve counts as beyond loopback.
    """
    try:
        infos = socket.getaddrinfo(
            host or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (OSError, UnicodeError):
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses
    )


def listen_check(host: str, *, tls: bool, insecure: bool) -> str | None:
    """Whether ``host`` may be served as configured: None, or the warning to log at this start.

    Beyond loopback a bearer token must not cross the network in the clear:
    it needs TLS, or the operator's explicit ``--insecure-listen-anywhere``
    (then the warning returned here is logged at every start). Raises
    ListenError, before anything binds, for a plaintext non-loopback host.
    """
    if tls or is_loopback(host):
        return None
    if insecure:
        return (
            f"serving plaintext ws:// on {host}, beyond loopback (--insecure-listen-anywhere): "
            "every credential crosses the network readable by anyone on the path; give "
            "--tls-cert and --tls-key instead"
        )
    raise ListenError(
        f"--host {host} is beyond loopback, where credentials would cross the network in the "
        "clear; give --tls-cert FILE and --tls-key FILE to serve wss://, or bind 127.0.0.1 "
        "(or pass --insecure-listen-anywhere to accept the risk)"
    )


def tls_context(files: TlsFiles) -> ssl.SSLContext:
    """The server-side context for ``files``; raises ListenError saying what is wrong with them."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.cert, files.key)
    except FileNotFoundError as exc:
        raise ListenError(f"TLS file {exc.filename} does not exist; pass the PEM file") from None
    except (OSError, ssl.SSLError) as exc:
        raise ListenError(
            f"cannot use --tls-cert {files.cert} with --tls-key {files.key}: {exc}; pass a PEM "
            "certificate chain and the private key that matches it"
        ) from None
    return context


class _ByteLimitedWebSocket(WebSocketConnection):
    """trio-websocket's connection with its message limit counted in UTF-8 bytes.

    The library counts ``len()`` of text, i.e. characters, so a "1 MiB" frame
    of 3-byte characters would be 3 MiB on the wire; add the difference.
    """

    async def _handle_message_event(self, event: BytesMessage | TextMessage) -> None:
        data = event.data
        if isinstance(data, str) and not data.isascii():
            self._message_size += len(data.encode()) - len(data)
        await super()._handle_message_event(event)


@attrs.define(eq=False)
class _Pending:
    """One handshake in progress; ``scope`` is cancelled to evict it."""

    scope: trio.CancelScope
    started: float
    evicted: bool = False


class ListenError(Exception):
    """The endpoint could not bind its address; the message says what to do."""


class ControllerServer:
    """Serves controllers until cancelled."""

    def __init__(
        self,
        settings: ServerSettings,
        methods: Methods,
        *,
        book: CredentialBook,
        connections: ConnectionRegistry,
        nonce: str,
        logins: LoginBook | None = None,
    ) -> None:
        """``logins``: the console's sessions; with them the server also serves the console
        (`akk.console`), without them only controllers."""
        self._settings = settings
        self._limits = settings.limits
        self._methods = methods
        self._book = book
        self._connections = connections
        self._nonce = nonce
        self._pending: dict[_Pending, None] = {}  # insertion-ordered: oldest first
        self._slot_freed = trio.Event()
        self.shares = Shares(self._limits)
        self._calls: trio.Nursery | None = None
        """Where calls run: the server's nursery, which outlives every connection."""
        self._accepting: list[trio.CancelScope] = []
        self.draining = False
        self.stats = ServerStats()
        self._logins = logins
        self._console: ConsoleHttp | None = None
        self._consoles: dict[str, set[_Connection]] = {}  # session key -> its connections
        if logins is not None:
            logins.on_end(self._session_ended)

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Bind and serve; ``task_status.started`` gets the bound port (useful with port 0)."""
        host, port = self._settings.host, self._settings.port
        try:
            listeners = await trio.open_tcp_listeners(port, host=host)
        except OSError as exc:
            raise ListenError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; another program may "
                "hold the port (`akk doctor` checks), or pass --port"
            ) from exc
        async with trio.open_nursery() as nursery:
            self._calls = nursery
            for listener in listeners:
                nursery.start_soon(self._accept_loop, listener, nursery)
            port = listeners[0].socket.getsockname()[1]
            if self._logins is not None:
                origins = Origins.serving(host, port, tls=self._settings.tls is not None,
                                          loopback=is_loopback(host))  # fmt: skip
                self._console = ConsoleHttp(self._logins, origins)
            task_status.started(port)

    async def drain(self, timeout: float) -> None:
        """Stop accepting, refuse new calls, and let the calls in flight finish (bounded)."""
        self.draining = True
        for scope in self._accepting:
            scope.cancel()
        with trio.move_on_after(timeout):
            await self.shares.no_calls()

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        scope = trio.CancelScope()
        self._accepting.append(scope)
        with scope:
            await self._accept_until_cancelled(listener, nursery)

    async def _accept_until_cancelled(
        self, listener: trio.SocketListener, nursery: trio.Nursery
    ) -> None:
        async with listener:
            while True:
                await self._handshake_slot()
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in _ACCEPT_ERRNOS:
                        raise
                    # Out of descriptors or memory: wait for some to free, never crash.
                    self.stats.accept_errors += 1
                    if self.stats.accept_errors % 100 == 1:
                        log.warning("accept failed (%s); retrying", exc.strerror)
                    await trio.sleep(0.1)
                    continue
                pending = _Pending(trio.CancelScope(), trio.current_time())
                pending.scope.relative_deadline = self._limits.handshake_timeout
                self._pending[pending] = None
                nursery.start_soon(self._serve_stream, stream, pending)

    async def _handshake_slot(self) -> None:
        """Wait for room for one more handshake, evicting the oldest stalled one.

        A handshake younger than EVICT_AFTER is not evicted, so a burst of real
        controllers (whose upgrade over loopback takes a millisecond or two)
        does not evict itself; one older than that is dropped as soon as a new
        connection needs its slot. A finished handshake frees its slot at once.
        """
        while len(self._pending) >= self._limits.max_handshakes:
            oldest = next(iter(self._pending))
            if trio.current_time() - oldest.started >= EVICT_AFTER:
                del self._pending[oldest]
                oldest.evicted = True
                oldest.scope.cancel()
                self.stats.handshakes_evicted += 1
                continue
            with trio.move_on_at(oldest.started + EVICT_AFTER):
                await self._slot_freed.wait()
            self._slot_freed = trio.Event()

    async def _serve_stream(self, plain: trio.SocketStream, pending: _Pending) -> None:
        hard_limit = self._limits.max_frame_bytes * HARD_LIMIT_FACTOR
        stream: trio.SocketStream | trio.SSLStream[trio.SocketStream] = plain
        if self._settings.tls is not None:
            # The TLS handshake runs inside the upgrade's time (pending.scope): a peer that
            # stalls it, or speaks plaintext, is dropped like a stalled upgrade.
            stream = trio.SSLStream(plain, self._settings.tls, server_side=True,
                                    https_compatible=True)  # fmt: skip
        try:
            async with trio.open_nursery() as nursery:
                ws = _ByteLimitedWebSocket(
                    stream,
                    WSConnection(ConnectionType.SERVER),
                    message_queue_size=1,
                    max_message_size=hard_limit,
                )
                self.stats.handshakes += 1
                request, head, asked = None, None, None
                with pending.scope:
                    head, raw = await read_head(stream)
                    if head is not None and head.upgrade:
                        ws._wsproto.receive_data(raw)  # the upgrade, read above, replayed
                        nursery.start_soon(self._read_frames, ws, pending)
                        request = await ws._get_request()
                    else:
                        asked = head
                if pending.evicted and request is None and asked is None:
                    # A slow controller, or a stalled peer: told to come back, not hung up on.
                    gone = (trio.BrokenResourceError, trio.ClosedResourceError)
                    with trio.move_on_after(_BUSY_SECONDS), contextlib.suppress(*gone):
                        await stream.send_all(_BUSY)
                    nursery.cancel_scope.cancel()
                    return
                if asked is not None:
                    # A plain request: the console's page, login or logout; nothing else.
                    self._release(pending)
                    await self._answer_plain(stream, asked)
                    return
                if request is None and pending in self._pending:
                    self.stats.handshakes_timed_out += 1  # (an evicted one was removed already)
                self._release(pending)
                if request is not None:
                    try:
                        assert head is not None  # a request is read only after its head
                        await self._handle(request, head)
                    finally:
                        with trio.move_on_after(2):
                            await ws.aclose()
                        if ws.closed is not None and ws.closed.code == TOO_BIG:
                            # The library stopped reading mid-frame: closing now would reset
                            # the connection, and the peer would never read why (1009).
                            await _drain(stream, hard_limit)
                nursery.cancel_scope.cancel()
        except Exception:
            # A connection's failure is its own: it must never end the server.
            log.exception("controller connection failed")
        finally:
            self._release(pending)
            await trio.aclose_forcefully(stream)

    async def _read_frames(self, ws: _ByteLimitedWebSocket, pending: _Pending) -> None:
        """The library's reader; a peer that hangs up mid-handshake frees its slot at once."""
        await ws._reader_task()
        pending.scope.cancel()

    def _release(self, pending: _Pending) -> None:
        if pending in self._pending:
            del self._pending[pending]
            self._slot_freed.set()

    async def _answer_plain(self, stream: trio.abc.Stream, head: Head) -> None:
        if self._console is None:
            await stream.send_all(_NOT_HERE)
            return
        with trio.move_on_after(self._limits.send_timeout):
            await self._console.answer(stream, head)

    async def _handle(self, request: WebSocketRequest, head: Head) -> None:
        if request.path == PROOF_PATH:
            await self._prove(request)
            return
        if request.path == WS_PATH:
            await self._handle_console(request, head)
            return
        if request.path != PATH:
            await request.reject(404)
            return
        credential = self._book.verify(_bearer(request.headers))
        if credential is None:
            self.stats.refused_unauthorized += 1
            await request.reject(401, extra_headers=[(b"WWW-Authenticate", b"Bearer")])
            return
        await self._serve_peer(request, credential)

    async def _handle_console(self, request: WebSocketRequest, head: Head) -> None:
        """The console's upgrade: its session cookie, from a page of this server's own origin."""
        console, logins = self._console, self._logins
        if console is None or logins is None:
            await request.reject(404)
            return
        if not console.origins.same_origin(head):
            await request.reject(403, body=b"the console connects only from its own page\n")
            return
        session = session_cookie(head)
        key = None if session is None else logins.session_key(session)
        if key is None:
            self.stats.refused_unauthorized += 1
            await request.reject(401, body=b"not logged in; `akk ui --open` gives a login link\n")
            return
        await self._serve_peer(request, Credential(CONSOLE_ID, Scope.OPERATOR), session=key)

    async def _serve_peer(
        self, request: WebSocketRequest, credential: Credential, *, session: str | None = None
    ) -> None:
        full = self.shares.admit(credential)
        if full is Full.SERVER:
            self.stats.refused_full += 1
            await request.reject(503, body=b"too many controller connections; try again later\n")
            return
        if full is Full.CREDENTIAL:
            self.stats.refused_credential_full += 1
            share = self._limits.connections_per_credential
            body = (
                f"this credential holds {share} connections already, its share; close one "
                "(a controller needs one: its newest hello closes the older ones), or wait "
                "for them to close\n"
            )
            await request.reject(429, body=body.encode())
            return
        try:
            ws = await request.accept()
            connection = _Connection(self, ws, self._methods)
            peer = Peer(credential, connection)
            self._connections.admit(credential.controller_id, connection)
            if session is not None:
                self._consoles.setdefault(session, set()).add(connection)
            try:
                await connection.run(peer)
            finally:
                self._connections.leave(credential.controller_id, connection)
                if session is not None:
                    self._consoles.get(session, set()).discard(connection)
        finally:
            self.shares.leave(credential.controller_id)

    def _session_ended(self, key: str) -> None:
        for connection in self._consoles.pop(key, set()):
            connection.close_soon(LOGGED_OUT, "the console session ended (logged out or expired)")

    async def _prove(self, request: WebSocketRequest) -> None:
        """Answer the CLI's challenge (`akk.server.instance`); never accept a WebSocket here."""
        challenges = [v for n, v in request.headers if n.lower() == CHALLENGE_HEADER]
        challenge = challenges[0] if challenges and _CHALLENGE.match(challenges[0]) else None
        headers = []
        if challenge is not None:
            headers.append((PROOF_HEADER, proof_for(self._nonce, challenge.decode()).encode()))
        await request.reject(PROOF_STATUS, extra_headers=headers)


async def _drain(stream: trio.abc.Stream, limit: int) -> None:
    """Read and drop what the peer still sends (at most ``limit`` bytes, LINGER seconds)."""
    with trio.move_on_after(LINGER):
        drained = 0
        while drained < limit:
            try:
                data = await stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            drained += len(data)


def _bearer(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme == b"Bearer":
                return token.strip().decode(errors="replace")
    return ""


class _Connection:
    """One controller connection: reads frames, starts calls, writes their replies.

    Its calls run in the server's nursery and may outlive it; a reply whose
    connection has ended is dropped.
    """

    def __init__(self, server: ControllerServer, ws: WebSocketConnection, methods: Methods) -> None:
        self._server = server
        self._ws = ws
        self._methods = methods
        self._limits = server._limits
        self._shares = server.shares
        assert server._calls is not None  # connections exist only while `serve` runs
        self._calls = server._calls
        self._stats = server.stats
        self._send_lock = trio.Lock()
        self._slots = trio.Semaphore(self._limits.calls_per_connection)
        self._scope = trio.CancelScope()
        self._close: tuple[int, str] = (1000, "")
        self._hello: trio.Event | None = None
        """Set once the hello being answered has been (None: no hello in flight)."""
        self._ended = False

    def close_soon(self, code: int, reason: str) -> None:
        """Stop reading and close with ``code``; runs from any task, never blocks."""
        if not self._scope.cancel_called:
            self._close = (code, reason)
            self._scope.cancel()

    async def send_event(self, event: dict[str, Any], *, timeout: float) -> bool:
        """Write one event notification frame (the DestinationActor's delivery)."""
        frame = json.dumps({"jsonrpc": "2.0", "method": "event", "params": event})
        return await self.send_frame(frame, timeout=timeout)

    async def send_frame(self, frame: str, *, timeout: float) -> bool:
        """Write one notification frame; False if closed, or not read in time (then closing)."""
        with trio.move_on_after(timeout):
            try:
                async with self._send_lock:
                    await self._ws.send_message(frame)
            except ConnectionClosed:
                return False
            return True
        self._stats.closed_not_reading += 1
        self.close_soon(NOT_READING, "events were not read in time")
        return False

    async def run(self, peer: Peer) -> None:
        """Read and start calls until the peer or the server closes; calls read go on."""
        # The calls this task starts inherit its rank (Trio copies context variables).
        act_as(f"connection {peer.controller_id}", Rank.CONNECTION)
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._keepalive)
                    nursery.start_soon(self._hello_deadline, peer)
                    with contextlib.suppress(ConnectionClosed):
                        await self._read(peer)
                    nursery.cancel_scope.cancel()
            if self._scope.cancelled_caught:
                with trio.move_on_after(2) as scope:
                    scope.shield = True
                    await self._ws.aclose(*self._close)
        finally:
            self._ended = True

    async def _read(self, peer: Peer) -> None:
        while True:
            frame = await self._ws.get_message()
            await self._parse_turn(peer)
            # The thread's own CPU time: a loaded machine that preempts the parse (another
            # process, not this peer) is charged to nobody.
            started = time.thread_time()
            call = self._parse(frame)
            self._shares.parsed(peer.controller_id, time.thread_time() - started)
            del frame  # only the parsed call is kept while it runs
            await self._shares.take_call(self._slots, peer.controller_id)
            answered = trio.Event()
            self._calls.start_soon(self._answer, peer, call, answered)
            if isinstance(call, Request) and call.method == "hello":
                # hello is answered before the next frame is read, so calls
                # pipelined behind it see its effect.
                self._hello = answered
                await answered.wait()
                self._hello = None

    async def _parse_turn(self, peer: Peer) -> None:
        """Wait while this credential has used up its share of parsing (`akk.server.shares`)."""
        wait = self._shares.parse_wait(peer.controller_id)
        if wait:
            self._stats.parses_delayed += 1
        while wait:
            await trio.sleep(wait)
            wait = self._shares.parse_wait(peer.controller_id)

    async def _hello_deadline(self, peer: Peer) -> None:
        """Close the connection if it has not said hello in time: until then it may call
        nothing, and it holds a connection of its credential's share."""
        await trio.sleep(self._limits.hello_timeout)
        if self._hello is not None:
            await self._hello.wait()  # one being answered decides
        if not peer.said_hello:
            self._stats.closed_no_hello += 1
            self.close_soon(NO_HELLO, f"no hello within {self._limits.hello_timeout:g} s; "
                                      "call hello first when you connect")  # fmt: skip

    def _parse(self, frame: str | bytes) -> Request | FramingError:
        size = len(frame) if isinstance(frame, bytes) or frame.isascii() else len(frame.encode())
        if size > self._limits.max_frame_bytes:
            return FramingError(
                None,
                Reason.INVALID_PARAMS,
                f"frame of {size} bytes exceeds the limit of {self._limits.max_frame_bytes}; "
                "send smaller requests",
                code=Code.INVALID_REQUEST,
                detail="frame_too_large",
            )
        try:
            return parse_request(frame)
        except FramingError as error:
            return error

    async def _answer(self, peer: Peer, call: Request | FramingError, answered: trio.Event) -> None:
        """Run one call to its end and send its reply, if its connection still stands.

        Runs in the server's nursery, so it must never raise: what a call's
        failure means for its peer is its error reply (`_reply_to`).
        """
        try:
            reply = await self._reply_to(peer, call)
            del call
            await self._send_reply(reply)
        except Exception:
            log.exception("answering a call failed")
        finally:
            self._shares.give_call(self._slots, peer.controller_id)
            answered.set()

    async def _send_reply(self, reply: str) -> None:
        if self._ended:
            self._stats.replies_dropped += 1
            return
        with trio.move_on_after(self._limits.send_timeout) as sending:
            try:
                async with self._send_lock:
                    await self._ws.send_message(reply)
            except ConnectionClosed:
                self._stats.replies_dropped += 1
                return
        if sending.cancelled_caught:
            self._stats.closed_not_reading += 1
            self.close_soon(NOT_READING, "replies were not read in time")

    async def _reply_to(self, peer: Peer, call: Request | FramingError) -> str:
        if isinstance(call, FramingError):
            return error_frame(call.request_id, call)
        if self._server.draining:
            return error_frame(
                call.id,
                RpcError(
                    Reason.INTERNAL,
                    "the server is shutting down and took no new call; nothing was sent to any "
                    "terminal; call again once it is back",
                ),
            )
        try:
            result: Any = await self._methods.call(peer, call.method, call.params)
        except RpcError as error:
            return error_frame(call.id, error)
        except StoreUnwritable as exc:
            # A write the call needed (an ack, a reservation, an offer) was not committed.
            why = f"{exc.problem}, so nothing was sent to any terminal; {exc.next_step}"
            return error_frame(call.id, RpcError(Reason.INTERNAL, why))
        except Exception:
            log.exception("call failed", extra={"method": call.method})
            return error_frame(
                call.id,
                RpcError(
                    Reason.INTERNAL,
                    "the server failed while handling this call and nothing was sent to any "
                    "terminal; try again, and report it if it repeats (see the server log)",
                    code=Code.INTERNAL_ERROR,
                ),
            )
        return result_frame(call.id, result)

    async def _keepalive(self) -> None:
        """Ping every interval; a peer that does not answer in time is not reading."""
        interval = self._limits.keepalive_interval
        while True:
            await trio.sleep(interval)
            with trio.move_on_after(interval) as waiting:
                try:
                    await self._ws.ping()
                except ConnectionClosed:
                    return
            if waiting.cancelled_caught:
                self._stats.closed_not_reading += 1
                self.close_soon(NOT_READING, "no pong to a keepalive ping")
                return
