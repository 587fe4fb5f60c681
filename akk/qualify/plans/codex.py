"""The capture plans only Codex runs: request_user_input, its notes, async questions, variants.

Codex draws request_user_input in Plan mode with a "None of the above" row and
a notes field, asks before submitting with questions unanswered, and shows an
async question as a queued picker or only in the transcript, by version; the
variants run under other footers, inline (`--no-alt-screen`) and at more pane
sizes, short and narrow ones included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from akk.profiles.composer import TypingMethod
from akk.qualify.launcher import CODEX_SETTLE_SECONDS, CODEX_STATUS_MIN_ROWS
from akk.qualify.plans.labels import Expected, ExpectedQuestion, Typed
from akk.qualify.plans.plan import (
    DEFAULT_SIZE,
    Action,
    Paste,
    Plan,
    Press,
    Release,
    Settle,
    Shot,
    Submit,
    Type,
    WaitIdle,
)
from akk.qualify.plans.shared import (
    CODEX,
    DRAFT_TEXT,
    ECHO_DONE,
    HISTORY_SEARCH,
    MENTION,
    MODEL_PICKER,
    SHELL_MODE,
    WORKING_SHOWN,
    asking,
    filler,
    passing_mode,
    permission,
    person_while_working,
    questions,
    wait,
    while_working,
)
from akk.qualify.run_files import Preseed
from akk.qualify.scenarios import ECHO_REPLY, SCENARIOS, SLOW_SIGNAL, Question, Text

NOTE_TEXT = "Something in between"
SPECIAL_TEXT = "lab: he said \"don't\" & 'left' $HOME `x` ; ls | cat > out * ünïcödé 漢字 😀 done"
"""Quotes, shell syntax, accents, CJK and an emoji, typed into a request_user_input note."""
CODEX_NOTES_MARGIN = 7
"""Codex wraps request_user_input notes at the pane width less this (tools/lab/NOTES.md)."""

# Rows Codex adds to a question on its own (observed on the pinned versions).
CODEX_EXTRA = ("None of the above",)
CODEX_UNANSWERED = ("Proceed", "Go back")
CODEX_ASYNC_EXTRA = ("Other",)
CODEX_ASYNC_PICKER = frozenset({"0.154.0", "0.155.1"})
"""Codex versions that show async questions as a queued question with a picker."""
CODEX_ASYNC_TEXT_ONLY = frozenset({"0.153.4", "0.169.0", "0.171.0"})
"""Codex versions that only print an async question into the transcript."""


def _question(
    question: Question, *, current: int = 0, typed: str | None = None
) -> ExpectedQuestion:
    labels = tuple(option.label for option in question.options)
    rows = labels + CODEX_EXTRA
    return ExpectedQuestion(
        prompt=drawn_lines(question.question),
        header=None,  # Codex's request_user_input widget does not draw the header
        response_kind="free_text" if typed is not None else "single_select",
        options=labels,
        extra_rows=CODEX_EXTRA,
        current_row=rows[current],
        free_text=True,
        typed_text=typed,
    )


def drawn_lines(text: str) -> str:
    """`text` as Codex's question screen reads: Codex fits a paragraph's lines to each other
    (not greedily), so a line break reads as a wrap, one space; a blank line shows."""
    return "\n\n".join(" ".join(part.split("\n")) for part in text.split("\n\n"))


def questionnaire(scenario: str) -> Plan:
    """Each question of `scenario` in turn (Plan mode), its first row under the cursor."""
    asked = questions(scenario)
    total = len(asked)
    actions: list[Action] = [Submit(), wait(f"Question 1/{total}")]
    for index, question in enumerate(asked, start=1):
        if index > 1:
            actions += [Press(("Enter",)), wait(f"Question {index}/{total}")]
        actions.append(
            Shot(
                f"q{index}",
                asking(_question(question), step=(index, total)),
            )
        )
    return Plan(scenario, scenario, CODEX, tuple(actions), plan_mode=True)


def _unreadable(scenario: str) -> Plan:
    """A question whose text the screen cannot show as sent: never answerable."""
    return Plan(
        scenario,
        scenario,
        CODEX,
        (Submit(), wait("Question 1/1"), Shot("q1", Expected("unknown"))),
        plan_mode=True,
    )


def notes_and_unanswered() -> Plan:
    """The free row, its notes empty and typed, then the unanswered-questions confirmation."""
    scenario = "codex_rui_three"
    asked = questions(scenario)
    total = len(asked)
    first = asked[0]
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
        CODEX,
        (
            Submit(),
            wait(f"Question 1/{total}"),
            Press(("Down",) * n),
            Shot("none_of_the_above", asking(_question(first, current=n), step=(1, total))),
            Press(("Tab",)),
            wait("tab or esc to clear notes"),
            Shot("notes_empty", asking(_question(first, current=n, typed=""), step=(1, total))),
            Type(NOTE_TEXT),
            wait(NOTE_TEXT),
            Shot(
                "notes_typed", asking(_question(first, current=n, typed=NOTE_TEXT), step=(1, total))
            ),
            # Clear the notes (Tab; Esc risks interrupting the turn), skip to the
            # last question and submit it with two questions unanswered.
            Press(("Tab",)),
            Press(("Right",) * (total - 1)),
            wait(f"Question {total}/{total}"),
            Press(("Enter",)),
            wait("Submit with unanswered questions?"),
            Shot("unanswered", Expected("questionnaire", "confirmation", (unanswered,))),
        ),
        plan_mode=True,
    )


def revisit() -> Plan:
    """An answered question visited again: its prompt drawn plain, its answer under the cursor."""
    scenario = "codex_rui_three"
    asked = questions(scenario)
    total = len(asked)
    return Plan(
        "codex_rui_revisit",
        scenario,
        CODEX,
        (
            Submit(),
            wait(f"Question 1/{total}"),
            Press(("2",)),  # the digit answers the question at once and moves on
            wait(f"Question 2/{total}"),
            Press(("Left",)),
            wait(f"Question 1/{total} ({total - 1} unanswered)"),
            Shot("q1_answered", asking(_question(asked[0], current=1), step=(1, total))),
        ),
        plan_mode=True,
    )


_NOTE_WORDS = "lab note 0123456789 alpha beta gamma delta, epsilon zeta: eta theta iota kappa."
"""Plain words whose rows the notes editor breaks only at spaces (no hyphen to split at)."""


_WIDE: tuple[tuple[int, int], ...] = (DEFAULT_SIZE,)
"""The notes plans' texts are measured for the notes width at 120 columns."""


