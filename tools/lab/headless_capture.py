"""Capture real stream-json lines of every pinned Claude into fixtures/claude_headless/.

    python -m tools.lab.headless_capture [--version 2.1.332]

Runs one headless Claude (`akk.backends.claude_headless.process`) per version
against the scripted model server and writes `<version>/stdout.jsonl` (every line
Claude wrote, as written) and `stdin.jsonl` (every line written to it). The flow:
echo; a Bash call allowed with its input unchanged; one denied; an interrupted slow
stream; an AskUserQuestion call, denied. tests/test_claude_wire.py replays them.
Run it under the lab lock (`flock /tmp/akk-lab.lock ...`).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import uuid
from pathlib import Path

import trio

from akk.backends.claude_headless import wire
from akk.backends.claude_headless.process import ClaudeProcess, NewSession, open_claude
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import prepare
from akk.qualify.scenarios import (
    ASK_TASK,
    BASH_CALL,
    BASH_MARKER,
    ECHO_REPLY,
    ECHO_TASK,
    RUN_TASK,
    SLOW_REPLY,
    SLOW_TASK,
    AskUserQuestion,
    Option,
    Question,
    Scenario,
    SlowText,
    Step,
    Text,
)
from tools.lab import clients
from tools.lab.clients import FIXTURES, Client

TARGET = FIXTURES / "claude_headless"
DENIED = "The operator rejected this."
QUESTION = Question(
    "Which color do you prefer?", "Color", (Option("Red", "A warm color"), Option("Blue"))
)
SCENARIO = Scenario(
    "claude_headless_capture",
    task=ECHO_TASK,
    agents=frozenset({"claude"}),
    steps=(
        Step(ECHO_TASK, Text(ECHO_REPLY)),
        Step(RUN_TASK, BASH_CALL, repeat=True),
        Step(BASH_MARKER, Text("The command ran.")),
        Step(SLOW_TASK, SlowText(SLOW_REPLY)),
        Step(ASK_TASK, AskUserQuestion((QUESTION,))),
    ),
)


class _Recorder:
    """Writes and reads through one process; its tap keeps every line both ways."""

    def __init__(self) -> None:
        self.lines: dict[str, list[bytes]] = {"stdin": [], "stdout": []}
        self.claude: ClaudeProcess | None = None

    def tap(self, direction: str, line: bytes) -> None:
        self.lines[direction].append(line)

    async def send(self, line: bytes) -> None:
        assert self.claude is not None
        await self.claude.send(line)

    async def until(self, kind: type) -> wire.Message:
        assert self.claude is not None
        with trio.fail_after(60):
            async for message in self.claude.messages:
                if isinstance(message, wire.WireError):
                    raise SystemExit(f"claude wrote a line wire cannot type: {message}")
                if isinstance(message, kind):
                    return message
        raise SystemExit(f"claude ended its output before a {kind.__name__}")


async def capture(client: Client) -> Path:
    """Run the flow on `client` and write its fixture files; return their folder."""
    server = ModelServer(SCENARIO)
    root = Path(tempfile.mkdtemp(prefix="akk-lab-"))
    run = _Recorder()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            files = prepare(client, root, server.port)
            start = NewSession(str(uuid.uuid4()))
            async with open_claude(
                client.binary(),
                start,
                cwd=files.workdir,
                config_dir=files.home / ".claude",
                env=files.env,
                tap=run.tap,
            ) as claude:
                run.claude = claude
                await run.send(wire.user_message(ECHO_TASK))
                await run.until(wire.Result)
                for task, decision in (
                    (RUN_TASK, None),
                    (f"{RUN_TASK} again", {"behavior": "deny", "message": DENIED}),
                ):
                    await run.send(wire.user_message(task))
                    request = await run.until(wire.ControlRequest)
                    assert isinstance(request, wire.ControlRequest)
                    allow = {"behavior": "allow", "updatedInput": request.request["input"]}
                    await run.send(wire.control_success(request.request_id, decision or allow))
                    await run.until(wire.Result)
                await run.send(wire.user_message(SLOW_TASK))
                await server.wait_for_request(lambda r: SLOW_TASK in r.newest_input, timeout=60)
                await run.send(wire.interrupt("akk-int-1"))
                await run.until(wire.Result)
                await run.send(wire.user_message(ASK_TASK))
                request = await run.until(wire.ControlRequest)
                assert isinstance(request, wire.ControlRequest)
                await run.send(
                    wire.control_success(
                        request.request_id, {"behavior": "deny", "message": DENIED}
                    )
                )
                await run.until(wire.Result)
            nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    folder = TARGET / client.version
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stdout.jsonl").write_bytes(b"".join(run.lines["stdout"]))
    (folder / "stdin.jsonl").write_bytes(b"".join(run.lines["stdin"]))
    return folder


def main(argv: list[str] | None = None) -> None:
    """Command line: capture every pinned Claude, or one `--version`."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.lab.headless_capture", description=__doc__
    )
    parser.add_argument("--version", help="one pinned Claude version (default: all)")
    args = parser.parse_args(argv)
    chosen = [
        c for c in clients.PINNED if c.agent == "claude" and args.version in (None, c.version)
    ]
    if not chosen:
        raise SystemExit(f"{args.version} is not a pinned Claude version")
    for client in chosen:
        print(trio.run(capture, client))


if __name__ == "__main__":
    main()
