"""A stand-in for tmux whose one Claude 2.1.332 pane shows captured screens.

The Observer reads it as it reads a real pane (``capture-pane``), so a test sets
``screen`` to the rows of a fixture (or a changed copy) and observes. `observing`
starts such an Observer on a real store (`store_actor`), as a TerminalActor does;
`across_a_restart` starts a second one after its owner was woken for the first's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import apsw
import trio

from akk.actors.store import StoreActor, transact
from akk.actors.terminal_board import TerminalBoard, project_snapshot
from akk.backends.terminal.observer import Observer
from akk.discovery.identity import TerminalIdentity
from akk.profiles.registry import PROFILES
from akk.protocol.projection import Shown
from akk.protocol.wakeups import SETTLE_SECONDS
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.fingerprint import IdMinter
from akk.store import interactions, terminals
from akk.store.interactions import InteractionState
from akk.tmux.control import ClientLink

GONE = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
"""A pid no process can have: the agent's and the tmux server's here, both at rest as
`at_rest` reads a process that is gone."""
VERSION = "2.1.332"
PROFILE = PROFILES[("claude", VERSION)]
IDS = IdMinter(b"c" * 32)
IDENTITY = TerminalIdentity(
    terminal_id="t1", tmux_socket="s", pane_id="%1", pane_pid=1, agent="claude",
    agent_pid=GONE, process_start=3, executable="claude", version=VERSION, cwd=None,
    profile=PROFILE.id, profile_reason=None,
)  # fmt: skip


class CapturedPane:
    """A tmux link whose one pane of ``size`` shows ``screen`` (rows as captured, escapes
    kept): it answers ``capture-pane``, and ``display-message`` of the pane's size."""

    def __init__(self, screen: list[str] | None = None, size: tuple[int, int] = (120, 40)) -> None:
        self.screen = screen or []
        self.size = size
        self.server_pid = GONE
        """The pid the tmux server is said to have."""

    async def command(self, *args: str) -> list[str]:
        if args[-1] == "#{pid}":
            return [str(self.server_pid)]
        if args[0] == "display-message":
            return ["{} {}".format(*self.size)]
        assert args[0] == "capture-pane"
        return self.screen

    def client(self) -> CapturedPane:
        return self


class DrawnPane(CapturedPane):
    """A pane whose captures show ``drawings`` in turn, then the last one for good."""

    def __init__(self, *drawings: list[str]) -> None:
        super().__init__(drawings[0])
        self.drawings, self.captures = list(drawings), 0

    async def command(self, *args: str) -> list[str]:
        if args[0] == "capture-pane":
            self.screen = self.drawings[min(self.captures, len(self.drawings) - 1)]
            self.captures += 1
        return await super().command(*args)


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
    pane.size = size
    screen = Observer(IDENTITY, PROFILE, cast(ClientLink, pane), TerminalBoard(), store)
    screen.announce()
    screen.size = size
    return screen, pane


async def shown_settled(screen: Observer, pane: CapturedPane, lines: list[str]) -> Shown:
    """What ``screen`` shows of ``lines`` once they have stayed on ``pane`` for
    `SETTLE_SECONDS` (a manual screen is shown only then; a prompt at once)."""
    pane.screen = lines
    await screen.observe()
    await trio.sleep(SETTLE_SECONDS)
    snapshot = await screen.observe(force=True)
    assert snapshot is not None
    shown = project_snapshot(snapshot, IDS, None)
    assert shown is not None
    return shown


async def across_a_restart(
    db: Path,
    before: list[str],
    after: list[str],
    state: InteractionState = InteractionState.PENDING,
    first: list[str] | None = None,
    restarted_on: list[str] | None = None,
) -> tuple[Shown, Shown]:
    """What an Observer on the store ``db`` shows of the screen ``before`` (``first``: a
    drawing it saw just before, one caught half done), recorded as its owner's wake-up
    records it (then left in ``state``); and what a restarted one, resumed from the
    store, shows of the screen ``after`` on its first looks (``restarted_on``: what its
    very first capture caught instead, half done)."""
    async with store_actor(db) as store:
        screen, pane = observing(store)
        if first is not None:
            pane.screen = first
            await screen.observe()
        shown = await shown_settled(screen, pane, before)

        def woken(conn: apsw.Connection) -> None:
            terminals.record_seen(conn, IDENTITY, 1.0)
            row, _ = interactions.record(
                conn, interaction_id=shown.interaction_id, terminal_id="t1", turn_id=None,
                kind=shown.kind, seen=shown.seen, profile=PROFILE.id, step_index=1,
                step_total=1, projection=shown.projection, now=1.0,
            )  # fmt: skip
            if state is not row.state:
                interactions.set_state(conn, row, state)

        await transact(store, woken)
        restarted, pane = observing(
            store, None if restarted_on is None else DrawnPane(restarted_on, after)
        )
        await restarted.resume()
        return shown, await shown_settled(restarted, pane, after)
