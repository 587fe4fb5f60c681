"""Lab: Watches of a person's task by the id its agent gave it, read from the agent's own file.

A person runs the agent, never AKK: a Codex TUI in a lab pane (the lab types the
task, `lab.submit`), or a headless ``claude -p --session-id ID`` the test starts
as that person would. A controller watches the running task by
`watch {thread_id, codex_home}` or `watch {claude_session_id, claude_config_dir}`.
The watch reads the rollout or transcript alone: it follows the task to its
outcome with the final message, and sends nothing (the model server, the oracle,
receives the person's task exactly once, and the watch records no dispatch).
An id that is not the person's task is refused (`not_found`), never bound to
another thread; `unwatch` withdraws the outcome event not yet delivered; a
SIGKILL of AKK leaves the same record to `recover`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import AkkError, Controller, connect
from akk.evidence import codex
from akk.qualify.launcher import LabSession
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import RunFiles
from akk.qualify.scenarios import SCENARIOS, SLOW_REPLY, SLOW_SIGNAL, SLOW_TASK
from akk.store.database import open_reader
from tests.lab.conftest import ensure_installed, lab_params
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess, outcome, serving, serving_backend, two_controllers
from tools.lab.clients import Client

NEWEST_CODEX = lab_params("slow", agents=("codex",))[-1:]
CLAUDE_TUI_OLDEST_AND_NEWEST = [
    lab_params("slow", agents=("claude",))[0],
    lab_params("slow", agents=("claude",))[-1],
]
CLAUDE = [client for client in clients.PINNED if client.agent == "claude"]


LATENCY = "watch_reply_to_done_seconds"
"""Recorded per test: the model's final reply -> the watch's done at the controller."""


def _reply_to_done(model: ModelServer) -> float:
    """Seconds from the end of the task's reply at the model server to now (the event's arrival)."""
    (asked,) = [r for r in model.main_requests() if SLOW_TASK in r.newest_input]
    finished = model.finished_at[asked.index]
    seconds = time.monotonic() - finished
    print(f"watch: final reply -> done {seconds:.3f} s")
    return seconds


async def refused(ctl: Controller, method: str, params: dict[str, Any]) -> AkkError:
    with pytest.raises(AkkError) as raised:
        await ctl.call(method, params)
    assert raised.value.message  # says what to do next
    return raised.value


async def codex_thread(lab: LabSession) -> str:
    """The person's thread id, as Codex's rollout names it, once it accepted the task."""

    def has_task(records: list[object]) -> bool:
        return any(isinstance(r, dict) and codex.prompt_text(r) == SLOW_TASK for r in records)

    await lab.wait_for_transcript(has_task, 30)
    (rollout,) = lab.transcript_files()
    meta = json.loads(rollout.read_text().splitlines()[0])
    assert meta["type"] == "session_meta"
    thread_id: str = meta["payload"]["id"]
    return thread_id


async def person_is_idle(ctl: Controller) -> None:
    """Until AKK sees the lab pane's agent idle (the person may type)."""
    with trio.fail_after(30):
        while not (rows := (await ctl.call("list"))["terminals"]) or (
            rows[0]["activity_state"] != "idle"
        ):
            await trio.sleep(0.05)


async def person_starts_codex_task(lab: LabSession, ctl: Controller) -> str:
    """The person types the slow task into the Codex TUI; its thread id once it runs."""
    await person_is_idle(ctl)
    await lab.submit(SLOW_TASK)
    return await codex_thread(lab)


@pytest.mark.parametrize("lab", lab_params("slow", agents=("codex",)), indirect=True)
async def test_a_persons_codex_thread_is_watched_by_its_id_to_done(
    lab: LabSession, tmp_path: Path, record_property: Any
) -> None:
    assert lab.codex_home is not None
    home = str(lab.codex_home)
    async with two_controllers(lab, tmp_path) as (_, ctl, other):
        thread_id = await person_starts_codex_task(lab, ctl)
        # Not the person's thread: refused, never bound to the one thread there is.
        stranger = {"thread_id": str(uuid.uuid4()), "codex_home": home}
        assert (await refused(ctl, "watch", stranger)).reason == "not_found"
        elsewhere = {"thread_id": thread_id, "codex_home": str(tmp_path)}
        assert (await refused(ctl, "watch", elsewhere)).reason == "not_found"
        malformed = {"thread_id": "../" + thread_id, "codex_home": home}
        assert (await refused(ctl, "watch", malformed)).reason == "invalid_params"
        params = {"thread_id": thread_id, "codex_home": home}
        watched = await ctl.call("watch", params)
        watch_id = watched["watch_id"]
        assert (watched["backend"], watched["terminal_id"]) == ("codex_thread", None)
        assert (watched["session_id"], watched["state"]) == (thread_id, "running")
        assert (watched["task_kind"], watched["management_state"]) == ("watch", "none")
        # The same watch again is the same record; another controller's is refused.
        assert (await ctl.call("watch", params))["watch_id"] == watch_id
        assert (await refused(other, "watch", params)).reason == "conflict"
        assert (await refused(other, "status", {"watch_id": watch_id})).reason == "not_owner"
        # A Watch has no management: nothing that would send input applies.
        for method, call in (
            ("cancel", {"turn_id": watch_id}),
            ("respond", {"turn_id": watch_id, "request": "more"}),
            ("close", {"turn_id": watch_id}),
        ):
            assert (await refused(ctl, method, call)).reason == "invalid_params", method
        lab.server.signal(SLOW_SIGNAL)
        event = await outcome(ctl, watch_id)
        record_property(LATENCY, _reply_to_done(lab.server))
        status = await ctl.call("status", {"watch_id": watch_id})
    assert (event["kind"], event["turn_id"], event["watch_id"]) == ("done", None, watch_id)
    assert event["outcome"]["final_message"] == SLOW_REPLY
    watch = status["watch"]
    assert (watch["state"], watch["evidence"]["status"]) == ("done", "bound")
    assert status["dispatches"] == [] and status["interaction"] is None  # AKK typed nothing
    # The person's message reached the model once: it came from the pane, not from AKK.
    assert lab.server.count_inputs_containing(SLOW_TASK) == 1


