"""Run one client in a private tmux server against the scripted model server.

`launch` is an async context manager. It starts a `ModelServer` for the
scenario, writes an isolated HOME (and CODEX_HOME) and a git working directory
(`run_files.prepare`), and starts a tmux server on a private socket whose only
pane runs the client under a shell with job control (so the client owns the
pane's foreground process group, as when a person starts it). It waits for
the idle composer and yields a `LabSession`. On exit, also on failure or
cancellation, it kills the tmux server and every process of the run (found by
a per-run environment marker, so daemons that left the session are caught
too), stops the model server and removes the temporary directory. A run whose
launching process was killed is ended by the next launch (`end_abandoned`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from akk.discovery.process import alive, classify, read_process, start_ticks
from akk.qualify.client import Agent, Client
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import (
    CODEX_MODEL,
    MARKER_VAR,
    READY,
    SETTINGS_FLAG_FILE,
    Preseed,
    prepare,
)
from akk.qualify.scenarios import Scenario

POLL_SECONDS = 0.05
"""How often screen conditions re-capture the pane."""

START_TIMEOUT = 30.0
"""Deadline from launch to the idle composer."""

ENTER_GUARD_SECONDS = 0.3
"""Quiet time between typed text and Enter.

Codex treats an Enter that arrives within ~120 ms of a burst of typed
characters as a newline (LAB.md); both clients get the same guard.
"""

CLAUDE_PROMPT = "\u276f"
"""Claude's composer prompt character (heavy right angle quote)."""

CLAUDE_SPINNER = re.compile(r"^[·✢*✶✻✽✳] [A-Za-z][\w'-]*…", re.MULTILINE)
"""Claude's working row (``✽ Burrowing…``), on a plain-text screen."""

_PLAN_MODE_FOOTER = re.compile(r"Plan mode(?: \(shift\+tab.*)? *$", re.MULTILINE)
"""Codex's footer in Plan mode: ``Plan mode (shift+tab to cycle)``, the hint dropped in a
narrow pane (0.153.4 at 60 columns), but never the ``… for Plan mode.`` notice."""

CODEX_PROMPT = "\u203a"
"""Codex's composer prompt character (single right angle quote)."""

CODEX_SETTLE_SECONDS = 0.5
"""Quiet time after Codex's idle composer before the session counts as started."""

CODEX_STATUS_MIN_ROWS = 5
"""The fewest pane rows at which Codex draws its composer's status row.

In a 4-row pane every pinned version drops it (0.169.0+ keep the hint row), so nothing
on screen says the session is configured: there the composer alone counts as idle."""

DROPPED_KEY_SECONDS = 1.5
"""How long a key press may take to show before it counts as dropped (see press_until)."""

_EXIT_BANNER = "[lab] client exited with status"
RUN_PREFIX = "akk-lab-"
"""The name of every run's temporary directory starts so (`tempfile.mkdtemp`'s prefix)."""

OWNER_FILE = "owner"
"""In a run's directory: the pid and start time of the process that launched it."""

_TEARDOWN_GRACE_SECONDS = 1.5
_TEARDOWN_KILL_SECONDS = 5.0


class LabError(RuntimeError):
    """The lab could not reach the state a test asked for; the message says what it saw."""


class ScreenTimeout(LabError):
    """A screen condition did not hold before its deadline; carries the last screen."""

    def __init__(self, message: str, screen: str) -> None:
        super().__init__(f"{message}\n--- last screen ---\n{screen}\n--- end of screen ---")
        self.screen = screen


def _claude_idle(screen: str) -> bool:
    # The empty composer line sits between two rules; the footer offers shortcuts.
    # A user status line or vim's `-- INSERT --` takes that hint's place, and on
    # some versions hides `esc to interrupt` too: then the last row offers agents
    # and no working row (`✽ Burrowing…`) shows. After a paste was sent, 2.1.263-2.1.267
    # keep `paste again to expand` there for about 8 s over the empty composer.
    lines = [line.rstrip() for line in screen.splitlines()]
    if CLAUDE_PROMPT not in lines:
        return False
    if any("? for shortcuts" in line for line in lines):
        return True
    footer = next((line for line in reversed(lines) if line), "")
    working = "esc to interrupt" in footer or CLAUDE_SPINNER.search(screen) is not None
    return footer.endswith(("← for agents", "paste again to expand")) and not working


