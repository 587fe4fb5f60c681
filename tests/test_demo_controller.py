"""The reference controller's policy: what it approves, what it picks, and the ids it sends."""

from __future__ import annotations

from typing import Any

import pytest

from tools.demo.controller import Decision, call_for, command_is_safe, policy

SAFE = [
    "ls",
    "ls -la",
    "cat card.txt",
    "cat notes/today.md",
    "echo hello",
    "echo hi>out.txt",
    "echo 'Bonjour from AKK' > card.txt && cat card.txt",
]
UNSAFE = [
    "",
    "ls &&",
    "rm -rf build",
    "lsof",
    "cat /etc/passwd",
    "cat ../secret.txt",
    "cat .env",
    "cat ~/.ssh/id_ed25519",
    "cat a > b",
    "ls; rm -rf build",
    "ls && rm -rf build",
    "ls & rm -rf build",
    "echo hi | tee card.txt",
    "echo $(whoami)",
    "echo `id`",
    "echo hi > /tmp/card.txt",
    "echo hi > ../card.txt",
    "echo hi > .bashrc",
    "echo hi >> card.txt",
    "echo 'unterminated",
    "echo hi\nrm -rf build",
]


@pytest.mark.parametrize("command", SAFE)
def test_safe_commands_are_approved(command: str) -> None:
    assert command_is_safe(command)
    assert policy(permission(command)) == Decision(permission="approve_once")


@pytest.mark.parametrize("command", UNSAFE)
def test_everything_else_is_rejected(command: str) -> None:
    assert not command_is_safe(command)
    assert policy(permission(command)) == Decision(permission="reject")


def test_a_decision_the_prompt_does_not_offer_is_left_to_the_person() -> None:
    assert policy(permission("rm -rf build", decisions=["approve_once"])) is None
    assert policy(permission("ls", decisions=["reject"])) is None


def test_questions_are_answered_by_label_and_sent_by_id() -> None:
    shown = questionnaire(
        question("q_lang", "Which language should the greeting be in?", "English", "French"),
        question("q_extra", "Which extras should the card have?", "Emoji", "Date", "Border"),
    )
    decision = policy(shown)
    assert decision == Decision(labels={"q_lang": ("French",), "q_extra": ("Emoji", "Date")})
    method, params = call_for(shown, decision)
    assert method == "respond_interaction"
    assert params == {
        "interaction_id": "int_1",
        "turn_id": "turn_1",
        "answers": [
            {
                "question_id": "q_lang",
                "response_kind": "single_select",
                "selected_option_ids": ["q_lang-French"],
            },
            {
                "question_id": "q_extra",
                "response_kind": "single_select",
                "selected_option_ids": ["q_extra-Emoji", "q_extra-Date"],
            },
        ],
    }


def test_a_review_is_submitted_by_its_submit_role_whatever_its_label() -> None:
    review = question("q_review", "Review your answers", "Send them", "Cancel")
    review["response_kind"] = "confirm"
    review["options"][0]["role"] = "submit"
    review["options"][1]["role"] = "cancel"
    decision = policy(questionnaire(review))
    assert decision == Decision(labels={"q_review": ("Send them",)})


def test_unknown_questions_missing_labels_and_manual_prompts_are_left_to_the_person() -> None:
    assert policy(questionnaire(question("q", "Which database?", "Postgres"))) is None
    french_missing = question("q", "Which language should the greeting be in?", "English")
    assert policy(questionnaire(french_missing)) is None
    manual = questionnaire(question("q", "Which language should the greeting be in?", "French"))
    manual["state"] = "manual_required"
    assert policy(manual) is None


def test_an_approval_is_sent_as_the_decision_itself() -> None:
    shown = permission("ls")
    decision = policy(shown)
    assert decision is not None
    assert call_for(shown, decision) == (
        "approve",
        {"turn_id": "turn_1", "decision": "approve_once"},
    )


def permission(command: str, decisions: list[str] | None = None) -> dict[str, Any]:
    shown = questionnaire(question("q_perm", "Do you want to proceed?", "Yes", "No"))
    shown["kind"] = "permission"
    shown["questions"][0]["detail"] = command
    shown["decisions"] = ["approve_once", "reject"] if decisions is None else decisions
    return shown


def questionnaire(*questions: dict[str, Any]) -> dict[str, Any]:
    return {
        "interaction_id": "int_1",
        "turn_id": "turn_1",
        "kind": "questionnaire",
        "state": "pending",
        "questions": list(questions),
    }


def question(question_id: str, prompt: str, *labels: str) -> dict[str, Any]:
    return {
        "question_id": question_id,
        "prompt": prompt,
        "header": "",
        "response_kind": "single_select",
        "options": [{"option_id": f"{question_id}-{label}", "label": label} for label in labels],
    }
