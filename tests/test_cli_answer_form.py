"""`akk answer`'s reading of what a person types, against projections AKK made of real
screens: the call carries that projection's own ids, and a reply that names no choice is
asked again, never guessed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from akk.cli.answer_form import TRIES, Call, Unanswered, read_call
from akk.cli.status_text import interaction_lines
from tests.test_cli_status_text import _projection


class _Person:
    """Types ``replies`` one per question asked, then ends the input; keeps what it was told."""

    def __init__(self, *replies: str) -> None:
        self._replies: Iterator[str] = iter(replies)
        self.asked: list[str] = []
        self.told: list[str] = []

    def ask(self, prompt: str) -> str | None:
        self.asked.append(prompt)
        return next(self._replies, None)

    def say(self, line: str) -> None:
        self.told.append(line)


def _read(projection: dict[str, Any], *replies: str, settled: bool = False) -> Call:
    person = _Person(*replies)
    return read_call(projection, person.ask, person.say, settled=settled)


def _ids(projection: dict[str, Any], *labels: str) -> list[str]:
    (question,) = projection["questions"]
    by_label = {option["label"]: option["option_id"] for option in question["options"]}
    return [by_label[label] for label in labels]


@pytest.fixture
def permission() -> dict[str, Any]:
    return _projection("claude", "2.1.332", "claude_bash-permission") | {"turn_id": "turn_1"}


def test_a_permission_shows_what_it_runs_and_takes_a_decision_by_number_or_name(
    permission: dict[str, Any],
) -> None:
    assert interaction_lines(permission, numbered=True) == [
        "asks:     a permission",
        "          Bash command: Do you want to proceed?",
        "            > touch lab-bash-ran.txt && echo lab-bash-ran",
        "            - Yes",
        "            - No",
        "          decisions:",
        "            1. approve_once",
        "            2. reject",
    ]
    replies = {"1": "approve_once", "reject": "reject", "APPROVE_ONCE": "approve_once"}
    for reply, decision in replies.items():
        call = _read(permission, reply)
        assert call == Call("approve", {"turn_id": "turn_1", "decision": decision})


def test_a_reply_that_names_no_choice_is_asked_again_then_given_up(
    permission: dict[str, Any],
) -> None:
    person = _Person("3", "yes please", "1")
    call = read_call(permission, person.ask, person.say, settled=False)
    assert call.params["decision"] == "approve_once" and len(person.asked) == 3
    assert person.told == ["choose a number from 1 to 2, each once"] * 2
    with pytest.raises(Unanswered, match="no choice"):
        _read(permission, *["0"] * TRIES, "1")  # the reply after the last try is never read
    with pytest.raises(Unanswered, match="input ended"):
        _read(permission)


def test_a_multi_select_takes_several_numbers_each_once() -> None:
    multi = _projection("claude", "2.1.332", "questionnaire_multi-q1")
    call = _read(multi, "", "1,1", "1, 3")  # empty, then a repeat: asked again each time
    assert call == Call(
        "respond_interaction",
        {
            "interaction_id": multi["interaction_id"],
            "turn_id": None,
            "answers": [
                {
                    "question_id": multi["questions"][0]["question_id"],
                    "response_kind": "multi_select",
                    "selected_option_ids": _ids(multi, "Red", "Green"),
                }
            ],
        },
    )


def test_a_row_that_takes_the_persons_text_asks_for_it() -> None:
    notes = _projection("codex", "0.171.0", "codex_rui_notes-none_of_the_above")
    lines = interaction_lines(notes, numbered=True)
    assert "            4. None of the above (then your own text)" in lines
    person = _Person("None of the above", "", "Purple, please")
    call = read_call(notes, person.ask, person.say, settled=False)
    (question,) = notes["questions"]
    assert call.params["answers"] == [
        {"question_id": question["question_id"], "response_kind": "free_text",
         "text": "Purple, please"}
    ]  # fmt: skip
    assert person.told == ["this question needs an answer"]
    assert "your text for “None of the above”" in person.asked[-1]


def test_the_review_is_confirmed_by_its_option() -> None:
    review = _projection("claude", "2.1.332", "questionnaire_multi_question-review")
    (answer,) = _read(review, "1").params["answers"]
    assert answer["response_kind"] == "confirm"
    assert answer["selected_option_ids"] == _ids(review, "Submit answers")


def test_a_queued_question_is_opened_only_when_the_person_says_so() -> None:
    queued = _projection("codex", "0.155.1", "codex_rui_async-queued")
    running = _read(queued, "y")
    assert running.params["answers"] == [] and "delivery_mode" not in running.params
    # Once the Turn's round is over, the answer starts its next one.
    assert _read(queued, "yes", settled=True).params["delivery_mode"] == "queue_next_turn"
    with pytest.raises(Unanswered, match="stays queued"):
        _read(queued, "n")


def test_an_optional_text_question_left_empty_is_left_out() -> None:
    free = {
        "interaction_id": "int_1", "turn_id": "turn_1", "kind": "questionnaire",
        "step": {"index": 1, "total": 1},
        "questions": [
            {"question_id": "q_1", "prompt": "Anything else?", "required": False,
             "response_kind": "free_text", "options": []},
            {"question_id": "q_2", "prompt": "Your name?", "response_kind": "free_text",
             "options": []},
        ],
    }  # fmt: skip
    call = _read(free, "", "Ada")
    assert call.params["answers"] == [
        {"question_id": "q_2", "response_kind": "free_text", "text": "Ada"}
    ]


def test_a_row_the_options_leave_out_takes_the_persons_own_text() -> None:
    """Claude's "Type something." is not an option (no id), yet the question takes text."""
    color = _projection("claude", "2.1.332", "questionnaire_multi_question-q1")
    assert interaction_lines(color, numbered=True)[-1] == "            4. (your own text)"
    assert "(your own text)" not in "\n".join(interaction_lines(color))  # status lists options
    person = _Person("4", "Teal")
    call = read_call(color, person.ask, person.say, settled=False)
    (question,) = color["questions"]
    assert call.params["answers"] == [
        {"question_id": question["question_id"], "response_kind": "free_text", "text": "Teal"}
    ]
    assert person.asked[-1] == "Color: your own text: "
