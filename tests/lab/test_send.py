"""Managed Turns against the real pinned clients: the model server is the oracle.

A controller sends a task into a lab pane through `akk serve`; the model server
must receive it exactly once, byte-exact, and the controller must get exactly
one durable outcome with the agent's reply and the usage the model reported.
Refusals send zero keys: neither the pane nor the model server sees anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from akk import faults
from akk.backends.terminal.follow import STRANDED_SECONDS
from akk.client import AkkError, Controller, connect
from akk.profiles.registry import PINNED
from akk.qualify.launcher import LabSession
from akk.qualify.model_server import RecordedRequest
from akk.qualify.plans.claude import CLAUDE_STATUS_LINE
from akk.qualify.run_files import Preseed
from akk.qualify.scenarios import (
    DEFAULT_REPLY,
    ECHO_REPLY,
    ECHO_TASK,
    HELD_TASK,
    SLOW_SIGNAL,
    SLOW_TASK,
)
from akk.store.database import open_reader
from tests.lab.conftest import LabSpec, lab_params, newest_of_each
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess, idle_terminal, outcome, outcomes, serving

PERSON_TASK = "lab: a task of the person's own"
HELD_MESSAGE = {"claude": "Press up to edit queued messages", "codex": "Messages to be submitted"}
"""What each client shows while a message a person sent during a turn waits for the turn."""


def _below_banner(screen: str) -> list[str]:
    """The pane's rows under the client's banner (Claude animates its logo on its own)."""
    rows = screen.splitlines()
    return rows[
        next(i for i, row in enumerate(rows) if "Code v" in row or "OpenAI Codex" in row) + 3 :
    ]


def _slow_task(request: RecordedRequest) -> bool:
    """The slow task's conversation request (a title request may quote it too)."""
    return not request.auxiliary and SLOW_TASK in request.newest_input


def _task_requests(lab: LabSession, text: str) -> list[RecordedRequest]:
    return [r for r in lab.server.main_requests() if text in r.newest_input]


def _usage_reported(lab: LabSession) -> tuple[int, int, int, int]:
    """(input, output, cache read, cache write) the model server reported for the Turn.

    The lab's OpenAI replies carry no cache-creation count, so Codex's cache write is 0.
    """
    requests = lab.server.main_requests()
    return (
        sum(r.usage.input_tokens for r in requests),
        sum(r.usage.output_tokens for r in requests),
        sum(r.usage.cache_read_input_tokens for r in requests),
        0 if lab.agent == "codex" else sum(r.usage.cache_creation_input_tokens for r in requests),
    )


_SETUPS = [
    # Codex drawn inline (`--no-alt-screen`), and a Claude whose user statusLine hides
    # "esc to interrupt" while it works (2.1.263): one version each.
    LabSpec(clients.get("codex", "0.171.0"), "echo", preseed=Preseed(codex_alt_screen=False)),
    LabSpec(
        clients.get("claude", "2.1.263"),
        "echo",
        preseed=Preseed(claude_status_line=CLAUDE_STATUS_LINE),
    ),
]


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("echo"),
        *(pytest.param(spec, id=f"{spec.id}-{name}", marks=pytest.mark.lab)
          for spec, name in zip(_SETUPS, ("inline", "status_line"), strict=True)),
    ],
    indirect=True,
)  # fmt: skip
async def test_send_reaches_the_model_once_and_done_carries_reply_and_usage(
    lab: LabSession, tmp_path: Path
) -> None:
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        row = await idle_terminal(ctl)
        sent = await ctl.call(
            "send",
            {"terminal_id": row["terminal_id"], "request": ECHO_TASK, "client_request_id": "r1"},
        )
        assert sent["state"] in ("dispatching", "running")
        event = await outcome(ctl, sent["turn_id"])
        assert event["kind"] == "done", event
        status = await ctl.call("status", {"turn_id": sent["turn_id"]})
    turn = status["turn"]
    assert [d["stage"] for d in status["dispatches"]] == ["accepted"]
    # The far end: exactly once, byte-exact.
    requests = _task_requests(lab, ECHO_TASK)
    assert len(requests) == 1, lab.server.summary()
    assert requests[0].newest_input.strip() == ECHO_TASK
    assert ECHO_REPLY in (turn["final_message"] or "")
    assert turn["evidence"]["status"] == "bound", turn["evidence"]
    assert turn["session_id"]
    usage = turn["usage"]
    assert usage["usage_status"] == "complete"
    counted = (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["cache_read_tokens"],
        usage["cache_write_tokens"],
    )
    assert counted == _usage_reported(lab)
    assert event["outcome"]["usage"] == usage


