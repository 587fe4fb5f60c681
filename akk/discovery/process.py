"""Find the Claude Code or Codex process behind a tmux pane, its exact version, and its identity.

Everything here comes from the process, never from the screen: the process
tree under the pane's pid (from /proc), the executable the kernel actually
runs (/proc/PID/exe), and what that exact binary prints for `--version`.

Shapes recognised under a pane (possibly below shells):

- the native binaries: `claude` (npm platform package, or the native
  installer's `.../claude/versions/X.Y.Z`) and `codex`;
- node wrappers that spawn a native binary (`@openai/codex/bin/codex.js`,
  `@anthropic-ai/claude-code/cli-wrapper.cjs` or `bin/claude*`): the native
  child is the agent; a wrapper without its child yet is not identified;
- Claude's older pure-JS `node .../@anthropic-ai/claude-code/cli.js`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import attrs
import trio

Agent = Literal["claude", "codex"]

PROC = Path("/proc")
MAX_DEPTH = 8
"""How far below the pane's process an agent is looked for (shells, wrappers, sudo...)."""

VERSION_TIMEOUT = 10.0
FAILED_VERSION_RETRY = 300.0
"""Seconds before a binary whose `--version` failed is asked again."""

# `claude.exe` is what npm's postinstall copies the native binary to, on Linux too.
_NATIVE_NAMES: dict[str, Agent] = {"claude": "claude", "claude.exe": "claude", "codex": "codex"}
_INTERPRETERS = re.compile(r"(node|nodejs|bun|deno|python[0-9.]*|bash|sh|dash|zsh|fish|ksh|env)")
_NODE = re.compile(r"node(js)?[0-9.]*")
_PURE_JS = re.compile(r".*/@anthropic-ai/claude-code/cli\.m?js")
_WRAPPERS: tuple[tuple[re.Pattern[str], Agent], ...] = (
    (re.compile(r".*/@anthropic-ai/claude-code/(cli-wrapper\.cjs|bin/claude[^/]*)"), "claude"),
    (re.compile(r".*/@openai/codex/bin/codex\.js"), "codex"),
)
VERSION = r"\d+\.\d+\.\d+[0-9A-Za-z.+-]*"
"""What a client version looks like (`2.1.332`, `0.171.0`, `1.0.0-beta.1`)."""
_VERSION_LINE: dict[Agent, re.Pattern[str]] = {
    "claude": re.compile(f"({VERSION}) \\(Claude Code\\)"),
    "codex": re.compile(f"codex-cli ({VERSION})"),
}


@attrs.frozen
class AgentProcess:
    """The agent process found under a pane.

    `program` is what runs to ask this process's binary for its version:
    `(executable,)` for a native binary, `(node, script)` for a pure-JS one.
    """

    agent: Agent
    pid: int
    start_ticks: int
    """Field 22 of /proc/PID/stat: start time in clock ticks since boot."""
    executable: str
    """realpath of /proc/PID/exe."""
    cwd: str | None
    """None if the cwd cannot be read (another user's process)."""
    program: tuple[str, ...]


@attrs.frozen
class ProcessInfo:
    """One process as /proc shows it at a moment."""

    pid: int
    ppid: int
    pgrp: int
    tpgid: int
    start_ticks: int
    exe: str | None
    argv: tuple[str, ...]
    cwd: str | None


def read_process(pid: int, proc: Path = PROC) -> ProcessInfo | None:
    """Read one process from /proc, or None if it is gone, unreadable, or inside execve.

    Each file is read separately, so a process that calls execve between two
    reads would be seen half as its old image and half as its new one: a shell's
    arguments with the agent's executable (seen 74 times in 300 launches of
    ``bash -c 'exec …'``). `exe` is read before and after the rest, and a
    read it changed across is no read at all; the caller's next look sees
    the new image whole.
    """
    base = proc / str(pid)
    exe = _readlink(base / "exe")
    try:
        stat = (base / "stat").read_bytes().decode("utf-8", "surrogateescape")
        argv = (base / "cmdline").read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return None
    if not argv:
        # A zombie, or a process caught inside execve (its new image named by `exe`
        # before its arguments are in place): nothing to identify until it runs.
        return None
    cwd = _readlink(base / "cwd")
    if _image(_readlink(base / "exe") or "") != _image(exe or ""):
        return None
    # Field 2, comm, sits in parentheses and may itself contain spaces and parentheses.
    fields = stat[stat.rindex(")") + 2 :].split()
    return ProcessInfo(
        pid=pid,
        ppid=int(fields[1]),
        pgrp=int(fields[2]),
        tpgid=int(fields[5]),
        start_ticks=int(fields[19]),
        exe=exe,
        argv=tuple(argv.split("\0")[:-1]),
        cwd=cwd,
    )


