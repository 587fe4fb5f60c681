"""Interactions of Turns on the Codex app-server: offers in `status`, and their answers.

The same contract as a screen's (akk.backends.terminal.answers): an interaction is
recorded with its wake-up, offered to its owner by `status`, and answered only
through that fresh offer, by opaque ids. Its prompts are the app-server's
server requests (approvals, questions; akk.backends.codex_app_server.prompts) and the async
questions an agent leaves. The BackendActor proves, before anything is sent,
that the app-server still asks exactly what the controller saw; a refusal here
or there sends nothing.

An async question is answered like the terminal's: `steer_current_turn` (the
default) joins its running turn (turn/steer, fenced by that turn's id);
`queue_next_turn`, once the turn ended and the Turn is settled but not closed,
starts the Turn's next round in the same session with the answer as its
message.
"""

from __future__ import annotations

import time
from contextlib import suppress
from typing import Any, TypeVar

import apsw
import attrs

from akk import faults
from akk.actors.store import transact, transact_reservation
from akk.backends.codex_app_server.actor import AnswerRequest, StartTurn, Steer, Unsent
from akk.backends.codex_app_server.host import BackendDesk, BackendHost
from akk.backends.codex_app_server.prompts import (
    BackendPrompt,
    answers_result,
    async_message,
    decision_result,
)
from akk.backends.codex_app_server.rounds import AppServerRounds, unsent
from akk.backends.context import BackendContext
from akk.backends.contract import History, Refusal, RespondKey, Task
from akk.backends.names import CODEX_APP_SERVER
from akk.backends.offers import check_offer, offer_refusal, settle_lost, unoffered
from akk.evidence import request_digest
from akk.faults import Point
from akk.profiles.observation import InteractionKind
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorError, Ask, AskTimeout
from akk.sessions.policy import Dispatch as Dispatched
from akk.store import dispatches, interactions, sessions, turns
from akk.store.database import StoreUnwritable
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.interactions import Interaction, InteractionState, Offer
from akk.store.sessions import ThreadIntent
from akk.store.turns import Turn, TurnState

ANSWER_TIMEOUT = 60.0

R = TypeVar("R")


@attrs.frozen
class _NextRound:
    turn: Turn
    dispatch: Dispatch


