"""`akk qualify` end to end: a pinned version taken as new, and a real mismatch refused.

The registry is the test's: `PINNED.without(agent, version)` lacks the version's
own row, so only a qualification binds it, exactly as for a version AKK has
never seen. The binary is the real pinned one. The model server is the oracle
for what the qualified pane then does. Codex 0.171.0 is qualified once, by
`akk serve --auto-qualify`; `akk qualify` then reports that judgement (a whole
qualification takes minutes: the two ways in share one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from akk import cli
from akk.client import Controller, connect
from akk.discovery.process import sha256_file
from akk.profiles.registry import PINNED
from akk.qualify import command, qualification
from akk.qualify import scenarios as sc
from akk.qualify.auto import ACTOR
from akk.qualify.launcher import LabSession, launch
from akk.qualify.qualification import Judgement, Probe
from akk.store.database import open_reader
from akk.store.location import StateDir
from tests.lab.conftest import LabSpec
from tests.lab.test_interactions import choose, prompt, reached, send_task, settled
from tools.lab import clients
from tools.lab.akk_runner import idle_terminal, outcome, serving, two_controllers

NEW = clients.get("codex", "0.171.0")
"""Taken as new; its nearest pinned version is then 0.169.0."""
OLD = clients.get("claude", "2.1.263")
"""Read with 2.1.328's profile (the lowest pinned above it once 2.1.263-267 are gone), which
draws its questions and permissions differently."""
MISMATCH_PLANS = ("questionnaire_single3", "claude_bash")
AUTO_QUALIFY_TIMEOUT = 900.0
"""A whole Codex qualification at the lowest priority, on 2 shared cores: 426 to 488 s in
CI's loaded lab, where every other test's client runs before it."""


def _qualify(state: StateDir, binary: Path) -> int:
    """`akk qualify codex --binary BINARY --json` in this process, with the test's registry."""
    argv = ["qualify", "codex", "--binary", str(binary), "--state-dir", str(state.path), "--json"]
    return cli.main(argv, registry=PINNED.without(NEW.agent, NEW.version))


async def _seen(ctl: Controller) -> dict[str, Any]:
    """The lab pane's one `list` row, once the server sees it (bound or not)."""
    with trio.fail_after(20):
        while not (rows := (await ctl.call("list"))["terminals"]):
            await trio.sleep(0.05)
    (row,) = rows
    found: dict[str, Any] = row
    return found


@pytest.mark.lab
@pytest.mark.parametrize("lab", [LabSpec(OLD, "echo")], indirect=True, ids=lambda spec: spec.id)
async def test_an_old_claude_read_with_a_newer_profile_is_refused_and_binds_nothing(
    lab: LabSession, tmp_path: Path
) -> None:
    registry = PINNED
    for version in ("2.1.263", "2.1.266", "2.1.267"):
        registry = registry.without("claude", version)
    async with qualification.pinned("claude", OLD.binary()) as found:
        judged = await qualification.qualify(found, registry.pinned, plans=MISMATCH_PLANS)

    text = judged.text()
    assert judged.base.id == "claude-code@2.1.328" and not judged.qualified, text
    differing = [c for c in judged.comparisons if c.status == "differs"]
    assert differing, text
    for compared in differing:
        assert f"DIFFERS         {compared.point.name}" in text
    assert any(c.rows for c in differing), text  # the rows that differ are named
    assert text.rstrip().splitlines()[-1].startswith("REFUSED: claude 2.1.263: ")
    with pytest.raises(ValueError, match="only a qualified binary"):
        command.row(judged, 0.0)
    # A pane of that binary stays unsupported, and its reason names the command to run.
    async with two_controllers(lab, tmp_path, registry=registry) as (_, ctl, _other):
        row = await _seen(ctl)
    assert row["profile"] is None, row
    assert "akk qualify claude" in row["profile_reason"], row


