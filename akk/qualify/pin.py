"""Pin the binary a qualification runs: the file it hashed, copied where only AKK writes.

A qualification names a binary by its SHA-256, so it must run exactly that
binary, never whatever its path holds a moment later. `pinned` refuses a file
that someone other than the person (or root) owns or could replace, hashes it
while copying it into a private directory (0700), checks the copy's hash (and,
under `--auto-qualify`, that it is the hash of what the pane runs) before
anything runs, and yields the copy: `--version` and every lab run of the
qualification start only it. The copy keeps the file's path below the private
directory, so a client that looks at where it is installed sees the same
install. It is removed when the block ends.

What is pinned, by what the file is:

- a native binary (Claude's platform package or native installer, Codex's
  vendored binary), or any other file such as a script: that one file. What
  it keeps beside it (Codex's `codex-resources`) or starts is not copied; the
  qualification judges the binary alone;
- Claude's pure-JS client (`@anthropic-ai/claude-code/cli.js`): its whole
  package directory, which node reads beside the script (`yoga.wasm`,
  `vendor/`), each file held to the same ownership rule. The SHA-256 is the
  script's, as discovery hashes a pure-JS pane (`DigestCache`); node is the
  system's (`#!/usr/bin/env node`), not pinned;
- an npm wrapper (`@openai/codex/bin/codex.js`, Claude's `cli-wrapper.cjs`):
  never run. It only starts the native binary of its package's layout, which
  is what a pane runs and discovery hashes; that binary is pinned, or the
  wrapper is refused when its package has none where the wrapper looks.
"""

from __future__ import annotations

import grp
import hashlib
import os
import platform
import pwd
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from akk.discovery.process import Agent, script_role, sha256_file

_ELF = b"\x7fELF"
_CHUNK = 1 << 20


class PinError(Exception):
    """The binary cannot be pinned: the reason, with its next step. Nothing ran."""


@attrs.frozen
class Pin:
    """A binary held for one qualification."""

    named: Path
    """The file the qualification names (real path): hashed, and shown in its report."""
    sha256: str
    runs: Path
    """Its private copy: the only file the qualification starts."""
    root: Path
    """The private directory that holds the copy."""


@asynccontextmanager
async def pinned(agent: Agent, given: Path, *, sha256: str | None = None) -> AsyncIterator[Pin]:
    """Pin ``given`` (an agent's binary, its pure-JS script or its npm wrapper) for one block.

    ``sha256``: the hash the copy must have (what a pane runs); another is
    refused before anything runs. Raises PinError with the reason. The private
    directory is removed when the block ends, however it ends.
    """
    held = await trio.to_thread.run_sync(_pin, agent, given, sha256)
    try:
        yield held
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(lambda: shutil.rmtree(held.root, ignore_errors=True))


def _pin(agent: Agent, given: Path, sha256: str | None) -> Pin:
    path = Path(os.path.realpath(given.expanduser()))
    if not path.is_file():
        raise PinError(f"no file at {given}")
    try:
        role = _role(agent, path)
        if role == "wrapper":
            path = _native_behind(agent, path)
        _trusted_dirs(path.parent)
        root = Path(tempfile.mkdtemp(prefix="akk-qualify-bin-"))
    except OSError as exc:
        raise PinError(f"{path} cannot be read: {exc}") from None
    try:
        runs = root / path.relative_to("/")
        if role == "pure_js":
            _copy_package(path.parent, runs.parent, path.name)
        else:
            runs.parent.mkdir(parents=True)
        digest = _copy_hashing(path, runs)
        if sha256 is not None and digest != sha256:
            raise PinError(
                f"{path} is not the binary the pane runs (its SHA-256 is {digest[:16]}…, the "
                f"pane's {sha256[:16]}…): it changed since the pane started it; nothing was run"
            )
        if sha256_file(runs) != digest:
            raise PinError(f"the private copy of {path} does not hash as {path} did; nothing ran")
    except BaseException as exc:
        shutil.rmtree(root, ignore_errors=True)
        if isinstance(exc, OSError):
            raise PinError(f"{path} could not be copied to run it: {exc}") from None
        raise
    return Pin(path, digest, runs, root)


def _role(agent: Agent, path: Path) -> str:
    """``native`` (any file run as it is), ``pure_js`` or ``wrapper``."""
    with open(path, "rb") as f:
        head = f.read(len(_ELF))
    role = None if head == _ELF else script_role(str(path))
    if role is None:
        return "native"
    if role[0] != agent:
        raise PinError(f"{path} is {role[0]}'s, not {agent}'s; qualify it with `akk qualify "
                       f"{role[0]} --binary {path}`")  # fmt: skip
    return role[1]


