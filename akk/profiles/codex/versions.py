"""The pinned Codex versions as data: one `CodexProfile` row each.

What does Codex 0.154.0 look like: its row here, built on the one before it.
0.154.0 draws what 0.153.4 draws plus queued async questions and their picker;
0.155.1 closes each turn with a dim ``done <time>`` line; 0.169.0 changes the
highlight, the status colour, the hint row and the turn-end line; 0.171.0
draws what 0.169.0 draws. Adding a version is adding a row here (and its
fixtures): `python -m tools.lab new-version codex <version>` says whether an
existing row reads it.
"""

from __future__ import annotations

import re

import attrs

from akk.profiles.codex.menu import Highlight, MenuShape
from akk.profiles.codex.picker import AsyncShape
from akk.profiles.codex.profile import Blocker, CodexProfile
from akk.profiles.codex.reader import Footer
from akk.profiles.codex.status import ModeIndicator, Notice, PersonRows
from akk.profiles.composer import LengthUnit, Typing, Wrapping
from akk.profiles.keyplan import (
    EnterGuard,
    Intent,
    KeyPlan,
    KeyPlans,
    MoveToRole,
    PlanKey,
    Press,
    PressChosenNumber,
    PressRoleNumber,
    PressShortcut,
    TypeText,
)
from akk.profiles.observation import InteractionKind, OptionRole, StepKind
from akk.text_rule import Special

_TRUST_REASON = (
    "trust: Codex asks whether to trust this folder; a person must answer it in the terminal"
)

_QUESTIONNAIRE = InteractionKind.QUESTIONNAIRE
_ENTER = Press("Enter")
# LAB.md measured ~120 ms; the lab's own guard (akk/qualify/launcher.py) is 0.3 s.
_ENTER_GUARD = EnterGuard(0.3)
_LAB = "tests/lab/test_codex_plans.py"
_E2E = "tests/lab/test_interactions.py"  # a controller's answer, through `akk serve`
_ALL = "(0.153.4, 0.154.0, 0.155.1, 0.169.0)"

_KEY_PLANS = KeyPlans(
    (
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.CHOOSE),
            (PressChosenNumber(),),
            f"{_E2E} test_codex_request_user_input_choice_reaches_the_model_once and "
            "test_codex_three_questions_are_answered_one_step_at_a_time (every pinned "
            f"version), {_LAB} test_unanswered_confirmation_goes_back_then_proceeds {_ALL}: "
            "the digit picks the row and answers it at once (the next question, or the "
            "answers sent); no cursor walk",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.FREE_TEXT),
            (
                MoveToRole(OptionRole.NONE_OF_THE_ABOVE),
                Press("Tab"),
                TypeText(),
                _ENTER_GUARD,
                _ENTER,
            ),
            f"{_E2E} test_codex_free_text_goes_to_none_of_the_above_notes_byte_exact (every "
            "pinned version; 799 and 800 characters at 200 columns): Tab opens the notes of "
            "the row under the cursor, editor_matches proves them, one Enter sends 'None of "
            "the above' and 'user_note: <text>'",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.FREE_TEXT, Intent.FREE_TEXT),
            (TypeText(), _ENTER_GUARD, _ENTER),
            f"{_LAB} test_free_text_into_the_open_notes {_ALL}",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.NEXT_QUESTION),
            (Press("Right"),),
            f"{_LAB} test_unanswered_confirmation_goes_back_then_proceeds {_ALL}",
            lab_verified=True,
        ),
        # The confirmation's digits only move its cursor (Enter still needed), so
        # the walk stays: Proceed is the first row, Go back one Down.
        KeyPlan(
            PlanKey(InteractionKind.CONFIRMATION, StepKind.CONFIRM, Intent.PROCEED),
            (MoveToRole(OptionRole.PROCEED), _ENTER),
            f"{_LAB} test_unanswered_confirmation_goes_back_then_proceeds {_ALL}: "
            "unanswered questions arrive as empty answer lists",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(InteractionKind.CONFIRMATION, StepKind.CONFIRM, Intent.GO_BACK),
            (MoveToRole(OptionRole.GO_BACK), _ENTER),
            f"{_LAB} test_unanswered_confirmation_goes_back_then_proceeds {_ALL}: "
            "back to the first unanswered question",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(InteractionKind.PERMISSION, StepKind.PERMISSION, Intent.APPROVE_ONCE),
            (PressShortcut(OptionRole.APPROVE_ONCE, "y"),),
            f"{_E2E} test_codex_exec_approve_runs_the_command_once_reject_selects_the_no_row "
            "(every pinned version); the row's own '(y)' shortcut. A patch's approval draws "
            "the same menu: test_codex_patch_approve_applies_it_once_reject_never",
            lab_verified=True,
        ),
        # The reject row itself, by its digit: Esc is the prompt's cancel, and a
        # walk past the persistent row could leave an Enter on it.
        KeyPlan(
            PlanKey(InteractionKind.PERMISSION, StepKind.PERMISSION, Intent.REJECT),
            (PressRoleNumber(OptionRole.REJECT),),
            f"{_LAB} test_exec_reject_selects_the_no_row {_ALL}: the command stays unrun; the "
            "model hears 'aborted by user' with the next message only",
            lab_verified=True,
        ),
    )
)

