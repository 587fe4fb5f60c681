"""Capture the fixture corpus: drive a real client through a scenario, save screens.

A capture plan is data: the scenario to play, the launch options, and a list of
actions (submit the task, type, press keys, wait for text, release a signal)
with `Shot`s at the points to capture. Each shot writes the exact
``tmux capture-pane -p -e`` output to ``<out>/<agent>/<version>/[<folder>/]
[<cols>x<rows>/]<plan>[-<step>].ansi`` (the size folder only for sizes other
than 120x40, the plan's own folder only where it names one) and a ``.json``
beside it with the expected classification. That classification is
written here, from the scenario's own questions and from what each client is
known to add (its automatic rows and confirmations), never by parsing the
screen; a recognizer under test must reproduce it.

Label vocabulary (matches the controller protocol's projection): state in
idle, idle_draft, working, permission, questionnaire, async_question, blocked,
unknown; kind in questionnaire, permission, async_question, confirmation;
response_kind in single_select, multi_select, free_text, confirm.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs
import trio

from akk.profiles.composer import TypingMethod
from akk.qualify.client import Agent, Client
from akk.qualify.launcher import (
    CLAUDE_SPINNER,
    CODEX_SETTLE_SECONDS,
    CODEX_STATUS_MIN_ROWS,
    UNCONFINED,
    Confinement,
    LabSession,
    Preseed,
    ScreenTimeout,
    launch,
)
from akk.qualify.scenarios import (
    ASK_RULE,
    SCENARIOS,
    SLOW_SIGNAL,
    Question,
    Text,
)

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

SIZES: tuple[tuple[int, int], ...] = ((120, 40), (80, 24))
"""The sizes the corpus is captured at: the default and the narrow one."""

DEFAULT_SIZE = (120, 40)
PRESS_QUIET_SECONDS = 0.3
DRAFT_TEXT = "lab: a draft that is never sent"
FREE_TEXT = "Teal, please"
NOTE_TEXT = "Something in between"
SPECIAL_TEXT = "lab: he said \"don't\" & 'left' $HOME `x` ; ls | cat > out * ünïcödé 漢字 😀 done"
"""Quotes, shell syntax, accents, CJK and an emoji, typed into a request_user_input note."""
CODEX_NOTES_MARGIN = 7
"""Codex wraps request_user_input notes at the pane width less this (tools/lab/NOTES.md)."""

# Rows each client adds to a question on its own (observed on the pinned versions).
CLAUDE_SINGLE_EXTRA = ("Type something.", "Chat about this")
CLAUDE_MULTI_EXTRA = ("Type something", "Submit", "Chat about this")
CODEX_EXTRA = ("None of the above",)
CLAUDE_REVIEW = ("Submit answers", "Cancel")
CODEX_UNANSWERED = ("Proceed", "Go back")
CODEX_ASYNC_EXTRA = ("Other",)
CODEX_ASYNC_PICKER = frozenset({"0.154.0", "0.155.1"})
"""Codex versions that show async questions as a queued question with a picker."""
CODEX_ASYNC_TEXT_ONLY = frozenset({"0.153.4", "0.169.0", "0.171.0"})
"""Codex versions that only print an async question into the transcript."""


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
    """A prompt AKK must leave to a person (e.g. Claude's non-Bash permission)."""
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


@attrs.frozen
class Submit:
    """Type a message and press Enter (the scenario's task when text is None)."""

    text: str | None = None


@attrs.frozen
class Type:
    """Type characters, one key press each."""

    text: str


@attrs.frozen
class Paste:
    """Paste text as AKK does: a tmux buffer, then ``paste-buffer -p -r`` (bracketed)."""

    text: str


@attrs.frozen
class Press:
    """Press tmux keys in order (``Down``, ``Enter``, ``Tab``...)."""

    keys: tuple[str, ...]


@attrs.frozen
class WaitText:
    """Wait until any of the texts shows on the plain screen."""

    texts: tuple[str, ...]
    timeout: float = 20.0


@attrs.frozen
class WaitLine:
    """Wait until `pattern` (anchored per line with ``^``) matches the plain screen."""

    pattern: re.Pattern[str]
    timeout: float = 20.0


@attrs.frozen
class WaitIdle:
    """Wait for the idle, empty composer."""


@attrs.frozen
class Settle:
    """Wait until the screen has been still for `seconds` (a fresh composer may drop keys)."""

    seconds: float


@attrs.frozen
class Release:
    """Send a signal to the model server (e.g. end a held stream)."""

    signal: str


@attrs.frozen
class Shot:
    """Capture the screen here as `<plan>-<step>` with its expected classification.

    `settle` waits for the screen to stop changing first; animated screens
    (spinners, welcome art) are captured after a bounded wait regardless.
    """

    step: str | None
    expected: Expected
    settle: bool = True


Action = Submit | Type | Paste | Press | WaitText | WaitLine | WaitIdle | Settle | Release | Shot


@attrs.frozen
class Plan:
    """How to drive one scenario to its capture points."""

    name: str
    scenario: str
    agents: frozenset[Agent]
    actions: tuple[Action, ...]
    plan_mode: bool = False
    preseed: Preseed = attrs.field(factory=Preseed)
    versions: frozenset[str] | None = None
    """Only these versions of the agents (None: every pinned version)."""
    sizes: tuple[tuple[int, int], ...] | None = None
    """Only these pane sizes, the ones its texts are measured for (None: every size)."""
    folder: str | None = None
    """A folder of its own under the version's, outside the screens the profile tests glob."""
    unreadable_sizes: tuple[tuple[int, int], ...] = ()
    """Pane sizes where the client draws the prompt cut off (taller than the pane): every
    shot there is expected `unknown`, a screen AKK must not act on."""

    def fits(self, cols: int, rows: int) -> bool:
        """Whether the plan's labels hold at this pane size."""
        return self.sizes is None or (cols, rows) in self.sizes

    def expected_at(self, shot: Shot, cols: int, rows: int) -> Expected:
        """`shot`'s label at this pane size: ``unknown`` where the prompt is cut off."""
        return Expected("unknown") if (cols, rows) in self.unreadable_sizes else shot.expected

    def applies_to(self, client: Client) -> bool:
        """Whether the plan runs on this pinned client."""
        if client.agent not in self.agents:
            return False
        return self.versions is None or client.version in self.versions

    @property
    def steps(self) -> list[str | None]:
        """The capture points, in order."""
        return [action.step for action in self.actions if isinstance(action, Shot)]


def _wait(*texts: str) -> WaitText:
    return WaitText(texts)


def _claude_question(
    question: Question, *, current: int = 0, checked: Sequence[int] = (), typed: str | None = None
) -> ExpectedQuestion:
    labels = tuple(option.label for option in question.options)
    extra = CLAUDE_MULTI_EXTRA if question.multi_select else CLAUDE_SINGLE_EXTRA
    rows = labels + extra
    return ExpectedQuestion(
        prompt=question.question,
        header=question.header,
        response_kind="free_text"
        if typed is not None
        else ("multi_select" if question.multi_select else "single_select"),
        options=labels,
        extra_rows=extra,
        current_row=rows[current],
        checked=tuple(labels[i] for i in checked),
        free_text=True,
        typed_text=typed,
    )


def _codex_question(
    question: Question, *, current: int = 0, typed: str | None = None
) -> ExpectedQuestion:
    labels = tuple(option.label for option in question.options)
    rows = labels + CODEX_EXTRA
    return ExpectedQuestion(
        prompt=question.question,
        header=None,  # Codex's request_user_input widget does not draw the header
        response_kind="free_text" if typed is not None else "single_select",
        options=labels,
        extra_rows=CODEX_EXTRA,
        current_row=rows[current],
        free_text=True,
        typed_text=typed,
    )


def _questions(scenario: str) -> tuple[Question, ...]:
    first = SCENARIOS[scenario].steps[0].reply
    questions = getattr(first, "questions", None)
    assert questions is not None, f"scenario {scenario} does not open with a question"
    return tuple(questions)


def _command(scenario: str) -> str:
    reply = SCENARIOS[scenario].steps[0].reply
    command = getattr(reply, "command", None) or getattr(reply, "cmd", None)
    assert isinstance(command, str), f"scenario {scenario} does not open with a command"
    return command


_APPROVE = ("approve_once", "reject")
_BOTH: frozenset[Agent] = frozenset({"claude", "codex"})
_CLAUDE: frozenset[Agent] = frozenset({"claude"})
_CODEX: frozenset[Agent] = frozenset({"codex"})
_QUESTION_SHOWN = _wait("Enter to select", "enter to submit")


def _claude_single(scenario: str) -> Plan:
    (question,) = _questions(scenario)
    n = len(question.options)
    return Plan(
        scenario,
        scenario,
        _CLAUDE,
        (
            Submit(),
            _QUESTION_SHOWN,
            Shot("q1", Expected("questionnaire", "questionnaire", (_claude_question(question),))),
            Press(("Down",)),
            Shot(
                "q1_second",
                Expected(
                    "questionnaire", "questionnaire", (_claude_question(question, current=1),)
                ),
            ),
            Press(("Down",) * (n - 1)),
            Shot(
                "free_text_empty",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_claude_question(question, current=n, typed=""),),
                ),
            ),
            Type(FREE_TEXT),
            _wait(FREE_TEXT),
            Shot(
                "free_text_typed",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_claude_question(question, current=n, typed=FREE_TEXT),),
                ),
            ),
        ),
    )


