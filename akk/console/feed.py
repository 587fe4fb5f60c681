"""The console's live view: pushed to every console that follows it, whenever it changes.

A console calls the operator method ``console_follow``; its answer is the
whole view, every pane's screen and the latest events. From then on the feed
pushes a ``console_view`` notification each time the view (every row but the
screens) changes, a ``console_screen`` notification each time one pane's screen
does, and a ``console_event`` notification for each event recorded for any
controller. A screen goes out alone, so a pane that prints costs its own
screen, not the whole view.
Changes are noticed by version (the board's and the store's), checked at most
``interval`` apart, so a burst of changes is one push and an idle server
sends nothing. What the operator sees is what `list` shows the operator,
plus each pane's screen (redacted, or withheld when it asks for a secret,
`akk.console.screen`) and the qualify step for a pane without a profile.

A console that does not read its pushes within ``SEND_TIMEOUT`` is closed,
as any connection that stops reading is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import trio

import akk
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot
from akk.console.screen import screen_view
from akk.methods.common import Closable
from akk.methods.list_view import ListView
from akk.profiles.registry import qualify_command
from akk.protocol.jsonrpc import Encoded
from akk.store import dispatches, outbox
from akk.store.reader import StoreReader

SEND_TIMEOUT = 10.0
RECENT_EVENTS = 100
"""Events a console gets when it starts following."""
EVENT_BATCH = 200
"""Events read per push; more wait for the next one."""
RECENT_RECORDS = 50
"""Settled Turns (and Watches) the view shows beside every open one, the newest first;
`akk list` shows them all."""
MAX_FOLLOWERS = 16
SCREEN_INTERVAL = 1.0
"""Seconds between two renderings of one pane's screen. A pane that changes after a quiet
spell is drawn at once; one that keeps changing (a spinner) once per interval, so the
console's cost stays bounded by the number of panes, not by how fast they print."""
FOLLOWERS_FULL = 4009
"""The close code of the oldest console when one more than MAX_FOLLOWERS follows."""


@attrs.define(eq=False)
class _Following:
    cursor: int  # the last event position this console was sent
    view: str  # the view it was sent last
    screens: dict[str, str]  # each pane's screen it was sent last


@attrs.frozen
class _View:
    """The view at one moment: every row but the screens, and each pane's screen, as JSON."""

    rows: str
    screens: dict[str, str]


