"""Lab: AKK's app-server client against the real `codex app-server` of every pinned Codex.

The lab's CODEX_HOME and model server (no pane, no tmux): initialize, thread/start,
turn/start with the echo task, then turn/completed. Every message both ways must
match that version's committed schema; the model server must see the task exactly
once; nothing of the run may be left running.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.backends.codex_app_server import schema
from akk.backends.codex_app_server.rpc import AppServer, open_app_server
from akk.cli import doctor
from akk.discovery.process import start_ticks
from akk.qualify.launcher import run_processes
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import prepare
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK, SCENARIOS
from tests.lab.conftest import ensure_installed
from tools.lab import clients, schemas
from tools.lab.clients import Client

CODEX = [client for client in clients.PINNED if client.agent == "codex"]


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_echo_turn_over_the_app_server_matches_the_schema(
    client: Client, request: pytest.FixtureRequest
) -> None:
    await ensure_installed(client)
    protocol = schema.load(client.version)
    seen: list[schema.Message] = []
    invalid: list[str] = []

    def check(message: schema.Message) -> None:
        seen.append(message)
        try:
            protocol.check(message)
        except schema.MessageInvalid as exc:
            invalid.append(str(exc))

    server = ModelServer(SCENARIOS["echo"])
    root = Path(tempfile.mkdtemp(prefix="akk-lab-"))
    try:
        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)
                files = prepare(client, root, server.port)
                assert files.codex_home is not None
                async with open_app_server(
                    client.binary(),
                    codex_home=files.codex_home,
                    cwd=files.workdir,
                    env=files.env,
                    tap=check,
                ) as app:
                    pid, started_rss = app.pid, app.rss_bytes()
                    completed = await _echo_turn(app, files.workdir)
                    turn_rss = app.rss_bytes()
                ended = await app.aclose()
                nursery.cancel_scope.cancel()
        assert invalid == []
        assert completed["turn"]["status"] == "completed", completed
        texts = [i.get("text") for i in completed["turn"].get("items", [])]
        assert ECHO_REPLY in texts, texts
        assert server.count_inputs_containing(ECHO_TASK) == 1, server.summary()
        assert (ended.how, ended.returncode, ended.reaped) == ("exited", 0, True), ended
        assert start_ticks(pid) is None
        assert run_processes(root) == []
        kinds = {(m.sender, m.kind) for m in seen}
        assert kinds == {
            ("client", "request"),
            ("client", "notification"),
            ("server", "result"),
            ("server", "notification"),
        }
        assert app.initialize_seconds is not None
        request.node.user_properties.append(("app_server_initialize_s", app.initialize_seconds))
        print(
            f"app-server {client.name}: initialize {app.initialize_seconds * 1000:.0f} ms, "
            f"RSS {_mib(started_rss)} MiB after initialize, {_mib(turn_rss)} MiB after a turn; "
            f"close {ended.seconds * 1000:.0f} ms ({ended.how}); {len(seen)} messages checked"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _echo_turn(app: AppServer, workdir: Path) -> dict[str, Any]:
    started = await app.request("thread/start", {"cwd": str(workdir)}, timeout=30)
    thread_id = started["thread"]["id"]
    turn = await app.request(
        "turn/start",
        {"threadId": thread_id, "input": [{"type": "text", "text": ECHO_TASK}]},
        timeout=30,
    )
    async for note in app.notifications:
        if note.method == "turn/completed" and note.params["turn"]["id"] == turn["turn"]["id"]:
            completed: dict[str, Any] = note.params
            return completed
    raise AssertionError(f"the connection closed before turn/completed: {app.closed_reason}")


def _mib(size: int | None) -> str:
    return "?" if size is None else f"{size / (1 << 20):.0f}"


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_the_committed_schema_is_what_the_binary_generates(client: Client) -> None:
    await ensure_installed(client)
    generated = await trio.to_thread.run_sync(schemas.generated, client)
    assert schemas.committed(client).read_bytes() == generated, (
        f"akk/backends/codex_app_server/schemas/ is stale for {client.name}: "
        "run `python -m tools.lab schemas`"
    )


@pytest.mark.lab
@pytest.mark.parametrize("client", CODEX, ids=lambda client: client.name)
async def test_doctor_initializes_the_real_app_server(client: Client, tmp_path: Path) -> None:
    await ensure_installed(client)
    files = prepare(client, tmp_path, port=9)  # initialize reaches no model server
    assert files.codex_home is not None
    options = doctor.CodexOptions(binary=str(client.binary()), home=files.codex_home)
    checks = await trio.to_thread.run_sync(doctor.codex_checks, options)
    assert [(c.name, c.ok) for c in checks] == [("codex", True), ("codex app-server", True)]
    assert f"codex-cli {client.version}" in checks[0].detail and "(pinned)" in checks[0].detail
    assert "answers initialize in" in checks[1].detail and "exited after close" in checks[1].detail
    assert run_processes(tmp_path) == []
