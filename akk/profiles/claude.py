"""Claude Code version profiles: each pinned version is one row of data, read by one classifier.

What the pinned versions draw (fixtures/claude/<version>/, 120x40, 80x24 and more sizes):

- Idle / draft / working: a composer between two full-width ``─`` rules, its first
  row ``❯\\u00a0<text>``, one hint row under it (``⏸ manual mode on · ? for
  shortcuts``). While a turn runs the hint row says ``esc to interrupt``, a spinner
  line (``✽ Transmuting…``) stands above the composer and the composer glyph turns
  grey. A user ``statusLine`` draws its output between the rule and the hint row,
  takes the place of ``? for shortcuts`` and, on 2.1.263-2.1.267, of ``esc to
  interrupt`` too; ``editorMode: vim`` starts the hint row with ``-- INSERT --`` and
  hides ``esc to interrupt`` on every version. There the spinner line is the sign of
  a turn. Vim's NORMAL mode shows no mark at all: an empty NORMAL composer is drawn
  exactly as the default idle one (tools/lab/NOTES.md). The rows between the rules
  are the draft (`akk.profiles.composer.DraftView`); a scrolled draft shows its last
  rows only, 2.1.328 writing ``↑ N more`` into the upper rule.
- Prompts replace the composer. Each is isolated bottom-up from the last
  non-blank row of the screen:
  * permission: footer ``Esc to cancel · Tab to amend``, numbered rows with the
    cursor at column 1, ``Do you want to …?``, the tool's body, a title row
    (``Bash command``) under a full-width rule in the menu highlight colour;
  * questionnaire (AskUserQuestion): footer ``Enter to select · …``, a
    ``Chat about this`` row under a rule, numbered options (``[ ]`` boxes for
    multi-select) with descriptions, the automatic ``Type something.`` row, the
    question (a longer one under a dim ``│`` gutter), a tab row and a full-width
    rule on top. With the cursor on ``Type
    something.`` that row is an open editor: the typed text in place of the label,
    soft-wrapped rows under its first character (`ClaudeProfile.editor_matches`).
    A multi-select question stays a multi-select step there (Enter would only
    tick or untick the typed text). A question, label or description longer than
    the row wraps between words at the pane's edge, its further rows at its first column
    (a description's in the muted colour); each such row must be a wrap Claude
    could have made there (`_Classifier.prove_wrap`: a break that may fall inside
    a word, as CJK text's does, cannot be read back). Claude draws no variation
    selector (``❤️`` shows ``❤``), so a question holding a character that takes
    one (or the U+FFFD Claude draws for a zero-width space) is refused;
  * review (the ``Submit`` tab): no footer at all; ``Submit answers`` / ``Cancel``
    under ``Ready to submit your answers?``, the answered questions, the tab row
    and the rule.
- First-run screens (onboarding, API key, trust) are recognised by their anchors.
- Themes (every one `/theme` offers: `dark`, `dark-daltonized`, `light`,
  `light-daltonized`, `light-ansi`, `dark-ansi`) draw the same screens in other
  colours: each row lists its `Theme`s, each mapping the `dark` colours it changes to
  exactly one colour of its own, and a screen is read in each of them.
- A Bash permission may draw a long command under a dim ``│`` gutter (its rows wrapped
  at spaces), add rows that say what Claude cannot check about it (2.1.328: under the
  fence; 2.1.263-2.1.267: the parser's ``Contains simple_expansion`` between blank
  rows), carry the auto-mode tip and ``Yes, and switch to auto mode`` row (a model with
  auto mode; docs/permissions.md), and offer a directory-scoped grant (``Yes, allow
  reading from /tmp from this project``) as its persistent row (tools/lab/NOTES.md,
  "Claude in real users' setups").

Every row of a prompt region must be of a known kind, option numbers must run
1, 2, 3… and exactly one row carries the cursor in the highlight colour. A prompt
whose footer is recognised but whose region cannot be proven is UNKNOWN with a
reason and no prompt. A proven prompt AKK must not answer (a non-Bash permission,
the cursor on a persistent-approval row) is BLOCKED with its prompt for display.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import attrs
from wcwidth.table_vs15 import VS15_WIDE_TO_NARROW
from wcwidth.table_vs16 import VS16_NARROW_TO_WIDE

from akk.profiles.composer import (
    DraftView,
    LengthUnit,
    Typing,
    TypingMethod,
    Wrapping,
    draft_matches,
)
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
    ToggleChosen,
    TypeText,
)
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    OptionRole,
    OptionView,
    PromptView,
    QuestionView,
    ResponseKind,
    State,
    StepKind,
)
from akk.protocol.text_rule import Special
from akk.screen.grid import Cell, Grid
from akk.screen.region import Region, is_box_drawing

AGENT = "claude"

# ---------------------------------------------------------------- the data


def _unreadable() -> re.Pattern[str]:
    """Characters on screen that do not say what the question's text held there.

    Any character outside ASCII that a variation selector draws as emoji or as text
    (Unicode's emoji variation sequences, as wcwidth lists them: U+FE0F widens the
    first set, U+FE0E narrows the second), the keycap mark U+20E3 that follows an
    ASCII digit, ``#`` or ``*`` and its selector ("1️⃣"), and U+FFFD, which Claude
    shows for a zero-width space or a soft hyphen.
    """
    ranges = (*VS16_NARROW_TO_WIDE["9.0.0"], *VS15_WIDE_TO_NARROW["9.0.0"])
    spans = "".join(
        f"{re.escape(chr(max(low, 0x80)))}-{re.escape(chr(high))}"
        for low, high in ranges
        if high >= 0x80
    )
    return re.compile(f"[{spans}\u20e3\ufffd]")


_UNREADABLE = _unreadable()


@attrs.frozen
class ComposerShape:
    """The input box Claude draws whenever no prompt replaces it."""

    rule: str = "─"
    rule_fg: str = "808080"
    prompt: str = "❯\u00a0"
    idle_fg: str = "default"  # colour of the prompt glyph while Claude waits for input
    continuation_indent: int = 2  # further rows of a multi-line draft
    # The draft wraps at the pane width less this: its cursor gets `columns - 3`
    # and measures wrapped rows with one column less, for the cursor cell.
    wrap_margin: int = 4
    # A composer rule that counts the rows scrolled away ("─── ↑ 4 more ───"); None
    # where the version scrolls without a mark (its rule stays plain).
    scroll_mark: re.Pattern[str] | None = None
    # Under the bottom rule: the rows of the user's `statusLine` command (its own text,
    # never read), then the one hint row Claude draws itself (mode, hints), each from
    # this column; a status line of more rows is a screen this profile cannot place.
    footer_indent: int = 2
    status_line_rows: int = 1
    working_marker: str = "esc to interrupt"  # in the hint row while a turn runs
    # `editorMode: vim` starts the hint row with this in INSERT mode; NORMAL shows nothing.
    insert_mark: str = "-- INSERT --"
    spinner_glyphs: str = "·✢*✶✻✽✳"  # the animated glyph that starts a working line
    # A line such as "✽ Transmuting…" or "✻ Calculating… (0s · ↓ 2 tokens)": glyph,
    # one word, an ellipsis. A finished turn says "✻ Crunched for 0s" (no ellipsis).
    spinner_word: str = r"[A-Za-z][\w'-]*…"


@attrs.frozen
class MenuShape:
    """How one numbered menu row is drawn: ``❯ 1. Label``."""

    cursor_col: int
    number_col: int
    cursor: str = "❯"
    highlight_fg: str = "afd7ff"  # cursor glyph and the current row's label
    muted_fg: str = "949494"  # descriptions, hints, unselected automatic rows


@attrs.frozen
class QuestionnaireShape:
    """AskUserQuestion: the tab row, the question, its options and the automatic rows."""

    menu: MenuShape = MenuShape(cursor_col=0, number_col=2)
    rule_fg: str = "949494"
    footer_prefix: str = "Enter to select · "
    tab_bg: str = "afd7ff"  # background of the current tab
    tab_glyphs: str = "☐☒✔"  # open, answered, the Submit tab
    tab_arrows: tuple[str, str] = ("←", "→")
    submit_tab: str = "Submit"
    question_fg: str = "ffffff"  # bold
    # A longer question is drawn under this gutter (dim) in every row, whatever the
    # width (69 characters were drawn without it, 95 with it): its text starts after it.
    question_gutter: str = "│ "
    single_description_indent: int = 5
    multi_description_indent: int = 2
    free_text_single: str = "Type something."
    free_text_multi: str = "Type something"
    # The open editor wraps its text at the pane width less its label column less
    # this (the text input keeps one column for its cursor, as the composer does).
    editor_wrap_margin: int = 1
    multi_submit: str = "Submit"
    multi_submit_indent: int = 5
    chat: str = "Chat about this"
    unchecked: str = "[ ] "
    checked: str = "[✔] "
    review_title: str = "Review your answers"
    review_prompt: str | None = "Ready to submit your answers?"  # 2.1.328 drops this row
    review_submit: str = "Submit answers"
    review_cancel: str = "Cancel"
    review_question_mark: str = "●"
    review_answer_mark: str = "→"
    # Every pinned version draws a question without its variation selectors ("❤️ Heart"
    # shows as "❤ Heart", "⌚︎" as "⌚") and U+FFFD for a zero-width space or a soft
    # hyphen: text holding a character that may stand for another cannot be read back
    # exactly, so such a question is refused.
    unreadable: re.Pattern[str] = _UNREADABLE


@attrs.frozen
class PermissionShape:
    """A tool permission prompt; only the Bash one is ever answered by AKK."""

    menu: MenuShape = MenuShape(cursor_col=1, number_col=3)
    rule_fg: str = "afd7ff"
    footer: str = "Esc to cancel · Tab to amend"
    footer_col: int = 1
    title_col: int = 1
    bash_title: str = "Bash command"
    tool: str = "Bash"  # the tool call a Bash prompt asks about, in the transcript
    question_prefix: str = "Do you want to "
    approve_once: str = "Yes"
    persistent_prefix: str = "Yes, and "
    # Other persistent grants, by their whole (unwrapped) label: the directory-scoped
    # family ("Yes, allow reading from /tmp from this project"). Never offered.
    persistent_grants: tuple[re.Pattern[str], ...] = (
        re.compile(r"Yes, allow reading from \S.* from this project"),
    )
    reject: str = "No"
    tip_prefix: str = "Tip: "
    command_indent: int = 3  # the command and its description (a muted row)
    # 2.1.328 draws the command between two full-width rows of this glyph, its
    # description above; earlier versions put the description below the command.
    command_fence: str | None = None
    # A long command (one that may wrap) is drawn under a dim gutter, one row per
    # wrapped row, broken at spaces: its rows join with a space.
    command_gutter: str = "│ "
    # Rows a version adds when it cannot check the command, at `advisory_col` in the
    # default colour; each (wrapped) advisory must match one of these whole. 2.1.328
    # says so under the fence ("Quoted text in this command can't be checked before it
    # runs"); 2.1.263-2.1.267 print the bash parser's reason ("Contains simple_expansion")
    # between blank rows under the command's description.
    advisories: tuple[re.Pattern[str], ...] = ()
    advisory_fg: str = "default"
    advisory_col: int = 1
    # Muted rows under an advisory, each matching one of these whole: the hint under a
    # user's `permissions.ask` rule ("/permissions to update rules").
    advisory_hints: tuple[re.Pattern[str], ...] = ()


@attrs.frozen
class Blocker:
    """A screen AKK must leave to a person, known by anchors that must all show."""

    name: str
    anchors: tuple[str, ...]


@attrs.frozen
class Theme:
    """A Claude `theme` setting: the colour it draws in place of each `dark` colour read here.

    Every colour of the shapes is the `dark` theme's; a theme maps the ones it
    changes (exactly, one colour for one colour) and keeps the others.
    """

    name: str
    colours: tuple[tuple[str, str], ...] = ()  # (dark colour, this theme's colour)

    def colour(self, dark: str) -> str:
        """This theme's colour for the `dark` theme's colour `dark`."""
        return dict(self.colours).get(dark, dark)


@attrs.frozen
class ClaudeProfile:
    """One pinned Claude Code version: every anchor, shape and key plan as data."""

    version: str
    composer: ComposerShape
    questionnaire: QuestionnaireShape
    permission: PermissionShape
    blockers: tuple[Blocker, ...]
    key_plans: KeyPlans
    typing: Typing
    editor: Typing  # how the questionnaire's "Type something." editor takes typed text
    banner: str = "Claude Code v"  # the start-up banner; a different version there is refused
    # The themes this version is read in: its shapes' colours are the first's (`dark`).
    themes: tuple[Theme, ...] = (Theme("dark"),)
    # What the id says after the version: empty for a pinned row, " (qualified from
    # 2.1.332)" for a pinned row read as a qualified version (akk.profiles.qualified).
    id_note: str = ""

    @property
    def id(self) -> str:
        """Stable id, part of every fingerprint."""
        return f"claude-code@{self.version}{self.id_note}"

    @property
    def agent(self) -> str:
        return AGENT

    @property
    def enter_guard_seconds(self) -> float:
        """Quiet time after the last typed or pasted key before the one Enter."""
        return self.typing.enter_guard_seconds

    @property
    def permission_tool(self) -> str:
        """The tool whose pending call an actionable permission asks about."""
        return self.permission.tool

    def classify(self, grid: Grid) -> Observation:
        """The one Observation this screen shows under this version's data."""
        return self._read(grid).observe()

    def themed(self, theme: Theme) -> ClaudeProfile:
        """This row with every colour its shapes read drawn as `theme` draws it."""
        c = theme.colour

        def menu(shape: MenuShape) -> MenuShape:
            return attrs.evolve(
                shape, highlight_fg=c(shape.highlight_fg), muted_fg=c(shape.muted_fg)
            )

        composer, questionnaire, permission = self.composer, self.questionnaire, self.permission
        return attrs.evolve(
            self,
            composer=attrs.evolve(
                composer, rule_fg=c(composer.rule_fg), idle_fg=c(composer.idle_fg)
            ),
            questionnaire=attrs.evolve(
                questionnaire,
                menu=menu(questionnaire.menu),
                rule_fg=c(questionnaire.rule_fg),
                tab_bg=c(questionnaire.tab_bg),
                question_fg=c(questionnaire.question_fg),
            ),
            permission=attrs.evolve(
                permission,
                menu=menu(permission.menu),
                rule_fg=c(permission.rule_fg),
                advisory_fg=c(permission.advisory_fg),
            ),
            themes=(theme,),
        )

    def _read(self, grid: Grid) -> _Classifier:
        """The classifier of the one theme under which the screen shows a known shape.

        Each theme is tried with its exact colours. None: the first theme's reading
        (its reason). Several that disagree: refused, as a screen AKK cannot place.
        """
        readers = [_Classifier(variant, grid) for variant in _variants(self)]
        observations = [reader.observe() for reader in readers]
        known = [i for i, o in enumerate(observations) if o.state is not State.UNKNOWN]
        if not known:
            return readers[0]
        if any(observations[i] != observations[known[0]] for i in known[1:]):
            themes = ", ".join(readers[i].p.themes[0].name for i in known)
            return _Fixed(self, grid, f"the screen reads differently in the themes {themes}")
        return readers[known[0]]

    def draft_matches(self, draft: DraftView, text: str, how: TypingMethod) -> bool:
        """Whether `draft` shows exactly `text`, typed `how`, as this version renders it."""
        return draft_matches(self.typing, draft, text, how)

    @property
    def editor_typing(self) -> Typing:
        """How the questionnaire's "Type something." editor takes typed text."""
        return self.editor

    @property
    def free_text_max_chars(self) -> int:
        """Longest free-text answer `editor_matches` can prove (characters).

        A bound, not a promise: the editor grows a row per ~(columns - 6)
        characters and a prompt taller than the pane is never proven, so
        `editor_matches` decides per screen (about 2,800 characters fit at
        120x40 under a three-option question, about 600 at 80x24).
        """
        return self.editor.literal_max_length

    def next_turn_message(self, question: str, label: str) -> str | None:
        """Claude Code has no async questions: no answer starts a turn of its own."""
        return None

    def editor_matches(self, grid: Grid, prompt: PromptView, text: str) -> bool:
        """Whether `prompt`'s open "Type something." editor shows exactly `text`, typed.

        `text` went in with ``send-keys -l``; the editor shows every character
        as typed (no paste placeholder, whatever the length). False unless
        `grid` classifies to exactly `prompt` with the cursor in a single-select
        question's editor, and whenever the editor may not be whole on screen:
        the prompt clipped by the pane, the dim placeholder of an empty editor,
        text the editor would wrap differently, or more than
        `free_text_max_chars` characters.
        """
        classifier = self._read(grid)
        observation = classifier.observe()
        editor = classifier.editor
        if observation.prompt != prompt or not observation.actionable or editor is None:
            return False
        return draft_matches(self.editor, editor, text, TypingMethod.LITERAL)


