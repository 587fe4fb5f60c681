"""BackendActor: one `codex app-server` process AKK started, the only code that writes to it.

The app-server is the non-terminal way to run a Turn: no pane, no screen, no
keys. A `BackendHost` (a plain supervised task) owns the process's lifetime:
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
before the host ends, and its exit is recorded in the audit trail.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import apsw
import attrs
import trio

from akk import faults
from akk.actors.store import transact
from akk.appserver import rpc, schema
from akk.appserver.prompts import (
    AsyncQuestion,
    BackendPrompt,
    async_fingerprint,
    async_prompt_of,
    fingerprint,
    prompt_of,
)
from akk.backends.contract import AnswerReceipt, Refusal
from akk.discovery.process import VersionCache
from akk.evidence import request_digest
from akk.faults import Point
from akk.protocol.errors import Reason
from akk.protocol.redaction import redact
from akk.runtime.actor import Actor, ActorRef, Ask, Incarnation, Rank
from akk.runtime.supervisor import ChildSpec, Restart, Supervisor
from akk.screen.fingerprint import IdMinter
from akk.sessions import policy
from akk.store import audit, dispatches, interactions, sessions, turns
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.sessions import InvocationRow, SessionRow
from akk.store.turns import Turn, TurnState

log = logging.getLogger("akk.backend")

REQUEST_TIMEOUT = 30.0
"""How long one app-server request may take before it counts as unanswered (never resent)."""

KEPT_TURNS = 1024
"""Native turns the board remembers (oldest forgotten first)."""


START_RETRY_SECONDS = 30.0
"""After an app-server failed to start, how long before the next try (a slow retry never
reaches the supervisor's restart limit, so a broken Codex cannot stop `akk serve`)."""


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


@attrs.define
class NativeTurn:
    """What the app-server said about one of its turns."""

    thread_id: str
    turn_id: str
    status: str = "inProgress"
    """inProgress, completed, interrupted or failed (the app-server's TurnStatus)."""
    final_message: str | None = None
    error: str | None = None
    usage_start: dict[str, int] | None = None
    """The thread's running totals before this turn (from its first usage update)."""
    usage_total: dict[str, int] | None = None
    context_tokens: int | None = None
    context_window: int | None = None
    seq: int = 0

    @property
    def settled(self) -> bool:
        return self.status != "inProgress"

    def usage(self) -> dict[str, Any]:
        """The attributable increment: this turn's own tokens, never the thread's totals."""
        if self.usage_start is None or self.usage_total is None:
            return {"usage_status": "unknown"}
        spent = {k: self.usage_total.get(k, 0) - self.usage_start.get(k, 0) for k in _USAGE_KEYS}
        cached, written = spent["cachedInputTokens"], spent["cacheWriteInputTokens"]
        return {
            "usage_input": spent["inputTokens"] - cached - written,
            "usage_output": spent["outputTokens"],
            "usage_cache_read": cached,
            "usage_cache_write": written,
            "usage_status": "complete" if self.settled else "partial",
        }


_USAGE_KEYS = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens")

KEPT_QUESTIONS = 64
"""Unanswered async questions the board remembers (oldest forgotten first)."""


@attrs.define
class BackendBoard:
    """The running app-server's published state; only its host writes it."""

    generation: int = 0
    """Counts processes started: a TurnActor that saw another generation reconciles."""
    pid: int | None = None
    alive: bool = False
    turns: OrderedDict[str, NativeTurn] = attrs.field(factory=OrderedDict)
    loaded: set[str] = attrs.field(factory=set)
    """Threads started or resumed in the current process."""
    requests: dict[rpc.RequestId, rpc.ServerRequest] = attrs.field(factory=dict)
    """Server requests (approvals, questions) not answered yet."""
    rejected: set[str] = attrs.field(factory=set)
    """Native turns a controller's reject interrupts (the app-server's `cancel` decision)."""
    questions: OrderedDict[str, AsyncQuestion] = attrs.field(factory=OrderedDict)
    """Async questions not answered yet, by item id."""
    start_error: str | None = None
    """Why the latest start failed (None once a process runs)."""
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def _state_changed(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def started(self, pid: int) -> None:
        """A new process runs: what the previous one said is its own (its turns are
        reconciled from their threads)."""
        self.generation += 1
        self.pid, self.alive, self.start_error = pid, True, None
        for kept in (self.loaded, self.requests, self.questions, self.turns, self.rejected):
            kept.clear()
        self._state_changed()

    def start_failed(self, why: str) -> None:
        self.start_error = why[:500]
        self._state_changed()

    def stopped(self) -> None:
        self.alive = False
        self._state_changed()

    async def settled(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until a process runs or its start failed."""
        with trio.move_on_after(timeout):
            while not self.alive and self.start_error is None:
                await self._changed.wait()

    seq: int = 0

    def turn(self, native_turn_id: str | None) -> NativeTurn | None:
        return None if native_turn_id is None else self.turns.get(native_turn_id)

    def prompts(self, native_turn_id: str, turn: Turn, ids: IdMinter) -> list[BackendPrompt]:
        """What this process asks now of ``turn`` (its native turn), oldest first: the
        server requests while the Turn is open, then the async questions the turn left."""
        native = self.turn(native_turn_id)
        running = turn.unresolved and native is not None and not native.settled
        found: list[BackendPrompt] = []
        if turn.unresolved:
            made = (
                prompt_of(r, generation=self.generation, ids=ids, turn_id=turn.turn_id)
                for r in self.requests.values()
            )
            found += [p for p in made if p.native_turn_id == native_turn_id]
        found += [
            async_prompt_of(
                q, generation=self.generation, ids=ids, turn_id=turn.turn_id, running=running
            )
            for q in self.questions.values()
            if q.native_turn_id == native_turn_id
        ]
        return found

    def forget(self, native_turn_id: str) -> None:
        self.turns.pop(native_turn_id, None)

    def track(self, thread_id: str, turn_id: str) -> NativeTurn:
        """The native turn ``turn_id`` of ``thread_id``, followed from now on."""
        found = self.turns.get(turn_id)
        if found is None:
            found = self.turns[turn_id] = NativeTurn(thread_id, turn_id)
            while len(self.turns) > KEPT_TURNS:
                self.turns.popitem(last=False)
        return found

    def apply(self, note: rpc.ServerNotification) -> None:
        """Fold one notification into the board (unknown ones are ignored)."""
        params = note.params if isinstance(note.params, dict) else {}
        thread_id = params.get("threadId")
        if not isinstance(thread_id, str):
            return
        if note.method in ("turn/started", "turn/completed"):
            turn = params.get("turn") or {}
            native = self.track(thread_id, str(turn.get("id")))
            native.status = str(turn.get("status", native.status))
            native.final_message = _final_message(turn.get("items")) or native.final_message
            error = turn.get("error")
            if isinstance(error, dict) and error.get("message"):
                native.error = redact(str(error["message"]))[:300]
        elif note.method == "item/completed":
            self._async_question(thread_id, params)
            return
        elif note.method == "thread/tokenUsage/updated":
            turn_id = params.get("turnId")
            usage = params.get("tokenUsage") or {}
            total, last = usage.get("total"), usage.get("last")
            if not (isinstance(turn_id, str) and isinstance(total, dict)):
                return
            native = self.track(thread_id, turn_id)
            if native.settled:
                return  # a replay of a finished turn's totals (thread/resume sends one)
            if native.usage_start is None and isinstance(last, dict):
                native.usage_start = {k: total.get(k, 0) - last.get(k, 0) for k in _USAGE_KEYS}
            native.usage_total = {k: int(total.get(k, 0)) for k in _USAGE_KEYS}
            if isinstance(last, dict):
                native.context_tokens = int(last.get("totalTokens", 0))
            window = usage.get("modelContextWindow")
            native.context_window = window if isinstance(window, int) else native.context_window
        else:
            return
        self.seq += 1
        native.seq = self.seq

    def _async_question(self, thread_id: str, params: dict[str, Any]) -> None:
        item, turn_id = params.get("item"), params.get("turnId")
        if not (isinstance(item, dict) and isinstance(turn_id, str)):
            return
        asked = item.get("questions")
        if item.get("delivery") != "async" or not isinstance(asked, list) or not asked:
            return
        questions = tuple(
            (str(q.get("title", "")), tuple(str(o) for o in q.get("options") or []))
            for q in asked
            if isinstance(q, dict)
        )
        item_id = str(item.get("id"))
        self.questions[item_id] = AsyncQuestion(thread_id, turn_id, item_id, questions)
        while len(self.questions) > KEPT_QUESTIONS:
            self.questions.popitem(last=False)
        self.seq += 1


def _final_message(items: object) -> str | None:
    if not isinstance(items, list):
        return None
    texts = [
        item["text"]
        for item in items
        if isinstance(item, dict) and item.get("type") == "agentMessage" and item.get("text")
    ]
    return str(texts[-1]) if texts else None


# -- messages


@attrs.frozen
class ReadBinding(Ask[policy.ThreadConfig]):
    """The binding a thread started now in ``cwd`` would get (config/read)."""

    cwd: str


@attrs.frozen
class StartTurn(Ask["StartReceipt"]):
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
class InterruptTurn(Ask["str | None"]):
    """turn/interrupt. Reply: None, or the refusal's text."""

    thread_id: str
    native_turn_id: str


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
class ReadThread(Ask["ThreadFacts"]):
    """thread/read with turns."""

    thread_id: str


@attrs.frozen
class NativeRecord:
    """One turn as the thread's own history holds it."""

    turn_id: str
    status: str
    request_sha256: str | None
    """Digest of the turn's user message text (what AKK sent, if AKK sent it)."""
    final_message: str | None
    error: str | None


@attrs.frozen
class ThreadFacts:
    found: bool
    """False: the app-server does not know the thread (missing)."""
    status: str | None
    turns: tuple[NativeRecord, ...] = ()
    why: str = ""


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

    async def _binding(self, cwd: str) -> policy.ThreadConfig:
        result = await self._app.request("config/read", {"cwd": cwd}, timeout=REQUEST_TIMEOUT)
        config = result.get("config") or {}

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

    async def _start(self, message: StartTurn) -> StartReceipt:
        turn_id = message.turn_id
        invocation, session, turn = await self._read_store(
            lambda conn: _records(conn, turn_id, message.round)
        )
        assert invocation.dispatch is policy.Dispatch.NOT_SENT, invocation
        thread_id = session.thread_id
        if thread_id is None:
            thread_id = await self._thread_start(session, turn)
        elif thread_id not in self._board.loaded:
            resumed = await self._thread_resume(session, thread_id, invocation)
            if resumed is not None:
                return resumed
        await self._sent(invocation)
        await faults.reached(Point.BACKEND_TURN_SENDING)
        try:
            result = await self._app.request(
                "turn/start",
                {"threadId": thread_id, "input": [{"type": "text", "text": message.text}]},
                timeout=REQUEST_TIMEOUT,
            )
        except rpc.ErrorReply as exc:
            # A refusal is the app-server's own answer: the turn was not started.
            why = f"the app-server refused turn/start: {redact(exc.message)[:200]}"
            return await self._not_started(invocation, "turn_start_refused", why)
        except rpc.AppServerError as exc:
            return await self._unconfirmed(invocation, exc)
        await faults.reached(Point.BACKEND_TURN_WRITTEN)
        native = str(result["turn"]["id"])
        receipt = hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()
        self._board.track(thread_id, native)

        def accept(conn: apsw.Connection) -> Turn:
            inv = sessions.invocation(conn, turn_id, message.round)
            fresh = turns.get(conn, turn_id)
            assert inv is not None and fresh is not None
            sessions.update_invocation(
                conn, inv, dispatch=policy.Dispatch.ACCEPTED, native_turn_id=native,
                receipt_sha256=receipt,
            )  # fmt: skip
            thread_persisted(conn, inv.session_id)
            return turns.update(
                conn, fresh, state=TurnState.RUNNING, native_session=thread_id,
                evidence_status="bound", evidence=_evidence(self._app, thread_id, native),
            )  # fmt: skip

        accepted = await transact(self._store, accept)
        await faults.reached(Point.BACKEND_TURN_ACCEPTED)
        return StartReceipt(accepted, self._board.generation)

    async def _thread_start(self, session: SessionRow, turn: Turn) -> str:
        await faults.reached(Point.BACKEND_THREAD_START)
        result = await self._app.request(
            "thread/start", {"cwd": session.workspace}, timeout=REQUEST_TIMEOUT
        )
        thread_id = str(result["thread"]["id"])
        self._board.loaded.add(thread_id)
        await faults.reached(Point.BACKEND_THREAD_STARTED)
        session_id = session.session_id

        def persist(conn: apsw.Connection) -> None:
            # Its history stays `unknown`: the app-server writes a thread's rollout only with
            # its first turn, so an empty thread cannot be resumed by a later process.
            fresh = sessions.get(conn, session_id)
            assert fresh is not None
            sessions.update(conn, fresh, thread_id=thread_id)

        await transact(self._store, persist)
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

            await transact(self._store, reject)
            why = (
                f"the app-server refused to resume the session's thread "
                f"({redact(exc.message)[:200]}); nothing was sent. Send again: AKK will rebuild "
                "the session (pass a handoff so the new thread knows the task)"
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
            inv = sessions.invocation(conn, turn_id, round_)
            fresh = turns.get(conn, turn_id)
            assert inv is not None and fresh is not None
            sessions.update_invocation(
                conn, inv, dispatch=policy.Dispatch.NOT_SENT, outcome="failed", outcome_at=now,
                cleanup="confirmed", cleanup_at=now,
            )  # fmt: skip
            return turns.settle(conn, fresh, TurnState.FAILED, now=now, reason=reason, summary=why)

        return StartReceipt(await transact(self._store, fail), self._board.generation)

    async def _unconfirmed(
        self, invocation: InvocationRow, exc: rpc.AppServerError
    ) -> StartReceipt:
        """turn/start may have reached the app-server: `uncertain`, reconciled, never resent."""
        turn_id = invocation.turn_id
        why = f"turn/start got no answer ({type(exc).__name__})"

        def mark(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            return turns.update(
                conn, fresh, state=TurnState.UNCERTAIN, reason="dispatch_unconfirmed"
            )

        log.warning("turn %s: %s", turn_id, why)
        return StartReceipt(await transact(self._store, mark), self._board.generation)

    # -- answering a server request

    async def _answer(self, message: AnswerRequest) -> AnswerReceipt | Refusal:
        """One answer: fence (the request is still pending, same fingerprint), reserve, send."""
        request = self._board.requests.get(message.request_id)
        if message.steer is not None:
            refused = self._steer_fence(message.steer, message.fingerprint)
            if refused is not None:
                return refused
        elif request is None or fingerprint(request, self._board.generation) != message.fingerprint:
            return Refusal(
                Reason.PROMPT_CHANGED,
                "the app-server no longer asks what this answer was for; nothing was sent. "
                "Call status for the current interaction",
            )
        now = time.time()

        def reserve(conn: apsw.Connection) -> Dispatch | Refusal:
            try:
                interactions.take_offer(
                    conn, message.interaction_id, message.controller_id, message.offer_id, now
                )
            except interactions.OfferUnusable as exc:
                return Refusal(*offer_refusal(exc))
            return dispatches.reserve(
                conn, controller_id=message.controller_id, turn_id=message.turn_id,
                terminal_id=None, kind=message.kind, typing=None, screen_seq=None, now=now,
                interaction_id=message.interaction_id, offer_id=message.offer_id,
                fingerprint=message.fingerprint,
            )  # fmt: skip

        reserved = await transact(self._store, reserve)
        if isinstance(reserved, Refusal):
            return reserved
        await faults.reached(Point.ANSWER_RESERVED)
        try:
            if message.steer is not None:
                await self._steer(message.steer)
            else:
                assert request is not None
                await self._app.respond(request, message.result)
        except rpc.ErrorReply as exc:
            # The app-server's own refusal (its turn is no longer the active one): nothing
            # reached the agent.
            why = f"the turn ended before the answer could join it ({redact(exc.message)[:120]})"
            await transact(
                self._store,
                lambda conn: dispatches.advance(
                    conn, _fresh(conn, reserved), Stage.NOT_ACCEPTED, why
                ),
            )
            return Refusal(
                Reason.CLOSED,
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
        sent = await transact(
            self._store,
            lambda conn: dispatches.advance(conn, _fresh(conn, reserved), Stage.ACCEPTED),
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
                Reason.CLOSED,
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

        return await transact(self._store, mark)

    # -- interrupt and read

    async def _interrupt(self, message: InterruptTurn) -> str | None:
        try:
            await self._app.request(
                "turn/interrupt",
                {"threadId": message.thread_id, "turnId": message.native_turn_id},
                timeout=REQUEST_TIMEOUT,
            )
        except rpc.ErrorReply as exc:
            return f"the app-server refused turn/interrupt: {redact(exc.message)[:200]}"
        return None

    async def _read_thread(self, thread_id: str) -> ThreadFacts:
        try:
            result = await self._app.request(
                "thread/read", {"threadId": thread_id, "includeTurns": True},
                timeout=REQUEST_TIMEOUT,
            )  # fmt: skip
        except rpc.ErrorReply as exc:
            return ThreadFacts(False, None, why=redact(exc.message)[:200])
        thread = result.get("thread") or {}
        status = (thread.get("status") or {}).get("type")
        records = tuple(_native_record(t) for t in thread.get("turns") or [])
        return ThreadFacts(True, status, records)


def _native_record(turn: dict[str, Any]) -> NativeRecord:
    error = turn.get("error")
    texts = [
        part.get("text", "")
        for item in turn.get("items") or []
        if isinstance(item, dict) and item.get("type") == "userMessage"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "text"
    ]
    return NativeRecord(
        turn_id=str(turn.get("id")),
        status=str(turn.get("status")),
        request_sha256=request_digest(texts[0]) if texts else None,
        final_message=_final_message(turn.get("items")),
        error=redact(str(error.get("message")))[:300] if isinstance(error, dict) else None,
    )


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


def offer_refusal(exc: interactions.OfferUnusable) -> tuple[Reason, str]:
    """The protocol reason and next step for an offer that cannot be used."""
    if exc.answered:
        return Reason.CONFLICT, (
            f"{exc}; an answered prompt never takes input again. Call status for the current "
            "interaction"
        )
    return Reason.STATUS_REQUIRED, f"{exc}: call status first, then answer what it shows"


def thread_persisted(conn: apsw.Connection, session_id: str) -> None:
    """A turn of the session's thread started: the app-server keeps its rollout from now on."""
    session = sessions.get(conn, session_id)
    if session is not None and session.history is policy.History.UNKNOWN:
        sessions.update(conn, session, history=policy.History.PERSISTED)


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


class BackendHost:
    """Runs one app-server process and its BackendActor; restarted by its supervisor.

    The ref (the mailbox) outlives each process, so asks queued during a restart
    are handled by the next one.
    """

    def __init__(
        self,
        setup: CodexSetup,
        *,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
        cwd: str,
        limits: rpc.WireLimits | None = None,
    ) -> None:
        self.setup = setup
        self.board = BackendBoard()
        self.ref = ActorRef[BackendMessage](
            setup.key, Rank.BACKEND, mailbox_size=BackendActor.mailbox_size
        )
        self._store = store
        self._reader = reader
        self._cwd = cwd
        self._limits = limits or rpc.WireLimits()

    async def run(self) -> None:
        board = self.board
        env = dict(self.setup.env) if self.setup.env is not None else None
        try:
            async with rpc.open_app_server(
                self.setup.binary, codex_home=self.setup.home, cwd=self._cwd, env=env,
                limits=self._limits, tap=self.setup.tap,
            ) as app:  # fmt: skip
                await self._serve(app)
        except rpc.StartError as exc:
            board.start_failed(str(exc))
            log.error("app-server did not start: %s", exc)
            await trio.sleep(START_RETRY_SECONDS)
            raise

    async def _serve(self, app: rpc.AppServer) -> None:
        board = self.board
        board.started(app.pid)
        log.info("app-server pid %d started (generation %d)", app.pid, board.generation)
        actor = BackendActor(
            app, setup=self.setup, board=board, store=self._store, reader=self._reader
        )
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, app)
                await Incarnation(self.ref, actor).run()
                nursery.cancel_scope.cancel()
        finally:
            board.stopped()
            ended = await app.aclose()
            await self._record_exit(ended)

    async def _pump(self, app: rpc.AppServer) -> None:
        """Fold every notification and server request into the board, until the connection ends."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._requests, app)
            async for note in app.notifications:
                self.board.apply(note)
        raise BackendLost(app.closed_reason or "the app-server's notifications ended")

    async def _requests(self, app: rpc.AppServer) -> None:
        # Bounded by the connection: at most Limits.server_requests are unanswered.
        async for request in app.server_requests:
            self.board.requests[request.id] = request
            self.board.seq += 1

    async def _record_exit(self, ended: rpc.Exit) -> None:
        detail = {
            "how": ended.how, "returncode": ended.returncode, "reaped": ended.reaped,
            "reason": ended.reason[:200], "stragglers": list(ended.stragglers),
        }  # fmt: skip

        def record(conn: apsw.Connection) -> None:
            audit.record(
                conn, at=time.time(), actor="akk", action="app_server_exit",
                outcome="ok" if ended.reaped else "unreaped", detail=detail,
            )  # fmt: skip

        with trio.CancelScope(shield=True):
            await transact(self._store, record)


async def find_codex(binary: str | None, home: str, versions: VersionCache) -> CodexSetup | str:
    """The pinned Codex at ``binary`` (None: `codex` on PATH), or why there is none."""
    found = await trio.to_thread.run_sync(_executable, binary)
    if not os.path.isabs(found):
        return found
    program = found
    version = await versions.version_of_program("codex", [program])
    if version is None:
        return f"{program}: `--version` printed no codex-cli version"
    if version not in schema.versions():
        return f"codex-cli {version} is not pinned ({', '.join(schema.versions())} are)"
    return CodexSetup(binary=program, home=home, version=version)


def _executable(binary: str | None) -> str:
    """The real path of ``binary`` (or of `codex` on PATH), or why there is none."""
    program = binary if binary is not None else shutil.which("codex")
    if program is None:
        return "no codex on PATH (pass --codex-bin)"
    program = os.path.realpath(program)
    if not (os.path.isfile(program) and os.access(program, os.X_OK)):
        return f"{program} is not an executable file"
    return program


class BackendDesk:
    """Starts the one BackendHost per CODEX_HOME under the backends supervisor."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        setup: CodexSetup | str,
        store: ActorRef,
        reader: Callable[[Callable[[apsw.Connection], Any]], Any],
        cwd: str,
    ) -> None:
        self._supervisor = supervisor
        self.setup = setup
        self._store = store
        self._reader = reader
        self._cwd = cwd
        self._host: BackendHost | None = None

    async def host(self) -> BackendHost:
        """The running host, started on first use (the setup must be a CodexSetup)."""
        assert isinstance(self.setup, CodexSetup), self.setup
        if self._host is None:
            host = BackendHost(self.setup, store=self._store, reader=self._reader, cwd=self._cwd)
            await self._supervisor.start_child(
                ChildSpec(self.setup.key, host.run, restart=Restart.PERMANENT)
            )
            self._host = host
        return self._host

    @property
    def running(self) -> BackendHost | None:
        return self._host

    @property
    def available(self) -> bool:
        """A pinned Codex is configured (else `setup` says why not)."""
        return isinstance(self.setup, CodexSetup)

    @property
    def version(self) -> str:
        """The Codex version the backend runs ("" when none is configured)."""
        return self.setup.version if isinstance(self.setup, CodexSetup) else ""