OTHER_PANE_TASK = "lab: a task for the other pane"


@pytest.mark.parametrize(
    "lab",
    newest_of_each("echo"),
    indirect=True,
)
async def test_two_agents_in_one_project_each_end_with_their_own_reply(
    lab: LabSession, tmp_path: Path
) -> None:
    """A person runs the same agent twice in one project, in two panes: the same project
    folder of session files, both written at once. Each Turn is bound to its own process's
    file (never "the newest"), and ends with its own reply and session."""
    # The same command line, environment and folder as the lab's own pane, in a pane under it.
    await lab.tmux("split-window", "-d", "-v", "-t", lab.pane, "-c", str(lab.workdir), *lab.argv)
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        with trio.fail_after(30):
            while True:
                rows = (await ctl.call("list"))["terminals"]
                if len(rows) == 2 and all(r["observation"]["state"] == "idle" for r in rows):
                    break
                await trio.sleep(0.05)
        assert {row["cwd"] for row in rows} == {str(lab.workdir)}
        tasks = {row["terminal_id"]: task for row, task in zip(
            sorted(rows, key=lambda row: row["pane"] != lab.pane), (ECHO_TASK, OTHER_PANE_TASK),
            strict=True)}  # fmt: skip
        sent = {
            terminal_id: await ctl.call(
                "send", {"terminal_id": terminal_id, "request": task, "client_request_id": task}
            )
            for terminal_id, task in tasks.items()
        }
        # Both run at once, and either may end first.
        ended = await outcomes(ctl, [s["turn_id"] for s in sent.values()])
        events = {terminal_id: ended[s["turn_id"]] for terminal_id, s in sent.items()}
        turns = [
            (await ctl.call("status", {"turn_id": s["turn_id"]}))["turn"] for s in sent.values()
        ]
    replies = {ECHO_TASK: ECHO_REPLY, OTHER_PANE_TASK: DEFAULT_REPLY.text}
    for terminal_id, event in events.items():
        assert event["kind"] == "done", event
        assert event["outcome"]["final_message"] == replies[tasks[terminal_id]], event
    assert [turn["evidence"]["status"] for turn in turns] == ["bound", "bound"]
    assert turns[0]["session_id"] != turns[1]["session_id"]
    assert lab.server.count_inputs_containing(ECHO_TASK) == 1
    assert lab.server.count_inputs_containing(OTHER_PANE_TASK) == 1
    # Both panes' files lie in the one project folder (Claude) or the day's folder (Codex).
    assert len({path.parent for path in lab.transcript_files()}) == 1


TEXTS = {
    "multiline": "lab: first line\nsecond line with 'quotes' and \"double\"\nthird; line",
    "metachars": "lab: echo ${HOME} && ls | grep x > /dev/null; `date` $(id) *?[] ~ \\ ;",
    "unicode": "lab: 漢字 かな 한국어 emoji 🎉 café — naïve",
    "long799": "lab: " + "x" * 794,
    "long800": "lab: " + "y" * 795,
    "long5000": "lab: " + ("0123456789 " * 455)[:4995],
}


@pytest.mark.parametrize(
    "lab",
    newest_of_each("echo"),
    indirect=True,
)
async def test_texts_arrive_byte_exact(lab: LabSession, tmp_path: Path) -> None:
    # One pane per client takes every text in turn (none is the echo task: each gets the
    # default reply), each under its own `akk serve`, counted from its own first request.
    for text_name in sorted(TEXTS):
        try:
            await _text_arrives_byte_exact(lab, tmp_path / text_name, TEXTS[text_name])
        except BaseException as exc:
            exc.add_note(f"text {text_name!r} on {lab.agent} {lab.version}")
            raise


