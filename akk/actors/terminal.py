"""TerminalActor: one pane. Capture → pyte grid → profile → Observation.

It is the only code that reads a pane's screen for classification, and (from
a later capability on) the only code that sends keys to it. It publishes each
new Observation on the TerminalBoard; nobody asks it for news.
"""

from __future__ import annotations

import logging

import attrs
import trio

from akk.actors.runtime import Actor, Rank
from akk.profiles.observation import Observation, State
from akk.profiles.registry import Profile
from akk.screen.fingerprint import fingerprint
from akk.screen.grid import Grid
from akk.screen.render import CaptureMismatch, render
from akk.terminals import TerminalBoard, TerminalIdentity, TerminalSnapshot
from akk.tmux.control import ControlClient, ControlClientClosed, TmuxCommandError
from akk.tmux.panes import capture

log = logging.getLogger("akk.terminal")


@attrs.frozen
class Refresh:
    """The pane may have changed; ``cols`` x ``rows`` is its size as last listed."""

    cols: int
    rows: int


class TerminalActor(Actor):
    """Keeps one pane's current Observation up to date."""

    rank = Rank.TERMINAL
    mailbox_size = 4  # a queued Refresh already covers any later change

    def __init__(
        self,
        identity: TerminalIdentity,
        profile: Profile | None,
        client: ControlClient,
        board: TerminalBoard,
    ) -> None:
        self._identity = identity
        self._profile = profile
        self._client = client
        self._board = board
        self._last: tuple[str, int, int] | None = None

    async def started(self) -> None:
        self._board.announce(self._identity, trio.current_time())

    async def stopped(self) -> None:
        self._board.retire(self._identity.terminal_id)

    async def receive(self, message: object) -> object:
        if not isinstance(message, Refresh):
            raise TypeError(f"TerminalActor cannot handle {type(message).__name__}")
        await self._observe(message.cols, message.rows)
        return None

    async def _observe(self, cols: int, rows: int) -> None:
        try:
            screen = await capture(self._client, self._identity.pane_id)
        except (TmuxCommandError, ControlClientClosed):
            # The pane went away between listing and capture; the watcher retires us.
            return
        if screen.count("\n") != rows:
            # tmux does not escape command output, so a pane row that mimics the
            # control protocol could cut a capture short: never classify a partial screen.
            return
        if self._last == (screen, cols, rows):
            return
        self._last = (screen, cols, rows)
        try:
            grid = render(screen, cols, rows)
        except CaptureMismatch:
            # Resized between listing and capture: the next listing brings the new size.
            return
        observation = self._classify(grid)
        prompt_fp = None
        if observation.prompt is not None and self._profile is not None:
            prompt_fp = fingerprint(
                grid,
                observation.prompt.region,
                profile_id=self._profile.id,
                terminal_identity=self._identity.fingerprint_identity,
            )
        self._board.publish(
            TerminalSnapshot(
                identity=self._identity,
                observation=observation,
                fingerprint=prompt_fp,
                lines=grid.lines(),
                observed_at=trio.current_time(),
            )
        )

    def _classify(self, grid: Grid) -> Observation:
        if self._profile is None:
            # Without the exact version's profile nothing on screen can be trusted.
            return Observation(
                State.UNKNOWN, None, reason=self._identity.profile_reason or "no_profile"
            )
        return self._profile.classify(grid)
