"""Agent discovery, version binding and terminal ids, with the real pinned clients in tmux."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio

from akk.backends.claude_headless.setup import find_claude
from akk.backends.codex_app_server.host import find_codex
from akk.discovery import (
    AgentProcess,
    VersionCache,
    find_agent,
    parse_version,
    process,
    terminal_id,
)
from akk.discovery.process import NotExecutable, ProcessInfo, classify, executable, read_process
from tools.lab import clients

CLAUDE = clients.get("claude", "2.1.263")
CODEX = clients.get("codex", "0.153.4")
_MARKER = "AKK_DISCOVERY_TEST"


def run_pids(marker: str) -> list[int]:
    """Processes carrying this test's environment marker."""
    needle = f"{_MARKER}={marker}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@attrs.frozen
class Lab:
    """A private tmux server whose panes run real clients with an isolated HOME."""

    root: Path
    socket: str
    env: dict[str, str]

    def tmux(self, *args: str) -> str:
        # tmux gives a pane the PATH of the (unattached) client that asked for it.
        return subprocess.run(
            ["tmux", "-S", self.socket, *args],
            capture_output=True,
            text=True,
            check=True,
            env=self.env,
        ).stdout

    def pane(self, command: str) -> tuple[str, int]:
        """Run `command` in a new window; return (pane id, pane pid)."""
        out = self.tmux("new-window", "-d", "-P", "-F", "#{pane_id} #{pane_pid}", command)
        pane_id, pid = out.split()
        return pane_id, int(pid)


