"""Every pinned Codex: a task typed as keys gets its one Enter as soon as the held proof allows.

Codex reads an Enter that comes within its paste-burst window of typed keys as
a newline. AKK waits for no timer of its own: Enter follows the first screen
that shows exactly the task, held for the version's Enter guard
(`akk.backends.terminal.typing_step`). Each text here is typed with
`send-keys -l` (a short word, wide characters first, accents and emoji inside,
a long line near the literal limit), sent right after the previous Turn's
`done`, when the composer was drawn all along and no settle time applies.

The model server is the oracle: the agent's turns, counted there (title
requests left out), are exactly the tasks, once each and byte-exact; a newline
in place of a submit would leave a task out, or join it to the next one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from akk.client import connect
from akk.profiles.composer import TypingMethod
from akk.profiles.registry import PINNED
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tools.lab.akk_runner import idle_terminal, outcome, serving

TEXTS = (
    "ok",
    "lab: say hello",
    "漢字 lab: a task led by wide characters",
    "lab: naïve café — 🎉 done",
    "lab: " + ("alpha beta gamma delta " * 40)[:900].rstrip(),
    "lab: echo one; echo two;",
)


@pytest.mark.parametrize("lab", lab_params("echo", agents=("codex",)), indirect=True)
async def test_typed_tasks_reach_the_model_once_each_right_after_the_last_done(
    lab: LabSession, tmp_path: Path
) -> None:
    profile = PINNED.bind(lab.agent, lab.version).profile
    assert profile is not None
    tasks = [f"{text} {n}" for n, text in enumerate(TEXTS)]
    assert all(profile.typing.method_for(task) is TypingMethod.LITERAL for task in tasks)
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        terminal_id = (await idle_terminal(ctl))["terminal_id"]
        for n, task in enumerate(tasks):
            sent = await ctl.call(
                "send", {"terminal_id": terminal_id, "request": task, "client_request_id": f"e{n}"}
            )
            event = await outcome(ctl, sent["turn_id"])
            assert event["kind"] == "done", (n, event)
    agent_turns = [r.newest_input for r in lab.server.main_requests()]
    assert agent_turns == tasks, lab.server.summary()