def _noted(
    question: Question, current: int, total: int, typed: Typed, *, whole: bool = True
) -> Expected:
    """A question whose row `current` has `typed` in its notes (all of it on screen if `whole`)."""
    asked = _question(question, current=current, typed=typed.text)
    return asking(
        asked if whole else attrs.evolve(asked, typed_text=None), step=(1, total), typed=typed
    )


def _notes_plan(
    name: str, current: int, notes: Sequence[tuple[str, str, bool]], folder: str | None = None
) -> Plan:
    """Open the notes of row `current` and type each (step, text, whole) in turn, one screen each.

    Tab clears the notes and closes them, Tab again opens them empty for the next text.
    """
    scenario = "codex_rui_one"
    (question,) = questions(scenario)
    actions: list[Action] = [Submit(), wait("Question 1/1")]
    if current:
        actions.append(Press(("Down",) * current))
    for index, (step, text, whole) in enumerate(notes):
        if index:
            actions.append(Press(("Tab",)))
        typed = Typed(text, TypingMethod.LITERAL)
        actions += [
            Press(("Tab",)),
            wait("tab or esc to clear notes"),
            Type(text),
            wait(text[:8], "[Pasted Content"),
            Shot(step, _noted(question, current, 1, typed, whole=whole)),
        ]
    return Plan(name, scenario, CODEX, tuple(actions), plan_mode=True, sizes=_WIDE, folder=folder)


