"""Find the Claude Code or Codex process behind a tmux pane, its exact version, and its identity.

Everything here comes from the process, never from the screen: the process
tree under the pane's pid (from /proc), the executable the kernel actually
runs (/proc/PID/exe), and what that exact image prints for `--version` and
hashes to, read through a descriptor of it, never through its path (an
upgrade may have put another file there). A pure-JS client's script is the
code it runs only while it is older than the process (`CHANGE_SLACK_NS`);
otherwise its version and hash are unknown, with the reason.

Shapes recognised under a pane (possibly below shells):

- the native binaries: `claude` (npm platform package, or the native
  installer's `.../claude/versions/X.Y.Z`) and `codex`;
- node wrappers that spawn a native binary (`@openai/codex/bin/codex.js`,
  `@anthropic-ai/claude-code/cli-wrapper.cjs` or `bin/claude*`): the native
  child is the agent; a wrapper without its child yet is not identified;
- Claude's older pure-JS `node .../@anthropic-ai/claude-code/cli.js`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

log = logging.getLogger(__name__)

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
    try:
        tasks = list((proc / str(pid) / "task").glob("*/children"))
    except OSError:
        return found  # it ended meanwhile: no children
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


def script_role(script: str) -> tuple[Agent, Kind] | None:
    """What a node script (a real path) is: Claude's pure-JS client, an npm wrapper that
    starts an agent's native binary, or neither (None)."""
    if _PURE_JS.fullmatch(script):
        return "claude", "pure_js"
    for pattern, agent in _WRAPPERS:
        if pattern.fullmatch(script):
            return agent, "wrapper"
    return None


def classify(info: ProcessInfo) -> tuple[Agent, Kind, tuple[str, ...]] | None:
    """Say whether a process is an agent (and how it runs), a wrapper of one, or neither."""
    if info.exe is None:
        return None
    exe = _image(info.exe)
    name = os.path.basename(exe)
    if _NODE.fullmatch(name):
        script = _script(info)
        role = None if script is None else script_role(script)
        if script is None or role is None:
            return None
        return role[0], role[1], (exe, script)
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


FileKey = tuple[str, int, int, int, int, int]
"""(name, st_dev, st_ino, st_mtime_ns, st_ctime_ns, st_size): a file's content, as far as a
stat can tell (a write in place can put the mtime back, never the ctime)."""

CHANGE_SLACK_NS = 100_000_000
"""How much older than a pure-JS client's process its script must be to be the code it loaded.

A start time is whole clock ticks (10 ms), a ctime is the kernel's coarse clock (a
jiffy, up to 10 ms behind): 0.1 s covers both, and a slewing clock."""

_REASONS_KEPT = 256
"""How many processes' reasons `VersionCache.why_unknown` remembers (the newest)."""


