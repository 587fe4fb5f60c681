"""An MCP host drives AKK: a real Claude Code, headless, with `akk mcp` as its MCP server.

`claude_host` starts the host's own scripted model server and writes an
isolated Claude HOME for it (`run_files.prepare`). `ClaudeHost.add_server`
registers an MCP server exactly as a person would (`claude mcp add NAME -e
KEY=VALUE -- COMMAND...`, the local scope of the working directory), and
`ClaudeHost.run` runs one `claude -p` session pre-approved for that server's
tools (`--allowedTools mcp__NAME`), yielding each stream-json message as it
comes. The scripted model (`scenarios.ComputedStep`) then calls the tools with
ids read from earlier tool results.

Headless rather than the TUI: the MCP client inside Claude Code is the same,
and `-p` adds no screen to read, ends on its own, and prints every tool call
and result the model saw as JSON. The lab test (tests/lab/test_mcp_host.py)
and the demo's agent-controller mode (`DEMO_CONTROLLER=claude`) share it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabError, end_run
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import RunFiles, prepare
from akk.qualify.scenarios import Scenario
from tools.lab.clients import Client

Json = dict[str, Any]

MCP_CONNECT_SECONDS = 60
"""How long Claude Code waits for its MCP servers before its first request (`-p`)."""
WAIT_FOR_SERVERS = {
    "MCP_CONNECTION_NONBLOCKING": "false",
    "MCP_CONNECT_TIMEOUT_MS": str(MCP_CONNECT_SECONDS * 1000),
}
"""Claude Code's environment for `-p`: connect the MCP servers before the first request.