def notes() -> list[Plan]:
    """Notes of hostile text, a full row, many rows, a placeholder; on the free row or an option."""
    none_of_the_above = len(questions("codex_rui_one")[0].options)
    full_row = "lab note " + "x" * (DEFAULT_SIZE[0] - CODEX_NOTES_MARGIN)
    return [
        _notes_plan(
            "codex_notes",
            none_of_the_above,
            (
                ("special", SPECIAL_TEXT, True),
                ("full_row", full_row, True),  # its x-run fills a row: an empty row follows
                ("chars1001", filler(1001, words=_NOTE_WORDS), False),  # a paste placeholder
            ),
        ),
        # Screens whose notes fill several rows: a dropped middle row reads as a
        # shorter note, so they stay out of the corpus tests/test_profile_codex.py mutates.
        _notes_plan(
            "codex_notes_long",
            none_of_the_above,
            (
                ("rows5", filler(547, words=_NOTE_WORDS), True),
                ("rows6", filler(659, words=_NOTE_WORDS), True),  # as many rows as shown
                ("chars799", filler(799, words=_NOTE_WORDS), False),  # 8 rows, last 6 shown
                ("chars800", filler(800, words=_NOTE_WORDS), False),
            ),
            folder="notes",
        ),
        # The notes of an option row: they would go with that option.
        _notes_plan("codex_notes_red", 0, (("typed", SPECIAL_TEXT, True),)),
    ]


def async_plans() -> list[Plan]:
    """request_user_input_async: a queued question and its picker, or text in the transcript."""
    scenario = "codex_rui_async"
    (question,) = questions(scenario)
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
            CODEX,
            (
                Submit(),
                wait("to answer"),
                WaitIdle(),
                # Queued, the question shows no options: nothing to answer until
                # the picker is open.
                Shot("queued", Expected("async_question", "async_question", ())),
                Press(("S-Left",)),
                wait("enter submit"),
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
            CODEX,
            (
                Submit(),
                wait(after.text),
                WaitIdle(),
                Shot(None, Expected("idle", reply=after.text)),
            ),
            versions=CODEX_ASYNC_TEXT_ONLY,
        ),
    ]


def exec_reject() -> Plan:
    """The reject row of the exec approval, by its digit: the turn ends interrupted."""
    scenario = "codex_exec"
    return Plan(
        "codex_exec_reject",
        scenario,
        CODEX,
        (
            Submit(),
            wait("Would you like to run"),
            Press(("3",)),  # No, and tell Codex what to do differently
            wait("Conversation interrupted"),
            WaitIdle(),
            Shot("idle", Expected("idle")),
        ),
    )


def plan_mode() -> Plan:
    """Idle and a draft in Plan mode: 0.169.0 draws the mode under the status row, alone while
    a draft is typed."""
    return Plan(
        "codex_plan_mode",
        "echo",
        CODEX,
        (
            Shot("idle", Expected("idle")),
            Type(DRAFT_TEXT),
            wait(DRAFT_TEXT),
            Shot("idle_draft", Expected("idle_draft", draft=DRAFT_TEXT)),
        ),
        plan_mode=True,
    )


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

CODEX_VARIANT_SIZES: tuple[tuple[int, int], ...] = ((60, 40), (100, 30), (132, 43), (200, 50))
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
    "codex_patch",
    "codex_rui_one",
    "codex_rui_long",
    *CODEX_FOOTERS,
    "codex_after_warning",
)
"""The plans captured at `CODEX_VARIANT_SIZES` too (`codex_variant_jobs`)."""


