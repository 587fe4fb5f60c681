"""How the one TurnActor follows a Turn on a backend: `TurnFollower` and `TurnControl`.

The TurnActor (`akk.actors.turn`) is written once against these; each backend
(`akk.backends`) implements a follower and hands the actor its Outcome, Usage
and CancelResult values. The actor lends the follower a `TurnControl`; `Attached`
is the part of `attach` every follower shares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import apsw
import attrs

from akk import evidence
from akk.actors.terminal_board import TerminalSnapshot
from akk.protocol.errors import Reason
from akk.store.interactions import Interaction
from akk.store.turns import Turn, TurnState


@attrs.frozen
class Usage:
    """What a Turn's round spent, as its backend reports it for the settle to write.

    ``status``: how far ``tokens`` is the round's whole usage. ``tokens`` is None
    when the backend saw no attributable count: only the status is written then
    (the columns keep what they held).
    """

    status: evidence.UsageStatus
    tokens: evidence.Tokens | None = None

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

    def glimpse(self, snapshot: TerminalSnapshot) -> None:
        """A terminal published ``snapshot`` (any terminal's; it may be replaced by the next
        look): a follower that reads a screen keeps what it must not miss."""
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


class Attached:
    """A follower's side of `TurnFollower.attach`: the control it was lent, and its Turn.

    A backend's follower subclasses it; ``_turn`` reads and writes the Turn the
    actor holds (`TurnControl.turn`), None before `attach`.
    """

    _control: TurnControl | None = None

    @property
    def _turn(self) -> Turn | None:
        return None if self._control is None else self._control.turn

    @_turn.setter
    def _turn(self, turn: Turn) -> None:
        assert self._control is not None
        self._control.turn = turn

    def attach(self, control: TurnControl) -> None:
        """The actor that drives this follower (called once, before anything else)."""
        self._control = control

    def glimpse(self, snapshot: TerminalSnapshot) -> None:
        """A follower that reads no screen has nothing to keep of one."""
