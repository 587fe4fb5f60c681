"""Claude Code with `editorMode: vim`: a send in INSERT mode, and one refused in NORMAL mode.

INSERT mode starts the hint row with ``-- INSERT --``; NORMAL mode draws no mark,
so an empty NORMAL composer is the default idle composer cell for cell. Typed text
would be vim commands there (``l`` moves, ``a`` opens INSERT), so AKK reads the
agent's own editorMode setting and, where it is vim or cannot be read (a
`--settings` file removed since the start), sends only under the mark: in NORMAL
mode the send is refused with zero keys.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from akk.client import AkkError, connect
from akk.qualify.launcher import LabSession
from akk.qualify.run_files import SETTINGS_FLAG_FILE, Preseed
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK
from tests.lab.conftest import LabSpec
from tools.lab import clients
from tools.lab.akk_runner import idle_terminal, outcome, serving

_CLAUDE = clients.get("claude", "2.1.332")
_VIM = LabSpec(_CLAUDE, "echo", preseed=Preseed(claude_editor_mode="vim"))
# The same mode given on the command line only, where no settings file says it.
_VIM_FLAG = LabSpec(
    _CLAUDE, "echo", preseed=Preseed(claude_settings_argument='{"editorMode":"vim"}')
)
# The same mode in a `--settings` file that is then removed: the mode cannot be read.
_VIM_GONE = LabSpec(
    _CLAUDE,
    "echo",
    preseed=Preseed(claude_settings_argument='{"editorMode":"vim"}', claude_settings_in_file=True),
)
NORMAL_TEXT = "lab: typed into normal mode"


def _composer(screen: str) -> list[str]:
    """The pane's rows from the composer's upper rule down (Claude animates its logo above,
    on its own): the composer is the last row holding its prompt glyph."""
    rows = screen.splitlines()
    last = max(i for i, row in enumerate(rows) if "\u276f" in row)
    return rows[last - 1 :]


@pytest.mark.parametrize(
    ("lab", "refusal"),
    [
        pytest.param(_VIM, "it is in NORMAL mode", id=f"{_VIM.id}-vim", marks=pytest.mark.lab),
        pytest.param(
            _VIM_FLAG,
            "it is in NORMAL mode",
            id=f"{_VIM.id}-vim-settings-flag",
            marks=pytest.mark.lab,
        ),
        pytest.param(
            _VIM_GONE,
            f"AKK cannot read Claude's editorMode (process_unreadable: the --settings file "
            f"'{SETTINGS_FLAG_FILE}'",
            id=f"{_VIM.id}-vim-settings-file-gone",
            marks=pytest.mark.lab,
        ),
    ],
    indirect=["lab"],
)
async def test_send_in_insert_mode_reaches_the_model_once_and_normal_mode_gets_no_enter(
    lab: LabSession, refusal: str, tmp_path: Path
) -> None:
    assert "-- INSERT --" in await lab.text()
    (lab.workdir / SETTINGS_FLAG_FILE).unlink(missing_ok=True)
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
        before = _composer(await lab.capture())
        with pytest.raises(AkkError) as refused:
            await ctl.call(
                "send",
                {"terminal_id": terminal_id, "request": NORMAL_TEXT, "client_request_id": "n"},
            )
        listed = await ctl.call("list", {})
    assert refused.value.reason == "not_idle", refused.value
    assert refusal in str(refused.value)
    # Zero keys: the pane is as it was, no record was made, and the model got nothing.
    assert _composer(await lab.capture()) == before
    assert [t["turn_id"] for t in listed["turns"]] == [sent["turn_id"]]
    assert lab.server.count_inputs_containing(NORMAL_TEXT) == 0
