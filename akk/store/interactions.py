"""Interactions and their offers: what a controller was shown, and the fence on each answer.

An interaction is one appearance of a prompt on one terminal (its fingerprint
and appearance number). Its states: ``pending`` while it may be answered,
``consumed`` once an answer was reserved for it (forever: a replay, a second
controller or a late event can never send input to it again), ``gone`` once
the screen showed it left unanswered by AKK.

An offer records that one controller called `status` and saw the interaction's
projection; an answer needs that controller's open, unexpired offer, and the
reservation consumes it by compare-and-swap in the same transaction that fences
the interaction. Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import enum
import json
import secrets
from typing import Any

import apsw
import attrs

from akk.screen.fingerprint import Appearance
from akk.store import turns
from akk.store.database import cas_update


class InteractionState(enum.StrEnum):
    PENDING = "pending"
    CONSUMED = "consumed"
    GONE = "gone"


class OfferState(enum.StrEnum):
    OPEN = "open"
    CONSUMED = "consumed"
    EXPIRED = "expired"


@attrs.frozen
class Interaction:
    interaction_id: str
    terminal_id: str | None
    """None: a server request of the Codex app-server (a backend Turn's prompt)."""
    turn_id: str | None
    kind: str
    fingerprint: bytes
    appearance: int
    profile: str
    step_index: int
    step_total: int
    projection: str
    state: InteractionState
    created_at: float
    updated_at: float
    revision: int

    @property
    def seen(self) -> Appearance:
        return Appearance(self.fingerprint, self.appearance)

    def public(self) -> dict[str, Any]:
        """The projection controllers saw, with the interaction's current state."""
        shown: dict[str, Any] = json.loads(self.projection)
        if self.state is not InteractionState.PENDING:
            shown["state"] = self.state.value
        return shown


@attrs.frozen
class Offer:
    offer_id: str
    interaction_id: str
    controller_id: str
    fingerprint: bytes
    state: OfferState
    created_at: float
    expires_at: float
    consumed_at: float | None
    updated_at: float
    revision: int


_INTERACTION_COLUMNS = [a.name for a in attrs.fields(Interaction)]
_OFFER_COLUMNS = [a.name for a in attrs.fields(Offer)]


def record(
    conn: apsw.Connection,
    *,
    interaction_id: str,
    terminal_id: str | None,
    turn_id: str | None,
    kind: str,
    seen: Appearance,
    profile: str,
    step_index: int,
    step_total: int,
    projection: dict[str, Any],
    now: float,
    announce: turns.Turn | None = None,
) -> tuple[Interaction, bool]:
    """The stored interaction with this id, written now if it is new; (row, whether new).

    ``announce``: a new interaction also writes its wake-up for that record's
    controller, in this transaction: ``approval_required`` for
    a permission, ``interaction_required`` otherwise, carrying only the
    public projection. Whoever records an appearance first (the Turn's monitor,
    or a `status` call) writes the one event. A ``manual_required`` one (a
    screen a person must handle, docs/wakeups.md) is announced the same way,
    with a summary naming the pane.
    """
    existing = get(conn, interaction_id)
    if existing is not None:
        return existing, False
    conn.execute(
        "INSERT INTO interactions (interaction_id, terminal_id, turn_id, kind, fingerprint, "
        "appearance, profile, step_index, step_total, projection, state, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
        (
            interaction_id, terminal_id, turn_id, kind, seen.fingerprint, seen.number, profile,
            step_index, step_total, json.dumps(projection), now, now,
        ),
    )  # fmt: skip
    created = get(conn, interaction_id)
    assert created is not None
    if announce is not None:
        what = "approval_required" if kind == "permission" else "interaction_required"
        turns.enqueue_event(
            conn, announce, what, now, interaction=projection, summary=_summary(projection)
        )
    return created, True


def _summary(projection: dict[str, Any]) -> str:
    if projection.get("state") == "manual_required":
        where = projection.get("pane") or "the terminal"
        return (
            f"{projection.get('kind')}: a person must handle {where} "
            f"({projection.get('manual_reason')}); AKK sends it nothing"
        )[:200]
    questions = projection.get("questions") or []
    if not questions:  # a queued async question: opening it shows its question
        return f"{projection.get('kind')}: queued; call status, then open it with answers []"
    return f"{projection.get('kind')}: {questions[0].get('prompt', '')}"[:200] + (
        "; call status, then answer"
    )


def invalidate(conn: apsw.Connection, row: Interaction, turn: turns.Turn, now: float) -> None:
    """``row`` left unanswered by AKK (a person answered it, or another prompt replaced it):
    mark it ``gone`` and tell ``turn``'s controller with one ``invalidated`` event, so a
    controller that was woken for it stops (an answer to it gets ``prompt_changed``)."""
    gone = set_state(conn, row, InteractionState.GONE)
    summary = (
        f"{gone.kind}: no longer asked; it was answered at the terminal or replaced, "
        "and nothing was sent for it. Call status for what is asked now"
    )
    turns.enqueue_event(conn, turn, "invalidated", now, interaction=gone.public(), summary=summary)


def get(conn: apsw.Connection, interaction_id: str) -> Interaction | None:
    found = _interactions(conn, "WHERE interaction_id = ?", (interaction_id,))
    return found[0] if found else None


def latest_on(conn: apsw.Connection, terminal_id: str) -> Interaction | None:
    """The newest appearance recorded on ``terminal_id`` (to continue it after a restart)."""
    found = _interactions(
        conn, "WHERE terminal_id = ? ORDER BY appearance DESC LIMIT 1", (terminal_id,)
    )
    return found[0] if found else None


def pending_of_turn(conn: apsw.Connection, turn_id: str) -> list[Interaction]:
    return _interactions(
        conn, "WHERE turn_id = ? AND state = 'pending' ORDER BY appearance", (turn_id,)
    )


def offered_to(
    conn: apsw.Connection, turn_id: str, controller_id: str, kind: str
) -> Interaction | None:
    """The ``kind`` interaction of ``turn_id`` most recently offered to ``controller_id``."""
    found = _interactions(
        conn,
        "WHERE turn_id = ? AND kind = ? AND interaction_id IN "
        "(SELECT interaction_id FROM offers WHERE controller_id = ?) "
        "ORDER BY appearance DESC LIMIT 1",
        (turn_id, kind, controller_id),
    )
    return found[0] if found else None


def set_state(conn: apsw.Connection, row: Interaction, state: InteractionState) -> Interaction:
    """Compare-and-swap the state; raises CasConflict if the row moved on."""
    cas_update(
        conn, "interactions", "interaction_id", row.interaction_id, row.revision,
        {"state": state.value},
    )  # fmt: skip
    fresh = get(conn, row.interaction_id)
    assert fresh is not None
    return fresh


def offer(
    conn: apsw.Connection,
    row: Interaction,
    controller_id: str,
    *,
    now: float,
    lifetime: float,
) -> Offer:
    """Record that ``controller_id`` saw ``row`` now: its open offer, renewed for ``lifetime``."""
    current = offer_of(conn, row.interaction_id, controller_id)
    expires = now + lifetime
    if current is not None and current.state is OfferState.OPEN:
        cas_update(
            conn, "offers", "offer_id", current.offer_id, current.revision,
            {"expires_at": max(expires, current.expires_at)},
        )  # fmt: skip
        renewed = offer_of(conn, row.interaction_id, controller_id)
        assert renewed is not None
        return renewed
    if current is not None:
        # A consumed offer stays consumed; nothing renews an answered interaction.
        return current
    conn.execute(
        "INSERT INTO offers (offer_id, interaction_id, controller_id, fingerprint, state, "
        "created_at, expires_at, updated_at) VALUES (?, ?, ?, ?, 'open', ?, ?, ?)",
        (
            "ofr_" + secrets.token_hex(12), row.interaction_id, controller_id, row.fingerprint,
            now, expires, now,
        ),
    )  # fmt: skip
    created = offer_of(conn, row.interaction_id, controller_id)
    assert created is not None
    return created


def offer_of(conn: apsw.Connection, interaction_id: str, controller_id: str) -> Offer | None:
    """``controller_id``'s offer of ``interaction_id`` (at most one per pair)."""
    rows = conn.execute(
        f"SELECT {', '.join(_OFFER_COLUMNS)} FROM offers "
        "WHERE interaction_id = ? AND controller_id = ? ORDER BY created_at DESC LIMIT 1",
        (interaction_id, controller_id),
    )
    for row in rows:
        values = dict(zip(_OFFER_COLUMNS, row, strict=True))
        values["state"] = OfferState(values["state"])
        return Offer(**values)
    return None


class OfferUnusable(Exception):
    """The offer named is not this controller's open offer of a pending interaction."""

    def __init__(self, interaction_id: str, *, answered: bool) -> None:
        super().__init__(
            f"interaction {interaction_id} was already answered"
            if answered
            else f"no open offer of interaction {interaction_id}"
        )
        self.answered = answered


def take_offer(
    conn: apsw.Connection, interaction_id: str, controller_id: str, offer_id: str, now: float
) -> Interaction:
    """Consume ``controller_id``'s offer ``offer_id`` and fence its interaction, as they are
    now in this transaction; raises OfferUnusable (nothing changed) otherwise."""
    row = get(conn, interaction_id)
    found = offer_of(conn, interaction_id, controller_id)
    if row is None or found is None or found.offer_id != offer_id:
        raise OfferUnusable(interaction_id, answered=False)
    if row.state is not InteractionState.PENDING or found.state is not OfferState.OPEN:
        raise OfferUnusable(interaction_id, answered=True)
    consume(conn, row, found, now)
    return row


def consume(conn: apsw.Connection, row: Interaction, found: Offer, now: float) -> None:
    """Fence ``row`` and use up ``found`` (compare-and-swap both; CasConflict if either moved)."""
    cas_update(
        conn, "offers", "offer_id", found.offer_id, found.revision,
        {"state": OfferState.CONSUMED.value, "consumed_at": now},
    )  # fmt: skip
    set_state(conn, row, InteractionState.CONSUMED)


def _interactions(conn: apsw.Connection, where: str, args: tuple[object, ...]) -> list[Interaction]:
    rows = conn.execute(f"SELECT {', '.join(_INTERACTION_COLUMNS)} FROM interactions {where}", args)
    found = []
    for row in rows:
        values = dict(zip(_INTERACTION_COLUMNS, row, strict=True))
        values["state"] = InteractionState(values["state"])
        found.append(Interaction(**values))
    return found


@attrs.frozen
class Sighting:
    """One prompt appearance on one terminal, in the fields the store records of it.

    The terminal backend builds it from a board snapshot and its projection
    (`akk.actors.terminal_board.sighting`); ``projection`` is what controllers see.
    """

    interaction_id: str
    terminal_id: str | None
    kind: str
    seen: Appearance
    profile: str
    step_index: int
    step_total: int
    projection: dict[str, Any]


def remember(
    conn: apsw.Connection, turn: turns.Turn, sighting: Sighting, now: float
) -> tuple[Interaction, bool]:
    """Record one appearance for ``turn`` (and its wake-up when new); (row, whether new)."""
    return record(
        conn,
        interaction_id=sighting.interaction_id,
        terminal_id=sighting.terminal_id,
        turn_id=turn.turn_id,
        kind=sighting.kind,
        seen=sighting.seen,
        profile=sighting.profile,
        step_index=sighting.step_index,
        step_total=sighting.step_total,
        projection=sighting.projection,
        now=now,
        announce=turn,
    )