class ConsoleFeed:
    """Builds the operator's view and pushes its changes to the consoles that follow it."""

    def __init__(
        self,
        board: TerminalBoard,
        reader: StoreReader,
        tmux: Callable[[], list[dict[str, Any]]],
        *,
        interval: float = 0.1,
    ) -> None:
        """``tmux``: each watcher's health (`WatcherHealth.report`)."""
        self._board = board
        self._reader = reader
        self._tmux = tmux
        self._interval = interval
        self._list = ListView(board, reader)
        self._followers: dict[Closable, _Following] = {}
        self._joined = trio.Event()
        self._screens: dict[str, tuple[TerminalSnapshot, str, float]] = {}
        self._behind = False  # a screen changed within its interval: drawn at a later tick
        self._stages: tuple[int, list[str], dict[str, list[dispatches.Dispatch]]] | None = None

    async def follow(self, follower: Closable) -> Encoded:
        """Start pushing to ``follower``; the view now and the latest events."""
        if follower not in self._followers and len(self._followers) >= MAX_FOLLOWERS:
            oldest = next(iter(self._followers))
            del self._followers[oldest]
            oldest.close_soon(FOLLOWERS_FULL, "a newer console took this one's place")
        view = await self._view()
        recent = await self._reader.run(lambda conn: outbox.tap(conn, None, RECENT_EVENTS))
        cursor = recent[-1][0] if recent else 0  # none at all yet: every event is new
        self._followers[follower] = _Following(cursor, view.rows, dict(view.screens))
        self._joined.set()
        events = ",".join(json.dumps(event) for _, event in recent)
        screens = ",".join(f"{json.dumps(t)}:{screen}" for t, screen in view.screens.items())
        return Encoded(f'{{"view":{view.rows},"screens":{{{screens}}},"events":[{events}]}}')

    async def run(self) -> None:
        """Push changes until cancelled (a plain task under the root supervisor)."""
        seen: tuple[int, int, str] | None = None
        while True:
            if not self._followers:
                await self._joined.wait()
                self._joined = trio.Event()
                seen = None
            await trio.sleep(self._interval)
            now = (self._board.version, await self._reader.version(), json.dumps(self._tmux()))
            if now == seen and not self._behind:
                continue
            seen = now
            await self._push()

    async def _push(self) -> None:
        view = await self._view()
        followers = list(self._followers.items())
        if not followers:
            return
        after = min(following.cursor for _, following in followers)
        events = await self._reader.run(lambda conn: outbox.tap(conn, after, EVENT_BATCH))
        async with trio.open_nursery() as nursery:
            for follower, following in followers:
                nursery.start_soon(self._send, follower, following, view, events)

    async def _send(
        self,
        follower: Closable,
        following: _Following,
        view: _View,
        events: list[tuple[int, dict[str, Any]]],
    ) -> None:
        frames = []
        if view.rows != following.view:
            frames.append(f'{{"jsonrpc":"2.0","method":"console_view","params":{view.rows}}}')
        for terminal_id, screen in view.screens.items():
            if following.screens.get(terminal_id) != screen:
                frames.append(
                    '{"jsonrpc":"2.0","method":"console_screen","params":{"terminal_id":'
                    f'{json.dumps(terminal_id)},"screen":{screen}}}}}'
                )
        fresh = [(position, event) for position, event in events if position > following.cursor]
        frames += [
            json.dumps({"jsonrpc": "2.0", "method": "console_event", "params": event})
            for _, event in fresh
        ]
        for frame in frames:
            if not await follower.send_frame(frame, timeout=SEND_TIMEOUT):
                self._followers.pop(follower, None)
                return
        following.view, following.screens = view.rows, dict(view.screens)
        if fresh:
            following.cursor = fresh[-1][0]

    async def _view(self) -> _View:
        listing = json.loads((await self._list.listing(None, ())).json)
        self._behind = False
        screens = {}
        for row in listing["terminals"]:
            terminal_id = row["terminal_id"]
            snapshot = self._board.get(terminal_id)
            if snapshot is not None:
                screens[terminal_id] = self._screen(terminal_id, snapshot)
            row["next_step"] = (
                qualify_command(row["agent"], snapshot.identity.binary)
                if snapshot is not None and row["profile"] is None and row["version"] is not None
                else None
            )
        for gone in set(self._screens) - set(screens):
            del self._screens[gone]
        older = {}
        for kind in ("turns", "watches"):
            listing[kind], older[kind] = _recent(listing[kind])
        stages = await self._stages_of([row["watch_id"] for row in listing["turns"]])
        for row in listing["turns"]:
            row["stages"] = [_stage(d) for d in stages.get(row["watch_id"], ())]
        listing["older"] = older
        server = {"version": akk.__version__, "tmux": [_tmux_row(h) for h in self._tmux()]}
        return _View(json.dumps({"server": server} | listing), screens)

    async def _stages_of(self, turn_ids: list[str]) -> dict[str, list[dispatches.Dispatch]]:
        """The Turns' dispatches, read again only when the store changed or the Turns did."""
        version = await self._reader.version()
        cached = self._stages
        if cached is not None and cached[0] == version and cached[1] == turn_ids:
            return cached[2]
        found = await self._reader.run(lambda conn: dispatches.of_turns(conn, turn_ids))
        self._stages = (version, turn_ids, found)
        return found

    def _screen(self, terminal_id: str, snapshot: TerminalSnapshot) -> str:
        """The pane's screen as JSON, made again when its snapshot was replaced (at most once
        per SCREEN_INTERVAL)."""
        cached = self._screens.get(terminal_id)
        now = trio.current_time()
        if cached is not None and cached[0] is snapshot:
            return cached[1]
        if cached is not None and now - cached[2] < SCREEN_INTERVAL:
            self._behind = True
            return cached[1]
        shown = json.dumps(
            screen_view(
                snapshot.lines,
                snapshot.grid,
                secret=snapshot.secret_question,
                seen=snapshot.seen_secrets,
            )
        )
        self._screens[terminal_id] = (snapshot, shown, now)
        return shown


def _recent(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Every record not yet settled, and the RECENT_RECORDS settled last; how many are left out."""
    settled = [r for r in records if r["settled_at"] is not None]
    settled.sort(key=lambda r: r["settled_at"], reverse=True)
    kept = {id(r) for r in settled[:RECENT_RECORDS]}
    shown = [r for r in records if r["settled_at"] is None or id(r) in kept]
    return shown, len(records) - len(shown)


def _stage(dispatch: dispatches.Dispatch) -> dict[str, Any]:
    """One input-bearing step of a Turn as the console lists it: what, how far, for whom."""
    public = dispatch.public()
    return {key: public[key] for key in ("kind", "stage", "controller_id", "reason", "updated_at")}


def _tmux_row(health: dict[str, Any]) -> dict[str, Any]:
    """A watcher as the console shows it: its socket, whether a tmux server answers, why not."""
    detail = health.get("last_error")
    if not health.get("attached") and health.get("retry_in") is not None:
        detail = f"{detail or 'no tmux server'}; trying again in {health['retry_in']:.0f} s"
    return {
        "socket": health.get("socket"),
        "state": "running" if health.get("attached") else "absent",
        "detail": None if health.get("attached") else detail,
    }
