"""`akk answer` as a person runs it: what a Turn's agent asks, answered from the shell.

Real `akk serve` children and real clients: a Claude pane's permission and
four-step questionnaire, and a Codex app-server Turn's command approval, which
has no pane at all. What the person types goes in on the command's standard
input. The model server is the oracle: the task, and the answer, reach the agent
once; a reply that names no choice, or none at all, sends nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from akk.qualify.launcher import LabSession
from akk.qualify.model_server import ModelServer
from akk.qualify.scenarios import BASH_MARKER, EXEC_MARKER, RUN_TASK, SCENARIOS
from tests.lab.conftest import ensure_installed, lab_params
from tests.lab.test_claude_plans import QUESTIONS, pairs
from tests.lab.test_cli_backend import run_akk
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess, backend_child


async def _sent_to_pane(akk: AkkProcess, lab: LabSession, task: str) -> str:
    """`akk serve` started and the lab pane idle, then `akk send PANE TASK`: its turn_id."""
    akk.start()
    with trio.fail_after(20):
        while "state:    idle" not in (await run_akk(akk, "status", lab.pane)).stdout:
            await trio.sleep(0.1)
    sent = await run_akk(akk, "send", lab.pane, task)
    assert sent.returncode == 0, sent.stderr
    return sent.stdout.strip()


async def _asked(akk: AkkProcess, record: str) -> str:
    """`akk status RECORD` once it shows what the agent asks."""
    with trio.fail_after(60):
        while "asks:" not in (shown := await run_akk(akk, "status", record)).stdout:
            await trio.sleep(0.2)
    return shown.stdout


async def _settled(akk: AkkProcess, turn_id: str) -> dict[str, object]:
    with trio.fail_after(60):
        while True:
            turn = json.loads((await run_akk(akk, "status", turn_id, "--json")).stdout)["turn"]
            if turn["state"] in ("done", "failed", "cancelled"):
                return dict(turn)
            await trio.sleep(0.2)


@pytest.mark.parametrize("lab", lab_params("claude_bash", agents=("claude",))[-1:], indirect=True)
async def test_a_pane_permission_is_answered_from_the_shell_once(
    lab: LabSession, tmp_path: Path
) -> None:
    akk = AkkProcess(lab, tmp_path)
    try:
        turn_id = await _sent_to_pane(akk, lab, RUN_TASK)
        await _asked(akk, lab.pane)
        # The person reads the choices, then leaves: nothing is sent.
        left = await run_akk(akk, "answer", lab.pane)
        assert left.returncode == 2, left.stdout
        assert "1. approve_once" in left.stdout and "2. reject" in left.stdout
        assert f"> touch {BASH_MARKER}.txt" in left.stdout  # what it would run
        assert "nothing was sent" in left.stderr, left.stderr
        assert "asks:     a permission" in (await run_akk(akk, "status", turn_id)).stdout
        # A reply that names no choice is asked again; the decision by its name is taken.
        answered = await run_akk(akk, "answer", turn_id, typed="9\napprove_once\n")
        assert answered.returncode == 0, (answered.stdout, answered.stderr)
        assert "choose a number from 1 to 2" in answered.stdout
        assert "sent: dispatched" in answered.stdout
        turn = await _settled(akk, turn_id)
        again = await run_akk(akk, "answer", turn_id, typed="1\n")
    finally:
        akk.stop()
    assert turn["state"] == "done", turn
    assert again.returncode == 2 and "asks nothing now" in again.stderr, again.stderr
    assert (lab.workdir / f"{BASH_MARKER}.txt").exists()
    assert lab.server.count_inputs_containing(RUN_TASK) == 1
    assert lab.server.count_inputs_containing(BASH_MARKER) == 1, lab.server.summary()


@pytest.mark.parametrize(
    "lab", lab_params("questionnaire_multi_question", agents=("claude",))[-1:], indirect=True
)
async def test_a_questionnaire_is_answered_step_by_step_from_the_shell(
    lab: LabSession, tmp_path: Path
) -> None:
    akk = AkkProcess(lab, tmp_path)
    try:
        turn_id = await _sent_to_pane(akk, lab, lab.scenario.task)
        await _asked(akk, turn_id)
        # The person's own text on the row after the options, a label (case aside), a
        # number; the review's "Submit answers" is 1.
        typed = "4\nTeal\nlarge\n3\n1\n"
        answered = await run_akk(akk, "answer", lab.pane, typed=typed, timeout=120)
        assert answered.returncode == 0, (answered.stdout, answered.stderr)
        assert answered.stdout.count("sent: dispatched") == 4, answered.stdout
        assert "4. (your own text)" in answered.stdout
        assert "(step 4 of 4)" in answered.stdout and "1. Submit answers" in answered.stdout
        turn = await _settled(akk, turn_id)
    finally:
        akk.stop()
    assert turn["state"] == "done", turn
    listed = pairs(*zip(QUESTIONS, ("Teal", "Large", "Hexagon"), strict=True))
    assert lab.server.count_inputs_containing(listed) == 1, lab.server.summary()
    assert lab.server.count_inputs_containing(lab.scenario.task) == 1


@pytest.mark.lab
async def test_a_backend_turn_with_no_pane_is_answered_from_the_shell(tmp_path: Path) -> None:
    client = clients.newest("codex")
    await ensure_installed(client)
    model = ModelServer(SCENARIOS["codex_exec"])
    async with backend_child(client, tmp_path, model) as lab:
        akk = lab.akk
        scope = ("--scope", "task-1/executor", "--backend", "codex_app_server")
        with trio.fail_after(120):
            await trio.to_thread.run_sync(akk.start, None, *lab.serve_args)
            cwd = ("--cwd", str(lab.files.workdir))
            sent = await run_akk(akk, "send", *scope, *cwd, "--json", RUN_TASK)
            assert sent.returncode == 0, sent.stderr
            turn_id = json.loads(sent.stdout)["turn_id"]
            await _asked(akk, turn_id)
            answered = await run_akk(akk, "answer", turn_id, typed="1\n")
            assert answered.returncode == 0, (answered.stdout, answered.stderr)
            assert "sent: dispatched" in answered.stdout
            turn = await _settled(akk, turn_id)
    assert turn["state"] == "done", turn
    assert (lab.files.workdir.parent / f"{EXEC_MARKER}.txt").exists()
    assert model.count_inputs_containing(RUN_TASK) == 1
    assert model.count_inputs_containing("Process exited with code 0") == 1, model.summary()
