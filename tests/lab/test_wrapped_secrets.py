"""A secret that real clients wrap leaves no 8-character piece anywhere AKK puts text.

A controller sends a task holding a fake 90-character Anthropic key into an
80-column pane, so the composer and the history wrap it; the scripted model
then asks to run a command holding a fake 93-character GitHub token, so the
permission prompt wraps it too. While the prompt waits, and again once the
Turn is over, no 8-character piece of either key may appear in `status` by
Turn and by terminal, `list`, `akk status --json`, any event, any row of the
store file, or any log line of the server. The model server is the oracle that
the task reached the agent, once.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import Controller
from akk.protocol.redaction import MASK
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tools.lab.akk_runner import OUTCOMES, Served, idle_terminal, two_controllers

SECRETS = (sc.TASK_SECRET, sc.COMMAND_SECRET)


def pieces(secret: str) -> set[str]:
    return {secret[start : start + 8] for start in range(len(secret) - 7)}


def leaked(texts: dict[str, str]) -> dict[str, int]:
    """For each place, how many of the secrets' characters it shows in 8-character pieces."""
    counts: dict[str, int] = {}
    for place, text in texts.items():
        shown = 0
        for secret in SECRETS:
            cover = [False] * len(secret)
            for start in range(len(secret) - 7):
                if secret[start : start + 8] in text:
                    cover[start : start + 8] = [True] * 8
            shown += sum(cover)
        counts[place] = shown
    return counts


def store_rows(served: Served) -> str:
    """Every row of every table of the store file, as text."""
    conn = sqlite3.connect(f"file:{served.state.store_path}?mode=ro", uri=True)
    try:
        tables = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return "\n".join(
            repr(row) for table in tables for row in conn.execute(f'SELECT * FROM "{table}"')
        )
    finally:
        conn.close()


