"""The backend contract: `TurnBackend`, what the methods ask of the backend a Turn runs on.

How the one TurnActor follows a Turn on a backend (`TurnFollower`, `TurnControl`
and the values they pass) is declared beside the actor, in
`akk.actors.turn_follower`; each backend implements both.

The methods and the TurnActor are written once against these; the Turn's own
``backend`` picks the implementation (`akk.backends.registry`); each backend starts
its Turns' followers on the TurnDesk itself. Every call
refuses with an RpcError carrying a reason and a next step, and a refused call
sent nothing to the agent.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any, Protocol

import attrs

from akk.actors.turn import nothing_to
from akk.actors.turn_follower import Outcome
from akk.protocol.errors import Reason
from akk.sessions.policy import ThreadConfig
from akk.store.dispatches import Dispatch
from akk.store.interactions import Interaction
from akk.store.sessions import InvocationRow
from akk.store.turns import Turn


@attrs.frozen
class Task:
    """A new Turn's first round, validated by the methods: who sends what where, its clocks."""

    controller_id: str
    client_request_id: str
    text: str
    inactivity_seconds: float
    lifetime_seconds: float
    terminal_id: str
    """Where it is typed (a backend that runs its own threads has no terminal)."""


@attrs.frozen
class RespondKey:
    """The client_request_id a controller gave a `respond`, recorded with its round's
    reservation (`akk.store.responds`) so that a repeat is never typed again."""

    controller_id: str
    """The caller, which may be the operator acting on another controller's Turn."""
    client_request_id: str


@attrs.frozen
class History:
    """The facts the session policy decides from, as a backend describes them for a workspace.

    ``loaded``: the threads its process holds now (read again at the reservation).
    """

    binding: ThreadConfig
    """The thread config the backend would bind a new thread in the workspace to."""
    resume_verified: bool
    """Resuming a stored thread on this binding's agent version is proven."""
    home: str
    """The backend's home, recorded with a new session."""
    loaded: Container[str]


