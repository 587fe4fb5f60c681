"""What a profile reads off one screen: an Observation, the prompt and the draft it shows.

Every family's profile produces these same types, so everything above the
profiles (TerminalActor, the projection, the CLI) is family-agnostic. A
PromptView carries its exact screen Region for fingerprinting; the Region, any
key plan and the composer's draft stay inside the server.
"""

from __future__ import annotations

import enum

import attrs

from akk.profiles.composer import DraftView
from akk.screen.region import Region


class State(enum.StrEnum):
    """The one classification of a screen."""

    IDLE = "idle"  # empty composer, agent proven not working
    IDLE_DRAFT = "idle_draft"  # composer holds text, agent not working
    WORKING = "working"
    PERMISSION = "permission"
    QUESTIONNAIRE = "questionnaire"
    ASYNC_QUESTION = "async_question"
    BLOCKED = "blocked"  # a prompt AKK must never answer
    UNKNOWN = "unknown"  # nothing could be proven


PERSON_VIEW = "a person's view"
"""How the reason of an UNKNOWN Observation begins when the screen is a view a person opened
at the pane over the agent's work, with no prompt behind it (Claude's detailed transcript):
nothing to answer and nobody to wake, only no composer to type into."""

HIDDEN_PROMPT = "waits behind"
"""Words in the reason of an UNKNOWN Observation whose screen is a person's view with a
prompt waiting behind it: a person must close the view to see it."""


class InteractionKind(enum.StrEnum):
    QUESTIONNAIRE = "questionnaire"
    PERMISSION = "permission"
    ASYNC_QUESTION = "async_question"
    CONFIRMATION = "confirmation"


class StepKind(enum.StrEnum):
    """Which widget a prompt step shows (decides the key plan)."""

    SINGLE_SELECT = "single_select"
    MULTI_SELECT = "multi_select"
    FREE_TEXT = "free_text"  # a text editor is open (e.g. Claude's "Type something.")
    REVIEW = "review"  # final Submit answers / Cancel
    CONFIRM = "confirm"  # e.g. Codex "Proceed / Go back" on unanswered questions
    PERMISSION = "permission"
    QUEUED = "queued"  # an async question waits, unopened: its rows show once it is opened


class ResponseKind(enum.StrEnum):
    """How a controller answers one question (PROTOCOL.md)."""

    SINGLE_SELECT = "single_select"
    MULTI_SELECT = "multi_select"
    FREE_TEXT = "free_text"
    CONFIRM = "confirm"


class OptionRole(enum.StrEnum):
    """What choosing a row means, whatever its label says."""

    CHOICE = "choice"  # one of the question's own options
    FREE_TEXT = "free_text"  # opens a text editor ("Type something.")
    CHAT = "chat"  # Claude's "Chat about this"
    NONE_OF_THE_ABOVE = "none_of_the_above"  # Codex; notes optional
    SUBMIT = "submit"
    CANCEL = "cancel"
    PROCEED = "proceed"
    GO_BACK = "go_back"
    APPROVE_ONCE = "approve_once"
    APPROVE_PERSISTENT = "approve_persistent"  # never offered to controllers
    REJECT = "reject"


class ActivityState(enum.StrEnum):
    """The coarse state `list` reports per terminal (PROTOCOL.md)."""

    IDLE = "idle"
    WORKING = "working"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_INPUT = "awaiting_input"
    BLOCKED = "blocked"
    UNKNOWN = "unknown"


@attrs.frozen
class OptionView:
    """One row of a menu as drawn."""

    label: str
    role: OptionRole = OptionRole.CHOICE
    number: int | None = None
    description: str = ""
    current: bool = False  # the row the cursor is on
    checked: bool | None = None  # multi-select box state; None when the row has no box


@attrs.frozen
class FileView:
    """A file a permission asks to create or edit, as drawn: its path and its lines.

    A new file's lines are its content; an edit's are the change with its context, each
    with its sign in `signs` (``" "`` context, ``"-"`` removed, ``"+"`` added; empty for a
    new file). Each line is its rows joined as drawn (a long line breaks under its
    number); what the client expands or trims (a tab, a trailing space) shows as drawn.
    """

    path: str
    lines: tuple[str, ...]
    signs: str = ""
    numbers: tuple[int, ...] = ()
    """Each line's number as drawn: in the new file (a removed line's: in the old one)."""
    cut: bool = False
    """Its prompt is taller than the pane: its title, path and first lines scrolled off the
    top (the path is its question's)."""

    @property
    def first(self) -> int:
        """The number of its first line drawn (1 for a new file drawn whole)."""
        return self.numbers[0] if self.numbers else 1