@pytest.mark.parametrize("lab", NEWEST_CODEX, indirect=True)
async def test_unwatch_withdraws_the_undelivered_outcome_of_a_thread_watch(
    lab: LabSession, tmp_path: Path
) -> None:
    assert lab.codex_home is not None
    async with serving(lab, tmp_path, "ctl") as served:
        url = served.endpoint.url
        async with connect(url, served.tokens["ctl"]) as ctl:
            thread_id = await person_starts_codex_task(lab, ctl)
            params = {"thread_id": thread_id, "codex_home": str(lab.codex_home)}
            watch_id = (await ctl.call("watch", params))["watch_id"]
        # The controller is away when the task ends: its outcome event waits, undelivered.
        lab.server.signal(SLOW_SIGNAL)
        async with connect(url, served.state.token()) as operator:
            with trio.fail_after(30):
                while (await operator.call("status", {"watch_id": watch_id}))["watch"][
                    "state"
                ] != "done":
                    await trio.sleep(0.1)
            stopped = await operator.call("unwatch", {"watch_id": watch_id})
            assert (stopped["observation_state"], stopped["withdrawn"]) == ("stopped", 1)
            assert (await operator.call("unwatch", {"watch_id": watch_id}))["withdrawn"] == 0
        # The withdrawn event is never delivered: the store holds it as withdrawn, none pending.
        conn = open_reader(served.state.store_path)
        try:
            states = conn.execute(
                "SELECT kind, state FROM notifications WHERE turn_id = ?", (watch_id,)
            ).fetchall()
        finally:
            conn.close()
        assert states == [("done", "withdrawn")]
        async with connect(url, served.tokens["ctl"]) as ctl:
            status = await ctl.call("status", {"watch_id": watch_id})
    assert status["watch"]["observation_state"] == "stopped"
    assert lab.server.count_inputs_containing(SLOW_TASK) == 1


@pytest.mark.parametrize("lab", NEWEST_CODEX, indirect=True)
async def test_a_thread_watch_survives_a_sigkill_of_akk_and_recover_reads_the_same_file(
    lab: LabSession, tmp_path: Path
) -> None:
    assert lab.codex_home is not None
    akk = AkkProcess(lab, tmp_path)
    try:
        url = akk.start()
        async with connect(url, akk.tokens["ctl"]) as ctl:
            thread_id = await person_starts_codex_task(lab, ctl)
            params = {"thread_id": thread_id, "codex_home": str(lab.codex_home)}
            watch_id = (await ctl.call("watch", params))["watch_id"]
        akk.kill()
        url = akk.start()
        async with connect(url, akk.tokens["ctl"]) as ctl:
            recovered = await ctl.call("recover", {"watch_id": watch_id})
            assert (recovered["watch_id"], recovered["state"]) == (watch_id, "running")
            assert recovered["supervised"] is True
            assert recovered["verification"] == {
                "file": "present", "evidence": "bound", "task": "verified",
            }  # fmt: skip
            lab.server.signal(SLOW_SIGNAL)
            event = await outcome(ctl, watch_id)
    finally:
        akk.stop()
    assert (event["kind"], event["watch_id"], event["round"]) == ("done", watch_id, 1)
    assert event["outcome"]["final_message"] == SLOW_REPLY


