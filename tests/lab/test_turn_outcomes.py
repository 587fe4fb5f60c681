"""Respond, and every way a managed Turn can end besides `done`, against the real clients."""

from __future__ import annotations

import json
import os
import shlex
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.client import AkkError, Controller, connect
from akk.config import TurnSettings
from akk.qualify.compare import version_key
from akk.qualify.launcher import LabSession
from akk.qualify.model_server import RecordedRequest
from akk.qualify.scenarios import (
    BACKGROUND_NEXT,
    BACKGROUND_NEXT_REPLY,
    BACKGROUND_SIGNAL,
    BACKGROUND_TASK,
    BACKGROUND_WORK,
    COMPACT_REPLY,
    COMPACT_TASK,
    DEFAULT_REPLY,
    ECHO_REPLY,
    ECHO_TASK,
    ERROR_TASK,
    RUN_TASK,
    SLOW_REPLY,
    SLOW_SIGNAL,
    SLOW_TASK,
    STEER_REPLY,
    STEER_TASK,
)
from tests.lab.conftest import lab_params, newest_of_each
from tests.lab.test_send import HELD_MESSAGE, PERSON_TASK, running
from tools.lab.akk_runner import idle_terminal, outcome, serving

LAST_OF_EACH = newest_of_each("echo")


def _slow_task(request: RecordedRequest) -> bool:
    """The slow task's conversation request (a title request may quote it too)."""
    return not request.auxiliary and SLOW_TASK in request.newest_input


