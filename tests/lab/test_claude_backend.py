"""Lab: Turns on the Claude headless backend, driven through `akk serve` (no tmux pane).

Every pinned Claude, one set-up each (one model server, one `akk serve`): a new
session that echoes, a second send in the same role that resumes it (the
model's next request carries the first task), another role in its own session
(its requests never carry the executor's history), a cancel during a slow
stream (the model stream stops), and a SIGKILL of the Claude process mid-turn
(one `failed`; the next send resumes the session). The model server is the
oracle: each task reaches it exactly once, and the usage AKK reports is what it
sent. The latencies (send -> task at the model, final reply -> `done` at the
controller) are recorded in the test's user_properties and printed.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import Controller, connect
from akk.qualify.launcher import run_processes
from akk.qualify.model_server import ModelServer, RecordedRequest
from akk.qualify.scenarios import (
    ECHO_REPLY,
    ECHO_TASK,
    SLOW_REPLY,
    SLOW_TASK,
    Scenario,
    SlowText,
    Step,
    Text,
)
from akk.store.database import open_reader
from tests.lab.conftest import ensure_installed
from tools.lab import clients
from tools.lab.akk_runner import backend_processes, outcome, serving_backend
from tools.lab.clients import Client

CLAUDE = [client for client in clients.PINNED if client.agent == "claude"]

SECOND_TASK = "lab: second task"
SECOND_REPLY = "Second reply."
REVIEW_TASK = "lab: review it"
REVIEW_REPLY = "Reviewed."
KILL_TASK = "lab: work until killed"
AFTER_TASK = "lab: after the kill"
AFTER_REPLY = "Still here."

SCENARIO = Scenario(
    "claude_backend",
    task=ECHO_TASK,
    agents=frozenset({"claude"}),
    steps=(
        Step(ECHO_TASK, Text(ECHO_REPLY)),
        Step(SECOND_TASK, Text(SECOND_REPLY)),
        Step(REVIEW_TASK, Text(REVIEW_REPLY)),
        Step(AFTER_TASK, Text(AFTER_REPLY)),
        # Held until the client hangs up: the cancel and the SIGKILL each end one.
        Step(SLOW_TASK, SlowText(SLOW_REPLY)),
        Step(KILL_TASK, SlowText("Working until killed... done.")),
    ),
)


def _send(work: Path, text: str, role: str = "executor") -> dict[str, Any]:
    return {
        "scope": {"task": "task-1", "role": role},
        "backend": "claude_headless",
        "cwd": str(work),
        "request": text,
        "client_request_id": text,
    }


async def _reached(model: ModelServer, text: str) -> RecordedRequest:
    return await model.wait_for_request(
        lambda r: not r.auxiliary and text in r.newest_input, timeout=60
    )


def _served(model: ModelServer, text: str) -> dict[str, int]:
    """What the model server sent for the requests of the round whose task is ``text``."""
    mine = [r for r in model.main_requests() if text in r.newest_input]
    return {
        "input_tokens": sum(r.usage.input_tokens for r in mine),
        "output_tokens": sum(r.usage.output_tokens for r in mine),
        "cache_read_tokens": sum(r.usage.cache_read_input_tokens for r in mine),
    }


class Clock:
    """send -> task at the model, and the model's final reply -> the outcome at the controller."""

    def __init__(self) -> None:
        self.to_model: list[float] = []
        self.to_done: list[float] = []

    async def run(
        self, ctl: Controller, model: ModelServer, params: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        began = time.monotonic()
        sent = await ctl.call("send", params)
        asked = await _reached(model, params["request"])
        self.to_model.append(asked.at - began)
        event = await outcome(ctl, sent["turn_id"], timeout=90)
        arrived = time.monotonic()
        finished = model.finished_at.get(asked.index)
        if event["kind"] == "done" and finished is not None:
            self.to_done.append(arrived - finished)
        assert event["kind"] == "done", event
        status = await ctl.call("status", {"turn_id": sent["turn_id"]})
        turn: dict[str, Any] = status["turn"]
        return sent, turn


def _claude_pids() -> list[int]:
    """The headless Claude processes this test's in-process AKK started."""
    return backend_processes(os.getpid(), "stream-json")


@pytest.mark.lab
@pytest.mark.parametrize("client", CLAUDE, ids=lambda client: client.name)
async def test_create_resume_role_cancel_and_kill(
    client: Client, tmp_path: Path, record_property: Any
) -> None:
    await ensure_installed(client)
    model = ModelServer(SCENARIO)
    clock = Clock()
    with trio.fail_after(400):
        async with trio.open_nursery() as nursery:
            await nursery.start(model.serve)
            async with (
                serving_backend(client, tmp_path, model, "ctl") as (served, files),
                connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
            ):
                work, root = files.workdir, files.workdir.parent
                first, turn = await clock.run(ctl, model, _send(work, ECHO_TASK))
                assert first["session_decision"] == {
                    "action": "create", "reason": "new_scope_or_role",
                }  # fmt: skip
                assert turn["backend"] == "claude_headless"
                assert turn["final_message"] == ECHO_REPLY
                usage = turn["usage"]
                assert usage["usage_status"] == "complete"
                sent_usage = _served(model, ECHO_TASK)
                assert {k: usage[k] for k in sent_usage} == sent_usage

                second, turn2 = await clock.run(ctl, model, _send(work, SECOND_TASK))
                assert second["session_decision"] == {
                    "action": "resume", "reason": "same_scope_and_role",
                }  # fmt: skip
                assert second["session_id"] == first["session_id"]
                assert turn2["final_message"] == SECOND_REPLY
                (asked2,) = [r for r in model.main_requests() if SECOND_TASK in r.newest_input]
                history = json.dumps(asked2.body)
                assert ECHO_TASK in history and ECHO_REPLY in history, "not the same session"
                sent2 = _served(model, SECOND_TASK)
                assert {k: turn2["usage"][k] for k in sent2} == sent2

                third, turn3 = await clock.run(ctl, model, _send(work, REVIEW_TASK, "reviewer"))
                assert third["session_decision"]["action"] == "create"
                assert third["session_id"] != first["session_id"]
                assert turn3["final_message"] == REVIEW_REPLY
                for request in model.main_requests():
                    if REVIEW_TASK in request.newest_input:
                        assert ECHO_TASK not in json.dumps(request.body), "reviewer saw history"

                # Cancel during a slow stream: cancelled, and the stream stops.
                slow = await ctl.call("send", _send(work, SLOW_TASK))
                asked_slow = await _reached(model, SLOW_TASK)
                await ctl.call("cancel", {"turn_id": slow["turn_id"]})
                event = await outcome(ctl, slow["turn_id"], timeout=60)
                assert event["kind"] == "cancelled", event
                assert await model.wait_for_outcome(asked_slow.index, timeout=30) == (
                    "disconnected"
                )

                # SIGKILL of the Claude process mid-turn: one failed, and the next send works.
                killed = await ctl.call("send", _send(work, KILL_TASK))
                asked_kill = await _reached(model, KILL_TASK)
                (pid,) = _claude_pids()
                os.kill(pid, signal.SIGKILL)
                event = await outcome(ctl, killed["turn_id"], timeout=60)
                assert event["kind"] == "failed", event
                assert await model.wait_for_outcome(asked_kill.index, timeout=30) == (
                    "disconnected"
                )
                after, turn_after = await clock.run(ctl, model, _send(work, AFTER_TASK))
                assert after["session_id"] == first["session_id"]
                assert turn_after["final_message"] == AFTER_REPLY

                listed = await ctl.call("list")
                backends = {s["scope"]["role"]: s["backend"] for s in listed["sessions"]}
                assert backends == {"executor": "claude_headless", "reviewer": "claude_headless"}
                assert _claude_pids() == []
                # Every process was reaped and its exit audited: one per send.
                conn = open_reader(served.state.store_path)
                try:
                    exits = conn.execute(
                        "SELECT outcome, detail FROM audit WHERE action = 'claude_exit'"
                    ).fetchall()
                finally:
                    conn.close()
                assert len(exits) == 6 and {o for o, _ in exits} == {"ok"}, exits
                codes = sorted(json.loads(detail)["returncode"] for _, detail in exits)
                assert codes == [-signal.SIGKILL, 0, 0, 0, 0, 1], codes  # killed, 4 done, cancel
            nursery.cancel_scope.cancel()
    for text in (ECHO_TASK, SECOND_TASK, REVIEW_TASK, SLOW_TASK, KILL_TASK, AFTER_TASK):
        assert model.count_inputs_containing(text) == 1, model.summary()
    assert run_processes(root) == []
    numbers = {
        "send_to_model_median": statistics.median(clock.to_model),
        "send_to_model_max": max(clock.to_model),
        "reply_to_done_median": statistics.median(clock.to_done),
        "reply_to_done_max": max(clock.to_done),
    }
    for key, value in numbers.items():
        record_property(key, round(value, 3))
    print(f"\n{client.name}: " + ", ".join(f"{k} {v:.3f}s" for k, v in numbers.items()))
