"""Interactions of Turns on a headless Claude: offers in `status`, and their answers.

The same contract as the other backends' (akk.backends.codex_app_server.answers):
a `can_use_tool` request the Turn's process made is recorded as an interaction
with its wake-up (`remember_asked`, which the Turn's follower runs in its
announce, and `shown`), offered to the Turn's owner by `status`, and answered
only through that fresh offer, by opaque ids (`prompts`). A permission takes
`approve` (`approve_once` = allow with the input unchanged, `reject` = deny;
never "always", never permission updates); an `AskUserQuestion` takes
`respond_interaction` with every question's answer at once. A request AKK does
not answer is `manual_required`, announced at once, and refused with that
reason. Every refusal here sends nothing; the answer itself is written by the
Turn's RunActor (`actor.Answer`), fenced again there, reserved first, once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import apsw

from akk.actors.store import transact
from akk.backends.claude_headless.actor import Answer, RunMessage
from akk.backends.claude_headless.board import RunBoard
from akk.backends.claude_headless.prompts import (
    HeadlessPrompt,
    answers_response,
    decision_response,
)
from akk.backends.context import BackendContext
from akk.backends.contract import AnswerReceipt, Refusal
from akk.backends.offers import check_offer, settle_lost, unoffered
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorError, ActorRef, AskTimeout
from akk.screen.fingerprint import IdMinter
from akk.store import interactions, turns
from akk.store.database import StoreUnwritable
from akk.store.dispatches import Kind
from akk.store.interactions import Interaction, InteractionState, Offer, Sighting
from akk.store.turns import Turn

ANSWER_TIMEOUT = 60.0
"""How long an answer may wait for the Turn's RunActor (past it: uncertain, never resent)."""


class Host(Protocol):
    """One round's process as the run side keeps it (`host.RunHost`)."""

    @property
    def board(self) -> RunBoard:
        """What the process said (its pending requests)."""
        ...

    @property
    def ref(self) -> ActorRef[RunMessage]:
        """Its RunActor, the only writer to the process."""
        ...


class Hosts(Protocol):
    """Each Turn's latest round's process in this run of AKK (`host.RunDesk`)."""

    def host(self, turn_id: str) -> Host | None:
        """None: no process of ``turn_id`` was started in this run."""
        ...


def prompts_of(turn: Turn, board: RunBoard | None, ids: IdMinter) -> list[HeadlessPrompt]:
    """The interactions ``turn``'s process asks now, oldest first (none once it settled, or
    once the process wrote its `result`: its round is over)."""
    if board is None or not board.alive or board.result is not None or not turn.unresolved:
        return []
    return board.prompts(ids, turn.turn_id)


def sighting(prompt: HeadlessPrompt, board: RunBoard) -> Sighting:
    """The store's record of one prompt (one request of one process: one step)."""
    version = board.init.claude_code_version if board.init is not None else None
    return Sighting(
        interaction_id=prompt.interaction_id,
        terminal_id=None,
        kind=prompt.kind.value,
        seen=prompt.seen,
        profile=f"claude-headless-{version or 'unknown'}",
        step_index=1,
        step_total=1,
        projection=prompt.projection,
    )


def remember_asked(
    conn: apsw.Connection,
    turn: Turn,
    found: Sequence[HeadlessPrompt],
    board: RunBoard,
    now: float,
) -> bool:
    """Record the prompts ``found`` on ``turn``'s board (`prompts_of`); True when one was new.

    Each new one writes its wake-up in this transaction: `approval_required`, or
    `interaction_required` for a questionnaire and for a manual_required request
    (said to the controller at once). The follower's announce runs it.
    """
    new = False
    for prompt in found:
        new |= interactions.remember(conn, turn, sighting(prompt, board), now)[1]
    return new


