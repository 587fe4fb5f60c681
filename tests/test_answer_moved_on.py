"""An answer's postcondition: the answered step gone from a later screen, or, where the
screen cannot be read, the agent's own file recording the step's call answered.

Under load the work between an approval and the next readable screen can pass between
two looks: Codex 0.153.4 ran the approved command and ended its turn, and what was left
was its composer under a person's open mention popup, which it draws without the footer
(read unknown). The step then ended `response_uncertain` though the command had run.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import attrs
import pytest
import trio
import trio.testing

from akk.actors.terminal_board import TerminalSnapshot
from akk.backends.terminal import answer_step
from akk.backends.terminal.observer import Observer
from akk.profiles.observation import Observation, PromptView, State
from tests import corpus

CALL = "call_exec_1"


def _permission() -> PromptView:
    _, observed = corpus.observed(corpus.ROOT / "codex" / "0.153.4" / "codex_exec-permission.json")
    assert observed.prompt is not None
    return attrs.evolve(observed.prompt, call=CALL)


class _Screen:
    """Reads the scripted observations in turn (the last one again and again), and the
    agent's file: its open calls, the step's own one until `answered_after` reads."""

    def __init__(self, observations: list[Observation], answered_after: int | None) -> None:
        self.observations, self.answered_after = observations, answered_after
        self.looks = self.file_reads = 0

    async def observe(self, force: bool = False) -> TerminalSnapshot:
        self.looks += 1
        observation = self.observations[min(self.looks, len(self.observations)) - 1]
        return cast(TerminalSnapshot, SimpleNamespace(seq=self.looks, observation=observation))

    async def open_calls(self) -> list[Any]:
        self.file_reads += 1
        done = self.answered_after is not None and self.file_reads > self.answered_after
        return [] if done else [SimpleNamespace(identity=CALL)]


UNREAD = Observation(State.UNKNOWN, "codex@0.153.4", reason="no known Codex screen shape")


@pytest.mark.parametrize(
    ("observations", "answered_after", "said"),
    [
        ([Observation(State.IDLE, "codex@0.153.4")], None, None),
        ([UNREAD], 2, None),
        ([UNREAD], None, "a screen AKK reads as unknown, and the agent's file did not show"),
        (["prompt"], 0, "the prompt still showed, unchanged"),
    ],
    ids=["idle", "unread_file_answered", "unread_file_open", "prompt_stays"],
)
async def test_a_step_is_gone_when_a_screen_or_the_agent_s_file_proves_it(
    autojump_clock: trio.testing.MockClock,
    observations: list[Observation | str],
    answered_after: int | None,
    said: str | None,
) -> None:
    permission = _permission()
    shown = [
        Observation(State.PERMISSION, "codex@0.153.4", prompt=permission) if o == "prompt" else o
        for o in observations
    ]
    screen = _Screen(cast(list[Observation], shown), answered_after)
    unproven = await answer_step.prove_moved_on(cast(Observer, screen), permission, 0)
    if said is None:
        assert unproven is None
    else:
        assert unproven is not None and said in unproven, unproven
    # The file is read only while the screen cannot be, a few times a second.
    assert screen.file_reads <= answer_step.STEP_TIMEOUT / answer_step.FILE_POLL + 1
    if observations[0] != UNREAD:
        assert screen.file_reads == 0
