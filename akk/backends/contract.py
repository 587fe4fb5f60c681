"""The backend contract: `TurnBackend` (what the methods ask of the backend a Turn runs on)
and `TurnFollower` (how the one TurnActor follows a Turn on it).

The methods and the TurnActor are written once against these; the Turn's own
``backend`` picks the implementation (`akk.backends.registry`); each backend starts
its Turns' followers on the TurnDesk itself. Every call
refuses with an RpcError carrying a reason and a next step, and a refused call
sent nothing to the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any, Protocol

import apsw
import attrs

from akk import evidence
from akk.actors.terminal_board import TerminalSnapshot
from akk.protocol.errors import Reason
from akk.sessions.policy import ThreadConfig
from akk.store.dispatches import Dispatch
from akk.store.interactions import Interaction
from akk.store.sessions import InvocationRow
from akk.store.turns import Turn, TurnState


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
        """What the watch methods read of a person's task, for a backend with panes."""
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

    async def dispatch(self, turn: Turn, text: str) -> Turn:
        """Dispatch ``text`` as ``turn``'s next round; the Turn after it, followed while it runs.

        The round was reserved by the methods (a session's send) or the backend
        reserves it with its input (a terminal's `respond`). Raises RpcError:
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
    """What the watch methods ask of the backend a person types into (the terminal's panes).

    A Watch observes a person's task and never sends input; only a backend with
    panes offers it. Every call is read-only but `reconcile`, which settles what
    a crash left open.
    """

    def check_watchable(self, snapshot: TerminalSnapshot) -> None:
        """Refuse (unsupported_version, not_found) a pane where no task is seen to run."""
        ...

    async def ended(self, record: Turn, snapshot: TerminalSnapshot) -> Outcome | None:
        """How the watched task ended while nobody observed it; None while it still runs."""
        ...

    async def whereabouts(self, record: Turn) -> str:
        """present: its exact incarnation runs; replaced: another process in its pane; gone."""
        ...

    async def reconcile(self, record: Turn) -> int | None:
        """Settle the input steps a crash left open in its pane: their count, None when busy."""
        ...

    async def follow(self, record_id: str) -> None:
        """Follow the unresolved Watch (or pane Turn) ``record_id`` (idempotent)."""
        ...


@attrs.frozen
class Refusal:
    """An input step refused before anything was sent: ``reason`` is a protocol reason code."""

    reason: Reason
    message: str
    turn: Turn | None = None
    """The existing record, for a repeated client_request_id (a terminal's send)."""


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


@attrs.frozen
class Usage:
    """What a Turn's round spent, as its backend reports it for the settle to write.

    ``status``: how far ``tokens`` is the round's whole usage. ``tokens`` is None
    when the backend saw no attributable count: only the status is written then
    (the columns keep what they held).
    """

    status: evidence.UsageStatus
    tokens: evidence.Usage | None = None

    def columns(self) -> dict[str, object]:
        """The Turn's usage columns this fact writes."""
        columns: dict[str, object] = {"usage_status": self.status.value}
        if self.tokens is not None:
            columns |= {
                "usage_input": self.tokens.input,
                "usage_output": self.tokens.output,
                "usage_cache_read": self.tokens.cache_read,
                "usage_cache_write": self.tokens.cache_write,
            }
        return columns


@attrs.frozen
class Outcome:
    """How a round ended, as a backend's witness shows it: the settled state and what to record."""

    state: TurnState
    reason: str | None
    summary: str
    changes: dict[str, object]
    usage: Usage | None = None
    """What the round spent (None: the witness cannot tell, as a screen alone)."""


@attrs.frozen
class CancelResult:
    """The reply to a `cancel`: the interrupt went out, or why not (nothing was sent)."""

    ok: bool
    reason: Reason | None = None
    message: str = ""


Also = Callable[[apsw.Connection, Turn], None]
"""More facts a backend commits in the transaction that settles its Turn."""


class TurnControl(Protocol):
    """What the one TurnActor lends the follower of its Turn."""

    turn: Turn | None
    """The Turn as last read or written by the actor (set once it started)."""

    async def update(self, **changes: object) -> Turn:
        """Compare-and-swap ``changes`` onto the Turn; it becomes ``turn``."""
        ...

    async def settle(
        self,
        state: TurnState,
        reason: str | None,
        summary: str,
        *,
        usage: Usage | None = None,
        also: Also | None = None,
        **changes: object,
    ) -> None:
        """Commit the Turn's one outcome and its notification, wake its owner, stop the actor.

        ``usage``: what the round spent, as the follower proved it (None: the usage
        columns stay as they are). ``also`` (default: the follower's `settling`)
        runs in the same transaction. Raises StopActor.
        """
        ...

    async def announce(
        self,
        still_asked: Callable[[Interaction], bool],
        record: Callable[[apsw.Connection, Turn], bool],
    ) -> None:
        """In one transaction: pending interactions not ``still_asked`` become ``gone``,
        ``record`` records what is asked now (True: a new one); its owner is woken once."""
        ...


class TurnFollower(Protocol):
    """How one backend follows one Turn to its outcome, for the one TurnActor.

    The actor owns the skeleton: the messages, the store record, the hard
    deadline and the inactivity window, cancel's preconditions, the settle
    transaction and its notification. The follower looks at its witness (the
    screen and the agent's file, or the app-server) once per tick.
    """

    def attach(self, control: TurnControl) -> None:
        """The actor that drives this follower (called once, before anything else)."""
        ...

    def read(self, conn: apsw.Connection, turn: Turn) -> None:
        """Read what the follower keeps beside the Turn, in the actor's load (a reader)."""
        ...

    def started(self, turn: Turn) -> None:
        """The actor started on ``turn`` (read just now)."""
        ...

    def reloaded(self, reconcile: bool) -> None:
        """The record was read again; ``reconcile``: prove again what its process did."""
        ...

    async def look(self, now: float) -> bool:
        """One look at the witness (may settle); True: the actor checks inactivity next."""
        ...

    async def before_deadline(self) -> None:
        """The Turn is about to settle timed_out or stalled (best-effort interrupt)."""
        ...

    async def interrupt(self, turn: Turn) -> CancelResult:
        """Interrupt the running ``turn`` for its owner's cancel."""
        ...

    def settling(self, conn: apsw.Connection, fresh: Turn, state: TurnState, now: float) -> None:
        """The follower's facts of a settle the actor decided (deadline, inactivity)."""
        ...
