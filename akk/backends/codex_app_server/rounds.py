"""The app-server backend's rounds and session facts: its process, its binding, its threads.

`history` describes what the session policy decides from (the thread config a
new thread would bind to, whether resuming it is verified, the threads the
process holds); `dispatch` runs a round the methods reserved (turn/start on
its thread); `confirm_ended` proves, read-only, that a settled Turn's native
turn no longer runs. The app-server has no terminal: `start` refuses.
"""

from __future__ import annotations

import time

import apsw

from akk.actors.store import transact
from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.actor import ReadBinding, ReadThread, StartTurn, Unsent
from akk.backends.codex_app_server.follow import AppServerFollower
from akk.backends.codex_app_server.host import BackendDesk, BackendHost
from akk.backends.codex_app_server.results import Unreadable
from akk.backends.codex_app_server.schema import RESUME_VERIFIED
from akk.backends.context import BackendContext
from akk.backends.contract import History, Refusal, RespondKey, Task
from akk.backends.names import CODEX_APP_SERVER
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorError, AskTimeout
from akk.store import sessions
from akk.store.turns import Turn

START_TIMEOUT = 60.0
"""How long a dispatch waits for the BackendActor's receipt (thread and turn/start)."""


class AppServerRounds:
    """Runs reserved rounds on the app-server process and describes its session facts."""

    def __init__(self, ctx: BackendContext, *, hosts: BackendDesk) -> None:
        self._ctx = ctx
        self._store = ctx.store
        self._hosts = hosts

    async def follow(
        self, turn_id: str, *, generation: int | None, restarted: bool = False
    ) -> None:
        """Start following the app-server Turn ``turn_id`` (idempotent).

        ``generation``: the app-server process its receipt came from (None: unknown,
        so the Turn reconciles from the thread first). ``restarted``: AKK started
        since its reservation, so no dispatch of it can still be under way.
        """
        ctx = self._ctx
        await ctx.desk.follow(
            turn_id,
            lambda: AppServerFollower(
                turn_id, store=ctx.store, reader=ctx.reader.run, backends=self._hosts,
                ids=ctx.ids, generation=generation, restarted=restarted,
            ),
        )  # fmt: skip

    async def start(self, task: Task) -> Turn | Refusal:
        """The app-server's Turns are reserved by the methods (a session's send)."""
        return Refusal(
            Reason.INVALID_PARAMS,
            "an app-server Turn runs in a session: send with scope (or session_id) and backend "
            f'"{CODEX_APP_SERVER}", not with terminal_id',
        )

    async def history(self, workspace: str) -> History:
        """The process's binding for ``workspace`` and its resume and thread facts."""
        host = await self._host()
        _check_store(host)
        try:
            binding = await host.ref.ask(ReadBinding(workspace), timeout=START_TIMEOUT)
        except (ActorError, rpc.AppServerError) as exc:
            _check_store(host)
            raise RpcError(
                Reason.INTERNAL,
                f"the app-server did not answer config/read ({exc}); nothing was started. "
                "Try again; `akk doctor` checks the app-server",
            ) from None
        if isinstance(binding, Refusal):
            raise RpcError(
                Reason.INTERNAL,
                f"{binding.message}; nothing was started. Try again; `akk doctor` checks the "
                "app-server",
            )
        return History(
            binding=binding,
            resume_verified=binding.agent_version in RESUME_VERIFIED,
            home=host.setup.home,
            loaded=host.board.loaded,
        )

    async def dispatch(self, turn: Turn, text: str, key: RespondKey | None = None) -> Turn:
        """turn/start of the reserved round ``turn.round`` on its session's thread.

        The methods reserved the round (a send), so there is no ``key``.

        Called after `history` found the process running; a process that ended since
        takes the ask in its successor (the mailbox outlives it).
        """
        host = await self._hosts.host()
        try:
            receipt = await host.ref.ask(
                StartTurn(turn.turn_id, turn.round, text), timeout=START_TIMEOUT
            )
        except (AskTimeout, ActorError) as exc:
            await self.follow(turn.turn_id, generation=None)
            raise RpcError(
                Reason.RESPONSE_UNCERTAIN,
                f"the app-server did not confirm the turn ({exc.reason}); it may have started "
                f"and will not be sent again. Turn {turn.turn_id} reconciles from the thread: "
                "call status {turn_id}",
                data={"turn_id": turn.turn_id},
            ) from None
        if isinstance(receipt, Unsent):
            # It ends `not_sent` once the store writes: its follower knows no start of it
            # can still be under way.
            await self.follow(turn.turn_id, generation=None, restarted=True)
            raise unsent(turn.turn_id, receipt)
        if receipt.turn.unresolved:
            await self.follow(turn.turn_id, generation=receipt.generation)
        return receipt.turn

    async def confirm_ended(self, turn: Turn, invocation: sessions.InvocationRow) -> str:
        """The thread no longer runs the settled ``turn``'s native turn: its cleanup is
        confirmed. What the thread showed: settled, running, missing, unreachable, unreadable
        (thread/read's result of the wrong shape), unknown (no thread), unchecked (no pinned
        Codex to ask)."""
        if not self._hosts.available:
            return "unchecked"
        host = await self._host()
        thread_id = turn.native_session
        if thread_id is None:
            return "unknown"
        try:
            facts = await host.ref.ask(ReadThread(thread_id), timeout=START_TIMEOUT)
        except ActorError:
            return "unreachable"
        if isinstance(facts, Unreadable):
            return "unreadable"
        if not facts.found:
            return "missing"
        record = next((r for r in facts.turns if r.turn_id == invocation.native_turn_id), None)
        live = host.board.turn(invocation.native_turn_id)
        if (record is not None and record.status == "inProgress") or (live and not live.settled):
            return "running"
        now = time.time()

        def confirm(conn: apsw.Connection) -> None:
            fresh = sessions.invocation(conn, invocation.turn_id, invocation.round)
            if fresh is not None and fresh.cleanup != "confirmed":
                sessions.update_invocation(conn, fresh, cleanup="confirmed", cleanup_at=now)

        await transact(self._store, confirm)
        return "settled"

    async def _host(self) -> BackendHost:
        """The running app-server host, started on first use; refused while it is down."""
        setup = self._hosts.setup
        if isinstance(setup, str):
            raise RpcError(
                Reason.UNSUPPORTED_VERSION,
                f"this server has no pinned Codex for the app-server backend: {setup}. Start "
                "akk serve with --codex-bin and --codex-home (`akk doctor` checks them)",
            )
        host = await self._hosts.host()
        await host.board.settled(START_TIMEOUT)
        if not host.board.alive:
            why = host.board.start_error or "it did not start in time"
            raise RpcError(
                Reason.INTERNAL,
                f"the app-server is not running ({why}); nothing was sent. Check it with "
                "`akk doctor --codex-bin … --codex-home …`, then send again",
            )
        return host


def unsent(turn_id: str, receipt: Unsent, *, settled: bool = False) -> RpcError:
    """The refusal of a Turn whose turn/start was never written (nothing reached the agent).
    ``settled``: its round already ended failed (not_sent)."""
    when = "ended" if settled else "ends"
    after = "" if settled else " once the store writes again"
    return RpcError(
        Reason.INTERNAL,
        f"{receipt.why}. Nothing was sent; turn {turn_id} {when} failed (not_sent){after}",
        data={"turn_id": turn_id},
    )


def _check_store(host: BackendHost) -> None:
    """Refuse a new Turn at once while the host's actor waits for a store that cannot write
    (its mailbox is held until the store takes what the app-server did)."""
    problem = host.board.store_wait
    if problem is not None:
        raise RpcError(
            Reason.INTERNAL,
            f"{problem.problem}, so nothing was started: the app-server's backend is waiting to "
            f"record what it did; {problem.next_step}",
        )
