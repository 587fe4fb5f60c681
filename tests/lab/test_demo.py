"""`make demo` end to end, as CI runs it: `DEMO_ATTACH=0 python -m tools.demo`.

Each run drives the newest pinned client through AKK and the reference
controller. The test reads what the demo printed (the steps a person sees),
counts the conversation requests the model server recorded (each answer
exactly once), and then proves nothing of the run is left: no lab process or
tmux server, no `akk serve`, no listener on either port, no directory.
Ctrl-C in the middle of an answer leaves nothing either. And the reference
controller, its server killed and restarted mid-Turn, reconnects, gets the
unacked event again, and answers nothing twice. With DEMO_CONTROLLER=claude a
real Claude Code drives a Codex pane through `akk mcp`'s tools, and leaves
nothing either.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.client import connect
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession, run_processes
from tests.lab.conftest import lab_params
from tests.lab.test_mcp_host import HOST_CALLS
from tools.demo import controller
from tools.lab.akk_runner import AkkProcess, idle_terminal

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 150
"""The demo's own deadline (DEMO_DEADLINE); the test allows the install and clean-up on top."""

Json = dict[str, Any]
_LINE = re.compile(r"^\s*\d+\.\d+s  (\S+)\s+(.*)$")

COMMAND = f"approve_once for `{sc.DEMO_COMMAND}`"
STEPS = {
    "claude": [
        ("event", "interaction_required: questionnaire 1/3"),
        ("answer", "Language: French"),
        ("event", "interaction_required: questionnaire 2/3"),
        ("answer", "Extras: Emoji, Date"),
        ("event", "interaction_required: confirmation 3/3"),
        ("answer", "Review your answers: Submit answers"),
        ("event", "approval_required: permission 1/1"),
        ("answer", COMMAND),
    ],
    "codex": [
        ("event", "interaction_required: questionnaire 1/1"),
        ("answer", "Language: French"),
        ("event", "approval_required: permission 1/1"),
        ("answer", COMMAND),
    ],
}
"""Per agent, the wake-ups and semantic answers the demo must show, in order."""
ANSWERED = {"claude": sc.ANSWERED_CLAUDE, "codex": sc.ANSWERED_CODEX}


@attrs.frozen
class Run:
    """What one demo run printed, and where the things it started lived."""

    output: str
    lab_root: Path
    demo_root: Path
    akk_pid: int
    ports: tuple[int, int]

    @property
    def steps(self) -> list[tuple[str, str]]:
        """(tag, text) of every stamped line."""
        return [(m[1], m[2]) for line in self.output.splitlines() if (m := _LINE.match(line))]

    def texts(self, tag: str) -> list[str]:
        return [text for found, text in self.steps if found == tag]


def parse(output: str) -> Run:
    socket = re.search(r"tmux -S (\S+) attach -t lab", output)
    state = re.search(r"state (\S+), pid (\d+)", output)
    model = re.search(r"model server on 127\.0\.0\.1:(\d+)", output)
    akk = re.search(r"listening on ws://127\.0\.0\.1:(\d+)/v1", output)
    assert socket and state and model and akk, output
    return Run(
        output,
        Path(socket[1]).parent,
        Path(state[1]).parent,
        int(state[2]),
        (int(model[1]), int(akk[1])),
    )


def environment(agent: str) -> dict[str, str]:
    return {**os.environ, "AGENT": agent, "DEMO_ATTACH": "0", "DEMO_DEADLINE": str(DEADLINE)}


async def assert_nothing_left(run: Run) -> None:
    assert not run.lab_root.exists() and not run.demo_root.exists()
    assert run_processes(run.lab_root) == []
    assert not serving_from(run.akk_pid, run.demo_root)
    for port in run.ports:
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", port)