async def _text_arrives_byte_exact(lab: LabSession, tmp_path: Path, text: str) -> None:
    first = len(lab.server.requests)
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        row = await idle_terminal(ctl)
        sent = await ctl.call(
            "send", {"terminal_id": row["terminal_id"], "request": text, "client_request_id": "t"}
        )
        event = await outcome(ctl, sent["turn_id"])
    assert event["kind"] == "done", event
    # Byte-exact as the client delivers it (2.1.328 wraps a collapsed paste in a tag).
    profile = PINNED.bind(lab.agent, lab.version).profile
    assert profile is not None
    delivered = profile.typing.delivered(text, profile.typing.method_for(text), lab.rows)
    turns = [r for r in lab.server.main_requests() if r.index >= first]
    matching = [r for r in turns if delivered.fullmatch(r.newest_input)]
    assert len(matching) == 1, lab.server.summary()


@pytest.mark.parametrize("lab", lab_params("slow"), indirect=True)
async def test_refusals_send_zero_keys(lab: LabSession, tmp_path: Path) -> None:
    """Each refusal writes no key at all (the key layer's own record says so), and after the
    Turn ended the pane and the model still show none of the refused texts."""
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        assert served.keys is not None
        keys = served.keys.keys

        async def refused(params: dict[str, object], reason: str, method: str = "send") -> None:
            before = len(keys())
            with pytest.raises(AkkError) as raised:
                await ctl.call(method, params)
            assert raised.value.reason == reason, (params, raised.value)
            assert keys()[before:] == [], params

        row = await idle_terminal(ctl)
        terminal_id = row["terminal_id"]
        # A person's draft in the composer: not idle, and the draft stays as it is.
        await lab.type_text("a draft by the person")
        await lab.wait_for_screen(lambda s: "a draft by the person" in s, 10)
        before = _below_banner(await lab.text())
        await refused(
            {"terminal_id": terminal_id, "request": "lab: x", "client_request_id": "d"}, "not_idle"
        )
        assert _below_banner(await lab.text()) == before
        with trio.fail_after(30):  # list offers neither send nor watch over the draft
            while (row := await idle_terminal(ctl))["observation"]["state"] != "idle_draft":
                await trio.sleep(0.05)
        assert [a["method"] for a in row["available_actions"]] == ["status"], row
        await lab.send_keys("C-u")
        await lab.wait_idle(10)
        with trio.fail_after(30):  # AKK sees the emptied composer too
            while (row := await idle_terminal(ctl))["observation"]["state"] != "idle":
                await trio.sleep(0.05)
        assert [a["method"] for a in row["available_actions"]] == ["status", "send"], row
        # Texts no screen of this composer could prove: refused before a key, the pane idle.
        unprovable = ["lab: see [Pasted text #1 +2 lines] and [Pasted Content 9 chars]"]
        if lab.agent == "codex":  # Codex's breaks inside CJK text are not modelled
            unprovable.append("lab: " + "漢字" * 60)
        for text in unprovable:
            await refused(
                {"terminal_id": terminal_id, "request": text, "client_request_id": "u"},
                "invalid_params",
            )
        # The slow task holds the pane working.
        sent = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": SLOW_TASK, "client_request_id": "s"}
        )
        await lab.server.wait_for_request(
            lambda r: not r.auxiliary and SLOW_TASK in r.newest_input, timeout=20
        )
        typed = len(keys())
        assert typed >= 2  # the task's text and its Enter
        for request_id in ("w1", "w2"):
            await refused(
                {
                    "terminal_id": terminal_id,
                    "request": "lab: more",
                    "client_request_id": request_id,
                },
                "conflict",
            )
        # The same client_request_id returns the original record, typing nothing.
        again = await ctl.call(
            "send", {"terminal_id": terminal_id, "request": SLOW_TASK, "client_request_id": "s"}
        )
        assert again["turn_id"] == sent["turn_id"]
        assert len(keys()) == typed
        await refused(
            {"terminal_id": terminal_id, "request": "lab: other", "client_request_id": "s"},
            "conflict",
        )
        await refused(
            {"terminal_id": "nope", "request": "lab: x", "client_request_id": "n"}, "not_found"
        )
        for bad in ("", "   ", "lab: \x1b[2J", "lab: x\ud800y", "lab: \udcc2\udc9b"):
            await refused(
                {"terminal_id": terminal_id, "request": bad, "client_request_id": "b"},
                "invalid_params",
            )
        lab.server.signal(SLOW_SIGNAL)
        assert (await outcome(ctl, sent["turn_id"]))["kind"] == "done"
        # A done Turn has nothing to cancel or answer (conflict: its outcome stands); once
        # closed, it takes no such call (closed).
        answers: list[tuple[str, dict[str, object]]] = [
            ("cancel", {}),
            ("approve", {"decision": "approve_once"}),
            ("respond_interaction", {"interaction_id": "int_gone", "answers": []}),
        ]
        for method, params in answers:
            await refused({"turn_id": sent["turn_id"]} | params, "conflict", method)
        await ctl.call("close", {"turn_id": sent["turn_id"]})
        for method, params in answers:
            await refused({"turn_id": sent["turn_id"]} | params, "closed", method)
        # After the Turn ended: still only the task's keys, once at the model, none of the rest.
        await lab.wait_idle(20)
        assert len(keys()) == typed
        screen = await lab.text()
        assert lab.server.count_inputs_containing(SLOW_TASK) == 1
        for never in ("lab: more", "lab: other", "lab: x", "lab: see", "lab: 漢字"):
            assert never not in screen
            assert lab.server.count_inputs_containing(never) == 0, lab.server.summary()