def _footer_plan(name: str, preseed: Preseed) -> Plan:
    """Idle, working and finished under a footer other than the default status row."""
    text = getattr(SCENARIOS["slow"].steps[0].reply, "text", None)
    assert isinstance(text, str)
    return Plan(
        name,
        "slow",
        CODEX,
        (
            Shot("idle", Expected("idle")),
            Submit(),
            WORKING_SHOWN,
            Shot("working", Expected("working"), settle=False),
            Release(SLOW_SIGNAL),
            wait(text),
            WaitIdle(),
            Shot("finished", Expected("idle", reply=text)),
        ),
        preseed=preseed,
    )


def _after_warning() -> Plan:
    """A draft typed after a finished turn under a model outside the catalog.

    The turn leaves the thread title in the status row and ``⚠ 1 warning · f2 to view``
    at the end of the hint row; a draft hides the hints (0.169.0, 0.171.0), so the hint
    row then holds the warning alone. The draft is the next task, typed as AKK types it.
    """
    return Plan(
        "codex_after_warning",
        "echo",
        CODEX,
        (
            Submit(),
            wait(ECHO_REPLY),
            WaitIdle(),
            Shot("finished", Expected("idle", reply=ECHO_REPLY)),
            Type(DRAFT_TEXT),
            wait(DRAFT_TEXT),
            Shot("draft", Expected("idle_draft", typed=Typed(DRAFT_TEXT, TypingMethod.LITERAL))),
        ),
        preseed=CODEX_FOOTERS["codex_model_unknown"],
    )


CODEX_INLINE_PLANS: tuple[str, ...] = ("echo", "slow", "codex_exec", "codex_rui_one")
"""The plans repeated with `--no-alt-screen` (`codex_inline_<plan>`, at `SIZES`)."""


def _inline(plan: Plan) -> Plan:
    """`plan` with the TUI drawn inline: the normal screen, its history in the pane's scrollback.

    Every pinned version offers `--no-alt-screen` (`codex --help`: "Disable alternate
    screen mode"), so no version is left out.
    """
    return attrs.evolve(
        plan,
        name=f"codex_inline_{plan.name.removeprefix('codex_')}",
        agents=CODEX,
        preseed=attrs.evolve(plan.preseed, codex_alt_screen=False),
    )


CODEX_SHORT_SIZES: tuple[tuple[int, int], ...] = ((80, CODEX_STATUS_MIN_ROWS - 1),)
"""A pane too short for the composer's status row (`codex_short`)."""

CODEX_NARROW_SIZES: tuple[tuple[int, int], ...] = ((30, 24),)
"""A pane so narrow that 0.169.0+ wrap the default status line over three rows once a turn
named the thread (`codex_narrow`: the steps of echo)."""


def _short() -> Plan:
    """A fresh idle composer in a pane too short for its status row: AKK cannot prove idle.

    Codex draws the composer alone (0.169.0+: and the hint row); whether a turn runs or
    the session is configured is not on screen, so the label is ``unknown``. The session
    gets a moment to configure itself before the shot (nothing shows when it has).
    """
    return Plan(
        "codex_short",
        "echo",
        CODEX,
        (Settle(CODEX_SETTLE_SECONDS * 4), Shot("idle", Expected("unknown"))),
        sizes=CODEX_SHORT_SIZES,
    )


def _cut_command() -> Plan:
    """A command of 1.2 MB: Codex cuts it to ``[… N lines] ctrl + a view all``, and AKK
    names that cut for a person (``prompt_cut_off``)."""
    return Plan(
        "codex_exec_huge",
        "codex_exec_huge",
        CODEX,
        (Submit(), wait("view all"), Shot("permission", Expected("unknown"))),
        sizes=((120, 40),),
    )


CODEX_POPUPS: tuple[Action, ...] = (
    Type("/"),
    wait("choose what Codex is allowed to do"),
    Shot("command_menu", Expected("working", draft="/"), settle=False),
    Press(("BSpace",)),
    Type("?"),
    wait("? / esc close", "customize shortcuts with /keymap"),
    Shot("shortcuts", Expected("working"), settle=False),
    Type("?"),
)
"""The lists a person opens at the composer while a Turn works: the command menu ('/') and
the shortcuts ('?' in an empty composer). The mention popup has a plan of its own."""


