"""Which messages in a Turn's records are a person's, sent at the pane while it ran.

The captured steered Turns (fixtures/evidence/*/*/steered.jsonl, tests/test_evidence.py)
prove the count on every pinned client; these records vary what those do not show: an
answer to the agent's own async question, a second message, and the client's own queued
notices.
"""

from __future__ import annotations

from typing import Any

from akk.evidence import claude, codex
from akk.evidence.model import Record

TURN = "turn-1"
QUESTION = "Which color do you prefer?"


def _codex_item(item: dict[str, Any], turn_id: str = TURN) -> dict[str, Any]:
    return {
        "type": "event_msg",
        "payload": {"type": "item_completed", "turn_id": turn_id, "item": item},
    }


def _codex_user(text: str, turn_id: str = TURN) -> dict[str, Any]:
    return _codex_item(
        {"type": "UserMessage", "content": [{"type": "text", "text": text}]}, turn_id
    )


def _records(*data: dict[str, Any]) -> list[Record]:
    return [Record(offset, line) for offset, line in enumerate(data)]


def test_codex_counts_steered_messages_but_not_answers_to_its_own_question() -> None:
    asked = {"type": "AgentMessage", "delivery": "async", "questions": [{"title": QUESTION}]}
    records = _records(
        _codex_user("lab: the task"),
        _codex_item(asked),
        _codex_user(f"> {QUESTION}\n\nBlue"),  # the answer, by AKK or the person
        _codex_user("lab: and keep it short"),
        _codex_user("lab: and in French"),
        _codex_user("lab: another turn's", turn_id="turn-2"),
        {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": TURN}},
        _codex_user("lab: after the end"),
    )
    assert codex.progress(records, 0, None).person_messages == 2


def test_codex_counts_a_quoted_message_no_question_asked() -> None:
    records = _records(_codex_user("lab: the task"), _codex_user(f"> {QUESTION}\n\nBlue"))
    assert codex.progress(records, 0, None).person_messages == 1


def _claude_queued(uuid: str, parent: str, **attachment: object) -> dict[str, Any]:
    return {
        "type": "attachment",
        "uuid": uuid,
        "parentUuid": parent,
        "attachment": {"type": "queued_command", "prompt": "lab: mine"} | attachment,
    }


def test_claude_counts_the_person_s_queued_prompts_only() -> None:
    prompt = {
        "type": "user",
        "uuid": "p",
        "parentUuid": None,
        "message": {"role": "user", "content": "lab: the task"},
    }
    records = _records(
        prompt,
        _claude_queued("a", "p", commandMode="prompt"),  # 2.1.263: no origin
        _claude_queued("b", "a", commandMode="prompt", origin={"kind": "human"}),
        _claude_queued("c", "b", commandMode="task-notification", origin={"kind": "human"}),
        _claude_queued("d", "c", commandMode="prompt", origin={"kind": "task-notification"}),
        _claude_queued("e", "elsewhere", commandMode="prompt"),  # not below the prompt
    )
    assert claude.progress(records, 0).person_messages == 2
