"""The protocol names of the backends: the ones that keep sessions (what `send {scope,
backend}` takes) and the ones a Watch of a person's task by its native id runs on.

One list, read by the registry (a backend that keeps sessions registers under one of
these names) and by the CLI's ``--backend`` choices, which start no service. A new
session backend adds its name here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Only a type: the evidence model imports trio, and the CLI reads these names to build
    # its command line.
    from akk.evidence.model import Agent

CODEX_APP_SERVER = "codex_app_server"
"""The Codex app-server backend (`akk.backends.codex_app_server`)."""

CLAUDE_HEADLESS = "claude_headless"
"""The Claude Code headless backend (`akk.backends.claude_headless`)."""

SESSION_BACKENDS: tuple[str, ...] = (CODEX_APP_SERVER, CLAUDE_HEADLESS)
"""Every session backend's name; the first is a --scope send's default."""

CODEX_THREAD = "codex_thread"
"""Watches of a person's Codex thread by its rollout (`akk.backends.file_watch`)."""

CLAUDE_SESSION = "claude_session"
"""Watches of a person's Claude session by its transcript (`akk.backends.file_watch`)."""

FILE_WATCHES: dict[Agent, str] = {"codex": CODEX_THREAD, "claude": CLAUDE_SESSION}
"""Per agent family, the backend its Watches by native id run on."""