@pytest.fixture
def lab() -> Iterator[Lab]:
    for client in (CLAUDE, CODEX):
        binary = client.binary()
        assert binary.exists(), f"{client.name} missing: run `python -m tools.lab install`"
    root = Path(tempfile.mkdtemp(prefix="akk-disc-", dir="/tmp"))
    marker = uuid.uuid4().hex
    (root / "home" / ".codex").mkdir(parents=True)
    # Without a finished onboarding Claude checks its service, finds no network
    # and exits within a second: the tests would race its exit.
    onboarded = {"hasCompletedOnboarding": True, "theme": "dark", "autoUpdates": False}
    (root / "home" / ".claude.json").write_text(json.dumps(onboarded))
    (root / "bin").mkdir()
    (root / "bin" / "claude").symlink_to(CLAUDE.binary())
    env = {
        "PATH": f"{root / 'bin'}:/usr/bin:/bin",
        "HOME": str(root / "home"),
        "CODEX_HOME": str(root / "home" / ".codex"),
        "TMPDIR": str(root),
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        _MARKER: marker,
    }
    lab = Lab(root, str(root / "s.sock"), env)
    subprocess.run(
        ["tmux", "-S", lab.socket, "-f", "/dev/null", "new-session", "-d", "-x", "120",
         "-y", "40", "sleep 600"],
        check=True,
        env=env,
    )  # fmt: skip
    try:
        yield lab
    finally:
        subprocess.run(["tmux", "-S", lab.socket, "kill-server"], capture_output=True)
        for pid in run_pids(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        shutil.rmtree(root, ignore_errors=True)


async def wait_agent(pane_pid: int, *, not_pid: int | None = None) -> AgentProcess:
    with trio.fail_after(40):  # a loaded 2-core machine starts the real clients slowly
        while True:
            found = find_agent(pane_pid)
            if found is not None and found.pid != not_pid:
                return found
            await trio.sleep(0.05)  # /proc has no change notification


async def test_native_clients_are_found_with_their_identity(lab: Lab) -> None:
    _, claude_pane = lab.pane(f"exec {CLAUDE.binary()}")
    _, codex_pane = lab.pane(f"exec {CODEX.binary()}")
    claude = await wait_agent(claude_pane)
    codex = await wait_agent(codex_pane)
    assert (claude.agent, claude.executable) == ("claude", str(CLAUDE.binary().resolve()))
    assert (codex.agent, codex.executable) == ("codex", str(CODEX.binary().resolve()))
    assert claude.program == (claude.executable,)
    for found in (claude, codex):
        info = read_process(found.pid)
        assert info is not None and info.start_ticks == found.start_ticks
        assert found.cwd == os.readlink(f"/proc/{found.pid}/cwd")
        assert info.argv[0].endswith(found.agent)


@pytest.mark.parametrize(
    "command", ["bash -c 'exec claude'", "sh -c 'claude; echo done'"], ids=["exec", "child"]
)
async def test_claude_launched_through_a_shell(lab: Lab, command: str) -> None:
    _, pane_pid = lab.pane(command)
    found = await wait_agent(pane_pid)
    assert found.agent == "claude"
    assert found.executable == str(CLAUDE.binary().resolve())
    info = read_process(found.pid)
    assert info is not None and info.argv[0] == "claude"
    assert (info.pid if "exec" in command else info.ppid) == pane_pid


@pytest.mark.parametrize("client", [CLAUDE, CODEX], ids=lambda c: c.agent)
async def test_node_wrapper_resolves_to_the_native_child(lab: Lab, client: clients.Client) -> None:
    package = client.install_dir() / "node_modules"
    script = (
        package / "@anthropic-ai/claude-code/cli-wrapper.cjs"
        if client.agent == "claude"
        else package / "@openai/codex/bin/codex.js"
    )
    _, pane_pid = lab.pane(f"node {script}")
    found = await wait_agent(pane_pid)
    assert found.agent == client.agent
    assert found.executable == str(client.binary().resolve())
    info = read_process(found.pid)
    parent = read_process(info.ppid) if info else None
    assert parent is not None and parent.exe is not None and "node" in parent.exe


async def test_restarted_agent_is_a_new_terminal_incarnation(lab: Lab) -> None:
    pane_id, pane_pid = lab.pane(f"exec {CLAUDE.binary()}")
    first = await wait_agent(pane_pid)
    tid = terminal_id(lab.socket, pane_id, first.pid, first.start_ticks)
    again = await wait_agent(pane_pid)
    assert terminal_id(lab.socket, pane_id, again.pid, again.start_ticks) == tid
    assert tid.startswith("term_") and len(tid) == 37
    lab.tmux("respawn-pane", "-k", "-t", pane_id, f"exec {CLAUDE.binary()}")
    new_pid = int(lab.tmux("display", "-p", "-t", pane_id, "#{pane_pid}"))
    second = await wait_agent(new_pid, not_pid=first.pid)
    assert terminal_id(lab.socket, pane_id, second.pid, second.start_ticks) != tid
    assert terminal_id(lab.socket, "%99", first.pid, first.start_ticks) != tid


async def test_version_comes_from_the_running_binary_and_is_cached(lab: Lab) -> None:
    _, claude_pane = lab.pane(f"exec {CLAUDE.binary()}")
    _, other_pane = lab.pane(f"exec {CLAUDE.binary()}")
    _, codex_pane = lab.pane(f"exec {CODEX.binary()}")
    claude, other, codex = [await wait_agent(p) for p in (claude_pane, other_pane, codex_pane)]
    cache = VersionCache()
    with trio.fail_after(30):
        assert await cache.version_of(claude) == CLAUDE.version
        assert await cache.version_of(codex) == CODEX.version
        assert cache.spawns == 2
        for _ in range(20):
            assert await cache.version_of(claude) == CLAUDE.version
            assert await cache.version_of(other) == CLAUDE.version  # same file, other process
            assert await cache.version_of(codex) == CODEX.version
    assert cache.spawns == 2


@pytest.mark.parametrize("client", clients.PINNED, ids=lambda c: c.name)
async def test_every_pinned_binary_reports_its_version(client: clients.Client) -> None:
    cache = VersionCache()
    with trio.fail_after(30):
        version = await cache.version_of_program(client.agent, [str(client.binary())])
    assert version == client.version


async def test_replaced_binary_is_asked_again(tmp_path: Path) -> None:
    """An upgrade in place changes the file key, so the new file is asked (one more spawn)."""
    program = tmp_path / "claude"
    program.write_text("#!/bin/sh\necho '1.0.0 (Claude Code)'\n")
    program.chmod(0o755)
    cache = VersionCache()
    with trio.fail_after(10):
        assert await cache.version_of_program("claude", [str(program)]) == "1.0.0"
        assert await cache.version_of_program("claude", [str(program)]) == "1.0.0"
        replacement = tmp_path / "new"
        replacement.write_text("#!/bin/sh\necho '1.0.1 (Claude Code)'\n")
        replacement.chmod(0o755)
        replacement.replace(program)
        assert await cache.version_of_program("claude", [str(program)]) == "1.0.1"
        broken = tmp_path / "broken"
        broken.write_text("#!/bin/sh\necho 'something else'\n")
        broken.chmod(0o755)
        assert await cache.version_of_program("claude", [str(broken)]) is None
        assert await cache.version_of_program("claude", [str(broken)]) is None  # not re-run
    assert cache.spawns == 3


def test_parse_version() -> None:
    assert parse_version("claude", "2.1.263 (Claude Code)\n") == "2.1.263"
    assert parse_version("codex", "WARNING: x\ncodex-cli 0.153.4\n") == "0.153.4"
    assert parse_version("codex", "2.1.263 (Claude Code)") is None
    assert parse_version("claude", "Claude Code 2.1.263") is None


def test_a_process_inside_execve_is_read_as_one_image_or_not_at_all() -> None:
    """`bash -c 'exec sleep 30'` is bash, then sleep, under one pid. Polled as fast as
    Python can, every read shows one image whole: the old order (arguments, then `exe`)
    gave bash's arguments with sleep's executable in 74 of 300 launches."""
    shell, sleep = (os.path.realpath(shutil.which(name) or name) for name in ("bash", "sleep"))
    images = {(shell, shell), (sleep, sleep)}
    deadline = time.monotonic() + 60
    for _ in range(300):
        child = subprocess.Popen([shell, "-c", f"exec {sleep} 30"], env={})
        try:
            while True:
                assert time.monotonic() < deadline
                info = read_process(child.pid)
                if info is None:
                    continue  # inside execve: no read at all
                assert (info.exe, info.argv[0]) in images, info
                if info.exe == sleep:
                    break
        finally:
            child.kill()
            child.wait()


@pytest.mark.parametrize(
    ("after", "read"),
    [("/usr/bin/sleep", False), ("/opt/claude (deleted)", True)],
    ids=["exec", "replaced_on_disk"],
)
def test_exe_read_again_after_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: str, read: bool
) -> None:
    """`exe` changing between the first and the last read is an exec: no read. A binary
    replaced on disk meanwhile (" (deleted)") runs the same image: read as before."""
    base = tmp_path / "7"
    base.mkdir()
    (base / "cmdline").write_bytes(b"claude\0")
    (base / "stat").write_text(f"7 (claude) S 1 7 7 0 7 {' '.join(['0'] * 13)} 555 0\n")
    exes = iter(["/opt/claude", after])
    links = {"exe": lambda: next(exes), "cwd": lambda: "/work"}
    monkeypatch.setattr(process, "_readlink", lambda path: links[path.name]())
    info = read_process(7, tmp_path)
    assert (info is not None) is read
    if info is not None:
        assert (info.exe, info.argv, info.start_ticks) == ("/opt/claude", ("claude",), 555)


