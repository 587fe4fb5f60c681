"""A terminal cancel cut off after its interrupt key was recorded (`enter_sent`).

AKK died at `interrupt_recorded`: the Escape went out and its stage is stored, but the
follower that awaited the interruption (its `_cancel`, in memory) is gone. A restart's
reconcile leaves such a step to the Turn (`turns.orphaned`). The restarted follower must
await it again: within `CANCEL_BOUND` the interruption shows (the cancel is `accepted`
with the Turn's `cancelled`) or the cancel ends `uncertain`; either way the terminal
takes an answer again. The follower and the store are real; its TurnActor is a
stand-in that commits a settle as the actor does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest
import trio
import trio.testing

from akk.actors.store import StoreActor, transact
from akk.actors.terminal_board import TerminalBoard
from akk.backends.terminal.follow import CANCEL_BOUND, TerminalFollower
from akk.profiles.observation import State
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.fingerprint import IdMinter
from akk.store import dispatches, turns
from akk.store.database import open_store
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState
from tests.store_rows import add_ctl_and_t1


@attrs.define
class _Control:
    """The TurnActor as the follower uses it: a settle commits through `settling`."""

    store: ActorRef
    follower: TerminalFollower
    turn: Turn | None = None
    settled: list[TurnState] = attrs.field(factory=list)

    async def update(self, **changes: object) -> Turn:
        raise AssertionError(changes)

    async def settle(self, state: TurnState, reason: str | None, summary: str,
                     **_: Any) -> None:  # fmt: skip
        assert self.turn is not None
        turn_id, follower = self.turn.turn_id, self.follower

        def commit(conn: apsw.Connection) -> None:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            follower.settling(conn, fresh, state, time.time())
            turns.settle(conn, fresh, state, now=time.time(), reason=reason, summary=summary)

        await transact(self.store, commit)
        self.settled.append(state)


@attrs.frozen
class _Restarted:
    follower: TerminalFollower
    control: _Control
    reader: StoreReader
    store: ActorRef
    cancel: Dispatch


@asynccontextmanager
async def _restarted(tmp_path: Path, recorded_ago: float) -> AsyncIterator[_Restarted]:
    """A running Turn on t1 whose cancel's Escape was recorded ``recorded_ago`` seconds ago
    by a server that then died; a new follower starts on it (as after `akk serve` restarts)."""
    db = tmp_path / "akk.sqlite3"
    conn = open_store(db)
    add_ctl_and_t1(conn)
    now = time.time()
    with conn:
        turn = turns.insert(
            conn, controller_id="ctl", client_request_id="r", terminal_id="t1",
            request_sha256="x" * 64, request_chars=1, evidence_status="unknown", evidence=None,
            evidence_limit=None, inactivity_seconds=600, lifetime_seconds=3600, now=now,
        )  # fmt: skip
        turn = turns.update(conn, turn, state=TurnState.RUNNING)
        cancel = dispatches.reserve(
            conn, controller_id="ctl", turn_id=turn.turn_id, terminal_id="t1",
            kind=Kind.CANCEL, typing=None, screen_seq=7, now=now - recorded_ago,
        )  # fmt: skip
        cancel = dispatches.advance(conn, cancel, Stage.ENTER_SENT)
        conn.execute("UPDATE dispatches SET updated_at = ?", (now - recorded_ago,))
        # The restart's reconcile leaves a cancel whose key went out to its Turn.
        assert not turns.orphaned(conn, cancel, "interrupted_by_restart", now)
    conn.close()
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    reader = StoreReader(db)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            store = root.ref("store")
            follower = TerminalFollower(
                turn.turn_id, store=store, reader=reader.run, board=TerminalBoard(),
                ids=IdMinter(b"k" * 32), enter_at=None, accept_seconds=60,
            )  # fmt: skip
            control = _Control(store, follower)
            follower.attach(control)
            turn_id = turn.turn_id

            def load(conn: apsw.Connection) -> Turn:
                fresh = turns.get(conn, turn_id)
                assert fresh is not None
                follower.read(conn, fresh)
                return fresh

            control.turn = await reader.run(load)
            follower.started(control.turn)
            yield _Restarted(follower, control, reader, store, cancel)
            nursery.cancel_scope.cancel()
    finally:
        reader.close()


async def _answerable(lab: _Restarted) -> None:
    """An answer can be reserved on the terminal again (no step is left open on it)."""

    def reserve(conn: apsw.Connection) -> Dispatch:
        return dispatches.reserve(
            conn, controller_id="ctl", turn_id=lab.cancel.turn_id or "", terminal_id="t1",
            kind=Kind.APPROVAL, typing=None, screen_seq=9, now=time.time(),
        )  # fmt: skip

    assert (await transact(lab.store, reserve)).stage is Stage.RESERVED


async def _cancel(lab: _Restarted) -> Dispatch:
    found = await lab.reader.run(lambda conn: dispatches.get(conn, lab.cancel.dispatch_id))
    assert isinstance(found, Dispatch)
    return found


@pytest.mark.parametrize("recorded_ago", [0.0, 4.0, 3600.0])
async def test_a_dropped_interrupt_ends_the_cancel_uncertain_within_the_bound(
    tmp_path: Path, mock_clock: trio.testing.MockClock, recorded_ago: float
) -> None:
    with trio.fail_after(30):
        async with _restarted(tmp_path, recorded_ago) as lab:
            # The agent works on: the interruption does not show.
            await lab.follower._check_outcome(None, State.WORKING)
            left = max(CANCEL_BOUND - recorded_ago, 0.0)
            if left > 0:
                assert (await _cancel(lab)).stage is Stage.ENTER_SENT  # still awaited
                mock_clock.jump(left)
                await lab.follower._check_outcome(None, State.WORKING)
            cancel = await _cancel(lab)
            assert (cancel.stage, cancel.reason) == (Stage.UNCERTAIN, "interruption_not_shown")
            assert lab.control.settled == []
            turn = await lab.reader.run(lambda conn: turns.get(conn, lab.cancel.turn_id or ""))
            assert isinstance(turn, Turn)
            assert (turn.state, turn.reason) == (TurnState.RUNNING, "cancel_uncertain")
            await _answerable(lab)


async def test_an_interruption_shown_after_the_restart_settles_the_cancel(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(30):
        async with _restarted(tmp_path, 1.0) as lab:
            lab.follower._last_seq = 0  # the first screen this follower read: idle again
            await lab.follower._check_outcome(None, State.IDLE)
            assert lab.control.settled == [TurnState.CANCELLED]
            assert (await _cancel(lab)).stage is Stage.ACCEPTED
            await _answerable(lab)
