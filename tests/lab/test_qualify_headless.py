"""Lab: the headless proof of `akk qualify`, and a qualified (unpinned) Claude on the headless
backend.

The proof (`akk.qualify.headless.prove`) holds on the oldest and newest pinned
Claude, and fails at `bash_allow` when the allow AKK sends is broken on purpose
(the command then never runs). Then Claude 2.1.332 taken as new: the test's
registry lacks its row (`PINNED.without`), for `akk qualify` and for `akk serve`
alike, exactly as for a version AKK has never seen. The binary is the real
pinned one, so the SHA-256 the qualification records and the one the backend
hashes at its start are the real binary's: no wrapper stands in for it. It is
qualified (its report proves the headless protocol), a `send {scope, backend:
"claude_headless"}` Turn ends done with the task at the model exactly once, and
after `akk qualify --revoke` the next send is refused with the step to take.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from akk import cli
from akk.backends.claude_headless import prompts
from akk.backends.claude_headless.setup import HEADLESS_CHECKS
from akk.client import AkkError, Controller, connect
from akk.config import ServiceConfig
from akk.discovery.process import sha256_file
from akk.profiles.registry import PINNED, Registry
from akk.qualify import headless
from akk.qualify.launcher import UNCONFINED, Confinement
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import prepare
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK, Scenario, Step, Text
from akk.service import run_service
from akk.store.location import StateDir
from tests.lab.conftest import ensure_installed
from tools.lab import clients
from tools.lab.akk_runner import Served, mint_offline, outcome
from tools.lab.clients import Client

OLDEST_AND_NEWEST = [clients.get("claude", "2.1.263"), clients.get("claude", "2.1.332")]
NEW = clients.get("claude", "2.1.332")
"""Taken as new; its nearest pinned version is then 2.1.328."""
AS_NEW = PINNED.without(NEW.agent, NEW.version)

SCENARIO = Scenario(
    "qualified_headless",
    task=ECHO_TASK,
    agents=frozenset({"claude"}),
    steps=(Step(ECHO_TASK, Text(ECHO_REPLY)),),
)


@pytest.mark.lab
@pytest.mark.parametrize("client", OLDEST_AND_NEWEST, ids=lambda client: client.name)
async def test_the_headless_proof_holds_on_a_pinned_claude(client: Client) -> None:
    await ensure_installed(client)
    proof = await headless.prove(client.binary(), client.version, confine=Confinement(True))
    assert proof.proven, proof.problem
    assert proof.checks == HEADLESS_CHECKS and proof.sandboxed
    print(f"{client.name}: {proof.describe()}")


@pytest.mark.lab
async def test_the_proof_fails_when_the_allow_is_not_the_one_that_runs_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await ensure_installed(NEW)
    original = prompts.decision_response

    def deny(prompt: prompts.HeadlessPrompt, decision: str) -> dict[str, Any]:
        return original(prompt, "reject")

    monkeypatch.setattr(prompts, "decision_response", deny)
    proof = await headless.prove(NEW.binary(), NEW.version, confine=UNCONFINED)
    assert not proof.proven
    assert proof.checks == ("init_session", "task_once"), proof
    assert proof.problem is not None and proof.problem.startswith("bash_allow: "), proof.problem
    assert "the command ran 0 times" in proof.problem


def _qualify(state: StateDir, binary: Path) -> int:
    """`akk qualify claude --binary BINARY --json` in this process, with the test's registry."""
    argv = ["qualify", "claude", "--binary", str(binary), "--state-dir", str(state.path), "--json"]
    return cli.main(argv, registry=AS_NEW)


def _revoke(state: StateDir) -> int:
    argv = ["qualify", "--revoke", "claude", NEW.version, "--state-dir", str(state.path)]
    return cli.main(argv, registry=AS_NEW)