@asynccontextmanager
async def controller(
    lab: LabSession, tmp_path: Path, turns: TurnSettings | None = None
) -> AsyncIterator[Controller]:
    """`akk serve` in this process (with these Turn settings) and one connected controller."""
    async with (
        serving(lab, tmp_path, "ctl", turns=turns) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        yield ctl


async def _send(ctl: Controller, text: str, request_id: str = "r") -> str:
    row = await idle_terminal(ctl)
    sent = await ctl.call(
        "send",
        {"terminal_id": row["terminal_id"], "request": text, "client_request_id": request_id},
    )
    return str(sent["turn_id"])


@pytest.mark.parametrize("lab", LAST_OF_EACH, indirect=True)
async def test_respond_is_the_next_round_of_the_same_turn(lab: LabSession, tmp_path: Path) -> None:
    follow_up = "lab: and once more"
    async with controller(lab, tmp_path) as ctl:
        turn_id = await _send(ctl, ECHO_TASK)
        first = await outcome(ctl, turn_id)
        assert (first["kind"], first["round"]) == ("done", 1)
        with pytest.raises(AkkError) as empty:
            await ctl.call("respond", {"turn_id": turn_id, "request": "  "})
        assert empty.value.reason == "invalid_params"
        await idle_terminal(ctl)
        asked = {"turn_id": turn_id, "request": follow_up, "client_request_id": "f1"}
        again = await ctl.call("respond", asked)
        assert (again["turn_id"], again["round"]) == (turn_id, 2)
        # The controller lost the reply and calls again at once, then after the outcome:
        # the round it started each time, typed once (the model's count below).
        repeated = await ctl.call("respond", asked)
        assert (repeated["turn_id"], repeated["round"]) == (turn_id, 2)
        second = await outcome(ctl, turn_id)
        assert (second["kind"], second["round"]) == ("done", 2)
        repeated = await ctl.call("respond", asked)
        assert (repeated["round"], repeated["state"]) == (2, "done")
        with pytest.raises(AkkError) as reused:
            await ctl.call("respond", asked | {"request": "lab: another text"})
        assert reused.value.reason == "conflict"
        assert second["event_id"] != first["event_id"]
        status = await ctl.call("status", {"turn_id": turn_id})
        assert status["turn"]["round"] == 2
        assert [d["kind"] for d in status["dispatches"]] == ["task", "respond"]
        closed = await ctl.call("close", {"turn_id": turn_id})
        assert closed["management_state"] == "closed"
        with pytest.raises(AkkError) as after_close:
            await ctl.call("respond", {"turn_id": turn_id, "request": "lab: too late"})
        assert after_close.value.reason == "closed"
    assert lab.server.count_inputs_containing(ECHO_TASK) == 1
    assert lab.server.count_inputs_containing(follow_up) == 1
    assert lab.server.count_inputs_containing("lab: too late") == 0
    assert lab.server.count_inputs_containing("lab: another text") == 0


NEW_CONVERSATION = {"claude": "/clear", "codex": "/new"}
"""The command a person starts a new conversation with in the same pane."""
WHERE_TO_RUN = "Where should the new conversation run?"
"""Codex 0.169.0 and later ask this after /new, its first choice the current directory."""
CONVERSATION_LEFT = "To continue this session"
"""Codex 0.153.4 prints this under the conversation /new left, which stays on screen."""


async def _new_conversation(lab: LabSession, ctl: Controller) -> None:
    """The person starts a new conversation in the pane, and the client shows it begun."""
    await lab.wait_stable()
    await lab.submit(NEW_CONVERSATION[lab.agent])
    if lab.agent == "claude":
        await lab.wait_for_screen(lambda s: ECHO_REPLY not in s, 10, what="a cleared screen")
    elif version_key(lab.version) < (0, 169, 0):
        await lab.wait_for_screen(lambda s: CONVERSATION_LEFT in s, 10, what="a new chat")
    else:
        await lab.wait_for_screen(lambda s: WHERE_TO_RUN in s, 10, what="where to run it")
        with trio.fail_after(30):  # AKK reads the question as no composer to type into
            while (await ctl.call("list"))["terminals"][0]["activity_state"] == "idle":
                await trio.sleep(0.05)
        await lab.send_keys("Enter")  # the current directory


@pytest.mark.parametrize(
    "lab",
    [*lab_params("echo", agents=("claude",))[-1:], *lab_params("echo", agents=("codex",))[::4]],
    indirect=True,
)
async def test_a_task_after_the_person_starts_a_new_conversation_ends_done(
    lab: LabSession, tmp_path: Path
) -> None:
    """Between two Turns the person starts a new conversation in the pane. The agent writes
    it to a new file: the next Turn is bound to that one and ends `done` with its own reply,
    and the model saw that task without the first conversation."""
    after = "lab: a task in the new conversation"
    async with controller(lab, tmp_path) as ctl:
        first = await outcome(ctl, await _send(ctl, ECHO_TASK, "a"))
        await _new_conversation(lab, ctl)
        second = await outcome(ctl, await _send(ctl, after, "b"))
        status = await ctl.call("status", {"turn_id": second["turn_id"]})
    assert (first["kind"], first["outcome"]["final_message"]) == ("done", ECHO_REPLY)
    assert (second["kind"], second["outcome"]["final_message"]) == ("done", DEFAULT_REPLY.text)
    assert status["turn"]["evidence"]["status"] == "bound"
    (request,) = (r for r in lab.server.main_requests() if after in r.newest_input)
    assert ECHO_TASK not in json.dumps(request.body)  # a conversation of its own
    assert lab.server.count_inputs_containing(ECHO_TASK) == 1


RESUME_LAST = {"claude": ("--continue",), "codex": ("resume", "--last")}
"""The arguments that start each client on the folder's most recent conversation."""


@pytest.mark.parametrize("lab", LAST_OF_EACH, indirect=True)
async def test_a_task_after_the_person_resumes_the_conversation_ends_done(
    lab: LabSession, tmp_path: Path
) -> None:
    """The person quits the agent (Ctrl-C twice) and starts it again on the same conversation
    (`claude --continue`, `codex resume --last`). The pane has a new terminal (another
    process): the next Turn is bound to the file the resumed process writes, ends `done` with
    its own reply in the same native session, and the model saw the earlier conversation."""
    after = "lab: a task in the resumed conversation"
    async with controller(lab, tmp_path) as ctl:
        first_row = await idle_terminal(ctl)
        first = await outcome(ctl, await _send(ctl, ECHO_TASK, "a"))
        await lab.replace_agent(*RESUME_LAST[lab.agent], quit_keys=("C-c", "C-c"))
        with trio.fail_after(30):
            while (row := await idle_terminal(ctl))["terminal_id"] == first_row["terminal_id"]:
                await trio.sleep(0.05)
        second = await outcome(ctl, await _send(ctl, after, "b"))
        sessions = [
            (await ctl.call("status", {"turn_id": event["turn_id"]}))["turn"]["session_id"]
            for event in (first, second)
        ]
    assert (first["kind"], first["outcome"]["final_message"]) == ("done", ECHO_REPLY)
    assert (second["kind"], second["outcome"]["final_message"]) == ("done", DEFAULT_REPLY.text)
    assert row["pane"] == first_row["pane"]
    assert sessions[0] is not None and sessions[0] == sessions[1]  # the same conversation
    (request,) = (r for r in lab.server.main_requests() if after in r.newest_input)
    assert ECHO_TASK in json.dumps(request.body)  # with the earlier conversation
    assert lab.server.count_inputs_containing(ECHO_TASK) == 1


COMPACTING = [
    *(
        param
        for param in lab_params("claude_compact", agents=("claude",))
        if version_key(param.values[0].client.version) >= (2, 1, 328)
    ),
    *lab_params("codex_compact", agents=("codex",))[::4],
]
"""The clients that compact mid-Turn in the lab. Claude 2.1.263-2.1.267 compacted neither then
nor at the next task, on the same reported context; Codex does on every pinned version
(the oldest and newest here)."""
COMPACTED = {"claude": ("subtype", "compact_boundary"), "codex": ("type", "compacted")}
"""The record each client writes where it compacted."""


@pytest.mark.parametrize("lab", COMPACTING, indirect=True)
async def test_a_turn_the_agent_compacts_midway_ends_done(lab: LabSession, tmp_path: Path) -> None:
    """The first reply reports a nearly full context: the client compacts the conversation
    before it sends the tool's result on, mid-Turn. Claude's file then starts a new chain (a
    boundary with no parent, a summary that is no prompt). The Turn still ends `done` with
    its final reply, and the next task after it too."""
    async with controller(lab, tmp_path) as ctl:
        turn_id = await _send(ctl, COMPACT_TASK)
        event = await outcome(ctl, turn_id, timeout=40)
        status = await ctl.call("status", {"turn_id": turn_id})
        after = await _send(ctl, ECHO_TASK, "after")
        assert (await outcome(ctl, after))["kind"] == "done"
    key, value = COMPACTED[lab.agent]
    records = lab.transcript_records()
    compacted = [r for r in records if isinstance(r, dict) and r.get(key) == value]
    assert len(compacted) == 1, lab.server.summary()  # the case this test is for
    assert (event["kind"], event["outcome"]["final_message"]) == ("done", COMPACT_REPLY), event
    assert status["turn"]["evidence"]["status"] == "bound"
    # What the model server reported for the Turn's requests (the summary's included).
    first_after = next(r.index for r in lab.server.requests if ECHO_TASK in r.newest_input)
    served = sum(r.usage.cache_read_input_tokens for r in lab.server.requests[:first_after])
    usage = status["turn"]["usage"]
    if lab.agent == "claude":  # the summary's request records no usage in Claude's file
        assert usage["usage_status"] == "partial" and usage["cache_read_tokens"] < served, usage
    else:  # Codex counts it in its running totals
        assert usage["usage_status"] == "complete" and usage["cache_read_tokens"] == served, usage
    assert lab.server.count_inputs_containing(COMPACT_TASK) == 1


def _last_user_message(request: RecordedRequest) -> str:
    """The request's newest user message, as JSON: with Claude, the tool's result and the
    prompts queued with it; with Codex, the message steered into the turn."""
    body = request.body or {}
    items = body.get("messages") if request.api == "anthropic" else body.get("input")
    users = [i for i in items or [] if isinstance(i, dict) and i.get("role") == "user"]
    return json.dumps(users[-1] if users else None)


@pytest.mark.parametrize(
    "lab", [*newest_of_each("claude_steered"), *newest_of_each("codex_steered")], indirect=True
)
async def test_a_message_a_person_sends_into_a_running_turn_is_named_in_its_outcome(
    lab: LabSession, tmp_path: Path
) -> None:
    """While AKK's Turn works, the person at the pane sends a message of their own. Claude
    queues it and takes it in with the tool's result; Codex steers it into the turn. The
    model gets it once, inside the Turn, and the final reply may answer it: the Turn ends
    `done` with that reply, and its outcome and summary say a person added one message. The
    next task is a Turn of its own, with none."""
    async with controller(lab, tmp_path) as ctl:
        turn_id = await running(lab, ctl, STEER_TASK)
        await lab.submit(PERSON_TASK)
        await lab.wait_for_screen(
            lambda s: HELD_MESSAGE[lab.agent] in s, 10, what="the message held"
        )
        lab.server.signal(SLOW_SIGNAL)
        event = await outcome(ctl, turn_id, timeout=40)
        status = (await ctl.call("status", {"turn_id": turn_id}))["turn"]
        after = await _send(ctl, ECHO_TASK, "after")
        next_event = await outcome(ctl, after)
    assert (event["kind"], event["outcome"]["final_message"]) == ("done", STEER_REPLY), event
    assert event["outcome"]["person_messages"] == status["person_messages"] == 1, event
    assert event["summary"] == (
        f"{STEER_REPLY} (a person at the pane added 1 message to this task)"
    ), event
    assert (next_event["kind"], next_event["outcome"]["person_messages"]) == ("done", 0)
    assert lab.server.count_inputs_containing(STEER_TASK) == 1
    carried = [r for r in lab.server.main_requests() if PERSON_TASK in _last_user_message(r)]
    assert len(carried) == 1, lab.server.summary()
    assert carried[0].index < next(
        r.index for r in lab.server.main_requests() if ECHO_TASK in r.newest_input
    )


SEND_NOW = ("C-x", "C-s")
"""The keys that send Claude's queued message at once (2.1.328 and 2.1.332 say so under it:
"ctrl+x ctrl+s to send now"; 2.1.263-2.1.267 keep it queued)."""


@pytest.mark.parametrize("lab", lab_params("slow", agents=("claude",))[3:], indirect=True)
async def test_a_message_a_person_sends_at_once_ends_the_turn_with_it_named(
    lab: LabSession, tmp_path: Path
) -> None:
    """While AKK's Turn streams its reply, the person queues a message and sends it at once.
    Claude cuts the reply (it writes no interruption) and sends the person's message below
    it: its reply ends the conversation's turn. AKK's Turn ends `done` there, with that reply
    and one person's message named, at once. Before, it found no end of its own in the file
    and ran on until its deadline. The next task is a Turn of its own."""
    async with controller(lab, tmp_path) as ctl:
        turn_id = await running(lab, ctl, SLOW_TASK)
        await lab.submit(PERSON_TASK)
        await lab.wait_for_screen(lambda s: "to send now" in s, 10, what="the message queued")
        await lab.send_keys(*SEND_NOW)
        event = await outcome(ctl, turn_id, timeout=20)
        lab.server.signal(SLOW_SIGNAL)  # end the cut stream, whatever the client left of it
        after = await _send(ctl, ECHO_TASK, "after")
        next_event = await outcome(ctl, after)
    assert (event["kind"], event["outcome"]["final_message"]) == ("done", DEFAULT_REPLY.text)
    assert event["outcome"]["person_messages"] == 1, event
    assert event["summary"].endswith("(a person at the pane added 1 message to this task)")
    assert (next_event["kind"], next_event["outcome"]["person_messages"]) == ("done", 0)
    assert lab.server.count_inputs_containing(PERSON_TASK) == 1
    slow = [r for r in lab.server.main_requests() if _slow_task(r)]
    theirs = [r for r in lab.server.main_requests() if PERSON_TASK in r.newest_input]
    assert len(slow) == len(theirs) == 1 and slow[0].index < theirs[0].index


QUEUE_KEY = {"claude": "Enter", "codex": "Tab"}
"""The key that queues a message a person types while the agent works, for after its turn.
Claude queues on Enter, and takes the message in at the next tool result, if any; Codex's
Enter steers it into the turn, its Tab queues it."""


@pytest.mark.parametrize("lab", newest_of_each("slow"), indirect=True)
async def test_a_message_a_person_queues_for_after_the_turn_is_a_turn_of_its_own(
    lab: LabSession, tmp_path: Path
) -> None:
    """A message the person queues while AKK's Turn streams its reply, with no tool call
    left, goes to the agent after the Turn's end, as a turn of its own. The Turn ends `done`
    with its own reply, not the reply to the person's message, and counts no person's
    message."""
    async with controller(lab, tmp_path) as ctl:
        turn_id = await running(lab, ctl, SLOW_TASK)
        await lab.type_text(PERSON_TASK)
        await lab.wait_for_screen(lambda s: PERSON_TASK in s, 10, what="the person's draft")
        await lab.send_keys(QUEUE_KEY[lab.agent])
        await lab.wait_for_screen(lambda s: "queued" in s.lower(), 10, what="the message queued")
        lab.server.signal(SLOW_SIGNAL)
        event = await outcome(ctl, turn_id, timeout=40)
        theirs = await lab.server.wait_for_request(
            lambda r: not r.auxiliary and PERSON_TASK in r.newest_input, timeout=20
        )
    assert (event["kind"], event["outcome"]["final_message"]) == ("done", SLOW_REPLY), event
    assert event["outcome"]["person_messages"] == 0, event
    assert lab.server.count_inputs_containing(PERSON_TASK) == 1
    slow = [r for r in lab.server.main_requests() if _slow_task(r)]
    assert len(slow) == 1 and slow[0].index < theirs.index, lab.server.summary()


@pytest.mark.parametrize(
    "lab", lab_params("claude_background_agent", agents=("claude",))[::4], indirect=True
)
async def test_a_pane_with_a_background_agent_takes_a_task(lab: LabSession, tmp_path: Path) -> None:
    """A Turn leaves an agent running in the background: Claude lists it under the composer.
    The pane still reads idle, takes the next task, and that Turn ends `done` with its own
    reply, although the background agent ended while it ran (Claude notes that)."""
    async with controller(lab, tmp_path) as ctl:
        first = await _send(ctl, BACKGROUND_TASK, "first")
        assert (await outcome(ctl, first))["kind"] == "done"
        await lab.wait_for_screen(lambda s: "● main" in s, 10, what="the list of agents")
        turn_id = await _send(ctl, BACKGROUND_NEXT, "next")
        await lab.server.wait_for_request(
            lambda r: not r.auxiliary and BACKGROUND_NEXT in r.newest_input, timeout=20
        )
        lab.server.signal(BACKGROUND_SIGNAL)  # the agent ends while the Turn runs
        errand = await lab.server.wait_for_request(
            lambda r: not r.auxiliary and BACKGROUND_WORK in r.newest_input, timeout=20
        )
        assert (await lab.server.wait_for_outcome(errand.index, timeout=20)) == "completed"
        lab.server.signal(SLOW_SIGNAL)
        event = await outcome(ctl, turn_id, timeout=40)
        # Claude notes the agent's end once the Turn is over: its own next turn, not the Turn's.
        await lab.wait_for_screen(lambda s: '"lab errand" finished' in s, 20, what="the note")
    assert event["kind"] == "done", event
    assert event["outcome"]["final_message"] == BACKGROUND_NEXT_REPLY, event
    assert event["outcome"]["person_messages"] == 0, event  # Claude's note is no person's
    assert lab.server.count_inputs_containing(BACKGROUND_TASK) == 1
    assert lab.server.count_inputs_containing(BACKGROUND_NEXT) == 1


@pytest.mark.parametrize("lab", lab_params("slow", agents=("codex",))[-1:], indirect=True)
async def test_no_activity_for_the_inactivity_window_is_stalled(
    lab: LabSession, tmp_path: Path
) -> None:
    async with controller(lab, tmp_path, TurnSettings(inactivity_minutes=3 / 60)) as ctl:
        turn_id = await _send(ctl, SLOW_TASK)
        event = await outcome(ctl, turn_id, timeout=30)
    assert event["kind"] == "stalled", event


@pytest.mark.parametrize("lab", lab_params("slow", agents=("claude",))[-1:], indirect=True)
async def test_past_the_lifetime_is_timed_out(lab: LabSession, tmp_path: Path) -> None:
    async with controller(lab, tmp_path, TurnSettings(lifetime_minutes=4 / 60)) as ctl:
        turn_id = await _send(ctl, SLOW_TASK)
        event = await outcome(ctl, turn_id, timeout=30)
    assert event["kind"] == "timed_out", event


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("api_error_once", agents=("claude",))[-1:],
        *lab_params("api_error", agents=("codex",))[-1:],
    ],
    indirect=True,
)
async def test_an_api_error_fails_the_turn(lab: LabSession, tmp_path: Path) -> None:
    """The Turn fails with the agent's error, and the pane takes the next task. Every later
    send used to be refused `not_idle`: Claude 2.1.328 on writes a dim hint into the empty
    composer ("Once fixed, resend your message"), read as a draft, and Codex 0.155.1 on
    closes the turn with its red error and no turn-end line, read as still working."""
    async with controller(lab, tmp_path) as ctl:
        turn_id = await _send(ctl, ERROR_TASK)
        event = await outcome(ctl, turn_id)
        status = await ctl.call("status", {"turn_id": turn_id})
        again = await outcome(ctl, await _send(ctl, ERROR_TASK, "r2"))
    assert event["kind"] == "failed", event
    assert status["turn"]["reason"] == "agent_error"
    assert "lab: simulated" in event["summary"]
    assert again["kind"] == "failed", again
    sent = [r for r in lab.server.main_requests() if ERROR_TASK in r.newest_input]
    assert len(sent) == 2, lab.server.summary()