Without the first variable 2.1.332 sends its first request while a server still
starts (`akk mcp` takes about a second, importing the MCP SDK): that request
offers none of its tools, so a model could not know them on its first turn. With
it, Claude still waits only `MCP_CONNECT_TIMEOUT_MS` (5 s unless set) and then
goes on with the server `pending`; on a loaded 2-core machine (load 10-14) `akk
mcp` needs 4-7 s to import alone, so the wait gets a deadline that holds there.
"""
CONTROLLER_ID = "claude-host"
"""The controller whose credential `akk mcp` runs with (minted before `akk serve` starts)."""
GONE_SECONDS = 10.0
"""How long the processes of a finished host run may take to exit before they are killed."""


def akk_command() -> list[str]:
    """`akk` as installed beside this Python (the console script), else `python -m akk`."""
    script = Path(sys.executable).parent / "akk"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "akk"]


def allowed_tools(server: str) -> str:
    """The `--allowedTools` rule that pre-approves every tool of MCP server `server`."""
    return f"mcp__{server}"


@attrs.frozen
class ClaudeHost:
    """A pinned Claude Code's isolated HOME and working directory, and its scripted model."""

    client: Client
    model: ModelServer
    files: RunFiles
    root: Path

    def argv(self, *args: str) -> list[str]:
        return [str(self.client.binary()), *args]

    async def claude(self, *args: str) -> str:
        """Run `claude ARGS` in the host's HOME and working directory; its stdout.

        Raises LabError with the output when it exits non-zero.
        """
        done = await trio.run_process(
            self.argv(*args),
            cwd=self.files.workdir,
            env=self.files.env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        out = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            error = done.stderr.decode(errors="replace")
            raise LabError(f"claude {' '.join(args[:2])} exited {done.returncode}: {out}{error}")
        return out

    async def add_server(
        self, name: str, command: Sequence[str], env: Mapping[str, str] | None = None
    ) -> str:
        """`claude mcp add NAME [-e KEY=VALUE ...] -- COMMAND...`; what it printed."""
        pairs = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
        return await self.claude("mcp", "add", name, *pairs, "--", *command)

    async def add_akk(self, state_dir: Path, token: str) -> str:
        """`claude mcp add akk -- akk mcp --state-dir DIR --token-file FILE`; what it printed.

        The credential goes into a 0600 file of the host's run, so the host's
        config names a path, not the secret; `akk mcp` finds the server by its
        state directory (the endpoint that directory proves).
        """
        token_file = self.root / "akk.token"
        descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(token + "\n")
        command = ["mcp", "--state-dir", str(state_dir), "--token-file", str(token_file)]
        return await self.add_server(sc.MCP_SERVER, [*akk_command(), *command])

    def allow_in_settings(self, server: str) -> None:
        """Pre-approve `server`'s tools in the user settings (`permissions.allow`), as a
        person would for the TUI, instead of `run`'s `--allowedTools`."""
        settings = self.files.home / ".claude" / "settings.json"
        settings.parent.mkdir(exist_ok=True)
        current = json.loads(settings.read_text()) if settings.is_file() else {}
        current.setdefault("permissions", {}).setdefault("allow", []).append(allowed_tools(server))
        settings.write_text(json.dumps(current, indent=2))

    async def run(
        self, task: str, server: str | None, on_message: Callable[[Json], None] = lambda _: None
    ) -> list[Json]:
        """One headless session on `task`; every stream-json message it printed.

        `server`'s tools are pre-approved with `--allowedTools` (None: by the
        settings alone). Each message goes to `on_message` as it arrives.
        Raises LabError when claude exits non-zero. Cancelling kills claude.
        """
        allowed = () if server is None else ("--allowedTools", allowed_tools(server))
        argv = self.argv(
            "-p", task, *allowed,
            "--output-format", "stream-json", "--verbose",
            "--permission-mode", "default",
        )  # fmt: skip
        messages: list[Json] = []
        log = self.root / "claude-p.stderr"
        with log.open("wb") as stderr:
            async with trio.open_nursery() as nursery:
                start = partial(
                    trio.run_process,
                    argv,
                    cwd=self.files.workdir,
                    env=self.files.env | WAIT_FOR_SERVERS,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    check=False,
                )
                process: trio.Process = await nursery.start(start)
                assert process.stdout is not None
                buffer = b""
                async for chunk in process.stdout:
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            message = json.loads(line)
                            messages.append(message)
                            on_message(message)
        if process.returncode != 0:
            error = log.read_text(errors="replace")[-2000:]
            raise LabError(f"claude -p exited {process.returncode}: {error}; it printed {messages}")
        return messages


def tool_uses(messages: Sequence[Json]) -> list[Json]:
    """The tool_use blocks of a session's assistant messages (stream-json), in order."""
    return [
        block
        for message in messages
        if message.get("type") == "assistant"
        for block in message["message"]["content"]
        if block.get("type") == "tool_use"
    ]


def tool_results(messages: Sequence[Json]) -> dict[str, Any]:
    """Each tool_result a session sent its model, by tool_use id, as JSON (text if it is not)."""
    found: dict[str, Any] = {}
    for message in messages:
        content = message["message"]["content"] if message.get("type") == "user" else ()
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_result":
                (found[block["tool_use_id"]],) = sc.tool_results([message["message"]])
    return found


@asynccontextmanager
async def claude_host(client: Client, scenario: Scenario) -> AsyncIterator[ClaudeHost]:
    """`client`'s HOME and working directory, talking to a model server playing `scenario`.

    On the way out the model server stops, every process of the run (claude, the
    MCP servers it started) is gone, killed if it lingers, and the directory is
    removed. Raises LabError if a process survives SIGKILL.
    """
    root = Path(tempfile.mkdtemp(prefix="akk-host-"))
    model = ModelServer(scenario)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(model.serve)
            files = prepare(client, root, model.port)
            try:
                yield ClaudeHost(client, model, files, root)
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            left = await end_run(root, GONE_SECONDS, GONE_SECONDS)
        shutil.rmtree(root, ignore_errors=True)
    if left:
        raise LabError(f"processes of the host run survived SIGKILL: {left}")