# ---------------------------------------------------------------- the classifier


class _Refused(Exception):
    """The screen shows a prompt shape whose region could not be proven."""


@attrs.frozen
class _Row:
    """One parsed menu row (plus any wrapped continuation rows)."""

    y: int
    number: int | None
    label: str
    label_col: int
    current: bool
    highlighted: bool  # the label's first cell is in the highlight colour
    checked: bool | None = None
    description: str = ""
    # Each row joined to this one as a wrapped row: (row above, its text's first
    # column, the row, its first column), for `_Classifier.prove_wraps`.
    joins: tuple[tuple[int, int, int, int], ...] = ()


_NUMBER = re.compile(r"(\d+)\. ")
_VERSION = re.compile(r"\d+(?:\.\d+)+")


@functools.cache
def _spinner(glyphs: str, word: str) -> re.Pattern[str]:
    return re.compile(f"[{re.escape(glyphs)}] {word}")


def _text_of(row: Sequence[Cell]) -> str:
    return "".join([cell.char for cell in row])


class _Classifier:
    """Reads one grid under one profile; lives for a single classify() call."""

    def __init__(self, profile: ClaudeProfile, grid: Grid) -> None:
        self.p = profile
        self.grid = grid
        self.cells = [grid.row(y) for y in range(grid.rows)]
        self.texts = [_text_of(row) for row in self.cells]
        self.spinner = _spinner(profile.composer.spinner_glyphs, profile.composer.spinner_word)
        self.editor: DraftView | None = None  # the open free-text editor, once a question proved it

    # -- small predicates

    def blank(self, y: int) -> bool:
        return not self.texts[y].strip()

    def rule(self, y: int, glyph: str, fg: str | None = None) -> bool:
        """Whether row `y` is one full-width rule of `glyph` (in colour `fg` if given)."""
        row = self.cells[y]
        return self.texts[y] == glyph * self.grid.cols and (fg is None or row[0].fg == fg)

    def indent(self, y: int) -> int:
        text = self.texts[y]
        return len(text) - len(text.lstrip(" "))

    def result(
        self,
        state: State,
        prompt: PromptView | None = None,
        reason: str | None = None,
        draft: DraftView | None = None,
        composer_mode: str | None = None,
    ) -> Observation:
        return Observation(state, self.p.id, prompt, reason, draft, composer_mode)

    def unknown(self, reason: str) -> Observation:
        return self.result(State.UNKNOWN, reason=reason)

    # -- entry point

    def observe(self) -> Observation:
        bottom = next((y for y in range(self.grid.rows - 1, -1, -1) if not self.blank(y)), None)
        if bottom is None:
            return self.unknown("blank screen")
        mismatch = self.banner_mismatch()
        if mismatch is not None:
            return self.unknown(mismatch)
        try:
            observed = self.composer_screen(bottom)
            if observed is None:
                observed = self.prompt_screen(bottom)
        except _Refused as refused:
            return self.unknown(str(refused))
        if observed is not None:
            return observed
        for blocker in self.p.blockers:
            if all(any(anchor in text for text in self.texts) for anchor in blocker.anchors):
                return self.result(
                    State.BLOCKED, reason=f"blocked: {blocker.name} screen needs a person"
                )
        return self.unknown("no known Claude Code screen shape at the bottom of the pane")

    def banner_mismatch(self) -> str | None:
        """A start-up banner showing another version than this profile's, if any."""
        banner = self.p.banner
        for y, text in enumerate(self.texts):
            at = text.find(banner)
            if at < 0:
                continue
            found = _VERSION.match(text, at + len(banner))
            columns = self.grid.row_columns(y)
            cell = self.cells[y][columns[at]] if at < len(columns) else None
            # Only the banner itself counts (bold name, or the coloured welcome line),
            # not a transcript that mentions a version.
            banner_cell = cell is not None and (cell.bold or cell.fg != "default")
            if found and banner_cell and found.group() != self.p.version:
                return (
                    f"version_mismatch: the screen shows Claude Code v{found.group()}, "
                    f"profile is {self.p.version}"
                )
        return None

    # -- idle, draft, working

    def composer_screen(self, bottom: int) -> Observation | None:
        """Idle / idle_draft / working when the composer is at the bottom; else None."""
        shape = self.p.composer
        lower = next(
            (
                y
                for y in range(bottom, max(-1, bottom - shape.status_line_rows - 2), -1)
                if self.composer_rule(y) is not None
            ),
            None,
        )
        if lower is None:
            return None
        upper = next(
            (y for y in range(lower - 1, -1, -1) if self.composer_rule(y) is not None), None
        )
        if upper is None or upper == lower - 1:
            return None
        # A rule that says how many rows are scrolled away frames a partial draft,
        # whose first row shown is a continuation row.
        scrolled = bool(self.composer_rule(upper) or self.composer_rule(lower))
        if not scrolled and not self.texts[upper + 1].startswith(shape.prompt):
            return None
        for y in range(upper + 1 if scrolled else upper + 2, lower):
            if self.indent(y) < shape.continuation_indent and not self.blank(y):
                raise _Refused(f"unexpected row {y} inside the composer")
        hint = self.composer_footer(lower, bottom)
        self.single_prompt(upper, self.all_anchors())
        draft = self.draft(upper + 1, lower)
        if scrolled:
            draft = attrs.evolve(draft, complete=False)
        working_line = any(self.spinner.match(self.texts[y]) for y in range(upper))
        if shape.working_marker in hint or working_line:
            return self.result(State.WORKING, draft=draft)
        glyph = self.cells[upper + 1][0]
        if glyph.fg != shape.idle_fg:
            return self.unknown(
                "composer glyph is not in its idle colour but no working line shows"
            )
        marked = hint[shape.footer_indent :].startswith(shape.insert_mark)
        return self.result(
            State.IDLE if draft.empty else State.IDLE_DRAFT,
            draft=draft,
            composer_mode="insert" if marked else None,
        )

    def composer_footer(self, lower: int, bottom: int) -> str:
        """Claude's own hint row under the composer's bottom rule ("" when there is none).

        Rows lower+1..bottom-1 are the user's status line, bounded here and never
        read (a blank row where its command printed nothing); row `bottom` is the
        hint row. All of them start at the footer column, so none can be a rule, a
        prompt anchor or a menu row.
        """
        shape = self.p.composer
        for y in range(lower + 1, bottom + 1):
            if not self.blank(y) and self.indent(y) < shape.footer_indent:
                raise _Refused(f"unexpected row {y} under the composer")
        return self.texts[bottom] if bottom > lower else ""

    def composer_rule(self, y: int) -> str | None:
        """The scroll mark of the composer rule at row `y` ("" when unmarked); None: no rule."""
        shape = self.p.composer
        if self.rule(y, shape.rule, shape.rule_fg):
            return ""
        mark = shape.scroll_mark
        found = mark.fullmatch(self.texts[y]) if mark is not None else None
        if found is None or self.cells[y][0].fg != shape.rule_fg:
            return None
        return found.group(1)

    def draft(self, first: int, end: int) -> DraftView:
        """The draft in composer rows first..end-1 (the prompt glyph and the indent dropped).

        Claude draws its cursor as one reverse-video cell; more than one such cell
        is a rendering this profile cannot read.
        """
        indent = self.p.composer.continuation_indent  # the prompt glyph takes as many columns
        rows = tuple(self.texts[y][indent:].rstrip(" ") for y in range(first, end))
        if rows == ("",):
            rows = ()
        cursors = [
            (y - first, x - indent)
            for y in range(first, end)
            for x in range(indent, self.grid.cols)
            if self.cells[y][x].reverse
        ]
        found = self.p.typing.any_placeholder()
        return DraftView(
            rows=rows,
            width=self.grid.cols - self.p.composer.wrap_margin,
            pane_rows=self.grid.rows,
            placeholders=tuple(token for row in rows for token in found.findall(row)),
            cursor=cursors[0] if len(cursors) == 1 else None,
            complete=len(cursors) <= 1,
        )

    # -- prompts

    def prompt_screen(self, bottom: int) -> Observation | None:
        """A permission, questionnaire or review prompt ending at `bottom`; else None."""
        text = self.texts[bottom]
        permission = self.p.permission
        questionnaire = self.p.questionnaire
        footer_at = permission.footer_col
        if text[footer_at:].rstrip() == permission.footer and self.blank_before(bottom, footer_at):
            return self.permission_prompt(bottom)
        if text.startswith(questionnaire.footer_prefix):
            return self.questionnaire_prompt(bottom)
        if self.menu_row(bottom, questionnaire.menu, boxes=False) is not None:
            return self.review_prompt(bottom)
        return None

    def blank_before(self, y: int, x: int) -> bool:
        return not self.texts[y][:x].strip()

    def menu_row(self, y: int, menu: MenuShape, *, boxes: bool) -> _Row | None:
        """Row `y` as a numbered menu row of `menu`'s shape, or None."""
        row, text = self.cells[y], self.texts[y]
        lead = text[: menu.number_col]
        if len(lead) < menu.number_col:
            return None
        cursor = row[menu.cursor_col]
        if cursor.char == menu.cursor:
            if cursor.fg != menu.highlight_fg:
                return None
            current = True
        elif cursor.char == " ":
            current = False
        else:
            return None
        if lead[: menu.cursor_col].strip() or lead[menu.cursor_col + 1 :].strip():
            return None
        number = _NUMBER.match(text, menu.number_col)
        if number is None:
            return None
        label_col = number.end()
        checked: bool | None = None
        if boxes:
            box = text[label_col : label_col + len(self.p.questionnaire.checked)]
            if box not in (self.p.questionnaire.checked, self.p.questionnaire.unchecked):
                return None
            checked = box == self.p.questionnaire.checked
            label_col += len(box)
        label = text[label_col:].rstrip()
        if not label:
            return None
        return _Row(
            y=y,
            number=int(number.group(1)),
            label=label,
            label_col=label_col,
            current=current,
            highlighted=row[label_col].fg == menu.highlight_fg,
            checked=checked,
        )

    def top_rule(self, start: int, fg: str) -> int:
        """The nearest full-width ``─`` rule at or above `start`: the prompt's top edge."""
        glyph = self.p.composer.rule
        for y in range(start, -1, -1):
            if self.rule(y, glyph):
                if self.cells[y][0].fg != fg:
                    raise _Refused(f"rule at row {y} is not this prompt's frame")
                return y
        raise _Refused("prompt frame truncated: no top rule on screen")

    def single_prompt(self, top: int, anchors: Sequence[tuple[int, str]]) -> None:
        """Refuse when a prompt's anchor shows above row `top` (a prompt or the composer)."""
        for y in range(top):
            text = self.texts[y]
            for col, anchor in anchors:
                if text[col:].startswith(anchor) and self.blank_before(y, col):
                    raise _Refused(f"two prompts on screen (another at row {y})")

    def all_anchors(self) -> list[tuple[int, str]]:
        permission, questionnaire = self.p.permission, self.p.questionnaire
        return [
            (permission.footer_col, permission.footer),
            (0, questionnaire.footer_prefix),
            (0, questionnaire.review_title),
        ]

    def expect_blank(self, y: int, what: str) -> None:
        if not self.blank(y):
            raise _Refused(f"unexpected row {y}: expected a blank row {what}")

    # -- permission

    def permission_prompt(self, footer: int) -> Observation:
        shape = self.p.permission
        menu = shape.menu
        self.expect_blank(footer - 1, "above the permission footer")
        y = footer - 2
        while y >= 0 and not self.texts[y].startswith(" " + shape.question_prefix):
            if self.blank(y):
                raise _Refused(f"unexpected blank row {y} among the permission options")
            y -= 1
        if y < 0:
            raise _Refused("permission prompt truncated: no question row")
        question_row = y
        top = self.top_rule(question_row - 1, shape.rule_fg)
        self.single_prompt(top, self.all_anchors())
        title_cell = self.cells[top + 1][shape.title_col]
        title = self.texts[top + 1].strip()
        if not (title and title_cell.bold and title_cell.fg == shape.rule_fg):
            raise _Refused(f"row {top + 1} is not a permission title")
        if title != shape.bash_title:
            return self.result(
                State.BLOCKED, reason=f"blocked: non-Bash permission ({title}) is left to a person"
            )
        rows = self.menu_rows(question_row + 1, footer - 1, menu, boxes=False, description=None)
        self.prove_wraps(rows)
        self.prove_numbers(rows)
        self.prove_cursor(rows, exempt=None)
        command, advisories = self.permission_body(top + 2, question_row)
        if not command:
            raise _Refused("Bash permission shows no command")
        options = []
        for row in rows:
            if row.label == shape.approve_once:
                role = OptionRole.APPROVE_ONCE
            elif row.label == shape.reject:
                role = OptionRole.REJECT
            elif row.label.startswith(shape.persistent_prefix) or any(
                grant.fullmatch(row.label) for grant in shape.persistent_grants
            ):
                role = OptionRole.APPROVE_PERSISTENT
            else:
                raise _Refused(f"unknown permission option {row.number}")
            options.append(_view(row, role))
        roles = [option.role for option in options]
        if roles.count(OptionRole.APPROVE_ONCE) != 1 or roles.count(OptionRole.REJECT) != 1:
            raise _Refused("permission menu lacks exactly one approve-once and one reject row")
        question = QuestionView(
            prompt=self.texts[question_row].strip(),
            response_kind=ResponseKind.CONFIRM,
            options=tuple(options),
            header=title,
            # The command, then what the client says it could not check about it.
            detail="\n\n".join([command, *advisories]),
            command=command,
        )
        prompt = PromptView(
            kind=InteractionKind.PERMISSION,
            step=StepKind.PERMISSION,
            questions=(question,),
            region=Region(top=top, bottom=footer + 1, left=0, right=self.grid.cols),
        )
        current = next(option for option in options if option.current)
        if current.role is OptionRole.APPROVE_PERSISTENT:
            return self.result(
                State.BLOCKED, prompt, "blocked: the cursor is on a persistent-approval row"
            )
        return self.result(State.PERMISSION, prompt)

    def permission_body(self, first: int, last: int) -> tuple[str, list[str]]:
        """The command shown between the title and the question (rows first..last-1).

        Also the advisory rows under it, each whole (wrapped rows joined).
        """
        shape = self.p.permission
        fence = shape.command_fence
        command: list[str] = []
        wrapped: list[str] = []  # the rows of a command drawn under the gutter
        advisory: list[tuple[str, bool]] = []  # each row's text, and whether it is a hint
        fences = 0
        in_tip = False
        gap = False  # a blank row after the command (unfenced: only trailing ones are drawn)
        for y in range(first, last):
            text = self.texts[y]
            if self.blank(y):
                if fence is not None and fences == 1 and (command or wrapped):
                    raise _Refused(f"blank row {y} inside the command fence: a row is missing")
                gap = gap or bool(command or wrapped)
                in_tip = False
                continue
            start = self.indent(y)
            cell = self.cells[y][start]
            if gap and fence is None:
                # The command's description follows it directly; after a blank row only
                # an advisory may stand (else a row is missing).
                if not (shape.advisories and self.advisory_cell(y, start)):
                    raise _Refused(f"row {y} after a blank row under the command")
                advisory.append((text.strip(), cell.fg == shape.menu.muted_fg))
                continue
            if is_box_drawing(text[0]) and text == text[0] * self.grid.cols:
                if text[0] != fence:
                    raise _Refused(f"unexpected rule at row {y} in the permission body")
                fences += 1
                continue
            if text[start:].startswith(shape.tip_prefix) and cell.bold:
                in_tip = True
                continue
            if in_tip and cell.bold:
                continue
            if shape.advisories and (command or wrapped) and fences == 2:
                if not self.advisory_cell(y, start):
                    raise _Refused(f"unexpected row {y} under the command")
                advisory.append((text.strip(), cell.fg == shape.menu.muted_fg))
                continue
            if start != shape.command_indent:
                raise _Refused(f"unexpected row {y} in the permission body")
            if cell.fg == shape.menu.muted_fg:
                continue  # the tool's description of the command
            if fence is not None and fences != 1:
                raise _Refused(f"unexpected row {y} outside the command fence")
            if text[start:].startswith(shape.command_gutter) and cell.dim:
                if command:
                    raise _Refused(f"gutter row {y} after an unguttered command row")
                wrapped.append(text[start + len(shape.command_gutter) :].strip())
                continue
            if wrapped:
                raise _Refused(f"row {y} after a guttered command is not guttered")
            command.append(text.strip())
        if fence is not None and fences != 2:
            raise _Refused("the command fence is not closed")
        if wrapped:
            return " ".join(wrapped), self.advisory_rows(advisory)
        return "\n".join(command), self.advisory_rows(advisory)

    def advisory_cell(self, y: int, start: int) -> bool:
        """True when row `y`, its text starting at column `start`, is drawn as an advisory.

        In the advisory colour, or muted for a whole hint row (`advisory_hints`).
        """
        shape = self.p.permission
        cell = self.cells[y][start]
        if start != shape.advisory_col or cell.bold:
            return False
        if cell.fg == shape.menu.muted_fg:
            text = self.texts[y].strip()
            return any(hint.fullmatch(text) for hint in shape.advisory_hints)
        return cell.fg == shape.advisory_fg

    def advisory_rows(self, rows: Sequence[tuple[str, bool]]) -> list[str]:
        """`rows` cut into whole advisories (the longest known one first); refused otherwise.

        A hint row (muted) is read by the hint patterns only, any other by the advisories.
        """
        shape = self.p.permission
        found: list[str] = []
        start = 0
        while start < len(rows):
            hint = rows[start][1]
            patterns = shape.advisory_hints if hint else shape.advisories
            end = next(
                (
                    end
                    for end in range(len(rows), start, -1)
                    if all(row[1] == hint for row in rows[start:end])
                    and any(p.fullmatch(" ".join(t for t, _ in rows[start:end])) for p in patterns)
                ),
                None,
            )
            if end is None:
                raise _Refused("unknown advisory row under the command")
            found.append(" ".join(text for text, _ in rows[start:end]))
            start = end
        return found

    def menu_rows(
        self, first: int, last: int, menu: MenuShape, *, boxes: bool, description: int | None
    ) -> list[_Row]:
        """Rows first..last-1 as numbered menu rows with wrapped labels and descriptions."""
        rows: list[_Row] = []
        above = (first, 0)  # the row and start column of the text a wrapped row would continue
        for y in range(first, last):
            row = self.menu_row(y, menu, boxes=boxes)
            if row is not None:
                rows.append(row)
                above = (y, row.label_col)
                continue
            if not rows or self.blank(y):
                raise _Refused(f"unexpected row {y} in a menu")
            previous = rows[-1]
            start = self.indent(y)
            cell = self.cells[y][start]
            text = self.texts[y].strip()
            join = (*above, y, start)
            if description is not None and start == description and cell.fg == menu.muted_fg:
                joined = f"{previous.description} {text}" if previous.description else text
                joins = (*previous.joins, join) if previous.description else previous.joins
                rows[-1] = attrs.evolve(previous, description=joined, joins=joins)
            elif (
                start == previous.label_col
                and not previous.description
                and cell.fg != menu.muted_fg
            ):
                label = f"{previous.label} {text}"
                rows[-1] = attrs.evolve(previous, label=label, joins=(*previous.joins, join))
            else:
                raise _Refused(f"unexpected row {y} in a menu")
            above = (y, start)
        return rows

    def prove_wraps(self, rows: Sequence[_Row]) -> None:
        """Every row joined to a label or description of `rows` is Claude's wrap of it."""
        for row in rows:
            for join in row.joins:
                self.prove_wrap(*join)

    def prove_wrap(self, above: int, above_start: int, y: int, start: int) -> None:
        """Row `y`'s text (from column `start`) is row `above`'s, soft-wrapped at one space.

        Claude wraps a question, label or description at the pane's edge (`cols - start`
        columns), between words; a word longer than that is cut at the edge. Rows join with a space,
        so the break must be one the wrap made at a space: the next word did not fit on
        the row above, and the two rows' edge words are not one word cut at the edge (CJK
        text, a long path): where both readings are possible the text cannot be read back.
        """
        width = self.grid.cols - start
        upper, lower = self.texts[above].rstrip(" "), self.texts[y].rstrip(" ")
        used = self.columns(above, above_start, len(upper))
        word_end = lower.find(" ", start)
        first_word = self.columns(y, start, len(lower) if word_end < 0 else word_end)
        if used + 1 + first_word <= width:
            raise _Refused(f"row {y} does not wrap row {above}: its first word fits there")
        last_word = self.columns(above, max(above_start, upper.rfind(" ") + 1), len(upper))
        cut = used + self.columns(y, start, start + 1) > width
        if cut and last_word + first_word > width:
            raise _Refused(f"row {y} may go on with a word cut at the edge of row {above}")

    def columns(self, y: int, start: int, stop: int) -> int:
        """How many columns the characters start..stop-1 of row `y`'s text take."""
        if stop <= start:
            return 0
        at = self.grid.row_columns(y)
        return at[stop - 1] + self.cells[y][at[stop - 1]].width - at[start]

    # -- questionnaire

    def tab_row(self, y: int) -> tuple[tuple[str, ...], int]:
        """The tab headers of row `y` and the index of the current (highlighted) tab."""
        shape = self.p.questionnaire
        text = self.texts[y].rstrip()
        columns = self.grid.row_columns(y)
        left, right = shape.tab_arrows
        inner_start = 0
        if text.startswith(left):
            if not text.endswith(right):
                raise _Refused(f"tab row {y} is cut off")
            inner_start = len(left)
            text = text[: -len(right)]
        glyphs = [i for i in range(inner_start, len(text)) if text[i] in shape.tab_glyphs]
        if not glyphs or text[inner_start : glyphs[0]].strip():
            raise _Refused(f"row {y} is not a tab row")
        tabs: list[str] = []
        current: list[int] = []
        for index, at in enumerate(glyphs):
            end = glyphs[index + 1] if index + 1 < len(glyphs) else len(text)
            name = text[at + 1 : end].strip()
            if text[at + 1 : at + 2] != " " or not name:
                raise _Refused(f"malformed tab in row {y}")
            tabs.append(name)
            if self.cells[y][columns[at]].bg == shape.tab_bg:
                current.append(index)
        if len(current) != 1:
            raise _Refused(f"tab row {y} has {len(current)} current tabs")
        if inner_start and tabs[-1] != shape.submit_tab:
            raise _Refused(f"tab row {y} does not end with the Submit tab")
        return tuple(tabs), current[0]

    def question_frame(self, start: int) -> tuple[int, tuple[str, ...], int]:
        """Top rule above `start`, the tabs under it and the current tab index."""
        top = self.top_rule(start, self.p.questionnaire.rule_fg)
        if top + 2 > start:
            raise _Refused("questionnaire frame truncated")
        tabs, current = self.tab_row(top + 1)
        self.expect_blank(top + 2, "under the tab row")
        return top, tabs, current

    def questionnaire_prompt(self, footer: int) -> Observation:
        shape = self.p.questionnaire
        menu = shape.menu
        self.expect_blank(footer - 1, "above the questionnaire footer")
        chat = self.menu_row(footer - 2, menu, boxes=False)
        if chat is None or chat.label != shape.chat:
            raise _Refused(f"row {footer - 2} is not the '{shape.chat}' row")
        lower = footer - 3
        if lower < 0 or not self.rule(lower, self.p.composer.rule, shape.rule_fg):
            raise _Refused(f"row {lower} is not the rule above '{shape.chat}'")
        top, tabs, tab = self.question_frame(lower - 1)
        if tabs[tab] == shape.submit_tab:
            raise _Refused("the Submit tab is current but the review is not shown")
        self.single_prompt(top, self.all_anchors())
        y = top + 3
        # A longer question is drawn under a dim gutter, every row of it.
        start = len(shape.question_gutter) if self.question_gutter(y) else 0
        question: list[str] = []
        while y < lower and not self.blank(y):
            cell = self.cells[y][start]
            if not (cell.bold and cell.fg == shape.question_fg):
                raise _Refused(f"unexpected row {y} in the question")
            if bool(start) != self.question_gutter(y):
                raise _Refused(f"row {y} of the question is drawn apart from its gutter")
            if question:
                self.prove_wrap(y - 1, start, y, start)
            question.append(self.texts[y][start:].strip())
            y += 1
        if not question:
            raise _Refused("questionnaire shows no question")
        self.expect_blank(y, "under the question")
        first_option = y + 1
        multi = self.menu_row(first_option, menu, boxes=True) is not None
        end = lower
        submit: _Row | None = None
        if multi:
            end = lower - 1
            submit = self.multi_submit_row(end)
        indent = shape.multi_description_indent if multi else shape.single_description_indent
        rows = self.menu_rows(first_option, end, menu, boxes=multi, description=indent)
        return self.questionnaire_observation(
            top, footer, tabs, tab, " ".join(question), rows, submit, chat
        )

    def question_gutter(self, y: int) -> bool:
        """Whether row `y` starts with the question's dim gutter."""
        gutter = self.p.questionnaire.question_gutter
        return self.texts[y].startswith(gutter) and self.cells[y][0].dim

    def multi_submit_row(self, y: int) -> _Row:
        shape = self.p.questionnaire
        menu = shape.menu
        row = self.cells[y]
        text = self.texts[y]
        cursor = row[menu.cursor_col]
        current = cursor.char == menu.cursor and cursor.fg == menu.highlight_fg
        if not current and cursor.char != " ":
            raise _Refused(f"row {y} is not the multi-select Submit row")
        col = shape.multi_submit_indent
        if (
            text[menu.cursor_col + 1 : col].strip()
            or text[col:].rstrip() != shape.multi_submit
            or not row[col].bold
        ):
            raise _Refused(f"row {y} is not the multi-select Submit row")
        return _Row(
            y=y,
            number=None,
            label=shape.multi_submit,
            label_col=col,
            current=current,
            highlighted=current,
        )

    def questionnaire_observation(
        self,
        top: int,
        footer: int,
        tabs: tuple[str, ...],
        tab: int,
        question: str,
        rows: list[_Row],
        submit: _Row | None,
        chat: _Row,
    ) -> Observation:
        shape = self.p.questionnaire
        multi = submit is not None
        if len(rows) < 2:
            raise _Refused("questionnaire shows no options")
        *choices, free = rows
        self.prove_numbers([*rows, chat])
        free_label = shape.free_text_multi if multi else shape.free_text_single
        self.prove_free_text_row(free, free_label)
        # An open editor's rows wrap its own way: `editor_matches` proves them.
        self.prove_wraps(choices)
        self.prove_readable(
            [question, *tabs, *(text for row in choices for text in (row.label, row.description))]
        )
        options = [_view(row, OptionRole.CHOICE) for row in choices]
        options.append(
            OptionView(
                label=free_label,
                role=OptionRole.FREE_TEXT,
                number=free.number,
                current=free.current,
                checked=free.checked,
            )
        )
        if submit is not None:
            options.append(_view(submit, OptionRole.SUBMIT))
        options.append(_view(chat, OptionRole.CHAT))
        self.prove_cursor([*rows, *([submit] if submit is not None else []), chat], exempt=free)
        if multi:
            # A multi-select question's editor is one of its boxes: Enter there ticks or
            # unticks the typed text and answers nothing (lab), so the step stays
            # multi-select wherever the cursor is.
            kind, step = ResponseKind.MULTI_SELECT, StepKind.MULTI_SELECT
        elif free.current:
            kind, step = ResponseKind.FREE_TEXT, StepKind.FREE_TEXT
            self.editor = self.open_editor(free, chat.y - 1)
        else:
            kind, step = ResponseKind.SINGLE_SELECT, StepKind.SINGLE_SELECT
        view = QuestionView(
            prompt=question, response_kind=kind, options=tuple(options), header=tabs[tab]
        )
        prompt = PromptView(
            kind=InteractionKind.QUESTIONNAIRE,
            step=step,
            questions=(view,),
            region=Region(top=top, bottom=footer + 1, left=0, right=self.grid.cols),
            step_index=tab + 1,
            step_total=len(tabs),
            tabs=tabs,
        )
        return self.result(State.QUESTIONNAIRE, prompt)

    def prove_readable(self, texts: Sequence[str]) -> None:
        """None of `texts` holds a character that may stand for another (`unreadable`)."""
        if any(self.p.questionnaire.unreadable.search(text) for text in texts):
            raise _Refused(
                "the question holds a character the screen may not show as sent (an emoji's "
                "variation selector, a replaced character): its text cannot be read back"
            )

    def open_editor(self, free: _Row, end: int) -> DraftView:
        """The open editor's text: rows free.y..end-1 from the row's label column on.

        It wraps like the composer, its soft-wrapped rows under its first
        character. The empty editor shows its placeholder dim with the cursor on
        the first character: never complete, so it matches no text.
        """
        col = free.label_col
        cells = [
            (y - free.y, x - col, self.cells[y][x])
            for y in range(free.y, end)
            for x in range(col, self.grid.cols)
        ]
        cursors = [(row, x) for row, x, cell in cells if cell.reverse]
        placeholder = any(cell.dim and cell.char.strip() for _, _, cell in cells)
        return DraftView(
            rows=tuple(self.texts[y][col:].rstrip(" ") for y in range(free.y, end)),
            width=self.grid.cols - col - self.p.questionnaire.editor_wrap_margin,
            pane_rows=self.grid.rows,
            cursor=cursors[0] if len(cursors) == 1 else None,
            complete=len(cursors) <= 1 and not placeholder,
        )

    def prove_free_text_row(self, row: _Row, label: str) -> None:
        """The last numbered option must be the automatic free-text row.

        Away from the cursor it reads exactly `label`; under the cursor it is an
        editor showing either its placeholder or the text typed so far (which
        stays inside the region, so it is part of the fingerprint).
        """
        if row.description or (not row.current and row.label != label):
            raise _Refused(f"row {row.y} is not the '{label}' row")

    def prove_numbers(self, rows: Sequence[_Row]) -> None:
        """Menu numbers run 1, 2, 3… top to bottom, none repeated or skipped."""
        if [row.number for row in rows] != list(range(1, len(rows) + 1)):
            raise _Refused("option numbers are duplicated or out of order")

    def prove_cursor(self, rows: Sequence[_Row], exempt: _Row | None) -> None:
        """Exactly one row carries the cursor, and only it is in the highlight colour.

        `exempt` (an open editor) carries the cursor without the highlight.
        """
        current = [row for row in rows if row.current]
        if len(current) != 1:
            raise _Refused(f"{len(current)} menu rows carry the cursor")
        if any(row.highlighted for row in rows if not row.current):
            raise _Refused("a row away from the cursor is highlighted")
        if current[0] is not exempt and not current[0].highlighted:
            raise _Refused("the cursor row is not highlighted")

    # -- review

    def review_prompt(self, bottom: int) -> Observation | None:
        shape = self.p.questionnaire
        menu = shape.menu
        y = bottom
        while y >= 0 and self.menu_row(y, menu, boxes=False) is not None:
            y -= 1
        if y < 1 or not self.blank(y):
            return None
        rows = self.menu_rows(y + 1, bottom + 1, menu, boxes=False, description=None)
        if [row.label for row in rows] != [shape.review_submit, shape.review_cancel]:
            return None
        self.prove_wraps(rows)
        answers_end = y
        if shape.review_prompt is not None:
            if self.texts[y - 1].rstrip() != shape.review_prompt:
                raise _Refused(f"row {y - 1} is not the review question")
            answers_end = y - 2
            self.expect_blank(answers_end, "above the review question")
        top, tabs, tab = self.question_frame(answers_end - 1)
        if tabs[tab] != shape.submit_tab or tab != len(tabs) - 1:
            raise _Refused("review shown but the Submit tab is not current")
        self.single_prompt(top, self.all_anchors())
        title = top + 3
        if self.texts[title].rstrip() != shape.review_title or not self.cells[title][0].bold:
            raise _Refused(f"row {title} is not the review title")
        self.expect_blank(title + 1, "under the review title")
        self.review_answers(title + 2, answers_end)
        self.prove_numbers(rows)
        options = (_view(rows[0], OptionRole.SUBMIT), _view(rows[1], OptionRole.CANCEL))
        self.prove_cursor(rows, exempt=None)
        view = QuestionView(
            prompt=shape.review_title, response_kind=ResponseKind.CONFIRM, options=options
        )
        prompt = PromptView(
            kind=InteractionKind.CONFIRMATION,
            step=StepKind.REVIEW,
            questions=(view,),
            region=Region(top=top, bottom=bottom + 1, left=0, right=self.grid.cols),
            step_index=tab + 1,
            step_total=len(tabs),
            tabs=tabs,
        )
        return self.result(State.QUESTIONNAIRE, prompt)

    def review_answers(self, first: int, last: int) -> None:
        """Rows first..last-1 must be ``● question`` / ``→ answer`` pairs (wrapped or not)."""
        shape = self.p.questionnaire
        if first >= last:
            raise _Refused("review lists no answers")
        for y in range(first, last):
            text = self.texts[y].strip()
            start = self.indent(y)
            marked = text.startswith(
                (shape.review_question_mark + " ", shape.review_answer_mark + " ")
            )
            if not marked and (y == first or start < 3 or not text):
                raise _Refused(f"unexpected row {y} in the review")