@asynccontextmanager
async def _serving(
    client: Client, tmp_path: Path, model: ModelServer, registry: Registry
) -> AsyncIterator[tuple[Served, Path]]:
    """`akk serve` in this process with the headless backend on ``client``'s real binary
    and ``registry`` as its pinned set (`serving_backend`, which takes no registry)."""
    root = tmp_path / f"lab-{secrets.token_hex(6)}"
    root.mkdir()
    files = prepare(client, root, model.port)
    state = StateDir(tmp_path / "akk")
    tokens = mint_offline(state, "ctl")
    config = ServiceConfig(
        state=state, port=0, tmux_sockets=(str(tmp_path / "no-tmux-server"),),
        poll_interval=0.1, workspace_roots=(str(tmp_path),),
        codex_bin=str(tmp_path / "not-installed"), claude_bin=str(client.binary()),
        claude_config_dir=str(files.home / ".claude"), claude_env=tuple(files.env.items()),
        registry=registry,
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        endpoint = await nursery.start(
            lambda task_status: run_service(config, task_status=task_status)
        )
        yield Served(endpoint, state, tokens), files.workdir
        nursery.cancel_scope.cancel()


def _send(work: Path, text: str, n: int) -> dict[str, Any]:
    return {
        "scope": {"task": "qualified", "role": "executor"},
        "backend": "claude_headless",
        "cwd": str(work),
        "request": text,
        "client_request_id": f"qualified-{n}",
    }


async def _done(ctl: Controller, params: dict[str, Any]) -> dict[str, Any]:
    sent = await ctl.call("send", params)
    event = await outcome(ctl, sent["turn_id"], timeout=90)
    assert event["kind"] == "done", event
    status = await ctl.call("status", {"turn_id": sent["turn_id"]})
    turn: dict[str, Any] = status["turn"]
    return turn


@pytest.mark.lab
@pytest.mark.long
async def test_a_pinned_claude_taken_as_new_is_qualified_then_runs_headless(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await ensure_installed(NEW)
    state = StateDir(tmp_path / "akk")
    # No deadline here: a thread is not cancelled, so one would only be read once the
    # qualification ended. It bounds itself (each plan run 120 s, `trial.JOB_TIMEOUT_S`);
    # it took 196 s alone (docs/qualify.md) and 1,073 s in CI's loaded lab.
    status = await trio.to_thread.run_sync(_qualify, state, NEW.binary())
    (result,) = json.loads(capsys.readouterr().out.splitlines()[-1])["results"]
    report = result["report"]
    # All a refusal says of each screen (how it read, its rows), to tell a cause from CI's log.
    differing = report["differing"]
    assert (status, result["state"]) == (0, "qualified"), (report["problems"], differing)
    assert report["base_profile"] == "claude-code@2.1.328"
    assert report["binary_sha256"] == sha256_file(NEW.binary())
    assert report["headless"]["proven"] is True, report["headless"]
    assert report["headless"]["checks"] == list(HEADLESS_CHECKS)
    assert report["headless"]["sandboxed"] is True
    phases = {phase["name"]: phase["seconds"] for phase in report["phases"]}
    assert list(phases) == ["probe", "evidence", "headless", "capture", "classify"]
    print(f"qualify {NEW.name} as new: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))

    model = ModelServer(SCENARIO)
    with trio.fail_after(180):
        async with trio.open_nursery() as nursery:
            await nursery.start(model.serve)
            async with (
                _serving(NEW, tmp_path, model, AS_NEW) as (served, work),
                connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
            ):
                turn = await _done(ctl, _send(work, ECHO_TASK, 1))
                assert turn["final_message"] == ECHO_REPLY, turn
                asked = [r for r in model.main_requests() if ECHO_TASK in r.newest_input]
                assert len(asked) == 1, model.summary()  # the task reached the model once

                assert await trio.to_thread.run_sync(_revoke, state) == 0
                with pytest.raises(AkkError) as refused:
                    await ctl.call("send", _send(work, "lab: after the revoke", 2))
                said = refused.value.message
                assert refused.value.reason == "unsupported_version", said
                assert f"akk qualify claude --binary {NEW.binary()}" in said, said
                assert "nothing was started" in said
            nursery.cancel_scope.cancel()
    turns = [r.newest_input.strip() for r in model.main_requests()]
    assert turns == [ECHO_TASK], model.summary()