def _claude_multi_select(scenario: str = "questionnaire_multi") -> Plan:
    (question,) = _questions(scenario)
    n = len(question.options)
    review = ExpectedQuestion(
        prompt="Review your answers",
        response_kind="confirm",
        options=CLAUDE_REVIEW,
        current_row=CLAUDE_REVIEW[0],
    )
    return Plan(
        scenario,
        scenario,
        _CLAUDE,
        (
            Submit(),
            _QUESTION_SHOWN,
            Shot(
                "q1",
                Expected(
                    "questionnaire", "questionnaire", (_claude_question(question),), step=(1, 2)
                ),
            ),
            Press(("Enter",)),
            _wait("[✔]"),
            Shot(
                "q1_checked",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_claude_question(question, checked=(0,)),),
                    step=(1, 2),
                ),
            ),
            # Down past the options and the free-text row to the Submit row.
            Press(("Down",) * (n + 1) + ("Enter",)),
            _wait("Review your answers"),
            Shot("review", Expected("questionnaire", "confirmation", (review,), step=(2, 2))),
        ),
    )


def _claude_multi_question() -> Plan:
    scenario = "questionnaire_multi_question"
    questions = _questions(scenario)
    total = len(questions) + 1
    actions: list[Action] = [Submit(), _QUESTION_SHOWN]
    for index, question in enumerate(questions, start=1):
        if index > 1:
            actions += [Press(("Enter",)), _wait(question.question)]
        actions.append(
            Shot(
                f"q{index}",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_claude_question(question),),
                    step=(index, total),
                ),
            )
        )
    review = ExpectedQuestion(
        prompt="Review your answers",
        response_kind="confirm",
        options=CLAUDE_REVIEW,
        current_row=CLAUDE_REVIEW[0],
    )
    actions += [
        Press(("Enter",)),
        _wait("Review your answers"),
        Shot("review", Expected("questionnaire", "confirmation", (review,), step=(total, total))),
    ]
    return Plan(scenario, scenario, _CLAUDE, tuple(actions))


def _codex_questions(scenario: str) -> Plan:
    questions = _questions(scenario)
    total = len(questions)
    actions: list[Action] = [Submit(), _wait(f"Question 1/{total}")]
    for index, question in enumerate(questions, start=1):
        if index > 1:
            actions += [Press(("Enter",)), _wait(f"Question {index}/{total}")]
        actions.append(
            Shot(
                f"q{index}",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_codex_question(question),),
                    step=(index, total),
                ),
            )
        )
    return Plan(scenario, scenario, _CODEX, tuple(actions), plan_mode=True)


