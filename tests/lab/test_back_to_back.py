"""Back-to-back Turns into one pane, each sent right after the previous `done`.

The model server is the oracle: every task reaches the agent exactly once (agent
turns counted, title requests left out) and every Turn ends `done`. Every pinned
client runs 10; every Codex under a model outside the client's catalog, whose warning
notice joins the footer after the first turn on 0.169.0 and 0.171.0 (the
`codex_after_warning` fixtures). The failure this test was written for broke every send
after the first; 20 Turns each cost CI's loaded lab 73 to 90 s per Claude, for nothing
the second ten proved that the first did not.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from akk.client import connect
from akk.qualify.launcher import LabSession
from akk.qualify.plans.codex import CODEX_FOOTERS
from akk.qualify.run_files import Preseed
from tests.lab.conftest import LabSpec
from tools.lab import clients
from tools.lab.akk_runner import idle_terminal, outcome, serving

TURN_SECONDS = "lab_turn_seconds"

_UNKNOWN_MODEL = CODEX_FOOTERS["codex_model_unknown"]
TURNS = 10
_SPECS = [
    LabSpec(client, "echo", preseed=_UNKNOWN_MODEL if client.agent == "codex" else Preseed())
    for client in clients.PINNED
]


@pytest.mark.parametrize(
    "lab",
    [pytest.param(spec, id=spec.client.name, marks=pytest.mark.lab) for spec in _SPECS],
    indirect=True,
)
async def test_back_to_back_turns_each_reach_the_model_once_and_end_done(
    lab: LabSession, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tasks = [f"lab: back-to-back turn {n}" for n in range(TURNS)]
    seconds: list[float] = []
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        terminal_id = (await idle_terminal(ctl))["terminal_id"]
        for n, task in enumerate(tasks):
            started = time.monotonic()
            sent = await ctl.call(
                "send", {"terminal_id": terminal_id, "request": task, "client_request_id": f"b{n}"}
            )
            event = await outcome(ctl, sent["turn_id"])
            assert event["kind"] == "done", (n, event)
            seconds.append(time.monotonic() - started)
    request.node.user_properties.append((TURN_SECONDS, seconds))
    print(
        f"{lab.agent} {lab.version}: {TURNS} turns, seconds each {[round(s, 2) for s in seconds]}"
    )
    # The far end: one agent turn per task, byte-exact, and no other agent turn.
    agent_turns = [r.newest_input.strip() for r in lab.server.main_requests()]
    assert agent_turns == tasks, lab.server.summary()
