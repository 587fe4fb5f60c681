"""The capture plans only Claude Code runs: its questionnaires and its variants.

Claude draws AskUserQuestion with rows of its own after the options (a free-text
row, "Chat about this", a Submit row for multi-select) and a review screen after
the last question; the variants repeat the shared plans under other themes, a
user status line, vim mode and more pane sizes, and add Bash prompts with
advisories, grants and wrapped commands.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from akk.qualify.launcher import CLAUDE_SPINNER
from akk.qualify.plans.labels import Expected, ExpectedQuestion
from akk.qualify.plans.plan import (
    DEFAULT_SIZE,
    SIZES,
    Action,
    Plan,
    Press,
    Release,
    Shot,
    Submit,
    Type,
    WaitIdle,
    WaitLine,
)
from akk.qualify.plans.shared import (
    CLAUDE,
    DRAFT_TEXT,
    ECHO_DONE,
    HISTORY_SEARCH,
    MENTION,
    MODEL_PICKER,
    SHELL_MODE,
    WORKING_SHOWN,
    asking,
    passing_mode,
    permission,
    person_while_working,
    questions,
    wait,
)
from akk.qualify.run_files import Preseed
from akk.qualify.scenarios import (
    ASK_RULE,
    BACKGROUND_NEXT,
    BACKGROUND_NEXT_REPLY,
    ECHO_TASK,
    SLOW_SIGNAL,
    Question,
)

FREE_TEXT = "Teal, please"

# Rows Claude adds to a question on its own (observed on the pinned versions).
CLAUDE_SINGLE_EXTRA = ("Type something.", "Chat about this")
CLAUDE_MULTI_EXTRA = ("Type something", "Submit", "Chat about this")
CLAUDE_REVIEW = ("Submit answers", "Cancel")

QUESTION_SHOWN = wait("Enter to select", "enter to submit")


def _question(
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


_REVIEW = ExpectedQuestion(
    prompt="Review your answers",
    response_kind="confirm",
    options=CLAUDE_REVIEW,
    current_row=CLAUDE_REVIEW[0],
)
"""The review screen after the last question of a questionnaire."""


def _asked(scenario: str, *actions: Action) -> Plan:
    """Submit `scenario`'s task, wait for its question, then play `actions`."""
    return Plan(scenario, scenario, CLAUDE, (Submit(), QUESTION_SHOWN, *actions))


def _review(total: int) -> tuple[Action, ...]:
    """Wait for the review screen, the last of `total` steps, and capture it."""
    return (
        wait("Review your answers"),
        Shot("review", Expected("questionnaire", "confirmation", (_REVIEW,), step=(total, total))),
    )


def single(scenario: str) -> Plan:
    """A single-select question: its first row, its second, the free-text row empty and typed."""
    (question,) = questions(scenario)
    n = len(question.options)
    return _asked(
        scenario,
        Shot("q1", asking(_question(question))),
        Press(("Down",)),
        Shot("q1_second", asking(_question(question, current=1))),
        Press(("Down",) * (n - 1)),
        Shot("free_text_empty", asking(_question(question, current=n, typed=""))),
        Type(FREE_TEXT),
        wait(FREE_TEXT),
        Shot("free_text_typed", asking(_question(question, current=n, typed=FREE_TEXT))),
    )


def multi_select(scenario: str = "questionnaire_multi") -> Plan:
    """A multi-select question: unticked, one option ticked, then the review screen."""
    (question,) = questions(scenario)
    n = len(question.options)
    return _asked(
        scenario,
        Shot("q1", asking(_question(question), step=(1, 2))),
        Press(("Enter",)),
        wait("[✔]"),
        Shot("q1_checked", asking(_question(question, checked=(0,)), step=(1, 2))),
        # Down past the options and the free-text row to the Submit row.
        Press(("Down",) * (n + 1) + ("Enter",)),
        *_review(2),
    )


def multi_question(scenario: str = "questionnaire_multi_question") -> Plan:
    """Each question of `scenario` in turn, each its own step, then the review screen."""
    asked = questions(scenario)
    total = len(asked) + 1
    actions: list[Action] = []
    for index, question in enumerate(asked, start=1):
        if index > 1:
            actions += [Press(("Enter",)), wait(question.question)]
        actions.append(Shot(f"q{index}", asking(_question(question), step=(index, total))))
    return _asked(scenario, *actions, Press(("Enter",)), *_review(total))


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

CLAUDE_VARIANT_SIZES: tuple[tuple[int, int], ...] = ((60, 40), (100, 30), (132, 43), (200, 50))
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


def _themed(plan: Plan, theme: str) -> Plan:
    return attrs.evolve(
        plan,
        name=f"theme_{theme.replace('-', '_')}_{plan.name}",
        agents=CLAUDE,
        preseed=attrs.evolve(plan.preseed, theme=theme),
        sizes=(DEFAULT_SIZE,),
    )


_SPINNER = WaitLine(CLAUDE_SPINNER)
"""Claude's working row (``✽ Burrowing…``): the only sign of a turn where the footer
hides ``esc to interrupt`` (a status line on 2.1.263-2.1.267, vim mode on every version)."""


