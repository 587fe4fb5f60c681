"""The classification a captured screen must get, written beside it as ``.json``.

Written from a scenario's own questions and from what each client is known to add
(its automatic rows and confirmations), never by parsing the screen; a recognizer
under test must reproduce it.

Label vocabulary (matches the controller protocol's projection): state in
idle, idle_draft, working, permission, questionnaire, async_question, blocked,
unknown; kind in questionnaire, permission, async_question, confirmation;
response_kind in single_select, multi_select, free_text, confirm.
"""

from __future__ import annotations

from typing import Literal

import attrs

from akk.profiles.composer import TypingMethod

State = Literal[
    "idle",
    "idle_draft",
    "working",
    "permission",
    "questionnaire",
    "async_question",
    "blocked",
    "unknown",
]
Kind = Literal["questionnaire", "permission", "async_question", "confirmation"]
ResponseKind = Literal["single_select", "multi_select", "free_text", "confirm"]


@attrs.frozen
class ExpectedQuestion:
    """One question as the classification must report it."""

    prompt: str
    response_kind: ResponseKind
    options: tuple[str, ...]
    header: str | None = None
    extra_rows: tuple[str, ...] = ()
    """Rows the client adds after the options (free-text row, "Chat about this", ...)."""
    current_row: str | None = None
    """Label of the row under the cursor (an option or an extra row)."""
    checked: tuple[str, ...] = ()
    """Multi-select options already ticked."""
    free_text: bool = False
    """Whether the question also takes a typed answer."""
    typed_text: str | None = None
    """Text already typed into the free-text editor or notes field."""


@attrs.frozen
class Typed:
    """What a draft screen's composer holds: the exact text and how it was put there."""

    text: str
    method: TypingMethod
    """LITERAL (tmux send-keys -l) or PASTE (a bracketed paste of a tmux buffer)."""


@attrs.frozen
class Expected:
    """The classification a recognizer must give a captured screen."""

    state: State
    kind: Kind | None = None
    questions: tuple[ExpectedQuestion, ...] = ()
    step: tuple[int, int] | None = None
    """(index, total), 1-based, for multi-step prompts."""
    decisions: tuple[str, ...] = ()
    tool: str | None = None
    command: str | None = None
    manual_only: bool = False
    """A prompt AKK must leave to a person (e.g. a Claude permission to edit a file)."""
    blocker: str | None = None
    """For state blocked: onboarding, api_key or trust."""
    draft: str | None = None
    reply: str | None = None
    """For a finished turn: the reply text now on screen."""
    typed: Typed | None = None
    """For the typing plans: the draft's exact text and method (written only when set)."""

    def to_json(self) -> dict[str, object]:
        """The JSON form written beside the screen."""
        data = attrs.asdict(self, recurse=True)
        data["step"] = None if self.step is None else {"index": self.step[0], "total": self.step[1]}
        data["response_kinds"] = [q.response_kind for q in self.questions]
        if self.typed is None:
            del data["typed"]  # the labels of the older plans stay as they were
        return data