@attrs.frozen
class QuestionView:
    """One question of a prompt step."""

    prompt: str
    response_kind: ResponseKind
    options: tuple[OptionView, ...] = ()
    header: str | None = None
    required: bool = True
    detail: str = ""  # what a permission is for, e.g. the command line; shown to controllers
    command: str | None = None  # a permission's command as drawn (rows unwrapped), else None
    file: FileView | None = None  # the file a permission would create or edit, as drawn
    patched: tuple[str, ...] = ()  # the files a patch writes, as drawn (Codex: absolute, sorted)
    tool: str = ""  # the tool (its name in the agent's file) a permission asks to call


@attrs.frozen
class PromptView:
    """A recognized prompt: exactly one bounded region, its step and its questions."""

    kind: InteractionKind
    step: StepKind
    questions: tuple[QuestionView, ...]
    region: Region
    step_index: int = 1
    step_total: int = 1
    tabs: tuple[str, ...] = ()  # the tab headers of a multi-question questionnaire
    reviewed: tuple[str, ...] = ()
    """The questions a review step lists with their answers (never projected: it says
    whether one asked for a secret, which the screen then shows answered)."""
    asked: tuple[QuestionView, ...] = attrs.field(default=(), eq=False)
    """Its questions in the words of the call the agent's file records for it
    (`akk.profiles.question_call`); empty where none is bound. Not part of the drawing:
    two reads of one screen are equal whether or not a call was bound to them."""
    call: str = attrs.field(default="", eq=False)
    """The identity of the pending call it was bound to (`evidence.PendingCall.identity`):
    a permission's or a question's; empty where none is."""
    secret: bool = attrs.field(default=False, eq=False)
    """Whether the call it asks marks its question (a review's or confirmation's: any of
    the call's questions) secret, as Codex's ``isSecret`` does: a person's to answer."""

    @property
    def offered(self) -> tuple[QuestionView, ...]:
        """Its questions as a controller is offered them: in its call's words where one is
        bound, else as drawn."""
        return self.asked or self.questions


@attrs.frozen
class Observation:
    """The classification of one screen under one profile.

    ``reason`` says why a prompt is not actionable (blocked, unknown, or a
    shape the profile refuses to answer); a prompt with a reason gets no keys.

    ``draft`` is the composer's content wherever a composer is proven on
    screen: empty for IDLE, non-empty for IDLE_DRAFT, and whatever a person
    typed meanwhile for WORKING (both clients keep their composer while a turn
    runs); None when no composer shows. It is private: it never leaves the
    server and is never projected (the sender proves its own text with it).

    ``composer_mode`` is the editing mode the composer shows: ``insert`` where
    Claude's vim mode marks it (``-- INSERT --``); ``shell`` (both agents) or
    ``history_search`` (Codex) where a person opened that mode while a turn
    works (WORKING only, the draft being their command or search); None where
    no mode shows.
    """

    state: State
    profile_id: str | None
    prompt: PromptView | None = None
    reason: str | None = None
    draft: DraftView | None = None
    composer_mode: str | None = None

    @property
    def actionable(self) -> bool:
        return self.prompt is not None and self.reason is None

    @property
    def activity(self) -> ActivityState:
        return _ACTIVITY[self.state]


_ACTIVITY = {
    State.IDLE: ActivityState.IDLE,
    State.IDLE_DRAFT: ActivityState.IDLE,
    State.WORKING: ActivityState.WORKING,
    State.PERMISSION: ActivityState.AWAITING_APPROVAL,
    State.QUESTIONNAIRE: ActivityState.AWAITING_INPUT,
    State.ASYNC_QUESTION: ActivityState.AWAITING_INPUT,
    State.BLOCKED: ActivityState.BLOCKED,
    State.UNKNOWN: ActivityState.UNKNOWN,
}


class Unproven(Exception):
    """A screen that looks like a known shape whose rows could not be proven row by row.

    Raised inside a family's classifier and caught at its top, where it becomes
    an UNKNOWN Observation whose reason is `reason` (no prompt, zero keys).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