def _draft_while_working(
    name: str,
    draft: Type | Paste,
    shown: str,
    shot: Shot,
    *,
    clear: str = "C-u",
    plan_mode: bool = False,
    sizes: tuple[tuple[int, int], ...] | None = None,
    versions: frozenset[str] | None = None,
    unreadable_sizes: tuple[tuple[int, int], ...] = (),
) -> Plan:
    """A draft a person types or pastes while a Turn works, taken as `shot` once `shown`
    shows, then cleared with the `clear` key."""
    return Plan(
        name,
        "slow",
        CODEX,
        while_working(draft, wait(shown), shot, Press((clear,))),
        plan_mode=plan_mode,
        sizes=sizes,
        versions=versions,
        unreadable_sizes=unreadable_sizes,
    )


TALL_DRAFT = "\n".join(f"lab line {n:02d}" for n in range(1, 31))
"""A draft of 30 short lines a person pastes (a log, a list): taller than the pane."""


def _tall_draft(
    name: str, versions: frozenset[str], unreadable_sizes: tuple[tuple[int, int], ...] = ()
) -> Plan:
    """`TALL_DRAFT` pasted while a Turn works, then cleared with Ctrl-C (the turn runs on)."""
    return _draft_while_working(
        name,
        Paste(TALL_DRAFT),
        "lab line 30",
        Shot("tall_draft", Expected("working"), settle=False),
        clear="C-c",
        versions=versions,
        unreadable_sizes=unreadable_sizes,
    )


def _tall_draft_at_rest() -> Plan:
    """The same draft pasted at rest (0.169.0 on): the scrolled composer with no turn running
    is no composer AKK may type into."""
    return Plan(
        "codex_tall_draft_at_rest",
        "echo",
        CODEX,
        (
            *ECHO_DONE,
            Paste(TALL_DRAFT),
            wait("lab line 30"),
            Shot("tall_draft", Expected("unknown")),
        ),
        versions=frozenset({"0.169.0", "0.171.0"}),
    )


def _person_modes() -> Plan:
    """Modes a person puts the pane in: a shell prompt, the history search, the model picker,
    and the transcript to rewind in."""
    return Plan(
        "codex_person_modes",
        "echo",
        CODEX,
        (
            *ECHO_DONE,
            # Named on the status row.
            *passing_mode(SHELL_MODE, "Shell mode", "shell_mode", ("BSpace",)),
            *passing_mode(MODEL_PICKER, "Select Model", "model_picker", ("Escape",)),
            *passing_mode(HISTORY_SEARCH, "reverse-i-search", "history_search", ("Escape",)),
            # Escape on an empty composer arms "edit previous message"; a second one browses
            # the transcript, where Enter would edit or rewind to an earlier prompt: a pager
            # up to 0.155.1, a "Browsing" row under the transcript from 0.169.0.
            Press(("Escape",)),
            wait("esc again to edit previous message"),
            Shot("backtrack_armed", Expected("unknown"), settle=False),
            Press(("Escape",)),
            wait("Browsing", "esc/← to edit prev"),
            Shot("transcript", Expected("unknown")),
        ),
    )


def _new_where() -> Plan:
    """/new on 0.169.0 and later first asks where the new conversation runs: a person's own
    choice, numbered like a question but asked by no tool call, so no prompt AKK relays."""
    return Plan(
        "codex_new_where",
        "echo",
        CODEX,
        (
            *ECHO_DONE,
            Submit("/new"),
            wait("Where should the new conversation run?"),
            Shot(None, Expected("unknown")),
        ),
        versions=frozenset({"0.169.0", "0.171.0"}),
    )


