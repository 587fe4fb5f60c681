"""A pane whose keys tmux would not give the agent as spelled gets none, on a real client.

With ``synchronize-panes`` on, tmux copies every key to the window's other panes:
a review saw ``rm -rf build`` and its Enter reach a neighbouring shell. In a mode
(copy-mode after a scroll, a chooser) the keys drive the mode, and `capture-pane`
still shows the idle agent under it. Both are refused with zero keys; once the
person undoes them, the same send reaches the model once and nothing else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from akk.client import AkkError, connect
from akk.qualify.launcher import LabSession
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK
from tests.lab.conftest import lab_params
from tools.lab.akk_runner import idle_terminal, outcome, serving

REFUSED_TEXT = "lab: never copied anywhere"


@pytest.mark.parametrize("lab", lab_params("echo")[-1:], indirect=True)
async def test_synchronized_panes_and_copy_mode_get_no_key(lab: LabSession, tmp_path: Path) -> None:
    sink = tmp_path / "neighbour"
    sink.touch()
    # The window's other pane: whatever reaches its pty lands in the file.
    await lab.tmux("split-window", "-d", "-t", "lab", f"stty raw -echo; exec cat > {sink}")
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        row = await idle_terminal(ctl)
        terminal_id = row["terminal_id"]
        pane = lab.pane

        async def refused(client_request_id: str) -> AkkError:
            with pytest.raises(AkkError) as caught:
                await ctl.call(
                    "send",
                    {
                        "terminal_id": terminal_id,
                        "request": REFUSED_TEXT,
                        "client_request_id": client_request_id,
                    },
                )
            return caught.value

        await lab.tmux("set-window-option", "-t", pane, "synchronize-panes", "on")
        synchronized = await refused("sync")
        await lab.tmux("set-window-option", "-t", pane, "synchronize-panes", "off")
        await lab.tmux("copy-mode", "-t", pane)
        in_mode = await refused("mode")
        await lab.tmux("send-keys", "-t", pane, "-X", "cancel")
        assert served.keys.keys() == []  # zero keys, at the key layer
        listed = await ctl.call("list", {})
        assert listed["turns"] == []  # and no record

        sent = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": ECHO_TASK, "client_request_id": "ok"}
        )
        event = await outcome(ctl, sent["turn_id"])
    assert synchronized.reason == "manual_required", synchronized
    assert "synchronize-panes" in str(synchronized)
    assert in_mode.reason == "not_idle", in_mode
    assert "copy-mode" in str(in_mode)
    assert event["kind"] == "done", event
    assert ECHO_REPLY in (event["outcome"]["final_message"] or "")
    assert [r.newest_input.strip() for r in lab.server.main_requests()] == [ECHO_TASK]
    assert lab.server.count_inputs_containing(REFUSED_TEXT) == 0
    assert sink.read_bytes() == b""  # the neighbour got nothing, the task's keys included
