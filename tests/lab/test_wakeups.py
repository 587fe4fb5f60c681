"""The manual-required wake-ups: a person is needed, and the owner is told so, once.

A real client shows its Bash / exec approval for the scenario's command; the
pane is then shrunk until the prompt is cut off. AKK can no longer read it, so
it sends nothing, and the owner gets one ``approval_required`` wake-up whose
interaction is ``manual_required`` (reason ``prompt_cut_off``, the terminal and
pane, nothing to answer) within 2 s of the resize. Growing the pane back makes
the prompt readable again: a new interaction id, its own wake-up, and
``approve_once`` then runs the command exactly once (the model server is the
oracle). A pane whose version has no profile (the real binary, bound as if its
registry row were missing) shows every screen ``manual_required`` for
``unsupported_version`` and gets nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.cli.qualify import record_qualification
from akk.client import AkkError, Controller, connect
from akk.profiles.registry import PINNED
from akk.protocol import wakeups
from akk.qualify import scenarios as sc
from akk.qualify.compare import version_key
from akk.qualify.launcher import LabSession
from akk.qualify.plans.claude import TRANSCRIPT_SHOWN
from akk.qualify.plans.codex import TALL_DRAFT
from akk.qualify.plans.shared import MENTION
from akk.store.database import open_reader
from akk.store.qualifications import Qualification
from tests.lab.conftest import lab_params
from tests.lab.test_interactions import (
    SECRET_ANSWER,
    WAKE_UPS,
    choose,
    next_event,
    open_editor,
    prompt,
    secret_question_refused,
    send_task,
    settled,
    told_until_outcome,
    type_key_by_key,
)
from tests.lab.test_watch import wake_up
from tools.lab.akk_runner import AkkProcess, Served, idle_terminal, outcome, two_controllers

PERSON_S_KEY = "lab-pw-hunter2"
"""What the person types for the key: no key shape, so only withholding hides it."""

WAKE_UP_BOUND = wakeups.SETTLE_CAP_SECONDS + 1.0
"""Seconds from the resize to the wake-up at most: the settle time however busy the pane's
processes are, and a second to see the resize and tell the controller (0.6-0.8 s measured
on a quiet machine, up to 2.0 s with six lab clients at once on 2 cores and three busy
loops)."""

NOBODY_WOKEN_FOR = 2.0
"""How long a screen that must wake nobody is watched: a manual screen settles and wakes
its owner within it while the machine is not overloaded."""

CUT_OFF_ROWS = {"claude": 8, "codex": 6}
"""Pane heights at which the scenario's approval no longer fits (found in the lab)."""


def _dispatch_kinds(served: Served, turn_id: str) -> list[str]:
    conn = open_reader(served.state.store_path)
    try:
        return [
            str(kind)
            for (kind,) in conn.execute(
                "SELECT kind FROM dispatches WHERE turn_id = ? ORDER BY created_at", (turn_id,)
            )
        ]
    finally:
        conn.close()


async def _shown_after_a_restart(ctl: Controller, turn_id: str) -> dict[str, Any]:
    """The interaction `status` shows once the restarted server has read the screen."""
    with trio.fail_after(20):
        while (shown := (await ctl.call("status", {"turn_id": turn_id}))["interaction"]) is None:
            await trio.sleep(0.1)
    assert isinstance(shown, dict)
    return shown


async def _approved_to_done(ctl: Controller, served: Served, turn_id: str, timeout: float) -> None:
    """The owner's next wake-up is the Turn's permission prompt; AKK's `approve_once` then
    runs it (one dispatch after the task), and the Turn ends `done`."""
    readable = await next_event(ctl, WAKE_UPS, timeout=timeout)
    assert readable["kind"] == "approval_required", readable
    assert (await _status(ctl, turn_id))["state"] == "pending"
    approved = await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"})
    assert approved["outcome"] == "dispatched"
    assert (await settled(ctl, turn_id))["kind"] == "done"
    assert _dispatch_kinds(served, turn_id) == ["task", "approval"]


