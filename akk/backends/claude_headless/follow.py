"""The Claude headless follower: one Turn's round run by one `claude -p`, to its one outcome.

The TurnActor drives it as it drives the others. Its witness is the round's
`RunBoard` (what the process said) while the process AKK started runs, and the
session's own transcript (`transcript.py`) otherwise:

- `result` gives the outcome (committed once the process is reaped, so the
  session's next send finds its cleanup confirmed): success -> done with the final text and the
  result's usage (that invocation's own, proven equal to what the model sent);
  an error result after the owner's interrupt -> cancelled; any other error
  result -> failed;
- the process closing its output without a `result` (killed, crashed) -> one
  `failed`; the session's history stays in its transcript, so the next send
  resumes it;
- no activity for the inactivity window -> stalled; past the lifetime ->
  timed_out (both interrupt best effort first, and the process is ended if it
  writes no result within `Limits.interrupt_seconds`: `RunHost.wind_down`);
- a process that broke a bound (`RunBoard.over_bound`: AKK ended it) -> failed
  `too_many_requests`; one that ignored the owner's cancel and was ended ->
  cancelled;
- no board in this run of AKK (it restarted): a process an earlier AKK left is
  ended (nobody can answer it), then the transcript decides, read-only: a
  settled round records its real outcome, a round not in the transcript is
  `uncertain`, an accepted round with no outcome failed with the restart.
  Nothing is ever sent again.

The invocation's facts (outcome, cleanup) and the session's checkpoint commit
with the Turn's outcome, in one transaction.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from contextlib import suppress
from typing import Any

import apsw

from akk import evidence, faults
from akk.actors.store import transact
from akk.actors.turn import not_running
from akk.actors.turn_follower import Attached, CancelResult, Usage
from akk.backends.claude_headless import transcript, wire
from akk.backends.claude_headless.actor import Interrupt
from akk.backends.claude_headless.answers import prompts_of, remember_asked
from akk.backends.claude_headless.board import RunBoard
from akk.backends.claude_headless.host import RunDesk
from akk.backends.outcomes import bounded_final, final_summary
from akk.discovery import children
from akk.discovery.process import start_ticks
from akk.evidence.model import EvidenceError
from akk.faults import Point
from akk.protocol.errors import Reason
from akk.protocol.redaction import redact_head
from akk.runtime.actor import ActorError
from akk.screen.fingerprint import IdMinter
from akk.sessions.policy import Dispatch, History
from akk.store import dispatches, sessions, turns
from akk.store.sessions import InvocationRow
from akk.store.turns import Turn, TurnState

log = logging.getLogger("akk.claude_turn")

ASK_TIMEOUT = 15.0
"""How long a Turn waits on its RunActor (one line written)."""


class ClaudeFollower(Attached):
    """The `TurnFollower` of a Turn on the Claude headless backend."""

    def __init__(
        self, turn_id: str, *, desk: RunDesk, store: Any, ids: IdMinter, restarted: bool
    ) -> None:
        self._turn_id = turn_id
        self._desk = desk
        self._store = store
        self._ids = ids
        self._restarted = restarted
        """Followed again after AKK started: no round of this Turn can be under way here."""
        self._invocation: InvocationRow | None = None
        self._seq = -1
        self._cancelled = False
        self._announced: frozenset[str] = frozenset()

    def read(self, conn: apsw.Connection, turn: Turn) -> None:
        self._invocation = sessions.invocation(conn, turn.turn_id, turn.round)
        assert self._invocation is not None, turn.turn_id
        self._cancelled |= dispatches.cancel_asked(conn, turn.turn_id, self._invocation.reserved_at)

    def started(self, turn: Turn) -> None:
        """Nothing to prepare: the first look decides from the board or the transcript."""

    def reloaded(self, reconcile: bool) -> None:
        """The board, when there is one, is this run's own witness; else the transcript."""

    async def before_deadline(self) -> None:
        """Interrupt the round best effort; the process ends either way (`wind_down`):
        nobody follows it once the Turn settles."""
        host = self._desk.host(self._turn_id)
        if host is not None and host.board.alive:
            with suppress(ActorError):
                await host.ref.ask(Interrupt(), timeout=ASK_TIMEOUT)
            host.wind_down("its Turn reached a deadline")

    def settling(self, conn: apsw.Connection, fresh: Turn, state: TurnState, now: float) -> None:
        host = self._desk.host(fresh.turn_id)
        gone = host is None or (host.board.exit is not None and host.board.exit.reaped)
        sessions.settle_invocation(conn, fresh.turn_id, fresh.round, state, now, cleanup=gone)

    # -- following

    async def look(self, now: float) -> bool:
        turn, invocation = self._turn, self._invocation
        assert turn is not None and invocation is not None
        host = self._desk.host(turn.turn_id)
        if host is None:
            if invocation.dispatch is Dispatch.NOT_SENT and not self._restarted:
                return False  # its dispatch is starting the process
            await self._reconcile(turn, invocation)
            return False
        board = host.board
        if board.failed_to_start is not None:
            await self._settle(
                TurnState.FAILED, "claude_start_failed",
                f"Claude could not be started ({redact_head(board.failed_to_start, 200)}); nothing "
                "was sent. Check --claude-bin, then send again",
                outcome="failed", cleanup=True,
            )  # fmt: skip
            return False
        if board.unsent is not None:
            await self._settle(
                TurnState.FAILED, "not_sent",
                f"{redact_head(board.unsent, 300)}; nothing was sent. Send it again",
                outcome="failed", cleanup=True,
            )  # fmt: skip
            return False
        if board.closed is not None and board.pid is None:
            await self._settle(
                TurnState.FAILED, "not_sent",
                f"the round ended before its process started ({redact_head(board.closed, 200)}); "
                "nothing was sent. Send it again", outcome="failed", cleanup=True,
            )  # fmt: skip
            return False
        init = board.init
        if (
            invocation.dispatch is not Dispatch.ACCEPTED
            and init is not None
            and init.session_id == host.plan.start.session_id
        ):
            await self._accept(init, host.setup.version)
            await faults.reached(Point.CLAUDE_ACCEPTED)
        if self._invocation is not None and self._invocation.dispatch is not Dispatch.NOT_SENT:
            # During the turn: once the task line was reserved, not while it is still starting.
            await faults.reached(Point.CLAUDE_RUNNING)
        if board.seq != self._seq:
            self._seq = board.seq
            assert self._control is not None
            self._turn = await self._control.update(last_activity_at=now)
        await self._announce(host.board)
        if board.result is not None:
            if board.exit is None:
                return False  # stdin is closed: settled once the process is reaped
            await faults.reached(Point.CLAUDE_RESULT)
            context = (board.context_tokens, board.context_window)
            await self._settle_result(board.result, board.final_text, context)
            return False
        if board.closed is not None and board.exit is not None:
            code = board.exit.returncode
            if board.bound is not None:
                await self._settle(
                    TurnState.FAILED, "too_many_requests",
                    f"{redact_head(board.bound, 200)}, so AKK ended its process (a bound on what "
                    "a process may make AKK hold); its session's history is kept, so the next "
                    "send resumes it", outcome="failed", cleanup=True,
                )  # fmt: skip
                return False
            if self._cancelled:
                await self._settle(
                    TurnState.CANCELLED, None,
                    "the task was interrupted; Claude's process ended without a result (AKK "
                    "ends one that does not stop after the interrupt)", outcome="cancelled",
                    cleanup=True,
                )  # fmt: skip
                return False
            await self._settle(
                TurnState.FAILED, "claude_exited",
                f"the Claude process ended mid-turn (return code {code}); its session's "
                "history is kept, so the next send resumes it", outcome="failed", cleanup=True,
            )  # fmt: skip
            return False
        return True

    async def _accept(self, init: wire.Init, version: str) -> None:
        """Claude started the round's invocation: accepted, what `system/init` reported kept
        in the Turn's evidence, the session's history persisted (its transcript exists)."""
        turn = self._turn
        assert turn is not None
        turn_id, round_ = turn.turn_id, turn.round
        reported = {
            "agent_version": init.claude_code_version or version,
            "model": init.model,
            "permission_mode": init.permission_mode,
            "tools": sorted(init.tools),
        }
        receipt = hashlib.sha256(json.dumps(reported, sort_keys=True).encode()).hexdigest()

        def accept(conn: apsw.Connection) -> tuple[Turn, InvocationRow]:
            inv = sessions.invocation(conn, turn_id, round_)
            fresh = turns.get(conn, turn_id)
            assert inv is not None and fresh is not None
            inv = sessions.update_invocation(
                conn, inv, dispatch=Dispatch.ACCEPTED, receipt_sha256=receipt
            )
            session = sessions.get(conn, inv.session_id)
            if session is not None and session.history is History.UNKNOWN:
                sessions.update(conn, session, history=History.PERSISTED)
            facts = json.loads(fresh.evidence or "{}") | {"init": reported}
            fresh = turns.update(
                conn, fresh, state=TurnState.RUNNING, native_session=init.session_id,
                evidence_status="bound", evidence=json.dumps(facts),
            )  # fmt: skip
            return fresh, inv

        self._turn, self._invocation = await transact(self._store, accept)

    async def _announce(self, board: RunBoard) -> None:
        """Record each pending control request as an interaction (its event once); the ones
        no longer asked become ``gone``."""
        turn = self._turn
        assert turn is not None
        mine = prompts_of(turn, board, self._ids)
        asked = frozenset(p.interaction_id for p in mine)
        if asked == self._announced:
            return
        now = time.time()
        assert self._control is not None
        await self._control.announce(
            lambda row: row.interaction_id in asked,
            lambda conn, fresh: remember_asked(conn, fresh, mine, board, now),
        )
        self._announced = asked

    async def _reconcile(self, turn: Turn, invocation: InvocationRow) -> None:
        """No process of this run holds the round: the transcript decides, read-only."""
        if invocation.dispatch is Dispatch.NOT_SENT:
            await self._settle(
                TurnState.FAILED, "not_sent",
                "AKK stopped before the task reached Claude; nothing was sent. Send it again",
                outcome="failed", cleanup=True,
            )  # fmt: skip
            return
        try:
            facts = json.loads(turn.evidence or "{}")
        except ValueError:
            facts = {}
        await end_orphan(facts, turn.turn_id)
        session_id, message_uuid = facts.get("session_id"), facts.get("message_uuid")
        config, cwd = facts.get("config_dir"), facts.get("cwd")
        if not all(isinstance(v, str) for v in (session_id, message_uuid, config, cwd)):
            await self._uncertain("the round's session and message ids were never stored")
            return
        try:
            found = transcript.locate(config, cwd, session_id)
            if found is None:
                await self._uncertain("the session's transcript does not exist")
                return
            start = facts.get("transcript_start")
            round_ = transcript.read_round(
                found, message_uuid, turn.request_sha256 or "",
                start=start if isinstance(start, int) else 0,
            )  # fmt: skip
        except (EvidenceError, OSError, ValueError) as exc:
            await self._uncertain(f"the transcript cannot prove the round ({exc})")
            return
        verdict = round_.verdict
        if verdict == "uncertain":
            await self._uncertain("the transcript does not hold the task")
            return
        usage = Usage(round_.usage_status, round_.usage)
        final = round_.final_message
        changes: dict[str, Any] = {}
        if final:
            changes["final_message"] = bounded_final(final)
        if verdict == "running" and self._cancelled:
            await self._settle(
                TurnState.CANCELLED, None,
                "the owner cancelled the task, and AKK restarted before Claude ended its round; "
                "its process is gone, and the transcript holds what it did",
                outcome="cancelled", cleanup=True, usage=usage, **changes,
            )  # fmt: skip
        elif verdict == "running":
            await self._settle(
                TurnState.FAILED, "interrupted_by_restart",
                "AKK restarted while Claude ran the round, and its process is gone; the "
                "transcript holds what it did. Nothing is sent again", outcome="failed",
                cleanup=True, usage=usage, **changes,
            )  # fmt: skip
        elif verdict == "done":
            await self._settle(
                TurnState.DONE, None, final_summary(final), outcome="done", cleanup=True,
                checkpoint=True, usage=usage, **changes,
            )  # fmt: skip
        elif verdict == "cancelled":
            await self._settle(
                TurnState.CANCELLED, None, "the task was interrupted", outcome="cancelled",
                cleanup=True, usage=usage, **changes,
            )  # fmt: skip
        else:
            await self._settle(
                TurnState.FAILED, "agent_error",
                f"the agent reported: {redact_head(round_.failure or 'an error', 200)}",
                outcome="failed", cleanup=True, usage=usage, **changes,
            )  # fmt: skip

    async def _uncertain(self, why: str) -> None:
        await self._settle(
            TurnState.FAILED, "uncertain",
            f"the task may have reached Claude, and {why}; AKK will not send it again",
            outcome="uncertain", cleanup=True,
        )  # fmt: skip

    # -- cancel

    async def interrupt(self, turn: Turn) -> CancelResult:
        host = self._desk.host(turn.turn_id)
        if host is None or not host.board.alive or host.board.result is not None:
            return not_running(turn)
        if self._cancelled:  # its interrupt is written: the round is ending
            return CancelResult(True)
        try:
            asked = Interrupt(turn.turn_id, turn.controller_id)
            refused = await host.ref.ask(asked, timeout=ASK_TIMEOUT)
        except ActorError as exc:
            return CancelResult(
                False, Reason.RESPONSE_UNCERTAIN,
                f"the interrupt may not have reached Claude ({exc.reason}); look at status "
                "before cancelling again",
            )  # fmt: skip
        if refused is not None:
            return CancelResult(False, Reason.CONFLICT, refused)
        self._cancelled = True
        host.wind_down("the owner cancelled the Turn")
        return CancelResult(True)

    # -- store

    async def _settle_result(
        self, result: wire.Result, final_text: str | None, context: tuple[int | None, int | None]
    ) -> None:
        """The outcome the `result` gives (the process is reaped: cleanup confirmed);
        ``context``: the tokens in use and the model's window, for `context_limit`."""
        cleanup = True
        final = result.result if result.result is not None else final_text
        changes: dict[str, Any] = {}
        if final:
            changes["final_message"] = bounded_final(final)
        if not result.is_error:
            usage = Usage(evidence.UsageStatus.COMPLETE, result.usage)
            await self._settle(
                TurnState.DONE, None, final_summary(final), outcome="done", cleanup=cleanup,
                checkpoint=True, usage=usage, context=context, **changes,
            )  # fmt: skip
        elif self._cancelled:
            await self._settle(
                TurnState.CANCELLED, None, "the task was interrupted", outcome="cancelled",
                cleanup=cleanup, usage=Usage(evidence.UsageStatus.PARTIAL, result.usage),
                **changes,
            )  # fmt: skip
        else:
            why = final or result.terminal_reason or result.subtype
            await self._settle(
                TurnState.FAILED, "agent_error", f"the agent reported: {redact_head(why, 200)}",
                outcome="failed", cleanup=cleanup,
                usage=Usage(evidence.UsageStatus.PARTIAL, result.usage), **changes,
            )  # fmt: skip

    async def _settle(
        self,
        state: TurnState,
        reason: str | None,
        summary: str,
        *,
        outcome: str,
        cleanup: bool = False,
        checkpoint: bool = False,
        usage: Usage | None = None,
        context: tuple[int | None, int | None] = (None, None),
        **changes: Any,
    ) -> None:
        """The Turn's outcome, its invocation's facts and the session's checkpoint, at once."""
        turn = self._turn
        assert turn is not None and self._control is not None
        now, round_ = time.time(), turn.round

        def also(conn: apsw.Connection, fresh: Turn) -> None:
            sessions.settle_invocation(
                conn, fresh.turn_id, round_, state, now, outcome=outcome, cleanup=cleanup,
                checkpoint=checkpoint, context=context,
            )  # fmt: skip

        self._desk.forget(turn.turn_id)
        await self._control.settle(state, reason, summary, usage=usage, also=also, **changes)


async def end_orphan(facts: dict[str, Any], turn_id: str) -> bool:
    """The Claude an earlier AKK started for this round, if it outlived AKK: end it.

    Nobody can answer it any more (its pipes were that AKK's); its identity (pid and
    start time) was stored with `maybe_sent` (``facts``: the Turn's evidence). Returns
    whether no such process is left.
    """
    pid, ticks = facts.get("pid"), facts.get("start_ticks")
    if not isinstance(pid, int) or not isinstance(ticks, int) or start_ticks(pid) != ticks:
        return True
    log.warning("ending claude pid %d left by an earlier run (turn %s)", pid, turn_id)
    if not await children.end_orphan(pid, ticks):
        log.error("claude pid %d survived SIGKILL", pid)
        return False
    return True
