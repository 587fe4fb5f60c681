"""ClaudeHeadless: the `TurnBackend` of Turns run through `claude -p` (stream-json).

One process per round (docs/claude_headless.md): `dispatch` names the round
before anything reaches a process (a new session's id, a uuid AKK chooses, and
the user message's uuid are committed first; a resume passes `--resume` with
the stored id), then starts its `RunHost` and follows the Turn. A session the
policy resumed whose transcript is gone is not started afresh under its id: its
history is recorded `missing` and the Turn fails `history_missing`, nothing sent
(the next send rebuilds). `history` gives the session policy Claude's binding
facts; `confirm_ended` proves that a settled round's process is gone (ending
one an earlier AKK left, as nobody can answer it).

The interaction methods (`shown`, `approve`, `respond`, `still_asked`,
`check_respond`) are `answers.HeadlessAnswers`, which it delegates to.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from contextlib import suppress
from typing import Any

import apsw
import trio

from akk.actors.store import transact
from akk.actors.turn import Tick
from akk.backends.claude_headless import transcript
from akk.backends.claude_headless.answers import HeadlessAnswers
from akk.backends.claude_headless.follow import ClaudeFollower, end_orphan
from akk.backends.claude_headless.host import RoundPlan, RunDesk
from akk.backends.claude_headless.process import NewSession, Resume
from akk.backends.claude_headless.setup import ClaudeSetup, refusal, rehashed
from akk.backends.context import BackendContext
from akk.backends.contract import History, Refusal, RespondKey, Task
from akk.backends.names import CLAUDE_HEADLESS
from akk.discovery.process import start_ticks
from akk.profiles.registry import PINNED, Registry
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorError
from akk.sessions import policy
from akk.store import qualifications, sessions, turns
from akk.store.interactions import Interaction
from akk.store.turns import Turn

log = logging.getLogger("akk.claude")

START_TIMEOUT = 60.0
"""How long a dispatch waits for its process to take the user message."""

PERMISSION_MODE = "default"
"""The permission mode every headless run starts in (`process.STREAM_FLAGS`)."""


def binding(version: str) -> policy.ThreadConfig:
    """What a new session would be bound to: the version and the mode AKK starts it in.

    ``protocol_version`` names the backend, so a session of another backend for the
    same owner never counts as the same binding (the send rebuilds, never resumes it).
    The model is Claude's own choice from its config (reported by `system/init`,
    kept in the Turn's evidence), not a fact AKK can know before the start.
    """
    return policy.ThreadConfig(
        agent_version=version,
        protocol_version=f"{CLAUDE_HEADLESS} {version}",
        model=None,
        effort=None,
        approval_policy=PERMISSION_MODE,
        sandbox=None,
    )


class ClaudeHeadless:
    """The `TurnBackend` of Claude headless Turns."""

    name = CLAUDE_HEADLESS
    keeps_sessions = True
    witness = None

    def __init__(self, ctx: BackendContext, *, runs: RunDesk, registry: Registry = PINNED) -> None:
        """``registry``: the pinned set; a Claude it lacks runs only when qualified
        (`setup.refusal`)."""
        self._ctx = ctx
        self._store = ctx.store
        self._runs = runs
        self._registry = registry
        self._answers = HeadlessAnswers(ctx, hosts=runs)

    async def follow_again(self, turn_id: str, *, restarted: bool) -> None:
        """Follow the Turn again: its board when this run holds its process, else the
        transcript (read-only)."""
        await self._follow(turn_id, restarted=restarted)

    async def _follow(self, turn_id: str, *, restarted: bool) -> None:
        ctx = self._ctx
        await ctx.desk.follow(
            turn_id,
            lambda: ClaudeFollower(
                turn_id, desk=self._runs, store=ctx.store, ids=ctx.ids, restarted=restarted
            ),
        )

    def _wake(self, turn_id: str) -> None:
        """Make the Turn look now (a tell: never blocks)."""
        ref = self._ctx.desk.ref(turn_id)
        if ref is not None:
            with suppress(ActorError):
                ref.tell(Tick())

    async def start(self, task: Task) -> Turn | Refusal:
        """Claude headless Turns are reserved by the methods (a session's send)."""
        return Refusal(
            Reason.INVALID_PARAMS,
            "a Claude headless Turn runs in a session: send with scope (or session_id) and "
            f'backend "{CLAUDE_HEADLESS}", not with terminal_id',
        )

    async def history(self, workspace: str) -> History:
        """Claude's binding for ``workspace``; refused (nothing started) unless the Claude
        may run (`_accepted`)."""
        setup = await self._accepted()
        return History(
            binding=binding(setup.version),
            resume_verified=True,  # `--resume` proven on every pinned and qualified Claude
            home=setup.config_dir,
            loaded=frozenset(),
        )

    async def dispatch(self, turn: Turn, text: str, key: RespondKey | None = None) -> Turn:
        """Name the reserved round (session id, message uuid) durably, then run its process.

        The methods reserved the round (a send), so there is no ``key``."""
        setup = self._setup()
        turn_id, round_ = turn.turn_id, turn.round
        message_uuid = str(uuid.uuid4())
        new_id = str(uuid.uuid4())

        def name(conn: apsw.Connection) -> tuple[str, str, bool]:
            inv = sessions.invocation(conn, turn_id, round_)
            assert inv is not None, (turn_id, round_)
            session = sessions.get(conn, inv.session_id)
            assert session is not None
            resumed = session.thread_id is not None
            if not resumed:
                session = sessions.update(conn, session, thread_id=new_id)
            sessions.update_invocation(conn, inv, native_turn_id=message_uuid)
            assert session.thread_id is not None
            return session.thread_id, session.workspace, resumed

        session_id, cwd, resumed = await transact(self._store, name)
        file = transcript.path(setup.config_dir, cwd, session_id)
        size = await trio.to_thread.run_sync(_size, file)
        if resumed and size is None:
            return await self._history_missing(turn)
        start = Resume(session_id) if resumed else NewSession(session_id)
        plan = RoundPlan(
            turn_id=turn_id, round=round_, start=start, cwd=cwd, text=text,
            message_uuid=message_uuid, transcript_start=size or 0,
        )  # fmt: skip
        host = await self._runs.run(plan, lambda: self._wake(turn_id))
        await self._follow(turn_id, restarted=False)
        with trio.move_on_after(START_TIMEOUT):
            await host.written.wait()
        if host.board.unsent is not None:
            raise RpcError(
                Reason.INTERNAL,
                f"{host.board.unsent}; nothing was sent. Turn {turn_id} ends failed (not_sent) "
                "once the store writes again; free space, then send again",
                data={"turn_id": turn_id},
            )
        fresh = await self._ctx.reader.run(lambda conn: turns.get(conn, turn_id))
        assert fresh is not None
        return fresh

    async def _history_missing(self, turn: Turn) -> Turn:
        """The policy resumed a session whose transcript is gone: nothing is started (a
        fresh conversation under its id would lose its history unsaid). The session's
        history is `missing`, so the next send rebuilds it; the Turn fails, nothing sent."""
        turn_id, round_, now = turn.turn_id, turn.round, time.time()
        why = (
            "the session's transcript is gone, so Claude cannot resume it; nothing was sent. "
            "Send again: AKK will rebuild the session (pass a handoff so the new one knows "
            "the task)"
        )

        def fail(conn: apsw.Connection) -> Turn:
            failed, inv = sessions.fail_unsent(
                conn, turn_id, round_, reason="history_missing", summary=why, now=now
            )
            session = sessions.get(conn, inv.session_id)
            if session is not None:
                sessions.update(conn, session, history=policy.History.MISSING)
            return failed

        log.warning("turn %s: its session's transcript is gone; nothing was sent", turn_id)
        return await transact(self._store, fail)

    async def confirm_ended(self, turn: Turn, invocation: sessions.InvocationRow) -> str:
        """The settled round's process is gone (this run's host ended it, or its pid is
        another process now): its cleanup is confirmed. settled, running or unknown.

        A process this run holds is wound down (`RunHost.wind_down`: it ends within its
        grace and the ladder); one an earlier AKK left is ended now (nobody can answer it).
        """
        host = self._runs.host(turn.turn_id)
        if host is not None and host.board.exit is None:
            host.wind_down("its Turn settled")
            return "running"
        try:
            facts = json.loads(turn.evidence or "{}")
        except ValueError:
            return "unknown"
        if host is None and not await end_orphan(facts, turn.turn_id):
            return "running"
        pid, ticks = facts.get("pid"), facts.get("start_ticks")
        if isinstance(pid, int) and isinstance(ticks, int) and start_ticks(pid) == ticks:
            return "running"
        if host is not None:
            self._runs.forget(turn.turn_id)
        now = time.time()

        def confirm(conn: apsw.Connection) -> None:
            fresh = sessions.invocation(conn, invocation.turn_id, invocation.round)
            if fresh is not None and fresh.cleanup != "confirmed":
                sessions.update_invocation(conn, fresh, cleanup="confirmed", cleanup_at=now)

        await transact(self._store, confirm)
        return "settled"

    def _setup(self) -> ClaudeSetup:
        setup = self._runs.setup
        if isinstance(setup, str):
            raise RpcError(
                Reason.UNSUPPORTED_VERSION,
                f"this server has no Claude for the headless backend: {setup}; nothing "
                "was started. Start akk serve with --claude-bin (and --claude-config-dir), "
                'or send with backend "codex_app_server" or into a terminal',
            )
        return setup

    async def _accepted(self) -> ClaudeSetup:
        """The setup, if its Claude may run now: pinned, or qualified with the headless
        proof for the binary at its path now (hashed again if the file changed).

        Raises RpcError unsupported_version with the reason and the next step. Read at
        every send, so a revoked row or a swapped binary stops the next one.
        """
        setup = self._setup()
        if setup.pinned:
            return setup
        setup = await rehashed(setup)
        self._runs.setup = setup  # the next send hashes again only if the file changes
        registry = self._registry

        def row(conn: apsw.Connection) -> qualifications.Entry | None:
            entries = qualifications.load(conn, registry.base_agents)
            return next((e for e in entries if (e.agent, e.version) == ("claude", setup.version)),
                        None)  # fmt: skip

        why = refusal(setup, await self._ctx.reader.run(row), registry)
        if why is not None:
            raise RpcError(
                Reason.UNSUPPORTED_VERSION,
                f"this server's Claude may not run headless: {why}; nothing was started",
            )
        return setup

    # -- interactions (answers.py)

    async def shown(self, turn: Turn, controller_id: str) -> dict[str, Any] | None:
        return await self._answers.shown(turn, controller_id)

    async def approve(
        self, turn: Turn, row: Interaction, controller_id: str, value: str
    ) -> dict[str, Any]:
        return await self._answers.approve(turn, row, controller_id, value)

    async def respond(
        self, turn: Turn, row: Interaction, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._answers.respond(turn, row, controller_id, params)

    async def still_asked(self, turn: Turn, row: Interaction, notification_id: str) -> None:
        await self._answers.still_asked(turn, row, notification_id)

    def check_respond(self, turn: Turn) -> None:
        self._answers.check_respond(turn)


def _size(file: os.PathLike[str]) -> int | None:
    try:
        return os.stat(file).st_size
    except FileNotFoundError:
        return None
