"""`retry_callback`: one more delivery of one persisted notification of one exact record.

A notification the outbox gave up on (``retryable_failure``, its automatic
attempts used up) can be sent once more, unchanged: the same body, controller
and ``event_id``, its attempts counted on. Only that state may be retried; an
accepted, in-flight or withdrawn notification, one of a closed or unwatched
record, an outcome of a round a later one superseded (a renew's revival, a
respond), or a wake-up about a question that was answered or left the screen is
refused with zero side effects. The record is named by its exact id; nothing
here ever picks "the latest" notification when several could be meant.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import apsw

from akk.actors.store import transact
from akk.methods.common import MethodContext, owned
from akk.protocol.errors import Reason, RpcError
from akk.protocol.schema import WAKE_UP_KINDS
from akk.store import audit, interactions, outbox, turns
from akk.store.interactions import Interaction, InteractionState
from akk.store.outbox import Notification
from akk.store.turns import Turn, TurnState

OUTCOME_KINDS = frozenset(state.value for state in TurnState if state.settled)
"""A round's outcome: superseded, so never retried, once a later round started."""

RETRYABLE = "retryable_failure"

LISTED = 20
"""Most candidates named in one `invalid_params` message (it stays one bounded frame)."""


class CallbackCalls:
    """`retry_callback`, run in the caller's connection task (rank CONNECTION)."""

    def __init__(self, ctx: MethodContext) -> None:
        self._ctx = ctx

    async def retry(
        self, controller_id: str, operator: bool, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Make one ``retryable_failure`` notification of the record due again, once.

        Raises RpcError (not_found, not_owner, closed, conflict, prompt_changed,
        invalid_params) with a next step; a refused call changed nothing.
        """
        # A managed Send's turn_id is also its watch_id: one id space.
        record_id: str = params.get("watch_id") or params["turn_id"]
        wanted: str | None = params.get("notification_id")
        found, notes = await self._ctx.reader.run(
            lambda conn: (turns.get(conn, record_id), outbox.of_turn(conn, record_id))
        )
        turn = owned(found, record_id, controller_id, operator)
        _check_open(turn)
        chosen = _choose(record_id, notes, wanted)
        _check_retryable(chosen)
        _check_current(turn, chosen)
        asked = await self._still_asked(turn, chosen) if chosen.kind in WAKE_UP_KINDS else None
        now = time.time()

        def retry(conn: apsw.Connection) -> Notification:
            # Everything read above is checked again in this transaction; the
            # screen was checked just now, on the event loop, where the board lives.
            fresh_turn = turns.get(conn, turn.turn_id)
            assert fresh_turn is not None
            _check_open(fresh_turn)
            fresh = outbox.get(conn, chosen.notification_id)
            assert fresh is not None
            _check_retryable(fresh)
            _check_current(fresh_turn, fresh)
            if asked is not None:
                row = interactions.get(conn, asked.interaction_id)
                if row is None or row.state is not InteractionState.PENDING:
                    raise _answered(fresh)
            retried = outbox.retry(conn, fresh, now)
            audit.record(
                conn, at=now, actor=controller_id, action="retry_callback", outcome="ok",
                controller_id=retried.controller_id, turn_id=turn.turn_id,
                interaction_id=None if asked is None else asked.interaction_id,
                detail={
                    "notification_id": retried.notification_id, "event_id": retried.event_id,
                    "kind": retried.kind, "attempts": retried.attempts,
                    "retries": retried.retries,
                },
            )  # fmt: skip
            return retried

        retried = await transact(self._ctx.store, retry)
        self._ctx.destinations.wake(retried.controller_id)
        return {
            "notification_id": retried.notification_id,
            "event_id": retried.event_id,
            "kind": retried.kind,
            "state": retried.state,
            "attempts": retried.attempts,
            "retries": retried.retries,
        }

    async def _still_asked(self, turn: Turn, notification: Notification) -> Interaction:
        """The interaction ``notification`` is about, if it is still pending and still asked."""
        shown = notification.event().get("interaction") or {}
        interaction_id = shown.get("interaction_id") if isinstance(shown, dict) else None
        row = None
        if isinstance(interaction_id, str):
            row = await self._ctx.reader.run(lambda conn: interactions.get(conn, interaction_id))
        if row is None or row.state is not InteractionState.PENDING:
            raise _answered(notification)
        await self._ctx.backends.of(turn).still_asked(turn, row, notification.notification_id)
        return row


def _check_open(turn: Turn) -> None:
    if turn.closed_at is not None or turn.unwatched_at is not None:
        how = "closed" if turn.closed_at is not None else "unwatched"
        raise RpcError(
            Reason.CLOSED,
            f"{turn.turn_id} is {how}; the notifications of a {how} record are not retried. "
            "Start a new send or watch to be notified again",
        )


def _choose(record_id: str, notes: list[Notification], wanted: str | None) -> Notification:
    """The notification the call names, or the record's one ``retryable_failure``."""
    if wanted is not None:
        for notification in notes:
            if notification.notification_id == wanted:
                return notification
        raise RpcError(
            Reason.NOT_FOUND,
            f"{record_id} has no notification {wanted[:80]!r}; call retry_callback without "
            "notification_id to hear which of its notifications can be retried",
        )
    failed = [n for n in notes if n.state == RETRYABLE]
    if len(failed) == 1:
        return failed[0]
    if failed:
        named = ", ".join(f"{n.notification_id} ({n.kind})" for n in failed[:LISTED])
        more = f" and {len(failed) - LISTED} more" if len(failed) > LISTED else ""
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"{record_id} has {len(failed)} notifications in {RETRYABLE}: {named}{more}; "
            "pass the notification_id of the one to retry",
        )
    states = Counter(n.state for n in notes)
    held = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
    raise RpcError(
        Reason.NOT_FOUND,
        f"{record_id} has no notification in {RETRYABLE}"
        + (f" (its notifications: {held})" if held else " (it has no notifications)")
        + "; only one whose delivery failed can be retried. Status shows the record",
    )


def _check_retryable(notification: Notification) -> None:
    name, state = notification.notification_id, notification.state
    if state == RETRYABLE:
        return
    if state == "accepted":
        why = (
            "was already accepted (acked) by its controller; there is nothing to retry (an ack "
            "does not prove a person saw it downstream, and a retry would not either)"
        )
    elif state in ("pending", "delivering"):
        why = (
            f"is {state}: it is still being delivered; wait for its ack, or for it to end in "
            f"{RETRYABLE}, before retrying it"
        )
    elif state == "withdrawn":
        why = "was withdrawn (its record no longer wants it); call status for the record's state"
    else:
        why = f"is {state}; only a notification in {RETRYABLE} can be retried"
    raise RpcError(Reason.CONFLICT, f"notification {name} {why}")


def _check_current(turn: Turn, notification: Notification) -> None:
    """An outcome of an earlier round is superseded: a later round (a renew's revival, a
    respond) followed it, so it no longer says how the record stands."""
    if notification.kind in OUTCOME_KINDS and notification.round < turn.round:
        raise RpcError(
            Reason.CONFLICT,
            f"notification {notification.notification_id} ({notification.kind}) is about round "
            f"{notification.round} of {turn.turn_id}, superseded by round {turn.round}; it is "
            "not sent again. Call status for the record's current state",
        )


def _answered(notification: Notification) -> RpcError:
    return RpcError(
        Reason.PROMPT_CHANGED,
        f"notification {notification.notification_id} is about a question that was answered "
        "or left the screen; it is obsolete and will not be sent again. Call status to see "
        "what the terminal asks now",
    )
