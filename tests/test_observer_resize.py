"""A pane a person resized while its TerminalActor was busy with a step.

The watcher's listing brings each new size to the actor, but a step in flight (typing a
task, proving it) holds the actor, so none reaches it until the step ends. A step's
reads are forced, and a forced read takes the pane's size from tmux first: the screen is
read at the size it has now. An unforced read keeps the size last listed, and a capture
that does not fit it is no screen. Captured Claude 2.1.332 screens, through a stand-in
for tmux, on a real store.
"""

from __future__ import annotations

from pathlib import Path

import trio

from akk.profiles.observation import State
from tests import corpus
from tests.captured_pane import VERSION, observing, store_actor


async def test_a_forced_read_takes_the_pane_s_size_now(tmp_path: Path) -> None:
    narrow = (corpus.ROOT / "claude" / VERSION / "80x24" / "echo-idle.ansi").read_text()
    with trio.fail_after(10):
        async with store_actor(tmp_path / "akk.sqlite3") as store:
            screen, pane = observing(store, size=(120, 40))
            pane.screen, pane.size = narrow.splitlines(), (80, 24)
            assert await screen.observe() is None  # 24 rows are no 40-row screen
            assert screen.size == (120, 40)
            snapshot = await screen.observe(force=True)
            assert snapshot is not None and snapshot.observation.state is State.IDLE
            assert screen.size == (80, 24)