@pytest.mark.parametrize("lab", lab_params("slow", agents=("claude", "codex"))[::4], indirect=True)
async def test_the_agent_process_ending_fails_the_turn(lab: LabSession, tmp_path: Path) -> None:
    async with controller(lab, tmp_path) as ctl:
        turn_id = await _send(ctl, SLOW_TASK)
        await lab.server.wait_for_request(
            lambda r: not r.auxiliary and SLOW_TASK in r.newest_input, timeout=20
        )
        os.kill(lab.agent_pid, signal.SIGKILL)
        event = await outcome(ctl, turn_id, timeout=30)
        status = await ctl.call("status", {"turn_id": turn_id})
    assert event["kind"] == "failed", event
    assert status["turn"]["reason"] == "terminal_gone"


async def _shell_pane(lab: LabSession) -> str:
    """A pane under the lab's own whose interactive shell (with job control, as a person's)
    runs the lab's client command line; its pane id."""
    shell = "bash --noprofile --norc -i"
    pane = await lab.tmux(
        "split-window", "-d", "-v", "-P", "-F", "#{pane_id}", "-t", lab.pane,
        "-c", str(lab.workdir), shell,
    )  # fmt: skip
    await lab.tmux("send-keys", "-t", pane.strip(), "-l", shlex.join(lab.argv))
    await lab.tmux("send-keys", "-t", pane.strip(), "Enter")
    return pane.strip()


