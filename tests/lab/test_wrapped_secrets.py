"""A secret that real clients wrap leaves no 8-character piece anywhere AKK puts text.

A controller sends a task holding a fake 90-character Anthropic key into an
80-column pane, so the composer and the history wrap it; the scripted model
then asks to run a command holding a fake 93-character GitHub token, so the
permission prompt wraps it too. While the prompt waits, and again once the
Turn is over, no 8-character piece of either key's random part may appear in `status` by
Turn and by terminal, `list`, `akk status --json`, any event, any row of the
store file, or any log line of the server. The model server is the oracle that
the task reached the agent, once.

tmux may be caught between two drawings: its capture then shows some rows of the
new one and the rest of the old (the secret's tail row without the row that named
it, or a row half redrawn). Every screen the client drew is sampled as it runs,
and every such mix of two screens in a row, redacted as the server redacts a
pane's newest drawing (`SeenSecrets`), must leave no piece either.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.backends.terminal.observer import SEEN_SECRET_CHARS
from akk.client import Controller
from akk.protocol.excerpt import excerpt
from akk.protocol.redaction import MASK, SeenSecrets, redact_screen
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from akk.store.database import open_reader
from tests.lab.conftest import lab_params
from tools.lab.akk_runner import OUTCOMES, Served, idle_terminal, two_controllers

SECRETS = (sc.TASK_SECRET_BODY, sc.COMMAND_SECRET_BODY)
"""What of each key is secret: its prefix (``sk-ant-api03-``, ``github_pat_``) is every such
key's, and the excerpt of a drawing caught half done may show it."""


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
    """Every row of every table of the store file, as text.

    Read through apsw, the server's own SQLite: a second copy of SQLite in the process
    (the standard `sqlite3`) would drop the server's file locks as it closed, and the
    `akk status` beside it could then truncate the write-ahead log under the server's
    map of it (a bus error, seen once)."""
    conn = open_reader(served.state.store_path)
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

    Returns the characters leaked by moment and place (and by mixes of two drawings
    in a row, `half_drawn`), and the pane's `status` while it showed the prompt.
    """
    logs.set_level(logging.DEBUG)
    events: list[dict[str, Any]] = []
    drawings: list[list[str]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample, lab, drawings)
        leaks, shown = await _probe(lab, tmp_path, logs, events, answerable)
        nursery.cancel_scope.cancel()
    leaks["half_drawn"] = half_drawn(drawings, lab.cols)
    assert len(drawings) >= 3, drawings  # the task, the prompt, the Turn's end
    return leaks, shown


SAMPLE_SECONDS = 0.02
"""Between two samples of the pane: each costs a tmux process, and the screens that matter
(the task drawn, the prompt, the Turn's end) stand for longer."""


async def sample(lab: LabSession, drawings: list[list[str]]) -> None:
    """Append each new screen of the pane, rows padded to its width as the server reads them."""
    while True:
        rows = [row.ljust(lab.cols) for row in (await lab.text()).split("\n")[: lab.rows]]
        if not drawings or rows != drawings[-1]:
            drawings.append(rows)
        await trio.sleep(SAMPLE_SECONDS)


def half_drawn(drawings: list[list[str]], cols: int) -> dict[str, int]:
    """The characters each mix of two drawings in a row shows in its excerpt, by mix.

    A mix is the newer drawing's rows down to one row and the older's below it,
    that row cut at each tenth of its width (new text left, the old or nothing right);
    or the older drawing scrolled up by some rows. Each is redacted knowing what
    the drawings before it masked, as the pane's Observer knows it.
    """
    seen = SeenSecrets(SEEN_SECRET_CHARS)
    found: dict[str, int] = {}
    for n, (old, new) in enumerate(itertools.pairwise(drawings)):
        seen.add(redact_screen(old, seen.pieces).secrets)
        mixes = [old[up:] + [" " * cols] * up for up in range(1, len(old))]
        for y in range(len(new)):
            for cut in range(0, cols, max(cols // 10, 1)):
                for rest in (old[y][cut:], " " * (cols - cut)):
                    mixes.append([*new[:y], new[y][:cut] + rest, *old[y + 1 :]])
        for m, mix in enumerate(mixes):
            shown = excerpt(mix, seen=seen.pieces)
            if shown is not None and (count := leaked({"mix": "\n".join(shown)})["mix"]):
                found[f"drawing {n + 1}, mix {m}"] = count
    return found


async def _probe(
    lab: LabSession,
    tmp_path: Path,
    logs: pytest.LogCaptureFixture,
    events: list[dict[str, Any]],
    answerable: bool,
) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
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