@asynccontextmanager
async def person_runs_claude(
    client: Client, files: RunFiles, session_id: str, text: str
) -> AsyncIterator[trio.Process]:
    """A person's headless ``claude -p`` with their chosen session id, in the run's workdir."""
    argv = [
        str(client.binary()), "-p", "--session-id", session_id,
        "--permission-mode", "default", text,
    ]  # fmt: skip
    run = partial(
        trio.run_process, argv, cwd=str(files.workdir), env=files.env, capture_stdout=True,
        capture_stderr=True, check=False,
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(run)
        try:
            yield process
        finally:
            if process.returncode is None:
                process.kill()


@pytest.mark.lab
@pytest.mark.parametrize("client", CLAUDE, ids=lambda client: client.name)
async def test_a_persons_headless_claude_session_is_watched_by_its_id_to_done(
    client: Client, tmp_path: Path, record_property: Any
) -> None:
    await ensure_installed(client)
    model = ModelServer(SCENARIOS["slow"])
    session_id = str(uuid.uuid4())
    with trio.fail_after(180):
        async with trio.open_nursery() as nursery:
            await nursery.start(model.serve)
            async with (
                serving_backend(client, tmp_path, model, "ctl", "other") as (served, files),
                connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
                connect(served.endpoint.url, served.tokens["other"]) as other,
                person_runs_claude(client, files, session_id, SLOW_TASK) as person,
            ):
                config = str(files.home / ".claude")
                await model.wait_for_request(
                    lambda r: not r.auxiliary and SLOW_TASK in r.newest_input, timeout=60
                )
                params = {"claude_session_id": session_id, "claude_config_dir": config}
                with trio.fail_after(30):  # the transcript is written a moment after the request
                    while True:
                        try:
                            watched = await ctl.call("watch", params)
                            break
                        except AkkError as exc:
                            assert exc.reason == "not_found", exc
                            await trio.sleep(0.1)
                watch_id = watched["watch_id"]
                assert (watched["backend"], watched["session_id"]) == (
                    "claude_session",
                    session_id,
                )
                assert (await refused(other, "watch", params)).reason == "conflict"
                stranger = {"claude_session_id": str(uuid.uuid4()), "claude_config_dir": config}
                assert (await refused(ctl, "watch", stranger)).reason == "not_found"
                model.signal(SLOW_SIGNAL)
                event = await outcome(ctl, watch_id)
                record_property(LATENCY, _reply_to_done(model))
                status = await ctl.call("status", {"watch_id": watch_id})
                with trio.fail_after(30):
                    while person.returncode is None:
                        await trio.sleep(0.05)
                # The session's task ended: a new watch of it is refused, never the old outcome.
                assert (await refused(ctl, "watch", params)).reason == "not_found"
            nursery.cancel_scope.cancel()
    assert person.returncode == 0
    assert (event["kind"], event["watch_id"]) == ("done", watch_id)
    assert event["outcome"]["final_message"] == SLOW_REPLY
    assert status["watch"]["usage"]["usage_status"] == "complete"
    assert status["dispatches"] == []
    assert model.count_inputs_containing(SLOW_TASK) == 1


@pytest.mark.parametrize("lab", CLAUDE_TUI_OLDEST_AND_NEWEST, indirect=True)
async def test_a_persons_claude_tui_session_is_watched_by_its_id_to_done(
    lab: LabSession, tmp_path: Path
) -> None:
    """The TUI ends a round with ``turn_duration``; the same watch reads it by session id."""
    config = str(lab.home / ".claude")
    async with (
        serving(lab, tmp_path, "ctl") as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        await person_is_idle(ctl)
        await lab.submit(SLOW_TASK)
        await lab.wait_for_transcript(lambda records: SLOW_TASK in json.dumps(records), 30)
        (transcript,) = lab.transcript_files()
        params = {"claude_session_id": transcript.stem, "claude_config_dir": config}
        watched = await ctl.call("watch", params)
        assert (watched["backend"], watched["state"]) == ("claude_session", "running")
        lab.server.signal(SLOW_SIGNAL)
        event = await outcome(ctl, watched["watch_id"])
    assert (event["kind"], event["outcome"]["final_message"]) == ("done", SLOW_REPLY)
    assert lab.server.count_inputs_containing(SLOW_TASK) == 1


@pytest.mark.parametrize("lab", NEWEST_CODEX, indirect=True)
async def test_renew_of_an_unwatched_thread_watch_records_what_happened_meanwhile(
    lab: LabSession, tmp_path: Path
) -> None:
    assert lab.codex_home is not None
    async with (
        serving(lab, tmp_path, "ctl") as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        thread_id = await person_starts_codex_task(lab, ctl)
        params = {"thread_id": thread_id, "codex_home": str(lab.codex_home)}
        watch_id = (await ctl.call("watch", params))["watch_id"]
        stopped = await ctl.call("unwatch", {"watch_id": watch_id})
        assert (stopped["observation_state"], stopped["withdrawn"]) == ("stopped", 0)
        assert (await refused(ctl, "recover", {"watch_id": watch_id})).reason == "closed"
        lab.server.signal(SLOW_SIGNAL)

        def ended(records: list[object]) -> bool:
            return '"task_complete"' in json.dumps(records[-3:])

        await lab.wait_for_transcript(ended, 30)
        # The task ended while nobody watched: renewing reads the file and records it at once.
        renewed = await ctl.call("renew", {"watch_id": watch_id})
        assert (renewed["renewed"], renewed["state"], renewed["round"]) == (True, "done", 2)
        event = await outcome(ctl, watch_id)
    # The first outcome event is the new generation's: the unwatched one wrote none.
    assert (event["kind"], event["round"]) == ("done", 2)
    assert event["outcome"]["final_message"] == SLOW_REPLY
