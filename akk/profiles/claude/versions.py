"""The pinned Claude Code versions as data: one `ClaudeProfile` row each.

What does Claude Code 2.1.328 look like: its row here, built from the shapes
(`akk.profiles.claude.composer`, `permission`, `questionnaire`), its key plans,
its typing and its themes. 2.1.263, 2.1.266 and 2.1.267 draw identically;
2.1.328 fences the Bash command and says what it cannot check under it, marks
a scrolled composer's rule, indents multi-select descriptions past the box and
drops the review's question row; 2.1.332 draws what 2.1.328 draws. Adding a
version is adding a row here (and its fixtures): `python -m tools.lab
new-version claude <version>` says whether an existing row reads it.
"""

from __future__ import annotations

import re

import attrs

from akk.profiles.claude.composer import ComposerShape
from akk.profiles.claude.permission import PermissionShape
from akk.profiles.claude.profile import Blocker, ClaudeProfile, Theme
from akk.profiles.claude.questionnaire import QuestionnaireShape
from akk.profiles.composer import LengthUnit, Typing, Wrapping
from akk.profiles.keyplan import (
    AwaitEditor,
    Intent,
    KeyPlan,
    KeyPlans,
    MoveToRole,
    PlanKey,
    Press,
    PressChosenNumber,
    PressRoleNumber,
    ToggleChosen,
    TypeText,
)
from akk.profiles.observation import InteractionKind, OptionRole, StepKind
from akk.text_rule import Special

_QUESTIONNAIRE = InteractionKind.QUESTIONNAIRE
_ENTER = Press("Enter")
_LAB = "tests/lab/test_claude_plans.py"  # drives plans step by step on every pinned version
_E2E = "tests/lab/test_interactions.py"  # a controller's answer, through `akk serve`
# Text that reaches the editor before it has taken focus is dropped, and that takes up to
# 0.9 s after the Down on a loaded machine (tools/lab/NOTES.md): the text goes in once the
# screen shows the editor open, never after a fixed wait.
_ONE_READ_BYTES = 1024
"""Typed keys Claude surely takes in one read. Two reads before its text input draws again
keep only the second (tools/lab/NOTES.md): the editor's answers go in proven pieces of this
size, and a longer composer line as a paste."""
_FREE_TEXT_STEPS = (
    MoveToRole(OptionRole.FREE_TEXT),
    AwaitEditor(),
    TypeText(piece_bytes=_ONE_READ_BYTES),
    _ENTER,
)
_FREE_TEXT_EVIDENCE = (
    f"{_E2E} test_claude_free_text_goes_through_type_something_byte_exact (at 120x60), "
    f"{_LAB} test_free_text_into_the_open_editor: Down onto 'Type something.' opens the "
    "editor; text typed once the screen shows it open (the step FREE_TEXT), in pieces of at "
    "most 1,024 bytes each proven before the next, shows there as typed (799, 800 and 3,000 "
    "characters, both quotes, é, 日本, an emoji, shell metacharacters, a leading '/' or '!'; "
    "never a paste placeholder), "
    "editor_matches proves it, and Enter sends exactly that text once: 'The user answered: "
    '"<question>"="<text>". ...\''
)
_KEY_PLANS = KeyPlans(
    (
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.CHOOSE),
            (PressChosenNumber(),),
            evidence=(
                f"{_E2E} test_claude_single_select_answer_reaches_the_model_once, "
                f"{_LAB} test_three_questions_then_submit: the "
                "option's digit picks it and answers at once (the next question, or the answer "
                "sent for a one-question prompt), with no walk whose dropped Down would answer "
                "another option"
            ),
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.MULTI_SELECT, Intent.CHOOSE),
            (ToggleChosen("Enter"), MoveToRole(OptionRole.SUBMIT), _ENTER),
            evidence=(
                f"{_E2E} test_claude_multi_select_toggles_each_box_then_submits_the_review "
                "(1, 2 and all 4 options): Enter ticks "
                "the current box, each toggle proven; Down past the options and the free-text "
                "row to Submit, Enter opens the review; the answers arrive joined with ', '"
            ),
            lab_verified=True,
        ),
        # With the cursor elsewhere, the move opens the editor; on it, the move is empty.
        *(
            KeyPlan(
                PlanKey(_QUESTIONNAIRE, step, Intent.FREE_TEXT),
                _FREE_TEXT_STEPS,
                _FREE_TEXT_EVIDENCE,
                lab_verified=True,
            )
            for step in (StepKind.SINGLE_SELECT, StepKind.FREE_TEXT)
        ),
        KeyPlan(
            PlanKey(InteractionKind.CONFIRMATION, StepKind.REVIEW, Intent.SUBMIT),
            (PressRoleNumber(OptionRole.SUBMIT),),
            evidence=(
                f"{_E2E} test_claude_multi_select_toggles_each_box_then_submits_the_review, "
                f"{_LAB} test_three_questions_then_submit: '1' "
                "on 'Review your answers' submits; every answer reaches the model once"
            ),
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(InteractionKind.PERMISSION, StepKind.PERMISSION, Intent.APPROVE_ONCE),
            (PressRoleNumber(OptionRole.APPROVE_ONCE),),
            evidence=(
                f"{_E2E} test_claude_bash_permission_approve_runs_it_reject_does_not, "
                f"{_LAB} test_bash_approve_once_on_an_advised_prompt_runs_it: '1' ('Yes') runs "
                "the command once, "
                "its output returns as the tool_result; the mode and the project settings stay"
            ),
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(InteractionKind.PERMISSION, StepKind.PERMISSION, Intent.REJECT),
            (PressRoleNumber(OptionRole.REJECT),),
            evidence=(
                f"{_LAB} test_bash_reject_leaves_it_unrun: the 'No' row's digit (4: the menu "
                "has two persistent rows, 'always allow access' and 'switch to auto mode', that "
                "a Down walk would pass) leaves the command unrun and ends the turn with no "
                "request; the next message carries the tool_result \"The user doesn't want to "
                'proceed with this tool use...". Never Esc (cancel)'
            ),
            lab_verified=True,
        ),
    )
)