def _key(name: str, st: os.stat_result) -> FileKey:
    return (name, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _file_key(path: str) -> FileKey:
    return _key(path, os.stat(path))


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def started_at_ns(ticks: int) -> int:
    """When a process that started ``ticks`` clock ticks after boot started, in wall-clock
    nanoseconds (what file times are in), to within a tick."""
    since_boot = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - ticks * 1_000_000_000 // _CLK_TCK
    return time.time_ns() - since_boot


class Unproven(Exception):
    """What a process runs cannot be proven to be the code AKK would read: the reason."""


@attrs.frozen
class _Held:
    """The code one process runs, held for one question about it.

    ``image`` is an open descriptor of /proc/PID/exe: the running image itself,
    whatever its path holds now (an upgrade renamed over it, or not), and a
    file nobody can write while a process runs it (ETXTBSY). Its key's ctime
    is that of the moment it was held: an upgrade that unlinks it moves the
    ctime, never the bytes. A pure-JS client's script is only a path: node
    read it at start and keeps no descriptor, so it is the running code only
    while it is older than the process and unchanged across the question.
    """

    process: AgentProcess
    image: int
    image_key: FileKey
    script_key: FileKey | None

    @property
    def keys(self) -> tuple[FileKey, ...]:
        """What the answer is cached by: the image's key, then the script's."""
        return (self.image_key,) if self.script_key is None else (self.image_key, self.script_key)

    @property
    def argv(self) -> list[str]:
        """The program as it is named (the image runs in its place: `VersionCache._ask`)."""
        return list(self.process.program)

    def check(self) -> None:
        """Raise Unproven if the script changed since it was held (the image cannot)."""
        if self.script_key is not None:
            _script_key(self.process, self.script_key)


def _script_key(process: AgentProcess, held: FileKey | None = None) -> FileKey:
    """The key of a pure-JS process's script, once proven to be the code it loaded."""
    script = process.program[-1]
    try:
        key = _file_key(script)
    except OSError as exc:
        raise Unproven(f"its script {script} cannot be read ({exc.strerror})") from None
    changed = key[4] + CHANGE_SLACK_NS >= started_at_ns(process.start_ticks)
    if changed or (held is not None and key != held):
        raise Unproven(
            f"{script} changed after the process started (an upgrade?): the code it runs is "
            "not the file's; restart the client to identify it"
        )
    return key


@contextlib.contextmanager
def _hold(process: AgentProcess, proc: Path) -> Iterator[_Held]:
    """Hold the code ``process`` runs (`_Held`); Unproven when that cannot be done."""
    exe = proc / str(process.pid) / "exe"
    try:
        image = os.open(exe, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise Unproven(f"the process's image cannot be read ({exc.strerror})") from None
    try:
        # Read after the open: the pid named this process then too, so `image` is its own.
        if start_ticks(process.pid, proc) != process.start_ticks:
            raise Unproven("the process is gone")
        script = None if len(process.program) == 1 else _script_key(process)
        yield _Held(process, image, _key("exe", os.fstat(image)), script)
    finally:
        os.close(image)


def _unknown(process: AgentProcess, why: str) -> None:
    log.warning("%s process %d: what it runs is unknown: %s", process.agent, process.pid, why)


@attrs.define
class DigestCache:
    """Hashes the code a process runs once per file identity, in a worker thread.

    The code is the native executable's running image (read through
    /proc/PID/exe, so an image an upgrade replaced on disk is hashed as it
    runs), or for a pure-JS Claude its script (what `akk qualify --binary`
    takes, and what a qualification names by SHA-256), proven unchanged since
    the process started (`VersionCache`). Keyed like `VersionCache`.
    ``hashes`` counts the files read, for tests.
    """

    hashes: int = 0
    _known: dict[FileKey, str] = attrs.field(factory=dict)

    async def digest_of(self, process: AgentProcess, proc: Path = PROC) -> str | None:
        """The SHA-256 (64 lowercase hex digits) of what ``process`` runs; None when it cannot
        be read or proven to be the running code."""
        try:
            with _hold(process, proc) as held:
                key = held.keys[-1]
                digest = self._known.get(key)
                if digest is None:
                    digest = await trio.to_thread.run_sync(self._hash, held)
                held.check()
        except Unproven as exc:
            _unknown(process, str(exc))
            return None
        self._known[key] = digest
        return digest

    def _hash(self, held: _Held) -> str:
        if held.script_key is None:
            self.hashes += 1
            return _sha256_fd(held.image)
        script = held.script_key[0]
        try:
            fd = os.open(script, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise Unproven(f"its script {script} cannot be read ({exc.strerror})") from None
        try:
            if _key(script, os.fstat(fd)) != held.script_key:
                raise Unproven(f"{script} changed while AKK read it")
            self.hashes += 1
            return _sha256_fd(fd)
        finally:
            os.close(fd)


def binary_of(process: AgentProcess) -> str:
    """The file a qualification of ``process`` names: its executable, or its pure-JS script."""
    return process.program[-1]


def _sha256_fd(fd: int) -> str:
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, as lowercase hex: what a qualification row holds."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _sha256_fd(fd)
    finally:
        os.close(fd)


@attrs.define
class VersionCache:
    """Asks binaries for their version once per file identity.

    The key is a `FileKey` of every file in the program, so polling costs a
    few stat calls and no process; a binary replaced in place (an upgrade) is
    asked again. `spawns` counts the processes started, for tests and
    benchmarks.
    """

    timeout: float = VERSION_TIMEOUT
    retry_failed_after: float = FAILED_VERSION_RETRY
    clock: Callable[[], float] = time.monotonic
    spawns: int = 0
    _known: dict[tuple[FileKey, ...], str] = attrs.field(factory=dict)
    _failed: dict[tuple[FileKey, ...], float] = attrs.field(factory=dict)
    _reasons: dict[tuple[int, int], str] = attrs.field(factory=dict)

    async def version_of(self, process: AgentProcess, proc: Path = PROC) -> str | None:
        """The exact version of the code `process` runs, or None if it cannot be proven.

        The running image itself is asked (run through a descriptor of
        /proc/PID/exe), with a pure-JS client's script, which must be older than
        the process and unchanged until the answer. None if the process is
        gone, that cannot be proven (`why_unknown` says why), the binary fails,
        times out, or prints no recognisable version.
        """
        try:
            with _hold(process, proc) as held:
                key = held.keys
                if self._answered(key):
                    version = self._known.get(key)
                else:
                    version = await self._ask(process.agent, held.argv, held.image)
                    held.check()  # the answer is the held files' own: keep it
                    self._keep(key, version)
        except Unproven as exc:
            self._remember(process, str(exc))
            _unknown(process, str(exc))
            return None
        self._remember(process, None)
        return version

    def _remember(self, process: AgentProcess, why: str | None) -> None:
        incarnation = (process.pid, process.start_ticks)
        self._reasons.pop(incarnation, None)
        if why is not None:
            if len(self._reasons) >= _REASONS_KEPT:
                del self._reasons[next(iter(self._reasons))]  # the oldest
            self._reasons[incarnation] = why

    def why_unknown(self, process: AgentProcess) -> str | None:
        """Why the last `version_of` of ``process`` could not prove what it runs (None: it
        could, or it was not asked)."""
        return self._reasons.get((process.pid, process.start_ticks))

    async def version_of_program(self, agent: Agent, program: Sequence[str]) -> str | None:
        """Run `program --version` (cached by the files of `program`)."""
        try:
            key = tuple(_file_key(p) for p in program)
        except OSError:
            return None
        if self._answered(key):
            return self._known.get(key)
        version = await self._ask(agent, program, None)
        self._keep(key, version)
        return version

    def _answered(self, key: tuple[FileKey, ...]) -> bool:
        """Whether ``key``'s answer is known: a version, or a failure too recent to ask again."""
        failed_at = self._failed.get(key)
        recent = failed_at is not None and self.clock() - failed_at < self.retry_failed_after
        return key in self._known or recent

    def _keep(self, key: tuple[FileKey, ...], version: str | None) -> None:
        if version is None:
            self._failed[key] = self.clock()
        else:
            self._known[key] = version
            self._failed.pop(key, None)

    async def _ask(self, agent: Agent, argv: Sequence[str], image: int | None) -> str | None:
        """Run ``argv --version``; with ``image`` (an open descriptor), that file is what runs."""
        home = await trio.to_thread.run_sync(_probe_home)
        # A throwaway HOME: `--version` must not read or write the person's config.
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
        pinned: dict[str, Any] = {}
        if image is not None:
            pinned = {"executable": f"/proc/self/fd/{image}", "pass_fds": (image,)}
        self.spawns += 1
        try:
            with trio.move_on_after(self.timeout):
                result = await trio.run_process(
                    [*argv, "--version"],
                    stdin=subprocess.DEVNULL,
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    env=env,
                    cwd=home,
                    **pinned,
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