def _native_behind(agent: Agent, wrapper: Path) -> Path:
    """The native binary the npm wrapper ``wrapper`` starts: the first of its package's
    layouts, in the order the wrapper looks (`candidates`)."""
    looked = candidates(agent, wrapper)
    for native in looked:
        if native.is_file():
            return Path(os.path.realpath(native))
    raise PinError(
        f"{wrapper} is the npm wrapper of {agent}, which only starts a native binary, and its "
        f"package has none where it looks ({', '.join(map(str, looked))}); pass --binary with "
        f"the {agent} binary it starts (`ls -l /proc/PID/exe` of the running {agent})"
    )


def candidates(agent: Agent, wrapper: Path) -> list[Path]:
    """Where an npm wrapper of ``agent`` looks for its native binary, in its own order.

    Codex's `bin/codex.js` resolves `@openai/codex-linux-<arch>` (in its package's
    own node_modules, then beside it), else its package's `vendor/`. Claude's
    `cli-wrapper.cjs` (or `bin/claude*`) resolves `@anthropic-ai/claude-code-linux-<arch>`
    (`-musl` first on a musl system) the same way.
    """
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    if agent == "codex":
        package = wrapper.parent.parent
        vendor = f"vendor/{platform.machine()}-unknown-linux-musl"
        platform_package = f"@openai/codex-linux-{arch}"
        return [
            package / "node_modules" / platform_package / vendor / "bin" / "codex",
            package.parent.parent / platform_package / vendor / "bin" / "codex",
            package / vendor / "bin" / "codex",
            package / vendor / "codex" / "codex",
        ]
    package = wrapper.parent if wrapper.name.endswith(".cjs") else wrapper.parent.parent
    keys = [f"linux-{arch}", f"linux-{arch}-musl"]
    if platform.libc_ver()[0] != "glibc":
        keys.reverse()
    found = []
    for key in keys:
        name = f"@anthropic-ai/claude-code-{key}"
        found += [
            package / "node_modules" / name / "claude",
            package.parent.parent / name / "claude",
        ]
    return found


def _trusted_dirs(directory: Path) -> None:
    """Refuse ``directory`` or a directory above it that someone else could change."""
    for each in (*reversed(directory.parents), directory):
        st = os.stat(each)
        sticky = st.st_mode & stat.S_ISVTX
        _trusted(each, st, writable_ok=bool(sticky))


def _trusted(path: Path, st: os.stat_result, *, writable_ok: bool = False) -> None:
    """Refuse a file or directory that neither the person nor root owns, or that someone
    else may write (a sticky directory, such as /tmp, lets nobody replace what is not theirs)."""
    if st.st_uid not in (os.getuid(), 0):
        raise PinError(
            f"{path} is owned by uid {st.st_uid}, not by you or root: anyone who owns it could "
            "replace what AKK runs; qualify a binary installed by you or by root"
        )
    others = None if writable_ok else _other_writers(st)
    if others is not None:
        raise PinError(
            f"{path} is writable by others ({others}; mode {stat.S_IMODE(st.st_mode):o}): they "
            f"could replace what AKK runs; `chmod go-w {path}` and qualify it again"
        )


def _other_writers(st: os.stat_result) -> str | None:
    """Who besides the person and root may write a file of this mode (None: nobody)."""
    if st.st_mode & stat.S_IWOTH:
        return "every user"
    if not st.st_mode & stat.S_IWGRP:
        return None
    me = {os.getuid(), 0}
    try:
        group = grp.getgrgid(st.st_gid)
    except KeyError:
        return f"group {st.st_gid}"
    users = {u.pw_name for u in pwd.getpwall() if u.pw_gid == st.st_gid and u.pw_uid not in me}
    for name in group.gr_mem:
        try:
            if pwd.getpwnam(name).pw_uid not in me:
                users.add(name)
        except KeyError:
            users.add(name)
    return f"group {group.gr_name}: {', '.join(sorted(users))}" if users else None


def _copy_hashing(path: Path, to: Path) -> str:
    """Copy ``path`` to ``to`` (new, owner-only, executable); its SHA-256, read once."""
    digest = hashlib.sha256()
    source = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(source)
        if not stat.S_ISREG(st.st_mode):
            raise PinError(f"{path} is not a regular file")
        _trusted(path, st)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(to, flags, 0o500), "wb") as out:
            offset = 0
            while chunk := os.pread(source, _CHUNK, offset):
                digest.update(chunk)
                out.write(chunk)
                offset += len(chunk)
    finally:
        os.close(source)
    return digest.hexdigest()


def _copy_package(package: Path, to: Path, script: str) -> None:
    """Copy a pure-JS client's package directory, all but its script (`_copy_hashing`'s)."""

    def copy(source: str, target: str) -> None:
        _trusted(Path(source), os.stat(source))
        shutil.copy2(source, target)

    def entry(directory: str, names: list[str]) -> list[str]:
        return [script] if Path(directory) == package else []

    shutil.copytree(package, to, ignore=entry, copy_function=copy)