_ASYNC_KEY_PLANS = (
    KeyPlan(
        PlanKey(InteractionKind.ASYNC_QUESTION, StepKind.QUEUED, Intent.OPEN_QUEUED_QUESTION),
        (Press("S-Left"),),
        f"{_LAB} test_async_answer_when_idle_starts_the_next_turn and "
        "test_async_answer_while_working_steers_the_turn (0.154.0, 0.155.1)",
        lab_verified=True,
    ),
    KeyPlan(
        PlanKey(InteractionKind.ASYNC_QUESTION, StepKind.SINGLE_SELECT, Intent.CHOOSE),
        (PressChosenNumber(),),
        f"{_LAB} test_async_answer_when_idle_starts_the_next_turn and "
        "test_async_answer_while_working_steers_the_turn (0.154.0, 0.155.1): the digit "
        "submits the option as a user message '> <question>\\n\\n<option>'",
        lab_verified=True,
    ),
)

# What the composer of every pinned version (0.153.4 to 0.171.0) does with text instead of
# typing it (tests/lab/test_hostile_input.py; docs/input.md).
_SPECIALS = (
    Special(r"^!", "shell mode (the rest would run as a shell command)"),
    Special(r"^/", "a slash command"),
    Special(r"^\?", "the shortcuts overlay (a leading '?' in an empty composer is eaten)"),
    Special(r"(?:^|\s)@", "a file, skill and agent mention popup over the composer"),
    # '$' then a name: a popup when the name matches an installed skill, which AKK cannot
    # know ('$sk' opened it, '$HOME' and '$(' did not); refused whatever the name.
    Special(r"(?:^|\s)\$[A-Za-z_]", "the skills popup (its Enter inserts a skill)"),
)
# The notes under a question (probed on 0.153.4 and 0.171.0, docs/input.md): '@' and '$'
# open no popup there and a leading '/' is text, but 0.153.4 still reads a leading '!' as
# shell mode ('! x') and eats a leading '?'; 0.171.0 types both. Refused on every version.
_NOTES_SPECIALS = tuple(s for s in _SPECIALS if s.pattern in (r"^!", r"^\?"))
_TYPING = Typing(
    wrapping=Wrapping.TEXTWRAP,
    literal_max_length=1000,
    paste_max_length=1000,
    length_unit=LengthUnit.CODEPOINTS,
    paste_max_newlines=None,
    placeholder_single=r"\[Pasted Content {chars} chars\]",
    placeholder_multi=r"\[Pasted Content {chars} chars\]",
    specials=_SPECIALS,
    viewport=None,
    # openai/codex codex-rs/tui/src/bottom_pane/paste_burst.rs: PASTE_ENTER_SUPPRESS_WINDOW,
    # 120 ms after a burst's last key an Enter is a newline. ChatComposer::handle_paste
    # clears the window (clear_after_explicit_paste), so a bracketed paste leaves none, nor
    # does a typed burst the composer buffers and shows only once flushed as a paste (on
    # every pinned version an Enter at the first screen showing typed text submitted). A
    # composer that shows keys as they come (Codex's direct-insert views) keeps the window
    # open over the shown text, and the source at the pinned tags was not at hand: the full
    # window stays, counted from that first screen.
    enter_guard_seconds=0.12,
    settle_seconds=0.5,
    evidence=(
        "fixtures/README.md 'Typing into the composer' (0.153.4 and 0.169.0 by hand, every "
        "version by tests/lab/test_typing.py): a paste of more than 1000 characters shows the "
        "cyan element '[Pasted Content N chars]' (a second one of the same size ' #2'); a "
        "burst of more than 1000 characters typed with send-keys -l is taken for a paste; an "
        "Enter within ~120 ms of a typed burst is a newline (0 ms: newline, 50 ms: sent), "
        "never after a bracketed paste; the specials (docs/input.md, lab probe of 0.153.4 and "
        "0.171.0, tests/lab/test_hostile_input.py on every version): '!' opens shell mode, '/' "
        "a command, '?' in an empty composer is eaten, '@' and '$' after a space or at the "
        "start open the mention popup, '$' and a name there the skills popup ('$sk' shows "
        "'enter insert'); a scrolled "
        "composer marks its right margin and drops the status row"
    ),
)

