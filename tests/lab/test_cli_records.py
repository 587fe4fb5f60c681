"""The operator CLI's record commands on a task a person started: watch, status, renew,
recover, close, unwatch, retry-callback, as real `akk` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.qualify.launcher import LabSession
from akk.qualify.scenarios import SLOW_SIGNAL, SLOW_TASK
from tests.lab.conftest import lab_params
from tools.lab.akk_runner import AkkProcess


async def _akk(akk: AkkProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AKK_STATE_DIR": str(akk.state.path), "COLUMNS": "200"}
    argv = [sys.executable, "-m", "akk", *args]
    return await trio.to_thread.run_sync(
        lambda: subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=60, check=False
        )
    )


async def _json(akk: AkkProcess, *args: str) -> dict[str, Any]:
    done = await _akk(akk, *args, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def _refused(akk: AkkProcess, *args: str) -> str:
    """The one-line refusal `akk` printed (exit 2, no traceback)."""
    done = await _akk(akk, *args)
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("akk: ") and "Traceback" not in done.stderr
    return done.stderr


async def _terminal_in(akk: AkkProcess, activity: str, timeout: float = 30) -> dict[str, Any]:
    """The lab pane's row once `akk list` shows it in ``activity``."""
    with trio.fail_after(timeout):
        while True:
            rows = (await _json(akk, "list"))["terminals"]
            if rows and rows[0]["activity_state"] == activity:
                row: dict[str, Any] = rows[0]
                return row
            await trio.sleep(0.1)


@pytest.mark.parametrize("lab", lab_params("slow", agents=("claude",))[-1:], indirect=True)
async def test_record_commands_follow_one_watch(lab: LabSession, tmp_path: Path) -> None:
    akk = AkkProcess(lab, tmp_path)
    try:
        await trio.to_thread.run_sync(akk.start)
        await _terminal_in(akk, "idle")
        await lab.submit(SLOW_TASK)
        terminal = await _terminal_in(akk, "working")

        watched = await _json(akk, "watch", terminal["terminal_id"])
        watch_id = watched["watch_id"]
        assert watch_id.startswith("watch_") and watched["turn_id"] is None
        assert (watched["task_kind"], watched["observation_state"]) == ("watch", "observing")
        assert watched["management_state"] == "none"

        status = await _json(akk, "status", watch_id)
        assert "turn" not in status and status["watch"]["watch_id"] == watch_id
        shown = await _akk(akk, "status", watch_id)
        assert shown.returncode == 0, shown.stderr
        assert f"watch:    {watch_id}" in shown.stdout and "observed: observing" in shown.stdout

        renewed = await _json(akk, "renew", watch_id, "--minutes", "5")
        assert renewed["renewed"] is True and renewed["watch_id"] == watch_id
        assert renewed["deadline_at"] >= watched["deadline_at"]

        recovered = await _json(akk, "recover", watch_id)
        assert recovered["supervised"] is True
        assert recovered["verification"]["terminal"] == "present"
        summary = await _akk(akk, "recover", watch_id)
        assert summary.returncode == 0, summary.stderr
        assert "supervised:   yes" in summary.stdout and "terminal present" in summary.stdout

        refused = await _refused(akk, "close", watch_id)
        assert "invalid_params" in refused and "unwatch" in refused

        stopped = await _json(akk, "unwatch", watch_id)
        assert stopped["observation_state"] == "stopped" and stopped["withdrawn"] >= 0

        refused = await _refused(akk, "retry-callback", watch_id)
        assert "the server said closed" in refused
        listed = await _akk(akk, "list")
        assert watch_id in listed.stdout and "(unwatched)" in listed.stdout

        lab.server.signal(SLOW_SIGNAL)
        await _terminal_in(akk, "idle")
        refused = await _refused(akk, "close", "turn_" + "0" * 24)
        assert "not_found" in refused
    finally:
        akk.stop()
    assert lab.server.count_inputs_containing(SLOW_TASK) == 1
