"""A stand-in for tmux whose one Claude 2.1.332 pane shows captured screens.

The Observer reads it as it reads a real pane (``capture-pane``), so a test sets
``screen`` to the rows of a fixture (or a changed copy) and observes. `observing`
starts such an Observer on a real store (`store_actor`), as a TerminalActor does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import trio

from akk.actors.store import StoreActor
from akk.actors.terminal_board import TerminalBoard
from akk.backends.terminal.observer import Observer
from akk.discovery.identity import TerminalIdentity
from akk.profiles.registry import PROFILES
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.tmux.control import ClientLink

VERSION = "2.1.332"
PROFILE = PROFILES[("claude", VERSION)]
IDENTITY = TerminalIdentity(
    terminal_id="t1", tmux_socket="s", pane_id="%1", pane_pid=1, agent="claude",
    agent_pid=101, process_start=3, executable="claude", version=VERSION, cwd=None,
    profile=PROFILE.id, profile_reason=None,
)  # fmt: skip


class CapturedPane:
    """A tmux link whose one pane shows ``screen`` (rows as captured, escapes kept)."""

    def __init__(self, screen: list[str] | None = None) -> None:
        self.screen = screen or []

    async def command(self, *args: str) -> list[str]:
        assert args[0] == "capture-pane"
        return self.screen

    def client(self) -> CapturedPane:
        return self


@asynccontextmanager
async def store_actor(db: Path) -> AsyncIterator[ActorRef]:
    """A StoreActor running on the store file ``db``, under a supervisor as in a server."""
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        yield root.ref("store")
        nursery.cancel_scope.cancel()


def observing(
    store: ActorRef, pane: CapturedPane | None = None, size: tuple[int, int] = (120, 40)
) -> tuple[Observer, CapturedPane]:
    """An Observer of ``pane`` (a new one by default) on ``store``, as its TerminalActor
    starts it: announced, of ``size``, nothing looked at yet."""
    pane = pane or CapturedPane()
    screen = Observer(IDENTITY, PROFILE, cast(ClientLink, pane), TerminalBoard(), store)
    screen.announce()
    screen.size = size
    return screen, pane
