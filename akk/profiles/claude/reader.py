"""One Claude Code screen under one profile: its rows and the checks every shape shares.

A `Reader` lives for a single classification. The shape modules (composer,
permission, questionnaire, review) take it and raise `Unproven` where a row
is not of a kind their shape allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from akk.profiles.composer import DraftView
from akk.profiles.observation import Observation, PromptView, State, Unproven
from akk.screen.grid import Grid

if TYPE_CHECKING:
    from akk.profiles.claude.profile import ClaudeProfile


class Reader:
    """Reads one grid under one profile (one theme's colours); lives for a single classify()."""

    def __init__(self, profile: ClaudeProfile, grid: Grid) -> None:
        self.p = profile
        self.grid = grid
        self.cells = [grid.row(y) for y in range(grid.rows)]
        self.texts = grid.lines()
        # The open free-text editor, set by the questionnaire once it proved it.
        self.editor: DraftView | None = None

    def blank(self, y: int) -> bool:
        return not self.texts[y].strip()

    def blank_before(self, y: int, x: int) -> bool:
        return not self.texts[y][:x].strip()

    def expect_blank(self, y: int, what: str) -> None:
        if not self.blank(y):
            raise Unproven(f"unexpected row {y}: expected a blank row {what}")

    def rule(self, y: int, glyph: str, fg: str | None = None) -> bool:
        """Whether row `y` is one full-width rule of `glyph` (in colour `fg` if given)."""
        row = self.cells[y]
        return self.texts[y] == glyph * self.grid.cols and (fg is None or row[0].fg == fg)

    def question_gutter(self, y: int, x: int) -> bool:
        """Whether row `y` shows, from column `x` (spaces before it), the dim gutter Claude
        draws down a long question's rows, on its step and in its review."""
        text, gutter = self.texts[y], self.p.questionnaire.question_gutter
        return text.startswith(" " * x + gutter) and self.cells[y][x].dim

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

    def top_rule(self, start: int, fg: str) -> int:
        """The nearest full-width ``─`` rule at or above `start`: the prompt's top edge."""
        glyph = self.p.composer.rule
        for y in range(start, -1, -1):
            if self.rule(y, glyph):
                if self.cells[y][0].fg != fg:
                    raise Unproven(f"rule at row {y} is not this prompt's frame")
                return y
        raise Unproven("prompt frame truncated: no top rule on screen")

    def single_prompt(self, top: int) -> None:
        """Refuse when a prompt's anchor shows above row `top` (a prompt or the composer)."""
        permission, questionnaire = self.p.permission, self.p.questionnaire
        anchors = (
            (permission.footer_col, permission.footer),
            (0, questionnaire.footer_prefix),
            (0, questionnaire.review_title),
        )
        for y in range(top):
            text = self.texts[y]
            for col, anchor in anchors:
                if text[col:].startswith(anchor) and self.blank_before(y, col):
                    raise Unproven(f"two prompts on screen (another at row {y})")