class AppServerAnswers:
    """The `TurnBackend` of a Turn run on the Codex app-server.

    ``hosts``: the app-server process's desk.
    """

    name = CODEX_APP_SERVER
    keeps_sessions = True
    witness = None

    def __init__(self, ctx: BackendContext, *, hosts: BackendDesk) -> None:
        self._store = ctx.store
        self._reader = ctx.reader
        self._ids = ctx.ids
        self._hosts = hosts
        self._destinations = ctx.destinations
        self._offer_seconds = ctx.offer_minutes * 60
        self._rounds = AppServerRounds(ctx, hosts=hosts)

    async def follow_again(self, turn_id: str, *, restarted: bool) -> None:
        """The Turn reconciles from its thread first (its process is not known)."""
        await self._rounds.follow(turn_id, generation=None, restarted=restarted)

    async def start(self, task: Task) -> Turn | Refusal:
        return await self._rounds.start(task)

    async def dispatch(self, turn: Turn, text: str, key: RespondKey | None = None) -> Turn:
        return await self._rounds.dispatch(turn, text, key)

    async def history(self, workspace: str) -> History:
        return await self._rounds.history(workspace)

    async def confirm_ended(self, turn: Turn, invocation: sessions.InvocationRow) -> str:
        return await self._rounds.confirm_ended(turn, invocation)

    def prompts(self, turn: Turn) -> list[BackendPrompt]:
        """What the app-server asks now for ``turn`` (see BackendBoard.prompts)."""
        host = self._hosts.running
        native_id = turn.native_turn_id
        if host is None or not host.board.alive or native_id is None:
            return []
        return host.board.prompts(native_id, turn, self._ids)

    async def shown(self, turn: Turn, controller_id: str) -> dict[str, Any] | None:
        """The first thing the app-server asks of this Turn, recorded and offered like a
        screen's prompt (a settled, unclosed Turn: only a question its turn left)."""
        if turn.closed_at is not None:
            return None
        prompts = self.prompts(turn)
        if not prompts:
            return None
        prompt = prompts[0]
        offer, now = turn.answerable_by(controller_id) and prompt.actionable, time.time()
        profile = f"codex-app-server-{self._hosts.version}"

        def record(conn: apsw.Connection) -> tuple[Interaction, bool]:
            row, new = interactions.record(
                conn, interaction_id=prompt.interaction_id, terminal_id=None,
                turn_id=turn.turn_id, kind=prompt.kind.value, seen=prompt.seen, profile=profile,
                step_index=1, step_total=1, projection=prompt.projection, now=now,
                announce=turns.get(conn, turn.turn_id),
            )  # fmt: skip
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
        """The app-server still asks ``row`` of ``turn``'s native turn."""
        if row.interaction_id not in [p.interaction_id for p in self.prompts(turn)]:
            raise RpcError(
                Reason.PROMPT_CHANGED,
                f"notification {notification_id} is about a request the "
                "app-server no longer asks (it was answered, or its turn ended); it is "
                "obsolete and will not be sent again. Call status",
            )

    def check_respond(self, turn: Turn) -> None:
        """An app-server thread continues with the next send of its scope, not `respond`."""
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"{turn.turn_id} runs on the app-server: its thread continues with the next send of "
            "the same scope and role (session_decision resume), not with respond",
        )

    async def approve(
        self, turn: Turn, row: Interaction, controller_id: str, value: str
    ) -> dict[str, Any]:
        prompt, offer = await self._fenced(turn, row, controller_id)
        result = decision_result(prompt, value)
        return await self._send(turn, row, offer, prompt, Kind.APPROVAL, result, None)

    async def respond(
        self, turn: Turn, row: Interaction, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        prompt, offer = await self._fenced(turn, row, controller_id)
        mode = params.get("delivery_mode")
        if prompt.kind is not InteractionKind.ASYNC_QUESTION:
            if mode is not None:
                raise RpcError(
                    Reason.INVALID_PARAMS,
                    "this app-server request blocks its turn until it is answered: send the "
                    "answers without delivery_mode",
                )
            result = answers_result(prompt, params["answers"], self._ids)
            return await self._send(turn, row, offer, prompt, Kind.ANSWER, result, None)
        text = async_message(prompt, params["answers"], self._ids)
        if mode == "queue_next_turn":
            if prompt.running:
                raise RpcError(
                    Reason.NOT_IDLE,
                    "the turn that asked still runs: its answer joins it with delivery_mode "
                    "steer_current_turn; queue_next_turn only once the turn has ended",
                )
            return await self._next_round(turn, row, offer, prompt, text)
        if not prompt.running:
            raise RpcError(
                Reason.INVALID_PARAMS,
                "the turn that asked has ended; answer with delivery_mode queue_next_turn, "
                "which starts the Turn's next round with this answer",
            )
        assert prompt.thread_id is not None and prompt.native_turn_id is not None
        steer = Steer(prompt.thread_id, prompt.native_turn_id, str(prompt.request_id), text)
        return await self._send(turn, row, offer, prompt, Kind.ANSWER, {}, steer)

    # -- the shared path

    async def _fenced(
        self, turn: Turn, row: Interaction, controller_id: str
    ) -> tuple[BackendPrompt, Offer]:
        """The prompt ``row`` is, still asked, with this controller's fresh offer of it."""
        if row.state is InteractionState.CONSUMED:
            raise RpcError(
                Reason.CONFLICT,
                f"interaction {row.interaction_id} was already answered; an answered prompt "
                "never takes input again. Call status for the current interaction",
            )
        offer = await self._reader.run(
            lambda conn: interactions.offer_of(conn, row.interaction_id, controller_id)
        )
        prompt = next(
            (p for p in self.prompts(turn) if p.interaction_id == row.interaction_id), None
        )
        check_offer(row, offer, prompt is not None)
        if row.state is InteractionState.GONE or prompt is None:
            raise RpcError(
                Reason.PROMPT_CHANGED,
                "the app-server no longer asks what this answer was for; nothing was sent. "
                "Call status for the current interaction",
            )
        assert offer is not None
        return prompt, offer

    async def _send(
        self,
        turn: Turn,
        row: Interaction,
        offer: Offer,
        prompt: BackendPrompt,
        kind: Kind,
        result: dict[str, Any],
        steer: Steer | None,
    ) -> dict[str, Any]:
        message = AnswerRequest(
            turn_id=turn.turn_id, controller_id=offer.controller_id,
            interaction_id=row.interaction_id, offer_id=offer.offer_id,
            request_id=prompt.request_id, fingerprint=prompt.seen.fingerprint, kind=kind,
            result=result, steer=steer,
        )  # fmt: skip
        try:
            reply = await self._ask(self._host(), message)
        except _Lost as lost:
            refused = await settle_lost(
                self._store, turn.turn_id, row.interaction_id, offer.offer_id, lost.why
            )
            if refused is not None:
                raise RpcError(refused.reason, refused.message) from None
            self._destinations.wake(turn.controller_id)
            raise
        if isinstance(reply, Refusal):
            raise RpcError(reply.reason, reply.message)
        if not reply.proven:
            self._destinations.wake(turn.controller_id)
            raise _uncertain(reply.why or "")
        return {
            "outcome": "dispatched",
            "interaction_id": row.interaction_id,
            "dispatch_id": reply.dispatch.dispatch_id,
        }

    async def _next_round(
        self, turn: Turn, row: Interaction, offer: Offer, prompt: BackendPrompt, text: str
    ) -> dict[str, Any]:
        """queue_next_turn: the settled Turn's next round, in its session, with the answer."""
        host = self._host()
        loaded = prompt.thread_id in host.board.loaded
        now, turn_id = time.time(), turn.turn_id

        def reserve(conn: apsw.Connection) -> _NextRound:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            if fresh.closed_at is not None or not fresh.state.settled:
                raise RpcError(
                    Reason.CLOSED if fresh.closed_at else Reason.NOT_IDLE,
                    f"turn {turn_id} is {fresh.state.value}; queue_next_turn needs it settled "
                    "and not closed",
                )
            done = sessions.invocation(conn, turn_id, fresh.round)
            assert done is not None
            session = sessions.get(conn, done.session_id)
            latest = None if session is None else sessions.latest(conn, session.session_id)
            if session is None or session.retired_at is not None:
                raise RpcError(
                    Reason.CLOSED,
                    f"turn {turn_id}'s session was replaced; send the answer as a new task",
                )
            if latest is None or latest.turn_id != turn_id or latest.round != fresh.round:
                raise RpcError(
                    Reason.CONFLICT,
                    f"turn {turn_id}'s thread has gone on since; send the answer as a new task",
                )
            if latest.outcome == "pending" or latest.cleanup != "confirmed":
                raise RpcError(
                    Reason.RECONCILE_REQUIRED,
                    f"turn {turn_id}'s last round is not proven ended in its thread; call "
                    f"recover {{turn_id: {turn_id!r}}} first",
                )
            try:
                consumed = interactions.take_offer(
                    conn, row.interaction_id, offer.controller_id, offer.offer_id, now
                )
            except interactions.OfferUnusable as exc:
                raise RpcError(*offer_refusal(exc)) from None
            step = dispatches.reserve(
                conn, controller_id=offer.controller_id, turn_id=turn_id, terminal_id=None,
                kind=Kind.ANSWER, typing=None, screen_seq=None, now=now,
                interaction_id=consumed.interaction_id, offer_id=offer.offer_id,
                fingerprint=prompt.seen.fingerprint,
            )  # fmt: skip
            reopened = turns.reopen(
                conn, fresh, request_sha256=request_digest(text), request_chars=len(text),
                evidence_status="pending", evidence=None, evidence_limit=None, now=now,
            )  # fmt: skip
            sessions.reserve(
                conn, session, turn_id=turn_id, round=reopened.round, now=now,
                thread_intent=ThreadIntent.LOADED if loaded else ThreadIntent.RESUME,
            )  # fmt: skip
            return _NextRound(reopened, step)

        reserved = await transact_reservation(self._store, reserve)
        await faults.reached(Point.BACKEND_ANSWER_QUEUED)
        host.board.questions.pop(str(prompt.request_id), None)
        start = StartTurn(turn_id, reserved.turn.round, text)
        try:
            receipt = await self._ask(host, start)
        except _Untaken:
            await self._never_sent(reserved.dispatch, "the app-server's actor never took it")
            raise RpcError(
                Reason.INTERNAL,
                "the app-server's actor was too busy to take the answer; nothing was sent: "
                f"turn {turn_id}'s round {reserved.turn.round} ends failed (not_sent). Send the "
                "answer as a new task",
                data={"turn_id": turn_id},
            ) from None
        except RpcError:
            await self._rounds.follow(turn_id, generation=None)
            raise
        if isinstance(receipt, Unsent):
            await self._never_sent(reserved.dispatch, "turn/start was never written")
            raise unsent(turn_id, receipt)
        round_ = reserved.turn.round
        ran = await self._reader.run(lambda conn: sessions.invocation(conn, turn_id, round_))
        if ran is None or ran.dispatch is Dispatched.NOT_SENT:
            # Refused before turn/start went out (thread/start failed, resume or turn/start
            # refused): the round failed not_sent, and the answer it carried went nowhere.
            why = f"the app-server did not start the round ({receipt.turn.reason or 'refused'})"
            await self._never_sent(reserved.dispatch, why, follow=receipt.turn.unresolved)
            self._destinations.wake(turn.controller_id)
            raise unsent(turn_id, Unsent(why), settled=not receipt.turn.unresolved)
        started = receipt.turn.state in (TurnState.RUNNING, *_SETTLED_AFTER_START)
        why = f"turn/start was written but not confirmed ({receipt.turn.reason or 'no answer'})"

        def record(conn: apsw.Connection) -> None:
            step = dispatches.get(conn, reserved.dispatch.dispatch_id) or reserved.dispatch
            if started:
                dispatches.advance(conn, step, Stage.ACCEPTED, None)
            else:  # the round may have reached the app-server, and the answer with it
                found = dispatches.advance(conn, step, Stage.UNCERTAIN, why)
                turns.answer_uncertain(conn, found, why, time.time())

        await transact(self._store, record)
        if receipt.turn.unresolved:
            await self._rounds.follow(turn_id, generation=receipt.generation)
        self._destinations.wake(turn.controller_id)
        if not started:
            raise _uncertain(why)
        return {
            "outcome": "dispatched",
            "interaction_id": row.interaction_id,
            "dispatch_id": reserved.dispatch.dispatch_id,
            "round": reserved.turn.round,
        }

    async def _never_sent(self, step: Dispatch, why: str, *, follow: bool = True) -> None:
        """A queue_next_turn answer whose round provably never reached the app-server: its
        step is not_accepted (never `uncertain`), and its Turn ends the round not_sent. On a
        store that cannot write now, the Turn's follower records both once it writes.
        ``follow`` False: the round already ended (nothing left for a follower to do)."""

        def close(conn: apsw.Connection) -> None:
            fresh = dispatches.get(conn, step.dispatch_id) or step
            if fresh.stage.open:  # a refused round's own transaction may have closed it
                dispatches.advance(conn, fresh, Stage.NOT_ACCEPTED, f"nothing was sent: {why}")

        with suppress(StoreUnwritable):  # the follower closes it with the round (`never_sent`)
            await transact(self._store, close)
        if follow:
            await self._rounds.follow(step.turn_id or "", generation=None, restarted=True)

    def _host(self) -> BackendHost:
        host = self._hosts.running
        if host is None:
            raise RpcError(Reason.PROMPT_CHANGED, "the app-server is not running; call status")
        return host

    async def _ask(self, host: BackendHost, message: Ask[R]) -> R:
        try:
            return await host.ref.ask(message, timeout=ANSWER_TIMEOUT)
        except AskTimeout as exc:
            if not exc.delivered:
                raise _Untaken(
                    Reason.INTERNAL,
                    "the app-server's actor was too busy to take the answer; nothing was sent; "
                    "try again",
                ) from None
            raise _Lost("the answer did not finish in time") from None
        except ActorError as exc:
            raise _Lost(f"the app-server failed during the answer ({exc.reason})") from None


_SETTLED_AFTER_START = (TurnState.DONE, TurnState.FAILED, TurnState.CANCELLED)


class _Untaken(RpcError):
    """The BackendActor never took the message (its mailbox stayed full): nothing was sent."""


class _Lost(RpcError):
    """The BackendActor took the message but its reply was lost (it failed, or did not
    finish in time): what it was doing may have reached the app-server."""

    def __init__(self, why: str) -> None:
        uncertain = _uncertain(why)
        super().__init__(uncertain.reason, uncertain.message)
        self.why = why


def _uncertain(why: str) -> RpcError:
    return RpcError(
        Reason.RESPONSE_UNCERTAIN,
        f"{why}; it may have reached the app-server and will not be sent again. Call status",
    )
