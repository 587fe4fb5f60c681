"""The TurnDesk wakes every followed Turn at once when a terminal shows something new.

A follower looks at its pane's newest snapshot only, once per tick (0.1 s). A screen
that stands for less than that, such as Claude taking a task back into its composer
just before a person clears it, is seen only if its publication wakes the followers:
each other prompt, and each other state, does. A snapshot that only redraws the same
state, or a passing (busy) one, wakes nobody.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing

from akk.actors.terminal_board import TerminalBoard, TerminalIdentity, TerminalSnapshot
from akk.actors.turn import TICK, Tick, TurnActor
from akk.actors.turn_desk import TurnDesk
from akk.profiles.observation import Observation, State
from akk.runtime.actor import Actor, ActorRef, Rank
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.fingerprint import Appearance

_IDENTITY = TerminalIdentity(
    terminal_id="t1", tmux_socket="s", pane_id="%1", pane_pid=1, agent="claude", agent_pid=2,
    process_start=3, executable="claude", version="test", cwd=None,
    profile="claude-code@test", profile_reason=None,
)  # fmt: skip


class _Follower(Actor[Tick]):
    """Stands in for a TurnActor: counts the Ticks it gets; each look lasts until ``gate``."""

    rank = Rank.TURN

    def __init__(self, ticks: list[Tick], gate: trio.Event | None = None) -> None:
        self._ticks = ticks
        self._gate = gate

    async def receive(self, message: Tick) -> None:
        self._ticks.append(message)
        if self._gate is not None:
            await self._gate.wait()


def _snapshot(state: State, seq: int, *, seen: Appearance | None = None,
              busy: bool = False, terminal_id: str = "t1") -> TerminalSnapshot:  # fmt: skip
    identity = attrs.evolve(_IDENTITY, terminal_id=terminal_id)
    return TerminalSnapshot(identity, Observation(state, None), seen, (), 0.0, seq, busy)


async def test_another_state_or_prompt_wakes_the_followers_at_once() -> None:
    ticks: list[Tick] = []
    supervisor = Supervisor("turns")
    board = TerminalBoard()
    board.announce(_IDENTITY, None, 0.0)
    none: Any = None
    TurnDesk(supervisor, store=none, reader=none, board=board, notify=none)
    prompt = Appearance("f" * 64, 1)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run)
            await supervisor.start_child(ChildSpec("turn_1", lambda: _Follower(ticks)))
            woken: list[int] = []
            for snapshot in (
                _snapshot(State.WORKING, 1),  # the first snapshot
                _snapshot(State.WORKING, 2),  # the same state redrawn
                _snapshot(State.IDLE_DRAFT, 3),  # the task back in the composer
                _snapshot(State.IDLE, 4, busy=True),  # a passing screen
                _snapshot(State.IDLE, 5),  # the composer cleared
                _snapshot(State.IDLE, 6, seen=prompt),  # a prompt
                _snapshot(State.IDLE, 7, seen=prompt),
            ):
                before = len(ticks)
                board.publish(attrs.evolve(snapshot))
                await trio.testing.wait_all_tasks_blocked()
                woken.append(len(ticks) - before)
            assert woken == [1, 0, 1, 0, 1, 1, 0]
            nursery.cancel_scope.cancel()


async def test_the_clock_queues_no_look_behind_a_look_already_due(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A look that lasts many ticks (a slow store, a long file) leaves one clock Tick
    queued, not a mailbox full of them: a terminal's published Tick still gets in, so its
    glimpse is not lost, and an owner's cancel waits behind one look, not sixteen."""
    ticks: list[Tick] = []
    gate = trio.Event()
    supervisor = Supervisor("turns")
    board = TerminalBoard()
    board.announce(_IDENTITY, None, 0.0)
    none: Any = None
    desk = TurnDesk(supervisor, store=none, reader=none, board=board, notify=none)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run)
            await supervisor.start_child(ChildSpec("turn_1", lambda: _Follower(ticks, gate)))
            nursery.start_soon(desk.clock)
            await trio.sleep(5 * TurnActor.mailbox_size * TICK)  # the first look still lasts
            mailbox = supervisor.ref("turn_1")
            assert (len(ticks), mailbox.pending) == (1, 1)
            board.publish(_snapshot(State.IDLE_DRAFT, 1))
            assert mailbox.pending == 2
            gate.set()
            await trio.testing.wait_all_tasks_blocked()
            assert [tick.published is not None for tick in ticks[:3]] == [False, False, True]
            nursery.cancel_scope.cancel()


def test_the_desk_forgets_a_terminal_that_left_the_board() -> None:
    """What a terminal last showed is kept while it is on the board, and dropped once it left
    and another terminal shows up: months of panes coming and going hold no memory."""
    board = TerminalBoard()
    none: Any = None
    desk = TurnDesk(Supervisor("turns"), store=none, reader=none, board=board, notify=none)
    for terminal_id in ("t1", "t2", "t3"):
        board.announce(attrs.evolve(_IDENTITY, terminal_id=terminal_id), None, 0.0)
        board.bind_ref(terminal_id, ActorRef(f"terminal {terminal_id}", Rank.TERMINAL))
    board.publish(_snapshot(State.IDLE, 1, terminal_id="t1"))
    board.publish(_snapshot(State.IDLE, 1, terminal_id="t2"))
    assert set(desk._shown) == {"t1", "t2"}
    board.forget("t1")
    board.publish(_snapshot(State.WORKING, 2, terminal_id="t2"))
    assert set(desk._shown) == {"t1", "t2"}  # only a new terminal prunes
    board.publish(_snapshot(State.IDLE, 1, terminal_id="t3"))
    assert set(desk._shown) == {"t2", "t3"}