@pytest.mark.lab
@pytest.mark.parametrize("lab", [LabSpec(NEW, "echo")], indirect=True, ids=lambda spec: spec.id)
@pytest.mark.long
async def test_a_pinned_codex_taken_as_new_is_auto_qualified_then_reported_and_served(
    lab: LabSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One real qualification of the binary, by `akk serve --auto-qualify` (at the lowest
    priority); `akk qualify --json` then reports that same judgement, and a pane bound
    through the row it stores answers a question. A whole Codex qualification takes
    minutes, so the two ways in share one instead of running it twice."""
    registry = PINNED.without(NEW.agent, NEW.version)
    judged: list[Judgement] = []
    real_qualify = qualification.qualify

    async def recorded(*args: Any, **kwargs: Any) -> Judgement:
        judged.append(await real_qualify(*args, **kwargs))
        return judged[-1]

    monkeypatch.setattr(qualification, "qualify", recorded)
    async with (
        serving(lab, tmp_path / "auto", registry=registry, auto_qualify=True) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        assert (await _seen(ctl))["profile"] is None  # unsupported until it is qualified
        started = trio.current_time()
        terminal = await idle_terminal(ctl, timeout=AUTO_QUALIFY_TIMEOUT)
        took = trio.current_time() - started
        assert terminal["profile"] == "codex@0.171.0 (qualified from 0.169.0)", terminal
        print(f"auto-qualify bound {NEW.name} after {took:.1f} s")
        sent = await ctl.call(
            "send",
            {"terminal_id": terminal["terminal_id"], "request": sc.ECHO_TASK,
             "client_request_id": "auto-1"},
        )  # fmt: skip
        assert (await outcome(ctl, sent["turn_id"]))["kind"] == "done"
    conn = open_reader(served.state.store_path)
    try:
        actors = [row[0] for row in conn.execute(
            "SELECT actor FROM audit WHERE action LIKE 'qualification%'"
        )]  # fmt: skip
    finally:
        conn.close()
    assert actors == [ACTOR], actors
    turns = [r.newest_input.strip() for r in lab.server.main_requests()]
    assert turns == [sc.ECHO_TASK], lab.server.summary()
    (auto,) = judged

    # `akk qualify` on the same binary gets the judgement the server's run reached.
    async def replayed(found: Probe, *args: Any, **kwargs: Any) -> Judgement:
        assert (found.version, found.sha256) == (auto.probe.version, auto.probe.sha256)
        return auto

    monkeypatch.setattr(qualification, "qualify", replayed)
    state = StateDir(tmp_path / "cli" / "akk")
    status = await trio.to_thread.run_sync(_qualify, state, NEW.binary())
    printed = json.loads(capsys.readouterr().out.splitlines()[-1])  # after the fixture's line

    (result,) = printed["results"]
    report = result["report"]
    # A refusal names each screen that differed, how it read and its rows, not only how many.
    differing = report["differing"]
    assert (status, result["state"]) == (0, "qualified"), (report["problems"], differing)
    assert report["base_profile"] == "codex@0.169.0"
    assert report["screens"]["differs"] == report["screens"]["not_producible"] == 0
    assert report["screens"]["same"] > 100 and report["sandboxed"] is True
    assert report["evidence"]["outcome"] == "done" and not report["evidence"]["problems"]
    assert report["binary_sha256"] == sha256_file(NEW.binary())
    phases = {phase["name"]: phase["seconds"] for phase in report["phases"]}
    assert list(phases) == ["probe", "evidence", "capture", "classify", "schema"]
    print(f"qualify {NEW.name} as new: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))

    # Served with the same registry, a pane binds through the stored row alone...
    async with launch(NEW, sc.SCENARIOS["codex_rui_one"], plan_mode=True) as asked:
        async with two_controllers(asked, tmp_path / "cli", registry=registry) as (_, ctl, _o):
            terminal = await idle_terminal(ctl)
            assert terminal["profile"] == "codex@0.171.0 (qualified from 0.169.0)", terminal
            # ...and a task goes in, its question is answered, and the Turn ends done.
            turn_id = await send_task(ctl, sc.ASK_TASK)
            shown = await prompt(ctl, turn_id)
            answer = await ctl.call("respond_interaction", choose(shown, "Blue"))
            assert answer["outcome"] == "dispatched"
            answered = await reached(asked, lambda r: sc.ANSWERED_CODEX in r.newest_input)
            assert (await settled(ctl, turn_id))["kind"] == "done"
        assert "Blue" in answered.newest_input and "Red" not in answered.newest_input
        assert asked.server.count_inputs_containing(sc.ANSWERED_CODEX) == 1
        main = asked.server.main_requests()
        assert len([r for r in main if r.newest_input.strip() == sc.ASK_TASK]) == 1, (
            asked.server.summary()  # the task reached the agent once
        )
