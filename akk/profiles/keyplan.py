"""Key plans: how a controller's answer to one prompt step becomes keys, for every family.

A profile records, as data, one `KeyPlan` per answer it supports, keyed by
`PlanKey` (interaction kind, step kind, what the controller asked). A plan is a
short list of steps in one shared vocabulary (move the cursor, toggle boxes,
wait for an editor to open, type, hold the typed text for an Enter guard,
press). `expand` turns a plan, the rows on screen and the controller's chosen
option indexes or text into the exact keys to send, with the checkpoints proven
between them; it is pure and deterministic, and it refuses (`KeyPlanError`)
rather than guess.

Cursor model: every row of `QuestionView.options` is one cursor stop, in screen
order, so moving from row i to row j is ``Down`` (or ``Up``) pressed |j - i|
times; only MoveTo steps move it (a plan cannot press ``Up``/``Down`` itself).
The cursor may pass over a persistent-approval row, but no plan starts, targets
or rests on one. Where a widget answers a row by its number key, a PressNumber
step presses that one digit instead: no walk whose dropped key would leave the
Enter on another row.

Plans never leave the server (PROTOCOL.md: keys and menu indexes are private).
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Sequence

import attrs

from akk.profiles.observation import InteractionKind, OptionRole, OptionView, StepKind
from akk.text_rule import screen_refusal


class Intent(enum.StrEnum):
    """What the controller asked for on one prompt step."""

    CHOOSE = "choose"  # its chosen option(s), by index into the question's options
    FREE_TEXT = "free_text"  # its own text
    SUBMIT = "submit"  # submit the answers shown on a review step
    APPROVE_ONCE = "approve_once"
    REJECT = "reject"
    PROCEED = "proceed"  # submit although some questions are unanswered
    GO_BACK = "go_back"
    OPEN_QUEUED_QUESTION = "open_queued_question"
    NEXT_QUESTION = "next_question"


class Boundary(enum.StrEnum):
    """The dispatch stages a key plan's steps reach (the names of the dispatch receipts)."""

    TEXT_INJECTED = "text_injected"
    ENTER_SENT = "enter_sent"


@attrs.frozen
class PlanKey:
    """Which answer a plan serves: on which widget, for which request."""

    interaction: InteractionKind
    step: StepKind
    intent: Intent


# ---------------------------------------------------------------- plan steps

_CURSOR_KEYS = frozenset({"Up", "Down", "Home", "End", "PageUp", "PageDown", "PPage", "NPage"})


def _not_a_cursor_key(_: object, attribute: attrs.Attribute[str], key: str) -> None:
    # Cursor moves go through MoveTo* so expansion always knows the cursor row.
    if key in _CURSOR_KEYS:
        raise ValueError(f"{attribute.name}={key!r} moves the cursor; use MoveToRole/MoveToChosen")


@attrs.frozen
class MoveToRole:
    """Up/Down from the cursor row to the one row with `role`, one key per row."""

    role: OptionRole


@attrs.frozen
class MoveToChosen:
    """Up/Down from the cursor row to the controller's one chosen option."""


@attrs.frozen
class ToggleChosen:
    """Make the boxes match the answer: visit each option whose box differs (top down), press `key`.

    Boxes already ticked stay ticked when chosen and are unticked when not.
    """

    key: str = attrs.field(validator=_not_a_cursor_key)


@attrs.frozen
class TypeText:
    """The controller's text as typed characters (``send-keys -l``), never a paste.

    Claude's selection widgets read a leading ESC (a bracketed paste start) as
    cancel (LAB.md), so text goes out as plain key events.

    With `piece_bytes`, the text goes out in pieces of at most that many UTF-8
    bytes, each cut before a space where one fits, and each proven in the
    editor (`TextCheck.chars`) before the next. Claude's editor adds what it
    reads to the text of its last drawing: two reads before it draws again
    keep only the second (a 3,000-character text read as 2,048 characters,
    then the rest, kept the last 952; tools/lab/NOTES.md). One piece is one
    read, and a piece proven drawn is in the text the next one adds to.
    """

    piece_bytes: int | None = attrs.field(default=None)

    @piece_bytes.validator
    def _room_for_a_character(self, _: attrs.Attribute[int | None], value: int | None) -> None:
        if value is not None and value < _UTF8_MAX:
            raise ValueError(f"piece_bytes {value}: a piece holds at least {_UTF8_MAX} bytes")


@attrs.frozen
class Press:
    """One tmux key (``Enter``, ``Tab``, ``Right``, ``S-Left``) on whatever row the cursor is."""

    key: str = attrs.field(validator=_not_a_cursor_key)