_CONTEXT_LEFT = Notice(re.compile(r"\d{1,3}% context left"), right_pad=2)

_V0_153_4 = CodexProfile(
    version="0.153.4",
    cursor="›",
    highlight=Highlight(bold=True, reverse=False, fg="cyan"),
    composer_glyph="›",
    composer_margin=3,
    placeholder_fg="cyan",
    status_fg="f6e2b7",
    status_max_rows=1,  # a long status line is cut with "…"
    status_hints=(),
    hint_notices=(),
    mode_indicator=None,
    scrolled_mark=None,
    bare_footer=("? for shortcuts",),
    context_left=_CONTEXT_LEFT,
    person_rows=PersonRows(
        ModeIndicator(("Shell mode",), fg="brightred", right_pad=2),
        lists_below=True,
        queue_plan=" · Plan mode",
    ),
    working_marker="esc to interrupt",
    in_progress_verbs=("Running",),
    permission_anchor="Would you like to run the following command?",
    permission_paragraphs=("Environment: ", "Reason: ", "$ "),
    command_prefix="$ ",
    command_margin=2,
    permission_menu=MenuShape(cursor_col=0, number_col=2, descriptions=False, shortcuts=True),
    permission_menu_gap=1,
    permission_roles=(
        ("Yes, proceed", OptionRole.APPROVE_ONCE),
        ("Yes, and don't ask again", OptionRole.APPROVE_PERSISTENT),
        ("No, and tell Codex what to do differently", OptionRole.REJECT),
    ),
    permission_footer=Footer(("Press enter to confirm or esc to cancel",)),
    question_header=re.compile(r"Question (\d+)/(\d+) \((\d+) unanswered\)"),
    question_prompt_fg="cyan",
    prompt_fill_blank=True,
    answered_prompt_fg="default",
    question_menu=MenuShape(cursor_col=2, number_col=4, descriptions=True, shortcuts=False),
    question_footers=(
        Footer(("tab to add notes", "enter to submit answer", "esc to interrupt")),
        Footer(
            (
                "tab to add notes",
                "enter to submit answer",
                "←/→ to navigate questions",
                "esc to interrupt",
            )
        ),
        Footer(
            (
                "tab to add notes",
                "enter to submit all",
                "←/→ to navigate questions",
                "esc to interrupt",
            )
        ),
    ),
    notes_footer=Footer(("tab or esc to clear notes", "enter to submit answer")),
    notes_margin=7,
    notes_max_rows=6,
    full_pane_top=2,
    none_of_the_above="None of the above",
    unanswered_anchor="Submit with unanswered questions?",
    unanswered_count=re.compile(r"\d+ unanswered questions?"),
    unanswered_roles=(("Proceed", OptionRole.PROCEED), ("Go back", OptionRole.GO_BACK)),
    unanswered_footer=Footer(("Press enter to confirm or esc to go back",)),
    banner=">_ OpenAI Codex (v0.153.4)",
    user_glyph="›",
    turn_end=None,
    interrupted="■ Conversation interrupted - ",
    interrupted_fg="red",
    failed="■ ",  # then the API's error, e.g. '■ {"error": {"message": ...'
    failed_fg="red",
    async_question=None,
    blockers=(
        Blocker(
            "trust",
            "Do you trust the contents of this directory?",
            "Press enter to continue",
            _TRUST_REASON,
        ),
    ),
    key_plans=_KEY_PLANS,
    typing=_TYPING,
    notes_specials=_NOTES_SPECIALS,
)

