"""Lab: the tmux server behind a running Turn dies; AKK settles the Turn once and carries on.

A managed Send runs in the lab pane (a slow task the model server holds) when
the pane's whole tmux server is killed. The Turn ends `failed` with
`terminal_gone`, once, and is delivered; `akk serve` stays up; and a new tmux
server started on the same socket is watched again: its agent pane is listed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from akk.client import connect
from akk.qualify.launcher import MARKER_VAR, LabSession
from akk.qualify.scenarios import SLOW_TASK
from akk.store.database import open_reader
from tests.lab.conftest import newest_of_each
from tools.lab.akk_runner import idle_terminal, outcome, serving

NEWEST_OF_EACH = newest_of_each("slow")


@pytest.mark.parametrize("lab", NEWEST_OF_EACH, indirect=True)
async def test_a_dying_tmux_settles_the_turn_once_and_a_new_server_is_watched(
    lab: LabSession, tmp_path: Path
) -> None:
    async with serving(lab, tmp_path, "ctl") as served:
        async with connect(served.endpoint.url, served.tokens["ctl"]) as ctl:
            row = await idle_terminal(ctl, timeout=30)
            sent = await ctl.call(
                "send",
                {"terminal_id": row["terminal_id"], "request": SLOW_TASK, "client_request_id": "t"},
            )
            await lab.server.wait_for_request(
                lambda r: not r.auxiliary and SLOW_TASK in r.newest_input, timeout=60
            )
            await lab.tmux("kill-server")
            event = await outcome(ctl, sent["turn_id"])
            assert (event["kind"], event["outcome"]["reason"]) == ("failed", "terminal_gone")
            # A new server on the same socket (the person starts tmux again) is watched. Its
            # client carries the run's marker, so the lab's teardown waits for it to exit.
            await trio.run_process(
                ["tmux", "-S", str(lab.socket), "-f", os.devnull, "new-session", "-d",
                 "-x", "120", "-y", "40", "-c", str(lab.workdir), *lab.argv],
                env={**os.environ, "HOME": str(lab.home), MARKER_VAR: lab.root.name,
                     **({"CODEX_HOME": str(lab.codex_home)} if lab.codex_home else {})},
            )  # fmt: skip
            with trio.fail_after(60):
                while not [
                    r
                    for r in (await ctl.call("list"))["terminals"]
                    if r["terminal_id"] != row["terminal_id"] and r["agent"] == lab.agent
                ]:
                    await trio.sleep(0.1)
        conn = open_reader(served.state.store_path)
        try:
            outcomes = conn.execute(
                "SELECT kind FROM notifications WHERE turn_id = ? AND kind NOT IN "
                "('interaction_required', 'approval_required')",
                (sent["turn_id"],),
            ).fetchall()
        finally:
            conn.close()
    assert outcomes == [("failed",)]  # one outcome, delivered above
