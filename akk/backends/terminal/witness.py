"""The terminal backend's witness for the watch methods: a person's task in a supervised pane.

A Watch observes the task a person started in one pane: the terminal's exact
incarnation and the agent's own file. This reads them, and settles any input
step a crash left open in the pane's TerminalActor; it never sends input.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from akk import evidence
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot
from akk.actors.turn_follower import Outcome
from akk.backends.contract import Refusal
from akk.backends.outcomes import file_outcome
from akk.backends.terminal.follow import GONE_GRACE
from akk.backends.terminal.steps import Reconcile
from akk.profiles.observation import State
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorError, AskTimeout
from akk.store import terminals
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState

_NO_TASK = frozenset({State.IDLE, State.IDLE_DRAFT})
RECONCILE_TIMEOUT = 60.0
"""Seconds recover waits for the terminal to finish a step under way before it reconciles."""


class TerminalWitness:
    """The `WatchWitness` of the terminal backend: the board, the agent's file, the pane.

    ``follow``: how the terminal backend follows a record on its pane.
    """

    def __init__(
        self,
        *,
        board: TerminalBoard,
        reader: StoreReader,
        follow: Callable[[str], Awaitable[None]],
    ) -> None:
        self._board = board
        self._reader = reader
        self._follow = follow

    async def follow(self, record_id: str) -> None:
        """Follow the unresolved record ``record_id`` on its pane (idempotent)."""
        await self._follow(record_id)

    async def ended(self, record: Turn) -> Outcome | None:
        """How the watched task ended while nobody observed it; None while it still runs.

        Raises RpcError (not_found) when its exact terminal is gone.
        """
        snapshot = self._board.get(record.terminal_id or "")
        if snapshot is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"the task of {record.turn_id} cannot be verified: its terminal is gone (the "
                "pane closed or another agent process runs there), and a watch is never moved "
                "to another terminal. Watch the new task with watch {terminal_id}",
            )
        if record.evidence_status != "unknown":
            try:
                progress = await trio.to_thread.run_sync(_read_task, record)
            except evidence.EvidenceError:
                pass  # the file cannot tell: the screen does
            else:
                # Not in the file yet (Claude may write a prompt after its replies): the
                # revived monitor binds it and settles from the file.
                return None if progress is None else file_outcome(progress)
        if snapshot.observation.state in _NO_TASK:
            return Outcome(
                TurnState.DONE, None,
                "the agent is idle again (seen on screen; its own file did not say more)", {},
            )  # fmt: skip
        return None

    async def whereabouts(self, record: Turn) -> str:
        """present: its exact incarnation runs; replaced: another process in its pane; gone."""
        terminal_id = record.terminal_id or ""
        # Just after a start the watcher may not have listed the panes yet.
        with trio.move_on_after(GONE_GRACE):
            while True:
                if self._board.get(terminal_id) is not None:
                    return "present"
                await trio.sleep(0.05)
        pane = await self._reader.run(lambda conn: terminals.pane_of(conn, terminal_id))
        if any((s.identity.tmux_socket, s.identity.pane_id) == pane for s in self._board):
            return "replaced"
        return "gone"

    async def reconcile(self, record: Turn) -> int | None:
        """Settle the input steps a crash left open in the record's pane (its count).

        None: its TerminalActor is busy or restarting (its restart settles them).
        Raises RpcError (internal, naming the store) while the store cannot write.
        """
        actor = self._board.ref(record.terminal_id or "")
        if actor is None:
            return 0
        # Its TerminalActor settles any step a crash left open (none is under way
        # while it reads this message); the receipts below are then final or live.
        try:
            settled = await actor.ask(Reconcile(), timeout=RECONCILE_TIMEOUT)
        except (AskTimeout, ActorError):
            return None
        if isinstance(settled, Refusal):
            raise RpcError(settled.reason, settled.message)
        return settled


def check_watchable(snapshot: TerminalSnapshot) -> None:
    """Refuse a pane where AKK cannot tell that a person's task runs (nothing is watched)."""
    observation, identity = snapshot.observation, snapshot.identity
    if identity.profile is None:
        raise RpcError(
            Reason.UNSUPPORTED_VERSION,
            f"{identity.agent} {identity.version or '(unknown version)'} has no exact profile "
            f"({identity.profile_reason}), so AKK cannot tell whether a task runs there; take "
            "the step the reason names, or watch a pinned version",
        )
    if observation.state in _NO_TASK:
        raise RpcError(
            Reason.NOT_FOUND,
            f"no task runs in terminal {identity.terminal_id}: the agent is idle. Watch it "
            "once a person started a task (list shows its activity_state as working)",
        )
    if observation.state is State.UNKNOWN:
        raise RpcError(
            Reason.NOT_FOUND,
            f"AKK cannot tell whether a task runs in terminal {identity.terminal_id} "
            f"({snapshot.reason}); try again once list shows it working",
        )


def _read_task(record: Turn) -> evidence.Progress | None:
    """What the watched task's file says now (bound first if the watch never bound it).

    None while no file shows the person's message yet.
    """
    assert record.evidence is not None
    if record.evidence_status == "pending":
        task = evidence.bind_task(evidence.Snapshot.from_json(record.evidence))
        if task is None:
            return None
        binding, digest = task
        return evidence.read(binding, digest)
    return evidence.read(evidence.Binding.from_json(record.evidence), record.request_sha256)
