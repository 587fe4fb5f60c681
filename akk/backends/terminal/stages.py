"""What a step in flight records: each stage after its keys, and how an unproven one ends.

Each function is one store transaction, made after keys the step already
sent: `advance` records the dispatch's next stage; `settle_task` and
`abort_task` end a composer message whose keys failed or whose text was never
proven (no Enter); `answer_uncertain` ends an answer whose effect was not
seen. None of them ever leads to a key sent again.
"""

from __future__ import annotations

import time

import apsw

from akk.actors.store import transact
from akk.backends.contract import AnswerReceipt
from akk.backends.terminal.steps import TaskReceipt
from akk.runtime.actor import ActorRef
from akk.store import dispatches, turns
from akk.store.dispatches import Dispatch, Stage
from akk.store.turns import TurnState


async def advance(
    store: ActorRef, dispatch: Dispatch, stage: Stage, reason: str | None = None
) -> Dispatch:
    """Record ``dispatch``'s next stage (its own transaction)."""
    return await transact(store, lambda conn: dispatches.advance(conn, dispatch, stage, reason))


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

    return await transact(store, record)


async def abort_task(store: ActorRef, receipt: TaskReceipt, dispatch: Dispatch) -> TaskReceipt:
    """End a task whose typed text the composer never showed: aborted, its Turn failed.

    AKK pressed no Enter and deletes nothing: the text stays in the pane for
    the person there.
    """
    now = time.time()

    def abort(conn: apsw.Connection) -> TaskReceipt:
        aborted = dispatches.advance(conn, dispatch, Stage.ABORTED, "composer_mismatch")
        fresh = turns.get(conn, receipt.turn.turn_id)
        assert fresh is not None
        failed = turns.settle(
            conn,
            fresh,
            TurnState.FAILED,
            now=now,
            reason="composer_mismatch",
            summary="the composer did not show exactly the task after typing; AKK "
            "pressed no Enter and left the text in the pane for the person there",
        )
        return TaskReceipt(failed, aborted, receipt.seq, None)

    return await transact(store, abort)


async def answer_uncertain(
    store: ActorRef, dispatch: Dispatch, why: str, stage: Stage = Stage.UNCERTAIN
) -> AnswerReceipt:
    """Record the step as uncertain (or aborted before any submitting key): never retried."""
    now = time.time()

    def record(conn: apsw.Connection) -> Dispatch:
        done = dispatches.advance(conn, dispatch, stage, why)
        turns.answer_uncertain(conn, done, why, now)
        return done

    return AnswerReceipt(await transact(store, record), proven=False, why=why)