@functools.cache
def _variants(profile: ClaudeProfile) -> tuple[ClaudeProfile, ...]:
    """`profile` once per theme, themes drawing the same colours read once."""
    variants: dict[ClaudeProfile, ClaudeProfile] = {}
    for theme in profile.themes:
        variant = profile.themed(theme)
        variants.setdefault(attrs.evolve(variant, themes=()), variant)
    return tuple(variants.values())


class _Fixed(_Classifier):
    """A reading refused before any shape is read (the themes disagree)."""

    def __init__(self, profile: ClaudeProfile, grid: Grid, reason: str) -> None:
        super().__init__(profile, grid)
        self.reason = reason

    def observe(self) -> Observation:
        return self.unknown(self.reason)


def _view(row: _Row, role: OptionRole) -> OptionView:
    return OptionView(
        label=row.label,
        role=role,
        number=row.number,
        description=row.description,
        current=row.current,
        checked=row.checked,
    )


# ---------------------------------------------------------------- the pinned versions

_QUESTIONNAIRE = InteractionKind.QUESTIONNAIRE
_ENTER = Press("Enter")
_LAB = "tests/lab/test_claude_plans.py"  # drives every plan on 2.1.263, 2.1.266, 2.1.267, 2.1.328
# Text typed right after the Down that opens the editor is lost on 2.1.263 (2 of 3
# short texts, 5 of 6 longer than 800 characters; none after 150 or 300 ms): the
# guard lets the editor take focus first.
_EDITOR_OPENS = EnterGuard(0.3)
_FREE_TEXT_STEPS = (MoveToRole(OptionRole.FREE_TEXT), _EDITOR_OPENS, TypeText(), _ENTER)
_FREE_TEXT_EVIDENCE = (
    f"{_LAB} test_free_text_from_the_options, test_free_text_of_3000_characters, "
    "test_free_text_into_the_open_editor: Down onto 'Type something.' opens the editor; text "
    "typed 0.3 s later shows there as typed (799, 800 and 3,000 characters, both quotes, é, "
    "日本, an emoji, shell metacharacters, a leading '/' or '!'; never a paste placeholder), "
    "editor_matches proves it, and Enter sends exactly that text once: 'The user answered: "
    '"<question>"="<text>". ...\''
)
_KEY_PLANS = KeyPlans(
    (
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.CHOOSE),
            (PressChosenNumber(),),
            evidence=(
                f"{_LAB} test_single_select_choice, test_three_questions_then_submit: the "
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
                f"{_LAB} test_multi_select_then_submit (1, 2 and all 4 options): Enter ticks "
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
                f"{_LAB} test_multi_select_then_submit, test_three_questions_then_submit: '1' "
                "on 'Review your answers' submits; every answer reaches the model once"
            ),
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(InteractionKind.PERMISSION, StepKind.PERMISSION, Intent.APPROVE_ONCE),
            (PressRoleNumber(OptionRole.APPROVE_ONCE),),
            evidence=(
                f"{_LAB} test_bash_approve_once_runs_it: '1' ('Yes') runs the command once, "
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

# What the composer of every pinned version (2.1.263 to 2.1.332) does with text instead of
# typing it (tests/lab/test_hostile_input.py; docs/input.md). A leading '#' is plain text
# on every one of them (no memory mode), so it is typed.
_SPECIALS = (
    Special(r"^!", "shell mode (the rest would run as a shell command)"),
    Special(r"^/", "the command menu (Enter would run the highlighted command)"),
    Special(r"(?:^|\s)@", "a file and agent mention popup over the composer"),
    Special(r"^\?", "the shortcuts help (a '?' alone in an empty composer is eaten)"),
    Special(r"\\$", "a line break: backslash then Enter is a newline, not a submit"),
)
_TYPING = Typing(
    wrapping=Wrapping.WRAP_ANSI,
    literal_max_length=800,
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
    length_unit=LengthUnit.CODEPOINTS,
    specials=(),
    viewport=None,
    evidence=(
        "tests/lab/test_claude_plans.py (all four versions): send-keys -l of 799, 800 and "
        "3,000 characters shows every character in the editor, never '[Pasted text #N]', and "
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
