"""The protocol names of the backends that keep sessions: what `send {scope, backend}` takes.

One list, read by the registry (a backend that keeps sessions registers under one of
these names) and by the CLI's ``--backend`` choices, which start no service. A new
session backend adds its name here.
"""

from __future__ import annotations

CODEX_APP_SERVER = "codex_app_server"
"""The Codex app-server backend (`akk.backends.codex_app_server`)."""

CLAUDE_HEADLESS = "claude_headless"
"""The Claude Code headless backend (`akk.backends.claude_headless`)."""

SESSION_BACKENDS: tuple[str, ...] = (CODEX_APP_SERVER, CLAUDE_HEADLESS)
"""Every session backend's name; the first is a --scope send's default."""