@pytest.mark.parametrize("lab", lab_params("slow"), indirect=True)
async def test_cancel_interrupts_a_slow_stream(lab: LabSession, tmp_path: Path) -> None:
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        turn_id = await _cancelled_while_running(lab, ctl, SLOW_TASK)
        event = await outcome(ctl, turn_id)
    assert event["kind"] == "cancelled", event
    await lab.wait_idle(20)
    assert lab.server.count_inputs_containing(SLOW_TASK) == 1
    # The interrupt key's step ends proven, not open or uncertain: it holds no terminal, and
    # the settled Turn is retention's to prune.
    conn = open_reader(served.state.store_path)
    try:
        steps = list(
            conn.execute(
                "SELECT kind, stage FROM dispatches WHERE turn_id = ? ORDER BY created_at",
                (turn_id,),
            )
        )
    finally:
        conn.close()
    assert steps == [("task", "accepted"), ("cancel", "accepted")]


@pytest.mark.parametrize("lab", lab_params("held"), indirect=True)
async def test_cancel_before_any_reply_settles_at_once(lab: LabSession, tmp_path: Path) -> None:
    """Esc before the reply's first byte. Codex draws and records the interruption; every
    pinned Claude writes none and takes the task back into its composer. Either way the
    Turn is cancelled (a withdrawn task named so), and the task waits where Claude put it:
    never typed or submitted again, and the pane takes no new task over it."""
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        assert served.keys is not None
        turn_id = await _cancelled_while_running(lab, ctl, HELD_TASK)
        event = await outcome(ctl, turn_id, timeout=20)
        typed = len(served.keys.keys())
        status = await ctl.call("status", {"turn_id": turn_id})
        if lab.agent == "claude":
            with pytest.raises(AkkError) as over_it:
                await ctl.call(
                    "send",
                    {"terminal_id": status["turn"]["terminal_id"], "request": ECHO_TASK,
                     "client_request_id": "over"},
                )  # fmt: skip
            assert over_it.value.reason == "not_idle", over_it.value
        screen = await lab.text()
    assert event["kind"] == "cancelled", event
    withdrawn = lab.agent == "claude"
    assert status["turn"]["reason"] == ("withdrawn" if withdrawn else None), status["turn"]
    assert ("put the task back in its composer" in event["summary"]) is withdrawn, event
    assert [(d["kind"], d["stage"]) for d in status["dispatches"]] == [
        ("task", "accepted"), ("cancel", "accepted")]  # fmt: skip
    assert len(served.keys.keys()) == typed  # nothing typed since the outcome
    in_composer = [line for line in screen.splitlines() if line.startswith("❯")]
    # Claude's composer glyph, then a no-break space: the task is back in it.
    assert ([f"❯\xa0{HELD_TASK}"] == in_composer) is withdrawn, screen
    assert lab.server.count_inputs_containing(HELD_TASK) == 1
    assert lab.server.count_inputs_containing(ECHO_TASK) == 0