@attrs.frozen
class PressShortcut:
    """The key drawn beside the row with `role` (Codex's ``(y)``, ``(esc)``); that row must show."""

    role: OptionRole
    key: str = attrs.field(validator=_not_a_cursor_key)


@attrs.frozen
class PressChosenNumber:
    """The number drawn beside the controller's one chosen option, as one key (``1`` to ``9``).

    For widgets where that digit picks the row and answers it at once (e.g.
    Codex's questions, its async picker and its approval prompt). A row numbered
    10 or more has no such key (its first digit would answer another row): refused.
    """


@attrs.frozen
class PressRoleNumber:
    """The number drawn beside the one row with `role`, as one key (``1`` to ``9``).

    As PressChosenNumber, for a row named by its role (e.g. Codex's reject row).
    """

    role: OptionRole


@attrs.frozen
class EnterGuard:
    """The typed text before it must have shown, unchanged, for `seconds` before the next key.

    Codex reads an Enter within ~120 ms of typed characters as a newline (LAB.md).
    That window opens when the client takes the last character, which no screen
    shows before it draws the text: the hold runs from the first screen that
    shows it (`TextCheck.hold`), so a client slowed by load gets its full guard.
    Only right after a `TypeText`.
    """

    seconds: float


@attrs.frozen
class AwaitEditor:
    """Send nothing more until the screen shows the question's free-text editor open.

    Claude drops the keys that reach its editor before it has taken focus, and
    how long that takes after the key that opens it grows with the machine's
    load (tools/lab/NOTES.md): the dispatcher proves the open editor
    (`EditorCheck`) instead of waiting a fixed time.
    """


PlanStep = (
    MoveToRole
    | MoveToChosen
    | ToggleChosen
    | TypeText
    | Press
    | PressShortcut
    | PressChosenNumber
    | PressRoleNumber
    | EnterGuard
    | AwaitEditor
)


def _guarded_text(
    _: object, __: attrs.Attribute[tuple[PlanStep, ...]], steps: tuple[PlanStep, ...]
) -> None:
    """An EnterGuard holds typed text: one stands right after a TypeText or nowhere."""
    for n, step in enumerate(steps):
        if isinstance(step, EnterGuard) and (n == 0 or not isinstance(steps[n - 1], TypeText)):
            raise ValueError(f"step {n}: an EnterGuard must follow a TypeText")


@attrs.frozen
class KeyPlan:
    """The steps that answer `key`, and where that knowledge comes from.

    `lab_verified` is True only when a lab run (akk/qualify/capture.py or
    tests/lab/) sent a real client exactly this plan's keys for some answer and
    saw the result; other plans still need that before they are trusted.
    """

    key: PlanKey
    steps: tuple[PlanStep, ...] = attrs.field(validator=_guarded_text)
    evidence: str
    lab_verified: bool

    @property
    def boundaries(self) -> tuple[tuple[int, Boundary], ...]:
        """Where the plan's steps reach each dispatch stage: ``(steps sent, stage)`` pairs.

        A plan that types text reaches ``text_injected`` once its text is out
        (its guard sends nothing), before the keys that submit it; every plan
        reaches ``enter_sent`` with its last step. The dispatcher records each
        stage right after those steps, so a restart knows how far a step got.
        """
        typed = [i for i, step in enumerate(self.steps) if isinstance(step, TypeText)]
        marks: list[tuple[int, Boundary]] = []
        if typed:
            end = typed[-1] + 1
            while end < len(self.steps) and isinstance(self.steps[end], EnterGuard):
                end += 1
            if end < len(self.steps):
                marks.append((end, Boundary.TEXT_INJECTED))
        marks.append((len(self.steps), Boundary.ENTER_SENT))
        return tuple(marks)


def _unique_keys(
    _: object, __: attrs.Attribute[tuple[KeyPlan, ...]], plans: tuple[KeyPlan, ...]
) -> None:
    keys = [plan.key for plan in plans]
    duplicates = {key for key in keys if keys.count(key) > 1}
    if duplicates:
        raise ValueError(f"two key plans answer the same request: {sorted(map(str, duplicates))}")


@attrs.frozen
class KeyPlans:
    """Every key plan of one profile, at most one per `PlanKey`."""

    plans: tuple[KeyPlan, ...] = attrs.field(validator=_unique_keys)

    def plan_for(self, interaction: InteractionKind, step: StepKind, intent: Intent) -> KeyPlan:
        """The plan for this request on this step; raises KeyPlanError(NO_PLAN) if there is none."""
        wanted = PlanKey(interaction, step, intent)
        for plan in self.plans:
            if plan.key == wanted:
                return plan
        raise KeyPlanError(
            PlanRefusal.NO_PLAN,
            f"this version has no key plan for {intent} on a {interaction} step "
            f"({step}); answer it in the terminal",
        )


