"""Claude Code's editor mode, read from the agent's own settings: does its composer take keys?

With ``editorMode: vim`` the composer has vim modes. INSERT starts the hint row
with ``-- INSERT --`` (`Observation.composer_mode`); NORMAL draws no mark at all,
so an empty NORMAL composer is the default idle one cell for cell, and text typed
there would be vim commands (the lab saw ``l`` move and ``a`` open INSERT). So a
sender needs the mark on screen whenever the setting says vim.

Every pinned version (2.1.263 to 2.1.332) takes the setting from its merged
settings first, then from its global config (``editorMode: settings.editorMode ??
config.editorMode``, default ``normal``). The settings are the managed file, then
the project's local and shared files under the agent's working directory, then
the user's ``<config>/settings.json``; the global config is
``$CLAUDE_CONFIG_DIR/.claude.json``, else ``$HOME/.claude.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from akk.discovery.process import PROC, read_process
from akk.evidence.locate import config_directory, environ_of
from akk.evidence.model import EvidenceUnavailable

MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")
VIM = "vim"


def editor_mode(
    pid: int, cwd: str | None, proc: Path = PROC, managed: Path = MANAGED_SETTINGS
) -> str | None:
    """``vim``, ``normal`` (or another value Claude keeps), or None when the process's
    environment cannot be read or it was started with ``--settings`` (unknown)."""
    info = read_process(pid, proc)
    if info is None:
        return None
    if "--settings" in info.argv:
        return None  # settings given on the command line: not read here
    try:
        environ = environ_of(pid, proc)
        config = config_directory(pid, environ, proc, "CLAUDE_CONFIG_DIR", ".claude")
    except EvidenceUnavailable:
        return None
    project = [] if cwd is None else [Path(cwd) / ".claude" / name for name in _PROJECT]
    for path in (managed, *project, config / "settings.json"):
        mode = _setting(path)
        if mode is not None:
            return mode
    # `config` is $CLAUDE_CONFIG_DIR, else $HOME/.claude: the global config sits in the former
    # or beside the latter.
    chosen = environ.get("CLAUDE_CONFIG_DIR")
    return _setting((config if chosen else config.parent) / ".claude.json") or "normal"


_PROJECT = ("settings.local.json", "settings.json")


def _setting(path: Path) -> str | None:
    """The file's ``editorMode`` if it sets one as a string (a missing or broken file sets none)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    mode = data.get("editorMode") if isinstance(data, dict) else None
    return mode if isinstance(mode, str) else None
