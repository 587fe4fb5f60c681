"""The follower of a Watch found by its native id: the agent's own file, read until it settles.

The TurnActor drives it once per tick. The file is read (only when it grew)
from the binding the watch was created with: the person's request, then the
records that settle it (`akk.backends.outcomes.file_outcome`): ``done`` with
the final message and the turn's usage, ``failed`` or ``cancelled``. A file
that is gone, replaced, rewritten at the request or too large can prove
nothing more: the watch's evidence becomes ``unknown`` with that limit, it is
never bound to another file, and its clocks (inactivity, lifetime) end it.
Nothing is ever sent: there is no pane and no process of AKK's here.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import apsw

from akk import evidence
from akk.actors.turn_follower import Attached, CancelResult
from akk.backends.outcomes import file_outcome
from akk.protocol.errors import Reason
from akk.store.turns import Turn, TurnState


class FileFollower(Attached):
    """The `TurnFollower` of a Watch on a person's task, by its agent's own file.

    ``read``: what the watch's file proves now (`FileWatches.read`; raises EvidenceError).
    """

    def __init__(self, *, read: Callable[[Turn], Awaitable[evidence.Progress]]) -> None:
        self._read = read
        self._read_size = -1  # the file's size at the last read

    def read(self, conn: apsw.Connection, turn: Turn) -> None:
        """The Watch alone is the record."""

    def started(self, turn: Turn) -> None:
        """The file is read afresh at the first look."""

    def reloaded(self, reconcile: bool) -> None:
        self._read_size = -1  # a renew or recover reads the file again at once

    async def before_deadline(self) -> None:
        """A Watch sends nothing, at its deadline too."""

    def settling(self, conn: apsw.Connection, fresh: Turn, state: TurnState, now: float) -> None:
        """A Watch has no step of its own to settle."""

    async def interrupt(self, turn: Turn) -> CancelResult:
        return CancelResult(
            False, Reason.INVALID_PARAMS, "a Watch never sends input; nothing was sent"
        )

    async def look(self, now: float) -> bool:
        turn = self._turn
        assert turn is not None and self._control is not None
        if turn.evidence_status != "bound" or turn.evidence is None:
            return True  # nothing more can be proven: the clocks end it
        path = evidence.Binding.from_json(turn.evidence).file.path
        try:
            size = os.stat(path).st_size
        except OSError:
            size = -2  # read anyway: the read names what is wrong
        if size == self._read_size:
            return True
        try:
            progress = await self._read(turn)
        except evidence.EvidenceError as exc:
            await self._control.update(
                evidence_status="unknown", evidence_limit=f"{type(exc).__name__}: {exc}"[:300]
            )
            return True
        self._read_size = size
        await self._control.update(last_activity_at=now)
        outcome = file_outcome(progress)
        if outcome is not None:
            changes: dict[str, Any] = outcome.changes
            await self._control.settle(
                outcome.state, outcome.reason, outcome.summary, usage=outcome.usage, **changes
            )
        return True