def _codex_idle(screen: str) -> bool:
    # The composer is painted before the session is configured and Enter is
    # lost until then; the footer naming the model and the header leaving
    # "loading" mark a configured session.
    lines = screen.splitlines()
    composer = any(line.startswith(f"{CODEX_PROMPT} ") for line in lines)
    configured = any(_CODEX_CONFIGURED.match(line) for line in lines)
    loading = _CODEX_LOADING.search(screen) is not None
    working = "esc to interrupt" in screen
    return composer and configured and not loading and not working


def _codex_composer_up(screen: str) -> bool:
    """The composer is drawn and nothing loads or works (a pane too short for the status row)."""
    composer = any(line.startswith(f"{CODEX_PROMPT} ") for line in screen.splitlines())
    return composer and _CODEX_LOADING.search(screen) is None and "esc to interrupt" not in screen


_CODEX_LOADING = re.compile(r"^(│ model:\s+|\s+)loading\b", re.MULTILINE)
_CODEX_CONFIGURED = re.compile(
    rf"\s+({re.escape(CODEX_MODEL)} |\S+ default · |.*\d+% context left$)"
)
"""A footer that only a configured session draws: the status row naming the model (the lab's,
or another in `Preseed.codex_model`), or, with `[tui] status_line = []`, the context left."""

IDLE: Mapping[Agent, Callable[[str], bool]] = {"claude": _claude_idle, "codex": _codex_idle}
"""The lab's own test for "idle, empty composer" per agent (plain-text screen)."""


