"""DestinationActor: one controller's durable outbox, delivered over its live connection.

Each due notification is leased (its attempt counted, durably) before its
event frame is written to the controller's current connection; the lease
runs until the controller's ``ack``. A lease that runs out makes it due again
after a backoff with jitter; after ``max_attempts`` it becomes
``retryable_failure`` and is not sent again on its own. A notification is only
ever sent to its own controller's connection, with the ``event_id`` it was
written with, so a redelivery (reconnect, restart) is recognisable as one.
Without a live connection nothing is attempted: the events wait for it.

While the store cannot write (`StoreUnwritable`) a due event is still delivered,
unleased: its attempt is not counted, and this actor holds it back for one
lease in memory instead. At least once is kept (the controller's ack, or a
redelivery under the same ``event_id`` once the store writes again), and an
outcome recorded before the disk filled still reaches its controller.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import partial
from typing import Any, Protocol

import apsw
import attrs
import trio

from akk import faults
from akk.actors.store import transact
from akk.faults import Point
from akk.runtime.actor import Actor, ActorRef, ActorStopped, MailboxFull, Rank
from akk.runtime.supervisor import ChildSpec, Restart, Supervisor
from akk.store import outbox
from akk.store.database import CasConflict, StoreUnwritable
from akk.store.outbox import Notification


class EventSink(Protocol):
    """Where a controller's events go: its live connection (`akk.server.connections`)."""

    async def send_event(self, event: dict[str, Any], *, timeout: float) -> bool:
        """Write one event frame; False if the connection could not take it in time."""


log = logging.getLogger("akk.destination")


@attrs.frozen
class OutboxPolicy:
    lease_seconds: float = 30.0
    """How long a delivered event waits for its ack before it is due again."""
    backoff_seconds: float = 2.0
    max_backoff_seconds: float = 120.0
    max_attempts: int = 8
    send_timeout: float = 5.0


@attrs.frozen
class Wake:
    """Something changed for this controller: new notifications, a connection, an ack."""


class DestinationActor(Actor):
    rank = Rank.DESTINATION
    mailbox_size = 4  # one queued Wake covers any number of later ones

    def __init__(
        self,
        controller_id: str,
        *,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Awaitable[Any]],
        sink: Callable[[str], EventSink | None],
        policy: OutboxPolicy,
        report: Callable[[str, float], None],
    ) -> None:
        self._controller_id = controller_id
        self._store = store
        self._reader = reader
        self._sink = sink
        self._policy = policy
        self._report = report
        self._unleased: dict[str, float] = {}  # notification_id → when its unleased send is due

    async def receive(self, message: object) -> object:
        if isinstance(message, Wake):
            await self._deliver_due()
        return None

    async def _deliver_due(self) -> None:
        controller_id, now = self._controller_id, time.time()
        # One read for both: a connect wakes every controller's Destination, most with
        # nothing due, and each read waits its turn on the store's one reader.
        due, after = await self._reader(
            lambda conn: (
                outbox.due(conn, controller_id, now),
                outbox.next_wakeup(conn, controller_id),
            )
        )
        policy = self._policy
        self._unleased = {key: at for key, at in self._unleased.items() if at > now}
        for notification in due:
            sink = self._sink(controller_id)
            if sink is None:
                # No live connection: they wait for one (its hello wakes us).
                self._report(controller_id, math.inf)
                return
            if notification.notification_id in self._unleased:
                continue
            try:
                leased = await transact(self._store, _leaser(notification, policy))
            except StoreUnwritable as exc:
                await self._send_unleased(sink, notification, exc)
                continue
            except CasConflict:
                continue  # acked, withdrawn or leased since it was read: read again next wake
            if leased is None:
                log.warning(
                    "notification %s for %s: no ack after %d attempts; retryable_failure",
                    notification.notification_id, controller_id, notification.attempts,
                )  # fmt: skip
                continue
            await faults.reached(Point.LEASED)
            sent = await sink.send_event(leased.event(), timeout=policy.send_timeout)
            if not sent:
                # Unwritable: it stays leased, due when the lease ends. A conflict: it was acked,
                # withdrawn or released to a new connection meanwhile, which decided already.
                with suppress(StoreUnwritable, CasConflict):
                    await transact(
                        self._store, _postponer(leased, _backoff(policy, leased.attempts))
                    )
                continue
            await faults.reached(Point.DELIVERED)
        if due:  # each one leased or put off since: when the next is due is read again
            after = await self._reader(lambda conn: outbox.next_wakeup(conn, controller_id))
        held = min(self._unleased.values(), default=math.inf)
        self._report(controller_id, min(held, math.inf if after is None else after))

    async def _send_unleased(
        self, sink: EventSink, notification: Notification, why: StoreUnwritable
    ) -> None:
        """Deliver ``notification`` though its lease could not be written; hold it one lease."""
        self._unleased[notification.notification_id] = time.time() + self._policy.lease_seconds
        log.warning(
            "notification %s for %s delivered without a lease: %s",
            notification.notification_id, self._controller_id, why,
        )  # fmt: skip
        await sink.send_event(notification.event(), timeout=self._policy.send_timeout)