# ---------------------------------------------------------------- expansion


@attrs.frozen
class TmuxKey:
    """A tmux key name, sent as ``send-keys NAME`` (``Down``, ``Enter``, ``S-Left``, ``y``)."""

    name: str


@attrs.frozen
class LiteralText:
    """Characters sent as ``send-keys -l TEXT``: one key event each, never a paste."""

    text: str


Keystroke = TmuxKey | LiteralText


class PlanRefusal(enum.StrEnum):
    """Why a plan cannot be expanded for this screen and answer."""

    NO_PLAN = "no_plan"
    CURSOR_UNKNOWN = "cursor_unknown"  # not exactly one current row
    PERSISTENT_APPROVAL = "persistent_approval"  # the plan starts on or targets such a row
    ROW_MISSING = "row_missing"  # the plan's row (by role) is not on screen, or twice
    NO_NUMBER_KEY = "no_number_key"  # the row's number is not one digit key (or it has none)
    OPTION_NOT_ON_SCREEN = "option_not_on_screen"
    NOT_A_CHOICE = "not_a_choice"  # the chosen row is not one of the question's options
    NO_BOX = "no_box"  # a multi-select option without a checkbox
    OPTIONS_NOT_ACCEPTED = "options_not_accepted"
    ONE_OPTION_ONLY = "one_option_only"
    NO_OPTION_CHOSEN = "no_option_chosen"
    DUPLICATE_OPTION = "duplicate_option"
    TEXT_NOT_ACCEPTED = "text_not_accepted"  # the plan opens no editor
    NO_TEXT = "no_text"
    UNSAFE_TEXT = "unsafe_text"  # text the text rule refuses (akk.text_rule)


