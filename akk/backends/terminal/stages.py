"""What a step in flight records: each stage after its keys, and how an unproven one ends.

Each function is one store transaction, made after keys the step already
sent: `advance` records the dispatch's next stage; `settle_task` and
`abort_task` end a composer message whose keys failed or whose text was never
proven (no Enter); `answer_uncertain` ends an answer whose effect was not
seen. None of them ever leads to a key sent again.

A store that cannot write (`StoreUnwritable`) makes each of them raise
`StageUnrecorded`: the step's keys (some of them, at least) went out, so it
is not refused; it is left open as last recorded, and settled like a step a
crash cut off once the store writes again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import apsw

from akk.actors.store import transact
from akk.backends.contract import AnswerReceipt, Refusal
from akk.backends.terminal.steps import TaskReceipt
from akk.protocol.errors import Reason
from akk.runtime.actor import ActorRef
from akk.store import dispatches, turns
from akk.store.database import StoreUnwritable
from akk.store.dispatches import Dispatch, Stage
from akk.store.turns import TurnState

T = TypeVar("T")


class StageUnrecorded(Exception):
    """A step's keys went out and the store could not record what followed (`StoreUnwritable`).

    ``dispatch`` is the step as last recorded: still open, it is settled like a
    step a crash cut off (`turns.orphaned`), and its Turn from the agent's own
    evidence. It is never retried: the keys may have been typed.
    """

    def __init__(self, dispatch: Dispatch, cause: StoreUnwritable) -> None:
        self.dispatch, self.cause = dispatch, cause
        super().__init__(f"dispatch {dispatch.dispatch_id} at {dispatch.stage}: {cause}")

    def refusal(self) -> Refusal:
        """What the step's caller hears: ``response_uncertain``, naming the store and its cause."""
        cause = self.cause
        return Refusal(
            Reason.RESPONSE_UNCERTAIN,
            f"{cause.problem} after this step's keys went out: they may have been typed, and "
            "AKK will not type them again. Once the store writes again "
            f"({cause.next_step}), the Turn is settled from what the agent shows; call status",
        )


async def _record(store: ActorRef, dispatch: Dispatch, work: Callable[[apsw.Connection], T]) -> T:
    """Run ``work`` (a stage of ``dispatch``, after its keys) in one transaction."""
    try:
        return await transact(store, work)
    except StoreUnwritable as exc:
        raise StageUnrecorded(dispatch, exc) from exc


async def advance(
    store: ActorRef, dispatch: Dispatch, stage: Stage, reason: str | None = None
) -> Dispatch:
    """Record ``dispatch``'s next stage (its own transaction)."""
    return await _record(
        store, dispatch, lambda conn: dispatches.advance(conn, dispatch, stage, reason)
    )


async def settle_task(
    store: ActorRef, receipt: TaskReceipt, stage: Stage, reason: str, state: TurnState
) -> TaskReceipt:
    """End the task's dispatch at ``stage`` and put its Turn in ``state``, for ``reason``."""

    def record(conn: apsw.Connection) -> TaskReceipt:
        dispatch = dispatches.advance(conn, receipt.dispatch, stage, reason)
        fresh = turns.get(conn, receipt.turn.turn_id)
        assert fresh is not None
        turn = turns.update(conn, fresh, state=state, reason=reason)
        return TaskReceipt(turn, dispatch, receipt.seq, None)

    return await _record(store, receipt.dispatch, record)


async def abort_task(
    store: ActorRef,
    receipt: TaskReceipt,
    dispatch: Dispatch,
    reason: str = "composer_mismatch",
    summary: str = "the composer did not show exactly the task after typing; AKK pressed no "
    "Enter and left the text in the pane for the person there",
) -> TaskReceipt:
    """End a task AKK pressed no Enter for: aborted, its Turn failed for ``reason``.

    By default its typed text the composer never showed: AKK deletes nothing, the
    text stays in the pane for the person there.
    """
    now = time.time()

    def abort(conn: apsw.Connection) -> TaskReceipt:
        aborted = dispatches.advance(conn, dispatch, Stage.ABORTED, reason)
        fresh = turns.get(conn, receipt.turn.turn_id)
        assert fresh is not None
        failed = turns.settle(
            conn, fresh, TurnState.FAILED, now=now, reason=reason, summary=summary
        )
        return TaskReceipt(failed, aborted, receipt.seq, None)

    return await _record(store, dispatch, abort)


async def answer_uncertain(
    store: ActorRef, dispatch: Dispatch, why: str, stage: Stage = Stage.UNCERTAIN
) -> AnswerReceipt:
    """Record the step as uncertain (or aborted before any submitting key): never retried."""
    now = time.time()

    def record(conn: apsw.Connection) -> Dispatch:
        done = dispatches.advance(conn, dispatch, stage, why)
        turns.answer_uncertain(conn, done, why, now)
        return done

    return AnswerReceipt(await _record(store, dispatch, record), proven=False, why=why)