async def _row(ctl: Controller, pane: str, state: str) -> dict[str, Any]:
    """The row of ``pane`` once its observation is ``state``."""
    with trio.fail_after(30):
        while True:
            rows = (await ctl.call("list"))["terminals"]
            if any((row := r)["pane"] == pane and r["observation"]["state"] == state for r in rows):
                return row
            await trio.sleep(0.05)


@pytest.mark.parametrize("lab", newest_of_each("slow"), indirect=True)
async def test_an_agent_the_person_suspends_and_resumes_ends_its_turn_done(
    lab: LabSession, tmp_path: Path
) -> None:
    """The person suspends the agent from its shell (Ctrl-Z) while a Turn runs, then resumes
    it (`fg`). Suspended, the pane shows the shell: `unknown`, the same terminal, the Turn
    running on. Resumed, the Turn ends `done` with its own reply."""
    pane = await _shell_pane(lab)
    async with controller(lab, tmp_path) as ctl:
        row = await _row(ctl, pane, "idle")
        turn_id = await running(lab, ctl, SLOW_TASK, row["terminal_id"])
        await lab.tmux("send-keys", "-t", pane, "C-z")
        stopped = await _row(ctl, pane, "unknown")
        shown = await lab.tmux("display", "-p", "-t", pane, "#{pane_current_command}")
        state = (await ctl.call("status", {"turn_id": turn_id}))["turn"]["state"]
        await lab.tmux("send-keys", "-t", pane, "-l", "fg")
        await lab.tmux("send-keys", "-t", pane, "Enter")
        resumed = await _row(ctl, pane, "working")
        lab.server.signal(SLOW_SIGNAL)
        event = await outcome(ctl, turn_id, timeout=30)
    assert shown.strip() == "bash"  # the shell is in the foreground, the agent stopped
    assert state == "running"
    assert stopped["terminal_id"] == resumed["terminal_id"] == row["terminal_id"]
    assert (event["kind"], event["outcome"]["final_message"]) == ("done", SLOW_REPLY), event
    assert lab.server.count_inputs_containing(SLOW_TASK) == 1


