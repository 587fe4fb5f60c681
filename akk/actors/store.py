"""StoreActor: the single writer of the AKK store.

Every write is a function run inside one transaction on the write connection,
in a worker thread so the event loop never waits on fsync. A write that has
started always finishes (the thread is not abandoned on cancellation), so a
caller that saw the reply knows the commit is on disk.

A transaction the store cannot write (disk full, quota, I/O error, read-only)
raises `StoreUnwritable` at the asker, like any other failed transaction: the
StoreActor and its connection stay up, and the next transaction simply tries
again, so writing resumes by itself once the cause is gone. An outcome its
writer must not lose (what an agent process did with input already sent) is
written with `transact_until_written`, which waits for the store instead.

A reservation, the record that lets a step's input go out, is written with
`transact_reservation`: withdrawn while it waits in a queue too long, so
that a reservation is on disk exactly when its asker got it back.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import apsw
import attrs
import trio

from akk.runtime.actor import Actor, ActorRef, Ask, Rank
from akk.store.database import StoreUnwritable, open_store, unwritable

T = TypeVar("T")

log = logging.getLogger("akk.store")

RETRY_SECONDS = 1.0
"""How often `transact_until_written` tries a write again while the store cannot write."""

RESERVATION_PATIENCE = 10.0
"""How long `transact_reservation` waits for the store to begin a reservation."""


@attrs.frozen
class _Failed:
    """``work`` raised: the transaction rolled back; the asker gets the exception.

    A failed transaction is the caller's outcome (a CAS conflict, a constraint,
    a full disk), not a crash of the StoreActor, whose connection is still good.
    """

    error: Exception


@attrs.frozen
class Transact(Ask["T | _Failed"], Generic[T]):
    """Run ``work`` in one write transaction and reply with its result (or its failure).

    ``atomic`` False: run it on the write connection outside any transaction (a
    checkpoint of the log cannot run inside one), still in turn with every write.
    """

    work: Callable[[apsw.Connection], T]
    atomic: bool = True


class StoreActor(Actor[Transact[Any]]):
    """Owns the write connection; rebuilds it on restart."""

    rank = Rank.STORE

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: apsw.Connection | None = None

    async def started(self) -> None:
        self._conn = await trio.to_thread.run_sync(open_store, self._path)

    async def stopped(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await trio.to_thread.run_sync(conn.close)

    async def receive(self, message: Transact[Any]) -> object:
        conn = self._conn
        assert conn is not None, "started() opens the connection before any message"
        return await trio.to_thread.run_sync(
            _in_transaction, conn, message.work, self._path, message.atomic
        )


def _in_transaction(
    conn: apsw.Connection, work: Callable[[apsw.Connection], T], path: Path, atomic: bool
) -> T | _Failed:
    try:
        if atomic:
            with conn:
                result = work(conn)
        else:
            result = work(conn)
    except apsw.Error as error:
        # The errno is read here, in this thread, before the connection runs anything else.
        failed = unwritable(path, error, conn.system_errno)
        if failed is None:
            return _Failed(error)
        failed.__cause__ = error
        return _Failed(failed)
    except Exception as error:
        return _Failed(error)
    return result


async def transact(
    store: ActorRef[Any],
    work: Callable[[apsw.Connection], T],
    *,
    timeout: float = 10.0,
    atomic: bool = True,
) -> T:
    """Ask the StoreActor to run ``work`` in one transaction; return its result.

    Whatever ``work`` raises is raised here, after the transaction rolled back;
    a store that cannot write raises `StoreUnwritable` (nothing was committed).
    ``atomic`` False: outside any transaction (see `Transact`).
    """
    result = await store.ask(Transact(work, atomic), timeout=timeout)
    if isinstance(result, _Failed):
        raise result.error
    return result


async def transact_until_written(
    store: ActorRef[Any],
    work: Callable[[apsw.Connection], T],
    *,
    what: str,
    retry_seconds: float | None = None,
    waiting: Callable[[StoreUnwritable | None], None] | None = None,
) -> T:
    """`transact` ``work`` until the store takes it: for an outcome that must not be lost.

    While the store cannot write (`StoreUnwritable`) the caller holds the outcome
    and waits here, trying again every ``retry_seconds`` (None: `RETRY_SECONDS`;
    logged once, as ``what``), instead of crashing and losing it; any other
    failure is raised as by `transact`. ``work`` runs afresh at every try, so it
    reads the rows it changes in its own transaction. ``waiting`` is told each
    failure while it waits, and None once the store took it.
    """
    warned = False
    while True:
        try:
            written = await transact(store, work)
        except StoreUnwritable as exc:
            if waiting is not None:
                waiting(exc)
            if not warned:
                log.warning("%s: not recorded yet, tried again until the store writes: %s",
                            what, exc)  # fmt: skip
                warned = True
        else:
            if waiting is not None and warned:
                waiting(None)
            return written
        await trio.sleep(RETRY_SECONDS if retry_seconds is None else retry_seconds)


async def transact_reservation(
    store: ActorRef[Any],
    work: Callable[[apsw.Connection], T],
    *,
    patience: float = RESERVATION_PATIENCE,
) -> T:
    """`transact` a reservation ``work``: the record that lets a step's input go out.

    Withdrawn if the store has not begun it within ``patience`` s (a disk that
    stalls, or a backlog of writes ahead of it): it raises `StoreUnwritable`,
    and nothing of it is written, then or later. A plain `transact` timing out
    would leave it queued: written after its asker gave up, it would stand for
    input that never went, which a restart must call uncertain. An asker
    cancelled while it queues withdraws it too. Once begun, it is waited for to
    its end, whose reply says whether it is on disk.
    """
    gate = _Gate()

    def gated(conn: apsw.Connection) -> T:
        if not gate.begin():
            raise _Withdrawn()  # its asker gave up on it: nothing is written
        return work(conn)

    reply: list[T] = []
    failure: list[Exception] = []
    try:
        async with trio.open_nursery() as nursery:

            async def give_up() -> None:
                await trio.sleep(patience)
                if gate.withdraw():
                    nursery.cancel_scope.cancel()

            nursery.start_soon(give_up)
            try:
                reply.append(await transact(store, gated, timeout=math.inf))
            except Exception as exc:  # raised here as by `transact`, not in a nursery's group
                failure.append(exc)
            nursery.cancel_scope.cancel()
    finally:
        gate.withdraw()  # its asker cancelled (an actor stopping) while it queued: never begun
    if failure:
        raise failure[0]
    if not reply:
        raise StoreUnwritable(
            f"the store did not begin this step's reservation within {patience:g} s (a disk "
            "that stalls, or a backlog of writes ahead of it)",
            "it was withdrawn unwritten. Try again once the store keeps up (`akk doctor` "
            "shows the state directory and its free space)",
        )
    return reply[0]


class _Withdrawn(Exception):
    """A reservation run after its asker withdrew it (`transact_reservation`)."""


@attrs.define
class _Gate:
    """Whether a queued reservation may still begin: asked by the store's worker thread as
    it begins the work, and by its asker once its patience ran out; the first decides."""

    _lock: threading.Lock = attrs.Factory(threading.Lock)
    _state: str = "queued"

    def begin(self) -> bool:
        """The work begins now, unless it was withdrawn (False)."""
        return self._decide("began")

    def withdraw(self) -> bool:
        """The work is withdrawn now, unless it began (False)."""
        return self._decide("withdrawn")

    def _decide(self, state: str) -> bool:
        with self._lock:
            if self._state != "queued":
                return False
            self._state = state
            return True