async def _status(ctl: Controller, turn_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = (await ctl.call("status", {"turn_id": turn_id}))["interaction"]
    return shown


@pytest.mark.parametrize(
    "lab",
    [*lab_params("claude_bash")[-1:], *lab_params("codex_exec")[-1:]],
    indirect=True,
)
async def test_a_cut_off_permission_wakes_the_owner_once_and_reads_again_when_it_fits(
    lab: LabSession, tmp_path: Path
) -> None:
    marker = sc.BASH_MARKER if lab.agent == "claude" else sc.EXEC_MARKER
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        turn_id = await send_task(ctl, sc.RUN_TASK)
        (terminal,) = (await ctl.call("list"))["terminals"]
        first = await next_event(ctl, WAKE_UPS)
        assert first["interaction"]["state"] == "pending"
        readable = await _status(ctl, turn_id)
        requests = len(lab.server.main_requests())

        started = time.monotonic()
        await lab.tmux("resize-window", "-t", "lab", "-x", str(lab.cols), "-y",
                       str(CUT_OFF_ROWS[lab.agent]))  # fmt: skip
        woken = await next_event(ctl, WAKE_UPS, timeout=10)
        latency = time.monotonic() - started
        manual = woken["interaction"]
        print(f"{lab.client.name}: manual wake-up {latency:.3f} s after the resize")
        assert woken["kind"] == "approval_required", woken
        assert manual["state"] == "manual_required", manual
        assert manual["reason"] == "prompt_cut_off", (manual["detail"], await lab.text())
        assert manual["terminal_id"] == terminal["terminal_id"]
        assert manual["pane"] == lab.pane
        assert manual["questions"] == [] and "decisions" not in manual
        assert manual["interaction_id"] != readable["interaction_id"]
        assert latency < WAKE_UP_BOUND
        assert await _status(ctl, turn_id) == manual  # status shows the same
        with pytest.raises(AkkError) as refused:
            await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"})
        assert refused.value.reason == "prompt_changed"
        # Zero keys: nothing new reached the model, and no answer was dispatched.
        assert len(lab.server.main_requests()) == requests
        assert _dispatch_kinds(served, turn_id) == ["task"]

        await lab.tmux("resize-window", "-t", "lab", "-x", str(lab.cols), "-y", str(lab.rows))
        again = await next_event(ctl, WAKE_UPS, timeout=10)
        back = await _status(ctl, turn_id)
        assert again["interaction"]["interaction_id"] == back["interaction_id"]
        assert back["state"] == "pending", back
        assert back["interaction_id"] not in (readable["interaction_id"], manual["interaction_id"])
        assert (await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"}))[
            "outcome"
        ] == "dispatched"
        await settled(ctl, turn_id)
        assert _dispatch_kinds(served, turn_id) == ["task", "approval"]
    assert lab.server.count_inputs_containing(marker) == 1
    assert lab.server.count_inputs_containing(sc.RUN_TASK) == 1


@pytest.mark.parametrize("lab", lab_params("claude_bash_held")[-1:], indirect=True)
async def test_the_transcript_a_person_opens_wakes_nobody_until_a_prompt_waits_behind_it(
    lab: LabSession, tmp_path: Path
) -> None:
    """While AKK's Turn works, the person opens Claude's detailed transcript (Ctrl-O) to watch
    it. That is a view of theirs, not a prompt: the pane reads `unknown` (zero keys) and its
    owner is not woken. Once the permission prompt comes behind it, Claude's footer says a
    dialog waits: the owner gets one manual wake-up (`prompt_hidden`, nothing to answer).
    The person closes the view: the prompt reads, and AKK's approval runs the command once."""
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        turn_id = await send_task(ctl, sc.RUN_TASK)
        await lab.server.wait_for_request(
            lambda r: not r.auxiliary and sc.RUN_TASK in r.newest_input, timeout=20
        )
        await lab.send_keys("C-o")
        await lab.wait_for_screen(lambda s: TRANSCRIPT_SHOWN in s, 10, what="the transcript")
        with trio.fail_after(30):
            while (await ctl.call("list"))["terminals"][0]["activity_state"] != "unknown":
                await trio.sleep(0.05)
        # Still for longer than a manual screen takes to settle and wake its owner.
        await lab.wait_stable(quiet=NOBODY_WOKEN_FOR)
        assert await _status(ctl, turn_id) is None
        lab.server.signal(sc.SLOW_SIGNAL)
        await lab.wait_for_screen(lambda s: "dialog waiting" in s, 20, what="the prompt behind")
        hidden = await next_event(ctl, WAKE_UPS, timeout=10)
        manual = hidden["interaction"]
        assert (manual["state"], manual["reason"]) == ("manual_required", "prompt_hidden"), manual
        assert manual["pane"] == lab.pane and manual["questions"] == []
        await lab.send_keys("C-o")
        await _approved_to_done(ctl, served, turn_id, timeout=10)
    assert lab.server.count_inputs_containing(sc.BASH_MARKER) == 1
    assert lab.server.count_inputs_containing(sc.RUN_TASK) == 1


PERSON_DRAFT = "lab: my own next question, about @"
"""What the person types while the Turn works, and never sends: it ends by opening the
mention popup, which is still open when the Turn's prompt comes."""


MENTION_SHOWN = {"claude": "(agent)", "codex": "esc close"}
"""What shows once the mention popup is open, per agent."""

PERSON_AT_COMPOSER = {
    "claude": (
        ("!", "for shell mode", "BSpace"),
        ("/", "/background ", "BSpace"),
        (MENTION, MENTION_SHOWN["claude"], "C-u"),
    ),
    "codex": (
        ("!", "Shell mode", "BSpace"),
        ("/", "choose what Codex is allowed to do", "BSpace"),
        (MENTION, MENTION_SHOWN["codex"], "C-u"),
        ("C-r", "reverse-i-search", "Escape"),
        (TALL_DRAFT, "lab line 30", "C-c"),
    ),
}
"""What a person does at the composer while a Turn works, per agent: the text typed (pasted,
if it has lines; or the key pressed, C-r), what then shows, and the key that leaves it. On
Claude the command menu and the mention popup hide the working line; Codex up to 0.155.1
draws them in its footer's place, and from 0.169.0 a draft taller than the pane scrolls
the composer over its footer. Claude's history search (a screen of its own, read
`unknown`) is not among them."""


@pytest.mark.parametrize(
    "lab",
    [*lab_params("claude_bash_held")[-1:], *lab_params("codex_exec_held")[::4]],
    indirect=True,
)
async def test_a_person_at_the_composer_while_a_turn_works_wakes_nobody(
    lab: LabSession, tmp_path: Path
) -> None:
    """While AKK's Turn works, the person enters shell mode, opens the command menu and the
    mention popup, searches their history and pastes a draft taller than the pane (Codex),
    leaves each, and types a draft of their own, ending in the mention popup. Each reads
    `working`: no wake-up, no interaction. The Turn's approval then comes on top of the
    draft and its popup: the owner's first wake-up is it, and AKK's `approve_once` runs the
    command once. The person's draft stays in the composer, unsent."""
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        turn_id = await send_task(ctl, sc.RUN_TASK)
        await lab.server.wait_for_request(
            lambda r: not r.auxiliary and sc.RUN_TASK in r.newest_input, timeout=20
        )
        for keys, shown, leave in PERSON_AT_COMPOSER[lab.agent]:
            if keys == "C-r":
                await lab.send_keys(keys)
            elif "\n" in keys:
                await lab.paste(keys)
            else:
                await lab.type_text(keys)
            await lab.wait_for_screen(lambda s, shown=shown: shown in s, 10, what=shown)
            await _working_and_nobody_woken(ctl, turn_id)
            await lab.send_keys(leave)
            await lab.wait_for_screen(lambda s, shown=shown: shown not in s, 10, what="left")
        await lab.type_text(PERSON_DRAFT)
        popup = MENTION_SHOWN[lab.agent]
        await lab.wait_for_screen(lambda s: PERSON_DRAFT in s and popup in s, 10, what="popup")
        await _working_and_nobody_woken(ctl, turn_id)
        lab.server.signal(sc.SLOW_SIGNAL)
        await _approved_to_done(ctl, served, turn_id, timeout=20)
        assert PERSON_DRAFT in await lab.text()
    marker = sc.BASH_MARKER if lab.agent == "claude" else sc.EXEC_MARKER
    assert lab.server.count_inputs_containing(marker) == 1
    assert lab.server.count_inputs_containing(sc.RUN_TASK) == 1
    assert lab.server.count_inputs_containing(PERSON_DRAFT) == 0


async def _working_and_nobody_woken(ctl: Controller, turn_id: str) -> None:
    """The pane reads working within 30 s, and stays so, with no interaction, for longer
    than a manual screen takes to settle and wake its owner."""
    with trio.fail_after(30):
        while (await ctl.call("list"))["terminals"][0]["activity_state"] != "working":
            await trio.sleep(0.05)
    with trio.move_on_after(NOBODY_WOKEN_FOR):
        while True:
            assert (await ctl.call("list"))["terminals"][0]["activity_state"] == "working"
            assert await _status(ctl, turn_id) is None
            await trio.sleep(0.1)


@pytest.mark.parametrize("lab", lab_params("claude_bash")[-1:], indirect=True)
async def test_an_unprofiled_pane_shows_its_prompt_manual_required_and_reads_once_qualified(
    lab: LabSession, tmp_path: Path
) -> None:
    """No Turn or Watch can hold such a pane (both are refused), so nobody is woken:
    `status` of the terminal says why a person must answer, and nothing is sent. The
    server binds with a registry that lacks this pinned version (as if it were new); a
    qualification of the pane's exact binary then binds it without a restart."""
    registry = PINNED.without(lab.agent, lab.version)
    async with two_controllers(lab, tmp_path, registry=registry) as (served, ctl, _other):
        await lab.submit(sc.RUN_TASK)  # the person starts the task at the pane
        await lab.wait_for_screen(lambda screen: "Do you want to proceed?" in screen, 30)
        row, shown = await _shown(ctl, "manual_required")
        assert row["profile"] is None
        assert row["profile_reason"].startswith(f"unpinned_version: claude {lab.version} ")
        assert (shown["state"], shown["reason"]) == ("manual_required", "unsupported_version")
        assert (shown["terminal_id"], shown["pane"]) == (row["terminal_id"], lab.pane)
        assert shown["questions"] == [] and "decisions" not in shown
        with pytest.raises(AkkError) as refused:
            await ctl.call(
                "send",
                {"terminal_id": row["terminal_id"], "request": "x", "client_request_id": "x"},
            )
        assert refused.value.reason == "unsupported_version"
        assert "akk qualify claude --binary " in refused.value.message
        assert "Do you want to proceed?" in await lab.text()  # zero keys: still asking

        # Qualified (as `akk qualify` ends: record_qualification) for the binary the pane
        # runs, read as the nearest pinned version: the same prompt reads, as a new
        # appearance, with no restart and still no key.
        reader = open_reader(served.state.store_path)
        ((sha,),) = reader.execute(
            "SELECT binary_sha256 FROM terminals WHERE terminal_id = ?", (row["terminal_id"],)
        )
        reader.close()
        older = [
            v
            for a, v in PINNED.pinned
            if a == "claude" and version_key(v) < version_key(lab.version)
        ]
        base = max(older, key=version_key)  # the nearest pinned version below it
        qualification = Qualification(
            agent="claude", version=lab.version, binary_sha256=sha,
            base_profile=f"claude-code@{base}", plan_digest="0" * 64, qualified_at=time.time(),
            report={"test": "qualified by hand"},
        )  # fmt: skip
        await trio.to_thread.run_sync(record_qualification, served.state, qualification)
        bound, readable = await _shown(ctl, "pending")
        assert bound["profile"] == f"claude-code@{lab.version} (qualified from {base})"
        assert readable["kind"] == "permission"
        assert readable["interaction_id"] != shown["interaction_id"]
        assert served.keys is not None and served.keys.keys() == []
        assert lab.server.count_inputs_containing(sc.BASH_MARKER) == 0
        await lab.send_keys("Escape")  # the person rejects it


async def _shown(ctl: Controller, state: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one terminal's row and its permission once shown in ``state`` (10 s at most).

    The row may not be listed yet (the watcher's first listing, or the pane's actor
    started again under its new profile): it is waited for like the state."""
    with trio.fail_after(30):
        while True:
            rows = (await ctl.call("list"))["terminals"]
            assert len(rows) <= 1, rows
            for row in rows:
                called = await ctl.call("status", {"terminal_id": row["terminal_id"]})
                shown = called["interaction"]
                if shown is not None and shown["kind"] == "permission" and shown["state"] == state:
                    return row, shown
            await trio.sleep(0.05)


@pytest.mark.parametrize(
    "lab",
    [*lab_params("claude_bash")[-1:], *lab_params("codex_exec")[-1:]],
    indirect=True,
)
async def test_a_watch_is_woken_the_same_way_for_a_cut_off_permission(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (_, ctl, _other):
        row = await idle_terminal(ctl, timeout=30)
        await lab.submit(sc.RUN_TASK)  # the person's own task
        with trio.fail_after(20):
            while (await ctl.call("list"))["terminals"][0]["activity_state"] != (
                "awaiting_approval"
            ):
                await trio.sleep(0.05)
        watch_id = (await ctl.call("watch", {"terminal_id": row["terminal_id"]}))["watch_id"]
        first = await wake_up(ctl, watch_id)
        started = time.monotonic()
        await lab.tmux("resize-window", "-t", "lab", "-x", str(lab.cols), "-y",
                       str(CUT_OFF_ROWS[lab.agent]))  # fmt: skip
        woken = await wake_up(ctl, watch_id, timeout=10)
        latency = time.monotonic() - started
        print(f"{lab.client.name}: watch's manual wake-up {latency:.3f} s after the resize")
        manual = woken["interaction"]
        assert woken["kind"] == "approval_required"
        assert (manual["state"], manual["reason"]) == ("manual_required", "prompt_cut_off")
        assert (manual["terminal_id"], manual["pane"]) == (row["terminal_id"], lab.pane)
        assert latency < WAKE_UP_BOUND
        await lab.tmux("resize-window", "-t", "lab", "-x", str(lab.cols), "-y", str(lab.rows))
        again = await wake_up(ctl, watch_id, timeout=10)
        ids = {first["interaction"]["interaction_id"], manual["interaction_id"]}
        assert again["interaction"]["interaction_id"] not in ids
        assert again["interaction"].get("reason") != "prompt_cut_off"  # readable again
        await lab.wait_stable()
        await lab.send_keys("1" if lab.agent == "claude" else "y")  # the person answers
        assert (await outcome(ctl, watch_id))["kind"] == "done"
    assert lab.server.count_inputs_containing(sc.RUN_TASK) == 1


@pytest.mark.parametrize("lab", [lab_params("codex_exec_huge")[i] for i in (0, -1)], indirect=True)
async def test_a_command_codex_cut_short_wakes_the_owner_and_names_the_cut(
    lab: LabSession, tmp_path: Path
) -> None:
    """A 1.2 MB command: Codex draws ``[… 15800 lines] … view all`` in its place, so AKK
    cannot read it. The owner is woken once with ``prompt_cut_off`` and a detail naming the
    cut; nothing is sent. The person then declines at the pane (Esc), and the Turn ends
    with the command never run."""
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        turn_id = await send_task(ctl, sc.HUGE_TASK)
        woken = await next_event(ctl, WAKE_UPS, timeout=60)
        manual = woken["interaction"]
        assert woken["kind"] == "approval_required", woken
        assert (manual["state"], manual["reason"]) == ("manual_required", "prompt_cut_off")
        assert manual["detail"].startswith("Codex cut off the command (15800 lines not shown")
        with pytest.raises(AkkError):
            await ctl.call("approve", {"turn_id": turn_id, "decision": "approve_once"})
        assert _dispatch_kinds(served, turn_id) == ["task"]
        await lab.tmux("send-keys", "-t", "lab", "Escape")  # the person declines
        ended = await outcome(ctl, turn_id, timeout=60)
        assert ended["kind"] in ("done", "cancelled"), ended
    assert lab.server.count_inputs_containing(sc.HUGE_TASK) == 1
    assert lab.server.count_inputs_containing(sc.HUGE_MARKER) == 0


@pytest.mark.parametrize(
    "lab",
    [
        *[lab_params("questionnaire_secret")[i] for i in (0, -1)],
        *[lab_params("codex_rui_secret", plan_mode=True)[i] for i in (0, -1)],
        *[lab_params("codex_rui_flagged_secret", plan_mode=True)[i] for i in (0, -1)],
    ],
    indirect=True,
)
async def test_a_question_asking_for_a_secret_is_the_person_s_to_answer(
    lab: LabSession, tmp_path: Path
) -> None:
    """The model asks "Enter your API key:" as a question, or (Codex) asks a question in
    plain words whose call marks it secret (``isSecret``: Codex draws it as any other
    question, and masks only what is typed into its notes). Its answer must be typed by the
    person, never relayed: the owner is woken once with ``secret_input`` and nothing to
    answer with, an answer sent anyway is refused with zero keys, and once the person
    types the key into the question's editor, nothing of the screen is shown. The person
    typing, key by key, is answering the same question: one interaction, no new wake-up
    (PROTOCOL: one per appearance), and at most one ``invalidated`` once they answered
    it. The model hears the person's answer exactly once."""
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        assert served.keys is not None
        turn_id = await send_task(ctl, sc.SECRET_ASK_TASK)
        shown = await secret_question_refused(ctl, turn_id)
        sent = served.keys.keys()  # the task's keys, long sent: the question shows
        sent_before = len(sent)
        assert not any(SECRET_ANSWER in " ".join(argv) for argv in sent)
        assert shown["pane"] == lab.pane
        status = await _status(ctl, turn_id)
        assert (status["interaction_id"], status["state"]) == (
            shown["interaction_id"],
            "manual_required",
        )
        assert served.keys.keys()[sent_before:] == []
        # The person types the key into the question's own editor: nothing of the screen,
        # which shows it below the question, reaches the controller.
        await lab.wait_stable()
        await open_editor(lab, *("Down",) * 2, *(("Tab",) if lab.agent == "codex" else ()))
        await type_key_by_key(
            lab, PERSON_S_KEY, masked=lab.scenario.name.endswith("flagged_secret")
        )
        await lab.wait_stable()
        status = await ctl.call("status", {"turn_id": turn_id})
        assert status["interaction"]["interaction_id"] == shown["interaction_id"], status
        assert status["screen_excerpt"] is None, status["screen_excerpt"]
        assert status["screen_excerpt_withheld"] == "secret_input"
        row = await ctl.call("status", {"terminal_id": status["terminal"]["terminal_id"]})
        assert row["screen_excerpt"] is None
        assert PERSON_S_KEY not in json.dumps([status, row])
        await lab.send_keys("Enter")  # the person's own answer
        told = [(event["kind"], (event["interaction"] or {}).get("interaction_id"))
                for event in await told_until_outcome(ctl, turn_id)]  # fmt: skip
        # Answered by the person, the question is ``invalidated``, unless the Turn's
        # outcome came first (it then says so itself): no wake-up came while they typed.
        assert told in ([("invalidated", shown["interaction_id"]), ("done", None)],
                        [("done", None)]), told  # fmt: skip
        assert served.keys.keys()[sent_before:] == []
    assert lab.server.count_inputs_containing(PERSON_S_KEY) == 1, lab.server.summary()
    assert lab.server.count_inputs_containing(SECRET_ANSWER) == 0


@pytest.mark.parametrize(
    "lab",
    [lab_params("questionnaire_secret")[-1], lab_params("codex_rui_secret", plan_mode=True)[-1]],
    indirect=True,
)
async def test_a_secret_question_the_person_answers_across_a_restart_wakes_its_owner_once(
    lab: LabSession, tmp_path: Path
) -> None:
    """AKK restarts while the person types the key: the question on screen, redrawn since
    its owner was woken, is still that interaction, so nobody is woken again."""
    akk = AkkProcess(lab, tmp_path)
    try:
        async with connect(akk.start(), akk.tokens["ctl"]) as ctl:
            turn_id = await send_task(ctl, sc.SECRET_ASK_TASK)
            shown = await secret_question_refused(ctl, turn_id)
            await lab.wait_stable()
            await open_editor(lab, *("Down",) * 2, *(("Tab",) if lab.agent == "codex" else ()))
            await type_key_by_key(lab, PERSON_S_KEY[:6])
        await trio.to_thread.run_sync(akk.stop)
        async with connect(akk.start(), akk.tokens["ctl"]) as ctl:
            await type_key_by_key(lab, PERSON_S_KEY[6:])
            await lab.wait_stable()
            status = await _shown_after_a_restart(ctl, turn_id)
            assert (status["interaction_id"], status["state"]) == (
                shown["interaction_id"],
                "manual_required",
            ), status
            await lab.send_keys("Enter")  # the person's own answer
            told = [(event["kind"], (event["interaction"] or {}).get("interaction_id"))
                    for event in await told_until_outcome(ctl, turn_id)]  # fmt: skip
            assert told in ([("invalidated", shown["interaction_id"]), ("done", None)],
                            [("done", None)]), told  # fmt: skip
    finally:
        akk.kill()
    assert lab.server.count_inputs_containing(PERSON_S_KEY) == 1, lab.server.summary()
    assert lab.server.count_inputs_containing(SECRET_ANSWER) == 0


@pytest.mark.parametrize(
    "lab", [lab_params("claude_write_huge")[-1], lab_params("codex_exec_huge")[-1]], indirect=True
)
async def test_a_permission_left_to_a_person_wakes_its_owner_once_across_a_restart(
    lab: LabSession, tmp_path: Path
) -> None:
    """AKK restarts while a permission it cannot answer waits for the person (Claude's
    Write of a file too long to offer whole, Codex's cut-off command): the screen,
    unchanged, is the interaction its owner was woken for, so nobody is woken again; the
    person answers it."""
    akk = AkkProcess(lab, tmp_path)
    try:
        async with connect(akk.start(), akk.tokens["ctl"]) as ctl:
            turn_id = await send_task(ctl, lab.scenario.task)
            woken = await next_event(ctl, WAKE_UPS, timeout=60)
            shown = woken["interaction"]
            assert (woken["turn_id"], shown["state"]) == (turn_id, "manual_required"), woken
            if lab.agent == "claude":  # nothing of its 69,293 characters is projected
                assert (shown["manual_reason"], shown["questions"]) == ("file_too_long", [])
        await trio.to_thread.run_sync(akk.stop)
        async with connect(akk.start(), akk.tokens["ctl"]) as ctl:
            status = await _shown_after_a_restart(ctl, turn_id)
            assert status["interaction_id"] == shown["interaction_id"], (status, shown)
            await lab.send_keys("1" if lab.agent == "claude" else "Escape")  # the person
            told = await told_until_outcome(ctl, turn_id)
            assert not [event for event in told if event["kind"] in WAKE_UPS], told
    finally:
        akk.kill()
    assert lab.server.count_inputs_containing(lab.scenario.task) == 1, lab.server.summary()
    if lab.agent == "claude":  # the person approved it: written whole
        assert (lab.workdir / sc.WRITE_HUGE_FILE).read_text() == sc.WRITE_HUGE_CONTENT


@pytest.mark.parametrize(
    "lab", [lab_params("questionnaire_secret_second")[i] for i in (0, -1)], indirect=True
)
async def test_a_secret_question_after_an_answered_one_is_the_person_s_to_the_end(
    lab: LabSession, tmp_path: Path
) -> None:
    """The controller answers the first question; the second asks for a key, so the person
    types it, and Claude's review then lists it answered: the review is the person's too
    (nothing of it shown, nothing to submit with), and the model hears both answers once."""
    async with two_controllers(lab, tmp_path) as (served, ctl, _other):
        assert served.keys is not None
        turn_id = await send_task(ctl, sc.SECRET_ASK_TASK)
        color = await prompt(ctl, turn_id)
        reply = await ctl.call("respond_interaction", choose(color, "Blue"))
        assert reply["outcome"] == "dispatched"
        await secret_question_refused(ctl, turn_id)
        typed = len(served.keys.keys())  # the answer's keys, proven before the key showed
        await lab.wait_stable()
        await open_editor(lab, "Down", "Down")
        await lab.type_text(PERSON_S_KEY)
        await lab.wait_for_screen(lambda screen: PERSON_S_KEY in screen, 10)
        await lab.send_keys("Enter")  # the person's answer: on to the review, which lists it
        # The key's question, redrawn as the person typed, stayed the one interaction it
        # was: the next wake-up is the review's.
        review = await next_event(ctl, WAKE_UPS)
        assert (review["interaction"]["kind"], review["interaction"]["manual_reason"]) == (
            "confirmation",
            "secret_input",
        ), review
        await lab.wait_for_screen(lambda screen: "Submit answers" in screen, 10)
        await lab.wait_stable()
        status = await ctl.call("status", {"turn_id": turn_id})
        assert status["screen_excerpt"] is None and status["interaction"]["questions"] == []
        assert PERSON_S_KEY in await lab.text() and PERSON_S_KEY not in json.dumps(status)
        with pytest.raises(AkkError) as refused:
            await ctl.call("respond_interaction", {"interaction_id":
                           review["interaction"]["interaction_id"], "turn_id": turn_id,
                           "answers": []})  # fmt: skip
        assert refused.value.reason == "manual_required", refused.value
        await lab.send_keys("1")  # the person submits
        assert (await settled(ctl, turn_id))["kind"] == "done"
        assert served.keys.keys()[typed:] == []
    answers = [r for r in lab.server.main_requests() if PERSON_S_KEY in r.newest_input]
    assert len(answers) == 1, lab.server.summary()
    (answered,) = answers
    assert '"Which color do you prefer?"="Blue"' in answered.newest_input
    assert f'"Enter your API key:"="{PERSON_S_KEY}"' in answered.newest_input
    assert lab.server.count_inputs_containing(PERSON_S_KEY) == 1, lab.server.summary()