def serving_from(pid: int, demo_root: Path) -> bool:
    """Whether `pid` is still the demo's `akk serve` (its state directory in its environment)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"AKK_STATE_DIR={demo_root / 'akk'}".encode() in environ.split(b"\0")


@pytest.mark.parametrize("agent", ["claude", "codex"])
async def test_the_demo_shows_every_step_and_each_answer_reaches_the_model_once(
    agent: str,
) -> None:
    with trio.fail_after(DEADLINE + 120):
        done = await trio.run_process(
            [sys.executable, "-m", "tools.demo"],
            cwd=REPO,
            env=environment(agent),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    output = done.stdout.decode()
    assert done.returncode == 0, output + done.stderr.decode()
    run = parse(output)
    listed = run.texts("list")
    assert listed and listed[0].startswith("pane %"), output
    assert f"│ {agent}" in output  # the `akk list` table's row
    assert run.texts("send")[0].startswith(f"{sc.DEMO_TASK!r} -> turn_")
    shown = [(tag, text) for tag, text in run.steps if tag in ("event", "answer")]
    assert len(shown) == len(STEPS[agent]), output
    for (tag, text), (want_tag, want) in zip(shown, STEPS[agent], strict=True):
        assert tag == want_tag and text.startswith(want), (text, want)
    assert all("⏱" in text for text in run.texts("event"))
    assert len(run.texts("dispatched")) == len(STEPS[agent]) // 2
    assert all("⏱" in text for text in run.texts("dispatched"))
    # The model server's record, as printed: the task, the answers and the approved
    # command's output each arrived exactly once.
    at_model = run.texts("model")
    for text in (sc.DEMO_TASK, ANSWERED[agent], sc.DEMO_GREETING):
        assert sum(text in line for line in at_model) == 1, (text, at_model)
    (outcome,) = run.texts("done")
    assert outcome.startswith(f"'The card is ready: {sc.DEMO_FILE} says {sc.DEMO_GREETING}.'")
    assert "usage: input" in output and "(complete)" in output
    assert run.texts("timings")
    checks = run.texts("check")
    assert len(checks) == 5 and all(check.startswith("ok") for check in checks), checks
    assert run.texts("cleanup")
    await assert_nothing_left(run)


async def test_ctrl_c_in_the_middle_of_an_answer_leaves_nothing_behind() -> None:
    output = b""
    with trio.fail_after(DEADLINE + 120):
        async with trio.open_nursery() as nursery:
            start = partial(
                trio.run_process,
                [sys.executable, "-m", "tools.demo"],
                cwd=REPO,
                # Attached, as a person runs it: each prompt stays up 1.5 s before its answer
                # and the pane 15 s after the end, so the Ctrl-C below lands mid-demo however
                # late a loaded machine reads the output. The Enter starts the task at once.
                env=environment("claude") | {"DEMO_ATTACH": "1"},
                stdin=b"\n",
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                check=False,
            )
            process: trio.Process = await nursery.start(start)
            assert process.stdout is not None
            interrupted = False
            async for chunk in process.stdout:
                output += chunk
                # At the first wake-up (the questionnaire), before its answer.
                if not interrupted and b"interaction_required" in output:
                    # A terminal's Ctrl-C: SIGINT to the whole foreground process group.
                    os.killpg(process.pid, signal.SIGINT)
                    interrupted = True
    text = output.decode()
    assert interrupted, text
    assert process.returncode == 130, text
    assert "interrupted: everything the demo started is stopped and removed" in text
    await assert_nothing_left(parse(text))


@attrs.define
class Recorder:
    """A `controller.Reporter` that records, and kills `akk serve` once the first answer is in.

    The server is SIGKILLed before the controller acks the event it answered,
    and started again on the same port and state directory.
    """

    akk: AkkProcess
    port: str
    turns: list[str] = attrs.Factory(list)
    events: list[tuple[str, str, bool]] = attrs.Factory(list)
    answers: list[str] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)

    def sent(self, hello: Json, turn: Json) -> None:
        self.turns.append(turn["turn_id"])

    def event(self, event: Json, *, redelivered: bool) -> None:
        self.events.append((event["event_id"], event["kind"], redelivered))

    async def offered(self, interaction: Json) -> None:
        return

    def answering(self, interaction: Json, method: str, params: Json) -> None:
        self.answers.append(interaction["interaction_id"])

    def answered(self, reply: Json) -> None:
        if len(self.answers) == 1:
            self.akk.kill()
            self.akk.start(None, "--port", self.port)

    def problem(self, text: str) -> None:
        self.problems.append(text)


@pytest.mark.parametrize("lab", lab_params("demo_claude")[-1:], indirect=True)
async def test_the_reference_controller_survives_a_server_restart_and_answers_nothing_twice(
    lab: LabSession, tmp_path: Path
) -> None:
    akk = AkkProcess(lab, tmp_path, "ctl")
    try:
        url = await trio.to_thread.run_sync(akk.start)
        async with connect(url, akk.state.token()) as operator:
            terminal_id = (await idle_terminal(operator, timeout=30))["terminal_id"]
        recorder = Recorder(akk, url.rsplit(":", 1)[1].split("/")[0])
        with trio.fail_after(90):
            outcome = await controller.follow(
                url, akk.tokens["ctl"], terminal_id, sc.DEMO_TASK, recorder, request_id="r1"
            )
    finally:
        akk.stop()
    assert outcome["kind"] == "done", recorder
    assert len(recorder.turns) >= 2 and len(set(recorder.turns)) == 1, recorder.turns
    assert any("connection lost" in problem for problem in recorder.problems), recorder
    first_wake_up = next(e for e in recorder.events if e[1] in controller.WAKE_UPS)
    assert (first_wake_up[0], first_wake_up[1], True) in recorder.events, recorder.events
    assert len(recorder.answers) == len(set(recorder.answers)) == 4
    for text in (sc.DEMO_TASK, sc.ANSWERED_CLAUDE, sc.DEMO_GREETING):
        assert lab.server.count_inputs_containing(text) == 1, lab.server.summary()


async def test_the_agent_controller_demo_drives_a_codex_pane_through_akk_mcp() -> None:
    with trio.fail_after(DEADLINE + 120):
        done = await trio.run_process(
            [sys.executable, "-m", "tools.demo"],
            cwd=REPO,
            env=environment("codex") | {"DEMO_CONTROLLER": "claude"},
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    output = done.stdout.decode()
    assert done.returncode == 0, output + done.stderr.decode()
    run = parse(output)
    host = re.search(r"HOME (\S+)/home\n\s+scripted model server on 127\.0\.0\.1:(\d+)", output)
    assert host, output
    assert "akk: " in output and "✔ Connected" in output  # `claude mcp list`
    calls = [text.split()[1] for text in run.texts("claude") if text.startswith("-> ")]
    assert calls == ["ToolSearch", *(f"agent_knock_knock_{m}" for m in HOST_CALLS)], output
    assert len(run.texts("<-")) == len(calls)
    assert all("⏱" in text for text in run.texts("<-"))
    at_codex = run.texts("codex")
    assert sum(sc.MCP_CODEX_TASK in line for line in at_codex) == 1, at_codex
    (answer,) = [line for line in at_codex if sc.ANSWERED_CODEX in line]
    assert sc.MCP_CHOICE in answer, answer
    assert f"'{sc.MCP_HOST_DONE}'" in run.texts("claude")
    checks = run.texts("check")
    assert len(checks) == 7 and all(check.startswith("ok") for check in checks), checks
    assert run.texts("cleanup")
    await assert_nothing_left(run)
    assert not await trio.Path(host[1]).exists() and run_processes(Path(host[1])) == []
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", int(host[2]))
