"""Run AKK against a lab pane: in-process (`serving`) or as a killable process (`AkkProcess`).

Both watch only the lab's private tmux server and use a fresh state directory
with controller credentials minted before the start (`mint_offline`), like an
operator would. The lab tests and the benches (`tools/bench_*.py`) share it.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import aclosing, asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import trio

from akk import faults
from akk.backends.codex_app_server.rpc import Tap
from akk.client import Controller, connect
from akk.config import ServiceConfig, TurnSettings
from akk.discovery.process import children, read_process
from akk.profiles.registry import PINNED, Registry
from akk.qualify.launcher import LabError, LabSession, run_processes
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import Preseed, RunFiles, prepare
from akk.server.instance import Endpoint
from akk.service import run_service
from akk.store import credentials
from akk.store.database import open_store
from akk.store.location import StateDir
from akk.tmux.control import ControlClient, UnencodableCommand, encode_command
from tools.lab.clients import Client

OUTCOMES = frozenset({"done", "failed", "cancelled", "stalled", "timed_out"})


def mint_offline(state: StateDir, *names: str) -> dict[str, str]:
    """Mint controller credentials into a store no server holds (as `akk token create` does)."""
    state.ensure()
    conn = open_store(state.store_path)
    try:
        with conn:
            minted = [credentials.create(conn, name, 0.0, actor="test") for name in names]
    finally:
        conn.close()
    return {m.controller_id: m.token for m in minted}


KEY_COMMANDS = frozenset({"send-keys", "set-buffer", "paste-buffer"})
"""The tmux commands that put input into a pane (akk.tmux.keys writes only these)."""


@attrs.define
class KeyLog:
    """Every command this process's control clients wrote to one tmux server, in order."""

    socket: str
    commands: list[tuple[str, ...]] = attrs.field(factory=list)

    def keys(self) -> list[tuple[str, ...]]:
        """The commands that put input into a pane."""
        return [argv for argv in self.commands if argv[0] in KEY_COMMANDS]


@contextmanager
def recording_keys(socket: str) -> Iterator[KeyLog]:
    """Record every command AKK writes to the tmux server at ``socket`` while the block runs.

    The recording sits in `ControlClient.command` itself and keeps each line
    that encodes (what is written to tmux): a test asserts zero keys
    at the key layer rather than inferring them from the model server. The lab's
    own helpers run tmux as a process and are never recorded.
    """
    log = KeyLog(socket)
    original = ControlClient.command

    async def command(self: ControlClient, *argv: str) -> list[str]:
        if self.socket_path == socket:
            with suppress(UnencodableCommand):  # refused before a byte was written
                encode_command(argv)
                log.commands.append(argv)
        return await original(self, *argv)

    ControlClient.command = command  # type: ignore[method-assign]
    try:
        yield log
    finally:
        ControlClient.command = original  # type: ignore[method-assign]


@attrs.frozen
class Served:
    endpoint: Endpoint
    state: StateDir
    tokens: dict[str, str]
    keys: KeyLog | None = None
    """Every command AKK wrote to the lab's tmux server (`serving`; None without a pane)."""


@asynccontextmanager
async def serving(
    lab: LabSession,
    tmp_path: Path,
    *names: str,
    turns: TurnSettings | None = None,
    registry: Registry = PINNED,
    auto_qualify: bool = False,
) -> AsyncIterator[Served]:
    """`akk serve` in this process, watching the lab's tmux server (with these Turn settings).

    `registry`: the pinned set panes bind to (``PINNED.without(...)`` takes a pinned
    version as new, so only a qualification binds it); `auto_qualify` as
    `akk serve --auto-qualify`.
    """
    state = StateDir(tmp_path / "akk")
    tokens = mint_offline(state, *(names or ("ctl",)))
    config = ServiceConfig(
        state=state,
        port=0,
        tmux_sockets=(str(lab.socket),),
        poll_interval=0.1,
        turns=turns or TurnSettings(),
        registry=registry,
        auto_qualify=auto_qualify,
    )
    with recording_keys(str(lab.socket)) as keys:
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            yield Served(endpoint, state, tokens, keys)
            nursery.cancel_scope.cancel()


@attrs.frozen
class BackendChild:
    """A prepared client home (CODEX_HOME, or Claude's config dir) beside an `akk serve`
    child for it (`backend_child`)."""

    root: Path
    """The run's root: its name marks every process of the run (`run_processes`)."""
    files: RunFiles
    akk: AkkProcess
    serve_args: tuple[str, ...]
    """`akk serve`'s arguments naming the client's binary and that home."""


