"""The Codex profile: one pinned version's data (`CodexProfile`) and what it answers.

A `CodexProfile` holds every anchor, footer, row shape, style and key plan a
version draws and takes; the rows themselves are data in
`akk.profiles.codex.versions`, and the screens are read by
`akk.profiles.codex.classify`.

What the pinned versions draw on a fresh session (fixtures/codex/<version>/,
120x40 and 80x24; also 100x30, 132x43 and 200x50, and inline with
``--no-alt-screen``): 0.153.4-0.155.1 draw a boxed header (``>_ OpenAI Codex
(vX)``) and a ``Tip:`` line at every size, and no logo (none up to 250x80).
0.169.0 and 0.171.0 draw an unboxed header, no tip, and under it a static dim
braille logo (17 rows at 80-200 columns) when the pane has at least 32 rows
(120x31: none, 120x32: shown; 40x40: none); a turn scrolls it away. Nothing
reads it: it sits above the composer, where no anchor matches (fixtures at
120x40, 132x43 and 200x50 hold it; 80x24 and 100x30 do not). Inline
(``--no-alt-screen``, offered by every pinned version; the ``codex_inline_*``
fixtures): the same rows drawn from the top of the normal screen, blank rows
under the footer until the history fills the pane, then the history scrolls
into the pane's scrollback. 0.169.0 and 0.171.0 show a ``Tip:`` line there and
never the logo.
"""

from __future__ import annotations

import re

import attrs

from akk.profiles.codex.classify import observe
from akk.profiles.codex.menu import Highlight, MenuShape
from akk.profiles.codex.picker import AsyncShape
from akk.profiles.codex.reader import Footer, Reader
from akk.profiles.codex.status import ModeIndicator, Notice, PersonRows
from akk.profiles.composer import DraftView, Typing, TypingMethod, draft_matches, draft_refusal
from akk.profiles.keyplan import KeyPlans
from akk.profiles.observation import (
    Observation,
    OptionRole,
    PromptView,
    State,
    Unproven,
)
from akk.screen.grid import Grid
from akk.text_rule import Special, TextRefusal


@attrs.frozen
class Blocker:
    """A screen AKK must leave to a person: its anchor text, the footer under it, why."""

    name: str
    anchor: str
    footer: str
    reason: str


