"""A pane's steps on a store that fills up, or stalls: keys that went out unrecorded, and
recover.

The full disk is real (`tests.small_fs`): the store lives on a small tmpfs that
fills after the task's reservation; a stalled one is held by a write
(`tests.stalled_store`). The pane is the scripted one of
`tests.test_typing_proof` (real Codex screens), the keys go to its recording
stand-in for tmux, and the stages to a real StoreActor.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, cast

import apsw
import pytest
import trio

from akk.actors.store import RETRY_SECONDS, StoreActor, transact
from akk.actors.terminal_board import TerminalBoard
from akk.actors.turn_desk import TurnDesk
from akk.backends.contract import Refusal
from akk.backends.terminal.actor import TerminalActor
from akk.backends.terminal.observer import Observer
from akk.backends.terminal.rounds import TerminalRounds
from akk.backends.terminal.stages import StageUnrecorded
from akk.backends.terminal.steps import DispatchTask, Reconcile, Refresh, TaskReceipt
from akk.backends.terminal.typing_step import type_and_submit
from akk.backends.terminal.witness import TerminalWitness
from akk.discovery.identity import TerminalIdentity
from akk.profiles.composer import TypingMethod
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.store import dispatches, turns
from akk.store.database import StoreUnwritable, open_reader
from akk.store.dispatches import Kind, Stage
from akk.store.turns import TERMINAL, TurnState
from akk.tmux.control import ClientLink, ControlClientClosed
from tests.small_fs import fill, small_filesystem
from tests.stalled_store import held_store
from tests.test_typing_proof import EMPTY, PROFILE, TASK, TASK_SHOWN, _Pane, _rows, _Tmux

LITERAL = TypingMethod.LITERAL
IDENTITY = TerminalIdentity(
    terminal_id="term_x", tmux_socket="s", pane_id="%1", pane_pid=1, agent="codex",
    agent_pid=2, process_start=3, executable="codex", version="0.171.0", cwd=None,
    profile=PROFILE.id, profile_reason=None,
)  # fmt: skip


def _junk(conn: apsw.Connection, n: int) -> None:
    conn.execute("INSERT INTO controllers VALUES (?, ?, 0, 0)", (f"junk-{n}", "n" * 3000))


async def fill_store(fs: Path, store: ActorRef) -> Path:
    """Fill the filesystem under the store, then its log's spare pages: nothing more writes."""
    filler = fill(fs)
    with pytest.raises(StoreUnwritable):
        for n in range(400):
            await transact(store, partial(_junk, n=n))
    return filler


def _reserve(conn: apsw.Connection) -> TaskReceipt:
    now = time.time()
    turn = turns.insert(
        conn, controller_id="ctl", client_request_id="r1", terminal_id="term_x",
        request_sha256="0" * 64, request_chars=len(TASK), evidence_status="unknown",
        evidence=None, evidence_limit=None, inactivity_seconds=600, lifetime_seconds=600,
        now=now,
    )  # fmt: skip
    dispatch = dispatches.reserve(
        conn, controller_id="ctl", turn_id=turn.turn_id, terminal_id="term_x",
        kind=Kind.TASK, typing=LITERAL.value, screen_seq=1, now=now,
    )  # fmt: skip
    return TaskReceipt(turn, dispatch, 1, None)


def _read(db: Path, query: Any) -> Any:
    conn = open_reader(db)
    try:
        return query(conn)
    finally:
        conn.close()


class _Gone:
    """A tmux link whose server is gone: the actor starts and reads no screen."""

    async def command(self, *args: str) -> None:
        raise ControlClientClosed("s", "the server is gone")

    def client(self) -> _Gone:
        return self


@asynccontextmanager
async def _store_on_small_fs(tmp_path: Path) -> AsyncIterator[tuple[Path, Path, ActorRef]]:
    with small_filesystem(tmp_path / "fs") as fs:
        db = fs / "akk.sqlite3"
        _rows(db)
        root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            yield fs, db, root.ref("store")
            assert root.stats.crashes.get("store", 0) == 0
            nursery.cancel_scope.cancel()