def proc(exe: str | None, *argv: str, cwd: str = "/work") -> ProcessInfo:
    return ProcessInfo(1, 0, 1, 1, 100, exe, argv, cwd)


def test_a_process_that_ends_while_its_children_are_listed_has_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The race: its /proc directory is gone by the time it is read, whatever a
    # check just before it said. A pane whose shell just exited is that case.
    gone = max(int(name) for name in os.listdir("/proc") if name.isdigit()) + 1_000_000
    monkeypatch.setattr(Path, "is_dir", lambda self: True)
    assert process.children(gone) == []


def test_classify_shapes() -> None:
    lib = "/usr/lib/node_modules"
    assert classify(proc("/opt/x/claude", "claude")) == ("claude", "native", ("/opt/x/claude",))
    installer = "/home/u/.local/share/claude/versions/2.1.263"
    assert classify(proc(installer, "claude")) == ("claude", "native", (installer,))
    assert classify(proc(f"{lib}/@anthropic-ai/claude-code/bin/claude.exe", "claude"))
    assert classify(proc("/usr/bin/node", "node", f"{lib}/@anthropic-ai/claude-code/cli.js")) == (
        "claude",
        "pure_js",
        ("/usr/bin/node", f"{lib}/@anthropic-ai/claude-code/cli.js"),
    )
    wrapper = classify(
        proc("/usr/bin/node", "node", "--no-warnings", f"{lib}/@openai/codex/bin/codex.js")
    )
    assert wrapper is not None and wrapper[:2] == ("codex", "wrapper")
    assert classify(proc("/usr/bin/bash", "claude")) is None  # a shell script named claude
    assert classify(proc("/usr/bin/node", "node", "server.js")) is None
    assert classify(proc(None, "claude")) is None
    assert classify(proc("/usr/bin/vim", "vim", "claude")) is None


