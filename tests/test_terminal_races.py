"""Steps a TerminalActor refuses with zero keys whatever its caller checked before.

- A text holding one of the version's specials, when the pane's profile was bound
  (a qualification recorded) after the send's caller looked: the caller checked
  the character rule only, and Codex 0.171.0 took ``!rm -rf ~`` into its shell mode.
- A second cancel while the first one's step is still open: it once hit the
  one-open-step index and crashed the actor.
- A send whose client_request_id retention pruned after the caller looked: the
  reservation itself reads the tombstone, so the task is never typed again.
- A respond whose client_request_id another respond was given after the caller looked
  (two calls at once): the reservation reads it, so the message is never typed twice.

The actor runs on a real StoreActor; tmux is a recording stand-in that shows a real
Codex 0.171.0 screen (idle, or working).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import apsw
import attrs
import pytest
import trio
import trio.testing

from akk.actors.store import StoreActor, transact
from akk.actors.terminal_board import TerminalBoard
from akk.backends.contract import Refusal, RespondKey
from akk.backends.terminal.actor import TerminalActor
from akk.backends.terminal.observer import PENDING_POLL
from akk.backends.terminal.steps import (
    DispatchRespond,
    DispatchTask,
    Interrupt,
    InterruptReceipt,
    Rebind,
    Refresh,
)
from akk.discovery.identity import TerminalIdentity
from akk.profiles import codex
from akk.protocol.errors import Reason
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.store import dispatches, responds, turns
from akk.store.dispatches import Kind, Stage
from akk.store.responds import Responded
from akk.store.turns import TurnState
from akk.tmux.control import ClientLink
from tests.corpus import ROOT
from tests.test_typing_proof import _rows

PROFILE = codex.PROFILES[-1]
VERSION = PROFILE.id.removeprefix("codex@")
IDENTITY = TerminalIdentity(
    terminal_id="term_x", tmux_socket="s", pane_id="%1", pane_pid=1, agent="codex",
    agent_pid=2, process_start=3, executable="codex", version=VERSION, cwd=None,
    profile=None, profile_reason="not_qualified",
)  # fmt: skip


def _screen(name: str) -> tuple[list[str], str]:
    """A fixture's rows as `capture-pane` prints them, and its size for `display-message`."""
    label = json.loads((ROOT / "codex" / VERSION / f"{name}.json").read_text())
    rows = (ROOT / "codex" / VERSION / f"{name}.ansi").read_text().split("\n")[:-1]
    return rows, f"{label['cols']} {label['rows']}"


@attrs.define
class _Tmux:
    """One pane showing ``screen``; records the commands that put input into it."""

    screen: tuple[list[str], str]
    keys: list[tuple[str, ...]] = attrs.Factory(list)

    async def command(self, *args: str) -> list[str]:
        if args[0] == "capture-pane":
            return self.screen[0]
        if args[0] == "display-message":
            return ["0||0|0"] if "pane_in_mode" in args[-1] else [self.screen[1]]
        self.keys.append(args)
        return []

    def client(self) -> _Tmux:
        return self


@asynccontextmanager
async def _store(tmp_path: Path) -> AsyncIterator[ActorRef]:
    db = tmp_path / "akk.sqlite3"
    _rows(db)
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        yield root.ref("store")
        assert root.stats.crashes.get("store", 0) == 0
        nursery.cancel_scope.cancel()


def _turn(conn: apsw.Connection) -> turns.Turn:
    """A Turn of controller ``ctl`` on the pane, as its send's reservation wrote it."""
    return turns.insert(
        conn, controller_id="ctl", client_request_id="r1", terminal_id="term_x",
        request_sha256="0" * 64, request_chars=1, evidence_status="unknown", evidence=None,
        evidence_limit=None, inactivity_seconds=600, lifetime_seconds=600, now=time.time(),
    )  # fmt: skip


async def _qualified_actor(tmux: _Tmux, store: ActorRef) -> TerminalActor:
    """The pane's actor, started with its version's profile bound."""
    qualified = attrs.evolve(IDENTITY, profile=PROFILE.id, profile_reason=None)
    actor = TerminalActor(qualified, PROFILE, cast(ClientLink, tmux), TerminalBoard(), store, print)
    await actor.started()
    return actor


@pytest.mark.parametrize("text", ["/logout", "!rm -rf ~"])
async def test_a_special_is_refused_when_the_profile_came_after_the_caller_looked(
    tmp_path: Path, text: str
) -> None:
    tmux = _Tmux(_screen("codex_model_unknown-idle"))
    with trio.fail_after(30):
        async with _store(tmp_path) as store:
            board = TerminalBoard()
            actor = TerminalActor(IDENTITY, None, cast(ClientLink, tmux), board, store, print)
            await actor.started()
            snapshot = board.get(IDENTITY.terminal_id)
            assert snapshot is not None and snapshot.profile is None  # no specials to check
            qualified = attrs.evolve(IDENTITY, profile=PROFILE.id, profile_reason=None)
            await actor.receive(Rebind(qualified, PROFILE))
            reply = await actor.receive(DispatchTask("ctl", "r1", text, 600, 600))
    assert isinstance(reply, Refusal) and reply.reason is Reason.INVALID_PARAMS, reply
    assert tmux.keys == []


