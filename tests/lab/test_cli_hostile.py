"""Hostile text on the operator's terminal (issue 26): real `akk` processes against a real
`akk serve`, the text written by the lab's model (a final message, a question) and by a
controller (a scope).

Every command must exit as it would for plain text and print no control sequence: the raw
bytes carry no ESC, no C1 and no bidi control, and markup is shown as the text it is.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import connect
from akk.qualify.launcher import LabSession
from akk.qualify.model_server import ModelServer
from akk.qualify.scenarios import HOSTILE_ASK_TASK, HOSTILE_TASK, HOSTILE_TEXT, SCENARIOS
from tests.lab.conftest import ensure_installed, lab_params
from tests.test_cli import acted_on
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess, backend_child, outcome
from tools.lab.clients import Client

NEWEST_CODEX = clients.newest("codex")

MESSAGE_SHOWN = (
    r"[/] [bold]bold [link=https://example.test]link \x1b]52;c;aGk=\x07 \x1b[2J \x9b31m "
    r"\u202eevil\u202c"
)
"""HOSTILE_TEXT's first line as the operator must see it: markup literal, sequences escaped."""

CONTROLLER_SCOPE = {"task": "[/]", "role": "[bold]r", "unit": "[link=https://example.test]u"}
"""A scope a controller names: markup (the server refuses control and format characters in
names, so a scope carries no control sequence)."""

CONTROLLER_SHOWN = ("[/]", "[bold]r", "[link=https://example.test]u")

OPERATOR_SCOPE = "[bold]t:smile:/[red]r[dim]"
"""A scope the operator's own `akk send --scope` names (no `/` inside a part)."""


