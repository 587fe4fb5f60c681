"""BackendActor: one `codex app-server` process AKK started, the only code that writes to it.

The app-server is the non-terminal way to run a Turn: no pane, no screen, no
keys. A `BackendHost` (`host.py`, a plain supervised task) owns the process's lifetime:
it starts `codex app-server` from the configured binary and CODEX_HOME, reads
everything the process says into a `BackendBoard`, and runs the BackendActor's
mailbox beside that reader. The actor handles one request at a time: reading
the effective config, starting a Turn (thread/start or thread/resume, then
turn/start, each reserved durably first with a fault point at every dangerous
moment), interrupting one, and reading a thread for reconciliation.

Upward news never blocks: TurnActors read the board (a published value), as
they read the TerminalBoard. A process that exits or breaks its protocol
crashes the host: the supervisor starts a new process, the board's
`generation` moves on, and the TurnActors reconcile their Turns from
`thread/read` (never by sending anything again). Every process is reaped
before the host ends, and its exit is recorded in the audit trail. A result of the
wrong shape to one of its own requests is not such a break: it fails that step,
recorded as what may have happened (`results`), and the actor goes on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import apsw
import attrs

from akk import faults
from akk.actors.store import transact, transact_reservation, transact_until_written
from akk.backends.codex_app_server import results, rpc
from akk.backends.codex_app_server.board import BackendBoard
from akk.backends.codex_app_server.prompts import (
    async_fingerprint,
    fingerprint,
)
from akk.backends.codex_app_server.results import ThreadFacts, Unreadable
from akk.backends.contract import AnswerReceipt, Refusal
from akk.backends.offers import reserve_answer
from akk.faults import Point
from akk.protocol.errors import Reason
from akk.protocol.redaction import redact_head
from akk.runtime.actor import Actor, ActorRef, Ask, Rank
from akk.sessions import policy
from akk.store import dispatches, sessions, turns
from akk.store.database import StoreUnwritable
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.sessions import InvocationRow, SessionRow
from akk.store.turns import Turn, TurnState

T = TypeVar("T")

log = logging.getLogger("akk.backend")

REQUEST_TIMEOUT = 30.0
"""How long one app-server request may take before it counts as unanswered (never resent)."""


@attrs.frozen
class CodexSetup:
    """The Codex the backend runs: a pinned binary and the user's CODEX_HOME."""

    binary: str
    home: str
    version: str
    env: tuple[tuple[str, str], ...] | None = None
    """The process environment (None: AKK's own); CODEX_HOME is set either way."""
    tap: rpc.Tap | None = attrs.field(default=None, eq=False, repr=False)
    """Sees every message both ways (tests check each against the version's schema)."""

    @property
    def key(self) -> str:
        return f"codex-app-server {self.home}"


@attrs.frozen
class ReadBinding(Ask["policy.ThreadConfig | Refusal"]):
    """The binding a thread started now in ``cwd`` would get (config/read). A refusal: the
    app-server refused config/read, or answered it with a result of the wrong shape."""

    cwd: str


@attrs.frozen
class StartTurn(Ask["StartReceipt | Unsent"]):
    """Run the reserved invocation (turn_id, round)."""

    turn_id: str
    round: int
    text: str


@attrs.frozen
class StartReceipt:
    turn: Turn
    generation: int
    """The process generation the turn runs on."""


@attrs.frozen
class Unsent:
    """turn/start was never written: the store could not record it first (a full disk).
    The invocation stays unsent; ``why`` names the store's problem and the next step."""

    why: str


@attrs.frozen
class InterruptTurn(Ask["str | None"]):
    """turn/interrupt of the Turn's native turn, reserved first as the Turn's cancel step
    (of ``controller_id``). Reply: None, or why nothing was interrupted."""

    thread_id: str
    native_turn_id: str
    turn_id: str
    controller_id: str


