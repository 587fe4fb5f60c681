"""The controller library: what a controller (chat agent, orchestrator, script) imports.

    async with akk.client.connect(url, token) as ctl:   # token from `akk token create ci-bot`
        rows = await ctl.call("list")
        async for event in ctl.events():
            ...
            await ctl.ack(event["event_id"])

Calls raise ``AkkError`` carrying the server's ``reason`` and its next step.

A ``wss://`` URL is checked against the system's certificate authorities and
the URL's host name; ``AKK_TLS_CA`` (or ``tls_context(cafile)`` passed as
``ssl_context``) names a CA file instead, for a self-signed certificate.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import ssl
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

EVENT_BUFFER = 1024
HANDSHAKE_TIMEOUT = 10.0
CONNECT_PATIENCE = 30.0
"""Seconds `connect` keeps retrying a server that answers 503 with Retry-After (its
handshake slots were full: a burst of controllers connecting at once)."""
TLS_CA_ENV = "AKK_TLS_CA"
"""A CA file (PEM) to check wss:// servers against instead of the system's authorities."""


def tls_context(cafile: str | None = None) -> ssl.SSLContext:
    """A client context for wss://: certificates and host names checked, against ``cafile``
    (PEM) if given, else ``$AKK_TLS_CA`` if set, else the system's authorities."""
    return ssl.create_default_context(cafile=cafile or os.environ.get(TLS_CA_ENV) or None)


class AkkError(Exception):
    """The server answered a call with an error; ``reason`` is its data.reason code."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        detail: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.detail = detail
        self.data = data or {}
        """The error's whole ``data`` (e.g. ``session_decision`` of reconcile_required)."""


class ConnectError(Exception):
    """The controller could not connect; the message says what to do."""


class Controller:
    """A connected controller. Use through ``connect``."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self._events_in, self._events_out = trio.open_memory_channel[dict[str, Any]](EVENT_BUFFER)
        self.server: dict[str, Any] = {}

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Call ``method``; return its result or raise AkkError. Raises ConnectionClosed
        if the connection ends first (the call may or may not have run)."""
        call_id = next(self._ids)
        reply_in, reply_out = trio.open_memory_channel[dict[str, Any]](1)
        self._pending[call_id] = reply_in
        try:
            frame = {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params or {}}
            await self._ws.send_message(json.dumps(frame))
            try:
                reply = await reply_out.receive()
            except trio.EndOfChannel:
                raise ConnectionClosed(self._ws.closed) from None
        finally:
            self._pending.pop(call_id, None)
        if "error" in reply:
            error = reply["error"]
            data = error.get("data") or {}
            raise AkkError(
                int(error.get("code", 0)),
                str(data.get("reason", "internal")),
                str(error.get("message", "")),
                data.get("detail"),
                data,
            )
        return reply.get("result")

    async def events(self) -> AsyncGenerator[dict[str, Any], None]:
        """Events pushed by the server, in arrival order, until the connection closes.

        Use it inside ``contextlib.aclosing``. Keep up with it: while
        ``EVENT_BUFFER`` events wait unread, replies to calls wait too.
        """
        async for event in self._events_out:
            yield event

    async def ack(self, event_id: str) -> Any:
        """Tell the server this controller accepted the event."""
        return await self.call("ack", {"event_id": event_id})

    async def _read(self) -> None:
        try:
            while True:
                message = json.loads(await self._ws.get_message())
                if not isinstance(message, dict):
                    continue
                if message.get("method") == "event":
                    # Back-pressure: a consumer that falls EVENT_BUFFER events behind
                    # stops this reader (and so the server's sends) until it catches up.
                    await self._events_in.send(message.get("params", {}))
                elif isinstance(message.get("id"), int) and message["id"] in self._pending:
                    await self._pending[message["id"]].send(message)
        except ConnectionClosed:
            pass
        finally:
            for waiting in self._pending.values():
                waiting.close()
            self._events_in.close()


async def tls_handshake(url: str, ssl_context: ssl.SSLContext) -> None:
    """Complete one TLS handshake with ``url``'s server and hang up, sending nothing else.

    trio-websocket waits for ever when the TLS handshake under a wss:// upgrade
    fails, so a certificate is proven here first. Raises trio.BrokenResourceError
    (the ssl.SSLError as its cause) for a certificate that fails the check,
    OSError when nothing listens.
    """
    parts = urllib.parse.urlsplit(url)
    with trio.fail_after(HANDSHAKE_TIMEOUT):
        stream = await trio.open_ssl_over_tcp_stream(
            parts.hostname or "", parts.port or 443, ssl_context=ssl_context
        )
        try:
            await stream.do_handshake()
        finally:
            await trio.aclose_forcefully(stream)