class Probes:
    """The CLI runs of one test, each checked; every failure is kept, then reported at once
    (so one run against an unfixed CLI lists every probe that broke)."""

    def __init__(self, akk: AkkProcess) -> None:
        self._env = {
            **{k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")},
            "AKK_STATE_DIR": str(akk.state.path),
            "COLUMNS": "250",
        }
        self.failures: list[str] = []

    async def run(self, probe: str, *args: str, code: int = 0) -> str:
        """`akk ARGS` (off the event loop); its stdout, checked, decoded."""
        argv = [sys.executable, "-m", "akk", *args]
        done = await trio.to_thread.run_sync(
            lambda: subprocess.run(argv, env=self._env, capture_output=True, timeout=60)
        )
        if done.returncode != code:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
            self.failures.append(f"{probe}: exit {done.returncode}, {tail}")
        self.check(probe + " (stderr)", done.stderr)
        return self.check(probe, done.stdout)

    async def events(
        self, probe: str, turn_id: str, kind: str, *args: str, timeout: float = 30
    ) -> str:
        """`akk events ARGS` until it prints ``turn_id``'s ``kind`` event (then stopped)."""

        def follow() -> bytes:
            proc = subprocess.Popen(
                [sys.executable, "-m", "akk", "events", *args],
                env=self._env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            lines: queue.Queue[bytes] = queue.Queue()

            def read() -> None:
                for line in proc.stdout or ():
                    lines.put(line)

            threading.Thread(target=read, daemon=True).start()
            seen: list[bytes] = []
            deadline = time.monotonic() + timeout
            try:
                while not seen or not (turn_id.encode() in seen[-1] and kind.encode() in seen[-1]):
                    seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                self.failures.append(f"{probe}: no {kind} of {turn_id} in {timeout} s: {seen}")
            finally:
                proc.terminate()
                proc.wait(10)
            return b"".join(seen)

        return self.check(probe, await trio.to_thread.run_sync(follow))

    def check(self, probe: str, raw: bytes) -> str:
        """``raw`` decoded; a failure kept if it is not UTF-8 or carries what a terminal acts on."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.failures.append(f"{probe}: not UTF-8 ({exc})")
            text = raw.decode("utf-8", errors="replace")
        bad = acted_on(text)
        if bad:
            self.failures.append(f"{probe}: printed {', '.join(bad)}")
        return text

    def expect(self, probe: str, shown: str, *wanted: str) -> None:
        for piece in wanted:
            if piece not in shown:
                self.failures.append(f"{probe}: {piece!r} is not shown")


@pytest.mark.lab
@pytest.mark.parametrize("client", [NEWEST_CODEX], ids=lambda client: client.name)
async def test_backend_scopes_and_final_messages_are_shown_escaped(
    client: Client, tmp_path: Path
) -> None:
    await ensure_installed(client)
    model = ModelServer(SCENARIOS["hostile_text"])
    async with backend_child(client, tmp_path, model) as lab:
        akk, workdir = lab.akk, str(lab.files.workdir)
        probes = Probes(akk)
        with trio.fail_after(150):
            await trio.to_thread.run_sync(akk.start, None, *lab.serve_args)
            async with connect(akk.url, akk.tokens["ctl"]) as ctl:
                sent = await ctl.call("send", {
                    "scope": CONTROLLER_SCOPE, "backend": "codex_app_server", "cwd": workdir,
                    "request": HOSTILE_TASK, "client_request_id": "hostile-1",
                })  # fmt: skip
                await outcome(ctl, sent["turn_id"])
            scope = ("--scope", OPERATOR_SCOPE, "--cwd", workdir)

            waited = await probes.run("send --wait", "send", *scope, "--wait", HOSTILE_TASK)
            probes.expect("send --wait", waited, "message:  " + MESSAGE_SHOWN)
            # The message's second line is indented: it cannot pass for a line of the record.
            probes.expect("send --wait", waited, "\n          state:    done")
            turn_id = _turn_id(probes, waited)
            shown = await probes.run("status", "status", turn_id)
            probes.expect("status", shown, "message:  " + MESSAGE_SHOWN)
            raw = json.loads(await probes.run("status --json", "status", turn_id, "--json"))
            assert raw["turn"]["final_message"] == HOSTILE_TEXT, raw["turn"]

            sessions = await probes.run("sessions", "sessions")
            probes.expect("sessions", sessions, *CONTROLLER_SHOWN, "[bold]t:smile:", "[red]r[dim]")
            listed = json.loads(await probes.run("sessions --json", "sessions", "--json"))
            scopes = [row["scope"] for row in listed["sessions"]]
            assert CONTROLLER_SCOPE in scopes, scopes
            probes.expect("list", await probes.run("list", "list"), sent["turn_id"], turn_id)
            await probes.run("list --json", "list", "--json")

            for probe, options in (("events", ()), ("events --json", ("--json",))):
                later = (await probes.run(probe, "send", *scope, HOSTILE_TASK)).strip()
                printed = await probes.events(probe, later, "done", *options)
                if not options:
                    probes.expect(probe, printed, MESSAGE_SHOWN)
    assert not probes.failures, "\n".join(probes.failures)
    # The controller's and the operator's three sends, each once.
    assert model.count_inputs_containing(HOSTILE_TASK) == 4, model.summary()


@pytest.mark.parametrize("lab", lab_params("hostile_text", agents=("claude",))[-1:], indirect=True)
async def test_pane_prompts_and_final_messages_are_shown_escaped(
    lab: LabSession, tmp_path: Path
) -> None:
    akk = AkkProcess(lab, tmp_path)
    probes = Probes(akk)
    try:
        with trio.fail_after(120):
            await trio.to_thread.run_sync(akk.start)
            terminal = await _terminal(probes, lab, lambda row: row["activity_state"] == "idle")

            waited = await probes.run("send --wait", "send", lab.pane, HOSTILE_TASK, "--wait")
            probes.expect("send --wait", waited, "message:  " + MESSAGE_SHOWN)
            turn_id = _turn_id(probes, waited)
            probes.expect("status", await probes.run("status", "status", turn_id), MESSAGE_SHOWN)

            asked = (await probes.run("send", "send", lab.pane, HOSTILE_ASK_TASK)).strip()
            terminal = await _terminal(probes, lab, lambda row: row["asks"] is not None)
            assert "[/]" in terminal["asks"], terminal  # what the pane drew of the question
            listed = await probes.run("list", "list")
            probes.expect("list", listed, "[/]", "[bold]bold", asked)
            printed = await probes.events("events", asked, "interaction_required")
            await probes.run("status (asking)", "status", asked)
    finally:
        await trio.to_thread.run_sync(akk.stop)
    assert not probes.failures, "\n".join(probes.failures)
    assert "[/]" in printed, printed
    assert lab.server.count_inputs_containing(HOSTILE_TASK) == 1
    assert lab.server.count_inputs_containing(HOSTILE_ASK_TASK) == 1


async def _terminal(
    probes: Probes, lab: LabSession, ready: Callable[[dict[str, Any]], bool], timeout: float = 30
) -> dict[str, Any]:
    """The lab pane's `akk list --json` row once ``ready(row)`` holds."""
    rows: list[dict[str, Any]] = []
    try:
        with trio.fail_after(timeout):
            while True:
                rows = json.loads(await probes.run("list --json", "list", "--json"))["terminals"]
                if rows and ready(rows[0]):
                    return rows[0]
                await trio.sleep(0.1)
    except trio.TooSlowError:
        raise AssertionError(f"no such row in {timeout} s: {rows}\n{await lab.text()}") from None


def _turn_id(probes: Probes, record: str) -> str:
    """The turn_id on the first line of a printed record ("" and a failure if none)."""
    found = re.search(r"\bturn_[0-9a-f]+", record)
    if found is None:
        probes.failures.append(f"no turn_id in {record!r}")
        return ""
    return found.group()
