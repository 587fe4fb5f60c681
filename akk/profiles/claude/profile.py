"""The Claude Code profile: one pinned version's data (`ClaudeProfile`) and what it answers.

A `ClaudeProfile` holds every shape a version draws (composer, questionnaire,
permission), its first-run `Blocker`s, its key plans, its typing and its
themes; the rows themselves are data in `akk.profiles.claude.versions`, and the
screens are read by `akk.profiles.claude.classify`. Themes (every one `/theme`
offers: `dark`, `dark-daltonized`, `light`, `light-daltonized`, `light-ansi`,
`dark-ansi`) draw the same screens in other colours: each row lists its
`Theme`s, each mapping the `dark` colours it changes to exactly one colour of
its own, and a screen is read in each of them.
"""

from __future__ import annotations

import attrs

from akk.profiles.claude.classify import read
from akk.profiles.claude.composer import ComposerShape
from akk.profiles.claude.menu import MenuShape
from akk.profiles.claude.permission import PermissionShape
from akk.profiles.claude.questionnaire import QuestionnaireShape
from akk.profiles.composer import DraftView, Typing, TypingMethod, draft_matches, render
from akk.profiles.keyplan import KeyPlans
from akk.profiles.observation import InteractionKind, Observation, PromptView
from akk.screen.grid import Grid
from akk.text_rule import TextRefusal

AGENT = "claude"
EDITOR_MARGIN = 6
"""Columns of the pane an open editor's text never takes: the cursor glyph, a one-digit
option number, its dot and a space, then one column for the text cursor (every pinned
version, every captured editor; a two-digit number takes one more)."""


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
    question_tool: str = "AskUserQuestion"  # the call a questionnaire asks (transcript)
    # A call of several questions, or a multi-select one, ends on a review of its answers.
    reviews_answers: bool = True
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
        """How long typed text must have shown in the composer before its one Enter."""
        return self.typing.enter_guard_seconds

    def classify(self, grid: Grid) -> Observation:
        """The one Observation this screen shows under this version's data."""
        return read(self, grid).observation

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
        characters and a prompt taller than the pane is never proven
        (`editor_refusal` refuses it before a key; about 2,800 characters fit
        at 120x40 under a three-option question, about 600 at 80x24).
        """
        return self.editor.literal_max_length

    def editor_refusal(self, text: str, grid: Grid, prompt: PromptView) -> TextRefusal | None:
        """Why `text` typed into `prompt`'s "Type something." editor on `grid` could never be
        proven: the question would grow taller than the pane, and Claude cuts off its top.

        The editor takes a row per row its text wraps to, and the rest of the question
        keeps its height (lab: 15 rows under three options at every width, 3,000
        characters fill 27 rows at 120 columns). The text is wrapped at the widest the
        editor is (`EDITOR_MARGIN`), so its rows are never more than Claude draws, and
        only a question surely cut off is refused; the proof decides the rest.
        """
        if prompt.kind is not InteractionKind.QUESTIONNAIRE:
            return None
        editor = read(self, grid).editor  # None: the cursor is not in it, one row shows
        shown = 1 if editor is None else max(1, len(editor.rows))  # the placeholder: one row
        rest = prompt.region.bottom - prompt.region.top - shown
        width = grid.cols - EDITOR_MARGIN
        rendered = render(self.editor.wrapping, text, width)
        if rendered is None or rest + len(rendered[0]) <= grid.rows:
            return None
        return TextRefusal(
            f"would make the question {rest + len(rendered[0])} rows tall in a pane of "
            f"{grid.rows}: Claude cuts off its top, so AKK could never prove the answer",
            f"shorten it (the editor shows {grid.rows - rest} rows of {width} columns here), "
            "make the pane taller, or type it at the pane yourself",
        )

    def editor_taken(self, grid: Grid, prompt: PromptView) -> str | None:
        """Why `prompt`'s "Type something." editor on `grid` cannot take an answer now: it is
        open and not proven empty (a person's text, or an earlier answer left unproven), so
        the answer's keys would add to what it holds. None: empty, or not open (a closed
        editor that holds text reads no question at all)."""
        editor = read(self, grid).editor
        if editor is None or editor.empty:
            return None
        return "editor holds text typed there"

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
        reading = read(self, grid)
        observation, editor = reading.observation, reading.editor
        if observation.prompt != prompt or not observation.actionable or editor is None:
            return False
        return draft_matches(self.editor, editor, text, TypingMethod.LITERAL)