def _codex_notes_and_unanswered() -> Plan:
    scenario = "codex_rui_three"
    questions = _questions(scenario)
    total = len(questions)
    first = questions[0]
    n = len(first.options)
    unanswered = ExpectedQuestion(
        prompt="Submit with unanswered questions?",
        response_kind="confirm",
        options=CODEX_UNANSWERED,
        current_row=CODEX_UNANSWERED[0],
    )
    return Plan(
        "codex_rui_notes",
        scenario,
        _CODEX,
        (
            Submit(),
            _wait(f"Question 1/{total}"),
            Press(("Down",) * n),
            Shot(
                "none_of_the_above",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_codex_question(first, current=n),),
                    step=(1, total),
                ),
            ),
            Press(("Tab",)),
            _wait("tab or esc to clear notes"),
            Shot(
                "notes_empty",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_codex_question(first, current=n, typed=""),),
                    step=(1, total),
                ),
            ),
            Type(NOTE_TEXT),
            _wait(NOTE_TEXT),
            Shot(
                "notes_typed",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_codex_question(first, current=n, typed=NOTE_TEXT),),
                    step=(1, total),
                ),
            ),
            # Clear the notes (Tab; Esc risks interrupting the turn), skip to the
            # last question and submit it with two questions unanswered.
            Press(("Tab",)),
            Press(("Right",) * (total - 1)),
            _wait(f"Question {total}/{total}"),
            Press(("Enter",)),
            _wait("Submit with unanswered questions?"),
            Shot("unanswered", Expected("questionnaire", "confirmation", (unanswered,))),
        ),
        plan_mode=True,
    )


def _codex_revisit() -> Plan:
    """An answered question visited again: its prompt drawn plain, its answer under the cursor."""
    scenario = "codex_rui_three"
    questions = _questions(scenario)
    total = len(questions)
    return Plan(
        "codex_rui_revisit",
        scenario,
        _CODEX,
        (
            Submit(),
            _wait(f"Question 1/{total}"),
            Press(("2",)),  # the digit answers the question at once and moves on
            _wait(f"Question 2/{total}"),
            Press(("Left",)),
            _wait(f"Question 1/{total} ({total - 1} unanswered)"),
            Shot(
                "q1_answered",
                Expected(
                    "questionnaire",
                    "questionnaire",
                    (_codex_question(questions[0], current=1),),
                    step=(1, total),
                ),
            ),
        ),
        plan_mode=True,
    )


_WIDE: tuple[tuple[int, int], ...] = (DEFAULT_SIZE,)
"""The notes plans' texts are measured for the notes width at 120 columns."""


def _codex_noted(
    question: Question, current: int, total: int, typed: Typed, *, whole: bool = True
) -> Expected:
    """A question whose row `current` has `typed` in its notes (all of it on screen if `whole`)."""
    asked = _codex_question(question, current=current, typed=typed.text)
    return Expected(
        "questionnaire",
        "questionnaire",
        (asked if whole else attrs.evolve(asked, typed_text=None),),
        step=(1, total),
        typed=typed,
    )


def _codex_notes_plan(
    name: str, current: int, notes: Sequence[tuple[str, str, bool]], folder: str | None = None
) -> Plan:
    """Open the notes of row `current` and type each (step, text, whole) in turn, one screen each.

    Tab clears the notes and closes them, Tab again opens them empty for the next text.
    """
    scenario = "codex_rui_one"
    (question,) = _questions(scenario)
    actions: list[Action] = [Submit(), _wait("Question 1/1")]
    if current:
        actions.append(Press(("Down",) * current))
    for index, (step, text, whole) in enumerate(notes):
        if index:
            actions.append(Press(("Tab",)))
        typed = Typed(text, TypingMethod.LITERAL)
        actions += [
            Press(("Tab",)),
            _wait("tab or esc to clear notes"),
            Type(text),
            _wait(text[:8], "[Pasted Content"),
            Shot(step, _codex_noted(question, current, 1, typed, whole=whole)),
        ]
    return Plan(name, scenario, _CODEX, tuple(actions), plan_mode=True, sizes=_WIDE, folder=folder)


def _codex_notes() -> list[Plan]:
    none_of_the_above = len(_questions("codex_rui_one")[0].options)
    full_row = "lab note " + "x" * (DEFAULT_SIZE[0] - CODEX_NOTES_MARGIN)
    return [
        _codex_notes_plan(
            "codex_notes",
            none_of_the_above,
            (
                ("special", SPECIAL_TEXT, True),
                ("full_row", full_row, True),  # its x-run fills a row: an empty row follows
                ("chars1001", _filler(1001, words=_NOTE_WORDS), False),  # a paste placeholder
            ),
        ),
        # Screens whose notes fill several rows: a dropped middle row reads as a
        # shorter note, so they stay out of the corpus tests/test_profile_codex.py mutates.
        _codex_notes_plan(
            "codex_notes_long",
            none_of_the_above,
            (
                ("rows5", _filler(547, words=_NOTE_WORDS), True),
                ("rows6", _filler(659, words=_NOTE_WORDS), True),  # as many rows as shown
                ("chars799", _filler(799, words=_NOTE_WORDS), False),  # 8 rows, last 6 shown
                ("chars800", _filler(800, words=_NOTE_WORDS), False),
            ),
            folder="notes",
        ),
        # The notes of an option row: they would go with that option.
        _codex_notes_plan("codex_notes_red", 0, (("typed", SPECIAL_TEXT, True),)),
    ]


