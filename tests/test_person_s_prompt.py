"""A prompt a person must answer stays one appearance while they answer it.

The Observer reads captured Claude 2.1.332 screens of one question through a
stand-in for tmux: the cursor on its first option, then in its editor, then
with text typed there. As an ordinary question each drawing is a new appearance
(ids change whenever the prompt does, and an answer is fenced on the drawing it
was offered for). With the question asking for a secret, the same drawings are
one appearance with one interaction id: the person moving the cursor and typing
is answering it, and PROTOCOL wakes its owner once per appearance. A frame caught
mid-draw between two drawings (no profile reads it) does not end it, unless it stays
for `SETTLE_SECONDS`. Once the prompt leaves for a screen read whole, its next showing
is a new one.

The agent's file is a stand-in too: its one pending AskUserQuestion call asks the
question the screen shows, in the scenario's words (binding a question to its call
is `tests/test_question_calls.py`'s).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from akk.actors.terminal_board import project_snapshot
from akk.backends.terminal import observer as observer_module
from akk.backends.terminal.observer import Observer
from akk.evidence import PendingCall
from akk.protocol.wakeups import SETTLE_SECONDS
from akk.qualify.scenarios import SCENARIOS, AskUserQuestion
from akk.screen.fingerprint import Appearance, IdMinter
from tests import corpus
from tests.captured_pane import VERSION, CapturedPane, across_a_restart, observing, store_actor
from tests.test_question_calls import asked_of, pending_question

FOLDER = corpus.ROOT / "claude" / VERSION
ANSWERING = ("q1", "free_text_empty", "free_text_typed")
"""The drawings of one question as a person answers it: cursor on Red, in the editor,
text typed there."""
ASKED = "Which color do you prefer?"
SECRET_ASKS = ("Enter your API key:", "Enter your password:")
IDS = IdMinter(b"k" * 32)


def _call(asks: str) -> PendingCall:
    """The pending call of the scenario's question, asking ``asks`` instead."""
    (step, *_) = SCENARIOS["questionnaire_single2"].steps
    assert isinstance(step.reply, AskUserQuestion)
    (question,) = step.reply.questions
    return pending_question("claude", (asked_of(attrs.evolve(question, question=asks)),))


def _pending(monkeypatch: pytest.MonkeyPatch, asks: Callable[[], str]) -> None:
    """The agent's file, from now on: one pending call, asking what ``asks()`` says."""

    async def open_calls(*_: object) -> list[PendingCall]:
        return [_call(asks())]

    monkeypatch.setattr(observer_module, "open_calls", open_calls)


def _screen(name: str, asks: str = ASKED) -> list[str]:
    lines = (FOLDER / f"{name}.ansi").read_text().splitlines()
    return [line.replace(ASKED, asks) for line in lines]


def _mid_draw(lines: list[str]) -> list[str]:
    """``lines`` caught while drawn: the bottom half not yet (no profile reads it)."""
    return lines[: len(lines) // 2] + [""] * (len(lines) - len(lines) // 2)


def _asked_on(pane: CapturedPane) -> str:
    """Which of this module's questions ``pane`` shows."""
    return next((w for w in SECRET_ASKS if any(w in row for row in pane.screen)), ASKED)


@asynccontextmanager
async def _observer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Observer, CapturedPane]]:
    """An Observer of a pane whose agent's file asks the question the pane shows."""
    async with store_actor(tmp_path / "akk.sqlite3") as store:
        screen, pane = observing(store)
        _pending(monkeypatch, lambda: _asked_on(pane))
        yield screen, pane


async def _shown(screen: Observer, pane: CapturedPane, lines: list[str]) -> tuple[Appearance, str]:
    """The appearance of the prompt ``lines`` show, and the manual reason it is shown with."""
    pane.screen = lines
    snapshot = await screen.observe()
    assert snapshot is not None and snapshot.seen is not None
    shown = project_snapshot(snapshot, IDS, None)
    assert shown is not None
    return snapshot.seen, shown.projection.get("manual_reason", "")


async def test_a_question_answered_at_the_terminal_is_a_new_appearance_at_each_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(20):
        async with _observer(tmp_path, monkeypatch) as (screen, pane):
            seen = [await _shown(screen, pane, _screen(f"questionnaire_single2-{step}"))
                    for step in ANSWERING]  # fmt: skip
    # Typed into, it is the person's (editor_in_use): an answer would be typed after.
    assert [reason for _, reason in seen] == ["", "", "editor_in_use"]
    assert len({appearance for appearance, _ in seen}) == 3