def _prompt_rows(screen: str) -> list[str]:
    """The pane's rows from the permission prompt's header down (Claude animates its logo
    above, on its own)."""
    rows = screen.splitlines()
    top = min(i for i, row in enumerate(rows) if "Bash command" in row or "Would you like" in row)
    return rows[top:]


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("claude_bash", agents=("claude",))[-1:],
        *lab_params("codex_exec", agents=("codex",))[-1:],
    ],
    indirect=True,
)
async def test_a_send_to_a_pane_showing_a_prompt_is_refused(
    lab: LabSession, tmp_path: Path
) -> None:
    """A person's task asks for permission: AKK types nothing into the prompt."""
    async with (
        serving(lab, tmp_path, "ctl") as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        row = await idle_terminal(ctl)
        await lab.submit(RUN_TASK)
        with trio.fail_after(20):
            while (await ctl.call("list"))["terminals"][0]["activity_state"] != (
                "awaiting_approval"
            ):
                await trio.sleep(0.05)
        before = _prompt_rows(await lab.text())
        with pytest.raises(AkkError) as refused:
            await ctl.call(
                "send",
                {
                    "terminal_id": row["terminal_id"],
                    "request": "lab: now",
                    "client_request_id": "p",
                },
            )
        assert refused.value.reason == "not_idle"
        assert "permission" in refused.value.message
        assert served.keys is not None and served.keys.keys() == []  # zero keys, at the key layer
        assert _prompt_rows(await lab.text()) == before
        assert (await ctl.call("list"))["turns"] == []
    assert lab.server.count_inputs_containing("lab: now") == 0
