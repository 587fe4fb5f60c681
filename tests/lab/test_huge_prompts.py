"""Lab: a 1.2 MB command, and a 2.6 MB final message, from the model, on the newest Codex
app-server and headless Claude.

The scripted model asks to run a command that holds a GitHub token and then a
here-document of 1.2 MB of base64 lines (`scenarios.huge_command`). The
controller must get the wake-up and `status` (each in a frame its own library
accepts: 1 MiB), showing the command's head, the token masked, and a mark with
the whole command's length; the decisions stay offered, since the whole command
is what a decision answers. A rejection reaches the model once and nothing runs.

Before the projection bounded its texts the command went out whole: the event
outgrew the controller's frame and the connection closed, and the app-server's
projection redacted all of it on the server's thread (10 s per MB of base64
lines).

A command of one 2.4 MB line (`scenarios.costly_command`) is more than the redaction
may read: its detail shows nothing, so only reject is offered and approve is refused
with zero sends.

The final message is 40 rows of 64 KiB of base64 (`scenarios.huge_final`). Redacting
its head whole read 26 s of the server's thread, since chains join 16 such rows at a
time; its rules now stop at their budget and the message is withheld, not shown.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from akk.client import AkkError, Controller
from akk.protocol.redaction import MASK, withheld
from akk.qualify import scenarios as sc
from akk.qualify.model_server import ModelServer
from tests.lab import test_backend, test_claude_backend_answers
from tests.lab.test_interactions import prompt
from tools.lab import clients
from tools.lab.akk_runner import outcome

NEWEST = [clients.newest("codex"), clients.newest("claude")]
CUT = re.compile(r"…\[cut: (?P<whole>[\d,]+) characters in all\]")


async def _shown_cut_then_rejected(ctl: Controller, sent: dict[str, Any]) -> dict[str, Any]:
    shown = await prompt(ctl, sent["turn_id"])
    assert shown["kind"] == "permission" and shown["decisions"] == ["approve_once", "reject"]
    (question,) = shown["questions"]
    detail = question["detail"]
    # Codex shows the command as the shell it runs it in (`/bin/bash -lc "…"`).
    assert "export GITHUB_TOKEN=[redacted]\n" in detail[:100], detail[:100]
    cut = CUT.fullmatch(detail[2_000:])
    assert cut is not None, detail[1_900:]
    assert int(cut["whole"].replace(",", "")) >= len(sc.huge_command())
    assert sc.COMMAND_SECRET[11:30] not in detail
    reply = await ctl.call("approve", {"turn_id": sent["turn_id"], "decision": "reject"})
    assert reply["outcome"] == "dispatched"
    event = await outcome(ctl, sent["turn_id"], timeout=60)
    return event


def _nothing_ran(model: ModelServer, workdir: Path) -> None:
    assert not (workdir.parent / f"{sc.HUGE_MARKER}.txt").exists()
    assert not (workdir / f"{sc.HUGE_MARKER}.txt").exists()
    assert model.count_inputs_containing(sc.HUGE_TASK) == 1
    assert model.count_inputs_containing(sc.HUGE_MARKER) == 0


@pytest.mark.lab
@pytest.mark.parametrize("client", NEWEST, ids=lambda client: client.name)
async def test_a_megabyte_command_is_shown_cut_and_redacted_and_rejected_once(
    client: clients.Client, tmp_path: Path
) -> None:
    if client.agent == "codex":
        async with test_backend.backend(client, tmp_path, "codex_exec_huge") as codex:
            sent = await codex.ctl.call("send", codex.send(sc.HUGE_TASK))
            event = await _shown_cut_then_rejected(codex.ctl, sent)
            assert event["kind"] == "cancelled", event
        _nothing_ran(codex.model, codex.files.workdir)
        return
    scenario = sc.SCENARIOS["claude_bash_huge"]
    async with test_claude_backend_answers.serving(client, tmp_path, scenario) as claude:
        sent = await claude.ctl.call("send", claude.send(sc.HUGE_TASK))
        event = await _shown_cut_then_rejected(claude.ctl, sent)
        assert event["kind"] == "done", event  # Claude goes on after the deny message
    _nothing_ran(claude.model, claude.files.workdir)


@pytest.mark.lab
@pytest.mark.parametrize("client", NEWEST, ids=lambda client: client.name)
async def test_a_final_message_too_costly_to_redact_is_withheld(
    client: clients.Client, tmp_path: Path
) -> None:
    scenario = sc.SCENARIOS["huge_final"]
    if client.agent == "codex":
        async with test_backend.backend(client, tmp_path, scenario.name) as codex:
            ctl, model, sent = codex.ctl, codex.model, codex.send(sc.HUGE_FINAL_TASK)
            event, turn = await _settled(ctl, await ctl.call("send", sent))
    else:
        async with test_claude_backend_answers.serving(client, tmp_path, scenario) as claude:
            ctl, model, sent = claude.ctl, claude.model, claude.send(sc.HUGE_FINAL_TASK)
            event, turn = await _settled(ctl, await ctl.call("send", sent))
    assert turn["final_message"] == withheld(len(sc.huge_final()))
    assert event["summary"] == MASK  # the first row alone: one random key
    assert (
        len(model.main_requests()) == 1 and model.count_inputs_containing(sc.HUGE_FINAL_TASK) == 1
    )


async def _settled(ctl: Controller, sent: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Turn's outcome event, and the Turn as `status` shows it."""
    event = await outcome(ctl, sent["turn_id"], timeout=60)
    assert event["kind"] == "done", {key: str(value)[:300] for key, value in event.items()}
    status = await ctl.call("status", {"turn_id": sent["turn_id"]})
    turn: dict[str, Any] = status["turn"]
    return event, turn