def _setup(plan: Plan, prefix: str, preseed: Preseed) -> Plan:
    """`plan` under another Claude configuration, its working screen awaited by the spinner."""
    actions = tuple(_SPINNER if action == WORKING_SHOWN else action for action in plan.actions)
    return attrs.evolve(
        plan,
        name=f"{prefix}_{plan.name}",
        agents=CLAUDE,
        actions=actions,
        preseed=preseed,
        sizes=SIZES,
    )


BACKGROUND_AGENT = Plan(
    "claude_background_agent",
    "claude_background_agent",
    CLAUDE,
    (
        # While an agent runs in the background, Claude lists it (and its running time, so
        # the screen never rests) under the composer's hint row.
        Submit(),
        wait("Waiting for 1 background agent to finish"),
        Shot("idle", Expected("idle"), animated=True),
        Type(DRAFT_TEXT),
        wait(DRAFT_TEXT),
        Shot("idle_draft", Expected("idle_draft", draft=DRAFT_TEXT), animated=True),
        Press(("C-u",)),
        Submit(BACKGROUND_NEXT),
        WORKING_SHOWN,
        Shot("working", Expected("working"), settle=False),
        Release(SLOW_SIGNAL),
        wait(BACKGROUND_NEXT_REPLY),
        # Down moves the keys to the list (a pointer on its first row): keys typed now
        # would not reach the composer, so the screen is no composer AKK may type into.
        Press(("Down",)),
        wait("to select"),
        Shot("list_focused", Expected("unknown"), animated=True),
    ),
)
"""A background agent listed under the composer: idle, a draft, the list focused, working."""


POPUPS: tuple[Action, ...] = (
    Type("/"),
    WaitLine(re.compile(r"\s+/[a-z-]+\s{2,}\S")),
    Shot("command_menu", Expected("working", draft="/"), settle=False),
    Press(("BSpace",)),
    Type(MENTION),
    wait("(agent)"),
    Shot("mention", Expected("working", draft=MENTION), settle=False),
    Press(("C-u",)),
)
"""The lists a person's draft opens over the composer while a Turn works (the command menu,
the mention popup): they hide the working line, and read working by the composer's grey
glyph."""

TRANSCRIPT_SHOWN = "Showing detailed transcript"
"""Claude's footer while its detailed transcript (Ctrl-O) takes the composer's place."""

PERSON_MODES = Plan(
    "claude_person_modes",
    "echo",
    CLAUDE,
    (
        *ECHO_DONE,
        # Up recalls the last prompt into the composer, its upper rule labelled "History 1/1":
        # a draft as any other (AKK types no task over it). Down goes back to the empty one.
        Press(("Up",)),
        wait("History 1/1"),
        Shot("history_recalled", Expected("idle_draft", draft=ECHO_TASK)),
        Press(("Down",)),
        WaitIdle(),
        *passing_mode(SHELL_MODE, "for shell mode", "shell_mode", ("BSpace",)),
        # Ctrl-O shows the detailed transcript in place of the composer.
        *passing_mode(Press(("C-o",)), TRANSCRIPT_SHOWN, "transcript", ("C-o",)),
        *passing_mode(HISTORY_SEARCH, "Filter history", "history_search", ("Escape",)),
        *passing_mode(MODEL_PICKER, "Select model", "model_picker", ("Escape",)),
        # Shift+Tab cycles the permission mode, named on the hint row: the composer is the
        # same, and a task sent there runs under the mode the person chose.
        Press(("BTab",)),
        wait("accept edits on"),
        Shot("accept_edits", Expected("idle")),
        Press(("BTab",)),
        wait("plan mode on"),
        Shot("plan_mode", Expected("idle")),
        Press(("BTab",)),
        wait("auto mode on"),
        Shot("auto_mode", Expected("idle")),
        # Escape twice at once opens the rewind menu (/rewind too): a pointer on the turns to
        # go back to, where Enter would restore the conversation to an earlier point.
        Press(("Escape", "Escape")),
        wait("Restore the code and/or conversation"),
        Shot("rewind", Expected("unknown")),
    ),
)
"""Modes a person puts the pane in: a recalled prompt (a draft), a shell prompt, the detailed
transcript, the history search, the model picker and the rewind menu (no composer to type
into), and the permission modes (the composer as ever)."""


TRANSCRIPT_VIEW = Plan(
    "claude_transcript_view",
    "claude_bash_held",
    CLAUDE,
    (
        # Ctrl-O while the Turn works: the detailed transcript in place of the composer, the
        # agent going on behind it (a person's view, not a prompt).
        Submit(),
        WORKING_SHOWN,
        Press(("C-o",)),
        wait(TRANSCRIPT_SHOWN),
        Shot("working", Expected("unknown"), settle=False),
        # The permission prompt comes behind it: the footer says "dialog waiting".
        Release(SLOW_SIGNAL),
        wait("dialog waiting"),
        Shot("dialog_waiting", Expected("unknown")),
    ),
)
"""The detailed transcript a person opens while a Turn works, then with a prompt behind it."""


