"""Watches of tasks a person started, against the real clients: observe, unwatch, renew, recover.

The person is the lab: it types the task into the pane (`lab.submit`), never AKK.
The model server is the oracle for that: it receives the person's message
exactly once, and a Watch's records show no dispatch. A Watch follows that one
task through the agent's own file to its outcome; it never answers, cancels or
closes anything. Deadlines are real here (seconds); the renew arithmetic is
checked against the store in tests/test_watch_store.py.
"""

from __future__ import annotations

import json
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import AkkError, Controller, connect
from akk.config import TurnSettings
from akk.qualify.launcher import LabSession
from akk.qualify.scenarios import HELD_TASK, RUN_TASK, SLOW_REPLY, SLOW_SIGNAL, SLOW_TASK
from tests.lab.conftest import lab_params, newest_of_each
from tests.lab.test_send import person_takes_back
from tools.lab.akk_runner import AkkProcess, idle_terminal, outcome, serving, two_controllers

OTHER_TASK = "lab: another task of the person's"
NEWEST_OF_EACH = newest_of_each("slow")


async def working_terminal(ctl: Controller, timeout: float = 20) -> str:
    """The lab pane's terminal_id once AKK sees its agent working on the person's task."""
    with trio.fail_after(timeout):
        while True:
            rows = (await ctl.call("list"))["terminals"]
            if rows and rows[0]["activity_state"] == "working":
                return str(rows[0]["terminal_id"])
            await trio.sleep(0.05)


def task_ended(records: list[object]) -> bool:
    """The agent's own file holds the person's task, its reply and the end of its turn."""
    text = json.dumps(records)
    ended = '"turn_duration"' in text or '"task_complete"' in text
    return SLOW_TASK in text and SLOW_REPLY in text and ended


async def person_starts_the_slow_task(lab: LabSession, ctl: Controller) -> str:
    await idle_terminal(ctl, timeout=30)
    await lab.submit(SLOW_TASK)
    return await working_terminal(ctl)


async def refused(ctl: Controller, method: str, params: dict[str, Any]) -> str:
    with pytest.raises(AkkError) as raised:
        await ctl.call(method, params)
    assert raised.value.message  # says what to do next
    return raised.value.reason


