"""The lab's key presses: a press that was read is never repeated, and one read but still
being drawn (a long text on a loaded machine) is waited for, not refused.

`LabSession.press_until` is what `akk qualify`, the capture tool and every lab test type
with. A qualification on a loaded machine refused a pinned Claude because a task was
drawn over more than `DROPPED_KEY_SECONDS` (tests/lab/test_qualify_headless.py,
2026-12-07): the screen had changed, so the press had been read, and the wait gave up
instead of waiting for the rest.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio

from akk.qualify.launcher import DROPPED_KEY_SECONDS, LabSession, ScreenTimeout

TEXT = "lab: ask me a question"


class _Pane:
    """A pane that draws each typed text `per_char` seconds a character, or drops presses
    that come before `reads_from` (as Codex 0.169.0 does before it reads keys)."""

    def __init__(self, per_char: float, reads_from: float = 0.0) -> None:
        self.client = SimpleNamespace(name="fake")
        self.per_char = per_char
        self.reads_from = reads_from
        self.presses = 0
        self.typed_at: float | None = None

    async def press(self) -> None:
        self.presses += 1
        if self.typed_at is None and trio.current_time() >= self.reads_from:
            self.typed_at = trio.current_time()

    async def text(self) -> str:
        if self.typed_at is None:
            return "❯ "
        drawn = int((trio.current_time() - self.typed_at) / self.per_char)
        return "❯ " + TEXT[:drawn]

    async def wait_for_screen(self, predicate, timeout, *, what="the screen"):  # type: ignore[no-untyped-def]
        return await LabSession.wait_for_screen(self, predicate, timeout, what=what)  # type: ignore[arg-type]


async def _press(pane: _Pane, timeout: float = 10.0) -> str:
    return await LabSession.press_until(
        pane,  # type: ignore[arg-type]
        pane.press,
        lambda screen: TEXT in screen,
        timeout,
        what=f"draft {TEXT!r}",
    )


async def test_a_press_drawn_slower_than_the_drop_window_is_waited_for(
    autojump_clock: object,
) -> None:
    pane = _Pane(per_char=3 * DROPPED_KEY_SECONDS / len(TEXT))
    assert TEXT in await _press(pane)
    assert pane.presses == 1


async def test_a_dropped_press_is_pressed_again(autojump_clock: object) -> None:
    pane = _Pane(per_char=0.01, reads_from=1.5 * DROPPED_KEY_SECONDS)
    assert TEXT in await _press(pane)
    assert pane.presses == 3


async def test_a_press_never_drawn_whole_still_fails_at_the_deadline(
    autojump_clock: object,
) -> None:
    pane = _Pane(per_char=1.0)
    with pytest.raises(ScreenTimeout):
        await _press(pane, timeout=5.0)
    assert pane.presses == 1