@pytest.mark.parametrize("lab", lab_params("held", agents=("claude",))[-1:], indirect=True)
async def test_a_task_a_person_escapes_before_any_reply_is_withdrawn(
    lab: LabSession, tmp_path: Path
) -> None:
    """The person at the pane presses Escape (AKK sends nothing): Claude takes the task back
    into its composer. The Turn is cancelled as withdrawn, the interrupt named as not
    AKK's; once the person clears the composer, the pane takes the next task."""
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        assert served.keys is not None
        turn_id = await running(lab, ctl, HELD_TASK)
        typed = len(served.keys.keys())
        await lab.send_keys("Escape")
        event = await outcome(ctl, turn_id, timeout=20)
        status = await ctl.call("status", {"turn_id": turn_id})
        assert len(served.keys.keys()) == typed  # AKK pressed nothing
        await lab.send_keys("C-u")  # the person clears the task from the composer
        await lab.wait_idle(10)
        with trio.fail_after(30):  # AKK sees the emptied composer too
            while (row := await idle_terminal(ctl))["observation"]["state"] != "idle":
                await trio.sleep(0.05)
        after = await ctl.call(
            "send",
            {"terminal_id": row["terminal_id"], "request": ECHO_TASK, "client_request_id": "e"},
        )
        assert (await outcome(ctl, after["turn_id"]))["kind"] == "done"
    assert event["kind"] == "cancelled" and "an interrupt not from AKK" in event["summary"], event
    assert "back in its composer" in event["summary"], event
    assert status["turn"]["reason"] == "withdrawn"
    assert [d["kind"] for d in status["dispatches"]] == ["task"]
    assert lab.server.count_inputs_containing(HELD_TASK) == 1
    assert lab.server.count_inputs_containing(ECHO_TASK) == 1