def start_ticks(pid: int, proc: Path = PROC) -> int | None:
    """The process's start time in clock ticks since boot, or None if it is gone.

    Reads only /proc/PID/stat: the cheap check that a known process still runs.
    """
    try:
        stat = (proc / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


def alive(pid: int, ticks: int, proc: Path = PROC) -> bool:
    """True while `pid` is still the process that started at `ticks`."""
    return start_ticks(pid, proc) == ticks


def _image(exe: str) -> str:
    """The file a process runs, as `exe` names it: a binary replaced on disk since it
    started (" (deleted)") is the same image."""
    return exe.removesuffix(" (deleted)")


def _readlink(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def children(pid: int, proc: Path = PROC) -> list[int]:
    """Direct children of `pid` (from /proc/PID/task/*/children, else by scanning ppids)."""
    found: list[int] = []
    tasks = list((proc / str(pid) / "task").glob("*/children"))
    if tasks:
        for task in tasks:
            try:
                found.extend(int(c) for c in task.read_text().split())
            except OSError:
                continue
        return sorted(set(found))
    for entry in proc.iterdir():
        if entry.name.isdigit():
            info = read_process(int(entry.name), proc)
            if info is not None and info.ppid == pid:
                found.append(info.pid)
    return sorted(found)


def _resolve(info: ProcessInfo, arg: str) -> str | None:
    if not os.path.isabs(arg):
        if info.cwd is None:
            return None
        arg = os.path.join(info.cwd, arg)
    return os.path.realpath(arg)


def _script(info: ProcessInfo) -> str | None:
    """The script a node process runs: its first argument that is not an option."""
    for arg in info.argv[1:]:
        if not arg.startswith("-"):
            return _resolve(info, arg)
    return None


Kind = Literal["native", "pure_js", "wrapper"]


def classify(info: ProcessInfo) -> tuple[Agent, Kind, tuple[str, ...]] | None:
    """Say whether a process is an agent (and how it runs), a wrapper of one, or neither."""
    if info.exe is None:
        return None
    exe = _image(info.exe)
    name = os.path.basename(exe)
    if _NODE.fullmatch(name):
        script = _script(info)
        if script is None:
            return None
        if _PURE_JS.fullmatch(script):
            return "claude", "pure_js", (exe, script)
        for pattern, agent in _WRAPPERS:
            if pattern.fullmatch(script):
                return agent, "wrapper", (exe, script)
        return None
    if name in _NATIVE_NAMES:
        return _NATIVE_NAMES[name], "native", (exe,)
    if os.path.basename(os.path.dirname(os.path.dirname(exe))) == "claude" and (
        os.path.basename(os.path.dirname(exe)) == "versions"
    ):
        return "claude", "native", (exe,)  # the native installer's versions/X.Y.Z
    argv0 = os.path.basename(info.argv[0]) if info.argv else ""
    if argv0 in _NATIVE_NAMES and not _INTERPRETERS.fullmatch(name):
        return _NATIVE_NAMES[argv0], "native", (exe,)
    return None


def find_agent(pane_pid: int, proc: Path = PROC) -> AgentProcess | None:
    """The agent process at or below `pane_pid`, or None if there is none (yet).

    Walks the tree breadth-first, not below an agent (its own helpers, such
    as Codex's sandbox, are not agents). When several qualify, one in the
    terminal's foreground process group wins, then the shallowest, then the
    oldest.
    """
    root = read_process(pane_pid, proc)
    if root is None:
        return None
    found: list[tuple[int, int, AgentProcess, int]] = []  # (depth, ticks, agent, pgrp)
    queue: deque[tuple[ProcessInfo, int]] = deque([(root, 0)])
    while queue:
        info, depth = queue.popleft()
        kind = classify(info)
        if kind is not None and kind[1] != "wrapper":
            agent, _, program = kind
            assert info.exe is not None
            process = AgentProcess(
                agent=agent,
                pid=info.pid,
                start_ticks=info.start_ticks,
                executable=os.path.realpath(_image(info.exe)),
                cwd=info.cwd,
                program=tuple(os.path.realpath(p) for p in program),
            )
            found.append((depth, info.start_ticks, process, info.pgrp))
            continue
        if depth < MAX_DEPTH:
            for child in children(info.pid, proc):
                child_info = read_process(child, proc)
                if child_info is not None:
                    queue.append((child_info, depth + 1))
    if not found:
        return None
    found.sort(key=lambda f: (f[3] != root.tpgid, f[0], f[1]))
    return found[0][2]


@functools.cache
def _boot_id() -> str:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def terminal_id(socket_path: str, pane_id: str, pid: int, start_ticks: int) -> str:
    """A stable id for one pane + agent process incarnation (`term_` + 32 hex digits).

    The boot id is mixed in so that a pid and start time reused after a
    reboot on the same socket and pane id is still a new incarnation.
    """
    material = "\0".join(["akk-terminal-v1", _boot_id(), socket_path, pane_id, str(pid),
                          str(start_ticks)])  # fmt: skip
    return "term_" + hashlib.sha256(material.encode("utf-8", "surrogateescape")).hexdigest()[:32]


class NotExecutable(Exception):
    """There is no executable to run: the reason, with its next step."""


def executable(given: str | None, program: str, flag: str) -> str:
    """The real path of ``given`` (None: ``program`` on PATH).

    ``flag`` is the option that names another one, for the reason's next step.
    Raises NotExecutable with the reason when there is none.
    """
    found = given if given is not None else shutil.which(program)
    if found is None:
        raise NotExecutable(f"no {program} on PATH (pass {flag})")
    found = os.path.realpath(found)
    if not (os.path.isfile(found) and os.access(found, os.X_OK)):
        raise NotExecutable(f"{found} is not an executable file (pass {flag})")
    return found


def parse_version(agent: Agent, output: str) -> str | None:
    """The version in `--version` output (`2.1.263 (Claude Code)`, `codex-cli 0.153.4`)."""
    for line in output.splitlines():
        match = _VERSION_LINE[agent].fullmatch(line.strip())
        if match:
            return match[1]
    return None


FileKey = tuple[str, int, int, int, int]


def _file_key(path: str) -> FileKey:
    st = os.stat(path)
    return (path, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _running(process: AgentProcess, proc: Path) -> tuple[list[str], tuple[FileKey, ...]] | None:
    """The files ``process`` runs, and their identity; None if it is gone.

    If the file at `process.executable` is no longer the one the process runs
    (replaced by an upgrade), the running image is named by /proc/PID/exe and
    keyed by the process incarnation.
    """
    running = proc / str(process.pid) / "exe"
    try:
        image = os.stat(running)
        program = list(process.program)
        keys = [_file_key(p) for p in program]
    except OSError:
        return None
    if (keys[0][1], keys[0][2]) != (image.st_dev, image.st_ino):
        program[0] = str(running)
        keys[0] = (f"pid:{process.pid}:{process.start_ticks}", image.st_dev, image.st_ino,
                   image.st_mtime_ns, image.st_size)  # fmt: skip
    return program, tuple(keys)


@attrs.define
class DigestCache:
    """Hashes the binary a process runs once per file identity, in a worker thread.

    The binary is the native executable, or for a pure-JS Claude its script
    (what `akk qualify --binary` takes, and what a qualification names by
    SHA-256). Keyed like `VersionCache`: a binary replaced in place is hashed
    again, and a process still running a replaced image is hashed from
    /proc/PID/exe. ``hashes`` counts the files read, for tests.
    """

    hashes: int = 0
    _known: dict[FileKey, str] = attrs.field(factory=dict)

    async def digest_of(self, process: AgentProcess, proc: Path = PROC) -> str | None:
        """The SHA-256 (64 lowercase hex digits) of what ``process`` runs; None if unreadable."""
        running = _running(process, proc)
        if running is None:
            return None
        program, keys = running
        path, key = program[-1], keys[-1]
        if key in self._known:
            return self._known[key]
        try:
            digest = await trio.to_thread.run_sync(sha256_file, path)
        except OSError:
            return None
        self.hashes += 1
        self._known[key] = digest
        return digest


def binary_of(process: AgentProcess) -> str:
    """The file a qualification of ``process`` names: its executable, or its pure-JS script."""
    return process.program[-1]


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, as lowercase hex: what a qualification row holds."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@attrs.define
class VersionCache:
    """Asks binaries for their version once per file identity.

    The key is (path, st_dev, st_ino, st_mtime_ns, st_size) of every file in
    the program, so polling costs a few stat calls and no process; a binary
    replaced in place (an upgrade) is asked again. `spawns` counts the
    processes started, for tests and benchmarks.
    """

    timeout: float = VERSION_TIMEOUT
    retry_failed_after: float = FAILED_VERSION_RETRY
    clock: Callable[[], float] = time.monotonic
    spawns: int = 0
    _known: dict[tuple[FileKey, ...], str] = attrs.field(factory=dict)
    _failed: dict[tuple[FileKey, ...], float] = attrs.field(factory=dict)

    async def version_of(self, process: AgentProcess, proc: Path = PROC) -> str | None:
        """The exact version of the binary `process` runs, or None if it cannot be proven.

        A replaced binary is asked through /proc/PID/exe (`_running`). None if
        the process is gone, the binary fails, times out, or prints no
        recognisable version.
        """
        running = _running(process, proc)
        if running is None:
            return None
        program, keys = running
        return await self.version_of_program(process.agent, program, keys)

    async def version_of_program(
        self, agent: Agent, program: Sequence[str], key: tuple[FileKey, ...] | None = None
    ) -> str | None:
        """Run `program --version` (cached by `key`, default: the files of `program`)."""
        if key is None:
            try:
                key = tuple(_file_key(p) for p in program)
            except OSError:
                return None
        if key in self._known:
            return self._known[key]
        failed_at = self._failed.get(key)
        if failed_at is not None and self.clock() - failed_at < self.retry_failed_after:
            return None
        version = await self._ask(agent, program)
        if version is None:
            self._failed[key] = self.clock()
        else:
            self._known[key] = version
            self._failed.pop(key, None)
        return version

    async def _ask(self, agent: Agent, program: Sequence[str]) -> str | None:
        home = await trio.to_thread.run_sync(_probe_home)
        # A throwaway HOME: `--version` must not read or write the person's config.
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
        self.spawns += 1
        try:
            with trio.move_on_after(self.timeout):
                result = await trio.run_process(
                    [*program, "--version"],
                    stdin=subprocess.DEVNULL,
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    env=env,
                    cwd=home,
                )
                if result.returncode == 0:
                    return parse_version(agent, result.stdout.decode("utf-8", "replace"))
            return None
        except OSError:
            return None
        finally:
            # Shielded: a server stopped mid-question must not leave the directory behind.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(shutil.rmtree, home, True)


PROBE_HOME = re.compile(r"akk-version-(\d{1,9})-")
"""The name of a `--version` question's throwaway HOME: the asking process's pid first."""


def _probe_home() -> str:
    """A new throwaway HOME for one `--version` question, named for this process.

    A process killed mid-question (SIGKILL) runs no cleanup, so first the
    homes of asking processes that are gone are removed: only this user's own
    directories, never through a link (one another remover took first is
    skipped).
    """
    parent = tempfile.gettempdir()
    with os.scandir(parent) as entries:
        for entry in entries:
            match = PROBE_HOME.match(entry.name)
            try:
                if match is None or not entry.is_dir(follow_symlinks=False):
                    continue
                mine = entry.stat(follow_symlinks=False).st_uid == os.getuid()
            except OSError:
                continue
            if mine and not pid_alive(int(match[1])):
                shutil.rmtree(entry.path, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"akk-version-{os.getpid()}-", dir=parent)


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists (it may belong to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