async def test_keys_that_went_out_unrecorded_are_response_uncertain_and_never_typed_again(
    tmp_path: Path,
) -> None:
    """The disk fills between the reservation and the text's stage: the pane's actor does not
    crash, its caller hears response_uncertain naming the store, and once the store writes
    the step is settled as one a crash cut off (its Turn then from its evidence)."""
    tmux = _Tmux()
    with trio.fail_after(30):
        async with _store_on_small_fs(tmp_path) as (fs, db, store):
            receipt = await transact(store, _reserve)
            board = TerminalBoard()
            actor = TerminalActor(
                IDENTITY, PROFILE, cast(ClientLink, tmux), board, store, notify=lambda _: None
            )
            actor._cut_off = False  # as after its start on a writable store
            start = trio.current_time()
            pane = _Pane([(start, EMPTY), (start + 0.03, TASK_SHOWN)])
            typed = partial(
                type_and_submit, cast(Observer, pane), cast(ClientLink, tmux), store, receipt
            )

            async def dispatch_task(task: DispatchTask) -> TaskReceipt | Refusal:
                # The actor's own path after `_reserve` (its proofs need a real pane).
                return await typed(task.text, LITERAL)

            actor._dispatch_task = dispatch_task  # type: ignore[method-assign]
            filler = await fill_store(fs, store)

            reply = await actor.receive(DispatchTask("ctl", "r1", TASK, 600, 600))

            assert isinstance(reply, Refusal) and reply.reason is Reason.RESPONSE_UNCERTAIN
            assert f"the store at {db} cannot write: disk full (SQLITE_FULL" in reply.message
            assert "may have been typed, and AKK will not type them again" in reply.message
            assert "nothing was sent" not in reply.message
            # The text once and no Enter: its stage was never recorded, so nothing follows it.
            assert [args[:4] for _, args in tmux.commands] == [("send-keys", "-t", "%1", "-l")]
            assert tmux.enters() == []
            stored = _read(db, lambda conn: dispatches.get(conn, receipt.dispatch.dispatch_id))
            assert stored.stage is Stage.RESERVED  # as last recorded: open, like a cut-off step

            # recover's reconcile on the full disk: refused with the store's message, no crash.
            refused = await actor.receive(Reconcile())
            assert isinstance(refused, Refusal) and refused.reason is Reason.INTERNAL
            assert f"the store at {db} cannot write: disk full" in refused.message
            assert "not settled yet" in refused.message

            filler.unlink()
            assert await actor.receive(Reconcile()) == 1
            stored = _read(db, lambda conn: dispatches.get(conn, receipt.dispatch.dispatch_id))
            turn = _read(db, lambda conn: turns.get(conn, receipt.turn.turn_id))
            assert stored.stage is Stage.UNCERTAIN
            assert turn.state is TurnState.UNCERTAIN  # its follower settles it from evidence
            assert len(tmux.commands) == 1  # nothing was ever typed again


async def test_an_enter_whose_stage_is_unrecorded_is_not_pressed_again(tmp_path: Path) -> None:
    """The disk fills right after Enter: `advance(ENTER_SENT)` raises StageUnrecorded with
    the dispatch as last recorded (text injected), and the one Enter stays the only one."""
    tmux = _Tmux()
    with trio.fail_after(30):
        async with _store_on_small_fs(tmp_path) as (fs, _, store):
            receipt = await transact(store, _reserve)
            start = trio.current_time()
            pane = _Pane([(start, EMPTY), (start + 0.03, TASK_SHOWN)])
            filled: list[Path] = []

            class _FillsOnEnter(_Tmux):
                async def command(self, *args: str) -> list[str]:
                    said = await super().command(*args)
                    if args[-1:] == ("Enter",):
                        filled.append(await fill_store(fs, store))
                    return said

            tmux = _FillsOnEnter()
            with pytest.raises(StageUnrecorded) as unrecorded:
                await type_and_submit(
                    cast(Observer, pane), cast(ClientLink, tmux), store, receipt, TASK, LITERAL
                )
            assert unrecorded.value.dispatch.stage is Stage.TEXT_INJECTED
            assert len(tmux.enters()) == 1
            refusal = unrecorded.value.refusal()
            assert refusal.reason is Reason.RESPONSE_UNCERTAIN
            assert "disk full" in refusal.message
            filled[0].unlink()