@pytest.mark.parametrize("agent", ["claude", "codex"])
async def test_a_missing_binary_is_refused_with_its_flag_and_never_run(
    tmp_path: Path, agent: str
) -> None:
    """The reason is the whole answer: nothing at the path is run for its version."""
    absent = str(tmp_path / "not-installed")
    versions = VersionCache()
    if agent == "claude":
        found: object = await find_claude(absent, str(tmp_path), versions)
    else:
        found = await find_codex(absent, str(tmp_path), versions)
    assert found == f"{absent} is not an executable file (pass --{agent}-bin)"
    with pytest.raises(NotExecutable, match="no akk-no-such-program on PATH"):
        executable(None, "akk-no-such-program", "--x-bin")


async def test_a_version_question_cancelled_midway_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`akk serve` stopped while a binary answers --version: its throwaway HOME still goes."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    program = tmp_path / "claude"
    started = tmp_path / "started"
    program.write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 30\n")
    program.chmod(0o755)
    cache = VersionCache()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cache.version_of_program, "claude", [str(program)])
            while not started.exists():
                await trio.sleep(0.01)
            assert _homes(tmp_path)  # the question is out
            nursery.cancel_scope.cancel()
    assert not _homes(tmp_path)


def _homes(where: Path) -> list[str]:
    """The throwaway HOMEs of version questions under ``where``."""
    return [name for name in os.listdir(where) if name.startswith("akk-version-")]


async def test_homes_left_by_a_killed_asker_are_removed_by_the_next_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL runs no cleanup: the next question removes the homes of askers that are gone,
    and keeps a live asker's, anything else, and what a link points to."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone_pid = _reaped_pid()
    left = tmp_path / f"akk-version-{gone_pid}-abc"
    (left / ".claude").mkdir(parents=True)
    live = tmp_path / f"akk-version-{os.getppid()}-def"
    live.mkdir()
    other = tmp_path / "akk-version-notapid"
    other.mkdir()
    target = tmp_path / "precious"
    target.mkdir()
    (tmp_path / f"akk-version-{gone_pid}-link").symlink_to(target)
    program = tmp_path / "claude"
    program.write_text("#!/bin/sh\necho '2.1.332 (Claude Code)'\n")
    program.chmod(0o755)
    with trio.fail_after(10):
        version = await VersionCache().version_of_program("claude", [str(program)])
    assert version == "2.1.332"
    assert not left.exists()
    assert live.is_dir() and other.is_dir() and target.is_dir()
    assert sorted(_homes(tmp_path)) == sorted(
        [live.name, other.name, f"akk-version-{gone_pid}-link"]
    )  # and its own home went after its question


def _reaped_pid() -> int:
    """The pid of a process that ran and was reaped (so none has it now)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
