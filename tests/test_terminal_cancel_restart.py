"""A terminal cancel cut off after its interrupt key was recorded (`enter_sent`).

AKK died at `interrupt_recorded`: the Escape went out and its stage is stored, but the
follower that awaited the interruption (its `_cancel`, in memory) is gone. A restart's
reconcile leaves such a step to the Turn (`turns.orphaned`). The restarted follower must
await it again: within `CANCEL_BOUND` the interruption shows (the cancel is `accepted`
with the Turn's `cancelled`) or the cancel ends `uncertain`; either way the terminal
takes an answer again. The same rules hold for any cancel: an interruption the
agent's file never records (Claude takes a task it had not answered back into its
composer) is read from the screen and the file together. The follower and the store
are real; its TurnActor is a stand-in that commits a settle as the actor does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest
import trio
import trio.testing

from akk.actors.store import StoreActor, transact
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot
from akk.backends.terminal.follow import (
    CANCEL_BOUND,
    SCREEN_CATCH_UP,
    STRANDED_SECONDS,
    TerminalFollower,
)
from akk.evidence import Progress, UsageStatus, request_digest
from akk.profiles.composer import DraftView
from akk.profiles.observation import Observation, State
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.fingerprint import IdMinter
from akk.store import dispatches, turns
from akk.store.database import open_store
from akk.store.dispatches import Dispatch, Kind, Stage
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState
from tests.captured_pane import IDENTITY
from tests.store_rows import add_ctl_and_t1

WORKING = Observation(State.WORKING, "claude-2.1.332")
IDLE = Observation(State.IDLE, "claude-2.1.332", draft=DraftView((), 100, 40))


@attrs.define
class _Control:
    """The TurnActor as the follower uses it: a settle commits through `settling`."""

    store: ActorRef
    follower: TerminalFollower
    turn: Turn | None = None
    settled: list[TurnState] = attrs.field(factory=list)
    reasons: list[str | None] = attrs.field(factory=list)
    summaries: list[str] = attrs.field(factory=list)

    async def update(self, **changes: object) -> Turn:
        # The one change these cases make while the Turn runs: the person's messages.
        assert set(changes) == {"person_messages"}, changes
        assert self.turn is not None
        turn_id = self.turn.turn_id

        def write(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            return turns.update(conn, fresh, **changes)

        self.turn = await transact(self.store, write)
        return self.turn

    async def settle(self, state: TurnState, reason: str | None, summary: str,
                     **_: Any) -> None:  # fmt: skip
        assert self.turn is not None
        turn_id, follower = self.turn.turn_id, self.follower

        def commit(conn: apsw.Connection) -> None:
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            follower.settling(conn, fresh, state, time.time())
            turns.settle(conn, fresh, state, now=time.time(), reason=reason, summary=summary)

        await transact(self.store, commit)
        self.settled.append(state)
        self.reasons.append(reason)
        self.summaries.append(summary)


@attrs.frozen
class _Restarted:
    follower: TerminalFollower
    control: _Control
    reader: StoreReader
    store: ActorRef
    cancel: Dispatch


@asynccontextmanager
async def _restarted(
    tmp_path: Path, recorded_ago: float, request: str = "x"
) -> AsyncIterator[_Restarted]:
    """A running Turn on t1 (its task ``request``) whose cancel's Escape was recorded
    ``recorded_ago`` seconds ago by a server that then died; a new follower starts on it
    (as after `akk serve` restarts)."""
    db = tmp_path / "akk.sqlite3"
    conn = open_store(db)
    add_ctl_and_t1(conn)
    now = time.time()
    with conn:
        turn = turns.insert(
            conn, controller_id="ctl", client_request_id="r", terminal_id="t1",
            request_sha256=request_digest(request), request_chars=len(request),
            evidence_status="unknown", evidence=None,
            evidence_limit=None, inactivity_seconds=600, lifetime_seconds=3600, now=now,
        )  # fmt: skip
        turn = turns.update(conn, turn, state=TurnState.RUNNING)
        cancel = dispatches.reserve(
            conn, controller_id="ctl", turn_id=turn.turn_id, terminal_id="t1",
            kind=Kind.CANCEL, typing=None, screen_seq=7, now=now - recorded_ago,
        )  # fmt: skip
        cancel = dispatches.advance(conn, cancel, Stage.ENTER_SENT)
        conn.execute("UPDATE dispatches SET updated_at = ?", (now - recorded_ago,))
        # The restart's reconcile leaves a cancel whose key went out to its Turn.
        assert not turns.orphaned(conn, cancel, "interrupted_by_restart", now)
    conn.close()
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    reader = StoreReader(db)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            store = root.ref("store")
            follower = TerminalFollower(
                turn.turn_id, store=store, reader=reader.run, board=TerminalBoard(),
                ids=IdMinter(b"k" * 32), enter_at=None, accept_seconds=60,
            )  # fmt: skip
            control = _Control(store, follower)
            follower.attach(control)
            turn_id = turn.turn_id

            def load(conn: apsw.Connection) -> Turn:
                fresh = turns.get(conn, turn_id)
                assert fresh is not None
                follower.read(conn, fresh)
                return fresh

            control.turn = await reader.run(load)
            follower.started(control.turn)
            yield _Restarted(follower, control, reader, store, cancel)
            nursery.cancel_scope.cancel()
    finally:
        reader.close()


async def _answerable(lab: _Restarted) -> None:
    """An answer can be reserved on the terminal again (no step is left open on it)."""

    def reserve(conn: apsw.Connection) -> Dispatch:
        return dispatches.reserve(
            conn, controller_id="ctl", turn_id=lab.cancel.turn_id or "", terminal_id="t1",
            kind=Kind.APPROVAL, typing=None, screen_seq=9, now=time.time(),
        )  # fmt: skip

    assert (await transact(lab.store, reserve)).stage is Stage.RESERVED


async def _cancel(lab: _Restarted) -> Dispatch:
    found = await lab.reader.run(lambda conn: dispatches.get(conn, lab.cancel.dispatch_id))
    assert isinstance(found, Dispatch)
    return found


@pytest.mark.parametrize("recorded_ago", [0.0, 4.0, 3600.0])
async def test_a_dropped_interrupt_ends_the_cancel_uncertain_within_the_bound(
    tmp_path: Path, mock_clock: trio.testing.MockClock, recorded_ago: float
) -> None:
    with trio.fail_after(30):
        async with _restarted(tmp_path, recorded_ago) as lab:
            # The agent works on: the interruption does not show.
            await lab.follower._check_outcome(None, WORKING)
            left = max(CANCEL_BOUND - recorded_ago, 0.0)
            if left > 0:
                assert (await _cancel(lab)).stage is Stage.ENTER_SENT  # still awaited
                mock_clock.jump(left)
                await lab.follower._check_outcome(None, WORKING)
            cancel = await _cancel(lab)
            assert (cancel.stage, cancel.reason) == (Stage.UNCERTAIN, "interruption_not_shown")
            assert lab.control.settled == []
            turn = await lab.reader.run(lambda conn: turns.get(conn, lab.cancel.turn_id or ""))
            assert isinstance(turn, Turn)
            assert (turn.state, turn.reason) == (TurnState.RUNNING, "cancel_uncertain")
            await _answerable(lab)


async def test_an_interruption_shown_after_the_restart_settles_the_cancel(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(30):
        async with _restarted(tmp_path, 1.0) as lab:
            lab.follower._last_seq = 0  # the first screen this follower read: idle again
            await lab.follower._check_outcome(None, IDLE)
            mock_clock.jump(SCREEN_CATCH_UP)  # idle it stays: it stopped
            await lab.follower._check_outcome(None, IDLE)
            assert lab.control.settled == [TurnState.CANCELLED]
            assert (await _cancel(lab)).stage is Stage.ACCEPTED
            await _answerable(lab)


def _file(*, unanswered: bool, person_messages: int = 0) -> tuple[Progress, bool]:
    """What the agent's file shows of the Turn after the key: no outcome yet, whether
    anything the agent wrote stands under the prompt, and how many messages a person sent
    into it."""
    shown = Progress(
        accepted=True, session_id="s", outcome=None, final_message=None, failure=None,
        usage=None, usage_status=UsageStatus.PARTIAL, unanswered=unanswered,
        person_messages=person_messages,
    )  # fmt: skip
    return shown, False


async def test_a_person_s_message_is_kept_while_the_turn_runs(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The file shows a person's message in the Turn before any outcome: the Turn's row
    counts it at once (`status` shows it), and an outcome the file never gives (stalled,
    timed out) keeps it. Nothing settles."""
    with trio.fail_after(30):
        async with _restarted(tmp_path, 1.0) as lab:
            await lab.follower._check_outcome(_file(unanswered=False, person_messages=1), WORKING)
            turn = await lab.reader.run(lambda conn: turns.get(conn, lab.cancel.turn_id or ""))
            assert isinstance(turn, Turn)
            assert (turn.state, turn.person_messages) == (TurnState.RUNNING, 1)
            assert turn.public()["person_messages"] == 1
            assert lab.control.settled == []