@attrs.frozen(kw_only=True)
class CodexProfile:
    """One pinned Codex version: exact anchors, footers, row shapes, styles and key plans."""

    version: str
    agent: str = attrs.field(default="codex", init=False)
    # Shared by every menu.
    cursor: str
    highlight: Highlight
    # Composer and working markers.
    composer_glyph: str
    composer_margin: int  # the draft wraps at the pane width less this (indent and right pad)
    placeholder_fg: str  # a paste placeholder is an element drawn in this colour
    status_fg: str
    status_max_rows: int  # a status line too long for the pane wraps over this many rows at most
    status_hints: tuple[str, ...]  # a hint row under the status row starts with one of these
    hint_notices: tuple[Notice, ...]  # drawn at the right end of the hint row (warnings)
    mode_indicator: ModeIndicator | None  # drawn on the hint row (None: on the status row)
    bare_footer: tuple[str, ...]  # with no status line (`[tui] status_line = []`): the one
    # row under the composer is one of these, then `context_left`
    context_left: Notice
    person_rows: PersonRows  # the composer's last row while a person is at it
    # A draft taller than the pane scrolls the composer to the pane's end, over its footer,
    # with this mark (dim) in the right margin of its first row (None: the footer stays).
    scrolled_mark: str | None
    working_marker: str
    in_progress_verbs: tuple[str, ...]
    # Exec approval.
    permission_anchor: str
    permission_paragraphs: tuple[str, ...]
    command_prefix: str
    command_margin: int  # a wrapped command's rows end at least this many columns from the edge
    permission_menu: MenuShape
    permission_menu_gap: int  # blank rows between the command and the options
    permission_roles: tuple[tuple[str, OptionRole], ...]
    permission_footer: Footer
    # request_user_input.
    question_header: re.Pattern[str]
    question_prompt_fg: str
    prompt_fill_blank: bool  # an empty row follows a prompt row the text fills exactly
    answered_prompt_fg: str  # the prompt of a question answered earlier (visited again)
    question_menu: MenuShape
    question_footers: tuple[Footer, ...]
    notes_footer: Footer
    notes_margin: int  # the notes wrap at the pane width less this (indent and right pad)
    notes_max_rows: int  # the notes show this many rows at most, the last ones in view
    full_pane_top: int  # a prompt starting at this row or higher fills the pane (clipped)
    none_of_the_above: str
    # The unanswered-question confirmation.
    unanswered_anchor: str
    unanswered_count: re.Pattern[str]
    unanswered_roles: tuple[tuple[str, OptionRole], ...]
    unanswered_footer: Footer
    # Turn ends and async questions (None where the version draws none).
    banner: str  # the session header, shown until the first turn scrolls it away
    user_glyph: str  # a sent message in the history: glyph bold and dim
    turn_end: re.Pattern[str] | None  # dim line closing a finished turn
    interrupted: str  # the line closing an interrupted turn (Esc, a rejected command)
    interrupted_fg: str
    failed: str  # the line closing a turn the model API failed (its error), in `failed_fg`
    failed_fg: str
    async_question: AsyncShape | None
    blockers: tuple[Blocker, ...]
    key_plans: KeyPlans
    typing: Typing
    notes_specials: tuple[Special, ...]  # what the notes editor does with text instead of typing it
    permission_tool: str = "exec_command"  # the call an exec approval asks about (rollout)
    # Patch approval: the exec approval's menu and footer under this anchor, with a
    # description and, a row each under it, every file the patch writes (every pinned
    # version, 0.153.4 to 0.171.0).
    patch_anchor: str = "Would you like to make the following edits?"
    patch_paragraphs: tuple[str, ...] = ("Description: ",)
    destination_prefix: str = "Destination: "
    patch_tool: str = "apply_patch"  # the call a patch approval asks about (rollout)
    question_tool: str = "request_user_input"  # the call a question asks (rollout)
    reviews_answers: bool = False  # no review step: the last answer submits the call
    # What the id says after the version: empty for a pinned row, " (qualified from
    # 0.171.0)" for a pinned row read as a qualified version (akk.profiles.qualified).
    id_note: str = ""

    @property
    def id(self) -> str:
        """Stable profile id, part of every fingerprint."""
        return f"codex@{self.version}{self.id_note}"

    @property
    def approval_anchors(self) -> tuple[str, str]:
        """The anchors of an exec approval and of a patch approval."""
        return (self.permission_anchor, self.patch_anchor)

    @property
    def enter_guard_seconds(self) -> float:
        """How long typed text must have shown in the composer before its one Enter."""
        return self.typing.enter_guard_seconds

    def classify(self, grid: Grid) -> Observation:
        """The one Observation this screen shows under this version's profile."""
        try:
            return observe(Reader(self, grid))
        except Unproven as unproven:
            return Observation(State.UNKNOWN, self.id, reason=unproven.reason)

    @property
    def free_text_max_chars(self) -> int:
        """Longest notes text `editor_matches` can prove: more typed at once collapses or is lost.

        A bound, not a promise: the notes show at most `notes_max_rows` - 1
        provable rows of the pane width less `notes_margin` (about 560
        characters at 120 columns), and `editor_matches` decides per screen.
        """
        return self.typing.literal_max_length

    def editor_refusal(self, text: str, grid: Grid, prompt: PromptView) -> TextRefusal | None:
        """Why `text` typed into the notes on `grid` could never be proven: the composer's
        reasons at the notes' width, or as many rows as the notes show."""
        width = grid.cols - self.notes_margin
        return draft_refusal(
            self.editor_typing, text, width, grid.rows, shown_rows=self.notes_max_rows
        )

    def editor_taken(self, grid: Grid, prompt: PromptView) -> str | None:
        """Why `prompt`'s notes on `grid` cannot take a free-text answer now: they are open
        and hold text (a person's, or an earlier answer left unproven), so the answer's keys
        would add to it; or they are open on another option than ``None of the above``,
        whose note the answer would become. None: closed, or empty on that row."""
        reader = Reader(self, grid)
        try:
            observe(reader)
        except Unproven:
            return None  # the answer's own plan and proof refuse such a screen
        notes = reader.notes
        if notes is None:
            return None
        if not notes.empty:
            return "notes hold text typed there"
        current = [option.role for option in prompt.questions[0].options if option.current]
        if current != [OptionRole.NONE_OF_THE_ABOVE]:
            return "notes are open on another option than 'None of the above'"
        return None

    def draft_matches(self, draft: DraftView, text: str, how: TypingMethod) -> bool:
        """Whether `draft` shows exactly `text`, typed `how`, as this version renders it."""
        return draft_matches(self.typing, draft, text, how)

    def next_turn_message(self, question: str, label: str) -> str | None:
        """The user message an async answer given at an idle composer starts a turn with.

        The picker sends the question quoted, a blank line and the option
        (NOTES.md: ``> Which color do you prefer?\n\nBlue``); None for a version
        without async questions.
        """
        if self.async_question is None:
            return None
        return "> " + question.replace("\n", "\n> ") + "\n\n" + label

    def editor_matches(self, grid: Grid, prompt: PromptView, text: str) -> bool:
        """Whether `prompt`'s open notes show exactly `text`, typed with ``send-keys -l``.

        Only notes on the ``None of the above`` row are a free-text answer (on
        another row they would send that option too). False unless `grid`
        classifies to exactly `prompt`, and whenever the notes may not be whole
        on screen: as many rows as the editor shows at most (earlier ones may be
        scrolled away), a prompt filling the pane (clipped), a placeholder, or
        the dim empty-notes hint.
        """
        reader = Reader(self, grid)
        try:
            observation = observe(reader)
        except Unproven:
            return False
        notes = reader.notes
        if observation.prompt != prompt or not observation.actionable or notes is None:
            return False
        current = [option.role for option in prompt.questions[0].options if option.current]
        if current != [OptionRole.NONE_OF_THE_ABOVE] or prompt.region.top <= self.full_pane_top:
            return False
        return draft_matches(self.editor_typing, notes, text, TypingMethod.LITERAL)

    @property
    def editor_typing(self) -> Typing:
        """The notes editor's typing: the composer's, with the notes' own specials."""
        return attrs.evolve(self.typing, specials=self.notes_specials)