def _codex_async() -> list[Plan]:
    scenario = "codex_rui_async"
    (question,) = _questions(scenario)
    labels = tuple(option.label for option in question.options)
    after = SCENARIOS[scenario].steps[1].reply
    assert isinstance(after, Text)

    def asked(current: str) -> ExpectedQuestion:
        return ExpectedQuestion(
            prompt=question.question,
            response_kind="single_select",
            options=labels,
            extra_rows=CODEX_ASYNC_EXTRA,  # the picker adds its "Other" row
            current_row=current,
            free_text=True,
        )

    return [
        # 0.154.0 and 0.155.1 queue the question under the transcript and open
        # a picker on Shift+Left; the composer stays usable meanwhile.
        Plan(
            scenario,
            scenario,
            _CODEX,
            (
                Submit(),
                _wait("to answer"),
                WaitIdle(),
                # Queued, the question shows no options: nothing to answer until
                # the picker is open.
                Shot("queued", Expected("async_question", "async_question", ())),
                Press(("S-Left",)),
                _wait("enter submit"),
                Shot(
                    "picker",
                    Expected("async_question", "async_question", (asked(labels[0]),)),
                ),
            ),
            versions=CODEX_ASYNC_PICKER,
        ),
        # 0.153.4, 0.169.0 and 0.171.0 only print the question in the transcript: the
        # client is idle and there is no prompt to answer.
        Plan(
            f"{scenario}_text",
            scenario,
            _CODEX,
            (
                Submit(),
                _wait(after.text),
                WaitIdle(),
                Shot(None, Expected("idle", reply=after.text)),
            ),
            versions=CODEX_ASYNC_TEXT_ONLY,
        ),
    ]


_PASTE_WORDS = "lab paste 0123456789 alpha beta gamma delta, epsilon zeta: eta theta-iota kappa."
_NOTE_WORDS = "lab note 0123456789 alpha beta gamma delta, epsilon zeta: eta theta iota kappa."
"""Plain words whose rows the notes editor breaks only at spaces (no hyphen to split at)."""