class TurnBackend(Protocol):
    """One way of running a Turn, as the methods see it."""

    @property
    def name(self) -> str:
        """Its protocol name: the ``backend`` its Turns record (and a session send names)."""
        ...

    @property
    def keeps_sessions(self) -> bool:
        """Its Turns run in sessions (`send {scope, backend}`); its name is then a
        `names.SESSION_BACKENDS` entry."""
        ...

    @property
    def witness(self) -> WatchWitness | None:
        """What the watch methods read of a person's task, for a backend that observes them."""
        ...

    async def follow_again(self, turn_id: str, *, restarted: bool) -> None:
        """Follow its unresolved Turn ``turn_id`` again (idempotent), read-only.

        ``restarted``: AKK started since the Turn's last dispatch (the resume after a
        start), so none of it can still be under way; otherwise `recover` asks. The
        Turn reconciles from what its backend shows; nothing is sent again.
        """
        ...

    async def start(self, task: Task) -> Turn | Refusal:
        """Reserve and dispatch a new Turn's first round in one step of the backend.

        The Turn it started is followed while it runs. A Refusal sent nothing (its
        ``turn``: the record of a repeated client_request_id). A backend whose Turns
        the methods reserve (sessions, see `dispatch`) refuses with invalid_params.
        """
        ...

    async def dispatch(self, turn: Turn, text: str, key: RespondKey | None = None) -> Turn:
        """Dispatch ``text`` as ``turn``'s next round; the Turn after it, followed while it runs.

        The round was reserved by the methods (a session's send, ``key`` None) or the
        backend reserves it with its input (a terminal's `respond`, with ``key`` recorded
        in that reservation when the caller gave one). Raises RpcError:
        response_uncertain once the round may have reached the agent (never sent
        again), another reason when nothing was sent.
        """
        ...

    async def history(self, workspace: str) -> History:
        """Describe the binding and history facts the session policy decides from.

        Raises RpcError (nothing started) when the backend keeps no sessions or
        cannot describe them now.
        """
        ...

    async def confirm_ended(self, turn: Turn, invocation: InvocationRow) -> str:
        """Prove, read-only, that the settled ``turn``'s round ``invocation`` no longer runs.

        Confirms its cleanup when it does not; returns what the backend showed
        (settled, running, missing, unreachable, unknown, unchecked) for
        `recover`'s verification. Nothing is ever sent again.
        """
        ...

    async def shown(self, turn: Turn, controller_id: str) -> dict[str, Any] | None:
        """The interaction the agent asks of ``turn`` now, recorded; offered to its owner.

        None when it asks nothing AKK may show. Recording it may wake the owner
        (its wake-up goes out when this call saw the prompt before the Turn did).
        """
        ...

    async def approve(
        self, turn: Turn, row: Interaction, controller_id: str, value: str
    ) -> dict[str, Any]:
        """Answer the permission ``row`` with ``value`` through the controller's offer."""
        ...

    async def respond(
        self, turn: Turn, row: Interaction, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Answer ``row`` with the `respond_interaction` call's ``params``."""
        ...

    async def still_asked(self, turn: Turn, row: Interaction, notification_id: str) -> None:
        """Refuse (prompt_changed, conflict) when the agent no longer asks ``row``."""
        ...

    def check_respond(self, turn: Turn) -> None:
        """Refuse (invalid_params) when ``turn`` does not continue with `respond`."""
        ...


class WatchWitness(Protocol):
    """What the watch methods ask of the backend a watched task is observed through.

    A Watch observes a person's task and never sends input: in a pane (the
    terminal backend), or by its agent's own file, found by the task's native id
    (`akk.backends.file_watch`). Every call is read-only but `reconcile`, which
    settles what a crash left open.
    """

    async def ended(self, record: Turn) -> Outcome | None:
        """How the watched task ended while nobody observed it; None while it still runs.

        Raises RpcError (not_found) when the task cannot be verified now: a watch
        is never moved onto another task.
        """
        ...

    async def whereabouts(self, record: Turn) -> str:
        """present: its exact task is where the record says; replaced: another process in its
        pane; gone."""
        ...

    async def reconcile(self, record: Turn) -> int | None:
        """Settle the input steps a crash left open in its pane: their count, None when busy."""
        ...

    async def follow(self, record_id: str) -> None:
        """Follow the unresolved Watch (or pane Turn) ``record_id`` (idempotent)."""
        ...


@attrs.frozen
class Refusal:
    """An input step refused before anything was sent: ``reason`` is a protocol reason code.

    One reason says otherwise: ``response_uncertain``, a step whose keys went out
    while the store could not record them (`akk.backends.terminal.stages.StageUnrecorded`).
    """

    reason: Reason
    message: str
    turn: Turn | None = None
    """The existing record, for a repeated client_request_id (a terminal's send)."""


def no_prompt_left(turn: Turn) -> Refusal | None:
    """An answer refused, nothing sent, because ``turn`` is closed or has settled
    (`akk.actors.turn.nothing_to`). None while it is open."""
    refused = nothing_to("answer", turn)
    if refused is None:
        return None
    reason, why = refused
    if reason is Reason.CONFLICT:
        why += (
            ". An async question its agent left is answered with delivery_mode "
            "queue_next_turn, which starts the Turn's next round"
        )
    return Refusal(reason, why)


@attrs.frozen
class AnswerReceipt:
    """What an answer's step did: its receipt after the last stage, and whether it was proven.

    ``proven``: the agent showed the answer took (a screen: the prompt gone, the
    next step or the agent back at work). Otherwise the dispatch is
    ``uncertain`` (or ``aborted`` before its last key) and ``why`` says what
    could not be proven. ``next_round_at``: the answer started the Turn's next
    round (trio time).
    """

    dispatch: Dispatch
    proven: bool
    why: str | None = None
    next_round_at: float | None = None
