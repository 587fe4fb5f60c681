"""Claude Code with `editorMode: vim`: a send in INSERT mode, and one into NORMAL mode.

INSERT mode starts the hint row with ``-- INSERT --``; NORMAL mode draws no mark,
so an empty NORMAL composer is the default idle composer cell for cell and AKK
reads it as idle. There the typed text becomes vim commands: the composer never
shows the task, so AKK presses no Enter and the model server sees nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from akk.client import connect
from tests.lab.conftest import LabSpec
from tools.lab import clients
from tools.lab.akk_runner import idle_terminal, outcome, serving
from tools.lab.launcher import LabSession, Preseed
from tools.lab.scenarios import ECHO_REPLY, ECHO_TASK

_VIM = LabSpec(clients.get("claude", "2.1.332"), "echo", preseed=Preseed(claude_editor_mode="vim"))
NORMAL_TEXT = "lab: typed into normal mode"


@pytest.mark.parametrize(
    "lab", [pytest.param(_VIM, id=f"{_VIM.id}-vim", marks=pytest.mark.lab)], indirect=True
)
async def test_send_in_insert_mode_reaches_the_model_once_and_normal_mode_gets_no_enter(
    lab: LabSession, tmp_path: Path
) -> None:
    assert "-- INSERT --" in await lab.text()
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        row = await idle_terminal(ctl)
        terminal_id = row["terminal_id"]
        sent = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": ECHO_TASK, "client_request_id": "i"}
        )
        event = await outcome(ctl, sent["turn_id"])
        assert event["kind"] == "done", event
        assert [r.newest_input.strip() for r in lab.server.main_requests()] == [ECHO_TASK]
        assert ECHO_REPLY in (event["outcome"]["final_message"] or "")
        await lab.wait_idle(20)

        await lab.send_keys("Escape")
        await lab.wait_for_screen(lambda s: "-- INSERT --" not in s, 10, what="NORMAL mode")
        sent = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": NORMAL_TEXT, "client_request_id": "n"}
        )
        assert sent["state"] == "failed"
        status = await ctl.call("status", {"turn_id": sent["turn_id"]})
    assert status["turn"]["reason"] == "composer_mismatch"
    assert [d["stage"] for d in status["dispatches"]] == ["aborted"]
    # 'l' moved, 'a' opened INSERT mode and took the rest as text; no Enter followed.
    assert f"\u276f\u00a0{NORMAL_TEXT[2:]}" in await lab.text()
    assert lab.server.count_inputs_containing(NORMAL_TEXT[2:]) == 0
