"""The console's feed (`akk.console.feed`) on a real store and a real board.

A console that follows gets the whole view, every screen and the latest events;
then only what changed: a row change as `console_view`, a pane's new screen
alone as `console_screen` (at most once a second while it keeps changing, and
its last state always), and every controller's new event as `console_event`.
A console that stops reading is dropped, and one too many closes the oldest.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.console.feed import (
    FOLLOWERS_FULL,
    MAX_FOLLOWERS,
    RECENT_RECORDS,
    SCREEN_INTERVAL,
    ConsoleFeed,
)
from akk.profiles.observation import Observation, State
from akk.store import dispatches, outbox
from akk.store.dispatches import Kind, Stage
from tests.test_list_view import World, apply, identity, world

INTERVAL = 0.01


@attrs.define(eq=False)
class Console:
    """A console's connection as the feed sees it: every frame it was sent, decoded."""

    frames: list[dict[str, Any]] = attrs.field(factory=list)
    reading: bool = True
    closed: tuple[int, str] | None = None
    arrived: trio.Event = attrs.field(factory=trio.Event)

    async def send_frame(self, frame: str, *, timeout: float) -> bool:
        if not self.reading:
            return False
        self.frames.append(json.loads(frame))
        self.arrived.set()
        return True

    def close_soon(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def of(self, method: str) -> list[dict[str, Any]]:
        return [f["params"] for f in self.frames if f["method"] == method]

    async def until(self, method: str, count: int = 1) -> list[dict[str, Any]]:
        """Wait (within the test's deadline) for ``count`` frames of ``method``."""
        while len(self.of(method)) < count:
            self.arrived = trio.Event()
            await self.arrived.wait()
        return self.of(method)


@asynccontextmanager
async def feeding(tmp_path: Path) -> AsyncIterator[tuple[World, ConsoleFeed]]:
    with world(tmp_path / "akk.sqlite3") as w:
        tmux = [{"socket": "/tmp/sock", "attached": True}]
        feed = ConsoleFeed(w.board, w.reader, lambda: tmux, interval=INTERVAL)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(feed.run)
            yield w, feed
            nursery.cancel_scope.cancel()


def show(w: World, pane: int, *lines: str) -> None:
    """The pane's actor published a snapshot with this screen (and the same Observation)."""
    snapshot = w.board.get(f"term_{pane}")
    assert snapshot is not None
    w.board.publish(attrs.evolve(snapshot, lines=lines, seq=snapshot.seq + 1))


def event_for(w: World, controller_id: str, kind: str) -> None:
    with w.conn:
        outbox.enqueue(w.conn, controller_id=controller_id, turn_id=None, kind=kind,
                       body={"summary": kind}, now=time.time())  # fmt: skip


async def test_following_gets_everything_then_only_what_changed(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with feeding(tmp_path) as (w, feed):
            w.board.announce(identity(0, "/w", "claude-x"), None, trio.current_time())
            w.board.announce(identity(1, "/w", None), None, trio.current_time())
            show(w, 0, "hello", "> ")
            event_for(w, "ctl_a", "done")
            console = Console()
            first = json.loads((await feed.follow(console)).json)
            rows = {row["terminal_id"]: row for row in first["view"]["terminals"]}
            assert set(rows) == {"term_0", "term_1"}
            # A pane with no profile names the step that would give it one.
            assert rows["term_0"]["next_step"] is None and "qualify" in rows["term_1"]["next_step"]
            assert first["view"]["server"]["tmux"][0]["state"] == "running"
            assert [r[0][0] for r in first["screens"]["term_0"]["rows"]] == ["hello", ">"]
            (seen,) = first["events"]
            assert (seen["kind"], seen["controller_id"]) == ("done", "ctl_a")

            observation = Observation(State.WORKING, "claude-x")
            snapshot = w.board.get("term_0")
            assert snapshot is not None
            w.board.publish(attrs.evolve(snapshot, observation=observation, seq=snapshot.seq + 1))
            (view,) = await console.until("console_view")
            assert {r["terminal_id"]: r["activity_state"] for r in view["terminals"]} == {
                "term_0": "working", "term_1": "unknown"}  # fmt: skip
            assert not console.of("console_screen")  # the screen did not change: not sent

            show(w, 1, "another pane")
            (screen,) = await console.until("console_screen")
            assert screen["terminal_id"] == "term_1"
            assert screen["screen"]["rows"] == [[["another pane", 0]]]

            event_for(w, "ctl_b", "interaction_required")
            (tapped,) = await console.until("console_event")
            assert (tapped["kind"], tapped["controller_id"]) == ("interaction_required", "ctl_b")

            sent = len(console.frames)
            with trio.move_on_after(20 * INTERVAL):  # a quiet server pushes nothing
                await console.until("console_view", 2)
            assert len(console.frames) == sent


async def test_a_screen_that_keeps_changing_is_drawn_once_a_second_and_its_last_state_sent(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        async with feeding(tmp_path) as (w, feed):
            w.board.announce(identity(0, "/w", "claude-x"), None, trio.current_time())
            show(w, 0, "tick 0")
            console = Console()
            await feed.follow(console)
            began = trio.current_time()
            ticks = 0
            while trio.current_time() - began < 1.5 * SCREEN_INTERVAL:
                ticks += 1
                show(w, 0, f"tick {ticks}")
                await trio.sleep(SCREEN_INTERVAL / 20)
            drawn = len(console.of("console_screen"))
            assert 1 <= drawn <= 2, drawn  # not one per change (about 30)
            while console.of("console_screen")[-1]["screen"]["rows"] != [[[f"tick {ticks}", 0]]]:
                await console.until("console_screen", len(console.of("console_screen")) + 1)


async def test_a_console_that_stops_reading_is_dropped_and_one_too_many_closes_the_oldest(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        async with feeding(tmp_path) as (w, feed):
            w.board.announce(identity(0, "/w", "claude-x"), None, trio.current_time())
            stuck, live = Console(), Console()
            await feed.follow(stuck)
            await feed.follow(live)
            stuck.reading = False
            show(w, 0, "one")
            await live.until("console_screen")
            stuck.reading = True
            show(w, 0, "two")
            await trio.sleep(SCREEN_INTERVAL)  # the pane's next drawing may wait this long
            show(w, 0, "three")
            await live.until("console_screen", 2)
            assert not stuck.frames  # dropped at its first failed push, never sent again

            consoles = [Console() for _ in range(MAX_FOLLOWERS)]
            for console in consoles:
                await feed.follow(console)
            assert live.closed is not None and live.closed[0] == FOLLOWERS_FULL
            assert all(c.closed is None for c in consoles)


async def test_the_view_shows_every_open_record_the_latest_settled_ones_and_their_stages(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        async with feeding(tmp_path) as (w, feed):
            for n in range(RECENT_RECORDS + 10):
                apply(w, ("send", 0, 0))
                apply(w, ("settle", n))
            apply(w, ("send", 1, 1))  # the one open Turn
            open_id = w.records[-1]
            with w.conn:
                step = dispatches.reserve(
                    w.conn, controller_id="ctl_b", turn_id=open_id, terminal_id="term_1",
                    kind=Kind.ANSWER, typing=None, screen_seq=None, now=time.time(),
                )  # fmt: skip
                dispatches.advance(w.conn, step, Stage.ACCEPTED)
            view = json.loads((await feed.follow(Console())).json)["view"]
            shown = {row["turn_id"] for row in view["turns"]}
            assert len(shown) == RECENT_RECORDS + 1 and open_id in shown
            assert w.records[0] not in shown and w.records[RECENT_RECORDS + 9] in shown
            assert view["older"]["turns"] == 10
            (opened,) = [row for row in view["turns"] if row["turn_id"] == open_id]
            assert [(s["kind"], s["stage"], s["controller_id"]) for s in opened["stages"]] == [
                ("answer", "accepted", "ctl_b")
            ]
