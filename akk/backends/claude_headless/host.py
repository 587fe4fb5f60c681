"""RunHost and RunDesk: one headless Claude process per Turn round, from spawn to reaping.

A `RunHost` (a plain supervised task, never restarted) runs one round: it
starts `claude -p` for the round's session (`--session-id` for a new one, the id
AKK chose and stored first; `--resume` with the stored id otherwise), records
`maybe_sent` with the process's identity, writes the round's user message (named
by the uuid stored in the reservation) once, records acceptance when Claude
starts the invocation (`system/init` of that session), folds every line into
the `RunBoard`, and runs the `RunActor`'s mailbox beside that pump. The pump stops
at the `result` (stdin closed: Claude exits), when Claude closes its output, at
a bound it breaks (`RunBoard.over_bound`), or when `wind_down`'s grace after an
interrupt or the Turn's deadline passes without a result. Then the process is
ended on `Limits.ladder` (a grace to exit, SIGTERM, SIGKILL), always reaped, its
exit audited, and a settled round's cleanup confirmed. Fault points `claude_*`
mark every step that reaches the process.

The `RunDesk` starts hosts under the backends supervisor and keeps each Turn's
latest board for its follower and its answers.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import apsw
import attrs
import trio

from akk import faults
from akk.actors.store import transact
from akk.backends.claude_headless import process, wire
from akk.backends.claude_headless.actor import RunActor, RunMessage
from akk.backends.claude_headless.board import RunBoard
from akk.backends.claude_headless.setup import ClaudeSetup
from akk.faults import Point
from akk.runtime.actor import ActorRef, Incarnation, Rank
from akk.runtime.supervisor import ChildSpec, Restart, Supervisor
from akk.sessions import policy
from akk.store import audit, sessions, turns
from akk.store.database import StoreUnwritable

log = logging.getLogger("akk.claude")

BACKEND = "claude_headless"


@attrs.frozen
class RoundPlan:
    """What one round runs: its Turn and round, the session start, the message and its name."""

    turn_id: str
    round: int
    start: process.Start
    cwd: str
    text: str = attrs.field(repr=False)
    message_uuid: str
    transcript_start: int
    """The transcript's size before the round (reads of its evidence start here)."""


def evidence(plan: RoundPlan, setup: ClaudeSetup, board: RunBoard) -> str:
    """A Claude Turn's evidence: its session, its message, its transcript and its process."""
    return json.dumps(
        {
            "backend": BACKEND,
            "session_id": plan.start.session_id,
            "message_uuid": plan.message_uuid,
            "native_turn_id": plan.message_uuid,
            "config_dir": setup.config_dir,
            "cwd": plan.cwd,
            "transcript_start": plan.transcript_start,
            "pid": board.pid,
            "start_ticks": board.start_ticks,
        }
    )


