"""The Codex notes editor on captured screens: `editor_matches` proves exactly the typed text.

Every screen was captured from the real pinned client with the text its label
names typed into the notes with ``send-keys -l`` (`expected.typed`). The
screens whose notes fill several rows live in ``fixtures/codex/<version>/notes/``
(out of the prompt corpus that tests/test_profile_codex.py mutates: a dropped
middle row of a note reads as a shorter note). What the lab showed:

- the notes wrap at the pane width less 7 and show at most 6 rows, the last
  ones, with no mark; 799 and 800 characters at 120 columns need 8 rows;
- more than 1000 characters typed at once become ``[Pasted Content N chars]``;
- a note belongs to the row under the cursor (on ``Red`` it answers Red).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from akk.profiles.codex import PROFILES, CodexProfile
from akk.profiles.observation import Observation, OptionRole, PromptView, StepKind
from akk.screen import Cell, Grid
from tests import corpus

VERSIONS = [profile.version for profile in PROFILES]
BY_VERSION = {profile.version: profile for profile in PROFILES}
PROVEN = [
    "codex_notes-special",  # quotes, $HOME, `x`, ; | & > *, accents, CJK, an emoji
    "codex_notes-full_row",  # its last row fills the notes: an empty row follows
    "notes/codex_notes_long-rows5",
    "codex_rui_notes-notes_typed",
    "80x24/codex_rui_notes-notes_typed",
]
NOT_WHOLE = [
    "notes/codex_notes_long-rows6",  # as many rows as the notes show: more may be above
    "notes/codex_notes_long-chars799",  # eight rows, the last six shown
    "notes/codex_notes_long-chars800",
    "codex_notes-chars1001",  # [Pasted Content 1001 chars]
]


@attrs.frozen
class Screen:
    profile: CodexProfile
    label: dict[str, Any]
    grid: Grid
    observation: Observation

    @property
    def prompt(self) -> PromptView:
        observation = self.observation
        assert observation.actionable and observation.prompt is not None, observation.reason
        return observation.prompt

    @property
    def text(self) -> str:
        """The exact text typed into the notes."""
        typed = self.label["expected"].get("typed")
        if typed is not None:
            text: str = typed["text"]
            return text
        (question,) = self.label["expected"]["questions"]
        text = question["typed_text"]
        return text


def screen(version: str, name: str) -> Screen:
    path = corpus.ROOT / "codex" / version / f"{name}.json"
    label, grid = corpus.screen(path)
    return Screen(BY_VERSION[version], label, grid, corpus.observed(path)[1])


def near_misses(text: str) -> dict[str, str]:
    """Texts a screen of `text` must not prove."""
    middle = len(text) // 2
    changed = text[:middle] + ("b" if text[middle] == "a" else "a") + text[middle + 1 :]
    return {
        "one character": changed,
        "one more": text + "s",
        "trailing space": text + " ",
        "last word missing": text.rsplit(" ", 1)[0],
        "first word missing": text.split(" ", 1)[1],
    }


@pytest.mark.parametrize("name", PROVEN)
@pytest.mark.parametrize("version", VERSIONS)
def test_the_notes_prove_exactly_their_text(version: str, name: str) -> None:
    shown = screen(version, name)
    prompt = shown.prompt
    assert prompt.step is StepKind.FREE_TEXT
    assert shown.profile.editor_matches(shown.grid, prompt, shown.text)
    for what, other in near_misses(shown.text).items():
        assert not shown.profile.editor_matches(shown.grid, prompt, other), what


@pytest.mark.parametrize("name", NOT_WHOLE)
@pytest.mark.parametrize("version", VERSIONS)
def test_notes_that_may_not_be_whole_prove_nothing(version: str, name: str) -> None:
    shown = screen(version, name)
    prompt = shown.prompt  # a proven notes editor: it is the text that cannot be read whole
    assert prompt.step is StepKind.FREE_TEXT
    assert not shown.profile.editor_matches(shown.grid, prompt, shown.text)


@pytest.mark.parametrize("version", VERSIONS)
def test_notes_on_another_row_prove_nothing(version: str) -> None:
    shown = screen(version, "codex_notes_red-typed")  # would answer "Red" plus the note
    (current,) = [o for o in shown.prompt.questions[0].options if o.current]
    assert current.role is OptionRole.CHOICE and current.label == "Red"
    assert not shown.profile.editor_matches(shown.grid, shown.prompt, shown.text)


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_notes_and_other_steps_prove_nothing(version: str) -> None:
    empty = screen(version, "codex_rui_notes-notes_empty")
    for text in ("Add notes", "Something in between"):
        assert not empty.profile.editor_matches(empty.grid, empty.prompt, text)
    question = screen(version, "codex_rui_one-q1")  # no notes open
    assert question.prompt.step is StepKind.SINGLE_SELECT
    assert not question.profile.editor_matches(question.grid, question.prompt, "Red")


@pytest.mark.parametrize("version", VERSIONS)
def test_only_the_prompt_read_from_that_very_screen(version: str) -> None:
    special, full_row = (
        screen(version, "codex_notes-special"),
        screen(version, "codex_notes-full_row"),
    )
    profile = special.profile
    assert not profile.editor_matches(special.grid, full_row.prompt, special.text)
    moved = attrs.evolve(special.prompt, region=attrs.evolve(special.prompt.region, top=0))
    assert not profile.editor_matches(special.grid, moved, special.text)
    other = next(p for p in PROFILES if p.highlight != profile.highlight)
    assert not other.editor_matches(special.grid, special.prompt, special.text)


def _shifted_up(grid: Grid, rows: int) -> Grid:
    """The screen scrolled up by `rows` (blank rows come in at the bottom)."""
    blank = tuple(Cell() for _ in range(grid.cols))
    kept = [grid.row(y) for y in range(rows, grid.rows)] + [blank] * rows
    return Grid(grid.cols, grid.rows, cells=tuple(kept))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_prompt_filling_the_pane_proves_nothing(version: str) -> None:
    """At its tallest the prompt starts at `full_pane_top` and the notes may be clipped."""
    shown = screen(version, "codex_notes-special")
    profile, top = shown.profile, shown.prompt.region.top
    for start, proven in ((profile.full_pane_top + 1, True), (profile.full_pane_top, False)):
        grid = _shifted_up(shown.grid, top - start)
        observation = profile.classify(grid)
        assert observation.prompt is not None and observation.prompt.region.top == start
        assert profile.editor_matches(grid, observation.prompt, shown.text) is proven


@pytest.mark.parametrize("version", VERSIONS)
def test_free_text_max_chars(version: str) -> None:
    """Over 1000 typed characters collapse into a placeholder (or, at 3000, are lost)."""
    profile = BY_VERSION[version]
    assert profile.free_text_max_chars == 1000
    shown = screen(version, "codex_notes-special")
    assert not profile.editor_matches(shown.grid, shown.prompt, "x" * 1001)


@pytest.mark.parametrize("version", VERSIONS)
def test_text_no_screen_can_show_is_never_proven(version: str) -> None:
    shown = screen(version, "codex_notes-special")
    profile, prompt = shown.profile, shown.prompt
    for text in ("", " " + shown.text, shown.text + "\t", "/model", "[Pasted Content 5 chars]"):
        assert not profile.editor_matches(shown.grid, prompt, text), repr(text)


@pytest.mark.parametrize("version", VERSIONS)
def test_only_closed_or_empty_notes_take_an_answer(version: str) -> None:
    """Text in the notes (a person's) would be typed after: `editor_taken` says so, and the
    answer is refused before a key; as it is on notes of another row ("Red" + the note)."""
    taken = {}
    for name in (
        "codex_rui_one-q1",
        "codex_rui_notes-notes_empty",
        "codex_rui_notes-notes_typed",
        "codex_notes_red-typed",
    ):
        shown = screen(version, name)
        taken[name] = shown.profile.editor_taken(shown.grid, shown.prompt)
    assert taken == {
        "codex_rui_one-q1": None,
        "codex_rui_notes-notes_empty": None,
        "codex_rui_notes-notes_typed": "notes hold text typed there",
        "codex_notes_red-typed": "notes hold text typed there",
    }