@pytest.mark.parametrize("lab", lab_params("slow"), indirect=True)
async def test_a_watch_follows_the_task_a_person_started_to_its_outcome(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (_, ctl, other):
        terminal_id = await person_starts_the_slow_task(lab, ctl)
        watched = await ctl.call("watch", {"terminal_id": terminal_id})
        watch_id = watched["watch_id"]
        assert watch_id.startswith("watch_") and watched["turn_id"] is None
        assert (watched["task_kind"], watched["management_state"]) == ("watch", "none")
        assert (watched["state"], watched["observation_state"]) == ("running", "observing")
        # The same watch again is the same record; another controller's is refused.
        again = await ctl.call("watch", {"terminal_id": terminal_id})
        assert again["watch_id"] == watch_id
        assert await refused(other, "watch", {"terminal_id": terminal_id}) == "conflict"
        assert await refused(other, "status", {"watch_id": watch_id}) == "not_owner"
        assert await refused(other, "unwatch", {"watch_id": watch_id}) == "not_owner"
        unknown = {"watch_id": "watch_" + "0" * 24}
        assert await refused(ctl, "unwatch", unknown) == "not_found"
        # A Watch has no management: nothing that would send input applies.
        for method, params in (
            ("close", {"turn_id": watch_id}),
            ("cancel", {"turn_id": watch_id}),
            ("respond", {"turn_id": watch_id, "request": "more"}),
        ):
            assert await refused(ctl, method, params) == "invalid_params", method
        listed = await ctl.call("list")
        assert [w["watch_id"] for w in listed["watches"]] == [watch_id]
        assert listed["turns"] == []
        lab.server.signal(SLOW_SIGNAL)
        event = await outcome(ctl, watch_id)
        status = await ctl.call("status", {"watch_id": watch_id})
    assert (event["kind"], event["turn_id"], event["watch_id"]) == ("done", None, watch_id)
    assert event["outcome"]["final_message"] == SLOW_REPLY
    watch = status["watch"]
    assert (watch["state"], watch["evidence"]["status"]) == ("done", "bound")
    assert status["dispatches"] == []  # AKK typed nothing
    # The person's message reached the model once: it came from the pane, not from AKK.
    assert lab.server.count_inputs_containing(SLOW_TASK) == 1


_AFTER_ESCAPE = {
    "left": "back in its composer",
    "cleared": "where a person cleared or changed it",
    "replaced": "another prompt was sent at the pane",
}


@pytest.mark.parametrize("person", list(_AFTER_ESCAPE))
@pytest.mark.parametrize("lab", lab_params("held", agents=("claude",))[-1:], indirect=True)
async def test_a_watched_task_the_person_escapes_before_any_reply_is_withdrawn(
    lab: LabSession, tmp_path: Path, person: str
) -> None:
    """The person presses Escape before Claude's first reply: Claude takes the task back into
    its composer and records no interruption. The Watch ends `cancelled`/`withdrawn` from the
    screen: the composer shows the person's task, or showed it before the person cleared it.
    When the person at once sends another task in its place, it ends from the file (a prompt
    on another branch). AKK types nothing."""
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        await idle_terminal(ctl, timeout=30)
        await lab.submit(HELD_TASK)
        terminal_id = await working_terminal(ctl)
        watch_id = (await ctl.call("watch", {"terminal_id": terminal_id}))["watch_id"]
        with trio.fail_after(30):  # the person's message bound the Watch to its file
            while (await ctl.call("status", {"watch_id": watch_id}))["watch"]["evidence"][
                "status"
            ] != "bound":
                await trio.sleep(0.05)
        await lab.send_keys("Escape")
        if person != "left":
            await person_takes_back(
                lab, ctl, HELD_TASK, OTHER_TASK if person == "replaced" else None
            )
        event = await outcome(ctl, watch_id, timeout=20)
        status = await ctl.call("status", {"watch_id": watch_id})
    assert (event["kind"], event["outcome"]["reason"]) == ("cancelled", "withdrawn"), event
    assert _AFTER_ESCAPE[person] in event["summary"], event
    assert status["dispatches"] == []  # AKK typed nothing
    assert lab.server.count_inputs_containing(HELD_TASK) == 1
    assert lab.server.count_inputs_containing(OTHER_TASK) == (1 if person == "replaced" else 0)


@pytest.mark.parametrize("lab", NEWEST_OF_EACH, indirect=True)
async def test_unwatch_stops_the_events_and_renew_records_what_happened_meanwhile(
    lab: LabSession, tmp_path: Path
) -> None:
    async with (
        serving(lab, tmp_path, "ctl") as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        terminal_id = await person_starts_the_slow_task(lab, ctl)
        watch_id = (await ctl.call("watch", {"terminal_id": terminal_id}))["watch_id"]
        stopped = await ctl.call("unwatch", {"watch_id": watch_id})
        assert (stopped["observation_state"], stopped["withdrawn"]) == ("stopped", 0)
        assert (await ctl.call("unwatch", {"watch_id": watch_id}))["withdrawn"] == 0
        assert await refused(ctl, "recover", {"watch_id": watch_id}) == "closed"
        lab.server.signal(SLOW_SIGNAL)
        await lab.wait_for_transcript(task_ended, 20)
        # The task ended while nobody watched: renewing records its real outcome at once.
        renewed = await ctl.call("renew", {"watch_id": watch_id})
        assert (renewed["renewed"], renewed["state"], renewed["round"]) == (True, "done", 2)
        assert renewed["observation_state"] == "settled"
        event = await outcome(ctl, watch_id)
    # The first outcome event is the new generation's: the unwatched one wrote none.
    assert (event["kind"], event["round"]) == ("done", 2)
    assert event["outcome"]["final_message"] == SLOW_REPLY


@pytest.mark.parametrize("lab", NEWEST_OF_EACH, indirect=True)
async def test_an_expired_watch_revives_while_its_task_runs_and_its_unsent_expiry_is_withdrawn(
    lab: LabSession, tmp_path: Path
) -> None:
    lifetime = TurnSettings(lifetime_minutes=3 / 60)  # three seconds of observation
    async with serving(lab, tmp_path, "ctl", turns=lifetime) as served:
        url = served.endpoint.url
        async with connect(url, served.tokens["ctl"]) as ctl:
            terminal_id = await person_starts_the_slow_task(lab, ctl)
            watched = await ctl.call("watch", {"terminal_id": terminal_id})
        watch_id = watched["watch_id"]
        # The controller is away: the expiry notice waits, unsent. The operator renews.
        async with connect(url, served.state.token()) as operator:
            with trio.fail_after(20):
                while (await operator.call("status", {"watch_id": watch_id}))["watch"][
                    "state"
                ] != "timed_out":
                    await trio.sleep(0.1)
            before = time.time()
            renewed = await operator.call("renew", {"watch_id": watch_id, "minutes": 5})
        assert (renewed["state"], renewed["round"], renewed["observation_state"]) == (
            "running",
            2,
            "observing",
        )
        # max(saved deadline, now + 5 min): the old one had passed, so now + 5 min.
        assert before + 300 <= renewed["deadline_at"] <= time.time() + 300
        async with connect(url, served.tokens["ctl"]) as ctl:
            lab.server.signal(SLOW_SIGNAL)
            event = await outcome(ctl, watch_id)
    # The expired generation's notice was withdrawn before it was ever sent.
    assert (event["kind"], event["round"]) == ("done", 2)


@pytest.mark.parametrize("lab", NEWEST_OF_EACH, indirect=True)
async def test_a_watch_survives_a_sigkill_of_akk_and_recover_continues_the_same_record(
    lab: LabSession, tmp_path: Path
) -> None:
    akk = AkkProcess(lab, tmp_path)
    try:
        url = akk.start()
        async with connect(url, akk.tokens["ctl"]) as ctl:
            terminal_id = await person_starts_the_slow_task(lab, ctl)
            watch_id = (await ctl.call("watch", {"terminal_id": terminal_id}))["watch_id"]
        akk.kill()
        url = akk.start()
        async with connect(url, akk.tokens["ctl"]) as ctl:
            recovered = await ctl.call("recover", {"watch_id": watch_id})
            assert (recovered["watch_id"], recovered["state"]) == (watch_id, "running")
            assert recovered["supervised"] is True
            assert recovered["verification"]["terminal"] == "present"
            assert recovered["verification"]["task"] in ("verified", "screen_only")
            lab.server.signal(SLOW_SIGNAL)
            event = await outcome(ctl, watch_id)
    finally:
        akk.stop()
    assert (event["kind"], event["watch_id"], event["round"]) == ("done", watch_id, 1)
    assert event["outcome"]["final_message"] == SLOW_REPLY


@pytest.mark.parametrize("lab", NEWEST_OF_EACH, indirect=True)
async def test_a_replaced_agent_process_ends_the_watch_and_it_is_never_moved(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (_, ctl, other):
        terminal_id = await person_starts_the_slow_task(lab, ctl)
        watch_id = (await ctl.call("watch", {"terminal_id": terminal_id}))["watch_id"]
        for method in ("renew", "recover", "retry_callback"):
            assert await refused(other, method, {"watch_id": watch_id}) == "not_owner"
        # The person restarts the agent in the same pane: another process, another task.
        await lab.replace_agent()
        event = await outcome(ctl, watch_id)
        recovered = await ctl.call("recover", {"watch_id": watch_id})
        renewed = await ctl.call("renew", {"watch_id": watch_id})
        rows = (await ctl.call("list"))["terminals"]
    # Its outcome stands: renew extends nothing and moves nothing.
    assert (renewed["renewed"], renewed["state"]) == (False, "failed")
    assert (event["kind"], event["outcome"]["reason"]) == ("failed", "incarnation_changed")
    assert recovered["verification"] == {
        "terminal": "replaced",
        "evidence": recovered["evidence"]["status"],
        "task": "unknown",
    }
    # The new process is a new terminal, and nothing follows it on the watch's behalf.
    (row,) = rows
    assert row["terminal_id"] != terminal_id and row.get("watch_id") is None


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("claude_bash", agents=("claude",))[-1:],
        *lab_params("codex_exec", agents=("codex",))[-1:],
    ],
    indirect=True,
)
async def test_a_watch_wakes_its_controller_for_a_permission_but_never_answers_it(
    lab: LabSession, tmp_path: Path
) -> None:
    async with (
        serving(lab, tmp_path, "ctl") as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        await idle_terminal(ctl, timeout=30)
        await lab.submit(RUN_TASK)
        with trio.fail_after(20):
            while (rows := (await ctl.call("list"))["terminals"])[0][
                "activity_state"
            ] != "awaiting_approval":
                await trio.sleep(0.05)
        watch_id = (await ctl.call("watch", {"terminal_id": rows[0]["terminal_id"]}))["watch_id"]
        woken = await wake_up(ctl, watch_id)
        assert (woken["kind"], woken["turn_id"]) == ("approval_required", None)
        assert woken["interaction"]["kind"] == "permission"
        shown = (await ctl.call("status", {"watch_id": watch_id}))["interaction"]
        assert shown["interaction_id"] == woken["interaction"]["interaction_id"]
        decision = {"turn_id": watch_id, "decision": "approve_once"}
        assert await refused(ctl, "approve", decision) == "manual_required"
        # Zero keys, at the key layer: the screen itself may change (Claude's logo blinks).
        assert served.keys is not None and served.keys.keys() == []
        # The person reads the prompt, then answers at the pane; the watch sees it through.
        await lab.wait_stable()
        await lab.send_keys("1" if lab.agent == "claude" else "y")
        event = await outcome(ctl, watch_id)
    assert event["kind"] == "done"
    assert lab.server.count_inputs_containing(RUN_TASK) == 1


async def wake_up(ctl: Controller, watch_id: str, timeout: float = 20) -> dict[str, Any]:
    """The next interaction_required / approval_required event of this watch (others acked)."""
    with trio.fail_after(timeout):
        async with aclosing(ctl.events()) as events:
            async for event in events:
                await ctl.ack(event["event_id"])
                wakes = event["kind"] in ("interaction_required", "approval_required")
                if event["watch_id"] == watch_id and wakes:
                    return event
    raise AssertionError("the connection closed first")


@pytest.mark.parametrize("lab", lab_params("slow", agents=("claude",))[-1:], indirect=True)
async def test_an_expired_watch_whose_agent_was_replaced_is_never_revived(
    lab: LabSession, tmp_path: Path
) -> None:
    lifetime = TurnSettings(lifetime_minutes=2 / 60)
    async with (
        serving(lab, tmp_path, "ctl", turns=lifetime) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        terminal_id = await person_starts_the_slow_task(lab, ctl)
        watch_id = (await ctl.call("watch", {"terminal_id": terminal_id}))["watch_id"]
        expired = await outcome(ctl, watch_id)
        assert (expired["kind"], expired["round"]) == ("timed_out", 1)
        await lab.replace_agent()
        # Another process runs the pane now: the watched task cannot be verified.
        assert await refused(ctl, "renew", {"watch_id": watch_id}) == "not_found"
        status = await ctl.call("status", {"watch_id": watch_id})
    assert (status["watch"]["state"], status["watch"]["round"]) == ("timed_out", 1)


@pytest.mark.parametrize("lab", lab_params("slow", agents=("claude",))[-1:], indirect=True)
async def test_a_renewed_watch_outlives_its_old_deadline(lab: LabSession, tmp_path: Path) -> None:
    lifetime = TurnSettings(lifetime_minutes=3 / 60)
    async with (
        serving(lab, tmp_path, "ctl", turns=lifetime) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        terminal_id = await person_starts_the_slow_task(lab, ctl)
        watched = await ctl.call("watch", {"terminal_id": terminal_id})
        watch_id, old_deadline = watched["watch_id"], watched["deadline_at"]
        renewed = await ctl.call("renew", {"watch_id": watch_id, "minutes": 1})
        assert renewed["deadline_at"] >= old_deadline + 50
        # Past the old deadline (plus a margin for the monitor's tick) it still observes.
        with trio.fail_after(10):
            while time.time() < old_deadline + 1:
                status = await ctl.call("status", {"watch_id": watch_id})
                assert status["watch"]["state"] == "running"
                await trio.sleep(0.1)
        lab.server.signal(SLOW_SIGNAL)
        event = await outcome(ctl, watch_id)
    assert (event["kind"], event["round"]) == ("done", 1)
