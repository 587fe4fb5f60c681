"""The terminal backend's rounds: a task typed into a pane as a new Turn, or as its next round.

The pane's TerminalActor reserves the dispatch in the transaction before its
first key, so a round it refused, or one that failed before the reservation,
typed nothing. The text rule with the pane's own version's specials is checked
here, before the actor is asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot
from akk.backends.context import BackendContext
from akk.backends.contract import Refusal, RespondKey, Task
from akk.backends.terminal.follow import TerminalFollower
from akk.backends.terminal.steps import DispatchRespond, DispatchTask, TaskReceipt
from akk.protocol.errors import Reason, RpcError
from akk.protocol.text_check import check_text
from akk.runtime.actor import ActorError, ActorRef, AskTimeout
from akk.store import dispatches, turns
from akk.store.turns import Turn

DISPATCH_TIMEOUT = 60.0


class TerminalRounds:
    """Types a Turn's rounds through its pane's TerminalActor and follows the Turn.

    ``accept_seconds``: how long a typed round's acceptance may stay unproven.
    """

    def __init__(self, ctx: BackendContext, *, board: TerminalBoard, accept_seconds: float) -> None:
        self._ctx = ctx
        self._reader = ctx.reader
        self._board = board
        self._accept_seconds = accept_seconds

    async def follow(self, turn_id: str, *, enter_at: float | None = None) -> None:
        """Start following the Turn or Watch ``turn_id`` on its pane (idempotent).

        ``enter_at``: when its round's Enter went out (trio time; None: unknown).
        """
        ctx = self._ctx
        await ctx.desk.follow(
            turn_id,
            lambda: TerminalFollower(
                turn_id, store=ctx.store, reader=ctx.reader.run, board=self._board, ids=ctx.ids,
                enter_at=enter_at, accept_seconds=self._accept_seconds,
            ),
        )  # fmt: skip

    async def start(self, task: Task) -> Turn | Refusal:
        """Type ``task`` as a new Turn on its terminal (see `TurnBackend.start`)."""
        terminal, snapshot = self._board.ref(task.terminal_id), self._board.get(task.terminal_id)
        if terminal is None or snapshot is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"no terminal {task.terminal_id!r} (its pane closed or its agent restarted); "
                "call list for the current terminal ids",
            )
        _check_typeable(snapshot, task.text)
        controller_id, client_request_id = task.controller_id, task.client_request_id
        message = DispatchTask(
            controller_id=controller_id,
            client_request_id=client_request_id,
            text=task.text,
            inactivity_seconds=task.inactivity_seconds,
            lifetime_seconds=task.lifetime_seconds,
        )
        receipt = await self._ask(
            terminal,
            message,
            lambda conn: _turn_id(turns.by_request(conn, controller_id, client_request_id)),
        )
        if isinstance(receipt, Refusal):
            return receipt
        return await self._follow(receipt)

    async def dispatch(self, turn: Turn, text: str, key: RespondKey | None = None) -> Turn:
        """Type ``text`` as the settled ``turn``'s next round (`respond`), ``key`` recorded
        in its reservation."""
        turn_id = turn.turn_id
        terminal = self._board.ref(turn.terminal_id or "")
        snapshot = self._board.get(turn.terminal_id or "")
        if terminal is None or snapshot is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"turn {turn_id}'s terminal is gone (its pane closed or its agent restarted); "
                "send a new task to another terminal",
            )
        _check_typeable(snapshot, text)
        before = len(await self._reader.run(lambda conn: dispatches.of_turn(conn, turn_id)))
        receipt = await self._ask(
            terminal,
            DispatchRespond(turn_id, text, key),
            lambda conn: turn_id if len(dispatches.of_turn(conn, turn_id)) > before else None,
        )
        if isinstance(receipt, Refusal):
            raise RpcError(receipt.reason, receipt.message)
        return await self._follow(receipt)

    async def _follow(self, receipt: TaskReceipt) -> Turn:
        if receipt.turn.unresolved:
            await self.follow(receipt.turn.turn_id, enter_at=receipt.enter_at)
        return receipt.turn

    async def _ask(
        self,
        terminal: ActorRef,
        message: DispatchTask | DispatchRespond,
        reserved: Callable[[Any], str | None],
    ) -> TaskReceipt | Refusal:
        """Ask the terminal to type ``message``; ``reserved`` tells (in the store) the Turn whose
        dispatch it reserved, if it did: before that no key can have been sent."""
        try:
            reply: TaskReceipt | Refusal = await terminal.ask(message, timeout=DISPATCH_TIMEOUT)
        except AskTimeout as exc:
            if not exc.delivered:
                raise RpcError(
                    Reason.INTERNAL, "the terminal was too busy to take the task; nothing was "
                    "sent; try again",
                ) from None  # fmt: skip
            raise RpcError(
                Reason.RESPONSE_UNCERTAIN,
                "the dispatch did not finish in time and may have typed the task; AKK will not "
                "type it again. Call list or status to see the Turn",
            ) from None
        except ActorError as exc:
            turn_id = await self._reader.run(reserved)
            if turn_id is None:
                # Keys come only after the reservation: none was recorded, so none went out.
                raise RpcError(
                    Reason.INTERNAL,
                    f"the terminal failed before it reserved the dispatch ({exc.reason}); "
                    "nothing was typed. Call list, then send again",
                ) from None
            # Its receipt is lost, not its Turn: followed, it settles from its evidence (or
            # uncertain), as after a restart, instead of holding the terminal for good.
            await self.follow(turn_id)
            raise RpcError(
                Reason.RESPONSE_UNCERTAIN,
                f"the terminal failed during the dispatch ({exc.reason}); the task may have been "
                "typed and will not be typed again. Call list to see the Turn",
            ) from None
        if isinstance(reply, Refusal) and reply.reason is Reason.RESPONSE_UNCERTAIN:
            # Keys went out and the store could not record their stage (`StageUnrecorded`):
            # followed, the Turn settles from its evidence once the store writes again.
            turn_id = await self._reader.run(reserved)
            if turn_id is not None:
                await self.follow(turn_id)
            raise RpcError(reply.reason, reply.message)
        return reply


def _turn_id(turn: Turn | None) -> str | None:
    return None if turn is None else turn.turn_id


def _check_typeable(snapshot: TerminalSnapshot, text: str) -> None:
    """The text rule with the specials of the pane's own version, before the actor is asked.

    A pane without an exact profile is refused by the TerminalActor (unsupported_version).
    """
    profile = snapshot.profile
    if profile is not None:
        check_text(text, "request", specials=profile.typing.specials)