_BLOCKERS = (
    Blocker("onboarding", ("Let's get started.", "Choose the text style")),
    Blocker("api_key", ("Detected a custom API key", "Do you want to use this API key?")),
    Blocker("trust", ("Accessing workspace:", "Yes, I trust this folder")),
)

_LINE_BREAK = Special(r"\\$", "a line break: backslash then Enter is a newline, not a submit")
# What the composer of every pinned version (2.1.263 to 2.1.332) does with text instead of
# typing it (tests/lab/test_hostile_input.py; docs/input.md). A leading '#' is plain text
# on every one of them (no memory mode), so it is typed.
_SPECIALS = (
    Special(r"^!", "shell mode (the rest would run as a shell command)"),
    Special(r"^/", "the command menu (Enter would run the highlighted command)"),
    Special(r"(?:^|\s)@", "a file and agent mention popup over the composer"),
    Special(r"^\?", "the shortcuts help (a '?' alone in an empty composer is eaten)"),
    _LINE_BREAK,
)
_TYPING = Typing(
    wrapping=Wrapping.WRAP_ANSI,
    literal_max_length=800,
    literal_max_bytes=_ONE_READ_BYTES,
    paste_max_length=800,
    length_unit=LengthUnit.UTF16,
    paste_max_newlines=2,
    paste_newline_reserve=10,
    placeholder_single=r"\[Pasted text #[1-9]\d*\]",
    placeholder_multi=r"\[Pasted text #[1-9]\d* \+{newlines} lines\]",
    specials=_SPECIALS,
    viewport=(3, 5),
    enter_guard_seconds=0.0,
    settle_seconds=0.2,
    evidence=(
        "fixtures/README.md 'Typing into the composer' (all four versions; the bundled source "
        "of each binary and lab runs): a paste of more than 800 UTF-16 units or more than "
        "min(rows - 10, 2) line breaks shows '[Pasted text #N]' / '[Pasted text #N +K lines]' "
        "(K = line breaks, N = the session's paste counter); send-keys -l of more than 800 "
        "characters is taken for a paste; the specials (docs/input.md, lab probe of 2.1.263 and "
        "2.1.332, tests/lab/test_hostile_input.py on every version): '!' opens shell mode, '/' "
        "the command menu, '@' after a space or at the start a mention popup, '?' alone the "
        "shortcuts help, a trailing '\\' makes Enter a newline, '#' is plain text; the "
        "fullscreen composer shows max(3, rows // 2 - 5) rows and scrolls unmarked; Enter "
        "0 ms after typed or pasted text submitted (16 of 16); keys within ~200 ms of a "
        "widget's first paint are dropped"
    ),
)
# The questionnaire's editor is the composer's text input in another box: the same
# wrapping, but every burst goes in as typed (its paste handler inserts the raw text).
_EDITOR = attrs.evolve(
    _TYPING,
    literal_max_length=3000,
    literal_max_bytes=None,  # typed in proven pieces (TypeText.piece_bytes)
    length_unit=LengthUnit.CODEPOINTS,
    specials=(_LINE_BREAK,),
    viewport=None,
    evidence=(
        "a trailing '\\' then Enter is a newline in the editor too: probed on 2.1.263 and "
        "2.1.332 with the free-text steps of tests/lab/test_claude_plans.py, no answer reached "
        "the model; refused on every version by tests/lab/test_hostile_input.py; "
        f"{_E2E} (every pinned version): 799, 800 and 3,000 characters typed show every "
        "character in the editor, never '[Pasted text #N]', and "
        "the whole text reaches the model; a leading '/' or '!' is plain text there; the "
        "editor wraps at cols - 6 (Bun.wrapAnsi, as the composer) under its first character "
        "and grows without scrolling, so a prompt taller than the pane (3,000 characters at "
        "120x40) is clipped and never proven; 3,000 was proven whole at 120x60"
    ),
)
_COMPOSER = ComposerShape()
# Themes, from the theme_<name>_* fixtures against the dark ones, cell by cell (every
# colour maps to exactly one; dark-daltonized changes only a success green, unread).
_DARK = Theme("dark")
_DARK_DALTONIZED = Theme("dark-daltonized", (("87d787", "5fafff"),))
_LIGHT_ANSI = Theme(
    "light-ansi",
    (("808080", "white"), ("949494", "brightblack"), ("ffffff", "black"), ("afd7ff", "blue")),
)
# The ANSI-palette dark theme draws the composer rules and the muted text in one colour.
_DARK_ANSI = Theme(
    "dark-ansi",
    (("808080", "white"), ("949494", "white"), ("ffffff", "brightwhite"), ("afd7ff", "brightblue")),
)