async def test_a_second_cancel_while_the_first_is_open_is_refused_with_no_key(
    tmp_path: Path,
) -> None:
    tmux = _Tmux(_screen("codex_model_unknown-working"))
    with trio.fail_after(30):
        async with _store(tmp_path) as store:

            def running(conn: apsw.Connection) -> turns.Turn:
                turn = _turn(conn)
                return turns.update(conn, turn, state=TurnState.RUNNING)

            turn = await transact(store, running)
            actor = await _qualified_actor(tmux, store)
            first = await actor.receive(Interrupt(turn))
            second = await actor.receive(Interrupt(turn))
            steps = await transact(store, lambda conn: dispatches.of_turn(conn, turn.turn_id))
    assert isinstance(first, InterruptReceipt) and first.dispatch.stage is Stage.ENTER_SENT
    assert isinstance(second, Refusal) and second.reason is Reason.CONFLICT, second
    assert tmux.keys == [("send-keys", "-t", "%1", "Escape")]  # the first cancel's only
    assert [(d.kind, d.stage) for d in steps] == [(Kind.CANCEL, Stage.ENTER_SENT)]


async def test_a_request_pruned_after_the_caller_looked_is_never_typed_again(
    tmp_path: Path,
) -> None:
    tmux = _Tmux(_screen("codex_model_unknown-idle"))
    with trio.fail_after(30):
        async with _store(tmp_path) as store:

            def prune(conn: apsw.Connection) -> None:  # as retention leaves it (`_bury`)
                conn.execute(
                    "INSERT INTO tombstones (record_id, controller_id, client_request_id, "
                    "task_kind, outcome, settled_at, pruned_at) "
                    "VALUES ('turn_old', 'ctl', 'r1', 'managed_send', 'done', 1, 2)"
                )

            await transact(store, prune)
            actor = await _qualified_actor(tmux, store)
            reply = await actor.receive(DispatchTask("ctl", "r1", "lab: the old task", 600, 600))
            listed = await transact(store, lambda conn: turns.by_request(conn, "ctl", "r1"))
    assert isinstance(reply, Refusal) and reply.reason is Reason.CONFLICT, reply
    assert "pruned" in reply.message and "turn_old" in reply.message
    assert tmux.keys == [] and listed is None


async def test_a_respond_whose_id_was_given_after_the_caller_looked_is_never_typed(
    tmp_path: Path,
) -> None:
    tmux = _Tmux(_screen("codex_model_unknown-idle"))
    key = RespondKey("ctl", "r2")
    with trio.fail_after(30):
        async with _store(tmp_path) as store:

            def settled_and_responded(conn: apsw.Connection) -> turns.Turn:
                turn = _turn(conn)
                now = time.time()
                turn = turns.settle(conn, turn, TurnState.DONE, now=now, summary="s")
                # The other call's round 2, reserved with its id, and since settled.
                turn = turns.reopen(
                    conn, turn, request_sha256="1" * 64, request_chars=1,
                    evidence_status="unknown", evidence=None, evidence_limit=None, now=now,
                )  # fmt: skip
                responds.record(conn, "ctl", "r2", Responded(turn.turn_id, 2, "1" * 64), now)
                return turns.settle(conn, turn, TurnState.DONE, now=now, summary="s")

            turn = await transact(store, settled_and_responded)
            actor = await _qualified_actor(tmux, store)
            reply = await actor.receive(DispatchRespond(turn.turn_id, "lab: again", key))
            after = await transact(store, lambda conn: turns.get(conn, turn.turn_id))
            steps = await transact(store, lambda conn: dispatches.of_turn(conn, turn.turn_id))
    assert isinstance(reply, Refusal) and reply.reason is Reason.CONFLICT, reply
    assert "r2" in reply.message and "nothing was typed" in reply.message
    assert tmux.keys == [] and steps == []
    assert after is not None and (after.round, after.state) == (2, TurnState.DONE)


async def test_a_look_outside_a_refresh_that_holds_a_prompt_asks_for_a_refresh(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A permission drawn just now whose call the agent's file does not show is held
    (`Observer.recheck`) and read again until it binds or its hold ends. A Refresh's look
    tells the pacer so by its reply; any other look (here a Rebind's, as an answer's or a
    send's) asks for a Refresh itself (`refresh_soon`): the prompt waiting on screen may
    print nothing more, and its snapshot would stay held, announced to nobody. (The clock
    stands still: the screen is as new at every look.)"""
    tmux = _Tmux(_screen("codex_exec-permission"))
    asked: list[str] = []
    with trio.fail_after(30):
        async with _store(tmp_path) as store:
            board = TerminalBoard()
            actor = TerminalActor(
                IDENTITY, None, cast(ClientLink, tmux), board, store, print,
                refresh_soon=lambda: asked.append("refresh"),
            )  # fmt: skip
            await actor.started()
            qualified = attrs.evolve(IDENTITY, profile=PROFILE.id, profile_reason=None)
            await actor.receive(Rebind(qualified, PROFILE))
            snapshot = board.get(IDENTITY.terminal_id)
            assert snapshot is not None and snapshot.busy  # held: no file shows its call
            assert asked == ["refresh"]
            cols, rows = map(int, tmux.screen[1].split())
            assert await actor.receive(Refresh(cols, rows)) == PENDING_POLL
            assert asked == ["refresh"]  # the pacer follows a Refresh's reply
    assert tmux.keys == []
