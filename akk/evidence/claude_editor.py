"""Claude Code's editor mode, read from the agent's own settings: does its composer take keys?

With ``editorMode: vim`` the composer has vim modes. INSERT starts the hint row
with ``-- INSERT --`` (`Observation.composer_mode`); NORMAL draws no mark at all,
so an empty NORMAL composer is the default idle one cell for cell, and text typed
there would be vim commands (the lab saw ``l`` move and ``a`` open INSERT). So a
sender needs the mark on screen whenever the setting says vim.

Every pinned version (2.1.263 to 2.1.332) takes the setting from its merged
settings first, then from its global config (``editorMode: settings.editorMode ??
config.editorMode``, default ``normal``). The settings are the managed file, then
what the command line gives (``--settings``: a JSON text, or a file relative to the
agent's working directory), then the project's local and shared files under that
directory, then the user's ``<config>/settings.json``; the global config is
``$CLAUDE_CONFIG_DIR/.claude.json``, else ``$HOME/.claude.json``. A vim mode given
only on the command line was once read as unknown, and the lab saw a send typed
into its NORMAL mode (tests/lab/test_vim_mode.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from akk.discovery.process import PROC, read_process
from akk.evidence.locate import config_directory, environ_of
from akk.evidence.model import EvidenceUnavailable

MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")
VIM = "vim"


def editor_mode(
    pid: int, cwd: str | None, proc: Path = PROC, managed: Path = MANAGED_SETTINGS
) -> str | None:
    """``vim``, ``normal`` (or another value Claude keeps), or None when the process's
    environment, or the settings its command line gives (``--settings``), cannot be read
    (unknown)."""
    info = read_process(pid, proc)
    if info is None:
        return None
    given = _given_settings(info.argv, info.cwd)
    if given is None:
        return None
    try:
        environ = environ_of(pid, proc)
        config = config_directory(pid, environ, proc, "CLAUDE_CONFIG_DIR", ".claude")
    except EvidenceUnavailable:
        return None
    project = [] if cwd is None else [Path(cwd) / ".claude" / name for name in _PROJECT]
    # Claude's order: managed, then the command line's, the project's and the user's.
    files = [_setting(path) for path in (*project, config / "settings.json")]
    for mode in (_setting(managed), given.mode, *files):
        if mode is not None:
            return mode
    # `config` is $CLAUDE_CONFIG_DIR, else $HOME/.claude: the global config sits in the former
    # or beside the latter.
    chosen = environ.get("CLAUDE_CONFIG_DIR")
    return _setting((config if chosen else config.parent) / ".claude.json") or "normal"


_PROJECT = ("settings.local.json", "settings.json")


@attrs.frozen
class _Given:
    """What the command line's settings set as ``editorMode`` (None: they set none)."""

    mode: str | None


def _given_settings(argv: Sequence[str], cwd: str | None) -> _Given | None:
    """The ``editorMode`` of the settings ``--settings`` gives (its last value: a JSON text,
    or a file, relative to the process's ``cwd``); None when that text or file cannot be read.

    Without the flag: ``_Given(None)``. A vim mode given only here is as real as one in a
    file: typed text would be vim commands in its NORMAL mode.
    """
    value = None
    for at, arg in enumerate(argv):
        if arg == "--settings" and at + 1 < len(argv):
            value = argv[at + 1]
        elif arg.startswith("--settings="):
            value = arg.removeprefix("--settings=")
    if value is None:
        return _Given(None)
    text = value.strip()
    if not text.startswith("{"):
        if not os.path.isabs(text) and cwd is None:
            return None
        try:
            text = Path(cwd or "/", text).read_text()
        except OSError:
            return None
    try:
        return _Given(_mode_in(json.loads(text)))
    except ValueError:
        return None


def _setting(path: Path) -> str | None:
    """The file's ``editorMode`` if it sets one as a string (a missing or broken file sets none)."""
    try:
        return _mode_in(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _mode_in(data: object) -> str | None:
    mode = data.get("editorMode") if isinstance(data, dict) else None
    return mode if isinstance(mode, str) else None
