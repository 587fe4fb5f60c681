"""On real tmux: `keys.detour` names every state in which tmux would not give a pane's
application the keys as they are spelled, and a pane that takes them has none.

The states were each seen to turn AKK's keys into something else: a mode
(copy-mode, a chooser) takes them (a digit chooses a person's paste buffer, Enter
pastes it); ``synchronize-panes`` copies them to the window's other panes; input
turned off drops them. `capture-pane` shows none of it: it reads the application's
screen under the mode.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import attrs
import pytest
import trio

from akk.tmux import keys, open_control_client


@attrs.frozen
class _Window:
    """A private tmux server with one window of two panes, each running ``cat``."""

    socket: str
    pane: str
    other: str

    def tmux(self, *args: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, *args], check=True, capture_output=True)


@pytest.fixture
def window() -> Iterator[_Window]:
    root = tempfile.mkdtemp(prefix="akk-detour-", dir="/tmp")
    socket = os.path.join(root, "s.sock")

    def pane(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", socket, *args, "-P", "-F", "#{pane_id}", "cat"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip

    try:
        first = pane("-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24")
        yield _Window(socket, first, pane("split-window", "-t", first))
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


async def _detour(window: _Window, pane: str | None = None) -> keys.Detour | None:
    with trio.fail_after(10):
        async with open_control_client(window.socket) as client:
            return await keys.detour(client, pane or window.pane)


async def test_a_pane_that_takes_keys_has_no_detour(window: _Window) -> None:
    assert await _detour(window) is None


async def test_synchronized_panes_are_a_lasting_detour(window: _Window) -> None:
    window.tmux("set-window-option", "-t", window.pane, "synchronize-panes", "on")
    found = await _detour(window)
    assert found is not None and found.lasting
    assert "synchronize-panes" in found.why and "synchronize-panes off" in found.next_step


async def test_input_turned_off_is_a_lasting_detour(window: _Window) -> None:
    window.tmux("select-pane", "-d", "-t", window.pane)
    found = await _detour(window)
    assert found is not None and found.lasting and "select-pane -e" in found.next_step
    assert await _detour(window, window.other) is None  # the setting is the pane's own


async def test_copy_mode_is_a_passing_detour_until_the_person_leaves_it(window: _Window) -> None:
    window.tmux("copy-mode", "-t", window.pane)
    found = await _detour(window)
    assert found is not None and not found.lasting and "copy-mode" in found.why
    window.tmux("send-keys", "-t", window.pane, "-X", "cancel")
    assert await _detour(window) is None


async def test_a_pane_tmux_cannot_be_asked_about_is_a_detour(window: _Window) -> None:
    found = await _detour(window, "%999")  # tmux 3.3a prints the format empty for it
    assert found is not None and "%999" in found.why and not found.lasting