async def test_a_secret_question_is_one_appearance_while_the_person_answers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asks = "Enter your API key:"
    with trio.fail_after(20):
        async with _observer(tmp_path, monkeypatch) as (screen, pane):
            seen = [await _shown(screen, pane, _screen(f"questionnaire_single2-{step}", asks))
                    for step in ANSWERING]  # fmt: skip
            # The person moved the cursor and typed: one appearance, one wake-up.
            assert [reason for _, reason in seen] == ["secret_input"] * 3
            assert len({appearance for appearance, _ in seen}) == 1
            pane.screen = _screen("echo-idle")
            idle = await screen.observe()
            assert idle is not None and idle.seen is None
            again, _ = await _shown(screen, pane, _screen("questionnaire_single2-q1", asks))
            assert again != seen[0][0]  # asked again after it left: a new appearance
            # Another question with the same drawing of the editor is another appearance.
            other, reason = await _shown(
                screen, pane, _screen("questionnaire_single2-q1", "Enter your password:")
            )
            assert reason == "secret_input" and other != again


async def test_a_frame_caught_mid_draw_does_not_end_a_person_s_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asks = "Enter your API key:"
    with trio.fail_after(20):
        async with _observer(tmp_path, monkeypatch) as (screen, pane):
            first, _ = await _shown(screen, pane, _screen("questionnaire_single2-q1", asks))
            pane.screen = _mid_draw(_screen("questionnaire_single2-free_text_empty", asks))
            passing = await screen.observe()
            assert passing is not None and passing.seen is None
            assert passing.manual is not None and passing.manual.passing(trio.current_time())
            typed = _screen("questionnaire_single2-free_text_typed", asks)
            again, reason = await _shown(screen, pane, typed)
            assert (again, reason) == (first, "secret_input")
            # A frame no profile reads that stays: the prompt left, and is asked anew.
            pane.screen = _mid_draw(typed)
            await screen.observe()
            await trio.sleep(SETTLE_SECONDS)
            anew, _ = await _shown(screen, pane, typed)
            assert anew != first
            # An idle screen between: asked anew, however quickly.
            pane.screen = _screen("echo-idle")
            await screen.observe()
            assert (await _shown(screen, pane, typed))[0] != anew


async def test_a_question_a_controller_may_answer_is_new_after_a_frame_caught_mid_draw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer is fenced on the drawing it was offered for: no id survives a redraw."""
    with trio.fail_after(20):
        async with _observer(tmp_path, monkeypatch) as (screen, pane):
            first, _ = await _shown(screen, pane, _screen("questionnaire_single2-q1"))
            pane.screen = _mid_draw(_screen("questionnaire_single2-q1"))
            await screen.observe()
            assert (await _shown(screen, pane, _screen("questionnaire_single2-q1")))[0] != first


async def test_a_question_a_person_types_into_is_one_appearance_while_they_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    typed = _screen("questionnaire_single2-free_text_typed")
    shorter = [line.replace("Teal, please", "Teal, pleas") for line in typed]
    assert shorter != typed
    with trio.fail_after(20):
        async with _observer(tmp_path, monkeypatch) as (screen, pane):
            seen = [await _shown(screen, pane, lines) for lines in (shorter, typed)]
            assert [reason for _, reason in seen] == ["editor_in_use"] * 2
            assert seen[0][0] == seen[1][0]
            # Cleared, it is answerable again: a new appearance.
            empty, reason = await _shown(
                screen, pane, _screen("questionnaire_single2-free_text_empty")
            )
            assert reason == "" and empty != seen[0][0]


async def test_a_person_s_prompt_redrawn_before_a_restart_is_resumed_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store keeps the appearance as its owner was woken for it; the restarted actor
    first reads it redrawn (the person typed meanwhile): the same appearance, and id."""
    asks = "Enter your API key:"
    _pending(monkeypatch, lambda: asks)
    with trio.fail_after(20):
        first, again = await across_a_restart(
            tmp_path / "akk.sqlite3",
            _screen("questionnaire_single2-q1", asks),
            _screen("questionnaire_single2-free_text_typed", asks),
        )
    assert (again.seen, again.projection["manual_reason"]) == (first.seen, "secret_input")
