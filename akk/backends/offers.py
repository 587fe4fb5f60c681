"""The offer check every backend makes before an answer: this controller's open, fresh offer.

An answer without one is refused with a protocol reason and a next step, and
nothing reaches the agent.
"""

from __future__ import annotations

import time

from akk.protocol.errors import Reason, RpcError
from akk.store import interactions
from akk.store.interactions import Interaction, Offer, OfferState


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


def offer_refusal(exc: interactions.OfferUnusable) -> tuple[Reason, str]:
    """The protocol reason and next step for an offer that cannot be used."""
    if exc.answered:
        return Reason.CONFLICT, (
            f"{exc}; an answered prompt never takes input again. Call status for the current "
            "interaction"
        )
    return Reason.STATUS_REQUIRED, f"{exc}: call status first, then answer what it shows"
