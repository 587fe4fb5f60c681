"""The operator CLI's Turn commands as a person runs them: akk send --wait, status, events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import trio

from akk.qualify.launcher import LabSession
from akk.qualify.scenarios import BASH_MARKER, ECHO_REPLY, ECHO_TASK, HELD_TASK, RUN_TASK
from tests.lab.conftest import lab_params
from tools.lab.akk_runner import AkkProcess


def _akk(akk: AkkProcess, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AKK_STATE_DIR": str(akk.state.path), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "akk", *args],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("lab", lab_params("echo", agents=("claude",))[-1:], indirect=True)
async def test_send_wait_status_and_events(lab: LabSession, tmp_path: Path) -> None:
    akk = AkkProcess(lab, tmp_path)
    events = None
    try:
        akk.start()
        env = {**os.environ, "AKK_STATE_DIR": str(akk.state.path)}
        events = await trio.to_thread.run_sync(
            lambda: subprocess.Popen(
                [sys.executable, "-m", "akk", "events", "--json"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        with trio.fail_after(20):
            while "idle" not in (listed := _akk(akk, "list")).stdout:
                await trio.sleep(0.1)
        sent = await trio.to_thread.run_sync(
            lambda: _akk(akk, "send", lab.pane, ECHO_TASK, "--wait", "--json")
        )
        assert sent.returncode == 0, sent.stderr
        turn = json.loads(sent.stdout)["turn"]
        assert turn["state"] == "done" and ECHO_REPLY in turn["final_message"]
        shown = _akk(akk, "status", turn["turn_id"])
        assert shown.returncode == 0, shown.stderr
        assert "done" in shown.stdout and "accepted" in shown.stdout
        table = _akk(akk, "list")
        assert turn["turn_id"] in table.stdout and "turns" in table.stdout
        refused = _akk(akk, "send", "%404", "lab: nowhere")
        assert refused.returncode == 2 and "akk list" in refused.stderr
    finally:
        if events is not None:
            events.terminate()
            out, _ = events.communicate(timeout=10)
        akk.stop()
    assert listed.returncode == 0
    assert lab.server.count_inputs_containing(ECHO_TASK) == 1
    # `akk send --wait` acked its own outcome, so `akk events` saw it only if it was first.
    for line in out.splitlines():
        event = json.loads(line)
        assert event["turn_id"] == turn["turn_id"]


_NEWEST_CLAUDE_BASH = lab_params("claude_bash", agents=("claude",))[-1:]


async def _idle_status(akk: AkkProcess, pane: str) -> subprocess.CompletedProcess[str]:
    """`akk status PANE` once it shows the pane's agent idle."""
    with trio.fail_after(20):
        while "state:    idle" not in (shown := _akk(akk, "status", pane)).stdout:
            await trio.sleep(0.1)
    return shown


@pytest.mark.parametrize("lab", _NEWEST_CLAUDE_BASH, indirect=True)
async def test_status_of_a_terminal_shows_what_its_agent_asks_and_types_nothing(
    lab: LabSession, tmp_path: Path
) -> None:
    akk = AkkProcess(lab, tmp_path)
    try:
        akk.start()
        idle = await _idle_status(akk, lab.pane)
        assert idle.returncode == 0, idle.stderr
        assert f"(pane {lab.pane} on " in idle.stdout and "turn:     -" in idle.stdout
        assert "screen:   (its last lines, redacted)" in idle.stdout
        sent = _akk(akk, "send", lab.pane, RUN_TASK)
        assert sent.returncode == 0, sent.stderr
        turn_id = sent.stdout.strip()
        with trio.fail_after(60):
            while "asks:" not in (asked := _akk(akk, "status", lab.pane)).stdout:
                await trio.sleep(0.2)
        lines = asked.stdout.splitlines()
        assert f"turn:     {turn_id}   session: " in asked.stdout
        assert "asks:     a permission" in asked.stdout
        assert any(line.strip() == "- Yes" for line in lines), asked.stdout
        assert "decisions: approve_once, reject" in asked.stdout
        assert f"> touch {BASH_MARKER}.txt" in asked.stdout  # what it would run
        assert "option_id" not in asked.stdout and "int_" not in asked.stdout
        of_turn = _akk(akk, "status", turn_id)
        assert of_turn.returncode == 0, of_turn.stderr
        assert "asks:     a permission" in of_turn.stdout and "screen:" in of_turn.stdout
        as_json = json.loads(_akk(akk, "status", lab.pane, "--json").stdout)
        assert as_json["terminal"]["turn_id"] == turn_id
        assert as_json["interaction"]["kind"] == "permission"
        still = json.loads(_akk(akk, "status", turn_id, "--json").stdout)
        assert still["turn"]["state"] == "running", still["turn"]
    finally:
        akk.stop()
    # Reading the prompt answered nothing: the command never ran, the task went once.
    assert not (lab.workdir / f"{BASH_MARKER}.txt").exists()
    assert lab.server.count_inputs_containing(RUN_TASK) == 1