class HeadlessAnswers:
    """The interaction methods of the headless Claude `TurnBackend` (its class delegates)."""

    def __init__(self, ctx: BackendContext, *, hosts: Hosts) -> None:
        self._store = ctx.store
        self._reader = ctx.reader
        self._ids = ctx.ids
        self._destinations = ctx.destinations
        self._offer_seconds = ctx.offer_minutes * 60
        self._hosts = hosts

    def prompts(self, turn: Turn) -> list[HeadlessPrompt]:
        """What ``turn``'s process asks now, oldest first."""
        return prompts_of(turn, self._board(turn), self._ids)

    async def shown(self, turn: Turn, controller_id: str) -> dict[str, Any] | None:
        """The first request the process asks, recorded and (to its owner) offered.

        A manual_required one is shown, never offered (nothing may answer it).
        """
        board = self._board(turn)
        found = prompts_of(turn, board, self._ids)
        if board is None or not found:
            return None
        prompt = found[0]
        offer = turn.answerable_by(controller_id) and prompt.actionable
        now = time.time()

        def record(conn: apsw.Connection) -> tuple[Interaction, bool]:
            fresh = turns.get(conn, turn.turn_id)
            assert fresh is not None
            row, new = interactions.remember(conn, fresh, sighting(prompt, board), now)
            if offer and row.state is InteractionState.PENDING:
                interactions.offer(conn, row, controller_id, now=now, lifetime=self._offer_seconds)
            return row, new

        try:
            row, new = await transact(self._store, record)
        except StoreUnwritable as exc:
            return await unoffered(self._reader, prompt.projection, exc)
        if new:
            self._destinations.wake(turn.controller_id)
        return row.public()

    async def still_asked(self, turn: Turn, row: Interaction, notification_id: str) -> None:
        """The process still asks ``row`` (the same request, the same fingerprint)."""
        if self._prompt(turn, row) is None:
            raise RpcError(
                Reason.PROMPT_CHANGED,
                f"notification {notification_id} is about a request Claude no longer asks (it "
                "was answered or withdrawn, or its process ended); it is obsolete and will not "
                "be sent again. Call status",
            )

    def check_respond(self, turn: Turn) -> None:
        """A headless session continues with the next send of its scope, not `respond`."""
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"{turn.turn_id} runs on headless Claude: its session continues with the next send "
            "of the same scope and role (session_decision resume), not with respond",
        )

    async def approve(
        self, turn: Turn, row: Interaction, controller_id: str, value: str
    ) -> dict[str, Any]:
        prompt, offer = await self._fenced(turn, row, controller_id)
        response = decision_response(prompt, value)
        return await self._send(turn, row, offer, prompt, Kind.APPROVAL, response)

    async def respond(
        self, turn: Turn, row: Interaction, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        prompt, offer = await self._fenced(turn, row, controller_id)
        if params.get("delivery_mode") is not None:
            raise RpcError(
                Reason.INVALID_PARAMS,
                "Claude's question blocks its turn until it is answered: send the answers "
                "without delivery_mode",
            )
        response = answers_response(prompt, params["answers"], self._ids)
        return await self._send(turn, row, offer, prompt, Kind.ANSWER, response)

    # -- the shared path

    def _board(self, turn: Turn) -> RunBoard | None:
        host = self._hosts.host(turn.turn_id)
        return None if host is None else host.board

    def _prompt(self, turn: Turn, row: Interaction) -> HeadlessPrompt | None:
        return next((p for p in self.prompts(turn) if p.interaction_id == row.interaction_id), None)

    async def _fenced(
        self, turn: Turn, row: Interaction, controller_id: str
    ) -> tuple[HeadlessPrompt, Offer]:
        """The prompt ``row`` is, still asked, with this controller's fresh offer of it."""
        if row.state is InteractionState.CONSUMED:
            raise RpcError(
                Reason.CONFLICT,
                f"interaction {row.interaction_id} was already answered; an answered prompt "
                "never takes input again. Call status for the current interaction",
            )
        prompt = self._prompt(turn, row)
        if prompt is not None and not prompt.actionable:
            raise RpcError(
                Reason.MANUAL_REQUIRED,
                f"AKK does not answer this request ({prompt.projection['manual_reason']}); a "
                "person must, outside AKK. Nothing was sent",
            )
        offer = await self._reader.run(
            lambda conn: interactions.offer_of(conn, row.interaction_id, controller_id)
        )
        check_offer(row, offer, prompt is not None)
        if row.state is InteractionState.GONE or prompt is None:
            raise RpcError(
                Reason.PROMPT_CHANGED,
                "Claude no longer asks what this answer was for; nothing was sent. Call status "
                "for the current interaction",
            )
        assert offer is not None
        return prompt, offer

    async def _send(
        self,
        turn: Turn,
        row: Interaction,
        offer: Offer,
        prompt: HeadlessPrompt,
        kind: Kind,
        response: dict[str, Any],
    ) -> dict[str, Any]:
        message = Answer(
            turn_id=turn.turn_id, controller_id=offer.controller_id,
            interaction_id=row.interaction_id, offer_id=offer.offer_id,
            request_id=prompt.request_id, fingerprint=prompt.seen.fingerprint, kind=kind,
            response=response,
        )  # fmt: skip
        reply = await self._ask(turn, message)
        if isinstance(reply, Refusal):
            raise RpcError(reply.reason, reply.message)
        if not reply.proven:
            self._destinations.wake(turn.controller_id)
            raise RpcError(
                Reason.RESPONSE_UNCERTAIN,
                f"{reply.why}; it may have reached Claude and will not be sent again. Call status",
            )
        return {
            "outcome": "dispatched",
            "interaction_id": row.interaction_id,
            "dispatch_id": reply.dispatch.dispatch_id,
        }

    async def _ask(self, turn: Turn, message: Answer) -> AnswerReceipt | Refusal:
        """The Turn's RunActor writes ``message``; a lost ask is proven unsent or uncertain."""
        host = self._hosts.host(turn.turn_id)
        if host is None:
            return Refusal(
                Reason.PROMPT_CHANGED,
                "the Claude process of this Turn has ended; nothing was sent. Call status",
            )
        try:
            return await host.ref.ask(message, timeout=ANSWER_TIMEOUT)
        except AskTimeout as exc:
            if not exc.delivered:
                raise RpcError(
                    Reason.INTERNAL,
                    "the Turn's Claude actor was too busy to take the answer; nothing was sent; "
                    "try again",
                ) from None
            why = "the answer did not finish in time"
        except ActorError as exc:
            why = f"the Turn's Claude actor stopped during the answer ({exc.reason})"
        refused = await settle_lost(
            self._store, message.turn_id, message.interaction_id, message.offer_id, why
        )
        if refused is not None:
            return refused
        self._destinations.wake(turn.controller_id)
        raise _uncertain(why)


def _uncertain(why: str) -> RpcError:
    return RpcError(
        Reason.RESPONSE_UNCERTAIN,
        f"{why}; it may have reached Claude and will not be sent again. Call status",
    )
