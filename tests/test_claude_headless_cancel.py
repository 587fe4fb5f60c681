"""The owner's cancel of a headless Claude round is a step reserved before its line.

Over the whole backend with a stand-in Claude (tests/test_claude_headless_ending.py):
the cancel step is stored before the interrupt is written and recorded after it,
and a second cancel while the round ends writes nothing more. What a restart does
with a cut-off cancel is proven on the real clients
(tests/lab/test_claude_backend_answers.py, `test_sigkill_at_each_cancel_point_then_restart`).
"""

from __future__ import annotations

from pathlib import Path

import trio

from akk import faults
from akk.actors.turn import Cancel
from akk.faults import Point
from akk.store import dispatches
from akk.store.dispatches import Kind, Stage
from akk.store.turns import TurnState
from tests.test_claude_headless_ending import _sent, _stack


async def test_the_cancel_is_reserved_then_recorded_and_a_second_writes_nothing(
    tmp_path: Path,
) -> None:
    async with _stack(tmp_path, "init()\nsys.stdin.readline()\nstubborn()\n") as stack:
        with trio.fail_after(20):
            turn = await _sent(stack)
            await stack.until(turn.turn_id, lambda t: t.state is TurnState.RUNNING)
            actor = stack.desk.ref(turn.turn_id)
            assert actor is not None

            async def steps() -> list[tuple[Kind, Stage]]:
                found = await stack.reader.run(lambda conn: dispatches.of_turn(conn, turn.turn_id))
                return [(d.kind, d.stage) for d in found]

            faults.arm(f"{Point.CLAUDE_INTERRUPT_RESERVED}:delay:1.5")
            try:
                async with trio.open_nursery() as nursery:
                    replies: list[bool] = []

                    async def cancel() -> None:
                        replies.append((await actor.ask(Cancel(), timeout=10)).ok)

                    nursery.start_soon(cancel)
                    # Held at the point, between the reservation and the line: it is stored.
                    while await steps() != [(Kind.CANCEL, Stage.RESERVED)]:
                        await trio.sleep(0.02)
            finally:
                faults.disarm()
            assert replies == [True]
            assert await steps() == [(Kind.CANCEL, Stage.ACCEPTED)]
            assert (await actor.ask(Cancel(), timeout=10)).ok  # the round is ending already
            assert await steps() == [(Kind.CANCEL, Stage.ACCEPTED)]  # nothing written again
            settled = await stack.settled(turn.turn_id)
            assert settled.state is TurnState.CANCELLED