async def _admitted(
    stack: AsyncExitStack,
    url: str,
    headers: list[tuple[bytes, bytes]],
    ssl_context: ssl.SSLContext | None,
) -> WebSocketConnection:
    """The connection, entered on ``stack`` once the server admits it.

    A 503 with Retry-After (the server's handshake slots were full) is tried
    again after a random part of that wait, for up to CONNECT_PATIENCE, so a
    burst of controllers spreads out instead of failing; any other refusal,
    and a 503 without it (the connection cap), is raised at once.
    """
    deadline = trio.current_time() + CONNECT_PATIENCE
    while True:
        try:
            return await stack.enter_async_context(
                open_websocket_url(url, extra_headers=headers, ssl_context=ssl_context)
            )
        except ConnectionRejected as exc:
            wait = _retry_after(exc)
            if wait is None or trio.current_time() + wait > deadline:
                raise
        await trio.sleep(wait * random.uniform(0.25, 1.0))


def _retry_after(refusal: ConnectionRejected) -> float | None:
    """The seconds a 503 refusal asks the client to wait before it connects again, if any."""
    if refusal.status_code != 503:
        return None
    for name, value in refusal.headers or ():
        if name.lower() == b"retry-after" and value.strip().isdigit():
            return float(value.strip())
    return None


@asynccontextmanager
async def connect(
    url: str,
    token: str,
    *,
    controller_id: str | None = None,
    name: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    events: bool = True,
) -> AsyncIterator[Controller]:
    """Connect, authenticate and say hello; yield the ready Controller.

    The credential names the controller; ``controller_id``, if given, is
    checked against it (a mismatch raises AkkError ``unauthorized``).
    ``events`` False: a one-shot connection that takes none of the
    controller's events (they keep going to its connections that do). A
    ``wss://`` URL uses ``ssl_context``, else ``tls_context()``. Raises
    ConnectError when the server cannot be reached, fails the certificate
    check (the credential is then never sent) or refuses the credential.
    """
    headers = [(b"Authorization", f"Bearer {token}".encode())]
    if url.startswith("wss://") and ssl_context is None:
        ssl_context = tls_context()
    elif not url.startswith("wss://"):
        ssl_context = None
    if ssl_context is not None:
        try:
            await tls_handshake(url, ssl_context)
        except trio.BrokenResourceError as exc:
            raise ConnectError(
                f"the TLS handshake with {url} failed ({exc.__cause__ or exc}); nothing was "
                f"sent. Check the server's certificate, or name its CA file with ${TLS_CA_ENV}"
            ) from exc
        except OSError as exc:
            raise ConnectError(
                f"cannot connect to {url}: {exc}; is `akk serve` running? `akk doctor` checks"
            ) from exc
    # Errors are raised after the reader's nursery closed, so callers see them
    # unwrapped (not inside an ExceptionGroup).
    failure: Exception | None = None
    async with AsyncExitStack() as stack:
        try:
            ws = await _admitted(stack, url, headers, ssl_context)
        except ConnectionRejected as exc:
            if exc.status_code == 401:
                raise ConnectError(
                    "the server refused the credential (HTTP 401): it is wrong or was revoked; "
                    "the operator mints one with `akk token create NAME`"
                ) from exc
            if exc.status_code == 503:
                raise ConnectError(
                    "the server is at its connection limit (HTTP 503); try again shortly"
                ) from exc
            body = (exc.body or b"")[:300].decode("utf-8", "replace").strip()
            said = "".join(c if c.isprintable() else " " for c in body)  # the server's reason
            raise ConnectError(
                f"the server refused the connection (HTTP {exc.status_code})"
                + (f": {said}" if said else "")
            ) from exc
        except (OSError, HandshakeError, trio.BrokenResourceError) as exc:
            raise ConnectError(
                f"cannot connect to {url}: {exc}; is `akk serve` running? `akk doctor` checks"
            ) from exc
        nursery = await stack.enter_async_context(trio.open_nursery())
        controller = Controller(ws)
        nursery.start_soon(controller._read)
        hello: dict[str, Any] = {}
        if controller_id is not None:
            hello["controller_id"] = controller_id
        if name is not None:
            hello["name"] = name
        if not events:
            hello["events"] = False
        try:
            controller.server = await controller.call("hello", hello)
            yield controller
        except Exception as exc:
            failure = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