class RunHost:
    """Runs one round's Claude process and its RunActor (started once, never restarted)."""

    def __init__(
        self,
        setup: ClaudeSetup,
        plan: RoundPlan,
        *,
        store: ActorRef,
        wake: Callable[[], None],
        limits: process.Limits | None = None,
    ) -> None:
        self.setup = setup
        self._wake = wake
        self.plan = plan
        self.board = RunBoard(generation=plan.round)
        self.ref = ActorRef[RunMessage](
            f"claude {plan.turn_id}/{plan.round}", Rank.BACKEND, mailbox_size=RunActor.mailbox_size
        )
        self.written = trio.Event()
        """Set once the user line was written (or the round ended before it)."""
        self._store = store
        self._limits = limits or process.Limits()
        self._pump = trio.CancelScope()
        """Folds Claude's lines into the board; its deadline is `wind_down`'s."""
        self._winding: str | None = None

    @property
    def key(self) -> str:
        return self.ref.name

    def wind_down(self, why: str) -> None:
        """Unless Claude ends its round (its `result`) within `Limits.interrupt_seconds`,
        end the process (``why`` recorded as the reason its connection closed).

        Called after an interrupt is written and whenever the Turn settles without the
        process's result; an earlier deadline is kept. Never blocks.
        """
        deadline = trio.current_time() + self._limits.interrupt_seconds
        if deadline < self._pump.deadline:
            self._pump.deadline = deadline
            self._winding = f"{why}, and no result came within {self._limits.interrupt_seconds} s"

    async def run(self) -> None:
        board, plan = self.board, self.plan
        try:
            await faults.reached(Point.CLAUDE_SPAWN)
            env = dict(self.setup.env) if self.setup.env is not None else None
            async with process.open_claude(
                self.setup.binary, plan.start, cwd=plan.cwd, config_dir=self.setup.config_dir,
                env=env, limits=self._limits,
            ) as claude:  # fmt: skip
                board.pid, board.start_ticks = claude.pid, claude.start_ticks()
                try:
                    await self._serve(claude)
                finally:
                    board.exit = await claude.aclose()
                    await self._record_exit(board.exit)
        except process.StartError as exc:
            board.failed_to_start = str(exc)
            log.error("claude did not start for %s: %s", plan.turn_id, exc)
        finally:
            board.closed = board.closed or "the process ended"
            self.ref.close()
            self.written.set()
            board.touch()
            self._wake()  # its outcome waits for the exit

    async def _serve(self, claude: process.ClaudeProcess) -> None:
        board, plan = self.board, self.plan
        await faults.reached(Point.CLAUDE_SPAWNED)
        try:
            await self._mark_sent()
        except StoreUnwritable as exc:
            # Never written unrecorded: a line the store does not know of could be sent twice.
            board.unsent = f"{exc.problem}, so the task was never written to Claude"
            log.warning("turn %s: %s; %s", plan.turn_id, board.unsent, exc.next_step)
            return
        try:
            await claude.send(wire.user_message(plan.text, uuid=plan.message_uuid))
        except process.ConnectionClosed as exc:
            board.closed = exc.reason
            return
        finally:
            self.written.set()
        await faults.reached(Point.CLAUDE_WRITTEN)
        actor = RunActor(claude, board=board, store=self._store)
        incarnation = Incarnation(self.ref, actor)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(incarnation.run)
            ended = await self._fold(claude)
            board.closed = claude.closed_reason or ended
            board.touch()
            incarnation.stop()

    async def _fold(self, claude: process.ClaudeProcess) -> str:
        """Fold Claude's lines into the board until its round ends; returns why it stopped.

        Nothing after the `result` is folded in (a request then is never offered): the
        round is over, its process is ending.
        """
        board, turn_id = self.board, self.plan.turn_id
        with self._pump:
            async for message in claude.messages:
                if isinstance(message, wire.WireError):
                    log.warning("claude %s: %s", turn_id, message)
                    continue
                broken = board.over_bound(message)
                if broken is not None:
                    board.bound = broken
                    log.warning("claude %s: %s; ending it", turn_id, broken)
                    return f"{broken}; AKK ended the process"
                board.apply(message)
                if isinstance(message, wire.Init | wire.ControlRequest | wire.Result):
                    self._wake()  # the Turn looks now, before a cancel that may follow
                if isinstance(message, wire.Result):
                    await claude.close_input()
                    return "the round ended (its result); its input is closed"
            return "claude closed its output"
        log.warning("claude %s: %s; ending it", turn_id, self._winding)
        return self._winding or "ended by akk"

    async def _mark_sent(self) -> None:
        """Durably `maybe_sent`, with the process's identity, before the line is written."""
        plan, now = self.plan, time.time()
        facts = evidence(plan, self.setup, self.board)

        def mark(conn: apsw.Connection) -> None:
            inv = sessions.invocation(conn, plan.turn_id, plan.round)
            fresh = turns.get(conn, plan.turn_id)
            assert inv is not None and fresh is not None
            sessions.update_invocation(
                conn, inv, dispatch=policy.Dispatch.MAYBE_SENT, sent_at=now, updated_at=now
            )
            turns.update(conn, fresh, evidence=facts)

        await transact(self._store, mark)

    async def _record_exit(self, ended: process.Exit) -> None:
        detail = {
            "how": ended.how, "returncode": ended.returncode, "reaped": ended.reaped,
            "reason": ended.reason[:200], "stragglers": list(ended.stragglers),
            "pid": self.board.pid,
        }  # fmt: skip
        turn_id, round_, now = self.plan.turn_id, self.plan.round, time.time()

        def record(conn: apsw.Connection) -> None:
            audit.record(
                conn, at=now, actor="akk", action="claude_exit", turn_id=turn_id,
                outcome="ok" if ended.reaped else "unreaped", detail=detail,
            )  # fmt: skip
            inv = sessions.invocation(conn, turn_id, round_)
            if (
                ended.reaped
                and inv is not None
                and inv.outcome is not sessions.Outcome.PENDING
                and inv.cleanup is not sessions.Cleanup.CONFIRMED
            ):
                # Its Turn settled first (a deadline): the process it left is gone now.
                sessions.update_invocation(conn, inv, cleanup="confirmed", cleanup_at=now)

        with trio.CancelScope(shield=True):
            try:
                await transact(self._store, record)
            except StoreUnwritable as exc:  # an audit line: logged, never a crash on the way out
                log.warning("exit of %s not audited: %s; %s", detail, exc.problem, exc.next_step)


class RunDesk:
    """Starts one RunHost per round under the backends supervisor; keeps each Turn's latest."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        setup: ClaudeSetup | str,
        store: ActorRef,
        limits: process.Limits | None = None,
    ) -> None:
        """``limits``: each process's bounds and how long ending it may take."""
        self._supervisor = supervisor
        self.setup = setup
        self._store = store
        self._limits = limits
        self._hosts: dict[str, RunHost] = {}

    async def run(self, plan: RoundPlan, wake: Callable[[], None]) -> RunHost:
        """Start the round's host (the setup must be a ClaudeSetup); ``wake`` makes its
        Turn look at once (called on init, a control request and the result)."""
        assert isinstance(self.setup, ClaudeSetup), self.setup
        host = RunHost(self.setup, plan, store=self._store, wake=wake, limits=self._limits)
        self._hosts[plan.turn_id] = host
        await self._supervisor.start_child(ChildSpec(host.key, host.run, restart=Restart.TEMPORARY))
        return host

    def host(self, turn_id: str) -> RunHost | None:
        """The latest round's host of ``turn_id`` in this run of AKK (None: none started)."""
        return self._hosts.get(turn_id)

    def forget(self, turn_id: str) -> None:
        """The Turn settled: drop its board."""
        self._hosts.pop(turn_id, None)

    @property
    def available(self) -> bool:
        return isinstance(self.setup, ClaudeSetup)

    @property
    def version(self) -> str:
        return self.setup.version if isinstance(self.setup, ClaudeSetup) else ""