@attrs.frozen
class AnswerRequest(Ask["AnswerReceipt | Refusal"]):
    """Send ``result`` as the answer to server request ``request_id``, once, if it is still
    the very request the controller saw (``fingerprint``)."""

    turn_id: str
    controller_id: str
    interaction_id: str
    offer_id: str
    request_id: rpc.RequestId
    fingerprint: bytes
    kind: Kind
    result: dict[str, Any] = attrs.field(repr=False)  # an answer's text: never logged
    steer: Steer | None = None
    """Set for an async question answered into its running turn (turn/steer)."""


@attrs.frozen
class Steer:
    """`turn/steer` of ``text`` into the native turn (which must still be the active one)."""

    thread_id: str
    native_turn_id: str
    item_id: str
    text: str = attrs.field(repr=False)


@attrs.frozen
class ReadThread(Ask["ThreadFacts | Unreadable"]):
    """thread/read with turns."""

    thread_id: str


_NO_LONGER_ASKED = (
    "the app-server no longer asks what this answer was for; nothing was sent. "
    "Call status for the current interaction"
)


class BackendLost(Exception):
    """The app-server's connection closed under the host (its process exited or misbehaved)."""


BackendMessage = ReadBinding | StartTurn | InterruptTurn | ReadThread | AnswerRequest
"""Everything a BackendActor takes; each is asked, and names its reply."""


