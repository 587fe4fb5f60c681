"""The steps a TerminalActor takes, as messages and their receipts.

Each input-bearing step (a task, a respond, an answer, an interrupt) is one
ask; its reply is a receipt of what the keys did, or a `Refusal` before any
key. `Refresh`, `Rebind` and `Reconcile` change no pane.
"""

from __future__ import annotations

import attrs

from akk.backends.contract import AnswerReceipt, Refusal, RespondKey
from akk.backends.terminal.resolve import Answer
from akk.discovery.identity import TerminalIdentity
from akk.profiles.registry import Profile
from akk.runtime.actor import ActorRef, Ask
from akk.screen.fingerprint import Appearance
from akk.store.dispatches import Dispatch
from akk.store.turns import Turn


@attrs.frozen
class TaskReceipt:
    """What a dispatched task did: the Turn and its dispatch after the last recorded stage."""

    turn: Turn
    dispatch: Dispatch
    seq: int  # the Observation proven before the keys
    enter_at: float | None  # trio clock when Enter was pressed


@attrs.frozen
class InterruptReceipt:
    dispatch: Dispatch
    seq: int


@attrs.frozen
class Refresh(Ask[float | None]):
    """The pane may have changed; ``cols`` x ``rows`` is its size as last listed.

    The reply is how soon the pane must be read again though it does not change
    (`Observer.recheck`), None when only its next change matters.
    """

    cols: int
    rows: int


@attrs.frozen
class Rebind(Ask[None]):
    """Read the pane with ``profile`` from now on (a qualification was recorded or revoked).

    ``identity`` is the same terminal with its new ``profile`` and ``profile_reason``.
    Handled between steps, never inside one: a step in flight ends under the
    profile it began with.
    """

    identity: TerminalIdentity
    profile: Profile | None


@attrs.frozen
class DispatchTask(Ask[TaskReceipt | Refusal]):
    """Type ``text`` into the idle composer and press Enter once, as a new Turn."""

    controller_id: str
    client_request_id: str
    text: str
    inactivity_seconds: float
    lifetime_seconds: float


@attrs.frozen
class DispatchRespond(Ask[TaskReceipt | Refusal]):
    """Type ``text`` into the idle composer as the next round of the settled ``turn_id``.

    ``key``: the caller's client_request_id, recorded in the round's reservation.
    """

    turn_id: str
    text: str
    key: RespondKey | None


@attrs.frozen
class DispatchAnswer(Ask[AnswerReceipt | Refusal]):
    """Answer the prompt appearance ``seen`` for ``turn_id``, consuming ``offer_id``.

    ``answer`` was resolved from the controller's ids against that appearance;
    the actor proves the screen still shows it before any key.
    """

    turn_id: str
    controller_id: str
    interaction_id: str
    offer_id: str
    seen: Appearance
    answer: Answer


@attrs.frozen
class Interrupt(Ask[InterruptReceipt | Refusal]):
    """Press the agent's interrupt key for ``turn_id``, proven to be running on screen."""

    turn: Turn


@attrs.frozen
class Reconcile(Ask[int | Refusal]):
    """Settle this terminal's steps left open by a crash; reply how many (an int).

    Refused (``internal``, naming the store) while the store cannot write.

    This actor runs one message at a time, so while it reads this one no step
    of its own is under way: an open step it finds was cut off (see
    `turns.orphaned`).
    """


TerminalMessage = (
    Refresh | Rebind | DispatchTask | DispatchRespond | DispatchAnswer | Interrupt | Reconcile
)
TerminalRef = ActorRef[TerminalMessage]