@asynccontextmanager
async def backend_child(
    client: Client, run: Path, model: ModelServer
) -> AsyncIterator[BackendChild]:
    """``model`` served, ``client``'s home prepared to talk to it, and an `akk serve` child
    the caller starts (and may kill and start again); stopped on the way out. A Codex
    client runs the app-server backend, a Claude client the headless one.

    Raises LabError if a process of the run outlives it.
    """
    root = run / f"lab-{secrets.token_hex(6)}"
    root.mkdir()
    async with trio.open_nursery() as nursery:
        await nursery.start(model.serve)
        files = prepare(client, root, model.port)
        akk = AkkProcess(None, run, env=files.env)
        if client.agent == "claude":
            args: tuple[str, ...] = (
                "--claude-bin", str(client.binary()),
                "--claude-config-dir", str(files.home / ".claude"),
                "--codex-bin", str(run / "not-installed"),
            )  # fmt: skip
        else:
            args = ("--codex-bin", str(client.binary()), "--codex-home", str(files.codex_home))
        try:
            yield BackendChild(root, files, akk, args)
        finally:
            await trio.to_thread.run_sync(akk.stop)
            nursery.cancel_scope.cancel()
    left = run_processes(root)
    if left:
        raise LabError(f"processes of the run outlived it: {left}")


@asynccontextmanager
async def serving_backend(
    client: Client,
    tmp_path: Path,
    model: ModelServer,
    *names: str,
    turns: TurnSettings | None = None,
    preseed: Preseed | None = None,
    tap: Tap | None = None,
) -> AsyncIterator[tuple[Served, RunFiles]]:
    """`akk serve` in this process with ``client``'s session backend (no tmux pane).

    A Codex client runs the app-server backend, a Claude client the headless one
    (the other backend is then unavailable). Its home (CODEX_HOME, or the Claude
    config dir) and the working directory are the lab's, talking to ``model``
    (which the caller serves), under ``files.workdir.parent``; ``tmp_path`` is the
    one workspace root. The watcher looks at a tmux socket no server uses.
    """
    # The run's marker is its root's name: unique, so parallel runs never see each other.
    root = tmp_path / f"lab-{secrets.token_hex(6)}"
    root.mkdir()
    files = prepare(client, root, model.port, preseed or Preseed())
    state = StateDir(tmp_path / "akk")
    tokens = mint_offline(state, *(names or ("ctl",)))
    absent = str(tmp_path / "not-installed")
    if client.agent == "claude":
        agent: dict[str, Any] = {
            "codex_bin": absent,
            "claude_bin": str(client.binary()),
            "claude_config_dir": str(files.home / ".claude"),
            "claude_env": tuple(files.env.items()),
        }
    else:
        assert files.codex_home is not None
        agent = {
            "codex_bin": str(client.binary()),
            "codex_home": str(files.codex_home),
            "codex_env": tuple(files.env.items()),
            "codex_tap": tap,
            "claude_bin": absent,
        }
    config = ServiceConfig(
        state=state,
        port=0,
        tmux_sockets=(str(tmp_path / "no-tmux-server"),),
        poll_interval=0.1,
        turns=turns or TurnSettings(),
        workspace_roots=(str(tmp_path),),
        **agent,
    )
    async with trio.open_nursery() as nursery:
        endpoint = await nursery.start(
            lambda task_status: run_service(config, task_status=task_status)
        )
        yield Served(endpoint, state, tokens), files
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def two_controllers(
    lab: LabSession,
    tmp_path: Path,
    turns: TurnSettings | None = None,
    registry: Registry = PINNED,
) -> AsyncIterator[tuple[Served, Controller, Controller]]:
    """`serving`, with controllers "ctl" and "other" connected (the owner and an intruder)."""
    async with (
        serving(lab, tmp_path, "ctl", "other", turns=turns, registry=registry) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
        connect(served.endpoint.url, served.tokens["other"]) as other,
    ):
        yield served, ctl, other


async def idle_terminal(ctl: Controller, timeout: float = 20) -> dict[str, Any]:
    """The lab pane's row once AKK sees it idle under its exact profile."""
    with trio.fail_after(timeout):
        while True:
            rows = (await ctl.call("list"))["terminals"]
            if rows and rows[0]["profile"] and rows[0]["activity_state"] == "idle":
                row: dict[str, Any] = rows[0]
                return row
            await trio.sleep(0.05)


async def outcome(ctl: Controller, record_id: str, timeout: float = 60) -> dict[str, Any]:
    """The outcome event of a Turn or Watch (every event on the way is acked).

    A managed Send's ``turn_id`` is also its ``watch_id``, so both match by it.
    """
    return (await outcomes(ctl, (record_id,), timeout))[record_id]