def cli_status(served: Served, turn_id: str) -> str:
    env = {**os.environ, "AKK_STATE_DIR": str(served.state.path)}
    done = subprocess.run(
        [sys.executable, "-m", "akk", "status", turn_id, "--json"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    return done.stdout


async def everywhere(
    ctl: Controller, served: Served, turn_id: str, terminal_id: str, events: list[dict[str, Any]],
    logs: pytest.LogCaptureFixture,
) -> dict[str, str]:  # fmt: skip
    """Every text AKK gives out about the Turn and its pane, by place."""
    by_turn = await ctl.call("status", {"turn_id": turn_id})
    by_terminal = await ctl.call("status", {"terminal_id": terminal_id})
    return {
        "status_by_turn": json.dumps(by_turn, ensure_ascii=False),
        "status_by_terminal": json.dumps(by_terminal, ensure_ascii=False),
        "list": json.dumps(await ctl.call("list"), ensure_ascii=False),
        "akk_status_json": await trio.to_thread.run_sync(cli_status, served, turn_id),
        "events": json.dumps(events, ensure_ascii=False),
        "store": await trio.to_thread.run_sync(store_rows, served),
        "log": "\n".join(r.getMessage() for r in logs.records if r.name.startswith("akk")),
    }


async def collect_until(
    ctl: Controller, events: list[dict[str, Any]], kinds: frozenset[str], timeout: float
) -> dict[str, Any]:
    """Ack and keep every event up to the first of ``kinds``."""
    with trio.fail_after(timeout):
        async with aclosing(ctl.events()) as stream:
            async for event in stream:
                await ctl.ack(event["event_id"])
                events.append(event)
                if event["kind"] in kinds:
                    return event
    raise AssertionError("the connection closed first")


def excerpt_of(status: dict[str, Any]) -> str:
    return "\n".join(status["screen_excerpt"] or [])


def asks(status: dict[str, Any], answerable: bool) -> bool:
    """Whether the pane shows the command's prompt, projected when ``answerable`` (and then
    answerable: a prompt held or refused a moment is projected manual, with nothing shown)."""
    drawn = excerpt_of(status)
    prompted = any(ask in drawn for ask in ("Do you want to proceed?", "Would you like"))
    interaction = status["interaction"]
    projected = interaction is not None and (not answerable or interaction["state"] == "pending")
    return sc.SECRET_MARKER in drawn and prompted and projected is answerable


async def shows(
    ctl: Controller, terminal_id: str, wanted: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """`status` of the pane once it is ``wanted``."""
    last: dict[str, Any] = {}
    with trio.move_on_after(60):
        while not wanted(last := await ctl.call("status", {"terminal_id": terminal_id})):
            await trio.sleep(0.1)
        return last
    raise AssertionError(json.dumps(last, indent=1))


async def probe(
    lab: LabSession, tmp_path: Path, logs: pytest.LogCaptureFixture, *, answerable: bool
) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    """Send the task, probe every place while it works, at the prompt and after the Turn.

    Returns the characters leaked by moment and place, and the pane's `status`
    while it showed the prompt.
    """
    logs.set_level(logging.DEBUG)
    events: list[dict[str, Any]] = []
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        row = await idle_terminal(ctl, timeout=30)
        terminal_id = row["terminal_id"]
        sent = await ctl.call(
            "send",
            {"terminal_id": terminal_id, "request": sc.SECRET_TASK, "client_request_id": "s1"},
        )
        turn_id = sent["turn_id"]
        await lab.server.wait_for_request(
            lambda r: not r.auxiliary and sc.SECRET_TASK in r.newest_input, timeout=30
        )
        # The agent works on the task: the history shows it, wrapped.
        working = await shows(ctl, terminal_id, lambda status: "lab: keep" in excerpt_of(status))
        assert MASK in excerpt_of(working), excerpt_of(working)
        places = await everywhere(ctl, served, turn_id, terminal_id, events, logs)
        leaks = {"working": leaked(places)}
        lab.server.signal(sc.SECRET_SIGNAL)
        shown = await shows(ctl, terminal_id, lambda status: asks(status, answerable))
        if answerable:
            await collect_until(ctl, events, frozenset({"approval_required"}), 30)
        leaks["prompt"] = leaked(await everywhere(ctl, served, turn_id, terminal_id, events, logs))
        if answerable:
            reply = await ctl.call("approve", {"turn_id": turn_id, "decision": "reject"})
            assert reply["outcome"] == "dispatched"
        else:  # a prompt the profile cannot read whole is left to a person: who declines it
            await lab.send_keys("Escape")
        await collect_until(ctl, events, OUTCOMES, 60)
        leaks["after"] = leaked(await everywhere(ctl, served, turn_id, terminal_id, events, logs))
    assert lab.server.count_inputs_containing(sc.SECRET_TASK) == 1
    assert not (lab.workdir / f"{sc.SECRET_MARKER}.txt").exists()
    return leaks, shown


def assert_masked_excerpt(shown: dict[str, Any]) -> None:
    """Not vacuous: the excerpt at the prompt shows the command's wrapped rows, masked."""
    excerpt = "\n".join(shown["screen_excerpt"])
    assert sc.SECRET_MARKER in excerpt and MASK in excerpt, excerpt


@pytest.mark.parametrize("lab", lab_params("claude_bash_secret", cols=80, rows=24), indirect=True)
async def test_claude_wrapped_secrets_leave_no_piece_anywhere(
    lab: LabSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leaks, shown = await probe(lab, tmp_path, caplog, answerable=True)
    assert_masked_excerpt(shown)
    interaction = shown["interaction"]
    assert interaction is not None and interaction["kind"] == "permission"
    assert MASK in interaction["questions"][0]["detail"]
    assert all(not any(by_place.values()) for by_place in leaks.values()), leaks


@pytest.mark.parametrize("lab", lab_params("codex_exec_secret", cols=80, rows=24), indirect=True)
async def test_codex_wrapped_secrets_leave_no_piece_anywhere(
    lab: LabSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Codex draws the command cut inside the token: the profile cannot unwrap it exactly,
    # so the prompt is left to a person, who declines it.
    leaks, shown = await probe(lab, tmp_path, caplog, answerable=False)
    assert_masked_excerpt(shown)
    assert all(not any(by_place.values()) for by_place in leaks.values()), leaks