def _leaser(
    notification: Notification, policy: OutboxPolicy
) -> Callable[[apsw.Connection], Notification | None]:
    def lease(conn: apsw.Connection) -> Notification | None:
        return outbox.lease(
            conn, notification, time.time(), lease_seconds=policy.lease_seconds,
            max_attempts=policy.max_attempts,
        )  # fmt: skip

    return lease


def _postponer(notification: Notification, delay: float) -> Callable[[apsw.Connection], None]:
    def postpone(conn: apsw.Connection) -> None:
        outbox.postpone(
            conn, notification, time.time() + delay, "the connection did not take the event"
        )

    return postpone


def _backoff(policy: OutboxPolicy, attempts: int) -> float:
    base = min(policy.max_backoff_seconds, policy.backoff_seconds * 2.0 ** max(0, attempts - 1))
    return float(base * random.uniform(0.5, 1.0))


class DestinationDesk:
    """One DestinationActor per controller with something to deliver, and their clock."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Awaitable[Any]],
        sink: Callable[[str], EventSink | None],
        policy: OutboxPolicy,
    ) -> None:
        self._supervisor = supervisor
        self._store = store
        self._reader = reader
        self._sink = sink
        self._policy = policy
        self._wanted: set[str] = set()
        self._due: dict[str, float] = {}  # wall clock; unknown (absent) counts as due now
        self._kick = trio.Event()

    def wake(self, controller_id: str) -> None:
        """News for ``controller_id``; never blocks (the clock starts its actor if needed)."""
        self._wanted.add(controller_id)
        self._kick.set()

    def _note_due(self, controller_id: str, when: float) -> None:
        """A Destination's next due time (a lease or backoff running out), from its last look."""
        self._due[controller_id] = when

    async def run(self, *, poll: float = 0.5) -> None:
        """Start actors on demand; wake one on news, or every ``poll`` s once it is due.

        Between those, an idle Destination costs nothing: no store read.
        """
        waiting: list[str] = await self._reader(outbox.controllers_waiting)
        self._wanted.update(waiting)
        while True:
            wanted, self._wanted = self._wanted, set()
            new = wanted - set(self._supervisor.child_keys())
            if new:
                # A burst of hellos wakes controllers most of which have nothing waiting: one
                # read finds those that do. Every wake comes after its news is committed, so
                # news this read misses wakes the controller again.
                found = await self._reader(partial(outbox.waiting_among, controller_ids=new))
                wanted -= new - found
            for controller_id in wanted:
                await self._ensure(controller_id)
            now = time.time()
            for key in self._supervisor.child_keys():
                if key in wanted or self._due.get(key, now) <= now:
                    with suppress(MailboxFull, ActorStopped):
                        self._supervisor.ref(key).tell(Wake())
            with trio.move_on_after(poll):
                await self._kick.wait()
            self._kick = trio.Event()

    async def _ensure(self, controller_id: str) -> None:
        if controller_id in self._supervisor.child_keys():
            return
        await self._supervisor.start_child(
            ChildSpec(
                key=controller_id,
                start=lambda: DestinationActor(
                    controller_id, store=self._store, reader=self._reader, sink=self._sink,
                    policy=self._policy, report=self._note_due,
                ),
                restart=Restart.PERMANENT,
            )
        )  # fmt: skip