@attrs.define
class LabSession:
    """A running client in its private tmux pane, with the model server it talks to."""

    client: Client
    scenario: Scenario
    cols: int
    rows: int
    root: Path
    socket: Path
    pane: str
    home: Path
    codex_home: Path | None
    workdir: Path
    server: ModelServer
    pane_pid: int
    agent_pid: int
    launched_at: float
    argv: tuple[str, ...] = ()
    """The client's command line (binary first), as the pane started it."""
    ready_after: float | None = None
    """Seconds from launch to the idle composer (None until the composer was seen)."""
    _last_key_at: float = 0.0

    @property
    def agent(self) -> Agent:
        """``claude`` or ``codex``."""
        return self.client.agent

    @property
    def version(self) -> str:
        """The pinned client version."""
        return self.client.version

    async def tmux(self, *args: str) -> str:
        """Run a tmux command against this session's private server; return stdout."""
        done = await trio.run_process(
            ["tmux", "-S", str(self.socket), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        if done.returncode != 0:
            raise LabError(
                f"tmux {' '.join(args)} failed ({done.returncode}): "
                f"{done.stderr.decode(errors='replace').strip()}; is the lab pane still alive?"
            )
        return done.stdout.decode()

    async def capture(self) -> str:
        """The exact ``tmux capture-pane -p -e`` output of the pane (with SGR escapes)."""
        return await self.tmux("capture-pane", "-p", "-e", "-t", self.pane)

    async def text(self) -> str:
        """The pane as plain text (``capture-pane -p``)."""
        return await self.tmux("capture-pane", "-p", "-t", self.pane)

    async def send_keys(self, *keys: str, literal: bool = False) -> None:
        """Send tmux key names (``Enter``, ``BTab``, ``Down``...) or, with literal, characters."""
        await self.tmux("send-keys", "-t", self.pane, *(("-l",) if literal else ()), *keys)
        self._last_key_at = time.monotonic()

    async def type_text(self, text: str) -> None:
        """Type text as individual key presses (never a bracketed paste)."""
        await self.send_keys(text, literal=True)

    async def paste(self, text: str) -> None:
        """Paste text as a person's terminal does: a bracketed paste of a tmux buffer, its
        line breaks kept (they do not submit)."""
        buffer = self.root / "paste.txt"
        buffer.write_text(text)
        await self.tmux("load-buffer", "-b", "lab-paste", str(buffer))
        await self.tmux("paste-buffer", "-p", "-r", "-d", "-b", "lab-paste", "-t", self.pane)
        self._last_key_at = time.monotonic()

    async def wait_for_screen(
        self,
        predicate: Callable[[str], bool],
        timeout: float,
        *,
        what: str = "the expected screen",
    ) -> str:
        """Poll the plain-text pane until predicate holds; return that screen.

        Raises ScreenTimeout with the last screen, or LabError at once if the
        client exited.
        """
        screen = ""
        with trio.move_on_after(timeout):
            while True:
                screen = await self.text()
                if predicate(screen):
                    return screen
                if _EXIT_BANNER in screen:
                    raise ScreenTimeout(
                        f"{self.client.name} exited while waiting for {what}", screen
                    )
                await trio.sleep(POLL_SECONDS)
        raise ScreenTimeout(f"{self.client.name}: no {what} within {timeout} s", screen)

    async def replace_agent(self, *extra: str, quit_keys: tuple[str, ...] = ()) -> int:
        """End the client and start it again in the same pane, as a person would; its pid.

        The person quits it with `quit_keys`, or else it is killed (SIGKILL). The pane's
        shell survives the client and takes the same command line, with `extra` arguments
        after it (``--continue``), so the pane stays while the agent process (a new
        incarnation) changes.
        """
        old = self.agent_pid
        if quit_keys:
            await self.send_keys(*quit_keys)
        else:
            os.kill(old, signal.SIGKILL)
        await self.wait_for_screen(lambda s: _EXIT_BANNER in s, START_TIMEOUT, what="the shell")
        # Cleared first: the old client's exit banner would read as this one's exit.
        await self.send_keys(f"clear; {shlex.join([*self.argv, *extra])}", literal=True)
        await self.send_keys("Enter")
        binary = Path(self.argv[0])
        with trio.move_on_after(START_TIMEOUT):
            while (pid := _child_running(self.pane_pid, binary)) in (None, old):
                await trio.sleep(POLL_SECONDS)
            assert pid is not None
            self.agent_pid = pid
            await self.wait_idle()
            return pid
        raise LabError(f"{self.client.name}: no new client process in the pane")

    async def wait_idle(self, timeout: float = START_TIMEOUT) -> str:
        """Wait for the idle, empty composer."""
        idle = IDLE[self.agent]
        if self.agent == "codex" and self.rows < CODEX_STATUS_MIN_ROWS:
            idle = _codex_composer_up
        return await self.wait_for_screen(idle, timeout, what="idle composer")

    async def wait_stable(
        self,
        quiet: float = 0.5,
        timeout: float = 10.0,
    ) -> str:
        """Wait until the pane has not changed for `quiet` seconds (animations settled)."""
        screen = await self.capture()
        since = trio.current_time()
        with trio.move_on_after(timeout):
            while trio.current_time() - since < quiet:
                await trio.sleep(POLL_SECONDS)
                now = await self.capture()
                if now != screen:
                    screen, since = now, trio.current_time()
            return screen
        raise ScreenTimeout(f"{self.client.name}: screen still changing after {timeout} s", screen)

    async def submit(self, text: str, *, timeout: float = 10.0) -> None:
        """Type a composer message, wait until it shows, then press Enter once.

        Enter goes out only after the text is on screen and the quiet guard
        passed, so it is read as "send", not as a newline in the draft.
        """
        await self.press_until(
            lambda: self.type_text(text), lambda s: text in s, timeout, what=f"draft {text!r}"
        )
        await trio.sleep_until(trio.current_time() + self._guard_left())
        await self.send_keys("Enter")

    async def press_until(
        self,
        press: Callable[[], Awaitable[None]],
        predicate: Callable[[str], bool],
        timeout: float,
        *,
        what: str,
    ) -> str:
        """Press keys until the screen shows their effect; return that screen.

        Codex 0.169.0 paints its composer a moment before it reads keys and
        drops what arrives earlier. The press is repeated only while the screen
        is exactly as before it, so a press that was read is never repeated; one
        read but not yet drawn whole (a long text on a loaded machine) is waited
        for until the deadline.
        """
        deadline = trio.current_time() + timeout
        while True:
            before = await self.text()
            await press()
            wait = min(DROPPED_KEY_SECONDS, deadline - trio.current_time())
            try:
                return await self.wait_for_screen(predicate, max(wait, 0.0), what=what)
            except ScreenTimeout as exc:
                left = deadline - trio.current_time()
                if left <= 0:
                    raise
                if exc.screen != before:
                    return await self.wait_for_screen(predicate, left, what=what)

    def _guard_left(self) -> float:
        return max(0.0, self._last_key_at + ENTER_GUARD_SECONDS - time.monotonic())

    async def enter_plan_mode(self, timeout: float = 10.0) -> None:
        """Codex: Shift+Tab once and wait for the "Plan mode" footer."""
        if self.agent != "codex":
            raise LabError("plan mode is a Codex collaboration mode; Claude has no equivalent here")
        await self.press_until(
            lambda: self.send_keys("BTab"),
            lambda s: _PLAN_MODE_FOOTER.search(s) is not None,
            timeout,
            what="Plan mode footer",
        )

    def transcript_files(self) -> list[Path]:
        """Claude's session transcripts or Codex's rollout files, oldest first."""
        if self.agent == "claude":
            found = (self.home / ".claude" / "projects").glob("*/*.jsonl")
        else:
            assert self.codex_home is not None
            found = (self.codex_home / "sessions").glob("**/rollout-*.jsonl")
        return sorted(found, key=lambda path: path.stat().st_mtime)

    def transcript_records(self) -> list[object]:
        """Every JSON record of the transcript files, in file order.

        A line still being written (not yet valid JSON) is left out.
        """
        records: list[object] = []
        for path in self.transcript_files():
            for line in path.read_text().splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return records

    async def wait_for_transcript(
        self,
        predicate: Callable[[list[object]], bool],
        timeout: float,
    ) -> list[object]:
        """Poll the transcript records until predicate holds; they are written asynchronously."""
        with trio.move_on_after(timeout):
            while not predicate(records := self.transcript_records()):
                await trio.sleep(POLL_SECONDS)
            return records
        raise LabError(
            f"{self.client.name}: transcript condition not met within {timeout} s; "
            f"files: {[str(p) for p in self.transcript_files()]}"
        )


def _client_argv(client: Client, binary: Path, preseed: Preseed) -> list[str]:
    if client.agent == "claude":
        # 2.1.328 otherwise starts in "auto mode", which hides permission prompts.
        argv = [str(binary), "--permission-mode", "default"]
        given = preseed.claude_settings_argument
        if given is not None and preseed.claude_settings_in_file:
            given = SETTINGS_FLAG_FILE
        return argv if given is None else [*argv, "--settings", given]
    return [str(binary), *(() if preseed.codex_alt_screen else ("--no-alt-screen",))]


def run_processes(root: Path) -> list[int]:
    """Pids of processes started for the run in `root`: by env marker or by path under root.

    Tests use it to prove that a finished run left nothing behind.
    """
    marker = f"{MARKER_VAR}={root.name}".encode()
    needle = str(root).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone, or not ours
        if marker in environ.split(b"\0") or needle in cmdline:
            found.append(int(entry.name))
    return found


async def wait_gone(root: Path, seconds: float) -> list[int]:
    """The run's processes still there once they had ``seconds`` to end."""
    with trio.move_on_after(seconds):
        while run_processes(root):
            await trio.sleep(POLL_SECONDS)
    return run_processes(root)


async def end_run(root: Path, grace: float, after_kill: float) -> list[int]:
    """Give the run's processes ``grace`` seconds to end, SIGKILL the rest; the survivors."""
    for pid in await wait_gone(root, grace):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    return await wait_gone(root, after_kill)


def _claim(root: Path) -> None:
    """Record this process as the run's owner, for `end_abandoned`."""
    me = os.getpid()
    (root / OWNER_FILE).write_text(f"{me} {start_ticks(me)}\n")


def _abandoned(root: Path) -> bool:
    """Whether the process that launched the run in `root` is gone (a killed test worker)."""
    try:
        pid, ticks = (int(field) for field in (root / OWNER_FILE).read_text().split())
    except (OSError, ValueError):
        return False  # not a launched run, or its owner is still writing the file
    return not alive(pid, ticks)


async def end_abandoned(parent: Path | None = None) -> list[Path]:
    """End every run whose launching process died without its teardown; their directories.

    A process killed by a signal (a crashed test worker, a killed `akk qualify`)
    cannot run `launch`'s teardown, and its tmux server, client and `akk serve`
    would stay up. The run's processes are found as the teardown finds them.
    """
    base = Path(tempfile.gettempdir()) if parent is None else parent
    ended = []
    for root in sorted(base.glob(f"{RUN_PREFIX}*")):
        if root.is_dir() and _abandoned(root):
            await _teardown(root, root / "tmux.sock")
            ended.append(root)
    return ended


async def _teardown(root: Path, socket: Path) -> None:
    """Kill the tmux server and every process of the run, then remove its files."""
    if await trio.Path(socket).exists():
        await trio.run_process(
            ["tmux", "-S", str(socket), "kill-server"], check=False, capture_stderr=True
        )
    left = await end_run(root, _TEARDOWN_GRACE_SECONDS, _TEARDOWN_KILL_SECONDS)
    shutil.rmtree(root, ignore_errors=True)
    if left:
        raise LabError(f"lab processes survived SIGKILL: {left}; inspect them with `ps -fp PID`")


async def _agent_pid(socket: Path, pane_pid: int, binary: Path) -> int:
    """The client's pid: the pane shell's child running the binary (or bubblewrap's child)."""
    with trio.move_on_after(START_TIMEOUT):
        while (pid := _child_running(pane_pid, binary)) is None:
            await trio.sleep(POLL_SECONDS)
        return pid
    raise LabError(f"no {binary.name} process under the pane shell {pane_pid} ({socket})")


def _child_running(pid: int, binary: Path, depth: int = 2) -> int | None:
    wanted = binary.resolve()
    for child in _children(pid):
        try:
            if Path(f"/proc/{child}/exe").resolve() == wanted or _runs_script(child, wanted):
                return child
        except OSError:
            continue
        if depth > 1 and (found := _child_running(child, binary, depth - 1)) is not None:
            return found
    return None


def _runs_script(pid: int, script: Path) -> bool:
    """Whether ``pid`` is node running ``script`` as a pure-JS Claude (discovery's rule)."""
    info = read_process(pid)
    found = None if info is None else classify(info)
    return found is not None and found[1] == "pure_js" and Path(found[2][-1]) == script


def _children(pid: int) -> list[int]:
    """The children of ``pid`` now (none once it has exited: a short-lived one often has)."""
    children: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return children
    for task in tasks:
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return children


@attrs.frozen
class Confinement:
    """How a run is kept from the person's machine: bubblewrap, and its CPU priority."""

    sandbox: bool = False
    """Run the client under bubblewrap with the person's HOME hidden (`sandbox_argv`)."""
    niceness: int = 0
    """`nice` for the run's tmux server and so for everything it starts (19: the lowest)."""


UNCONFINED = Confinement()
"""A lab run as the tests make it: no bubblewrap, the ordinary priority."""


def sandbox_argv(argv: Sequence[str], root: Path) -> list[str]:
    """`argv` under bubblewrap: the system as it is, the person's HOME an empty tmpfs.

    Only the run's own directory (`root`, which holds the run's HOME and
    CODEX_HOME) and the binary's directory (read-only) are visible inside the
    hidden HOME, so a client that ignores $HOME still cannot read or write the
    person's config, sessions or credentials. The network is shared: the model
    server listens on the host's loopback.
    """
    binary_dir = str(Path(argv[0]).resolve().parent)
    home = str(Path.home())
    return [
        "bwrap",
        *("--dev-bind", "/", "/"),
        *("--tmpfs", home),
        *("--bind", str(root), str(root)),
        *("--ro-bind", binary_dir, binary_dir),
        "--die-with-parent",
        "--",
        *argv,
    ]


async def _start(
    client: Client,
    scenario: Scenario,
    server: ModelServer,
    root: Path,
    *,
    cols: int,
    rows: int,
    preseed: Preseed,
    binary: Path,
    confine: Confinement,
) -> LabSession:
    files = prepare(client, root, server.port, preseed)
    home, codex_home, workdir, env = files.home, files.codex_home, files.workdir, files.env
    for name, text in scenario.files:
        (workdir / name).write_text(text)
    socket = root / "tmux.sock"
    # The pane runs a shell with job control, so the client gets its own
    # foreground process group (pane_current_command shows it, as for a person).
    shell = [
        "/bin/bash",
        "--noprofile",
        "--norc",
        "-c",
        f'set -m; "$@"; echo "{_EXIT_BANNER} $?"; exec /bin/bash --noprofile --norc -i',
        "lab-shell",
    ]
    argv = _client_argv(client, binary, preseed)
    command = sandbox_argv(argv, root) if confine.sandbox else argv
    launched_at = time.monotonic()
    tmux = ["tmux", "-S", str(socket), "-f", os.devnull]
    niced = ["nice", "-n", str(confine.niceness)] if confine.niceness else []
    await trio.run_process(
        [
            *niced,
            *tmux,
            *("new-session", "-d", "-s", "lab", "-x", str(cols), "-y", str(rows)),
            *("-c", str(workdir), *shell, *command),
        ],
        env=env,
        capture_stderr=True,
    )
    # The pane is the whole window: no status line, fixed size.
    await trio.run_process([*tmux, "set", "-g", "status", "off"], capture_stderr=True)
    await trio.run_process([*tmux, "set", "-g", "window-size", "manual"], capture_stderr=True)
    listing = await trio.run_process(
        [*tmux, "display", "-p", "-t", "lab", "#{pane_id} #{pane_pid}"],
        capture_stdout=True,
    )
    pane, pane_pid = listing.stdout.decode().split()
    agent_pid = await _agent_pid(socket, int(pane_pid), binary)
    return LabSession(
        client=client,
        scenario=scenario,
        cols=cols,
        rows=rows,
        root=root,
        socket=socket,
        pane=pane,
        home=home,
        codex_home=codex_home,
        workdir=workdir,
        server=server,
        pane_pid=int(pane_pid),
        agent_pid=agent_pid,
        launched_at=launched_at,
        argv=tuple(argv),
    )


@asynccontextmanager
async def launch(
    client: Client,
    scenario: Scenario,
    *,
    cols: int = 120,
    rows: int = 40,
    plan_mode: bool = False,
    preseed: Preseed = READY,
    confine: Confinement = UNCONFINED,
) -> AsyncIterator[LabSession]:
    """Start `client` against `scenario`; yield it idle (or blocked, per `preseed`).

    With a full `preseed` the session is yielded at the idle composer (and in
    Plan mode if asked); otherwise as soon as the client process runs.
    `confine` may run it under bubblewrap and at a low priority. Raises
    LabError if the binary is missing or never reaches the composer.
    Everything started here is gone when the block exits, however it exits; if
    this process is killed instead, the next launch ends the run (`end_abandoned`).
    """
    binary = client.binary()
    if not binary.is_file():
        raise LabError(f"{client.name}: no executable at {binary}")
    await end_abandoned()
    server = ModelServer(scenario)
    root = Path(tempfile.mkdtemp(prefix=RUN_PREFIX))
    _claim(root)
    own_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(server.serve)
                session = await _start(
                    client,
                    scenario,
                    server,
                    root,
                    cols=cols,
                    rows=rows,
                    preseed=preseed,
                    binary=binary,
                    confine=confine,
                )
                if preseed.ready:
                    await session.wait_idle()
                    if client.agent == "codex":
                        # Codex 0.169.0 paints a configured composer before it
                        # fully reads keys: a Shift+Tab right then switches the
                        # model but not the mode. A quiet screen is past that.
                        await session.wait_stable(CODEX_SETTLE_SECONDS)
                    session.ready_after = time.monotonic() - session.launched_at
                    if plan_mode:
                        await session.enter_plan_mode()
                yield session
            except BaseException as exc:
                own_error = exc
                raise
            finally:
                with trio.CancelScope(shield=True):
                    await _teardown(root, root / "tmux.sock")
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The nursery wraps the start-up's or the caller's own error; re-raise
        # that error itself so a failing test reads as its assertion.
        if own_error is not None and group.exceptions == (own_error,):
            raise own_error from None
        raise
