"""Retention on a real client: `akk gc` through the running server prunes a Turn that ended
`done` and was acked, and keeps one whose `done` its controller has not acked.

The rules are the store's (tests/test_retention.py); one pinned client (the newest
Claude, one pane start) proves the wiring: a real Turn's rows, the operator's gc
through `akk serve`, and the tombstone a controller then hears.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import AkkError, Controller, connect
from akk.qualify.launcher import LabSession
from akk.store.location import StateDir
from tests.lab.conftest import lab_params
from tools.lab.akk_runner import idle_terminal, outcome, serving

ACKED = "lab: a turn retention prunes"
UNACKED = "lab: a turn whose done is not acked"


def _gc(state: StateDir, *args: str) -> dict[str, Any]:
    """`akk gc --json` as the operator runs it beside the server."""
    env = {**os.environ, "AKK_STATE_DIR": str(state.path)}
    done = subprocess.run(
        [sys.executable, "-m", "akk", "gc", "--json", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def _settled(ctl: Controller, turn_id: str, timeout: float = 60) -> dict[str, Any]:
    """The Turn once it settled, read by status (its outcome event is left unacked)."""
    with trio.fail_after(timeout):
        while True:
            turn: dict[str, Any] = (await ctl.call("status", {"turn_id": turn_id}))["turn"]
            if turn["settled_at"] is not None:
                return turn
            await trio.sleep(0.05)


@pytest.mark.parametrize("lab", lab_params("echo", agents=("claude",))[-1:], indirect=True)
async def test_gc_prunes_an_acked_real_turn_and_keeps_an_unacked_one(
    lab: LabSession, tmp_path: Path
) -> None:
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        terminal_id = (await idle_terminal(ctl))["terminal_id"]
        acked = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": ACKED, "client_request_id": "r1"}
        )
        event = await outcome(ctl, acked["turn_id"])  # acks every event on the way
        assert event["kind"] == "done", event
        unacked = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": UNACKED, "client_request_id": "r2"}
        )
        assert (await _settled(ctl, unacked["turn_id"]))["state"] == "done"

        counted = await trio.to_thread.run_sync(_gc, served.state, "--older-than", "0", "--dry-run")
        assert counted["dry_run"] and counted["counts"]["turns"] == 1, counted
        deleted = await trio.to_thread.run_sync(_gc, served.state, "--older-than", "0")
        assert not deleted["dry_run"]
        # Audit rows written between the two calls are older than the second's cutoff too.
        assert {t: n for t, n in deleted["counts"].items() if t != "audit"} == {
            t: n for t, n in counted["counts"].items() if t != "audit"
        }
        assert deleted["counts"]["turns"] == deleted["counts"]["dispatches"] == 1, deleted
        assert deleted["counts"]["terminals"] == 0  # the pane is live

        with pytest.raises(AkkError) as refused:
            await ctl.call("status", {"turn_id": acked["turn_id"]})
        kept = (await ctl.call("status", {"turn_id": unacked["turn_id"]}))["turn"]
        assert kept["state"] == "done" and kept["terminal_id"] == terminal_id
    error = refused.value
    assert (error.reason, error.detail) == ("not_found", "pruned"), error
    assert error.data is not None and error.data["outcome"] == "done"
    pruned_at = datetime.datetime.fromisoformat(error.data["pruned_at"]).timestamp()
    assert time.time() - 120 < pruned_at <= time.time()
    # Each task reached the model exactly once, as one agent turn, and nothing else did.
    agent_turns = [r.newest_input.strip() for r in lab.server.main_requests()]
    assert agent_turns == [ACKED, UNACKED], lab.server.summary()
