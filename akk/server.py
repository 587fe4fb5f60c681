"""The controller endpoint: JSON-RPC 2.0 over WebSocket (trio-websocket).

Transport only: authentication on the upgrade, framing, size limits, and one
task per call so a slow call does not hold up the connection. What each
method does lives in ``akk.methods``. No frame, however malformed, ends the
connection handler or the server; every reply to a bad frame is a JSON-RPC
error with ``data.reason``.
"""

from __future__ import annotations

import hmac
import logging

import attrs
import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
    serve_websocket,
)

from akk.methods import Methods, Peer
from akk.protocol.errors import Code, Reason, RpcError
from akk.protocol.jsonrpc import FramingError, error_frame, parse_request, result_frame

log = logging.getLogger("akk.server")

PATH = "/v1"
DEFAULT_PORT = 7878
DEFAULT_MAX_FRAME = 1 << 20
# Frames up to this many times the limit are read and answered with an error;
# larger ones close the connection (1009) so no peer can make us buffer without bound.
_HARD_LIMIT_FACTOR = 4
_CALLS_IN_FLIGHT = 16


@attrs.frozen
class ServerSettings:
    token: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    max_frame_bytes: int = DEFAULT_MAX_FRAME


class ControllerServer:
    """Serves controllers until cancelled."""

    def __init__(self, settings: ServerSettings, methods: Methods) -> None:
        self._settings = settings
        self._methods = methods

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Bind and serve; ``task_status.started`` gets the bound port (useful with port 0)."""
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                lambda task_status: serve_websocket(
                    self._handle,
                    self._settings.host,
                    self._settings.port,
                    None,
                    handler_nursery=nursery,
                    max_message_size=self._settings.max_frame_bytes * _HARD_LIMIT_FACTOR,
                    task_status=task_status,
                )
            )
            task_status.started(server.port)

    async def _handle(self, request: WebSocketRequest) -> None:
        if request.path != PATH:
            await request.reject(404)
            return
        if not self._authorized(request.headers):
            await request.reject(401, extra_headers=[(b"WWW-Authenticate", b"Bearer")])
            return
        ws = await request.accept()
        try:
            await _Connection(ws, self._methods, self._settings.max_frame_bytes).run()
        except Exception:
            # A connection's failure is its own: it must never end the server.
            log.exception("controller connection failed")

    def _authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        expected = f"Bearer {self._settings.token}".encode()
        for name, value in headers:
            if name.lower() == b"authorization":
                return hmac.compare_digest(value.strip(), expected)
        return False


class _Connection:
    """One controller connection: reads frames, runs calls, writes replies."""

    def __init__(self, ws: WebSocketConnection, methods: Methods, max_frame: int) -> None:
        self._ws = ws
        self._methods = methods
        self._max_frame = max_frame
        self._peer = Peer()
        self._send_lock = trio.Lock()
        self._slots = trio.Semaphore(_CALLS_IN_FLIGHT)

    async def run(self) -> None:
        async with trio.open_nursery() as calls:
            try:
                while True:
                    frame = await self._ws.get_message()
                    await self._slots.acquire()
                    calls.start_soon(self._answer, frame)
            except ConnectionClosed:
                calls.cancel_scope.cancel()

    async def _answer(self, frame: str | bytes) -> None:
        try:
            reply = await self._reply_to(frame)
            async with self._send_lock:
                await self._ws.send_message(reply)
        except ConnectionClosed:
            pass
        finally:
            self._slots.release()

    async def _reply_to(self, frame: str | bytes) -> str:
        if len(frame) > self._max_frame:
            return error_frame(
                None,
                RpcError(
                    Reason.INVALID_PARAMS,
                    f"frame of {len(frame)} bytes exceeds the limit of {self._max_frame}; "
                    "send smaller requests",
                    code=Code.INVALID_REQUEST,
                    detail="frame_too_large",
                ),
            )
        try:
            call = parse_request(frame)
        except FramingError as error:
            return error_frame(error.request_id, error)
        try:
            result = await self._methods.call(self._peer, call.method, call.params)
        except RpcError as error:
            return error_frame(call.id, error)
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