def variant_plans(base: Mapping[str, Plan]) -> list[Plan]:
    """The Claude variants: more Bash prompts, and `base`'s plans under other themes and setups."""
    return [
        BACKGROUND_AGENT,
        PERSON_MODES,
        # The history search takes the composer's place: no composer to read (the agent goes
        # on behind it, and its prompts come on top).
        person_while_working("claude", Expected("unknown"), POPUPS),
        TRANSCRIPT_VIEW,
        # After an API error 2.1.328 and 2.1.332 write a dim hint into the empty composer.
        Plan(
            "claude_api_error_hint",
            "api_error_once",
            CLAUDE,
            (Submit(), wait("API Error"), Shot(None, Expected("idle"))),
            versions=frozenset({"2.1.328", "2.1.332"}),
        ),
        # Claude adds advisory lines to the permission body for such a command.
        permission("claude_bash_expansion", CLAUDE, "Bash", manual=False),
        # Read-only but for the expansion: 2.1.328 and 2.1.332 ask ("can't be checked" row);
        # 2.1.263-2.1.267 run it without asking (no prompt to capture).
        attrs.evolve(
            permission("claude_bash_warning", CLAUDE, "Bash", manual=False),
            versions=frozenset({"2.1.328", "2.1.332"}),
        ),
        # An unquoted variable: an advisory row (its wording differs by version).
        permission("claude_bash_variable", CLAUDE, "Bash", manual=False),
        # A model without auto mode: no auto-mode tip and no "switch to auto mode" row.
        attrs.evolve(
            permission("claude_bash", CLAUDE, "Bash", manual=False),
            name="claude_bash_no_auto",
            preseed=Preseed(claude_model=CLAUDE_NO_AUTO_MODEL),
        ),
        # A user's ask rule matched: the prompt names it (and offers Yes / No only).
        attrs.evolve(
            permission("claude_bash_ask_rule", CLAUDE, "Bash", manual=False),
            preseed=Preseed(claude_ask_rules=(ASK_RULE,)),
        ),
        # Its middle row is a directory-scoped grant ("Yes, allow reading from ...").
        permission("claude_bash_read_outside", CLAUDE, "Bash", manual=False),
        # A command that wraps over 3+ rows even at 120 columns (5+ at 80).
        permission("claude_bash_long", CLAUDE, "Bash", manual=False),
        # The model's description of the command wraps over several rows.
        permission("claude_bash_description_long", CLAUDE, "Bash", manual=False),
        permission("claude_bash_description_cjk", CLAUDE, "Bash", manual=False),
        *(_themed(base[name], theme) for theme in CLAUDE_THEMES for name in CLAUDE_THEMED_PLANS),
        *(
            _setup(base[name], "status_line", Preseed(claude_status_line=CLAUDE_STATUS_LINE))
            for name in CLAUDE_STATUS_LINE_PLANS
        ),
        *(
            _setup(base[name], "vim", Preseed(claude_editor_mode="vim"))
            for name in CLAUDE_VIM_PLANS
        ),
    ]


def _unreadable(scenario: str) -> Plan:
    """A question whose text the screen cannot show as sent: never answerable."""
    return _asked(scenario, Shot("q1", Expected("unknown")))


_NARROWER = ((120, 40), (80, 24), (60, 40))
"""The sizes of a question plan whose screens change only in narrower panes."""


def question_plans() -> list[Plan]:
    """Questions drawn wrapped, cut off, in other scripts, or not as they were sent."""
    return [
        # Option labels that wrap at 80 columns, descriptions that wrap at every size.
        single("questionnaire_wrapped"),
        single("questionnaire_long_asked"),
        # Four 12-character headers: at 60 columns the review's tab row wraps (wider panes
        # draw the tabs as at 120 columns).
        attrs.evolve(multi_question("questionnaire_four_questions"), sizes=_NARROWER),
        single("questionnaire_cjk"),
        # A question of several lines, one blank: each drawn on rows of its own, under
        # the gutter (its review lists it so too).
        attrs.evolve(single("questionnaire_multiline"), sizes=((120, 40), (80, 24))),
        attrs.evolve(multi_select("questionnaire_multiline_multi"), sizes=((120, 40), (80, 24))),
        # Its review lists the question under a gutter, cut at the pane's edge as the
        # question is (wider panes draw it as at 120 columns).
        attrs.evolve(multi_select("questionnaire_cjk_multi"), sizes=_NARROWER),
        # Taller than an 80x24 pane: there its frame and tab row are cut off at the top.
        attrs.evolve(single("questionnaire_tall"), unreadable_sizes=((80, 24),)),
        # CJK, a ZWJ emoji, right-to-left scripts and plain text, in labels and the prompt.
        single("questionnaire_unicode"),
        # The same scripts in a multi-select question (CJK, a ZWJ family, Hebrew).
        multi_select("questionnaire_unicode_multi"),
        # Every version draws "❤️ Heart" as "❤ Heart" and "⌚︎" as "⌚" (selectors dropped): the
        # label cannot be read back, so the question must not be answerable.
        _unreadable("questionnaire_selector"),
        # Claude draws a zero-width space and a soft hyphen as U+FFFD (tmux keeps both).
        _unreadable("questionnaire_invisible"),
    ]
