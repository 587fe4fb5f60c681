"""Hostile text against every pinned client: refused with a reason, zero keys, nothing at the model.

One set-up per client runs every probe of issue 26's findings 1, 3 and 6 (lone
surrogates, C1 smuggled in through surrogateescape, control, format, private
and unassigned characters, non-NFC text, and each version's specials: shell
mode, the command menu, mention and skills popups) through `send`, `respond`
and a free-text answer. Each refusal must write no key at all (the key layer's
own record, `served.keys`), the pane must stay usable for another controller
within a second, and afterwards the model server must have seen none of it.
"""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from akk import faults
from akk.client import AkkError, Controller
from akk.faults import Point
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tests.lab.test_interactions import free_text, prompt, reached, send_task, settled
from tools.lab.akk_runner import OUTCOMES, KeyLog, idle_terminal, outcome, two_controllers

# Every probe carries a marker (zq<n>zq) the model server must never see.
_COMMON = {
    "lone surrogate": "lab: zq1zq x\ud800y",
    "C1 through surrogateescape": "q\udcc2\udc9b201~w\udcc2\udc85e\udc9bx zq2zq",
    "C1 CSI": "lab: zq3zq \x9b201~",
    "escape": "lab: zq4zq \x1b[2J",
    "soft hyphen": "lab: zq5zq soft\u00adhyphen",
    "right-to-left override": "lab: zq6zq \u202eevil",
    "zero-width joiner": "lab: zq7zq a\u200db",
    "non-NFC": "lab: zq8zq cafe\u0301",
    "private use": "lab: zq9zq \ue000",
    "unassigned": "lab: zq10zq \u0378",
    "shell mode": "!touch zq11zq.txt",
    "command menu": "/help zq12zq",
    "mention popup": "lab: zq13zq see @README",
    "help": "? zq14zq",
}
_SPECIAL_PROBES = (
    "shell mode",
    "command menu",
    "mention popup",
    "help",
    "trailing backslash",
    "skills popup",
)
SEND_PROBES: dict[str, dict[str, str]] = {
    "claude": _COMMON | {"trailing backslash": "lab: zq15zq ends with \\"},
    "codex": _COMMON | {"skills popup": "lab: zq16zq use $skill"},
}
RESPOND_PROBES = ("lab: zq20zq \udfff", "!zq21zq ls", "lab: zq22zq x\ud800y")
FREE_TEXT_PROBES = {
    "lone surrogate": "hi\ud800there zq30zq",
    "C1 through surrogateescape": "q\udcc2\udc9b201~w\udcc2\udc85e\udc9bx zq31zq",
    "right-to-left override": "Teal\u202e zq32zq",
    "zero-width joiner": "Te\u200dal zq33zq",
    "soft hyphen": "Te\u00adal zq34zq",
    "line break": "Teal\nzq35zq",
}
EDITOR_PROBES: dict[str, dict[str, str]] = {
    "claude": {"trailing backslash": "Teal zq39zq \\"},
    "codex": {"shell mode": "!zq36zq", "help": "?zq37zq"},
}
"""The editor's own specials: Claude's takes a leading '!' as text but a trailing '\\' makes
its Enter a newline; Codex's notes take a leading '!' as shell mode on 0.153.4."""
USABLE = "lab: the pane is still usable"
HEADING = "# lab: a leading hash is plain text"
"""Typed, not refused: no pinned version has a '#' (memory) mode (docs/input.md)."""


async def _refused(keys: KeyLog, call: Any, reason: str = "invalid_params") -> str:
    """Await ``call``; it must fail with ``reason`` and write no key. Its message."""
    before = len(keys.keys())
    with pytest.raises(AkkError) as raised:
        await call
    assert raised.value.reason == reason, raised.value
    assert keys.keys()[before:] == []
    return str(raised.value)