async def test_rounds_follow_the_turn_of_keys_that_went_out_unrecorded(tmp_path: Path) -> None:
    """The controller hears response_uncertain with the store's message, and the Turn is
    followed (to settle from its evidence) instead of holding the pane."""
    db = tmp_path / "akk.sqlite3"
    _rows(db)
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    followed: list[str] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            receipt = await transact(root.ref("store"), _reserve)
            cause = StoreUnwritable("the store at /s cannot write: disk full (SQLITE_FULL)", "x")
            refusal = StageUnrecorded(receipt.dispatch, cause).refusal()

            class _Terminal:
                async def ask(self, message: object, *, timeout: float) -> Refusal:
                    return refusal

            class _Reader:
                async def run(self, query: Any) -> Any:
                    return _read(db, query)

            async def follow(turn_id: str, *, enter_at: float | None = None) -> None:
                followed.append(turn_id)

            rounds = TerminalRounds.__new__(TerminalRounds)
            rounds._reader = cast(Any, _Reader())
            rounds.follow = follow  # type: ignore[method-assign]
            with pytest.raises(RpcError) as failed:
                await rounds._ask(
                    cast(ActorRef, _Terminal()),
                    DispatchTask("ctl", "r1", TASK, 600, 600),
                    lambda conn: receipt.turn.turn_id,
                )
            nursery.cancel_scope.cancel()
    assert failed.value.reason is Reason.RESPONSE_UNCERTAIN
    assert "the store at /s cannot write: disk full" in str(failed.value)
    assert followed == [receipt.turn.turn_id]


async def test_recover_on_a_full_disk_is_refused_with_the_store_message(tmp_path: Path) -> None:
    """A watch's recover asks the pane's actor to settle cut-off steps: on a full disk it
    is refused (internal, the store and its cause), and the actor stays up."""
    with trio.fail_after(30):
        async with _store_on_small_fs(tmp_path) as (fs, db, store):
            receipt = await transact(store, _reserve)  # an open step, as a crash leaves one
            board = TerminalBoard()
            tmux = _Gone()
            supervisor = Supervisor(
                "terminals",
                children=[
                    ChildSpec(
                        "term_x",
                        lambda: TerminalActor(IDENTITY, PROFILE, cast(ClientLink, tmux), board,
                                              store, notify=lambda _: None),
                    )
                ],
            )  # fmt: skip
            async with trio.open_nursery() as nursery:
                filler = await fill_store(fs, store)
                await nursery.start(supervisor.run)
                actor = supervisor.ref("term_x")

                class _Board:
                    def ref(self, terminal_id: str) -> ActorRef:
                        return actor

                async def follow(record_id: str) -> None:
                    """Not needed here."""

                witness = TerminalWitness(
                    board=cast(TerminalBoard, _Board()), reader=cast(Any, None), follow=follow
                )
                record = _read(db, lambda conn: turns.get(conn, receipt.turn.turn_id))
                with pytest.raises(RpcError) as refused:
                    await witness.reconcile(record)
                assert refused.value.reason is Reason.INTERNAL
                assert f"the store at {db} cannot write: disk full" in str(refused.value)
                assert supervisor.stats.crashes.get("term_x", 0) == 0
                filler.unlink()
                assert await witness.reconcile(record) == 1
                assert supervisor.stats.crashes.get("term_x", 0) == 0
                nursery.cancel_scope.cancel()


