"""`akk status`'s lines for what an agent asks, from projections AKK makes of real screens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from akk.cli.classify import classify_capture
from akk.cli.status_text import excerpt_lines, interaction_lines
from akk.protocol import wakeups
from akk.protocol.projection import as_manual
from akk.screen.fingerprint import Appearance

_FIXTURES = Path(__file__).parent.parent / "fixtures"


def _projection(agent: str, version: str, name: str) -> dict[str, Any]:
    """The projection AKK makes of the 120x40 fixture screen ``name`` of that client."""
    capture = (_FIXTURES / agent / version / f"{name}.ansi").read_text()
    shown = classify_capture(
        capture, agent=agent, version=version, cols=120, rows=40, private=False
    )
    projection: dict[str, Any] = shown["projection"]
    return projection


def test_a_questionnaire_shows_its_step_question_and_options_without_ids() -> None:
    questionnaire = _projection("claude", "2.1.332", "questionnaire_multi_question-q1")
    lines = interaction_lines(questionnaire)
    assert lines == [
        "asks:     a questionnaire (step 1 of 4)",
        "          Color: Which color do you prefer?",
        "            - Red",
        "            - Blue",
        "            - Green",
    ]
    assert not any("_" in line for line in lines)  # no option_id, question_id or int_


def test_a_queued_question_is_named_with_its_article_and_as_not_opened() -> None:
    queued = _projection("codex", "0.155.1", "codex_rui_async-queued")
    assert interaction_lines(queued) == [
        "asks:     an async question, not opened yet (its questions show once it is)"
    ]


def test_a_manual_screen_says_where_a_person_is_needed_and_why() -> None:
    manual = wakeups.Manual(
        Appearance(b"f" * 32, 0), "blocked: non-Bash permission (Create file) is left to a "
        "person", "Do you want to create notes.txt?", True, b"s", 0.0,
    )  # fmt: skip
    projection = wakeups.project(
        manual, interaction_id="int_x", agent="claude", turn_id=None, terminal_id="term_1",
        pane="%3",
    )  # fmt: skip
    assert interaction_lines(projection) == [
        "asks:     a permission that needs a person at pane %3",
        "          blocked: non-Bash permission (Create file) is left to a person",
        "          Do you want to create notes.txt?",
    ]
    assert interaction_lines(None) == []


def test_a_prompt_made_manual_off_any_pane_says_why_without_a_pane() -> None:
    questionnaire = _projection("claude", "2.1.332", "questionnaire_multi_question-q1")
    manual = as_manual(questionnaire, "secret_input: the question asks for a password")
    assert interaction_lines(manual) == [
        "asks:     a questionnaire that needs a person",
        "          secret_input: the question asks for a password",
    ]


def test_a_withheld_excerpt_says_so_and_shows_nothing() -> None:
    withheld = {"screen_excerpt": None, "screen_excerpt_withheld": "secret_input"}
    assert excerpt_lines(withheld) == [
        "screen:   withheld (secret_input): it asks for input that is never shown"
    ]
    assert excerpt_lines({"screen_excerpt": ["> ", "? for shortcuts"]}) == [
        "screen:   (its last lines, redacted)", "          > ", "          ? for shortcuts",
    ]  # fmt: skip
