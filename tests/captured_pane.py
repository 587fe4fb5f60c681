"""A stand-in for tmux whose one Claude 2.1.332 pane shows captured screens.

The Observer reads it as it reads a real pane (``capture-pane``), so a test sets
``screen`` to the rows of a fixture (or a changed copy) and observes.
"""

from __future__ import annotations

from akk.discovery.identity import TerminalIdentity
from akk.profiles.registry import PROFILES

VERSION = "2.1.332"
PROFILE = PROFILES[("claude", VERSION)]
IDENTITY = TerminalIdentity(
    terminal_id="t1", tmux_socket="s", pane_id="%1", pane_pid=1, agent="claude",
    agent_pid=101, process_start=3, executable="claude", version=VERSION, cwd=None,
    profile=PROFILE.id, profile_reason=None,
)  # fmt: skip


class CapturedPane:
    """A tmux link whose one pane shows ``screen`` (rows as captured, escapes kept)."""

    def __init__(self, screen: list[str] | None = None) -> None:
        self.screen = screen or []

    async def command(self, *args: str) -> list[str]:
        assert args[0] == "capture-pane"
        return self.screen

    def client(self) -> CapturedPane:
        return self
