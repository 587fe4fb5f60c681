"""The Claude the headless backend runs: its binary, config dir and environment, and whether
it may run.

`akk serve --claude-bin PATH` (default `claude` on PATH) and `--claude-config-dir
DIR` (default $CLAUDE_CONFIG_DIR, else ~/.claude). `find_claude` reads the
binary's version (`VersionCache`, as `find_codex` does). A pinned version
(`akk.profiles.claude.versions.PROFILES`, or the server's registry) runs. Any
other version is hashed once at the start and runs only while `refusal` finds,
at each send, a qualification row of that version (docs/qualify.md) whose
report proves the headless protocol (`HEADLESS_CHECKS`, proven by
`akk.qualify.headless`) for this very binary (its SHA-256). Otherwise a send is
refused with the reason and the next step, nothing started.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from akk.discovery.process import NotExecutable, VersionCache, executable, sha256_file
from akk.profiles.claude.versions import PROFILES
from akk.profiles.registry import Registry, qualify_command
from akk.store.qualifications import Entry, Malformed

HEADLESS_CHECKS = (
    "init_session",
    "task_once",
    "bash_allow",
    "question_answer",
    "result_usage",
    "transcript",
    "resume",
    "exits",
)
"""What a qualification must have proven of a binary before this backend runs it (every
fact the backend relies on, in the order `akk.qualify.headless.prove` checks them):
`system/init` carries the `--session-id` AKK chose and the `default` permission mode; the
user line reaches the model once; a Bash `can_use_tool` answered with AKK's allow runs
the command once; an AskUserQuestion answered in AKK's shape reaches the model once; a
`result` carries the final text and the usage the model sent; the transcript is where
`transcript.path` says and reads the round done; `--resume` continues the same session
and file; each process exits 0 once its input closes, and nothing of it is left."""

FileKey = tuple[int, int, int, int, int]
"""A file's identity now: device, inode, mtime and ctime (ns), size. The ctime too, since a
write in place can put the mtime back (``touch -r``) but never the ctime."""


@attrs.frozen
class ClaudeSetup:
    """The Claude binary, the config dir it runs with, and its environment."""

    binary: str
    config_dir: str
    version: str
    env: tuple[tuple[str, str], ...] | None = None
    """The process environment (None: AKK's own); CLAUDE_CONFIG_DIR is set either way."""
    pinned: bool = True
    """False: a version only a qualification lets run (`refusal` decides at each send)."""
    binary_sha256: str | None = None
    """The binary's SHA-256 when it was found (unpinned only; pinned versions are not hashed)."""
    binary_key: FileKey | None = None
    """The identity of the file that was hashed (unpinned only)."""


def pinned(registry: Registry | None = None) -> tuple[str, ...]:
    """The Claude versions the headless backend runs as they are (None: every pinned one)."""
    if registry is None:
        return tuple(profile.version for profile in PROFILES)
    return tuple(version for agent, version in registry.pinned if agent == "claude")


def config_dir(given: str | None) -> str:
    """The config dir: ``given``, else $CLAUDE_CONFIG_DIR, else ~/.claude."""
    if given is not None:
        return os.path.abspath(given)
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")


async def find_claude(
    binary: str | None, config: str, versions: VersionCache, registry: Registry | None = None
) -> ClaudeSetup | str:
    """The Claude at ``binary`` (None: `claude` on PATH), or why there is none.

    ``registry``: the pinned set (None: every pinned version). A version it lacks
    is hashed here, in a worker thread, for `refusal`.
    """
    try:
        found = await trio.to_thread.run_sync(executable, binary, "claude", "--claude-bin")
    except NotExecutable as exc:
        return str(exc)
    version = await versions.version_of_program("claude", [found])
    if version is None:
        return f"{found}: `--version` printed no Claude Code version"
    if version in pinned(registry):
        return ClaudeSetup(binary=found, config_dir=config, version=version)
    try:
        key, sha = await trio.to_thread.run_sync(_hash, found)
    except OSError as exc:
        return f"{found}: cannot be read to check its qualification ({exc})"
    return ClaudeSetup(
        binary=found, config_dir=config, version=version, pinned=False,
        binary_sha256=sha, binary_key=key,
    )  # fmt: skip


async def rehashed(setup: ClaudeSetup) -> ClaudeSetup:
    """``setup`` with the SHA-256 of the file at its binary now: hashed again only when the
    file's identity changed (replaced, rebuilt); pinned setups as they are.

    A file that cannot be read any more keeps no digest (`refusal` then refuses).
    """
    if setup.pinned:
        return setup
    try:
        key = await trio.to_thread.run_sync(_key, setup.binary)
        if key == setup.binary_key:
            return setup
        key, sha = await trio.to_thread.run_sync(_hash, setup.binary)
    except OSError:
        return attrs.evolve(setup, binary_sha256=None, binary_key=None)
    return attrs.evolve(setup, binary_sha256=sha, binary_key=key)


def refusal(
    setup: ClaudeSetup, entry: Entry | None, registry: Registry | None = None
) -> str | None:
    """Why the headless backend may not run ``setup``'s binary now (None: it may).

    ``entry``: the store's judged qualification row of (claude, setup.version), if
    any. A pinned version runs. Any other runs only under a valid row whose
    SHA-256 is the binary's (as hashed last, `rehashed`) and whose report proves
    every one of `HEADLESS_CHECKS`. Each reason names the next step.
    """
    if setup.pinned:
        return None
    command = qualify_command("claude", setup.binary)
    known = ", ".join(pinned(registry))
    if entry is None:
        return (
            f"unpinned_version: Claude Code {setup.version} at {setup.binary} is not pinned "
            f"({known} are) and has no qualification; qualify it with `{command}`"
        )
    if isinstance(entry, Malformed):
        return (
            f"{entry.reason}; revoke it with `akk qualify --revoke claude {setup.version}` "
            f"and qualify again with `{command}`"
        )
    if setup.binary_sha256 != entry.binary_sha256:
        runs = "cannot be read" if setup.binary_sha256 is None else setup.binary_sha256[:16]
        return (
            f"qualified_binary_differs: Claude Code {setup.version} is qualified for the binary "
            f"with SHA-256 {entry.binary_sha256[:16]}…, {setup.binary} is {runs}; qualify this "
            f"binary with `{command}`"
        )
    missing = headless_unproven(entry.report)
    if missing is not None:
        return (
            f"headless_unproven: the qualification of Claude Code {setup.version} does not prove "
            f"the headless protocol ({missing}); qualify it again with `{command}`"
        )
    return None


def headless_unproven(report: Mapping[str, Any]) -> str | None:
    """What a qualification report lacks of the headless proof (None: every check held)."""
    proof = report.get("headless")
    if not isinstance(proof, dict):
        return "its report has no headless proof: it was qualified for panes only"
    if proof.get("proven") is not True:
        return f"not proven: {str(proof.get('problem'))[:200]}"
    held = proof.get("checks")
    missing = [c for c in HEADLESS_CHECKS if not isinstance(held, list) or c not in held]
    if missing:
        return f"unchecked: {', '.join(missing)}"
    return None


def _key(path: str) -> FileKey:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _hash(path: str) -> tuple[FileKey, str]:
    """The file's identity and SHA-256; OSError if it changed while it was read."""
    before = _key(path)
    sha = sha256_file(path)
    if _key(path) != before:
        raise OSError(f"{path} changed while it was hashed")
    return before, sha
