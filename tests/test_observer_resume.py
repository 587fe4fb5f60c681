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

import apsw
import trio

from akk.actors.store import transact
from akk.actors.terminal_board import project_snapshot
from akk.protocol.wakeups import SETTLE_SECONDS
from akk.screen.fingerprint import IdMinter
from akk.store import interactions, terminals
from akk.store.interactions import InteractionState
from tests import corpus
from tests.captured_pane import IDENTITY, PROFILE, VERSION, observing, store_actor

IDS = IdMinter(b"r" * 32)
QUESTION = "questionnaire_single2-q1"
WRITE = "claude_write-permission"
"""A permission for a file write: AKK leaves it to a person (a manual screen)."""


def _screen(name: str) -> list[str]:
    return (corpus.ROOT / "claude" / VERSION / f"{name}.ansi").read_text().splitlines()


async def _first_look(db: Path, name: str, state: InteractionState) -> tuple[str, str]:
    """The interaction id the owner was woken for before the restart (its record left in
    ``state``), and the one the restarted Observer shows for the same screen."""
    async with store_actor(db) as store:
        screen, pane = observing(store)
        pane.screen = _screen(name)
        await screen.observe()
        await trio.sleep(SETTLE_SECONDS)  # a manual screen is shown once it has settled
        before = await screen.observe(force=True)
        assert before is not None
        shown = project_snapshot(before, IDS, None)
        assert shown is not None

        def woken(conn: apsw.Connection) -> None:  # as the owner's wake-up records it
            terminals.record_seen(conn, IDENTITY, 1.0)
            row, _ = interactions.record(
                conn, interaction_id=shown.interaction_id, terminal_id="t1", turn_id=None,
                kind=shown.kind, seen=shown.seen, profile=PROFILE.id, step_index=1,
                step_total=1, projection=shown.projection, now=1.0,
            )  # fmt: skip
            if state is not row.state:
                interactions.set_state(conn, row, state)

        await transact(store, woken)
        restarted, pane = observing(store)
        await restarted.resume()
        pane.screen = _screen(name)
        await restarted.observe()
        await trio.sleep(SETTLE_SECONDS)
        after = await restarted.observe(force=True)
        assert after is not None
        again = project_snapshot(after, IDS, None)
        assert again is not None
        return shown.interaction_id, again.interaction_id


async def test_a_prompt_or_a_screen_left_to_a_person_still_on_show_is_the_one_woken_for(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        for name in (QUESTION, WRITE):
            before, after = await _first_look(
                tmp_path / f"{name}.db", name, InteractionState.PENDING
            )
            assert after == before, name


async def test_a_prompt_the_store_saw_leave_is_a_new_appearance_though_drawn_the_same(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        for name in (QUESTION, WRITE):
            before, after = await _first_look(tmp_path / f"{name}.db", name, InteractionState.GONE)
            assert after != before, name
