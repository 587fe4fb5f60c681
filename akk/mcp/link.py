"""The bridge's controller connection to `akk serve`: found, proven, kept, and found again.

The endpoint is ``--url``, or the one the state directory proves
(`akk.server.instance.proven_endpoint`, the CLI's own check: the credential is
never sent to a listener that did not answer the challenge). `Link.run` keeps
one connection, pours its events into the `EventBuffer`, and when it ends
(the server stopped, restarted, or the buffer needs the server to resend what
it dropped) connects again, at once after a resync and otherwise after a
back-off that a tool call cuts short. While there is no connection every call
fails with `Unavailable` and sends nothing.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, HandshakeError

from akk.cli.text import printable
from akk.client import AkkError, ConnectError, Controller, connect, tls_context
from akk.mcp.events import EventBuffer
from akk.server.instance import InstanceError, proven_endpoint
from akk.store.location import StateDir

NAME = "akk mcp"
RETRY_FIRST = 0.25
RETRY_MAX = 5.0
STABLE_AFTER = 30.0
"""A connection that lived this long resets the back-off (two bridges sharing one
credential supersede each other, and must not do so in a tight loop)."""
ATTEMPT_WAIT = 15.0
"""How long a tool call waits for the connection attempt it asked for."""
CALL_DEADLINE = 120.0
"""How long a call waits for the server's answer (every method answers in seconds)."""

log = logging.getLogger(__name__)

SERVER_NOT_RUNNING = "server_not_running"
CONNECTION_LOST = "connection_lost"
NO_ANSWER = "no_answer"
UNAUTHORIZED = "unauthorized"


class Unavailable(Exception):
    """A call that could not be answered by the server; ``reason`` is the bridge's own code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class CredentialRefused(Exception):
    """The server refused the credential (HTTP 401): wrong, or revoked."""


@attrs.frozen
class Target:
    """Where the server is: a URL given as is, else the state directory's proven endpoint."""

    url: str | None
    state: StateDir

    async def locate(self) -> tuple[str, ssl.SSLContext | None]:
        """The URL to connect to and its TLS context; raise InstanceError if unproven."""
        if self.url is not None:
            return self.url, tls_context() if self.url.startswith("wss://") else None
        endpoint = await proven_endpoint(self.state)
        return endpoint.url, endpoint.tls_context()


@attrs.define
class Link:
    """One controller connection for the bridge's whole life."""

    target: Target
    token: str = attrs.field(repr=False)
    events: EventBuffer
    _ctl: Controller | None = None
    _scope: trio.CancelScope | None = None
    _failure: str = "not connected yet"
    _failures: int = 0
    _refused: bool = False
    """The server refused the credential (revoked since the bridge started). A refused
    credential never becomes valid again, so the link stops trying."""
    _in_flight: int = 0
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _poke: trio.Event = attrs.field(factory=trio.Event)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the connection for ever, or until the server refuses the credential.

        Reports started after the first attempt, whatever its result, except that a
        refused credential then raises CredentialRefused.
        """
        retry = RETRY_FIRST
        reported = False

        def report() -> None:
            nonlocal reported
            if not reported:
                reported = True
                task_status.started()

        while True:
            began = trio.current_time()
            resync = await self._life(report, refuse=not reported)
            report()
            if resync:
                continue
            if self._refused:
                await trio.sleep_forever()
            if trio.current_time() - began > STABLE_AFTER:
                retry = RETRY_FIRST
            with trio.move_on_after(retry):
                await self._poke.wait()
            self._poke = trio.Event()
            retry = min(retry * 2, RETRY_MAX)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """Call ``method`` on the server; raise AkkError (its refusal) or Unavailable."""
        ctl = await self._ready()
        self._in_flight += 1
        try:
            with trio.move_on_after(CALL_DEADLINE) as waited:
                result = await ctl.call(method, params)
            if waited.cancelled_caught:
                raise Unavailable(
                    NO_ANSWER,
                    f"akk serve did not answer {method} within {CALL_DEADLINE:.0f} s; the call "
                    "may or may not have taken effect. Call agent_knock_knock_status before "
                    "trying again, and `akk doctor` checks the server",
                )
        except ConnectionClosed:
            raise Unavailable(
                CONNECTION_LOST,
                f"the connection to akk serve closed before it answered {method}; the call "
                "may or may not have taken effect. Call agent_knock_knock_status before "
                "trying again",
            ) from None
        except AkkError as exc:
            if method == "ack" and exc.reason == "not_found":  # acked before, or pruned
                self.events.acked(str(params.get("event_id")))
            raise
        else:
            if method == "ack":
                self.events.acked(str(params.get("event_id")))
            return result
        finally:
            self._in_flight -= 1
            self._resync_if_due()

    async def _ready(self) -> Controller:
        if self._ctl is not None:
            return self._ctl
        failures = self._failures
        self._poke.set()
        with trio.move_on_after(ATTEMPT_WAIT):
            while self._ctl is None and self._failures == failures and not self._refused:
                await self._changed.wait()
        if self._refused:
            raise Unavailable(
                UNAUTHORIZED,
                f"{self._failure}. Nothing was sent. Restart `akk mcp` with a valid credential",
            )
        if self._ctl is None:
            raise Unavailable(
                SERVER_NOT_RUNNING,
                f"server not running: {self._failure}. Nothing was sent. Start `akk serve` "
                "(the bridge reconnects by itself) and call again",
            )
        return self._ctl

    async def _life(self, report: Callable[[], None], *, refuse: bool) -> bool:
        """One connection from attempt to end; True if it ended for a resync.

        ``report`` is called once connected; ``refuse``: raise CredentialRefused on a 401.
        """
        was_up = resync = False
        try:
            url, context = await self.target.locate()
            async with connect(url, self.token, name=NAME, ssl_context=context) as ctl:
                with trio.CancelScope() as scope:
                    self._ctl, self._scope = ctl, scope
                    self.events.resynced()
                    self._signal()
                    report()
                    was_up = True
                    log.info("connected to %s", url)
                    async with aclosing(ctl.events()) as events:
                        async for event in events:
                            self.events.add(event)
                            self._resync_if_due()
                resync = scope.cancelled_caught
                self._failure = "the server closed the connection"
        except ConnectError as exc:
            rejected = exc.__cause__
            if isinstance(rejected, ConnectionRejected) and rejected.status_code == 401:
                self._refused = True
            if self._refused and refuse:
                raise CredentialRefused(str(exc)) from None
            self._failure = str(exc)
        except InstanceError as exc:
            self._failure = str(exc)
        except (AkkError, ConnectionClosed, HandshakeError, OSError, trio.BrokenResourceError) as e:
            self._failure = f"the connection failed ({e})"
        finally:
            self._ctl = self._scope = None
        if resync:
            return True
        if was_up or self._failures == 0 or self._refused:
            then = "calls answer unauthorized from now on" if self._refused else "retrying"
            log.warning("%s; %s", printable(self._failure), then)
        self._failures += 1
        self._signal()
        return False

    def _resync_if_due(self) -> None:
        if self.events.resync_due and self._in_flight == 0 and self._scope is not None:
            self._scope.cancel()

    def _signal(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
