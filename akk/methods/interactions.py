"""The interaction methods: `approve` and `respond_interaction`.

Each runs in its connection's task (rank CONNECTION). Before the Turn's
backend is asked for the one input-bearing step, everything a controller can
get wrong is refused here with a reason and a next step (zero keys): the
owner, the Turn, the interaction and the controller's offer (`status` first).
The backend (`akk.backends`) checks the fence and what the agent asks now, and
a refusal there sends nothing either. Every call leaves its audit receipt;
while the store cannot write, a refusal becomes the store's (``internal``,
nothing sent), and an answer that went out keeps its own outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from akk.actors.store import transact
from akk.backends.contract import no_prompt_left
from akk.methods.common import MethodContext
from akk.protocol.errors import Reason, RpcError
from akk.store import audit, interactions, turns
from akk.store.credentials import OPERATORS
from akk.store.database import StoreUnwritable
from akk.store.turns import Turn

log = logging.getLogger("akk.methods")


class InteractionCalls:
    def __init__(self, ctx: MethodContext) -> None:
        self._ctx = ctx

    async def approve(self, controller_id: str, params: dict[str, Any]) -> dict[str, Any]:
        detail = {"decision": params["decision"]}
        return await self._audited(controller_id, "approve", params, detail, self._approve)

    async def respond_interaction(
        self, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        # How many answers of which kind: never their text or chosen options.
        detail = {
            "answers": [a.get("response_kind") for a in params["answers"]],
            "delivery_mode": params.get("delivery_mode"),
        }
        return await self._audited(
            controller_id, "respond_interaction", params, detail, self._respond_interaction
        )

    async def _audited(
        self,
        controller_id: str,
        action: str,
        params: dict[str, Any],
        detail: dict[str, Any],
        call: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """Run one answer call and leave its audit receipt (who, which interaction, outcome).

        The receipt joins the Turn's trail only when the caller may answer it (its
        owner, or the operator); a call on a Turn that is not the caller's (or does
        not exist) is the caller's own row, the ids it named kept in its detail.
        """
        outcome, interaction_id = "internal", params.get("interaction_id")
        try:
            result = await call(controller_id, params)
            outcome, interaction_id = result["outcome"], result["interaction_id"]
            return result
        except RpcError as exc:
            outcome = exc.reason.value
            raise
        finally:
            turn_id: str = params["turn_id"]

            def record(conn: Any) -> None:
                turn = turns.get(conn, turn_id)
                # The operator's answer joins the Turn's trail too, under the operator's name.
                mine = turn is not None and turn.answerable_by(controller_id)
                owner = turn.controller_id if turn is not None and mine else controller_id
                named = {"turn_id": turn_id, "interaction_id": interaction_id}
                audit.record(
                    conn, at=time.time(), actor=controller_id, action=action, outcome=outcome,
                    controller_id=owner,
                    turn_id=turn_id if mine else None,
                    interaction_id=interaction_id if mine else None,
                    detail=detail | {"outcome": outcome} | ({} if mine else {"named": named}),
                )  # fmt: skip

            with trio.CancelScope(shield=True):
                try:
                    await transact(self._ctx.store, record)
                except StoreUnwritable as exc:
                    if outcome not in _WENT_OUT:
                        raise  # nothing was sent: the store's refusal says why and what next
                    # The answer went out (or may have): its outcome is the caller's to hear.
                    log.warning("%s on %s: receipt not recorded: %s", action, turn_id, exc)

    async def _approve(self, controller_id: str, params: dict[str, Any]) -> dict[str, Any]:
        turn = await self._open_turn(controller_id, params["turn_id"])
        row = await self._ctx.reader.run(
            lambda conn: interactions.offered_to(conn, turn.turn_id, controller_id, "permission")
        )
        if row is None:
            manual = await self._ctx.reader.run(lambda conn: _manual_permission(conn, turn.turn_id))
            if manual is not None:
                raise _needs_a_person(manual, f"the permission prompt of turn {turn.turn_id}")
            raise RpcError(
                Reason.STATUS_REQUIRED,
                f"this controller has not seen a permission prompt of turn {turn.turn_id}; call "
                "status for it first, then approve what it shows",
            )
        value: str = params["decision"]
        return await self._ctx.backends.of(turn).approve(turn, row, controller_id, value)

    async def _respond_interaction(
        self, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        next_turn = params.get("delivery_mode") == "queue_next_turn"
        turn = await self._open_turn(controller_id, params["turn_id"], next_turn=next_turn)
        interaction_id: str = params["interaction_id"]
        row = await self._ctx.reader.run(lambda conn: interactions.get(conn, interaction_id))
        if row is None or row.turn_id != turn.turn_id:
            raise RpcError(
                Reason.NOT_FOUND,
                f"turn {turn.turn_id} has no interaction {interaction_id[:80]!r} (ids change "
                "whenever the prompt does); call status and answer the interaction it shows",
            )
        if row.public().get("state") == "manual_required":
            raise _needs_a_person(row, f"interaction {interaction_id} of turn {turn.turn_id}")
        return await self._ctx.backends.of(turn).respond(turn, row, controller_id, params)

    # -- the shared path

    async def _open_turn(
        self, controller_id: str, turn_id: str, *, next_turn: bool = False
    ) -> Turn:
        """The caller's own Turn, open; or settled but not closed for a next-turn answer."""
        turn = await self._ctx.reader.run(lambda conn: turns.get(conn, turn_id))
        if turn is None:
            raise RpcError(
                Reason.NOT_FOUND, f"no turn {turn_id[:80]!r}; list shows this controller's turns"
            )
        if turn.controller_id != controller_id and controller_id not in OPERATORS:
            raise RpcError(
                Reason.NOT_OWNER,
                f"turn {turn_id} belongs to another controller; only its owner (or the operator) "
                "may answer its prompts",
            )
        if turn.is_watch:
            raise RpcError(
                Reason.MANUAL_REQUIRED,
                f"{turn_id} is a Watch: it observes a task a person started and never sends "
                "input; answer at the terminal (status shows the prompt)",
            )
        refused = no_prompt_left(turn)
        if refused is not None and not (next_turn and turn.closed_at is None):
            raise RpcError(refused.reason, refused.message)
        return turn


_WENT_OUT = frozenset({"dispatched", Reason.RESPONSE_UNCERTAIN.value})
"""Outcomes of an answer whose input went out (or may have): never hidden by a lost receipt."""


def _needs_a_person(row: interactions.Interaction, what: str) -> RpcError:
    """The refusal of an answer to ``row``, a manual prompt: never offered, so no status
    could make it answerable; it says who must act."""
    reason = row.public().get("manual_reason") or "not answerable by AKK"
    return RpcError(
        Reason.MANUAL_REQUIRED,
        f"{what} needs a person ({reason}); AKK sends nothing for it. Answer it where the "
        "agent runs, or cancel the Turn",
    )


def _manual_permission(conn: Any, turn_id: str) -> interactions.Interaction | None:
    """The Turn's pending permission prompt that only a person may answer, if any."""
    return next(
        (
            row
            for row in interactions.pending_of_turn(conn, turn_id)
            if row.kind == "permission" and row.public().get("state") == "manual_required"
        ),
        None,
    )
