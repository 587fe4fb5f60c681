"""A StoreActor whose one worker is held by a write: a disk that stalls."""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import apsw
import trio

from akk.actors.store import StoreActor, transact
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor


@asynccontextmanager
async def held_store(db: Path) -> AsyncIterator[tuple[ActorRef, threading.Event]]:
    """A running StoreActor on ``db`` whose one worker is held by a write until the event
    it yields is set (a disk that stalls): every transaction asked meanwhile queues."""
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    release, holding = threading.Event(), threading.Event()

    def stall(conn: apsw.Connection) -> None:
        holding.set()
        release.wait()

    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        store = root.ref("store")
        nursery.start_soon(functools.partial(transact, store, stall, timeout=math.inf))
        await trio.to_thread.run_sync(holding.wait)
        try:
            yield store, release
        finally:
            release.set()  # a test that failed leaves no worker held
        assert root.stats.crashes.get("store", 0) == 0
        nursery.cancel_scope.cancel()
