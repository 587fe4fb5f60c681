"""The Claude the headless backend runs: a pinned binary, its config dir, its environment.

`akk serve --claude-bin PATH` (default `claude` on PATH) and `--claude-config-dir
DIR` (default $CLAUDE_CONFIG_DIR, else ~/.claude). `find_claude` reads the
binary's version (`VersionCache`, as `find_codex` does); only a version AKK pins
(`akk.profiles.claude.versions.PROFILES`) runs. Otherwise the backend is
unavailable and a send is refused with the reason and a next step, nothing
started.
"""

from __future__ import annotations

import os

import attrs
import trio

from akk.discovery.process import VersionCache, executable
from akk.profiles.claude.versions import PROFILES


@attrs.frozen
class ClaudeSetup:
    """The pinned Claude binary, the config dir it runs with, and its environment."""

    binary: str
    config_dir: str
    version: str
    env: tuple[tuple[str, str], ...] | None = None
    """The process environment (None: AKK's own); CLAUDE_CONFIG_DIR is set either way."""


def pinned() -> tuple[str, ...]:
    """The Claude versions the headless backend runs."""
    return tuple(profile.version for profile in PROFILES)


def config_dir(given: str | None) -> str:
    """The config dir: ``given``, else $CLAUDE_CONFIG_DIR, else ~/.claude."""
    if given is not None:
        return os.path.abspath(given)
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")


async def find_claude(binary: str | None, config: str, versions: VersionCache) -> ClaudeSetup | str:
    """The pinned Claude at ``binary`` (None: `claude` on PATH), or why there is none."""
    found = await trio.to_thread.run_sync(executable, binary, "claude", "--claude-bin")
    if not os.path.isabs(found):
        return found
    version = await versions.version_of_program("claude", [found])
    if version is None:
        return f"{found}: `--version` printed no Claude Code version"
    if version not in pinned():
        return f"Claude Code {version} is not pinned ({', '.join(pinned())} are)"
    return ClaudeSetup(binary=found, config_dir=config, version=version)
