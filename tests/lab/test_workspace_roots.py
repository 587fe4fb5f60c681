"""Lab: workspace roots hold against the real Codex app-server and a real pane.

A backend ``cwd`` outside the caller's roots (``/``, ``/etc``, a symlink out,
a directory under another credential's root) is refused ``invalid_params``:
the model server sees nothing and no app-server (so no thread) is started. A
credential narrowed to roots neither sees nor reaches a pane outside them.
One pinned version each: the check runs before any client is involved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import AkkError, Controller, connect
from akk.qualify.launcher import LabSession, run_processes
from akk.qualify.model_server import ModelServer
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK, SCENARIOS
from tests.lab.conftest import LabSpec, ensure_installed
from tools.lab import clients
from tools.lab.akk_runner import idle_terminal, outcome, serving, serving_backend

CODEX = clients.get("codex", "0.171.0")


async def _refused(ctl: Controller, method: str, params: dict[str, Any], reason: str) -> str:
    with pytest.raises(AkkError) as refused:
        await ctl.call(method, params)
    assert refused.value.reason == reason, refused.value
    return refused.value.message


def _scope_send(cwd: str, text: str) -> dict[str, Any]:
    return {
        "scope": {"task": "roots", "role": "coder"}, "backend": "codex_app_server", "cwd": cwd,
        "request": text, "client_request_id": text,
    }  # fmt: skip


@pytest.mark.lab
async def test_a_backend_cwd_outside_the_roots_starts_nothing(tmp_path: Path) -> None:
    await ensure_installed(CODEX)
    model = ModelServer(SCENARIOS["echo"])
    with trio.fail_after(150):
        async with trio.open_nursery() as nursery:
            await nursery.start(model.serve)
            async with serving_backend(CODEX, tmp_path, model, "ctl") as (served, files):
                run = files.workdir.parent
                neighbour = tmp_path / "neighbour"
                neighbour.mkdir()
                (files.workdir / "escape").symlink_to(tmp_path.parent)  # out of tmp_path
                async with connect(served.endpoint.url, served.state.token()) as operator:
                    minted = {
                        name: await operator.call(
                            "token_create", {"controller_id": name, "workspace_roots": [root]}
                        )
                        for name, root in (("narrow", str(files.workdir)),
                                           ("neighbour", str(neighbour)))
                    }  # fmt: skip
                assert minted["narrow"]["workspace_roots"] == [str(files.workdir)]
                async with (
                    connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
                    connect(served.endpoint.url, minted["narrow"]["token"]) as narrow,
                ):
                    assert ctl.server["capabilities"]["workspace_roots"] == [str(tmp_path)]
                    assert ctl.server["capabilities"]["pane_roots"] is None
                    assert narrow.server["capabilities"]["workspace_roots"] == [str(files.workdir)]
                    probes = [
                        (ctl, "/", "lab: root"),
                        (ctl, "/etc", "lab: etc"),
                        (ctl, f"{files.workdir}/escape", "lab: symlink out"),
                        (ctl, f"{files.workdir}/../../..", "lab: dots out"),
                        (narrow, str(neighbour), "lab: neighbour's root"),
                    ]
                    for caller, cwd, text in probes:
                        message = await _refused(
                            caller, "send", _scope_send(cwd, text), "invalid_params"
                        )
                        assert "outside the workspace roots" in message, message
                        assert "nothing was started" in message
                    nul = await _refused(
                        ctl, "send", _scope_send(f"{files.workdir}/a\x00b", "lab: nul"),
                        "invalid_params",
                    )  # fmt: skip
                    assert "NUL" in nul
                    # Nothing reached the model, no app-server ran, no session was made.
                    assert model.requests == []
                    assert run_processes(run) == []
                    assert (await ctl.call("list"))["sessions"] == []
                    # Inside the roots (narrowed ones included) a send still runs to done.
                    sent = await narrow.call("send", _scope_send(str(files.workdir), ECHO_TASK))
                    event = await outcome(narrow, sent["turn_id"], timeout=60)
                    assert event["kind"] == "done", event
                    status = await narrow.call("status", {"turn_id": sent["turn_id"]})
                    assert status["turn"]["final_message"] == ECHO_REPLY
                    session_id = sent["session_id"]
                # The same controller, its credential now narrowed elsewhere: its session's
                # stored workspace is checked too, and the thread is not resumed.
                async with connect(served.endpoint.url, served.state.token()) as operator:
                    await operator.call("token_revoke", {"controller_id": "narrow"})
                    moved = await operator.call(
                        "token_create", {"controller_id": "narrow",
                                         "workspace_roots": [str(neighbour)]},
                    )  # fmt: skip
                async with connect(served.endpoint.url, moved["token"]) as narrow:
                    resume = {"session_id": session_id, "request": "lab: resumed elsewhere",
                              "client_request_id": "moved"}  # fmt: skip
                    message = await _refused(narrow, "send", resume, "invalid_params")
                    assert f"the session's workspace {files.workdir} is outside" in message
                    assert str(neighbour) in message
                    probes.append((narrow, str(files.workdir), "lab: resumed elsewhere"))
            nursery.cancel_scope.cancel()
    assert model.count_inputs_containing(ECHO_TASK) == 1, model.summary()
    for _, _, text in probes:
        assert model.count_inputs_containing(text) == 0
    assert run_processes(run) == []


@pytest.mark.parametrize(
    "lab", [pytest.param(LabSpec(CODEX, "echo"), id=f"{CODEX.name}-echo", marks=pytest.mark.lab)],
    indirect=True,
)  # fmt: skip
async def test_a_narrowed_credential_acts_only_on_panes_under_its_roots(
    lab: LabSession, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with serving(lab, tmp_path, "ctl") as served:
        async with connect(served.endpoint.url, served.state.token()) as operator:
            row = await idle_terminal(operator)
            tokens = {
                name: (await operator.call(
                    "token_create", {"controller_id": name, "workspace_roots": [root]}
                ))["token"]
                for name, root in (("inside", str(lab.workdir)), ("outside", str(elsewhere)))
            }  # fmt: skip
            # A credential's root is refused like a server's.
            await _refused(
                operator, "token_create",
                {"controller_id": "wide", "workspace_roots": ["/etc"]}, "invalid_params",
            )  # fmt: skip
        terminal_id = row["terminal_id"]
        async with (
            connect(served.endpoint.url, tokens["outside"]) as outside,
            connect(served.endpoint.url, tokens["inside"]) as inside,
        ):
            assert outside.server["capabilities"]["pane_roots"] == [str(elsewhere)]
            assert (await outside.call("list"))["terminals"] == []
            send = {"terminal_id": terminal_id, "request": "lab: outside", "client_request_id": "o"}
            for method, params in (
                ("send", send),
                ("watch", {"terminal_id": terminal_id}),
                ("status", {"terminal_id": terminal_id}),
            ):
                message = await _refused(outside, method, params, "not_owner")
                assert str(elsewhere) in message
            # Zero keys, at the key layer (the screen may change: Claude's logo blinks).
            assert served.keys is not None and served.keys.keys() == []
            listed = (await inside.call("list"))["terminals"]
            assert [r["terminal_id"] for r in listed] == [terminal_id]
            sent = await inside.call(
                "send", {"terminal_id": terminal_id, "request": ECHO_TASK, "client_request_id": "i"}
            )
            assert (await outcome(inside, sent["turn_id"]))["kind"] == "done"
    assert lab.server.count_inputs_containing("lab: outside") == 0
    assert lab.server.count_inputs_containing(ECHO_TASK) == 1, lab.server.summary()
