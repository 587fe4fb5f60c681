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
only on the command line was once read as unknown, and unknown once let a send
through: the lab saw both typed into NORMAL mode (tests/lab/test_vim_mode.py).
Now what cannot be read raises, and the sender types only under the mark.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from akk.discovery.process import PROC, read_process
from akk.evidence.locate import config_directory, environ_of
from akk.evidence.model import EvidenceReason, EvidenceUnavailable

MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")
VIM = "vim"


def editor_mode(
    pid: int, cwd: str | None, proc: Path = PROC, managed: Path = MANAGED_SETTINGS
) -> str:
    """``vim``, ``normal`` (or another value Claude keeps).

    Raises EvidenceUnavailable when it cannot be known: the process is gone, its
    environment cannot be read, or the settings its command line gives
    (``--settings``) cannot be read; the message says which, and what a person can do.
    """
    info = read_process(pid, proc)
    if info is None:
        raise EvidenceUnavailable(
            EvidenceReason.PROCESS_GONE, f"process {pid} is gone or is starting another program"
        )
    given = _given_settings(info.argv, info.cwd)
    environ = environ_of(pid, proc)
    config = config_directory(pid, environ, proc, "CLAUDE_CONFIG_DIR", ".claude")
    project = [] if cwd is None else [Path(cwd) / ".claude" / name for name in _PROJECT]
    # Claude's order: managed, then the command line's, the project's and the user's.
    files = [_setting(path) for path in (*project, config / "settings.json")]
    for mode in (_setting(managed), given, *files):
        if mode is not None:
            return mode
    # `config` is $CLAUDE_CONFIG_DIR, else $HOME/.claude: the global config sits in the former
    # or beside the latter.
    chosen = environ.get("CLAUDE_CONFIG_DIR")
    return _setting((config if chosen else config.parent) / ".claude.json") or "normal"


_PROJECT = ("settings.local.json", "settings.json")


def _given_settings(argv: Sequence[str], cwd: str | None) -> str | None:
    """The ``editorMode`` of the settings ``--settings`` gives (its last value: a JSON text,
    or a file, relative to the process's ``cwd``); None without the flag, or when they set
    none.

    Raises EvidenceUnavailable when that text or file cannot be read. A vim mode given
    only here is as real as one in a file: typed text would be vim commands in its
    NORMAL mode.
    """
    value = None
    for at, arg in enumerate(argv):
        if arg == "--settings" and at + 1 < len(argv):
            value = argv[at + 1]
        elif arg.startswith("--settings="):
            value = arg.removeprefix("--settings=")
    if value is None:
        return None
    text = value.strip()
    if not text.startswith("{"):
        text = _read_given(text, cwd)
    try:
        return _mode_in(json.loads(text))
    except ValueError as exc:
        raise EvidenceUnavailable(
            EvidenceReason.PROCESS_UNREADABLE,
            "the --settings the agent was started with are not JSON; start it again with "
            "settings it can read",
        ) from exc


def _read_given(name: str, cwd: str | None) -> str:
    if cwd is None and not os.path.isabs(name):
        why = "the agent's working directory cannot be read"
    else:
        try:
            return Path(cwd or "/", name).read_text()
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
    raise EvidenceUnavailable(
        EvidenceReason.PROCESS_UNREADABLE,
        f"the --settings file {name[:200]!r} the agent was started with cannot be read ({why}); "
        "put it back, or start the agent again",
    )


def _setting(path: Path) -> str | None:
    """The file's ``editorMode`` if it sets one as a string (a missing or broken file sets none)."""
    try:
        return _mode_in(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _mode_in(data: object) -> str | None:
    mode = data.get("editorMode") if isinstance(data, dict) else None
    return mode if isinstance(mode, str) else None
