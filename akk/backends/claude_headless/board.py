"""RunBoard: what one headless Claude process said, published for its Turn and its answers.

The process's pump (`host.RunHost`) folds every line into the board; the Turn's
follower and the interaction methods read it (upward news never blocks), and
only the RunActor writes to the process.
"""

from __future__ import annotations

import attrs
import trio

from akk.backends.claude_headless import wire
from akk.backends.claude_headless.process import Exit
from akk.backends.claude_headless.prompts import HeadlessPrompt, prompt_of
from akk.screen.fingerprint import IdMinter

MAX_REQUESTS = 64
"""Control requests one process may have unanswered at once (as the app-server's
connection allows its server requests); one more ends the process (`over_bound`)."""

MAX_ASKED = 4096
"""Control requests one process may ask over its round (asked, withdrawn, asked again:
each one a stored interaction); one more ends the process."""


@attrs.define(eq=False)
class RunBoard:
    """One round's process, as its lines show it.

    ``generation``: names the process (its Turn's round), so a fingerprint of a
    request is never valid for another process. ``requests``: the control requests
    Claude asks and nobody answered or withdrew yet, by request id.
    """

    generation: int
    pid: int | None = None
    start_ticks: int | None = None
    init: wire.Init | None = None
    requests: dict[str, wire.ControlRequest] = attrs.field(factory=dict)
    final_text: str | None = None
    """The last assistant text of the round (the `result`'s text is preferred)."""
    result: wire.Result | None = None
    context_tokens: int | None = None
    """The prompt of the round's last model response (input, cache read and written): the
    context in use."""
    interrupted: bool = False
    """AKK wrote an interrupt into this process."""
    closed: str | None = None
    """Why its connection closed (None while it is open)."""
    exit: Exit | None = None
    """How the process ended, once it is reaped."""
    failed_to_start: str | None = None
    unsent: str | None = None
    """Why the round's line was never written (the store could not mark it sent first)."""
    bound: str | None = None
    """Which bound on what it may make AKK hold the process broke (AKK ended it then)."""
    asked: int = 0
    """Control requests the process asked so far (`MAX_ASKED`)."""
    last_activity: float = attrs.field(factory=trio.current_time)
    seq: int = 0
    """Moves on with every line (a follower's wake-up)."""
    changed: trio.Event = attrs.field(factory=trio.Event)
    _made: dict[str, tuple[_Made, HeadlessPrompt]] = attrs.field(factory=dict)
    """Each waiting request's prompt as last made, and what it was made from (`prompts`)."""

    def prompts(self, ids: IdMinter, turn_id: str) -> list[HeadlessPrompt]:
        """The interactions the waiting control requests are, oldest first, each made again
        only when what it is made from changed.

        A Turn's follower asks for them on every look (ten a second), and making
        one redacts its texts: a command of a megabyte took 0.1 s or more of the server's
        thread each time, the whole thread for as long as it waited.
        """
        for gone in self._made.keys() - self.requests.keys():
            del self._made[gone]  # answered, withdrawn, or the round's result came
        found = []
        for request_id, asked in self.requests.items():
            source = _Made(asked, ids, turn_id)
            kept = self._made.get(request_id)
            if kept is None or kept[0] != source:
                made = prompt_of(
                    request_id, asked.request, generation=self.generation, ids=ids,
                    turn_id=turn_id,
                )  # fmt: skip
                kept = self._made[request_id] = (source, made)
            found.append(kept[1])
        return found

    def apply(self, message: wire.Message) -> None:
        """Fold one line of the process into the board."""
        match message:
            case wire.Init():
                self.init = message
            case wire.ControlRequest():
                self.asked += message.request_id not in self.requests
                self.requests[message.request_id] = message
            case wire.ControlCancel(request_id):
                self.requests.pop(request_id, None)
            case wire.Assistant() if message.parent_tool_use_id is None:
                if message.text:
                    self.final_text = message.text
                self.context_tokens = _prompt_tokens(message) or self.context_tokens
            case wire.Result():
                self.result = message
                self.requests.clear()
            case _:
                pass
        self.touch()

    def over_bound(self, message: wire.Message) -> str | None:
        """Why folding ``message`` in would hold more than a process may make AKK hold
        (`MAX_REQUESTS`, `MAX_ASKED`); None: it may be applied."""
        if not isinstance(message, wire.ControlRequest) or message.request_id in self.requests:
            return None
        if len(self.requests) >= MAX_REQUESTS:
            return f"Claude asked over {MAX_REQUESTS} control requests without waiting for answers"
        if self.asked >= MAX_ASKED:
            return f"Claude asked over {MAX_ASKED} control requests in one round"
        return None

    def touch(self) -> None:
        """Something happened: wake whoever waits on `changed`."""
        self.seq += 1
        self.last_activity = trio.current_time()
        self.changed.set()
        self.changed = trio.Event()

    @property
    def context_window(self) -> int | None:
        """The model's window as the `result` reports it (`modelUsage`), where it does."""
        if self.result is None:
            return None
        models = self.result.raw.get("modelUsage")
        if not isinstance(models, dict):
            return None
        windows = [
            entry.get("contextWindow") for entry in models.values() if isinstance(entry, dict)
        ]
        known = [w for w in windows if isinstance(w, int) and not isinstance(w, bool) and w > 0]
        return max(known) if known else None

    @property
    def alive(self) -> bool:
        """The process's connection is open."""
        return self.pid is not None and self.closed is None


@attrs.frozen
class _Made:
    """All a control request's prompt is made from besides its process (`RunBoard.prompts`)."""

    request: wire.ControlRequest
    """Equal only to a request of the same id and content: an id Claude gives again, to
    another request, makes another prompt."""
    ids: IdMinter
    """The minter of the prompt's ids (equal only to itself)."""
    turn_id: str


def _prompt_tokens(message: wire.Assistant) -> int | None:
    inner = message.raw.get("message")
    usage = inner.get("usage") if isinstance(inner, dict) else None
    if not isinstance(usage, dict):
        return None
    counts = [
        usage.get(key)
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    ]
    return sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool)) or None