async def test_a_task_the_agent_took_back_into_its_composer_is_cancelled_withdrawn(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Claude, interrupted before its first reply, writes no interruption and puts the
    task back in its composer: idle with that draft and nothing under the prompt, for
    `SCREEN_CATCH_UP`, the Turn is cancelled, named withdrawn."""
    task = "lab: think before answering"
    withdrawn = Observation(State.IDLE_DRAFT, "claude-2.1.332", draft=DraftView((task,), 100, 40))
    with trio.fail_after(30):
        async with _restarted(tmp_path, 0.0, task) as lab:
            lab.follower._last_seq = 0
            await lab.follower._check_outcome(_file(unanswered=True), withdrawn)
            assert lab.control.settled == []  # not at the first look
            mock_clock.jump(SCREEN_CATCH_UP)
            await lab.follower._check_outcome(_file(unanswered=True), withdrawn)
            assert (lab.control.settled, lab.control.reasons) == (
                [TurnState.CANCELLED], ["withdrawn"])  # fmt: skip
            assert (await _cancel(lab)).stage is Stage.ACCEPTED


async def test_a_cancel_the_file_never_shows_ends_uncertain_within_the_bound(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The file holds a reply under the prompt and no interruption, the agent idle: that is
    no proof the key stopped it (the file may lag, or the reply ended it), so the Turn is
    not cancelled; after `CANCEL_BOUND` the cancel ends uncertain, the Turn goes on."""
    with trio.fail_after(30):
        async with _restarted(tmp_path, 0.0) as lab:
            lab.follower._last_seq = 0
            await lab.follower._check_outcome(_file(unanswered=False), IDLE)
            mock_clock.jump(SCREEN_CATCH_UP)
            await lab.follower._check_outcome(_file(unanswered=False), IDLE)
            assert lab.control.settled == [] and (await _cancel(lab)).stage is Stage.ENTER_SENT
            mock_clock.jump(CANCEL_BOUND)
            await lab.follower._check_outcome(_file(unanswered=False), IDLE)
            cancel = await _cancel(lab)
            assert (cancel.stage, cancel.reason) == (Stage.UNCERTAIN, "interruption_not_shown")
            assert lab.control.settled == []
            await _answerable(lab)


async def test_a_task_a_person_escaped_into_the_composer_is_withdrawn_without_a_cancel(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """No cancel of AKK's: the person's Escape. The composer showing exactly the task, and
    nothing under its prompt, cancel the Turn as withdrawn; an empty idle composer or
    another draft do not within `SCREEN_CATCH_UP` (a look that falls between two frames is
    no proof the task stopped)."""
    task = "lab: think before answering"
    shown = Observation(State.IDLE_DRAFT, "claude-2.1.332", draft=DraftView((task,), 100, 40))
    other = Observation(State.IDLE_DRAFT, "claude-2.1.332", draft=DraftView(("x",), 100, 40))
    with trio.fail_after(30):
        async with _restarted(tmp_path, 0.0, task) as lab:
            lab.follower._cancel = None  # no interrupt key of AKK's is awaited
            lab.follower._saw_working = True
            for screen in (IDLE, other):
                await lab.follower._check_outcome(_file(unanswered=True), screen)
                mock_clock.jump(SCREEN_CATCH_UP)
                await lab.follower._check_outcome(_file(unanswered=True), screen)
            assert lab.control.settled == []
            await lab.follower._check_outcome(_file(unanswered=True), shown)
            mock_clock.jump(SCREEN_CATCH_UP)
            await lab.follower._check_outcome(_file(unanswered=True), shown)
            assert (lab.control.settled, lab.control.reasons) == (
                [TurnState.CANCELLED], ["withdrawn"])  # fmt: skip
            (summary,) = lab.control.summaries
            assert "not from AKK" in summary and "back in its composer" in summary


async def test_a_task_taken_back_after_the_pane_worked_is_withdrawn_once_cleared(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The composer showed exactly the task only for a moment, then a person cleared it.
    Before the pane read working that moment may be the submit's own last frame: it proves
    nothing unless it holds. After the pane worked it is Claude taking the task back, so the
    idle pane over the unanswered prompt, held for `SCREEN_CATCH_UP`, is withdrawn."""
    task = "lab: think before answering"
    shown = Observation(State.IDLE_DRAFT, "claude-2.1.332", draft=DraftView((task,), 100, 40))
    with trio.fail_after(30):
        async with _restarted(tmp_path, 0.0, task) as lab:
            lab.follower._cancel = None  # no interrupt key of AKK's is awaited
            for screen in (shown, IDLE, IDLE):
                await lab.follower._check_outcome(_file(unanswered=True), screen)
                mock_clock.jump(SCREEN_CATCH_UP)
            assert lab.control.settled == []
            lab.follower._saw_working = True  # a later look read the pane working
            for screen in (shown, IDLE):
                await lab.follower._check_outcome(_file(unanswered=True), screen)
            assert lab.control.settled == []  # the cleared composer has not held yet
            mock_clock.jump(SCREEN_CATCH_UP)
            await lab.follower._check_outcome(_file(unanswered=True), IDLE)
            assert (lab.control.settled, lab.control.reasons) == (
                [TurnState.CANCELLED], ["withdrawn"])  # fmt: skip
            (summary,) = lab.control.summaries
            assert "where a person cleared or changed it" in summary


async def test_a_task_taken_back_while_akk_did_not_see_it_is_withdrawn_once_idle_long_enough(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """AKK was down while a person pressed Escape and cleared the task Claude took back: the
    restarted follower never saw the pane work, nor the task in the composer. The pane idle
    over the unanswered prompt for `STRANDED_SECONDS`, unbroken, withdraws the Turn; a look
    that reads the pane working starts the time again."""
    task = "lab: think before answering"
    other = Observation(State.IDLE_DRAFT, "claude-2.1.332", draft=DraftView(("x",), 100, 40))
    with trio.fail_after(30):
        async with _restarted(tmp_path, 0.0, task) as lab:
            lab.follower._cancel = None  # no interrupt key of AKK's is awaited
            for screen in (IDLE, other, WORKING):
                await lab.follower._check_outcome(_file(unanswered=True), screen)
                mock_clock.jump(STRANDED_SECONDS / 2)
            for screen in (IDLE, other):
                await lab.follower._check_outcome(_file(unanswered=True), screen)
                assert lab.control.settled == []  # not yet held for STRANDED_SECONDS
                mock_clock.jump(STRANDED_SECONDS / 2)
            await lab.follower._check_outcome(_file(unanswered=True), IDLE)
            assert (lab.control.settled, lab.control.reasons) == (
                [TurnState.CANCELLED], ["withdrawn"])  # fmt: skip
            (summary,) = lab.control.summaries
            assert "not from AKK" in summary and "while AKK did not see it" in summary


def _published(observation: Observation, terminal_id: str = "t1") -> TerminalSnapshot:
    return TerminalSnapshot(
        attrs.evolve(IDENTITY, terminal_id=terminal_id), observation, None, (), 0.0
    )


async def test_a_task_taken_back_and_cleared_between_two_looks_is_withdrawn_as_seen(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """On a loaded machine the look after Claude took the task back may come only after a
    person cleared it: the snapshots its terminal published in between (`glimpse`) still
    show the pane working, then the task back in the composer. The Turn is withdrawn after
    `SCREEN_CATCH_UP` as taken back and cleared, not `STRANDED_SECONDS` later as unseen.
    Another terminal's snapshots prove nothing of this one."""
    task = "lab: think before answering"
    shown = Observation(State.IDLE_DRAFT, "claude-2.1.332", draft=DraftView((task,), 100, 40))
    with trio.fail_after(30):
        async with _restarted(tmp_path, 0.0, task) as lab:
            lab.follower._cancel = None  # no interrupt key of AKK's is awaited
            for terminal_id in ("t2", "t1"):
                lab.follower.glimpse(_published(WORKING, terminal_id))
                lab.follower.glimpse(_published(shown, terminal_id))
                for _ in range(2):
                    await lab.follower._check_outcome(_file(unanswered=True), IDLE)
                    if terminal_id == "t2":
                        assert lab.control.settled == []
                    mock_clock.jump(SCREEN_CATCH_UP)
            assert (lab.control.settled, lab.control.reasons) == (
                [TurnState.CANCELLED], ["withdrawn"])  # fmt: skip
            (summary,) = lab.control.summaries
            assert "where a person cleared or changed it" in summary
