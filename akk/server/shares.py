"""What each credential holds of the endpoint: connections, calls in flight, parsing time.

A peer can open as many connections as it likes, but it holds only the
credentials the operator minted for it; so besides the bounds per connection
and in all, each credential has its own share, and no controller can take
every slot, or the server's one thread, from the others. The operator's own
credentials (the CLI's and the console's) may also take the last few
connections, so the operator can always connect, see who holds what, and
revoke a credential.

Parsing is measured, not predicted: a frame within the size limit can still
cost the thread a large part of a second in the schema check, so each
credential has a bucket of parsing seconds of the thread's CPU time (a parse
preempted by another process costs its peer nothing more; ``parse_burst``, refilled at
``parse_share`` of real time). A frame is parsed only while its credential's
bucket is not empty; its cost is taken out afterwards. A credential's share
is kept until its bucket is full again, so hanging up clears no debt.

A call's slots (of its connection, its credential and the server) are held
until its handler ends, even when its connection ended first: a peer that
hangs up and connects again finds its credential's slots still taken by the
calls it left running.
"""

from __future__ import annotations

import enum

import attrs
import trio

from akk.config import EndpointLimits
from akk.store.credentials import Credential, Scope


class Full(enum.Enum):
    """Why a connection was refused."""

    SERVER = "server"
    """Every connection slot open to this credential is taken."""
    CREDENTIAL = "credential"
    """This credential holds its share of connections already."""


@attrs.define(eq=False)
class _Share:
    """One credential's connections, call slots and parsing seconds."""

    calls: trio.Semaphore
    parsing: float
    """Seconds of parsing it may take now (negative: what it owes)."""
    parsing_at: float
    """When ``parsing`` was last brought up to date (`trio.current_time`)."""
    connections: int = 0


class Shares:
    """The endpoint's connection and call slots, per credential and in all."""

    def __init__(self, limits: EndpointLimits) -> None:
        self._limits = limits
        self._by_credential: dict[str, _Share] = {}
        self._calls = trio.Semaphore(limits.calls_in_flight)
        self._call_ended = trio.Event()
        self.connections = 0

    @property
    def calls(self) -> int:
        """Calls in flight server-wide (their handlers running, or their replies being sent)."""
        return self._limits.calls_in_flight - self._calls.value

    def held(self, controller_id: str) -> tuple[int, int]:
        """The connections and the calls in flight ``controller_id`` holds."""
        share = self._by_credential.get(controller_id)
        if share is None:
            return 0, 0
        return share.connections, self._limits.calls_per_credential - share.calls.value

    def admit(self, credential: Credential) -> Full | None:
        """Count one more connection of ``credential``, or say why it may not have one."""
        limits = self._limits
        reserve = min(limits.operator_reserve, limits.max_connections // 4)
        room = limits.max_connections
        if credential.scope is not Scope.OPERATOR:
            room -= reserve
        if self.connections >= room:
            return Full.SERVER
        share = self._share(credential.controller_id)
        if share.connections >= limits.connections_per_credential:
            return Full.CREDENTIAL
        share.connections += 1
        self.connections += 1
        return None

    def leave(self, controller_id: str) -> None:
        """One connection of ``controller_id`` ended (its calls may still run)."""
        self.connections -= 1
        self._by_credential[controller_id].connections -= 1
        self._forget_if_idle(controller_id)

    async def take_call(self, connection: trio.Semaphore, controller_id: str) -> None:
        """Wait for a call slot of ``connection``, of its credential and of the server.

        Takes all three, in that order, or (cancelled while waiting) none.
        The caller is one of ``controller_id``'s admitted connections.
        """
        share = self._by_credential[controller_id]
        await connection.acquire()
        try:
            await share.calls.acquire()
            try:
                await self._calls.acquire()
            except BaseException:
                share.calls.release()
                raise
        except BaseException:
            connection.release()
            raise

    def give_call(self, connection: trio.Semaphore, controller_id: str) -> None:
        """A call taken with `take_call` ended: its three slots are free again."""
        self._calls.release()
        self._by_credential[controller_id].calls.release()
        connection.release()
        self._forget_if_idle(controller_id)
        self._call_ended.set()
        self._call_ended = trio.Event()

    def parse_wait(self, controller_id: str) -> float:
        """Seconds until ``controller_id``'s bucket of parsing seconds is no longer empty.

        When it is 0, parse the frame and charge it (`parsed`) with no checkpoint
        between, so no other reader of the credential parses on the same credit.
        """
        owed = -self._refill(self._by_credential[controller_id])
        return max(0.0, owed / self._limits.parse_share)

    def parsed(self, controller_id: str, seconds: float) -> None:
        """Take the ``seconds`` a frame of ``controller_id`` took to parse out of its bucket."""
        self._by_credential[controller_id].parsing -= seconds

    async def no_calls(self) -> None:
        """Return once no call is in flight."""
        while self.calls:
            await self._call_ended.wait()

    def _share(self, controller_id: str) -> _Share:
        share = self._by_credential.get(controller_id)
        if share is None:
            limits = self._limits
            share = _Share(trio.Semaphore(limits.calls_per_credential), limits.parse_burst,
                           trio.current_time())  # fmt: skip
            self._by_credential[controller_id] = share
        return share

    def _refill(self, share: _Share) -> float:
        now = trio.current_time()
        earned = (now - share.parsing_at) * self._limits.parse_share
        share.parsing = min(self._limits.parse_burst, share.parsing + earned)
        share.parsing_at = now
        return share.parsing

    def _forget_if_idle(self, controller_id: str) -> None:
        """Drop the share of a credential that holds nothing and owes no parsing (one that
        owes is kept, and dropped when it next leaves a connection or a call once repaid;
        shares exist only for credentials that connected, so they are bounded too)."""
        share = self._by_credential.get(controller_id)
        if (
            share is not None
            and share.connections == 0
            and share.calls.value == self._limits.calls_per_credential
            and share.calls.statistics().tasks_waiting == 0
            and self._refill(share) >= self._limits.parse_burst
        ):
            del self._by_credential[controller_id]
