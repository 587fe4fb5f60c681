"""RunActor: the only code that writes to one headless Claude process (one Turn's round).

One process per round (docs/claude_headless.md): its `RunHost` (`host.py`)
starts it, writes the round's user message, folds every line into the
`RunBoard`, and runs this actor's mailbox beside that pump. The actor handles
one request at a time:

- `Answer`: a `control_response` for a pending `can_use_tool`, fenced (Claude
  still asks exactly the request the controller saw: same request id, same
  fingerprint), reserved durably first (the offer consumed, a dispatch
  reserved), with the fault points `faults.CLAUDE_ANSWER_POINTS` from the
  reservation to the record; written once. A line that may have reached the process without
  being recorded makes the answer `response_uncertain`; nothing is sent again. A line
  provably never written (its input had closed: the round ended) is `not_accepted`.
- `Interrupt`: the protocol's interrupt (every pinned Claude has it), reserved durably
  first as the Turn's cancel step, with the fault points `claude_interrupt_reserved`
  and `claude_interrupt_sent`: `accepted` once written, `not_accepted` when provably
  never written, `uncertain` when it may have been (a restart finds one cut off open
  and calls it `uncertain`). Never written twice.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Mapping
from typing import Any

import apsw
import attrs

from akk import faults
from akk.actors.store import transact_reservation, transact_until_written
from akk.backends.claude_headless import prompts, wire
from akk.backends.claude_headless.board import RunBoard
from akk.backends.claude_headless.process import ClaudeProcess, ConnectionClosed, NotWritten
from akk.backends.contract import AnswerReceipt, Refusal
from akk.backends.offers import reserve_answer
from akk.faults import Point
from akk.protocol.errors import Reason
from akk.runtime.actor import Actor, ActorRef, Ask, Rank
from akk.store import dispatches, turns
from akk.store.database import StoreUnwritable
from akk.store.dispatches import Dispatch, Kind, Stage


@attrs.frozen
class Answer(Ask["AnswerReceipt | Refusal"]):
    """Write ``response`` as the answer to Claude's control request ``request_id``, once.

    Only while Claude still asks the very request the controller saw
    (``fingerprint``: `prompts.fingerprint` over the request id, the request and the
    board's generation). ``response`` is the `can_use_tool` decision mapping
    (`prompts.decision_response`, `prompts.answers_response`).
    """

    turn_id: str
    controller_id: str
    interaction_id: str
    offer_id: str
    request_id: str
    fingerprint: bytes
    kind: Kind
    response: Mapping[str, Any] = attrs.field(repr=False)  # an answer's text: never logged


@attrs.frozen
class Interrupt(Ask["str | None"]):
    """Interrupt the running invocation, reserved first as the Turn's cancel step (of
    ``controller_id``). Reply: None once written, else why not. ``turn_id`` None: a
    deadline's best-effort interrupt, which is no one's step."""

    turn_id: str | None = None
    controller_id: str | None = None


RunMessage = Answer | Interrupt
"""Everything a RunActor takes; each is asked, and names its reply."""


class RunActor(Actor[RunMessage]):
    """Writes to one Claude process, one step at a time (rank BACKEND)."""

    rank = Rank.BACKEND
    mailbox_size = 16

    def __init__(self, claude: ClaudeProcess, *, board: RunBoard, store: ActorRef) -> None:
        self._claude = claude
        self._board = board
        self._store = store

    async def receive(self, message: RunMessage) -> object:
        match message:
            case Answer():
                return await self._answer(message)
            case Interrupt():
                return await self._interrupt(message)

    async def _answer(self, message: Answer) -> AnswerReceipt | Refusal:
        """One answer: fence (still pending, same fingerprint), reserve, write, record."""
        board = self._board
        request = board.requests.get(message.request_id)
        if (
            request is None
            or not board.alive
            or board.result is not None
            or prompts.fingerprint(request.request_id, request.request, board.generation)
            != message.fingerprint
        ):
            return Refusal(
                Reason.PROMPT_CHANGED,
                "Claude no longer asks what this answer was for; nothing was sent. Call "
                "status for the current interaction",
            )
        reserved = await reserve_answer(
            self._store, controller_id=message.controller_id, turn_id=message.turn_id,
            interaction_id=message.interaction_id, offer_id=message.offer_id,
            kind=message.kind, fingerprint=message.fingerprint,
        )  # fmt: skip
        if isinstance(reserved, Refusal):
            return reserved
        await faults.reached(Point.CLAUDE_ANSWER_RESERVED)
        try:
            await self._claude.send(wire.control_success(message.request_id, message.response))
        except NotWritten as exc:
            why = f"Claude's round ended before the answer was written ({exc.reason[:120]})"
            await transact_until_written(
                self._store,
                lambda conn: dispatches.advance(
                    conn, _fresh(conn, reserved), Stage.NOT_ACCEPTED, why
                ),
                what=f"answer {reserved.dispatch_id} not written",
            )
            return Refusal(Reason.PROMPT_CHANGED, f"{why}; nothing was sent. Call status")
        except ConnectionClosed as exc:
            why = f"the answer may not have reached Claude ({exc.reason[:120]})"
            return AnswerReceipt(await self._uncertain(reserved, why), False, why)
        board.requests.pop(message.request_id, None)
        board.touch()
        await faults.reached(Point.CLAUDE_ANSWER_SENT)
        # The line is out: its receipt waits for a store that cannot write, never lost.
        sent = await transact_until_written(
            self._store,
            lambda conn: dispatches.advance(conn, _fresh(conn, reserved), Stage.ACCEPTED),
            what=f"answer {reserved.dispatch_id} sent to Claude",
        )
        await faults.reached(Point.CLAUDE_ANSWER_RECORDED)
        return AnswerReceipt(sent, True)

    async def _uncertain(self, reserved: Dispatch, why: str) -> Dispatch:
        now = time.time()

        def mark(conn: apsw.Connection) -> Dispatch:
            found = dispatches.advance(conn, _fresh(conn, reserved), Stage.UNCERTAIN, why)
            turns.answer_uncertain(conn, found, why, now)
            return found

        return await transact_until_written(
            self._store, mark, what=f"answer {reserved.dispatch_id} uncertain"
        )

    async def _interrupt(self, message: Interrupt) -> str | None:
        if not self._board.alive:
            return "the Claude process of this Turn has ended; nothing was sent"
        if self._board.result is not None:
            return "the round already ended; nothing was sent"
        step = None
        if message.turn_id is not None and message.controller_id is not None:
            reserve = functools.partial(
                dispatches.reserve_cancel, controller_id=message.controller_id,
                turn_id=message.turn_id, now=time.time(),
            )  # fmt: skip
            try:
                step = await transact_reservation(self._store, reserve)
            except StoreUnwritable as exc:
                return f"{exc.problem}, so the interrupt was never written; {exc.next_step}"
            await faults.reached(Point.CLAUDE_INTERRUPT_RESERVED)
        try:
            await self._claude.send(wire.interrupt(f"akk-interrupt-{uuid.uuid4()}"))
        except NotWritten:
            why = "the Claude process of this Turn is ending; nothing was sent"
            await self._record(step, Stage.NOT_ACCEPTED, why)
            return why
        except ConnectionClosed as exc:
            why = f"the interrupt may not have reached Claude ({exc.reason[:120]})"
            await self._record(step, Stage.UNCERTAIN, why)
            return why
        self._board.interrupted = True
        self._board.touch()
        await faults.reached(Point.CLAUDE_INTERRUPT_SENT)
        await self._record(step, Stage.ACCEPTED, None)
        return None

    async def _record(self, step: Dispatch | None, stage: Stage, why: str | None) -> None:
        """The cancel step's stage, once its line is known written or not (none: no step)."""
        if step is not None:
            await transact_until_written(
                self._store,
                lambda conn: dispatches.advance(conn, _fresh(conn, step), stage, why),
                what=f"cancel {step.dispatch_id} {stage.value}",
            )


def _fresh(conn: apsw.Connection, dispatch: Dispatch) -> Dispatch:
    found = dispatches.get(conn, dispatch.dispatch_id)
    assert found is not None
    return found