@pytest.mark.parametrize(
    ("lab", "own"),
    [
        pytest.param(*spec.values, own, id=f"{spec.id}-{person}", marks=spec.marks)
        for person, own, specs in [
            ("replaced", PERSON_TASK, lab_params("held", agents=("claude",))),
            ("cleared", None, lab_params("held", agents=("claude",))[::4]),
        ]
        for spec in specs
    ],
    indirect=["lab"],
)
async def test_a_task_a_person_takes_back_before_any_reply_is_withdrawn(
    lab: LabSession, tmp_path: Path, own: str | None
) -> None:
    """The person presses Escape, then at once clears the task Claude took back, and may send
    one of their own. Claude's file goes on without AKK's prompt (another branch of the
    conversation), or nothing follows it at all: either way the Turn is cancelled as
    withdrawn, the person's task is not taken for it, and the pane takes the next task. The
    first task gives the prompt a parent, as in any conversation but the first."""
    async with (
        serving(lab, tmp_path) as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        assert served.keys is not None
        row = await idle_terminal(ctl)
        first = await ctl.call(
            "send",
            {"terminal_id": row["terminal_id"], "request": ECHO_TASK, "client_request_id": "e"},
        )
        assert (await outcome(ctl, first["turn_id"]))["kind"] == "done"
        turn_id = await running(lab, ctl, HELD_TASK)
        typed = len(served.keys.keys())
        await lab.send_keys("Escape")
        await person_takes_back(lab, ctl, HELD_TASK, own)
        event = await outcome(ctl, turn_id, timeout=20)
        status = await ctl.call("status", {"turn_id": turn_id})
        assert len(served.keys.keys()) == typed  # AKK pressed nothing
        if own is None:  # the pane is free for the next task
            row = await idle_terminal(ctl)
            after = await ctl.call(
                "send",
                {"terminal_id": row["terminal_id"], "request": ECHO_TASK, "client_request_id": "a"},
            )
            assert (await outcome(ctl, after["turn_id"]))["kind"] == "done"
    assert event["kind"] == "cancelled", event
    where = "another prompt was sent at the pane" if own else "where a person cleared or changed it"
    assert where in event["summary"], event
    assert status["turn"]["reason"] == "withdrawn"
    assert status["turn"]["final_message"] is None  # the person's task's reply is not the Turn's
    assert [d["kind"] for d in status["dispatches"]] == ["task"]
    assert lab.server.count_inputs_containing(HELD_TASK) == 1
    assert lab.server.count_inputs_containing(PERSON_TASK) == (1 if own else 0)


@pytest.mark.parametrize("lab", lab_params("held", agents=("claude",))[-1:], indirect=True)
async def test_a_task_taken_back_while_akk_is_down_is_withdrawn_when_it_returns(
    lab: LabSession, tmp_path: Path
) -> None:
    """AKK is killed while its Turn waits for the first reply. The person presses Escape,
    Claude takes the task back into its composer, and the person clears it: nothing of the
    taking back is left to see when AKK returns. The pane idle over the prompt its file
    holds unanswered withdraws the Turn (`STRANDED_SECONDS`), and the pane takes the next
    task. It used to stay running until its deadline, the pane taking no task all that
    time."""
    akk = AkkProcess(lab, tmp_path)
    try:
        url = akk.start(None)
        async with connect(url, akk.tokens["ctl"]) as ctl:
            await _echo_done(ctl, "e")
            turn_id = await running(lab, ctl, HELD_TASK)
        akk.kill()
        await lab.send_keys("Escape")
        back = f"❯\xa0{HELD_TASK}"
        await lab.wait_for_screen(lambda s: back in s.splitlines(), 10, what="the task back")
        await lab.send_keys("C-u")
        await lab.wait_for_screen(lambda s: back not in s.splitlines(), 10, what="it cleared")
        url = akk.start(None)
        async with connect(url, akk.tokens["ctl"]) as ctl:
            event = await outcome(ctl, turn_id, timeout=STRANDED_SECONDS + 20)
            status = await ctl.call("status", {"turn_id": turn_id})
            await _echo_done(ctl, "a")  # the pane takes the next task
    finally:
        akk.kill()
    assert event["kind"] == "cancelled", event
    assert "taken back while AKK did not see it" in event["summary"], event
    assert status["turn"]["reason"] == "withdrawn"
    assert [d["kind"] for d in status["dispatches"]] == ["task"]
    assert lab.server.count_inputs_containing(HELD_TASK) == 1
    assert lab.server.count_inputs_containing(ECHO_TASK) == 2


async def _echo_done(ctl: Controller, client_request_id: str) -> None:
    """The echo task sent to the idle pane ends done."""
    sent = await ctl.call(
        "send",
        {"terminal_id": (await idle_terminal(ctl))["terminal_id"], "request": ECHO_TASK,
         "client_request_id": client_request_id},
    )  # fmt: skip
    assert (await outcome(ctl, sent["turn_id"]))["kind"] == "done"


async def person_takes_back(lab: LabSession, ctl: Controller, task: str, own: str | None) -> None:
    """Once Claude shows ``task`` back in its composer, and AKK read it there, the person
    clears it at once, and sends ``own`` if given: well within the 2 s the restored composer
    alone would take to settle the Turn."""
    await lab.wait_for_screen(
        lambda screen: f"❯\xa0{task}" in screen.splitlines(), 10, what="the task back"
    )
    with trio.fail_after(30):
        while (await idle_terminal(ctl))["observation"]["state"] != "idle_draft":
            await trio.sleep(0.02)
    await lab.send_keys("C-u")
    if own is not None:
        await lab.type_text(own)
        await lab.send_keys("Enter")


async def _cancelled_while_running(lab: LabSession, ctl: Controller, task: str) -> str:
    """Send ``task``, and cancel its Turn once it runs (`running`); the turn_id."""
    turn_id = await running(lab, ctl, task)
    assert (await ctl.call("cancel", {"turn_id": turn_id}))["state"] == "cancelling"
    return turn_id


async def running(
    lab: LabSession, ctl: Controller, task: str, terminal_id: str | None = None
) -> str:
    """Send ``task`` to ``terminal_id`` (by default the idle lab pane); its turn_id once its
    request is at the model and the Turn running."""
    if terminal_id is None:
        terminal_id = (await idle_terminal(ctl))["terminal_id"]
    sent = await ctl.call(
        "send", {"terminal_id": terminal_id, "request": task, "client_request_id": task}
    )
    await lab.server.wait_for_request(
        lambda r: not r.auxiliary and task in r.newest_input, timeout=20
    )
    with trio.fail_after(20):
        while (await ctl.call("status", {"turn_id": sent["turn_id"]}))["turn"][
            "state"
        ] != "running":
            await trio.sleep(0.05)
    return str(sent["turn_id"])


async def _while_held(
    lab: LabSession,
    tmp_path: Path,
    text: str,
    shown: str,
    person: Callable[[], Awaitable[object]],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """With a fault-point delay holding the step after its text, send ``text`` to the idle
    pane, and once the pane shows ``shown`` the person acts; the send's result, the Turn's
    outcome event and its status."""
    faults.arm("text_injected:delay:1.5")
    try:
        async with (
            serving(lab, tmp_path) as served,
            connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
        ):
            row = await idle_terminal(ctl)
            result: dict[str, Any] = {}

            async def send() -> None:
                params = {"terminal_id": row["terminal_id"], "request": text,
                          "client_request_id": "h"}  # fmt: skip
                result.update(await ctl.call("send", params))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                await lab.wait_for_screen(lambda screen: shown in screen, 10, what=repr(shown))
                await person()
            event = await outcome(ctl, result["turn_id"])
            status = await ctl.call("status", {"turn_id": result["turn_id"]})
    finally:
        faults.disarm()
    return result, event, status


RESIZED_TASK = "lab: " + " ".join(f"word{i:03d}" for i in range(40))
"""A task over two rows at 120 columns and five at 80."""


@pytest.mark.parametrize("lab", newest_of_each("echo"), indirect=True)
async def test_a_task_typed_while_a_person_resizes_the_pane_is_proven_at_its_new_size(
    lab: LabSession, tmp_path: Path
) -> None:
    """A fault-point delay between AKK's text and its proof; the person resizes the pane
    meanwhile (a smaller terminal attached, a split). The client wraps the text anew, and
    AKK proves it at the size the pane has now, not the one it was listed at: Enter, `done`,
    the task at the model once and byte-exact."""
    _, event, status = await _while_held(
        lab, tmp_path, RESIZED_TASK, "word039",
        lambda: lab.tmux("resize-window", "-t", "lab", "-x", "80", "-y", "24"),
    )  # fmt: skip
    assert event["kind"] == "done", event
    assert [d["stage"] for d in status["dispatches"]] == ["accepted"]
    (request,) = _task_requests(lab, RESIZED_TASK)
    assert request.newest_input.strip() == RESIZED_TASK


@pytest.mark.parametrize(
    "lab",
    [*lab_params("echo", agents=("claude",))[:1], *lab_params("echo", agents=("codex",))[:1]],
    indirect=True,
)
async def test_a_person_typing_before_enter_gets_no_enter(lab: LabSession, tmp_path: Path) -> None:
    """A fault-point delay between AKK's text and its Enter; the person types meanwhile."""
    result, event, status = await _while_held(
        lab, tmp_path, "lab: mine", "lab: mine", lambda: lab.type_text(" and mine")
    )
    assert result["state"] == "failed"
    assert status["turn"]["reason"] == "composer_mismatch"
    assert [d["stage"] for d in status["dispatches"]] == ["aborted"]
    assert event["kind"] == "failed"
    # The person's text is intact in the composer, and nothing reached the model.
    assert "lab: mine and mine" in await lab.text()
    assert lab.server.count_inputs_containing("lab: mine") == 0


@pytest.mark.parametrize(
    "lab",
    newest_of_each("echo"),
    indirect=True,
)
async def test_an_unacked_event_comes_back_on_reconnect_and_only_to_its_owner(
    lab: LabSession, tmp_path: Path
) -> None:
    async with serving(lab, tmp_path, "ctl", "other") as served:
        async with connect(served.endpoint.url, served.tokens["ctl"]) as ctl:
            row = await idle_terminal(ctl)
            sent = await ctl.call(
                "send",
                {"terminal_id": row["terminal_id"], "request": ECHO_TASK, "client_request_id": "e"},
            )
            with trio.fail_after(60):
                async for first in ctl.events():  # not acked
                    if first["kind"] == "done":
                        break
        async with connect(served.endpoint.url, served.tokens["other"]) as other:
            with trio.move_on_after(1.5):
                async for stray in other.events():
                    raise AssertionError(f"another controller got {stray}")
            with pytest.raises(AkkError) as not_owner:
                await other.call("status", {"turn_id": sent["turn_id"]})
            assert not_owner.value.reason == "not_owner"
            with pytest.raises(AkkError) as not_theirs:
                await other.call("ack", {"event_id": first["event_id"]})
            assert not_theirs.value.reason == "not_found"
        async with connect(served.endpoint.url, served.tokens["ctl"]) as ctl:
            again = await outcome(ctl, sent["turn_id"], timeout=20)
            assert again["event_id"] == first["event_id"]
            assert again == first
