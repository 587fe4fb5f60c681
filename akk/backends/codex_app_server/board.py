"""BackendBoard: what one app-server process said, folded into published facts.

The BackendHost's reader applies every notification and server request here;
TurnActors (through their follower) and the methods read it, as they read the
TerminalBoard, and never block on the process. Its ``generation`` names the
process: a new one means the Turns reconcile from `thread/read`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import attrs
import trio

from akk import evidence
from akk.actors.turn_follower import Usage
from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.prompts import (
    FILE_CHANGE,
    AsyncQuestion,
    BackendPrompt,
    FileChanges,
    async_prompt_of,
    file_changes,
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

KEPT_FILE_CHANGES = 256
"""fileChange items whose changes the board remembers (least recently reported forgotten
first), each at most `detail`'s bound of text: a file change approval awaiting an answer
(at most `rpc.WireLimits.server_requests`) names one of the newest."""

ItemKey = tuple[str, str, str]
"""(thread id, turn id, item id) of an item."""


@attrs.frozen
class _Made:
    """All a server request's prompt is made from (`BackendBoard._prompt`)."""

    request: rpc.ServerRequest
    """Equal only to a request of the same id and params: an id the app-server gives again,
    to another request, makes another prompt."""
    generation: int
    turn_id: str
    ids: IdMinter
    """The minter of the prompt's ids (equal only to itself)."""
    changes: str | None
    """The digest of the changes a file change approval's item proposed."""


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
    changes: OrderedDict[ItemKey, FileChanges] = attrs.field(factory=OrderedDict)
    """What each fileChange item of a running turn proposes (a file change approval shows
    its item's)."""
    start_error: str | None = None
    """Why the latest start failed (None once a process runs)."""
    store_wait: StoreUnwritable | None = None
    """Why the host's actor waits for the store to record what the app-server did, its
    mailbox held meanwhile (None: it does not)."""
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _made: dict[rpc.RequestId, tuple[_Made, BackendPrompt]] = attrs.field(factory=dict)
    """Each waiting request's prompt as last made, and what it was made from (`prompts`)."""

    def _state_changed(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def started(self, pid: int) -> None:
        """A new process runs: what the previous one said is its own (its turns are
        reconciled from their threads)."""
        self.generation += 1
        self.pid, self.alive, self.start_error = pid, True, None
        for kept in (self.loaded, self.requests, self.questions, self.turns, self.rejected,
                     self.changes):  # fmt: skip
            kept.clear()
        self._state_changed()

    def starting(self) -> None:
        """A process is being started: a send waits for it (`settled`), not for an older
        failure's reason."""
        self.start_error = None
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
        for gone in self._made.keys() - self.requests.keys():
            del self._made[gone]  # answered, resolved, or of a process that ended
        if turn.unresolved:
            made = (self._prompt(r, turn.turn_id, ids) for r in self.requests.values())
            found += [p for p in made if p.native_turn_id == native_turn_id]
        found += [
            async_prompt_of(
                q, generation=self.generation, ids=ids, turn_id=turn.turn_id, running=running
            )
            for q in self.questions.values()
            if q.native_turn_id == native_turn_id
        ]
        return found

    def _prompt(self, request: rpc.ServerRequest, turn_id: str, ids: IdMinter) -> BackendPrompt:
        """``request``'s prompt, made again only when what it is made from changed.

        A Turn's follower asks for its prompts on every look (ten a second), and
        making one redacts its texts: a command of a megabyte took 0.1 s or more of the
        server's thread each time, the whole thread for as long as it waited.
        """
        changes = self.changes_of(request)
        digest = None if changes is None else changes.digest
        source = _Made(request, self.generation, turn_id, ids, digest)
        kept = self._made.get(request.id)
        if kept is not None and kept[0] == source:
            return kept[1]
        prompt = prompt_of(
            request, generation=self.generation, ids=ids, turn_id=turn_id, changes=changes
        )
        self._made[request.id] = (source, prompt)
        return prompt

    def forget(self, native_turn_id: str) -> None:
        self.turns.pop(native_turn_id, None)

    def changes_of(self, request: rpc.ServerRequest) -> FileChanges | None:
        """What a file change approval would apply, as its item said (None: another kind of
        request, or its item was not reported)."""
        params = request.params
        if request.method != FILE_CHANGE or not isinstance(params, dict):
            return None
        key = _item_key(params, params.get("itemId"))
        return None if key is None else self.changes.get(key)

    def keep_awaited(self, awaiting: Callable[[rpc.RequestId], bool]) -> None:
        """Let go of the server requests that await no answer any more (resolved by the
        app-server, or their turn completed): no prompt shows them, no answer is fenced
        against them."""
        moot = [request_id for request_id in self.requests if not awaiting(request_id)]
        for request_id in moot:
            del self.requests[request_id]
        if moot:
            self.seq += 1

    def track(self, thread_id: str, turn_id: str) -> NativeTurn:
        """The native turn ``turn_id`` of ``thread_id``, followed from now on."""
        found = self.turns.get(turn_id)
        if found is None:
            found = self.turns[turn_id] = NativeTurn(thread_id, turn_id)
            while len(self.turns) > KEPT_TURNS:
                self.turns.popitem(last=False)
        return found

    def apply(self, note: rpc.ServerNotification) -> None:
        """Fold one notification into the board. Unknown ones are ignored; a known one of the
        wrong shape is skipped and logged (its method and what was wrong, never its content)."""
        fold = _FOLDS.get(note.method)
        if fold is None:
            return
        why = fold(self, note.params) if isinstance(note.params, dict) else "params is no object"
        if why is not None:
            log.warning("app-server notification %s skipped: %s", note.method, why)

    def _turn(self, params: dict[str, Any]) -> str | None:
        """turn/started, turn/completed: the native turn's status, final message and error."""
        thread_id, turn = params.get("threadId"), params.get("turn")
        if not isinstance(thread_id, str):
            return "threadId is no text"
        if not isinstance(turn, dict) or not isinstance(turn.get("id"), str):
            return "turn is no object with a text id"
        status, error = turn.get("status"), turn.get("error")
        if status is not None and not isinstance(status, str):
            return "turn.status is no text"
        native = self.track(thread_id, turn["id"])
        native.status = native.status if status is None else status
        if native.settled:  # its approvals are moot: what they would apply is no more asked
            for key in [k for k in self.changes if k[:2] == (thread_id, native.turn_id)]:
                del self.changes[key]
        native.final_message = final_message(turn.get("items")) or native.final_message
        if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
            native.error = redact_head(error["message"], 300)
        self._moved(native)
        return None

    def _usage(self, params: dict[str, Any]) -> str | None:
        """thread/tokenUsage/updated: the native turn's running totals."""
        thread_id, turn_id = params.get("threadId"), params.get("turnId")
        usage = params.get("tokenUsage")
        if not (isinstance(thread_id, str) and isinstance(turn_id, str)):
            return "threadId or turnId is no text"
        if not isinstance(usage, dict):
            return "tokenUsage is no object"
        total, last = _counts(usage.get("total")), _counts(usage.get("last"))
        window, context = usage.get("modelContextWindow"), _count(usage.get("last"), "totalTokens")
        if total is None:
            return "tokenUsage.total is no object of integer counts"
        if (usage.get("last") is not None and (last is None or context is None)) or not (
            window is None or _is_count(window)
        ):
            return "tokenUsage.last or modelContextWindow holds no integer counts"
        native = self.track(thread_id, turn_id)
        if native.settled:
            return None  # a replay of a finished turn's totals (thread/resume sends one)
        if native.usage_start is None and last is not None:
            native.usage_start = {k: total[k] - last[k] for k in _USAGE_KEYS}
        native.usage_total = total
        native.context_tokens = context if last is not None else native.context_tokens
        native.context_window = window if window is not None else native.context_window
        self._moved(native)
        return None

    def _moved(self, native: NativeTurn) -> None:
        self.seq += 1
        native.seq = self.seq

    def _item(self, params: dict[str, Any]) -> str | None:
        """item/started: a fileChange item's changes (any other item: nothing for the board)."""
        item = params.get("item")
        if not (isinstance(item, dict) and item.get("type") == "fileChange"):
            return None
        return self._changes(params, item.get("id"), item.get("changes"))

    def _item_completed(self, params: dict[str, Any]) -> str | None:
        """item/completed: a fileChange item's changes, or an agent message delivered `async`
        that asks questions."""
        item = params.get("item")
        if isinstance(item, dict) and item.get("type") == "fileChange":
            return self._item(params)
        return self._async_question(params)

    def _patch_updated(self, params: dict[str, Any]) -> str | None:
        """item/fileChange/patchUpdated: a fileChange item's changes, as they stand now."""
        return self._changes(params, params.get("itemId"), params.get("changes"))

    def _changes(self, params: dict[str, Any], item_id: object, changes: object) -> str | None:
        key = _item_key(params, item_id)
        if key is None:
            return "threadId, turnId or the item's id is no text"
        self.changes[key] = file_changes(changes)
        self.changes.move_to_end(key)
        while len(self.changes) > KEPT_FILE_CHANGES:
            self.changes.popitem(last=False)
        self.seq += 1
        return None

    def _async_question(self, params: dict[str, Any]) -> str | None:
        """item/completed: an agent message delivered `async` that asks questions."""
        thread_id, item, turn_id = params.get("threadId"), params.get("item"), params.get("turnId")
        if not (isinstance(thread_id, str) and isinstance(item, dict)):
            return "threadId is no text or item no object"
        asked = item.get("questions")
        if item.get("delivery") != "async" or not isinstance(asked, list) or not asked:
            return None  # any other item: nothing asked
        questions = tuple(_question(q) for q in asked)
        if not isinstance(turn_id, str) or not isinstance(item.get("id"), str):
            return "turnId or item.id is no text"
        if any(q is None for q in questions):
            return "a question is no object with a text title and text options"
        item_id = item["id"]
        self.questions[item_id] = AsyncQuestion(
            thread_id, turn_id, item_id, tuple(q for q in questions if q is not None)
        )
        while len(self.questions) > KEPT_QUESTIONS:
            self.questions.popitem(last=False)
        self.seq += 1
        return None


_FOLDS: dict[str, Callable[[BackendBoard, dict[str, Any]], str | None]] = {
    "turn/started": BackendBoard._turn,
    "turn/completed": BackendBoard._turn,
    "thread/tokenUsage/updated": BackendBoard._usage,
    "item/started": BackendBoard._item,
    "item/completed": BackendBoard._item_completed,
    "item/fileChange/patchUpdated": BackendBoard._patch_updated,
}
"""The notifications the board folds in, each by a method that says why it skipped one
(None: folded, or nothing in it for the board)."""


def _item_key(params: dict[str, Any], item_id: object) -> ItemKey | None:
    """(threadId, turnId, ``item_id``) if all three are text."""
    thread_id, turn_id = params.get("threadId"), params.get("turnId")
    if isinstance(thread_id, str) and isinstance(turn_id, str) and isinstance(item_id, str):
        return thread_id, turn_id, item_id
    return None


MAX_COUNT = 1 << 53
"""Token counts above it are no counts (they would not fit the store's integers)."""


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT


def _count(counts: object, key: str) -> int | None:
    """``counts[key]`` (0 if absent), or None if ``counts`` is no object or it no integer."""
    if not isinstance(counts, dict):
        return None
    value = counts.get(key, 0)
    return value if _is_count(value) else None


def _counts(counts: object) -> dict[str, int] | None:
    """The usage counts in ``counts`` (absent ones 0), or None if any is no integer."""
    found = {key: _count(counts, key) for key in _USAGE_KEYS}
    if any(value is None for value in found.values()):
        return None
    return {key: value for key, value in found.items() if value is not None}


def _question(question: object) -> tuple[str, tuple[str, ...]] | None:
    """(title, option labels) of one async question, or None if it is of another shape."""
    if not isinstance(question, dict):
        return None
    title, options = question.get("title", ""), question.get("options") or []
    if not (isinstance(title, str) and isinstance(options, list)):
        return None
    if not all(isinstance(option, str) for option in options):
        return None
    return title, tuple(options)


def final_message(items: object) -> str | None:
    if not isinstance(items, list):
        return None
    texts = [
        item["text"]
        for item in items
        if isinstance(item, dict)
        and item.get("type") == "agentMessage"
        and isinstance(item.get("text"), str)
        and item["text"]
    ]
    return texts[-1] if texts else None


# -- messages