@pytest.mark.parametrize("lab", _NEWEST_CLAUDE_BASH, indirect=True)
async def test_send_wait_says_what_the_agent_asks_and_a_person_answers_it(
    lab: LabSession, tmp_path: Path
) -> None:
    akk = AkkProcess(lab, tmp_path)
    waiting = None
    said: list[str] = []
    try:
        akk.start()
        await _idle_status(akk, lab.pane)
        env = {**os.environ, "AKK_STATE_DIR": str(akk.state.path), "COLUMNS": "200"}
        argv = [sys.executable, "-m", "akk", "send", lab.pane, RUN_TASK, "--wait", "--json"]
        waiting = await trio.to_thread.run_sync(
            lambda: subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
        stderr = waiting.stderr
        assert stderr is not None
        reader = threading.Thread(target=lambda: said.extend(stderr), daemon=True)
        reader.start()
        # The wake-up's last line says who answers; the reader thread takes lines one by one.
        with trio.fail_after(60):
            while not any("answer it with `akk answer turn_" in line for line in said):
                await trio.sleep(0.1)
        assert any("asks:     a permission" in line for line in said), said
        assert any(line.strip() == "- Yes" for line in said), said
        await lab.wait_stable()  # Claude drops a key pressed as its prompt is first drawn
        await lab.send_keys("1")  # the person approves at the pane, once
        final, _ = await trio.to_thread.run_sync(lambda: waiting.communicate(timeout=60))
    finally:
        if waiting is not None and waiting.poll() is None:
            waiting.kill()
            waiting.wait()
        akk.stop()
    assert waiting.returncode == 0, said
    assert json.loads(final)["turn"]["state"] == "done"
    assert (lab.workdir / f"{BASH_MARKER}.txt").exists()
    assert lab.server.count_inputs_containing(RUN_TASK) == 1


@pytest.mark.parametrize("lab", lab_params("held", agents=("claude",))[-1:], indirect=True)
async def test_cancel_then_respond_wait_follows_the_next_round(
    lab: LabSession, tmp_path: Path
) -> None:
    """`akk cancel` interrupts the running task once (Claude, before any reply, takes it back
    into its composer: `withdrawn`); the person clears the composer; `akk respond --wait`
    then follows the Turn's next round to its own outcome, though round 1's `cancelled`
    event, never acked, reaches it first."""
    follow_up = "lab: and once more"
    akk = AkkProcess(lab, tmp_path)
    try:
        akk.start()
        await _idle_status(akk, lab.pane)
        sent = _akk(akk, "send", lab.pane, HELD_TASK)
        assert sent.returncode == 0, sent.stderr
        turn_id = sent.stdout.strip()
        await lab.server.wait_for_request(
            lambda r: not r.auxiliary and HELD_TASK in r.newest_input, timeout=30
        )
        with trio.fail_after(30):  # cancel refuses until the pane shows the task running
            while (cancel := _akk(akk, "cancel", turn_id)).returncode != 0:
                assert "not running" in cancel.stderr, cancel
                await trio.sleep(0.2)
        assert "state: cancelling" in " ".join(cancel.stdout.split()), cancel.stdout
        with trio.fail_after(30):
            while (turn := _turn(akk, turn_id))["state"] != "cancelled":
                await trio.sleep(0.2)
        assert turn["reason"] == "withdrawn", turn
        refused = _akk(akk, "respond", turn_id, follow_up)  # the task waits in the composer
        assert refused.returncode == 2 and "not_idle" in refused.stderr, refused
        await lab.send_keys("C-u")  # the person clears it
        await _idle_status(akk, lab.pane)
        followed = await trio.to_thread.run_sync(
            lambda: _akk(akk, "respond", turn_id, follow_up, "--wait", "--json")
        )
    finally:
        akk.stop()
    assert followed.returncode == 0, (followed.stdout, followed.stderr)
    turn = json.loads(followed.stdout)["turn"]
    assert (turn["state"], turn["round"]) == ("done", 2), turn
    assert lab.server.count_inputs_containing(HELD_TASK) == 1
    assert lab.server.count_inputs_containing(follow_up) == 1


def _turn(akk: AkkProcess, turn_id: str) -> dict[str, object]:
    shown: dict[str, object] = json.loads(_akk(akk, "status", turn_id, "--json").stdout)["turn"]
    return shown


@pytest.mark.parametrize("lab", lab_params("held", agents=("claude",))[-1:], indirect=True)
async def test_send_wait_says_why_its_turn_did_not_end_done(
    lab: LabSession, tmp_path: Path
) -> None:
    """`akk send --wait`, then `akk cancel` from another shell before any reply: the waiting
    command ends (exit 1) saying what the outcome means for the person, that the task
    waits in the composer."""
    akk = AkkProcess(lab, tmp_path)
    waiting = None
    try:
        akk.start()
        await _idle_status(akk, lab.pane)
        env = {**os.environ, "AKK_STATE_DIR": str(akk.state.path), "COLUMNS": "200"}
        argv = [sys.executable, "-m", "akk", "send", lab.pane, HELD_TASK, "--wait"]
        waiting = await trio.to_thread.run_sync(
            lambda: subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
        await lab.server.wait_for_request(
            lambda r: not r.auxiliary and HELD_TASK in r.newest_input, timeout=30
        )
        listed = json.loads(_akk(akk, "list", "--json").stdout)
        (turn_id,) = [row["turn_id"] for row in listed["terminals"] if row["turn_id"]]
        with trio.fail_after(30):  # cancel refuses until the pane shows the task running
            while _akk(akk, "cancel", turn_id).returncode != 0:
                await trio.sleep(0.2)
        final, said = await trio.to_thread.run_sync(lambda: waiting.communicate(timeout=60))
    finally:
        if waiting is not None and waiting.poll() is None:
            waiting.kill()
            waiting.wait()
        akk.stop()
    assert waiting.returncode == 1, (final, said)
    assert "state:    cancelled (withdrawn)" in final, final
    assert "outcome:  the agent stopped before it answered (AKK's cancel) and put the task " in said
    assert lab.server.count_inputs_containing(HELD_TASK) == 1