def _light(name: str, composer_rule: str, highlight: str) -> Theme:
    """`light` and `light-daltonized`: the same greys, another highlight colour."""
    return Theme(
        name,
        (
            ("808080", composer_rule),
            ("949494", "626262"),
            ("ffffff", "000000"),
            ("afd7ff", highlight),
        ),
    )


def _themes(composer_rule: str) -> tuple[Theme, ...]:
    """Every theme `/theme` offers (`auto` draws as dark or light), light's rule colour given."""
    return (
        _DARK,
        _DARK_DALTONIZED,
        _light("light", composer_rule, "8787ff"),
        _light("light-daltonized", composer_rule, "5f87ff"),
        _LIGHT_ANSI,
        _DARK_ANSI,
    )


_THEMES_2_1_263 = _themes("949494")
_THEMES_2_1_328 = _themes("8a8a8a")
_ADVISORIES = (
    # The family of the 2.1.328 binary's bash-parser reasons (some end in a clause
    # or a second sentence: "... before it runs: your shell may ...").
    re.compile(r"\S.* can't be checked before it runs(?:[.:] \S.*)?"),
    re.compile(r"Redirect has multiple targets — post-redirect args swallowed"),
)
# The bash parser's reasons 2.1.263-2.1.267 print as they are: `Contains <node type>` for
# the node types it lists as too complex (the same 18 in each binary), `Contains shell
# syntax (<type>) ...` for any other, `Parse error`.
_TOO_COMPLEX_NODES = (
    "command_substitution|process_substitution|expansion|simple_expansion|brace_expression|"
    "subshell|compound_statement|for_statement|while_statement|until_statement|if_statement|"
    "case_statement|function_definition|test_command|ansi_c_string|translated_string|"
    "herestring_redirect|heredoc_redirect"
)
_PARSER_REASONS = (
    re.compile(rf"Contains (?:{_TOO_COMPLEX_NODES})"),
    re.compile(r"Contains shell syntax \([a-z_]+\) that cannot be statically analyzed"),
    re.compile(r"Parse error"),
)
# A user's `permissions.ask` rule that matched the command, and the dim hint under it.
_RULE_HINT = re.compile(r"/permissions to update rules")
_ASK_RULE_2_1_263 = re.compile(r"Permission rule \S.* requires confirmation for this command\.")
_ASK_RULE_2_1_328 = re.compile(r"Rule \S.* from \S.* settings says to ask\.")
_QUESTIONNAIRE_2_1_263 = QuestionnaireShape()
_PERMISSION_2_1_263 = PermissionShape(
    advisories=(*_PARSER_REASONS, _ASK_RULE_2_1_263), advisory_hints=(_RULE_HINT,)
)