async def test_a_step_left_open_is_settled_by_itself_once_the_store_writes(
    tmp_path: Path,
) -> None:
    """No reservation and no recover needed: while the store cannot write, each Refresh
    asks to come back in RETRY_SECONDS; the first one after space returns settles the
    open step (`uncertain`) and wakes its controller."""
    told: list[str] = []
    with trio.fail_after(30):
        async with _store_on_small_fs(tmp_path) as (fs, db, store):
            receipt = await transact(store, _reserve)  # an open step, as a crash leaves one
            filler = await fill_store(fs, store)
            actor = TerminalActor(
                IDENTITY, PROFILE, cast(ClientLink, _Gone()), TerminalBoard(), store,
                notify=told.append,
            )  # fmt: skip
            await actor.started()  # its own settling is refused by the full store

            def stage() -> Stage:
                row = _read(db, lambda conn: dispatches.get(conn, receipt.dispatch.dispatch_id))
                return cast(Stage, row.stage)

            again = await actor.receive(Refresh(80, 24))
            assert isinstance(again, float) and 0 < again <= RETRY_SECONDS
            assert stage() is Stage.RESERVED and told == []
            filler.unlink()
            while stage() is Stage.RESERVED:
                assert isinstance(again, float)
                await trio.sleep(again)  # as the watcher's pacer waits
                again = await actor.receive(Refresh(80, 24))
            assert again is None  # nothing left to settle: only the pane's changes matter
            assert stage() is Stage.UNCERTAIN and told == ["ctl"]


async def test_a_start_on_a_full_disk_resumes_its_open_turns_once_the_store_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash left a task reserved; AKK starts again on a full disk. Settling that step
    cannot be written: the start goes on (`akk serve` serves what is recorded), and the
    Turns are resumed, the step settled, once space returns."""
    followed: list[str] = []

    async def resumer(turn_id: str) -> None:
        followed.append(turn_id)

    with trio.fail_after(30):
        async with _store_on_small_fs(tmp_path) as (fs, db, store):
            receipt = await transact(store, _reserve)
            filler = await fill_store(fs, store)
            desk = TurnDesk(
                Supervisor("turns"), store=store, reader=cast(Any, None), board=TerminalBoard(),
                notify=lambda _: None,
            )  # fmt: skip
            with pytest.raises(StoreUnwritable):
                await desk.resume({TERMINAL: resumer})
            async with trio.open_nursery() as nursery:
                nursery.start_soon(partial(desk.resume, {TERMINAL: resumer}, wait=True))
                while "not recorded yet" not in caplog.text:  # its first try failed
                    await trio.sleep(0.01)
                assert followed == []
                filler.unlink()
            stage = _read(db, lambda conn: dispatches.get(conn, receipt.dispatch.dispatch_id))
    assert followed == [receipt.turn.turn_id]
    assert stage is not None and stage.stage is Stage.UNCERTAIN


async def test_a_reservation_the_store_did_not_begin_in_time_is_refused_and_never_uncertain(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The store stalls for longer than a reservation waits: the step is refused (nothing
    was sent), and the reservation, once the store reaches it, is not written. Before, the
    actor crashed on the ask's timeout and the reservation was written after it: its
    restart then called a step whose keys never went uncertain."""
    db = tmp_path / "akk.sqlite3"
    _rows(db)
    tmux = _Tmux()
    replies: list[object] = []
    async with held_store(db) as (store, release):
        actor = TerminalActor(
            IDENTITY, PROFILE, cast(ClientLink, tmux), TerminalBoard(), store, notify=lambda _: None
        )
        actor._cut_off = False  # as after its start on a writable store

        async def reserve() -> None:
            replies.append(await actor._reserve(_reserve))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reserve)
            await trio.testing.wait_all_tasks_blocked()  # queued behind the stalled write
            mock_clock.jump(10)
        refused = replies[0]
        assert isinstance(refused, Refusal) and refused.reason is Reason.INTERNAL
        assert "did not begin this step's reservation" in refused.message
        assert "nothing was sent" in refused.message
        release.set()
        # What a restart of the pane's actor settles: no step was left open.
        assert await actor.receive(Reconcile()) == 0
    assert _read(db, lambda conn: conn.execute("SELECT count(*) FROM dispatches").fetchone()) == (
        0,
    )
    assert _read(db, lambda conn: conn.execute("SELECT count(*) FROM turns").fetchone()) == (0,)
    assert tmux.commands == []