class BackendActor(Actor[BackendMessage]):
    """Writes to one app-server connection, one step at a time (rank BACKEND)."""

    rank = Rank.BACKEND
    mailbox_size = 32

    def __init__(
        self,
        app: rpc.AppServer,
        *,
        setup: CodexSetup,
        board: BackendBoard,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
    ) -> None:
        self._app = app
        self._setup = setup
        self._board = board
        self._store = store
        self._read_store = reader

    async def receive(self, message: BackendMessage) -> object:
        match message:
            case ReadBinding(cwd):
                return await self._binding(cwd)
            case StartTurn():
                return await self._start(message)
            case InterruptTurn():
                return await self._interrupt(message)
            case ReadThread(thread_id):
                return await self._read_thread(thread_id)
            case AnswerRequest():
                return await self._answer(message)

    async def _written(self, work: Callable[[apsw.Connection], T], *, what: str) -> T:
        """`transact_until_written`, the board saying why while the store holds this actor
        (and its mailbox) up: a send waiting behind it is refused at once, naming the store."""

        def waiting(problem: StoreUnwritable | None) -> None:
            self._board.store_wait = problem

        try:
            return await transact_until_written(self._store, work, what=what, waiting=waiting)
        finally:
            self._board.store_wait = None

    async def _advance(
        self, step: Dispatch, stage: Stage, why: str | None = None, *, what: str
    ) -> Dispatch:
        """Record ``step``'s ``stage`` on the row as stored now (`_written`: never lost)."""
        return await self._written(
            lambda conn: dispatches.advance(conn, _fresh(conn, step), stage, why), what=what
        )

    async def _binding(self, cwd: str) -> policy.ThreadConfig | Refusal:
        try:
            result = await self._app.request("config/read", {"cwd": cwd}, timeout=REQUEST_TIMEOUT)
            config = results.config_of(result)
        except (rpc.ErrorReply, results.WrongShape) as exc:
            return Refusal(Reason.INTERNAL, redact_head(str(exc), 300))

        def text(key: str) -> str | None:
            value = config.get(key)
            return None if value is None else json.dumps(value, sort_keys=True).strip('"')

        return policy.ThreadConfig(
            agent_version=self._setup.version,
            protocol_version=self._setup.version,
            model=text("model"),
            effort=text("model_reasoning_effort"),
            approval_policy=text("approval_policy"),
            sandbox=text("sandbox_mode"),
        )

    # -- starting a Turn

    async def _start(self, message: StartTurn) -> StartReceipt | Unsent:
        turn_id = message.turn_id
        invocation, session, _ = await self._read_store(
            lambda conn: _records(conn, turn_id, message.round)
        )
        assert invocation.dispatch is policy.Dispatch.NOT_SENT, invocation
        thread_id = session.thread_id
        if thread_id is None:
            started = await self._thread_start(session, invocation)
            if isinstance(started, StartReceipt):
                return started
            thread_id = started
        elif thread_id not in self._board.loaded:
            resumed = await self._thread_resume(session, thread_id, invocation)
            if resumed is not None:
                return resumed
        try:
            await self._sent(invocation)
        except StoreUnwritable as exc:
            # Never written unrecorded: a turn/start the store does not know of could run twice.
            return Unsent(f"{exc.problem}, so the task was never sent to the app-server; "
                          f"{exc.next_step}")  # fmt: skip
        await faults.reached(Point.BACKEND_TURN_SENDING)
        try:
            result = await self._app.request(
                "turn/start",
                {"threadId": thread_id, "input": [{"type": "text", "text": message.text}]},
                timeout=REQUEST_TIMEOUT,
            )
            native = results.turn_id_of(result)
        except rpc.ErrorReply as exc:
            # A refusal is the app-server's own answer: the turn was not started.
            why = f"the app-server refused turn/start: {redact_head(exc.message, 200)}"
            return await self._not_started(invocation, "turn_start_refused", why)
        except rpc.AppServerError as exc:
            # No answer, or one of the wrong shape: the turn may run, under an id not known.
            return await self._unconfirmed(invocation, exc)
        await faults.reached(Point.BACKEND_TURN_WRITTEN)
        receipt = hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()
        self._board.track(thread_id, native)

        def accept(conn: apsw.Connection) -> Turn:
            inv = sessions.invocation(conn, turn_id, message.round)
            fresh = turns.get(conn, turn_id)
            assert inv is not None and fresh is not None
            if inv.dispatch is not policy.Dispatch.MAYBE_SENT:
                return fresh  # written late: its Turn's reconcile found the turn first
            sessions.update_invocation(
                conn, inv, dispatch=policy.Dispatch.ACCEPTED, native_turn_id=native,
                receipt_sha256=receipt,
            )  # fmt: skip
            thread_persisted(conn, inv.session_id)
            return turns.update(
                conn, fresh, state=TurnState.RUNNING, native_session=thread_id,
                evidence_status="bound", evidence=_evidence(self._app, thread_id, native),
            )  # fmt: skip

        # turn/start is out: its receipt waits for a store that cannot write, never lost.
        accepted = await self._written(accept, what=f"turn {turn_id}: turn/start accepted")
        await faults.reached(Point.BACKEND_TURN_ACCEPTED)
        return StartReceipt(accepted, self._board.generation)

    async def _thread_start(
        self, session: SessionRow, invocation: InvocationRow
    ) -> str | StartReceipt:
        """thread/start; its failure ends the invocation unsent (turn/start was never written;
        a thread the app-server may have made stays empty and unused)."""
        await faults.reached(Point.BACKEND_THREAD_START)
        try:
            result = await self._app.request(
                "thread/start", {"cwd": session.workspace}, timeout=REQUEST_TIMEOUT
            )
            thread_id = results.thread_id_of(result)
        except rpc.AppServerError as exc:
            why = (
                f"thread/start failed ({redact_head(str(exc), 300)}), so the task was never "
                "sent. Send again; `akk doctor` checks the app-server"
            )
            return await self._not_started(invocation, "thread_start_failed", why)
        self._board.loaded.add(thread_id)
        await faults.reached(Point.BACKEND_THREAD_STARTED)
        session_id = session.session_id

        def persist(conn: apsw.Connection) -> None:
            # Its history stays `unknown`: the app-server writes a thread's rollout only with
            # its first turn, so an empty thread cannot be resumed by a later process.
            fresh = sessions.get(conn, session_id)
            assert fresh is not None
            sessions.update(conn, fresh, thread_id=thread_id)

        await self._written(persist, what=f"session {session_id}: thread {thread_id} started")
        await faults.reached(Point.BACKEND_THREAD_PERSISTED)
        return thread_id

    async def _thread_resume(
        self, session: SessionRow, thread_id: str, invocation: InvocationRow
    ) -> StartReceipt | None:
        """thread/resume in this process; a refusal ends the invocation unsent (None: resumed)."""
        try:
            await self._app.request(
                "thread/resume", {"threadId": thread_id}, timeout=REQUEST_TIMEOUT
            )
        except rpc.ErrorReply as exc:
            session_id = session.session_id

            def reject(conn: apsw.Connection) -> None:
                fresh = sessions.get(conn, session_id)
                assert fresh is not None
                sessions.update(conn, fresh, history=policy.History.REJECTED)

            await self._written(reject, what=f"session {session_id}: resume refused")
            why = (
                f"the app-server refused to resume the session's thread "
                f"({redact_head(exc.message, 200)}); nothing was sent. Send again: AKK will "
                "rebuild the session (pass a handoff so the new thread knows the task)"
            )
            return await self._not_started(invocation, "resume_rejected", why)
        self._board.loaded.add(thread_id)
        return None

    async def _sent(self, invocation: InvocationRow) -> None:
        """Durably `maybe_sent` before turn/start is written: from here it is never resent."""
        now = time.time()

        def mark(conn: apsw.Connection) -> None:
            fresh = sessions.invocation(conn, invocation.turn_id, invocation.round)
            assert fresh is not None
            sessions.update_invocation(
                conn, fresh, dispatch=policy.Dispatch.MAYBE_SENT, sent_at=now, updated_at=now
            )

        await transact(self._store, mark)

    async def _not_started(self, invocation: InvocationRow, reason: str, why: str) -> StartReceipt:
        """The invocation never reached the app-server: its Turn fails, nothing to reconcile."""
        turn_id, round_, now = invocation.turn_id, invocation.round, time.time()

        def fail(conn: apsw.Connection) -> Turn:
            failed, _ = sessions.fail_unsent(
                conn, turn_id, round_, reason=reason, summary=why, now=now
            )
            never_sent(conn, turn_id)  # a queue_next_turn answer it carried went nowhere either
            return failed

        failed = await self._written(fail, what=f"turn {turn_id}: {reason}")
        return StartReceipt(failed, self._board.generation)

    async def _unconfirmed(
        self, invocation: InvocationRow, exc: rpc.AppServerError
    ) -> StartReceipt:
        """turn/start may have reached the app-server: `uncertain`, reconciled, never resent."""
        turn_id = invocation.turn_id
        why = (
            str(exc)
            if isinstance(exc, results.WrongShape)
            else f"turn/start got no answer ({type(exc).__name__})"
        )

        def mark(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            return turns.update(
                conn, fresh, state=TurnState.UNCERTAIN, reason="dispatch_unconfirmed"
            )

        log.warning("turn %s: %s", turn_id, why)
        marked = await self._written(mark, what=f"turn {turn_id}: {why}")
        return StartReceipt(marked, self._board.generation)

    # -- answering a server request

    async def _answer(self, message: AnswerRequest) -> AnswerReceipt | Refusal:
        """One answer: fence (the request is still pending, same fingerprint), reserve, send.

        A store that cannot write refuses it (``internal``): a reservation that is not on
        disk never reaches the app-server."""
        board = self._board
        request = board.requests.get(message.request_id)
        if message.steer is not None:
            refused = self._steer_fence(message.steer, message.fingerprint)
            if refused is not None:
                return refused
        elif request is None or message.fingerprint != fingerprint(
            request, board.generation, board.changes_of(request)
        ):
            # Another request, or (a file change) other changes than the controller saw.
            return Refusal(Reason.PROMPT_CHANGED, _NO_LONGER_ASKED)
        reserved = await reserve_answer(
            self._store, controller_id=message.controller_id, turn_id=message.turn_id,
            interaction_id=message.interaction_id, offer_id=message.offer_id,
            kind=message.kind, fingerprint=message.fingerprint,
        )  # fmt: skip
        if isinstance(reserved, Refusal):
            return reserved
        await faults.reached(Point.ANSWER_RESERVED)
        try:
            if message.steer is not None:
                await self._steer(message.steer)
            else:
                assert request is not None
                await self._app.respond(request, message.result)
        except rpc.NotAwaited:
            # Resolved (or its turn completed) while the answer was reserved: never written.
            self._board.requests.pop(message.request_id, None)
            await self._advance(
                reserved, Stage.NOT_ACCEPTED, "no longer asked",
                what=f"answer {reserved.dispatch_id} not sent: the request was resolved",
            )  # fmt: skip
            return Refusal(Reason.PROMPT_CHANGED, _NO_LONGER_ASKED)
        except rpc.ErrorReply as exc:
            # The app-server's own refusal (its turn is no longer the active one): nothing
            # reached the agent.
            refusal = redact_head(exc.message, 120)
            why = f"the turn ended before the answer could join it ({refusal})"
            await self._advance(
                reserved, Stage.NOT_ACCEPTED, why,
                what=f"answer {reserved.dispatch_id} refused by the app-server",
            )  # fmt: skip
            return Refusal(
                Reason.CONFLICT,
                f"{why}; nothing was delivered. Call status: a question its turn left is "
                "answered with delivery_mode queue_next_turn",
            )
        except rpc.AppServerError as exc:
            why = f"the answer may not have reached the app-server ({type(exc).__name__})"
            return AnswerReceipt(await self._answer_uncertain(reserved, why), False, why)
        if message.steer is not None:
            self._board.questions.pop(message.steer.item_id, None)
        elif request is not None:
            self._board.requests.pop(message.request_id, None)
            params = request.params if isinstance(request.params, dict) else {}
            if message.result.get("decision") == "cancel":
                self._board.rejected.add(str(params.get("turnId")))
        await faults.reached(Point.ANSWER_SENT)
        # The answer is out: its receipt waits for a store that cannot write, never lost.
        sent = await self._advance(
            reserved, Stage.ACCEPTED, what=f"answer {reserved.dispatch_id} sent to the app-server"
        )
        await faults.reached(Point.ANSWER_RECORDED)
        return AnswerReceipt(sent, True)

    def _steer_fence(self, steer: Steer, expected: bytes) -> Refusal | None:
        """The async question is still unanswered, unchanged, and its turn still runs here."""
        question = self._board.questions.get(steer.item_id)
        native = self._board.turn(steer.native_turn_id)
        if question is None or async_fingerprint(question, self._board.generation) != expected:
            return Refusal(
                Reason.PROMPT_CHANGED,
                "the agent no longer asks what this answer was for; nothing was sent. Call "
                "status for the current interaction",
            )
        if native is None or native.settled:
            return Refusal(
                Reason.CONFLICT,
                "the turn that asked has ended, so the answer cannot join it; nothing was sent. "
                "Call status and answer with delivery_mode queue_next_turn",
            )
        return None

    async def _steer(self, steer: Steer) -> None:
        await self._app.request(
            "turn/steer",
            {"threadId": steer.thread_id, "expectedTurnId": steer.native_turn_id,
             "input": [{"type": "text", "text": steer.text}]},
            timeout=REQUEST_TIMEOUT,
        )  # fmt: skip

    async def _answer_uncertain(self, reserved: Dispatch, why: str) -> Dispatch:
        now = time.time()

        def mark(conn: apsw.Connection) -> Dispatch:
            found = dispatches.advance(conn, _fresh(conn, reserved), Stage.UNCERTAIN, why)
            turns.answer_uncertain(conn, found, why, now)
            return found

        return await self._written(mark, what=f"answer {reserved.dispatch_id} uncertain")

    # -- interrupt and read

    async def _interrupt(self, message: InterruptTurn) -> str | None:
        """turn/interrupt, its cancel step reserved durably first: `accepted` once the
        app-server took it, `not_accepted` on its refusal, `uncertain` without an answer
        (a restart finds one cut off open and calls it `uncertain`)."""
        reserve = functools.partial(
            dispatches.reserve_cancel, controller_id=message.controller_id,
            turn_id=message.turn_id, now=time.time(),
        )  # fmt: skip
        try:
            step = await transact_reservation(self._store, reserve)
        except StoreUnwritable as exc:
            return f"{exc.problem}, so turn/interrupt was never sent; {exc.next_step}"
        await faults.reached(Point.BACKEND_INTERRUPT_RESERVED)
        what = f"cancel {step.dispatch_id} of turn {message.turn_id}"
        try:
            await self._app.request(
                "turn/interrupt",
                {"threadId": message.thread_id, "turnId": message.native_turn_id},
                timeout=REQUEST_TIMEOUT,
            )
        except rpc.ErrorReply as exc:
            why = f"the app-server refused turn/interrupt: {redact_head(exc.message, 200)}"
            await self._advance(step, Stage.NOT_ACCEPTED, why, what=f"{what} refused")
            return why
        except rpc.AppServerError as exc:
            why = f"turn/interrupt got no answer ({type(exc).__name__})"
            await self._advance(step, Stage.UNCERTAIN, why, what=f"{what} unanswered")
            raise
        await faults.reached(Point.BACKEND_INTERRUPT_SENT)
        await self._advance(step, Stage.ACCEPTED, what=f"{what} taken by the app-server")
        return None

    async def _read_thread(self, thread_id: str) -> ThreadFacts | Unreadable:
        try:
            result = await self._app.request(
                "thread/read", {"threadId": thread_id, "includeTurns": True},
                timeout=REQUEST_TIMEOUT,
            )  # fmt: skip
            return results.thread_facts(result)
        except rpc.ErrorReply as exc:
            return ThreadFacts(False, None, why=redact_head(exc.message, 200))
        except results.WrongShape as exc:
            log.warning("thread %s not read: %s", thread_id, exc)
            return Unreadable(exc.why)


def _evidence(app: rpc.AppServer, thread_id: str, native_turn_id: str) -> str:
    """A backend Turn's evidence: the thread, the native turn and the process running it."""
    facts = {
        "backend": "codex_app_server",
        "thread_id": thread_id,
        "native_turn_id": native_turn_id,
        "pid": app.pid,
        "start_ticks": app.start_ticks(),
    }
    return json.dumps(facts)


def thread_persisted(conn: apsw.Connection, session_id: str) -> None:
    """A turn of the session's thread started: the app-server keeps its rollout from now on."""
    session = sessions.get(conn, session_id)
    if session is not None and session.history is policy.History.UNKNOWN:
        sessions.update(conn, session, history=policy.History.PERSISTED)


def never_sent(conn: apsw.Connection, turn_id: str) -> None:
    """The answer steps of ``turn_id`` still open are `not_accepted`: its round never reached
    the app-server, so neither did the queue_next_turn answer it carried (never
    `uncertain`, never a `response_uncertain` event)."""
    for step in dispatches.of_turn(conn, turn_id):
        if step.kind is Kind.ANSWER and step.stage.open:
            dispatches.advance(conn, step, Stage.NOT_ACCEPTED, "nothing was sent: the round "
                               "carrying it never reached the app-server")  # fmt: skip


def _fresh(conn: apsw.Connection, dispatch: Dispatch) -> Dispatch:
    found = dispatches.get(conn, dispatch.dispatch_id)
    assert found is not None
    return found


def _records(
    conn: apsw.Connection, turn_id: str, round_: int
) -> tuple[InvocationRow, SessionRow, Turn]:
    invocation = sessions.invocation(conn, turn_id, round_)
    assert invocation is not None, (turn_id, round_)
    session = sessions.get(conn, invocation.session_id)
    turn = turns.get(conn, turn_id)
    assert session is not None and turn is not None
    return invocation, session, turn
