"""What a restarted TerminalActor's Observer makes of the screen it finds.

Its first look continues the store's last appearance on the terminal when the
screen still shows that very prompt (its owner was woken for it, and an answer
to it stays fenced), and a screen waiting for a person that has not changed.
An appearance the store records gone is never continued: the prompt was seen to
leave, so the same drawing now was drawn again, a new appearance to wake for.
Captured Claude 2.1.332 screens, through a stand-in for tmux, on a real store.
"""

from __future__ import annotations

from pathlib import Path

import trio

from akk.store.interactions import InteractionState
from tests import corpus
from tests.captured_pane import VERSION, across_a_restart

QUESTION = "questionnaire_single2-q1"
WRITE = "claude_overwrite-permission"
"""A permission to write over a file that exists, with no agent's file here to bind it to a
call: AKK leaves it to a person (a manual screen)."""


def _screen(name: str) -> list[str]:
    return (corpus.ROOT / "claude" / VERSION / f"{name}.ansi").read_text().splitlines()


async def test_a_prompt_or_a_screen_left_to_a_person_still_on_show_is_the_one_woken_for(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        for name in (QUESTION, WRITE):
            before, after = await across_a_restart(
                tmp_path / f"{name}.db", _screen(name), _screen(name)
            )
            assert after.interaction_id == before.interaction_id, name


async def test_a_prompt_the_store_saw_leave_is_a_new_appearance_though_drawn_the_same(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        for name in (QUESTION, WRITE):
            before, after = await across_a_restart(
                tmp_path / f"{name}.db", _screen(name), _screen(name), InteractionState.GONE
            )
            assert after.interaction_id != before.interaction_id, name


async def test_a_screen_left_to_a_person_is_named_by_the_drawing_it_settled_on(
    tmp_path: Path,
) -> None:
    """Its first frame was caught half done (the file write's options not drawn yet): the
    owner was woken for the drawing that settled, and a restart finds that one."""
    full = _screen(WRITE)
    half = [*full[:-5], *[""] * 5]
    with trio.fail_after(20):
        before, after = await across_a_restart(tmp_path / "akk.db", full, full, first=half)
    assert after.interaction_id == before.interaction_id


async def test_a_restart_whose_first_capture_is_caught_half_done_continues_the_screen(
    tmp_path: Path,
) -> None:
    """The restarted Observer's first capture catches the file write half redrawn: it is
    taken again until two captures agree, so the screen its owner was woken for is
    continued, not woken for a second time."""
    full = _screen(WRITE)
    half = [*full[:-5], *[""] * 5]
    with trio.fail_after(20):
        before, after = await across_a_restart(tmp_path / "akk.db", full, full, restarted_on=half)
    assert after.interaction_id == before.interaction_id