async def outcomes(
    ctl: Controller, record_ids: Iterable[str], timeout: float = 60
) -> dict[str, dict[str, Any]]:
    """The outcome event of each of these Turns or Watches, in whatever order they end.

    Every event on the way is acked, so Turns that run at once must be awaited together:
    awaiting one after the other would ack (and so lose) an outcome that came first.
    """
    waiting = set(record_ids)
    found: dict[str, dict[str, Any]] = {}
    with trio.fail_after(timeout):
        async with aclosing(ctl.events()) as events:
            async for event in events:
                await ctl.ack(event["event_id"])
                if event.get("watch_id") in waiting and event["kind"] in OUTCOMES:
                    found[event["watch_id"]] = event
                    waiting.discard(event["watch_id"])
                    if not waiting:
                        return found
    raise AssertionError(f"the connection closed before the outcome of {sorted(waiting)}")


def backend_processes(parent: int, argument: str) -> list[int]:
    """Pids of ``parent``'s direct children whose command line has ``argument``: the
    backend processes an AKK running as ``parent`` started.

    Matching on the whole run instead would also count their forks: a child forked before
    it execs keeps its parent's command line (Codex's app-server forks for its helpers).
    """
    return [
        pid
        for pid in children(parent)
        if (info := read_process(pid)) is not None and argument in info.argv
    ]


class AkkProcess:
    """`akk serve` as a child process that a test can SIGKILL and start again.

    Each life's stderr goes to its own file (`log_path`), read by `died_at`.
    """

    def __init__(
        self,
        lab: LabSession | None,
        tmp_path: Path,
        *names: str,
        env: Mapping[str, str] | None = None,
        own_session: bool = False,
    ) -> None:
        """``lab`` None: no pane (the app-server backend); ``env``: more environment;
        ``own_session``: a session of its own, so a terminal's Ctrl-C reaches only its
        starter, which stops it in turn (the demo)."""
        self._own_session = own_session
        self.state = StateDir(tmp_path / "akk")
        self.tokens = mint_offline(self.state, *(names or ("ctl",)))
        self._socket = str(lab.socket if lab is not None else tmp_path / "no-tmux-server")
        self._env = dict(env or {})
        self._tmp = tmp_path
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.lives = 0
        """How many times `start` ran; life N logs to ``akk-serve-N.log`` (`log_path`)."""

    @property
    def log_path(self) -> Path:
        """The current life's stderr: its log, `faults.FIRED` lines included."""
        return self._tmp / f"akk-serve-{self.lives}.log"

    def start(self, fault: str | None = None, *options: str) -> str:
        env = {
            **os.environ,
            **self._env,
            "AKK_STATE_DIR": str(self.state.path),
            "TMUX_TMPDIR": str(self._tmp),
        }
        env.pop("AKK_FAULT", None)
        if fault:
            env["AKK_FAULT"] = fault
        self.lives += 1
        with self.log_path.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "akk", "serve", "--port", "0", "--tmux-socket",
                 self._socket, "--poll-interval", "0.1", "--log-level", "WARNING",
                 "--workspace-root", str(self._tmp), *options],
                env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
                start_new_session=self._own_session,
            )  # fmt: skip
        line: list[str] = []
        stdout = self.proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        if not line or "listening on" not in line[0]:
            self.kill()
            raise AssertionError(f"akk serve did not start: {line} {self.log_path.read_text()}")
        self.url = line[0].split()[4]
        return self.url

    def died_at(self, point: faults.Point, timeout: float = 60) -> None:
        """Wait for the process to end; AssertionError unless the crash armed at `point` ended it.

        It must have died of SIGKILL, and its log (`log_path`) must name `point` as the
        crash that fired in this very process (`faults.FIRED`), not merely exit non-zero.
        """
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"akk serve still runs after {timeout:.0f} s: {point} never fired"
            ) from None
        why = self.death_mismatch(point, code, self.proc.pid, self.log_path.read_text())
        assert why is None, why

    @staticmethod
    def death_mismatch(point: faults.Point, returncode: int, pid: int, log_text: str) -> str | None:
        """Why a process that ended with `returncode` did not die at `point`'s crash, or None."""
        fired = [f for f in faults.fired_in(log_text) if f.pid == pid]
        if returncode != -signal.SIGKILL:
            return f"it exited with status {returncode}, not by SIGKILL at {point} (fired: {fired})"
        crashes = [f.point for f in fired if f.action is faults.Action.CRASH]
        if not crashes:
            return f"it died of SIGKILL, but no crash point fired (fired: {fired})"
        if crashes != [point]:
            return f"it died at {', '.join(crashes)}, not at {point}"
        return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