@pytest.mark.lab
@pytest.mark.parametrize("client", NEWEST, ids=lambda client: client.name)
async def test_a_command_too_costly_to_show_is_offered_for_reject_only(
    client: clients.Client, tmp_path: Path
) -> None:
    if client.agent == "codex":
        async with test_backend.backend(client, tmp_path, "codex_exec_costly") as codex:
            sent = await codex.ctl.call("send", codex.send(sc.COSTLY_TASK))
            event = await _reject_only(codex.ctl, sent)
            assert event["kind"] == "cancelled", event
        _nothing_costly_ran(codex.model, codex.files.workdir)
        return
    scenario = sc.SCENARIOS["claude_bash_costly"]
    async with test_claude_backend_answers.serving(client, tmp_path, scenario) as claude:
        sent = await claude.ctl.call("send", claude.send(sc.COSTLY_TASK))
        event = await _reject_only(claude.ctl, sent)
        assert event["kind"] == "done", event  # Claude goes on after the deny message
    _nothing_costly_ran(claude.model, claude.files.workdir)


async def _reject_only(ctl: Controller, sent: dict[str, Any]) -> dict[str, Any]:
    shown = await prompt(ctl, sent["turn_id"])
    assert shown["kind"] == "permission" and shown["decisions"] == ["reject"]
    (question,) = shown["questions"]
    assert question["detail"].startswith("[not shown: "), question["detail"][:200]
    assert [option["role"] for option in question["options"]] == ["reject"]
    with pytest.raises(AkkError) as refused:
        await ctl.call("approve", {"turn_id": sent["turn_id"], "decision": "approve_once"})
    assert refused.value.reason == "invalid_params" and "reject only" in str(refused.value)
    reply = await ctl.call("approve", {"turn_id": sent["turn_id"], "decision": "reject"})
    assert reply["outcome"] == "dispatched"
    return await outcome(ctl, sent["turn_id"], timeout=60)


def _nothing_costly_ran(model: ModelServer, workdir: Path) -> None:
    assert not (workdir.parent / f"{sc.COSTLY_MARKER}.txt").exists()
    asked = [r for r in model.main_requests() if sc.COSTLY_TASK in r.newest_input]
    assert len(asked) == 1  # the agent's turn reached the model once
    assert model.count_inputs_containing(sc.COSTLY_MARKER) == 0