class KeyPlanError(Exception):
    """A plan cannot become keys; `reason` is a PlanRefusal, the message says what to do."""

    def __init__(self, reason: PlanRefusal, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@attrs.frozen
class ToggleCheck:
    """After the first `after` keys, row `row` carries the cursor and its box shows `checked`."""

    after: int
    row: int
    checked: bool


@attrs.frozen
class TextCheck:
    """After the first `after` keys, the open editor shows exactly the controller's text
    (its first `chars` characters, while a text typed in pieces is under way), and has on
    every screen for `hold` seconds since the first one that showed it."""

    after: int
    hold: float = 0.0
    chars: int | None = None

    def shown(self, text: str) -> str:
        """What the editor must show of ``text`` here."""
        return text if self.chars is None else text[: self.chars]


@attrs.frozen
class EditorCheck:
    """After the first `after` keys, the question's free-text editor is open under the cursor.

    The screen shows the same question with its step `StepKind.FREE_TEXT`:
    typed keys go into the editor from then on.
    """

    after: int


Check = ToggleCheck | TextCheck | EditorCheck


@attrs.frozen
class Expanded:
    """The keys of one plan and where the dispatcher must prove the screen before going on.

    Every toggle of a multi-select box, an editor opening where the plan waits
    for it, and the typed text of an editor is a checkpoint: the dispatcher
    sends the keys up to it, recaptures, and stops with no further key unless
    the screen shows exactly what the check says.
    """

    keys: tuple[Keystroke, ...]
    checks: tuple[Check, ...]


def expand(
    plan: KeyPlan,
    options: Sequence[OptionView],
    *,
    chosen: Sequence[int] = (),
    text: str | None = None,
) -> tuple[Keystroke, ...]:
    """The exact keys that carry out `plan` on a screen showing `options`.

    `chosen` indexes `options`; `text` is the controller's free text. Raises
    KeyPlanError when the answer does not fit the plan or the screen (nothing is
    sent then). Deterministic and free of I/O.
    """
    return expand_checked(plan, options, chosen=chosen, text=text).keys


def expand_checked(
    plan: KeyPlan,
    options: Sequence[OptionView],
    *,
    chosen: Sequence[int] = (),
    text: str | None = None,
) -> Expanded:
    """`expand`, with the checkpoints the dispatcher proves on screen between the keys."""
    return _Expansion(plan, tuple(options), tuple(chosen), text).run()


class _Expansion:
    """One expansion: the rows, the answer, and where the cursor is after each key."""

    def __init__(
        self,
        plan: KeyPlan,
        options: tuple[OptionView, ...],
        chosen: tuple[int, ...],
        text: str | None,
    ) -> None:
        self.plan = plan
        self.options = options
        self.chosen = chosen
        self.text = text
        self.keys: list[Keystroke] = []
        self.checks: list[Check] = []
        self.cursor = self._cursor()

    def run(self) -> Expanded:
        self._check_answer()
        for step in self.plan.steps:
            match step:
                case MoveToRole(role=role):
                    self._move(self._row_with(role))
                case MoveToChosen():
                    self._move(self.chosen[0])
                case ToggleChosen(key=key):
                    self._toggle(key)
                case TypeText(piece_bytes=piece_bytes):
                    assert self.text is not None  # _check_answer proved it
                    self._type(self.text, piece_bytes)
                case Press(key=key):
                    self.keys.append(TmuxKey(key))
                case PressShortcut(role=role, key=key):
                    self._row_with(role)
                    self.keys.append(TmuxKey(key))
                case PressChosenNumber():
                    self._press_number(self.chosen[0])
                case PressRoleNumber(role=role):
                    self._press_number(self._row_with(role))
                case AwaitEditor():
                    self.checks.append(EditorCheck(len(self.keys)))
                case EnterGuard(seconds=seconds):
                    # Right after the text (`_guarded_text`): its check holds the proof this long.
                    self.checks[-1] = TextCheck(len(self.keys), hold=seconds)
            if isinstance(step, TypeText):
                self.checks.append(TextCheck(len(self.keys)))
        return Expanded(tuple(self.keys), tuple(self.checks))

    def _type(self, text: str, piece_bytes: int | None) -> None:
        """``text`` as keys, each piece but the last followed by its check (the last one's
        follows the step)."""
        typed = 0
        for piece in [text] if piece_bytes is None else pieces(text, piece_bytes):
            if typed:
                self.checks.append(TextCheck(len(self.keys), chars=typed))
            self.keys.append(LiteralText(piece))
            typed += len(piece)

    # -- what the screen and the answer must be

    def _cursor(self) -> int | None:
        if not self.options:
            return None
        current = [i for i, option in enumerate(self.options) if option.current]
        if len(current) != 1:
            raise KeyPlanError(
                PlanRefusal.CURSOR_UNKNOWN,
                f"{len(current)} rows carry the cursor; capture the screen again",
            )
        if self.options[current[0]].role is OptionRole.APPROVE_PERSISTENT:
            # One dropped move key would leave the answer's Enter on this row.
            raise KeyPlanError(
                PlanRefusal.PERSISTENT_APPROVAL,
                "the cursor is on a persistent-approval row; a person must answer it",
            )
        return current[0]

    def _check_answer(self) -> None:
        takes_one = any(
            isinstance(step, MoveToChosen | PressChosenNumber) for step in self.plan.steps
        )
        takes_many = any(isinstance(step, ToggleChosen) for step in self.plan.steps)
        takes_text = any(isinstance(step, TypeText) for step in self.plan.steps)
        if self.chosen and not (takes_one or takes_many):
            raise KeyPlanError(
                PlanRefusal.OPTIONS_NOT_ACCEPTED,
                f"{self.plan.key.intent} takes no chosen option; send it without options",
            )
        if (takes_one or takes_many) and not self.chosen:
            raise KeyPlanError(PlanRefusal.NO_OPTION_CHOSEN, "choose at least one option")
        if takes_one and len(self.chosen) > 1:
            raise KeyPlanError(
                PlanRefusal.ONE_OPTION_ONLY,
                f"this {self.plan.key.step} step takes one option, not {len(self.chosen)}",
            )
        if len(set(self.chosen)) != len(self.chosen):
            raise KeyPlanError(
                PlanRefusal.DUPLICATE_OPTION, "an option is chosen twice; send it once"
            )
        for index in self.chosen:
            self._check_choice(index, boxed=takes_many)
        if self.text is not None and not takes_text:
            raise KeyPlanError(
                PlanRefusal.TEXT_NOT_ACCEPTED,
                f"this {self.plan.key.step} step opens no editor; answer with an option",
            )
        if takes_text:
            self._check_text()

    def _check_choice(self, index: int, *, boxed: bool) -> None:
        if not 0 <= index < len(self.options):
            raise KeyPlanError(
                PlanRefusal.OPTION_NOT_ON_SCREEN,
                f"option {index} is not on screen ({len(self.options)} rows); call status again",
            )
        option = self.options[index]
        if option.role is not OptionRole.CHOICE:
            raise KeyPlanError(
                PlanRefusal.NOT_A_CHOICE,
                f"row {index} is a {option.role} row, not an option; choose one of the options",
            )
        if boxed and option.checked is None:
            raise KeyPlanError(PlanRefusal.NO_BOX, f"option {index} has no checkbox to toggle")

    def _check_text(self) -> None:
        if not self.text:
            raise KeyPlanError(PlanRefusal.NO_TEXT, "this answer needs non-empty text")
        # One line: a line break would submit early, ESC would cancel Claude's widget.
        refused = screen_refusal(self.text, lines=False)
        if refused is not None:
            raise KeyPlanError(
                PlanRefusal.UNSAFE_TEXT, f"the text {refused.reason}; {refused.step}"
            )

    def _row_with(self, role: OptionRole) -> int:
        if role is OptionRole.APPROVE_PERSISTENT:
            raise KeyPlanError(
                PlanRefusal.PERSISTENT_APPROVAL,
                "the plan targets a persistent-approval row; a person must answer it",
            )
        rows = [i for i, option in enumerate(self.options) if option.role is role]
        if len(rows) != 1:
            raise KeyPlanError(
                PlanRefusal.ROW_MISSING,
                f"{len(rows)} {role} rows on screen, the plan needs exactly one; "
                "answer it in the terminal",
            )
        return rows[0]

    # -- keys, with the cursor followed

    def _move(self, target: int) -> None:
        assert self.cursor is not None  # options are on screen: _cursor proved one current row
        key = TmuxKey("Down" if target > self.cursor else "Up")
        self.keys.extend([key] * abs(target - self.cursor))
        self.cursor = target

    def _press_number(self, target: int) -> None:
        number = self.options[target].number
        if number is None or not 1 <= number <= 9:
            raise KeyPlanError(
                PlanRefusal.NO_NUMBER_KEY,
                f"row {target} is numbered {number}, which no single key answers; "
                "answer it in the terminal",
            )
        self.keys.append(TmuxKey(str(number)))
        self.cursor = target

    def _toggle(self, key: str) -> None:
        wanted = set(self.chosen)
        extra = [
            i
            for i, option in enumerate(self.options)
            if option.role is not OptionRole.CHOICE and option.checked
        ]
        if extra:
            raise KeyPlanError(
                PlanRefusal.NOT_A_CHOICE,
                f"row {extra[0]} is ticked but is no option; clear it in the terminal first",
            )
        for index, option in enumerate(self.options):
            boxed = option.role is OptionRole.CHOICE and option.checked is not None
            if boxed and option.checked != (index in wanted):
                self._move(index)
                self.keys.append(TmuxKey(key))
                self.checks.append(ToggleCheck(len(self.keys), index, index in wanted))


_UTF8_MAX = 4
"""The most bytes one character takes in UTF-8."""
_JOINERS = frozenset("\u200d\u200c")  # ZWJ, ZWNJ: they join what is on both sides


def pieces(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` UTF-8 bytes, in order, joined they are
    ``text``. Each cut is before a space that follows no space where one fits, else between
    two characters no grapheme joins, else after as much as fits."""
    cuts: list[str] = []
    while len(text.encode()) > limit:
        fits = len(text.encode()[:limit].decode(errors="ignore"))
        cut = _cut_before_space(text, fits) or _cut_between(text, fits) or fits
        cuts.append(text[:cut])
        text = text[cut:]
    return [*cuts, text]


def _cut_before_space(text: str, fits: int) -> int:
    """The last index at most ``fits`` of a space after a character that is no space; 0 if
    none."""
    for i in range(fits, 0, -1):
        if text[i] == " " and not text[i - 1].isspace():
            return i
    return 0


def _cut_between(text: str, fits: int) -> int:
    """The last index at most ``fits`` where no grapheme spans the cut (not before a mark,
    a variation selector, a skin tone or a joiner, not after a joiner, not inside a flag's
    pair of regional indicators) and the piece ends in no space; 0 if none."""
    for i in range(fits, 0, -1):
        before, after = text[i - 1], text[i]
        if before.isspace() or before in _JOINERS or _joins_what_precedes(after):
            continue
        if _regional_indicator(after) and _indicators_ending_at(text, i) % 2:
            continue
        return i
    return 0


def _indicators_ending_at(text: str, end: int) -> int:
    """How many regional indicators stand right before ``end``: pairs are flags."""
    start = end
    while start > 0 and _regional_indicator(text[start - 1]):
        start -= 1
    return end - start


def _joins_what_precedes(char: str) -> bool:
    return (
        unicodedata.category(char) in ("Mn", "Mc", "Me")
        or char in _JOINERS
        or "\ufe00" <= char <= "\ufe0f"
        or "\U000e0100" <= char <= "\U000e01ef"
        or "\U0001f3fb" <= char <= "\U0001f3ff"
    )


def _regional_indicator(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"
