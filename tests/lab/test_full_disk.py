"""A full disk under `akk serve`: refused sends with zero keys, reads and recorded events served,
and writing again by itself once space returns.

The state directory lives on a small tmpfs the test mounts (and always
unmounts) and fills with a filler file, as a user's small state filesystem
fills up. One pinned Claude (the fastest to send) is enough: nothing here
depends on the agent beyond a real pane and a real send.
"""

from __future__ import annotations

import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.actors.destination import OutboxPolicy
from akk.client import AkkError, Controller, connect
from akk.qualify.launcher import LabSession
from akk.qualify.scenarios import ECHO_TASK, SLOW_SIGNAL, SLOW_TASK
from akk.store.database import open_reader
from akk.store.location import StateDir
from tests.lab.conftest import lab_params
from tests.small_fs import fill, small_filesystem
from tools.lab.akk_runner import OUTCOMES, idle_terminal, outcome, serving

FIRST_TASK = "lab: a task done before the disk fills"


def _turn_state(state: StateDir, turn_id: str) -> str | None:
    reader = open_reader(state.store_path)
    try:
        row = reader.execute("SELECT state FROM turns WHERE turn_id = ?", (turn_id,)).fetchone()
    finally:
        reader.close()
    return None if row is None else str(row[0])


async def _settled_unread(state: StateDir, turn_id: str) -> None:
    """Wait until ``turn_id``'s outcome is recorded (its controller is not connected)."""
    while _turn_state(state, turn_id) not in OUTCOMES:
        await trio.sleep(0.05)


async def _outcome_unacked(ctl: Controller, turn_id: str) -> dict[str, Any]:
    """The outcome event of ``turn_id``, not acked (the store may not take an ack)."""
    async with aclosing(ctl.events()) as events:
        async for event in events:
            if event.get("turn_id") == turn_id and event["kind"] in OUTCOMES:
                return event
    raise AssertionError("the connection closed before the outcome")


async def _send(ctl: Controller, terminal_id: str, text: str, request_id: str) -> dict[str, Any]:
    params = {"terminal_id": terminal_id, "request": text, "client_request_id": request_id}
    result: dict[str, Any] = await ctl.call("send", params)
    return result


@pytest.mark.parametrize("lab", lab_params("slow", agents=("claude",))[:1], indirect=True)
async def test_a_full_disk_refuses_sends_serves_reads_and_recovers_by_itself(
    lab: LabSession, tmp_path: Path
) -> None:
    with small_filesystem(tmp_path / "fs") as fs:
        async with serving(lab, fs, "ctl", "late") as served:
            url, tokens, state, keys = (
                served.endpoint.url, served.tokens, served.state, served.keys
            )  # fmt: skip
            assert keys is not None
            with trio.fail_after(60):
                # An outcome recorded before the fill, for a controller that then went away.
                async with connect(url, tokens["late"]) as late:
                    terminal_id = (await idle_terminal(late))["terminal_id"]
                    first = (await _send(late, terminal_id, FIRST_TASK, "first"))["turn_id"]
                await _settled_unread(state, first)
            async with connect(url, tokens["ctl"]) as ctl:
                with trio.fail_after(30):
                    await idle_terminal(ctl)
                filler = fill(fs)
                # 30 s for the calls, and one lease (30 s) more in case the outcome reached the
                # first connection of "late" before it closed: hello cannot release that lease
                # on a full disk, so the event comes back when the lease runs out.
                with trio.fail_after(30 + OutboxPolicy().lease_seconds):
                    keys_before = len(keys.keys())
                    with pytest.raises(AkkError) as refused:
                        await _send(ctl, terminal_id, ECHO_TASK, "while-full")
                    # Refused before any key, and saying why and what to do.
                    assert refused.value.reason == "internal", refused.value
                    message = str(refused.value)
                    assert f"the store at {state.store_path} cannot write: disk full" in message
                    assert "disk full (SQLITE_FULL), so nothing was sent; free space" in message
                    assert "may have been typed" not in message
                    assert keys.keys()[keys_before:] == []
                    assert lab.server.count_inputs_containing(ECHO_TASK) == 0
                    assert ECHO_TASK not in await lab.text()
                    # Reads are served: list, a terminal's status, a recorded Turn's status.
                    listed = await ctl.call("list")
                    assert [row["terminal_id"] for row in listed["terminals"]] == [terminal_id]
                    status = await ctl.call("status", {"terminal_id": terminal_id})
                    assert status["terminal"]["activity_state"] == "idle", status
                    # The outcome recorded before the fill reaches its controller now.
                    async with connect(url, tokens["late"]) as late:
                        done = await _outcome_unacked(late, first)
                        assert done["kind"] == "done", done
                        assert (await late.call("status", {"turn_id": first}))["turn"][
                            "state"
                        ] == "done"
                # Space returns: the next send just works, no restart, and reaches the model once.
                filler.unlink()
                started = time.monotonic()
                with trio.fail_after(60):
                    sent = await _send(ctl, terminal_id, ECHO_TASK, "after")
                    recovered = time.monotonic() - started
                    print(f"send accepted {recovered:.2f} s after the filler was removed")
                    assert (await outcome(ctl, sent["turn_id"]))["kind"] == "done"
                    assert lab.server.count_inputs_containing(ECHO_TASK) == 1
                    # The event delivered while full is acked now (or redelivered, same id).
                    async with connect(url, tokens["late"]) as late:
                        acked = await late.ack(done["event_id"])
                        assert acked["state"] == "accepted", acked
                # A Turn that finishes while the disk is full is recorded and delivered after.
                with trio.fail_after(60):
                    await idle_terminal(ctl)
                    slow = (await _send(ctl, terminal_id, SLOW_TASK, "slow"))["turn_id"]
                    await lab.server.wait_for_request(
                        lambda r: SLOW_TASK in r.newest_input, timeout=30
                    )
                    filler = fill(fs)
                    lab.server.signal(SLOW_SIGNAL)
                    await lab.server.wait_for_outcome(len(lab.server.requests) - 1, timeout=30)
                    await lab.wait_idle(timeout=30)
                    assert _turn_state(state, slow) not in OUTCOMES  # it could not be written
                    filler.unlink()
                    assert (await outcome(ctl, slow))["kind"] == "done"