def _row(version: str) -> ClaudeProfile:
    """2.1.263, 2.1.266 and 2.1.267 draw identically; each still gets its own row."""
    return ClaudeProfile(
        version=version,
        composer=_COMPOSER,
        questionnaire=_QUESTIONNAIRE_2_1_263,
        permission=_PERMISSION_2_1_263,
        blockers=_BLOCKERS,
        key_plans=_KEY_PLANS,
        typing=_TYPING,
        editor=_EDITOR,
        themes=_THEMES_2_1_263,
    )


V2_1_263 = _row("2.1.263")
V2_1_266 = _row("2.1.266")
V2_1_267 = _row("2.1.267")
V2_1_328 = ClaudeProfile(
    version="2.1.328",
    composer=attrs.evolve(_COMPOSER, scroll_mark=re.compile(r"─+ ([↑↓] \d+ more) ─+")),
    # Multi-select descriptions sit under the label, past the box.
    questionnaire=attrs.evolve(
        _QUESTIONNAIRE_2_1_263, multi_description_indent=9, review_prompt=None
    ),
    # The command is fenced by dashed rules, its description above it.
    # It says what it could not check about a command under the fence.
    permission=attrs.evolve(
        _PERMISSION_2_1_263,
        command_indent=1,
        command_fence="╌",
        advisories=(*_ADVISORIES, _ASK_RULE_2_1_328),
        # Under the options of a new file taller than the pane (2.1.263-2.1.267: a blank).
        hidden_rows=re.compile(r"↑ [1-9][0-9]* more lines?"),
    ),
    blockers=_BLOCKERS,
    key_plans=_KEY_PLANS,
    # A collapsed paste is sent wrapped in a tag (tests/lab/test_typing.py).
    typing=attrs.evolve(
        _TYPING,
        collapsed_delivery=(
            r'<pasted_content id="([0-9a-f]+)">\n{text}\n</pasted_content id="\1">'
        ),
    ),
    editor=_EDITOR,
    themes=_THEMES_2_1_328,
)

# 2.1.332 draws what 2.1.328 draws (`python -m tools.lab new-version claude 2.1.332`:
# every corpus screen classified the same under the 2.1.328 data).
V2_1_332 = attrs.evolve(V2_1_328, version="2.1.332")

PROFILES: tuple[ClaudeProfile, ...] = (V2_1_263, V2_1_266, V2_1_267, V2_1_328, V2_1_332)
"""Every pinned Claude Code version."""