def _filler(length: int, *, lines: int = 1, words: str = _PASTE_WORDS) -> str:
    """Exactly `length` characters of `words` repeated, in `lines` lines (no edge spaces)."""
    body = (words + " ") * (length // len(words) + 2)
    per_line = (length - (lines - 1)) // lines
    cut = [body[i * per_line : (i + 1) * per_line] for i in range(lines)]
    cut[-1] = body[(lines - 1) * per_line : length - (lines - 1)]
    text = "\n".join(line.replace(" ", "x", 1) if line.startswith(" ") else line for line in cut)
    text = "\n".join(line[:-1] + "x" if line.endswith(" ") else line for line in text.split("\n"))
    assert len(text) == length and text == text.strip(), (length, lines)
    return text


TYPED_DRAFTS: Mapping[str, Typed] = {
    "wrap": Typed(
        "lab: this long draft wraps over several rows of the composer, word by word, and "
        "must come back exactly as typed. " + " ".join(["alpha beta gamma delta epsilon"] * 8),
        TypingMethod.LITERAL,
    ),
    "multiline": Typed(
        "lab: the first line of a pasted draft\nthe second line, a little longer than the "
        "first\nthe third and last line",
        TypingMethod.PASTE,
    ),
    "quotes": Typed("lab: he said \"don't\" and 'left' `now`", TypingMethod.LITERAL),
    "semicolon": Typed("lab: echo one; echo two;", TypingMethod.LITERAL),
    "unicode": Typed("lab: 漢字テスト and emoji 😀 🎉 ünïcödé done", TypingMethod.LITERAL),
    "shell": Typed(
        "lab: $(rm -rf /x) && echo $HOME | grep -v '*' > /dev/null & [x] {y} %v \\ end",
        TypingMethod.LITERAL,
    ),
    "paste799": Typed(_filler(799), TypingMethod.PASTE),
    "paste800": Typed(_filler(800), TypingMethod.PASTE),
    "paste801": Typed(_filler(801), TypingMethod.PASTE),
    "paste1001": Typed(_filler(1001), TypingMethod.PASTE),
    "paste5000": Typed(_filler(5000, lines=50), TypingMethod.PASTE),
}
"""The text classes the typing plans put into an idle composer, one plan each.

Pastes of 799 to 801 characters straddle Claude's threshold, 1001 is past
Codex's (1000 itself would need 14 rows at 80x24, where Codex drops its status
row); the 5000-character one is 50 lines, so Claude's placeholder counts them.
"""


def _typed(name: str, typed: Typed) -> Plan:
    put: Action = Type(typed.text) if typed.method is TypingMethod.LITERAL else Paste(typed.text)
    return Plan(
        f"draft_{name}",
        "echo",
        _BOTH,
        (
            # Claude drops text that arrives right after its composer first shows.
            Settle(0.5),
            put,
            _wait(typed.text[:12], "[Pasted"),
            Shot(None, Expected("idle_draft", typed=typed)),
        ),
    )


def _permission(scenario: str, agents: frozenset[Agent], tool: str, manual: bool) -> Plan:
    anchor = _wait("Do you want", "Would you like to run")
    expected = Expected(
        "permission",
        "permission",
        decisions=() if manual else _APPROVE,
        tool=tool,
        command=None if manual else _command(scenario),
        manual_only=manual,
    )
    return Plan(scenario, scenario, agents, (Submit(), anchor, Shot("permission", expected)))


def _codex_exec_reject() -> Plan:
    """The reject row of the exec approval, by its digit: the turn ends interrupted."""
    scenario = "codex_exec"
    return Plan(
        "codex_exec_reject",
        scenario,
        _CODEX,
        (
            Submit(),
            _wait("Would you like to run"),
            Press(("3",)),  # No, and tell Codex what to do differently
            _wait("Conversation interrupted"),
            WaitIdle(),
            Shot("idle", Expected("idle")),
        ),
    )


def _blocked(blocker: str, agents: frozenset[Agent], preseed: Preseed, *anchor: str) -> Plan:
    return Plan(
        f"blocked_{blocker}",
        "echo",
        agents,
        (WaitText(anchor), Shot(None, Expected("blocked", blocker=blocker))),
        preseed=preseed,
    )


def _build() -> dict[str, Plan]:
    echo_reply = "Hello from the lab model."
    plans = [
        Plan(
            "echo",
            "echo",
            _BOTH,
            (
                Shot("idle", Expected("idle")),
                Submit(),
                _wait(echo_reply),
                WaitIdle(),
                Shot("finished", Expected("idle", reply=echo_reply)),
            ),
        ),
        Plan(
            "draft",
            "echo",
            _BOTH,
            (
                Type(DRAFT_TEXT),
                _wait(DRAFT_TEXT),
                Shot("idle_draft", Expected("idle_draft", draft=DRAFT_TEXT)),
            ),
        ),
        Plan(
            "slow",
            "slow",
            _BOTH,
            (
                Submit(),
                # Claude's status line, or Codex 0.169.0's first streamed word.
                _wait("esc to interrupt", "• Working"),
                Shot("working", Expected("working"), settle=False),
                Release(SLOW_SIGNAL),
                WaitIdle(),
            ),
        ),
        *(_typed(name, typed) for name, typed in TYPED_DRAFTS.items()),
        _permission("claude_bash", _CLAUDE, "Bash", manual=False),
        _permission("claude_write", _CLAUDE, "Write", manual=True),
        _permission("codex_exec", _CODEX, "exec_command", manual=False),
        _codex_exec_reject(),
        _claude_single("questionnaire_single2"),
        _claude_single("questionnaire_single3"),
        _claude_single("questionnaire_single4"),
        _claude_multi_select(),
        _claude_multi_question(),
        _codex_questions("codex_rui_one"),
        _codex_questions("codex_rui_three"),
        _codex_notes_and_unanswered(),
        _codex_revisit(),
        *_codex_notes(),
        Plan(
            # Codex 0.169.0 draws the mode under the status row, alone while a draft is typed.
            "codex_plan_mode",
            "echo",
            _CODEX,
            (
                Shot("idle", Expected("idle")),
                Type(DRAFT_TEXT),
                _wait(DRAFT_TEXT),
                Shot("idle_draft", Expected("idle_draft", draft=DRAFT_TEXT)),
            ),
            plan_mode=True,
        ),
        *_codex_async(),
        _blocked(
            "onboarding", _CLAUDE, Preseed(onboarded=False), "Choose the text style", "Let's get"
        ),
        _blocked(
            "api_key", _CLAUDE, Preseed(api_key_approved=False), "Do you want to use this API key?"
        ),
        _blocked(
            "trust",
            _BOTH,
            Preseed(trusted=False),
            "Is this a project you created or one you trust?",
            "trust this folder",
            "Trust this folder",
            "Do you trust",
        ),
    ]
    return {plan.name: plan for plan in plans}


PLANS: Mapping[str, Plan] = _build()


class CaptureError(RuntimeError):
    """A plan could not be driven to its capture points."""


@attrs.frozen
class Captured:
    """One written fixture pair."""

    screen: Path
    label: Path


def fixture_stem(
    out: Path, client: Client, plan: str, step: str | None, cols: int, rows: int
) -> Path:
    """The path of a fixture without extension (in the plan's own folder, if `PLANS` names one)."""
    folder = out / client.agent / client.version
    own = PLANS[plan].folder if plan in PLANS else None
    if own is not None:
        folder = folder / own
    if (cols, rows) != DEFAULT_SIZE:
        folder = folder / f"{cols}x{rows}"
    return folder / (plan if step is None else f"{plan}-{step}")


async def _settled(lab: LabSession, settle: bool) -> str:
    if settle:
        # An animated screen (spinner, welcome art) never settles: capture it as it is.
        with contextlib.suppress(ScreenTimeout):
            await lab.wait_stable(quiet=0.4, timeout=3.0)
    return await lab.capture()


async def _act(lab: LabSession, action: Action) -> None:
    match action:
        case Submit(text=text):
            await lab.submit(text if text is not None else lab.scenario.task)
        case Type(text=text):
            # On tmux's command line an argument ending in ';' ends the command
            # (the ';' is dropped); '\;' there stands for a literal ';'.
            await lab.type_text(text[:-1] + "\\;" if text.endswith(";") else text)
        case Paste(text=text):
            buffer = lab.root / "paste.txt"
            buffer.write_text(text)
            await lab.tmux("load-buffer", "-b", "lab-paste", str(buffer))
            await lab.tmux("paste-buffer", "-p", "-r", "-d", "-b", "lab-paste", "-t", lab.pane)
        case Press(keys=keys):
            # Keys within ~200 ms of a widget's first paint are dropped (NOTES.md):
            # press only on a screen that has been quiet for a moment.
            with contextlib.suppress(ScreenTimeout):
                await lab.wait_stable(quiet=PRESS_QUIET_SECONDS, timeout=3.0)
            for key in keys:
                await lab.send_keys(key)
        case WaitText(texts=texts, timeout=timeout):
            await lab.wait_for_screen(
                lambda screen: any(text in screen for text in texts),
                timeout,
                what=" or ".join(repr(text) for text in texts),
            )
        case WaitLine(pattern=pattern, timeout=timeout):
            await lab.wait_for_screen(
                lambda screen: pattern.search(screen) is not None,
                timeout,
                what=f"a line matching {pattern.pattern!r}",
            )
        case WaitIdle():
            await lab.wait_idle()
        case Settle(seconds=seconds):
            with contextlib.suppress(ScreenTimeout):
                await lab.wait_stable(quiet=seconds, timeout=5.0)
        case Release(signal=signal):
            lab.server.signal(signal)
        case Shot():
            raise AssertionError("shots are handled by run_plan")


async def run_plan(
    plan: Plan,
    client: Client,
    *,
    cols: int,
    rows: int,
    out: Path,
    only_step: str | None = None,
    confine: Confinement = UNCONFINED,
) -> list[Captured]:
    """Drive `plan` on `client` and write its shots (or just `only_step`) under `out`.

    `confine` may run the client under bubblewrap and at a low priority.
    """
    if not plan.applies_to(client):
        raise CaptureError(f"plan {plan.name} is not for {client.name}")
    if not plan.fits(cols, rows):
        raise CaptureError(f"plan {plan.name} is measured for {plan.sizes}, not {cols}x{rows}")
    if only_step is not None and only_step not in plan.steps:
        raise CaptureError(f"plan {plan.name} has no step {only_step!r}; steps: {plan.steps}")
    written: list[Captured] = []
    async with launch(
        client,
        SCENARIOS[plan.scenario],
        cols=cols,
        rows=rows,
        plan_mode=plan.plan_mode,
        preseed=plan.preseed,
        confine=confine,
    ) as lab:
        for action in plan.actions:
            if not isinstance(action, Shot):
                await _act(lab, action)
                continue
            if only_step is not None and action.step != only_step:
                continue
            screen = await _settled(lab, action.settle)
            action = attrs.evolve(action, expected=plan.expected_at(action, cols, rows))
            stem = fixture_stem(out, client, plan.name, action.step, cols, rows)
            written.append(_write(stem, screen, plan, action, client, cols, rows))
            if only_step is not None:
                break
    return written


def _write(
    stem: Path, screen: str, plan: Plan, shot: Shot, client: Client, cols: int, rows: int
) -> Captured:
    stem.parent.mkdir(parents=True, exist_ok=True)
    screen_path = stem.with_name(stem.name + ".ansi")
    label_path = stem.with_name(stem.name + ".json")
    screen_path.write_text(screen)
    label = {
        "agent": client.agent,
        "version": client.version,
        "cols": cols,
        "rows": rows,
        "plan": plan.name,
        "scenario": plan.scenario,
        "step": shot.step,
        "expected": shot.expected.to_json(),
    }
    label_path.write_text(json.dumps(label, indent=2, ensure_ascii=False) + "\n")
    return Captured(screen_path, label_path)


@attrs.frozen
class Job:
    """One plan on one client at one size."""

    plan: Plan
    client: Client
    cols: int
    rows: int

    @property
    def name(self) -> str:
        """For progress and failure lines."""
        return f"{self.client.name} {self.plan.name} {self.cols}x{self.rows}"


def all_jobs(clients_: Iterable[Client], sizes: Iterable[tuple[int, int]] = SIZES) -> list[Job]:
    """Every plan on every pinned client it applies to, at every corpus size it fits."""
    return [
        Job(plan, client, cols, rows)
        for client in clients_
        for plan in PLANS.values()
        if plan.applies_to(client)
        for cols, rows in sizes
        if plan.fits(cols, rows)
    ]


async def run_jobs(jobs: Sequence[Job], out: Path, *, parallel: int = 2) -> list[str]:
    """Run capture jobs, `parallel` at a time; return one line per failed job."""
    limiter = trio.CapacityLimiter(parallel)
    failures: list[str] = []

    async def one(job: Job) -> None:
        async with limiter:
            start = trio.current_time()
            try:
                with trio.fail_after(120):
                    written = await run_plan(
                        job.plan, job.client, cols=job.cols, rows=job.rows, out=out
                    )
            except (CaptureError, ScreenTimeout, trio.TooSlowError) as exc:
                first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                failures.append(f"{job.name}: {first_line}")
                print(f"FAILED {job.name}: {exc}", file=sys.stderr, flush=True)
                return
            took = trio.current_time() - start
            print(f"ok {job.name}: {len(written)} screens ({took:.1f} s)", flush=True)

    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(one, job)
    return failures


# ---------------------------------------------------------------- Claude variants (issue 12)

CLAUDE_THEMES: tuple[str, ...] = (
    "light",
    "dark-daltonized",
    "light-daltonized",
    "light-ansi",
    "dark-ansi",
)
"""Claude `theme` settings besides the lab's `dark`, captured at 120x40 (`theme_<slug>_<plan>`).

Every theme `/theme` offers on every pinned version (the binaries' theme list: dark, light,
light-daltonized, dark-daltonized, light-ansi, dark-ansi; `auto` picks dark or light)."""

CLAUDE_THEMED_PLANS: tuple[str, ...] = (
    "echo",
    "draft",
    "slow",
    "claude_bash",
    "questionnaire_single3",
    "questionnaire_multi",
)
"""The plans each extra theme repeats: every screen shape AKK reads."""

CLAUDE_NO_AUTO_MODEL = "claude-sonnet-4-5"
"""A user `model` for which no pinned version offers auto mode (each binary's model check
refuses claude-3-*, opus-4-0/4-1/4-5, sonnet-4-0/4-5 and haiku-4-5): the Bash prompt then
has no auto-mode tip and no "Yes, and switch to auto mode" row, as for such accounts."""

CLAUDE_STATUS_LINE = "echo 'lab-status ▸ main'"
"""The user `statusLine` command of the `status_line_*` plans: one fixed row, like a branch name."""

CLAUDE_STATUS_LINE_PLANS: tuple[str, ...] = (
    "echo",
    "draft",
    "slow",
    "claude_bash",
    "questionnaire_single3",
)
"""The plans repeated under a user status line (`status_line_<plan>`, at `SIZES`)."""

CLAUDE_VIM_PLANS: tuple[str, ...] = ("echo", "draft", "slow")
"""The plans repeated with `editorMode: vim`, in INSERT mode (`vim_<plan>`, at `SIZES`)."""

CLAUDE_VARIANT_SIZES: tuple[tuple[int, int], ...] = ((100, 30), (132, 43), (200, 50))
"""Pane sizes besides `SIZES` that the Claude corpus also holds (`<cols>x<rows>/` folders)."""

CLAUDE_SIZED_PLANS: tuple[str, ...] = (
    "echo",
    "draft",
    "slow",
    "claude_bash",
    "claude_bash_expansion",
    "claude_bash_warning",
    "claude_bash_read_outside",
    "claude_bash_long",
    "questionnaire_single3",
    "questionnaire_multi",
)
"""The plans captured at `CLAUDE_VARIANT_SIZES` too (`claude_variant_jobs`)."""


def _claude_themed(plan: Plan, theme: str) -> Plan:
    return attrs.evolve(
        plan,
        name=f"theme_{theme.replace('-', '_')}_{plan.name}",
        agents=_CLAUDE,
        preseed=attrs.evolve(plan.preseed, theme=theme),
        sizes=(DEFAULT_SIZE,),
    )


_CLAUDE_SPINNER = WaitLine(CLAUDE_SPINNER)
"""Claude's working row (``✽ Burrowing…``): the only sign of a turn where the footer
hides ``esc to interrupt`` (a status line on 2.1.263-2.1.267, vim mode on every version)."""


def _claude_setup(plan: Plan, prefix: str, preseed: Preseed) -> Plan:
    """`plan` under another Claude configuration, its working screen awaited by the spinner."""
    actions = tuple(
        _CLAUDE_SPINNER if action == _wait("esc to interrupt", "• Working") else action
        for action in plan.actions
    )
    return attrs.evolve(
        plan,
        name=f"{prefix}_{plan.name}",
        agents=_CLAUDE,
        actions=actions,
        preseed=preseed,
        sizes=SIZES,
    )


def _claude_variant_plans() -> dict[str, Plan]:
    plans = [
        # Claude adds advisory lines to the permission body for such a command.
        _permission("claude_bash_expansion", _CLAUDE, "Bash", manual=False),
        # Read-only but for the expansion: 2.1.328 and 2.1.332 ask ("can't be checked" row);
        # 2.1.263-2.1.267 run it without asking (no prompt to capture).
        attrs.evolve(
            _permission("claude_bash_warning", _CLAUDE, "Bash", manual=False),
            versions=frozenset({"2.1.328", "2.1.332"}),
        ),
        # An unquoted variable: an advisory row (its wording differs by version).
        _permission("claude_bash_variable", _CLAUDE, "Bash", manual=False),
        # A model without auto mode: no auto-mode tip and no "switch to auto mode" row.
        attrs.evolve(
            _permission("claude_bash", _CLAUDE, "Bash", manual=False),
            name="claude_bash_no_auto",
            preseed=Preseed(claude_model=CLAUDE_NO_AUTO_MODEL),
        ),
        # A user's ask rule matched: the prompt names it (and offers Yes / No only).
        attrs.evolve(
            _permission("claude_bash_ask_rule", _CLAUDE, "Bash", manual=False),
            preseed=Preseed(claude_ask_rules=(ASK_RULE,)),
        ),
        # Its middle row is a directory-scoped grant ("Yes, allow reading from ...").
        _permission("claude_bash_read_outside", _CLAUDE, "Bash", manual=False),
        # A command that wraps over 3+ rows even at 120 columns (5+ at 80).
        _permission("claude_bash_long", _CLAUDE, "Bash", manual=False),
        *(
            _claude_themed(PLANS[name], theme)
            for theme in CLAUDE_THEMES
            for name in CLAUDE_THEMED_PLANS
        ),
        *(
            _claude_setup(
                PLANS[name], "status_line", Preseed(claude_status_line=CLAUDE_STATUS_LINE)
            )
            for name in CLAUDE_STATUS_LINE_PLANS
        ),
        *(
            _claude_setup(PLANS[name], "vim", Preseed(claude_editor_mode="vim"))
            for name in CLAUDE_VIM_PLANS
        ),
    ]
    return {plan.name: plan for plan in plans}


PLANS = {**PLANS, **_claude_variant_plans()}


def claude_variant_jobs(clients_: Iterable[Client]) -> list[Job]:
    """The Claude plans of `CLAUDE_SIZED_PLANS` and `CLAUDE_QUESTION_PLANS` at
    `CLAUDE_VARIANT_SIZES` (beside `all_jobs`)."""
    return [
        Job(PLANS[name], client, cols, rows)
        for client in clients_
        if client.agent == "claude"
        for name in (*CLAUDE_SIZED_PLANS, *CLAUDE_QUESTION_PLANS)
        if PLANS[name].applies_to(client)
        for cols, rows in CLAUDE_VARIANT_SIZES
    ]


# ---------------------------------------------------------------- Codex variants (issue 12)

CODEX_FOOTERS: Mapping[str, Preseed] = {
    # `[tui] status_line = []`: no status row; the footer is the shortcut hint
    # and the context left.
    "codex_status_none": Preseed(codex_status_line=()),
    # More items than the default, so the row is cut at narrow widths.
    "codex_status_custom": Preseed(
        codex_status_line=(
            "model-with-reasoning",
            "context-remaining",
            "current-dir",
            "git-branch",
            "thread-title",
        )
    ),
    # A model name the catalog does not know: its name in the status row and
    # a "Model metadata ... not found" warning once a turn ran.
    "codex_model_unknown": Preseed(codex_model="gpt-lab-unknown"),
}
"""Codex configurations whose composer footer differs from the lab's default status row."""

CODEX_VARIANT_SIZES: tuple[tuple[int, int], ...] = ((100, 30), (132, 43), (200, 50))
"""Pane sizes besides `SIZES` that the Codex corpus also holds (`<cols>x<rows>/` folders).

0.169.0 and 0.171.0 draw their logo under the session header from 32 rows up (120x31:
none, 120x32: shown), so 120x40, 132x43 and 200x50 hold it and 80x24 and 100x30 do not;
0.153.4-0.155.1 draw none at any size tried (up to 250x80).
"""

CODEX_SIZED_PLANS: tuple[str, ...] = (
    "echo",
    "slow",
    "codex_exec",
    "codex_exec_long",
    "codex_rui_one",
    "codex_rui_long",
    *CODEX_FOOTERS,
    "codex_after_warning",
)
"""The plans captured at `CODEX_VARIANT_SIZES` too (`codex_variant_jobs`)."""


def _codex_footer_plan(name: str, preseed: Preseed) -> Plan:
    """Idle, working and finished under a footer other than the default status row."""
    text = getattr(SCENARIOS["slow"].steps[0].reply, "text", None)
    assert isinstance(text, str)
    return Plan(
        name,
        "slow",
        _CODEX,
        (
            Shot("idle", Expected("idle")),
            Submit(),
            _wait("esc to interrupt", "• Working"),
            Shot("working", Expected("working"), settle=False),
            Release(SLOW_SIGNAL),
            _wait(text),
            WaitIdle(),
            Shot("finished", Expected("idle", reply=text)),
        ),
        preseed=preseed,
    )


def _codex_after_warning() -> Plan:
    """A draft typed after a finished turn under a model outside the catalog.

    The turn leaves the thread title in the status row and ``⚠ 1 warning · f2 to view``
    at the end of the hint row; a draft hides the hints (0.169.0, 0.171.0), so the hint
    row then holds the warning alone. The draft is the next task, typed as AKK types it.
    """
    echo_reply = "Hello from the lab model."
    return Plan(
        "codex_after_warning",
        "echo",
        _CODEX,
        (
            Submit(),
            _wait(echo_reply),
            WaitIdle(),
            Shot("finished", Expected("idle", reply=echo_reply)),
            Type(DRAFT_TEXT),
            _wait(DRAFT_TEXT),
            Shot("draft", Expected("idle_draft", typed=Typed(DRAFT_TEXT, TypingMethod.LITERAL))),
        ),
        preseed=CODEX_FOOTERS["codex_model_unknown"],
    )


CODEX_INLINE_PLANS: tuple[str, ...] = ("echo", "slow", "codex_exec", "codex_rui_one")
"""The plans repeated with `--no-alt-screen` (`codex_inline_<plan>`, at `SIZES`)."""


def _codex_inline(plan: Plan) -> Plan:
    """`plan` with the TUI drawn inline: the normal screen, its history in the pane's scrollback.

    Every pinned version offers `--no-alt-screen` (`codex --help`: "Disable alternate
    screen mode"), so no version is left out.
    """
    return attrs.evolve(
        plan,
        name=f"codex_inline_{plan.name.removeprefix('codex_')}",
        agents=_CODEX,
        preseed=attrs.evolve(plan.preseed, codex_alt_screen=False),
    )


CODEX_SHORT_SIZES: tuple[tuple[int, int], ...] = ((80, CODEX_STATUS_MIN_ROWS - 1),)
"""A pane too short for the composer's status row (`codex_short`)."""

CODEX_NARROW_SIZES: tuple[tuple[int, int], ...] = ((30, 24),)
"""A pane so narrow that 0.169.0+ wrap the default status line over three rows once a turn
named the thread (`codex_narrow`: the steps of echo)."""


def _codex_short() -> Plan:
    """A fresh idle composer in a pane too short for its status row: AKK cannot prove idle.

    Codex draws the composer alone (0.169.0+: and the hint row); whether a turn runs or
    the session is configured is not on screen, so the label is ``unknown``. The session
    gets a moment to configure itself before the shot (nothing shows when it has).
    """
    return Plan(
        "codex_short",
        "echo",
        _CODEX,
        (Settle(CODEX_SETTLE_SECONDS * 4), Shot("idle", Expected("unknown"))),
        sizes=CODEX_SHORT_SIZES,
    )


def _codex_variant_plans() -> dict[str, Plan]:
    plans = [
        *(_codex_footer_plan(name, preseed) for name, preseed in CODEX_FOOTERS.items()),
        _codex_after_warning(),
        _codex_short(),
        attrs.evolve(PLANS["echo"], name="codex_narrow", agents=_CODEX, sizes=CODEX_NARROW_SIZES),
        # The command wraps over several rows of the approval prompt.
        _permission("codex_exec_long", _CODEX, "exec_command", manual=False),
        # The option descriptions wrap under their rows.
        _codex_questions("codex_rui_long"),
        *(_codex_inline(PLANS[name]) for name in CODEX_INLINE_PLANS),
    ]
    return {plan.name: plan for plan in plans}


PLANS = {**PLANS, **_codex_variant_plans()}


def codex_variant_jobs(clients_: Iterable[Client]) -> list[Job]:
    """The Codex plans of `CODEX_SIZED_PLANS` at `CODEX_VARIANT_SIZES`, `codex_short` at
    `CODEX_SHORT_SIZES` and `codex_narrow` at `CODEX_NARROW_SIZES` (beside `all_jobs`)."""
    codex = [client for client in clients_ if client.agent == "codex"]
    return [
        *(
            Job(PLANS[name], client, cols, rows)
            for client in codex
            for name in CODEX_SIZED_PLANS
            for cols, rows in CODEX_VARIANT_SIZES
        ),
        *(
            Job(PLANS[name], client, *size)
            for client in codex
            for name, sizes in (
                ("codex_short", CODEX_SHORT_SIZES),
                ("codex_narrow", CODEX_NARROW_SIZES),
            )
            for size in sizes
        ),
    ]


# ---------------------------------------------------------------- Claude questions (issue 12)


def _claude_unreadable(scenario: str) -> Plan:
    """A question whose text the screen cannot show as sent: never answerable."""
    return Plan(
        scenario,
        scenario,
        _CLAUDE,
        (Submit(), _QUESTION_SHOWN, Shot("q1", Expected("unknown"))),
    )


def _claude_question_plans() -> dict[str, Plan]:
    plans = [
        # Option labels that wrap at 80 columns, descriptions that wrap at every size.
        _claude_single("questionnaire_wrapped"),
        # Taller than an 80x24 pane: there its frame and tab row are cut off at the top.
        attrs.evolve(_claude_single("questionnaire_tall"), unreadable_sizes=((80, 24),)),
        # CJK, a ZWJ emoji, right-to-left scripts and plain text, in labels and the prompt.
        _claude_single("questionnaire_unicode"),
        # The same scripts in a multi-select question (CJK, a ZWJ family, Hebrew).
        _claude_multi_select("questionnaire_unicode_multi"),
        # Every version draws "❤️ Heart" as "❤ Heart" and "⌚︎" as "⌚" (selectors dropped): the
        # label cannot be read back, so the question must not be answerable.
        _claude_unreadable("questionnaire_selector"),
        # Claude draws a zero-width space and a soft hyphen as U+FFFD (tmux keeps both).
        _claude_unreadable("questionnaire_invisible"),
    ]
    return {plan.name: plan for plan in plans}


_QUESTION_PLANS = _claude_question_plans()
PLANS = {**PLANS, **_QUESTION_PLANS}
CLAUDE_QUESTION_PLANS: tuple[str, ...] = tuple(_QUESTION_PLANS)
"""The Claude question plans, captured at `CLAUDE_VARIANT_SIZES` too (`claude_variant_jobs`)."""


def corpus_jobs(clients_: Iterable[Client]) -> list[Job]:
    """The whole corpus: every plan at the corpus sizes, and the variants at theirs."""
    clients_ = list(clients_)
    return [
        *all_jobs(clients_),
        *claude_variant_jobs(clients_),
        *codex_variant_jobs(clients_),
    ]