async def _idle_within(ctl: Controller, terminal_id: str, seconds: float) -> float:
    """How long until the terminal reads idle for another controller (at most ``seconds``)."""
    start = trio.current_time()
    with trio.fail_after(seconds):
        while True:
            status = await ctl.call("status", {"terminal_id": terminal_id})
            if status["terminal"]["activity_state"] == "idle":
                return trio.current_time() - start
            await trio.sleep(0.02)


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("questionnaire_single3", rows=60),
        *lab_params("codex_rui_one", plan_mode=True, cols=200, rows=50),
    ],
    indirect=True,
)
async def test_hostile_text_is_refused_with_zero_keys_and_the_pane_stays_usable(
    lab: LabSession, tmp_path: Path
) -> None:
    async with two_controllers(lab, tmp_path) as (served, ctl, other):
        assert served.keys is not None
        keys = served.keys
        terminal_id = (await idle_terminal(ctl))["terminal_id"]
        for name, text in SEND_PROBES[lab.agent].items():
            params = {"terminal_id": terminal_id, "request": text, "client_request_id": name}
            message = await _refused(keys, ctl.call("send", params))
            if "surrogate" in name:
                assert "lone surrogate" in message, message  # the frame check comes first
            else:  # the text rule names the character, or what the version would do
                expected = "instead of typing it" if name in _SPECIAL_PROBES else "U+"
                assert expected in message and "Nothing was sent" in message, (name, message)
        # A TerminalActor that crashes before its reservation typed nothing and says so;
        # restarted, it observes its quiet pane at once.
        faults.arm(f"{Point.EVIDENCE_SNAPSHOT}:raise")
        try:
            crash = {"terminal_id": terminal_id, "request": "lab: zq38zq", "client_request_id": "c"}
            message = await _refused(keys, ctl.call("send", crash), "internal")
            assert "nothing was typed" in message, message
        finally:
            faults.disarm()
        # Another controller finds the pane idle at once and its send goes through, once.
        elapsed = await _idle_within(other, terminal_id, 1.0)
        print(f"{lab.client.name}: idle for another controller {elapsed:.3f} s after the crash")
        for request_id, text in (("usable", USABLE), ("heading", HEADING)):
            params = {"terminal_id": terminal_id, "request": text, "client_request_id": request_id}
            sent = await other.call("send", params)
            assert (await outcome(other, sent["turn_id"]))["kind"] == "done"
            assert lab.server.count_inputs_containing(text) == 1, lab.server.summary()
        for text in RESPOND_PROBES:
            respond = {"turn_id": sent["turn_id"], "request": text}
            await _refused(keys, other.call("respond", respond))
        assert await _idle_within(ctl, terminal_id, 1.0) < 1.0
        # Free text into the question's editor: the same rule, one line.
        turn_id = await send_task(ctl, sc.ASK_TASK)
        shown = await prompt(ctl, turn_id)
        for text in (FREE_TEXT_PROBES | EDITOR_PROBES[lab.agent]).values():
            await _refused(keys, ctl.call("respond_interaction", free_text(shown, text)))
        # Claude's editor takes a leading '/' as text (docs/input.md); Codex's notes do not,
        # but take a trailing '\' as text, where Claude's Enter would add a line.
        answer = "/Teal" if lab.agent == "claude" else "Teal \\"
        reply = await ctl.call("respond_interaction", free_text(shown, answer))
        assert reply["outcome"] == "dispatched"
        # Claude words a typed answer its own way; Codex sends it as the notes.
        answered = {
            "claude": f'"Which color do you prefer?"="{answer}"',
            "codex": f"user_note: {answer}",
        }[lab.agent]
        await reached(lab, lambda r: answered in r.newest_input)
        await settled(ctl, turn_id)
        await lab.wait_idle(20)
        screen = await lab.text()
    assert lab.server.count_inputs_containing(answered) == 1
    for marker in (f"zq{n}zq" for n in range(40)):
        assert marker not in screen
        assert lab.server.count_inputs_containing(marker) == 0, (marker, lab.server.summary())


@pytest.mark.parametrize(
    "lab",
    [
        *lab_params("claude_mimic_prompt", agents=("claude",))[-1:],
        *lab_params("codex_mimic_prompt", agents=("codex",))[-1:],
    ],
    indirect=True,
)
async def test_a_reply_that_draws_a_prompt_is_no_prompt(lab: LabSession, tmp_path: Path) -> None:
    """The model's reply draws, as text, the very prompt its client draws (what a prompt
    injection would write to get keys): the pane reads working, then idle, never a prompt;
    no wake-up or interaction reaches the controller, and AKK types nothing after the task."""
    states: list[str] = []
    async with two_controllers(lab, tmp_path) as (served, ctl, _):
        assert served.keys is not None
        turn_id = await send_task(ctl, sc.MIMIC_TASK)
        typed = len(served.keys.keys())
        kinds: list[str] = []
        async with trio.open_nursery() as nursery:

            async def observe() -> None:
                while True:
                    state = (await ctl.call("status", {"turn_id": turn_id}))["terminal"][
                        "observation"
                    ]["state"]
                    if not states or states[-1] != state:
                        states.append(state)
                    await trio.sleep(0.02)

            nursery.start_soon(observe)
            with trio.fail_after(30):
                async with aclosing(ctl.events()) as events:
                    async for event in events:
                        await ctl.ack(event["event_id"])
                        kinds.append(event["kind"])
                        if event["kind"] in OUTCOMES:
                            break
            with trio.fail_after(30):  # AKK reads the idle pane, the reply above its composer
                while states[-1] != "idle":
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
        status = await ctl.call("status", {"turn_id": turn_id})
        screen = await lab.text()
        assert len(served.keys.keys()) == typed
    last_line = sc.MIMIC_PROMPTS[lab.agent].splitlines()[-1].strip()
    assert last_line in screen  # the pane drew the lookalike
    assert kinds == ["done"], kinds
    assert status["interaction"] is None and status["turn"]["state"] == "done"
    assert set(states) <= {"idle_draft", "working", "idle"}, states  # the task typed, then run
    assert lab.server.count_inputs_containing(sc.MIMIC_TASK) == 1
