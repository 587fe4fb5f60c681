"""BackendBoard: what one app-server process said, folded into published facts.

The BackendHost's reader applies every notification and server request here;
TurnActors (through their follower) and the methods read it, as they read the
TerminalBoard, and never block on the process. Its ``generation`` names the
process: a new one means the Turns reconcile from `thread/read`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

import attrs
import trio

from akk import evidence
from akk.actors.turn_follower import Usage
from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.prompts import (
    AsyncQuestion,
    BackendPrompt,
    async_prompt_of,
    prompt_of,
)
from akk.protocol.redaction import redact_head
from akk.screen.fingerprint import IdMinter
from akk.store.database import StoreUnwritable
from akk.store.turns import Turn

log = logging.getLogger("akk.backend")

KEPT_TURNS = 1024
"""Native turns the board remembers (oldest forgotten first)."""


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

    def usage(self) -> Usage:
        """The attributable increment: this turn's own tokens, never the thread's totals."""
        if self.usage_start is None or self.usage_total is None:
            return Usage(evidence.UsageStatus.UNKNOWN)
        spent = {k: self.usage_total.get(k, 0) - self.usage_start.get(k, 0) for k in _USAGE_KEYS}
        cached, written = spent["cachedInputTokens"], spent["cacheWriteInputTokens"]
        tokens = evidence.Tokens(
            input=spent["inputTokens"] - cached - written,
            output=spent["outputTokens"],
            cache_read=cached,
            cache_write=written,
        )
        status = evidence.UsageStatus.COMPLETE if self.settled else evidence.UsageStatus.PARTIAL
        return Usage(status, tokens)


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
    store_wait: StoreUnwritable | None = None
    """Why the host's actor waits for the store to record what the app-server did, its
    mailbox held meanwhile (None: it does not)."""
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
            native.final_message = final_message(turn.get("items")) or native.final_message
            error = turn.get("error")
            if isinstance(error, dict) and error.get("message"):
                native.error = redact_head(str(error["message"]), 300)
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


def final_message(items: object) -> str | None:
    if not isinstance(items, list):
        return None
    texts = [
        item["text"]
        for item in items
        if isinstance(item, dict) and item.get("type") == "agentMessage" and item.get("text")
    ]
    return str(texts[-1]) if texts else None


# -- messages
