"""`akk answer`'s steps around a prompt that moves while a person reads it.

The lab tests (`tests/lab/test_cli_answer.py`) answer real prompts; a prompt that
changes, or an offer that expires, between the person's read and the answer
cannot be timed there. Here the server is a script that says so, and the
command's calls are checked: a changed prompt is shown and asked again, an
expired offer of the same prompt is renewed and used once, and no answer goes
to a prompt the person did not see.
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.cli import answer
from akk.client import AkkError
from tests.test_cli_status_text import _projection


def _permission(interaction_id: str, command: str) -> dict[str, Any]:
    shown = _projection("claude", "2.1.332", "claude_bash-permission")
    (question,) = shown["questions"]
    return shown | {
        "interaction_id": interaction_id,
        "turn_id": "turn_1",
        "questions": [question | {"detail": command}],
    }


@attrs.define
class _Server:
    """Shows ``shown`` in turn to each `status`; answers each answer call with the next of
    ``replies`` (an AkkError reason, or "dispatched")."""

    shown: list[dict[str, Any]]
    replies: list[str]
    calls: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((method, params))
        if method == "status":
            current = self.shown.pop(0) if len(self.shown) > 1 else self.shown[0]
            return {"turn": {"state": "running"}, "interaction": current}
        reason = self.replies.pop(0)
        if reason != "dispatched":
            raise AkkError(-32000, reason, "refused; nothing was sent")
        return {"outcome": "dispatched", "interaction_id": "x", "dispatch_id": "dsp_1"}


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: _Server, typed: str) -> int:
    def session(_state: object, work: Callable[[Any], Awaitable[Any]], **_: object) -> Any:
        return trio.run(work, server)

    monkeypatch.setattr(answer, "operator_session", session)
    monkeypatch.setattr(
        answer, "operator_call", lambda state, method, params: session(
            state, lambda ctl: ctl.call(method, params))
    )  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    return answer.run(argparse.Namespace(state_dir=str(tmp_path), record="turn_1"))


def test_a_prompt_that_changed_before_the_answer_is_shown_and_asked_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _permission("int_1", "ls"), _permission("int_2", "rm -rf build")
    server = _Server([first, second], ["prompt_changed", "dispatched"])
    assert _run(monkeypatch, tmp_path, server, "approve_once\nreject\n") == 0
    printed = capsys.readouterr().out
    assert "the prompt changed before the answer was sent (nothing was sent)" in printed
    assert printed.index("> ls") < printed.index("> rm -rf build")
    answers = [params["decision"] for method, params in server.calls if method == "approve"]
    assert answers == ["approve_once", "reject"]  # the second prompt got its own answer


def test_an_expired_offer_of_the_same_prompt_is_renewed_and_used_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shown = _permission("int_1", "ls")
    server = _Server([shown], ["offer_expired", "dispatched"])
    assert _run(monkeypatch, tmp_path, server, "1\n") == 0
    methods = [method for method, _ in server.calls]
    assert methods == ["status", "approve", "status", "approve"]


def test_an_expired_offer_of_a_prompt_that_changed_is_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first, second = _permission("int_1", "ls"), _permission("int_2", "rm -rf build")
    server = _Server([first, second], ["offer_expired"])
    with pytest.raises(answer.CliError, match="input ended; nothing was sent"):
        _run(monkeypatch, tmp_path, server, "1\n")  # the person typed for the first only
    methods = [method for method, _ in server.calls]
    assert methods == ["status", "approve", "status", "status"]