# 0.154.0 draws what 0.153.4 draws, plus queued async questions and their picker.
_V0_154_0 = attrs.evolve(
    _V0_153_4,
    version="0.154.0",
    banner=">_ OpenAI Codex (v0.154.0)",
    async_question=AsyncShape(
        anchor="Queued follow-up inputs",
        queued=re.compile(r"\? \d+ questions?"),
        queued_hint="shift + ← to answer",
        footer=Footer(("enter submit", "ctrl + ] skip", "alt + ↓ main prompt")),
        other="Other",
    ),
    key_plans=KeyPlans(_KEY_PLANS.plans + _ASYNC_KEY_PLANS),
)
# 0.155.1 closes each turn with a dim "done <time>" line.
_V0_155_1 = attrs.evolve(
    _V0_154_0,
    version="0.155.1",
    banner=">_ OpenAI Codex (v0.155.1)",
    turn_end=re.compile(r"done \d{1,2}:\d{2}(?: [AP]M)?"),
)

_V0_169_0 = attrs.evolve(
    _V0_153_4,
    version="0.169.0",
    highlight=Highlight(bold=True, reverse=True),
    status_fg="ffd7af",
    # Observed: five items at 80 and 100 columns wrap onto a second row; the default
    # items with the thread title onto a third at 30 columns (codex_narrow).
    status_max_rows=3,
    status_hints=("← for agents",),
    hint_notices=(Notice(re.compile(r"⚠ \d+ warnings? · f2 to view"), right_pad=1),),
    bare_footer=("← for agents · ? for shortcuts",),
    mode_indicator=ModeIndicator(
        labels=("Plan mode (shift+tab to cycle)", "Plan mode"), fg="magenta", right_pad=1
    ),
    person_rows=PersonRows(
        ModeIndicator(("Shell mode",), fg="brightred", right_pad=1),
        lists_below=False,
        shortcuts="? / esc close",
    ),
    scrolled_mark="↑",
    permission_menu_gap=2,
    question_prompt_fg="5fafff",
    prompt_fill_blank=False,
    full_pane_top=1,
    banner=">_ OpenAI Codex (v0.169.0)",
    turn_end=re.compile(r"Worked for .+ • \d{1,2}:\d{2}(?: [AP]M)?"),
    interrupted_fg="default",
    blockers=(Blocker("trust", "Trust this folder?", "enter continue · esc back", _TRUST_REASON),),
)

# 0.171.0 draws what 0.169.0 draws (`python -m tools.lab new-version codex 0.171.0`:
# every corpus screen classified the same under the 0.169.0 data).
_V0_171_0 = attrs.evolve(_V0_169_0, version="0.171.0", banner=">_ OpenAI Codex (v0.171.0)")

PROFILES: tuple[CodexProfile, ...] = (_V0_153_4, _V0_154_0, _V0_155_1, _V0_169_0, _V0_171_0)
"""Every pinned Codex version, one data row each."""
