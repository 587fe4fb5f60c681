"""The offer check every backend makes before an answer: this controller's open, fresh offer.

An answer without one is refused with a protocol reason and a next step, and
nothing reaches the agent. `status` records the offer; while the store cannot
write it still shows what is asked, as not answerable now (`unoffered`).
"""

from __future__ import annotations

import time
from typing import Any

import apsw

from akk.actors.store import transact, transact_reservation
from akk.backends.contract import Refusal
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorRef
from akk.store import dispatches, interactions, turns
from akk.store.database import StoreUnwritable
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.interactions import Interaction, Offer, OfferState
from akk.store.reader import StoreReader


def check_offer(row: Interaction, offer: Offer | None, still_there: bool) -> None:
    """Refuse an answer without this controller's open, fresh offer of ``row`` (zero input)."""
    if offer is None:
        raise RpcError(
            Reason.STATUS_REQUIRED,
            f"this controller has no offer of interaction {row.interaction_id}; call "
            "status for the Turn, then answer what it shows",
        )
    if offer.state is OfferState.CONSUMED:
        raise RpcError(
            Reason.CONFLICT,
            f"this controller already answered interaction {row.interaction_id}; it never "
            "takes input again. Call status for the current interaction",
        )
    if offer.expires_at <= time.time():
        # Expiry alone does not prove the prompt died: look at the screen first.
        if still_there:
            raise RpcError(
                Reason.OFFER_EXPIRED,
                "what status showed is too old to answer; the prompt is still there: call "
                "status again, then answer",
            )
        raise RpcError(
            Reason.PROMPT_CHANGED,
            "the offer expired and the prompt it was for is no longer on screen; call status",
        )


async def unoffered(
    reader: StoreReader, projection: dict[str, Any], why: StoreUnwritable
) -> dict[str, Any]:
    """What `status` shows of an interaction whose record and offer the store could not write.

    The interaction as recorded (or ``projection``, the one shown now, if it never
    was), with ``not_answerable`` naming the store and its cause: no offer was
    made, so an answer is refused before any input until status can offer it.
    """
    interaction_id = str(projection["interaction_id"])
    row = await reader.run(lambda conn: interactions.get(conn, interaction_id))
    shown = projection if row is None else row.public()
    return shown | {
        "not_answerable": f"{why.problem}, so no offer of it could be recorded and an answer "
        f"would be refused with nothing sent; {why.next_step}, then call status again",
    }


def offer_refusal(exc: interactions.OfferUnusable) -> tuple[Reason, str]:
    """The protocol reason and next step for an offer that cannot be used."""
    if exc.answered:
        return Reason.CONFLICT, (
            f"{exc}; an answered prompt never takes input again. Call status for the current "
            "interaction"
        )
    return Reason.STATUS_REQUIRED, f"{exc}: call status first, then answer what it shows"


async def reserve_answer(
    store: ActorRef,
    *,
    controller_id: str,
    turn_id: str,
    interaction_id: str,
    offer_id: str,
    kind: Kind,
    fingerprint: bytes,
) -> Dispatch | Refusal:
    """In one transaction: take the controller's offer and reserve the answer's dispatch.

    For a backend whose prompts are requests of its process (no terminal): from this
    reservation on, the answer is never written again. A Refusal reserved nothing: an
    offer that cannot be used, or a store that cannot write (``internal``; a reservation
    that is not on disk never reaches the process).
    """
    now = time.time()

    def reserve(conn: apsw.Connection) -> Dispatch | Refusal:
        try:
            interactions.take_offer(conn, interaction_id, controller_id, offer_id, now)
        except interactions.OfferUnusable as exc:
            return Refusal(*offer_refusal(exc))
        return dispatches.reserve(
            conn, controller_id=controller_id, turn_id=turn_id, terminal_id=None, kind=kind,
            typing=None, screen_seq=None, now=now, interaction_id=interaction_id,
            offer_id=offer_id, fingerprint=fingerprint,
        )  # fmt: skip

    try:
        reserved: Dispatch | Refusal = await transact_reservation(store, reserve)
    except StoreUnwritable as exc:
        return Refusal(Reason.INTERNAL, f"{exc.problem}, so nothing was sent; {exc.next_step}")
    return reserved


async def settle_lost(
    store: ActorRef, turn_id: str, interaction_id: str, offer_id: str, why: str
) -> Refusal | None:
    """An answer's ask lost on the way (its backend actor failed or timed out after taking
    it): the refusal to give when no reservation of that offer was made (nothing was
    written); else None, its dispatch, if still open, now ``uncertain`` with its event,
    once. Shared by the backends whose actor reserves an answer before writing it."""

    def settle(conn: apsw.Connection) -> bool:
        mine = [
            d
            for d in dispatches.of_turn(conn, turn_id)
            if d.offer_id == offer_id and d.interaction_id == interaction_id
        ]
        for step in mine:
            if step.stage.open:
                found = dispatches.advance(conn, step, Stage.UNCERTAIN, why)
                turns.answer_uncertain(conn, found, why, time.time())
        return bool(mine)

    if await transact(store, settle):
        return None
    return Refusal(
        Reason.PROMPT_CHANGED, f"{why} before reserving it; nothing was sent. Call status"
    )