def variant_plans(base: Mapping[str, Plan]) -> list[Plan]:
    """The Codex variants: other footers, pane sizes and longer prompts, modes a person puts
    the pane in, and `base`'s plans drawn inline."""
    return [
        _person_modes(),
        person_while_working("codex", Expected("working"), CODEX_POPUPS),
        # In Plan mode the queue hint shares its row with the mode (` · Plan mode` after it
        # up to 0.155.1, the indicator from 0.169.0).
        _draft_while_working(
            "codex_plan_mode_working",
            Type(DRAFT_TEXT),
            DRAFT_TEXT,
            Shot("draft", Expected("working", draft=DRAFT_TEXT), settle=False),
            plan_mode=True,
        ),
        # The mention popup ('@'). At 80x24 on 0.169.0 and 0.171.0 it covers the whole
        # history, the turn's status line with it: nothing then proves the turn runs, and
        # the pane reads `unknown` (docs/screens.md).
        _draft_while_working(
            "codex_mention_while_working",
            Type(MENTION),
            "esc close",
            Shot("mention", Expected("working", draft=MENTION), settle=False),
            sizes=((120, 40),),
        ),
        _draft_while_working(
            "codex_mention_covering",
            Type(MENTION),
            "esc close",
            Shot("mention", Expected("unknown"), settle=False),
            sizes=((80, 24),),
            versions=frozenset({"0.169.0", "0.171.0"}),
        ),
        # A draft taller than the pane. Up to 0.155.1 its footer stays, and at 80x24 the
        # composer covers the whole history, the turn's status line with it: nothing then
        # proves the turn runs. From 0.169.0 the composer scrolls to the pane's end, over
        # its footer, under the turn's status line.
        _tall_draft(
            "codex_tall_draft_footer",
            frozenset({"0.153.4", "0.154.0", "0.155.1"}),
            unreadable_sizes=((80, 24),),
        ),
        _tall_draft("codex_tall_draft_scrolled", frozenset({"0.169.0", "0.171.0"})),
        _tall_draft_at_rest(),
        # A turn the model API failed ends with its error in red, and no turn-end line.
        Plan(
            "codex_api_error",
            "api_error",
            CODEX,
            (Submit(), wait("invalid_request_error"), Shot(None, Expected("idle"))),
        ),
        _new_where(),
        *(_footer_plan(name, preseed) for name, preseed in CODEX_FOOTERS.items()),
        _after_warning(),
        _short(),
        attrs.evolve(base["echo"], name="codex_narrow", agents=CODEX, sizes=CODEX_NARROW_SIZES),
        # The command wraps over several rows of the approval prompt.
        permission("codex_exec_long", CODEX, "exec_command", manual=False),
        # The model's reason wraps over several rows.
        permission("codex_exec_reason_long", CODEX, "exec_command", manual=False),
        _cut_command(),
        # The option descriptions wrap under their rows.
        questionnaire("codex_rui_long"),
        questionnaire("codex_rui_long_asked"),
        questionnaire("codex_rui_long_labels"),
        questionnaire("codex_rui_cjk"),
        # A question of several lines, one blank: each line drawn on rows of its own.
        questionnaire("codex_rui_multiline"),
        # CJK, a ZWJ emoji and right-to-left scripts in labels and the prompt.
        questionnaire("codex_rui_unicode"),
        # Codex and tmux disagree on the width of "❤️" and "⌚︎": a space around each is
        # gained or lost, so the labels cannot be read back.
        _unreadable("codex_rui_selector"),
        # A zero-width space and a soft hyphen: Codex and tmux keep both, read exactly.
        questionnaire("codex_rui_invisible"),
        # A question in plain words whose call marks it secret: drawn as any other.
        questionnaire("codex_rui_flagged_secret"),
        permission("codex_exec_reason_cjk", CODEX, "exec_command", manual=False),
        *(_inline(base[name]) for name in CODEX_INLINE_PLANS),
    ]
