"""The terminal backend's answers: a screen's prompt shown, offered and answered by keys.

`shown` records what the Turn's pane asks (and the owner's offer); `approve`
and `respond` turn an answer into one DispatchAnswer for the pane's
TerminalActor, which proves the screen again and reserves before any key. A
refusal here or there sends zero keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from akk.actors.store import transact
from akk.actors.terminal_board import (
    TerminalBoard,
    TerminalSnapshot,
    project_snapshot,
    sighting,
)
from akk.backends.context import BackendContext
from akk.backends.contract import AnswerReceipt, History, Refusal, RespondKey, Task
from akk.backends.offers import check_offer, unoffered
from akk.backends.terminal.resolve import Answer, decision, resolve
from akk.backends.terminal.rounds import TerminalRounds
from akk.backends.terminal.steps import DispatchAnswer
from akk.backends.terminal.witness import TerminalWitness
from akk.profiles.observation import InteractionKind, PromptView, State
from akk.protocol.errors import Reason, RpcError
from akk.protocol.projection import Shown
from akk.protocol.text_check import check_text
from akk.runtime.actor import ActorError, ActorRef, AskTimeout
from akk.screen.fingerprint import Appearance
from akk.store import dispatches, interactions, turns
from akk.store.database import StoreUnwritable
from akk.store.interactions import Interaction, InteractionState
from akk.store.sessions import InvocationRow
from akk.store.turns import Turn

ANSWER_TIMEOUT = 60.0


class TerminalAnswers:
    """The `TurnBackend` of a Turn typed into a terminal (and the watches' witness).

    ``board``: the supervised panes; ``accept_seconds``: how long a typed round's
    acceptance may stay unproven.
    """

    name = turns.TERMINAL
    keeps_sessions = False

    def __init__(self, ctx: BackendContext, *, board: TerminalBoard, accept_seconds: float) -> None:
        self._store = ctx.store
        self._reader = ctx.reader
        self._board = board
        self._ids = ctx.ids
        self._destinations = ctx.destinations
        self._offer_seconds = ctx.offer_minutes * 60
        self._rounds = TerminalRounds(ctx, board=board, accept_seconds=accept_seconds)
        self.witness = TerminalWitness(board=board, reader=ctx.reader, follow=self._rounds.follow)

    async def follow_again(self, turn_id: str, *, restarted: bool) -> None:
        """A pane's Turn reconciles from its screen and file, whether or not AKK restarted."""
        await self._rounds.follow(turn_id)

    async def start(self, task: Task) -> Turn | Refusal:
        return await self._rounds.start(task)

    async def dispatch(self, turn: Turn, text: str, key: RespondKey | None = None) -> Turn:
        return await self._rounds.dispatch(turn, text, key)

    async def history(self, workspace: str) -> History:
        """A terminal keeps no sessions: its conversation is the pane's own."""
        raise RpcError(
            Reason.INVALID_PARAMS,
            "a terminal keeps no sessions (its conversation is the pane's own); to type into "
            "one, send with terminal_id, or send with scope and the app-server backend",
        )

    async def confirm_ended(self, turn: Turn, invocation: InvocationRow) -> str:
        """A terminal Turn has no invocations: its round ends on the screen (recover proves it)."""
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"{turn.turn_id} was typed into a terminal, which keeps no session rounds; call "
            "recover {turn_id} to reconcile it from its screen",
        )

    async def shown(self, turn: Turn, controller_id: str) -> dict[str, Any] | None:
        """The projection of the prompt the Turn's terminal shows now, if any.

        Records the interaction (and its wake-up, if nobody recorded it yet) and,
        when ``controller_id`` owns the Turn and AKK may answer the prompt, that
        controller's offer: what it saw may be answered for the next minutes.
        """
        snapshot = self._board.get(turn.terminal_id or "")
        if snapshot is None or snapshot.busy or turn.closed_at is not None:
            return None
        if not turn.unresolved and not _next_turn_question(turn, snapshot):
            return None
        shown = project_snapshot(snapshot, self._ids, turn.ids["turn_id"])
        if shown is None:
            return None
        # A Watch never answers: what it shows is never offered.
        mine = turn.answerable_by(controller_id)
        now, offer = time.time(), mine and shown.actionable

        def record(conn: Any) -> tuple[Interaction, bool] | None:
            # As stored now: a close, unwatch or settle since the read above decides.
            fresh = turns.get(conn, turn.turn_id)
            if fresh is None or fresh.closed_at is not None:
                return None
            if not fresh.unresolved and (
                not _next_turn_question(fresh, snapshot)
                or turns.unresolved_on(conn, fresh.terminal_id or "")
            ):
                return None  # nothing of it is asked, or another record follows the terminal
            row, new = interactions.remember(conn, fresh, sighting(snapshot, shown), now)
            if offer and row.state is InteractionState.PENDING:
                interactions.offer(conn, row, controller_id, now=now, lifetime=self._offer_seconds)
            return row, new

        try:
            recorded = await transact(self._store, record)
        except StoreUnwritable as exc:
            return await unoffered(self._reader, shown.projection, exc)
        if recorded is None:
            return None
        row, new = recorded
        if new:  # this call saw the appearance before the Turn did: its wake-up goes out now
            self._destinations.wake(turn.controller_id)
        return row.public()

    async def approve(
        self, turn: Turn, row: Interaction, controller_id: str, value: str
    ) -> dict[str, Any]:
        return await self._answer(
            turn, row, controller_id, lambda prompt, _seen: decision(prompt, value)
        )

    async def respond(
        self, turn: Turn, row: Interaction, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        def answer(prompt: PromptView, seen: Appearance) -> Answer:
            return resolve(
                prompt,
                params["answers"],
                seen=seen,
                ids=self._ids,
                delivery_mode=params.get("delivery_mode"),
            )

        return await self._answer(turn, row, controller_id, answer)

    async def still_asked(self, turn: Turn, row: Interaction, notification_id: str) -> None:
        """The prompt ``row`` is still on the pane's screen, and the pane is not mid-step."""
        snapshot = self._board.get(row.terminal_id or "")
        if snapshot is not None and snapshot.busy:
            raise RpcError(
                Reason.CONFLICT,
                f"the terminal of notification {notification_id} shows a passing screen "
                "(an input step's, or a prompt whose call the agent is still writing), so AKK "
                "cannot tell whether its question is still asked; call retry_callback again "
                "in a moment",
            )
        if snapshot is None or snapshot.seen != row.seen:
            raise RpcError(
                Reason.PROMPT_CHANGED,
                f"notification {notification_id} is about a question that is no "
                "longer on the screen (it was answered there, or left it); it is obsolete and "
                "will not be sent again. Call status to see what the terminal asks now",
            )

    def check_respond(self, turn: Turn) -> None:
        """A terminal Turn continues with `respond` (a new composer message)."""

    async def _answer(
        self,
        turn: Turn,
        row: Interaction,
        controller_id: str,
        make: Callable[[PromptView, Appearance], Answer],
    ) -> dict[str, Any]:
        if row.state is InteractionState.CONSUMED:
            raise RpcError(
                Reason.CONFLICT,
                f"interaction {row.interaction_id} was already answered; an answered prompt "
                "never takes input again. Call status for the current interaction",
            )
        offer = await self._reader.run(
            lambda conn: interactions.offer_of(conn, row.interaction_id, controller_id)
        )
        shown = self._on_screen(turn)
        still_there = shown is not None and shown.seen == row.seen
        if still_there and shown is not None and shown.prompt is None:
            raise RpcError(
                Reason.MANUAL_REQUIRED,
                "a person must handle this screen at the terminal (status shows why); "
                "nothing was sent",
            )
        check_offer(row, offer, still_there)
        if row.state is InteractionState.GONE or not still_there or shown is None:
            raise RpcError(
                Reason.PROMPT_CHANGED,
                "the prompt on screen is no longer the one this answer was for; nothing was "
                "sent. Call status for the current interaction",
            )
        assert offer is not None and shown.prompt is not None
        answer = make(shown.prompt, shown.seen)
        terminal = self._board.ref(turn.terminal_id or "")
        snapshot = self._board.get(turn.terminal_id or "")
        if terminal is None or snapshot is None:
            raise RpcError(Reason.NOT_FOUND, "the Turn's terminal is gone; nothing was sent")
        profile = snapshot.profile
        if answer.text is not None and profile is not None:
            # The editor's own specials, before the actor is asked (its proof checks them too).
            check_text(
                answer.text, "the free text", specials=profile.editor_typing.specials, lines=False
            )
        message = DispatchAnswer(
            turn_id=turn.turn_id,
            controller_id=controller_id,
            interaction_id=row.interaction_id,
            offer_id=offer.offer_id,
            seen=row.seen,
            answer=answer,
        )
        receipt = await self._dispatch(terminal, message)
        if isinstance(receipt, Refusal):
            if receipt.reason is Reason.RESPONSE_UNCERTAIN and answer.next_turn:
                # Its keys went out unrecorded (`StageUnrecorded`) and may have started the
                # Turn's next round: followed, it settles from its evidence.
                await self._rounds.follow(turn.turn_id)
            raise RpcError(receipt.reason, receipt.message)
        if receipt.next_round_at is not None:
            # The answer started the Turn's next round: follow it to its own outcome.
            await self._rounds.follow(turn.turn_id, enter_at=receipt.next_round_at)
        if not receipt.proven:
            self._destinations.wake(turn.controller_id)
            raise RpcError(
                Reason.RESPONSE_UNCERTAIN,
                f"the answer's keys went out but AKK cannot prove they took effect "
                f"({receipt.why}); it will not send them again. Look at the terminal",
            )
        return {
            "outcome": "dispatched",
            "interaction_id": row.interaction_id,
            "dispatch_id": receipt.dispatch.dispatch_id,
        }

    def _on_screen(self, turn: Turn) -> Shown | None:
        snapshot = self._board.get(turn.terminal_id or "")
        return None if snapshot is None else project_snapshot(snapshot, self._ids, turn.turn_id)

    async def _dispatch(
        self, terminal: ActorRef, message: DispatchAnswer
    ) -> AnswerReceipt | Refusal:
        try:
            return await terminal.ask(message, timeout=ANSWER_TIMEOUT)
        except AskTimeout as exc:
            if not exc.delivered:
                raise RpcError(
                    Reason.INTERNAL,
                    "the terminal was too busy to take the answer; nothing was sent; try again",
                ) from None
            raise RpcError(
                Reason.RESPONSE_UNCERTAIN,
                "the answer did not finish in time and may have been sent; AKK will not send it "
                "again. Call status",
            ) from None
        except ActorError as exc:
            turn_id, interaction_id = message.turn_id, message.interaction_id
            steps = await self._reader.run(lambda conn: dispatches.of_turn(conn, turn_id))
            if not any(step.interaction_id == interaction_id for step in steps):
                # Keys come only after the reservation: none was recorded, so none went out.
                raise RpcError(
                    Reason.INTERNAL,
                    f"the terminal failed before it reserved the answer ({exc.reason}); "
                    "nothing was sent. Call status, then answer again",
                ) from None
            raise RpcError(
                Reason.RESPONSE_UNCERTAIN,
                f"the terminal failed during the answer ({exc.reason}); it may have been sent "
                "and will not be sent again. Call status",
            ) from None


def _next_turn_question(turn: Turn, snapshot: TerminalSnapshot) -> bool:
    """A settled Turn's agent, idle, still shows an async question: answering it
    (queue_next_turn) starts the Turn's next round, so it is shown and offered."""
    prompt = snapshot.observation.prompt
    return (
        turn.state.settled
        and not turn.is_watch
        and snapshot.observation.state is State.ASYNC_QUESTION
        and prompt is not None
        and prompt.kind is InteractionKind.ASYNC_QUESTION
    )
