"""The held composer proof before a task's Enter, on captured screens.

`type_and_submit` presses Enter only after a read shows exactly the task, and
(for typed keys) another read at least the client's Enter guard later still
shows it with no differing read between. Here the pane is a script of real
screens from the fixture corpus (Codex 0.171.0 at 120x40): an empty composer,
the task, another text in the composer, a permission prompt over it. The keys
go to a recording stand-in for tmux and the stages to a real StoreActor.

The Hypothesis model checks `prove_composer` on Trio's autojump clock against
the one rule a sender relies on: when it says yes, the screen has shown the
task without a break for at least the guard, and the last read showed it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import attrs
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from akk.actors.store import StoreActor, transact
from akk.backends.terminal.observer import Observer
from akk.backends.terminal.steps import TaskReceipt
from akk.backends.terminal.typing_step import prove_composer, type_and_submit
from akk.profiles import codex
from akk.profiles.composer import TypingMethod
from akk.profiles.observation import Observation
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.render import render
from akk.store import dispatches, turns
from akk.store.database import open_store
from akk.store.dispatches import Kind, Stage
from akk.store.turns import TurnState
from akk.tmux.control import ClientLink
from tests.tier import examples

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "codex" / "0.171.0"
PROFILE = codex.PROFILES[-1]
GUARD = PROFILE.typing.enter_guard_seconds
READ_SECONDS = 0.004
"""How long one capture takes in the script (the screen is the one at its start)."""


def _screen(name: str) -> tuple[Observation, str]:
    """A fixture's Observation under its version's profile, and the text typed into it."""
    label = json.loads((FIXTURES / f"{name}.json").read_text())
    grid = render((FIXTURES / f"{name}.ansi").read_text(), label["cols"], label["rows"])
    typed = label["expected"].get("typed") or {"text": ""}
    return PROFILE.classify(grid), typed["text"]


EMPTY, _ = _screen("codex_model_unknown-idle")
TASK_SHOWN, TASK = _screen("draft_semicolon")  # 'lab: echo one; echo two;', typed as keys
OTHER_SHOWN, OTHER = _screen("draft_quotes")  # another text in the composer
PROMPT, _ = _screen("codex_exec-permission")  # no composer on screen
PASTE_SHOWN, PASTED = _screen("draft_multiline")  # two lines, a bracketed paste
LITERAL, PASTE = TypingMethod.LITERAL, TypingMethod.PASTE


def test_the_screens_read_as_the_script_needs() -> None:
    assert EMPTY.draft is not None and EMPTY.draft.empty
    assert TASK_SHOWN.draft is not None and PROFILE.draft_matches(TASK_SHOWN.draft, TASK, LITERAL)
    assert OTHER_SHOWN.draft is not None and OTHER != TASK
    assert not PROFILE.draft_matches(OTHER_SHOWN.draft, TASK, LITERAL)
    assert PROMPT.draft is None
    assert PASTE_SHOWN.draft is not None
    assert PROFILE.draft_matches(PASTE_SHOWN.draft, PASTED, PASTE)
    assert GUARD > 0  # Codex reads an Enter right after typed keys as a newline


@attrs.frozen
class _Snapshot:
    observation: Observation


@attrs.frozen
class _Identity:
    pane_id: str = "%1"


@attrs.define
class _Pane:
    """A pane whose screen is a script: each Observation shown from its time on (trio clock)."""

    script: Sequence[tuple[float, Observation]]
    profile: Any = PROFILE
    identity: _Identity = attrs.Factory(_Identity)
    reads: list[tuple[float, Observation]] = attrs.Factory(list)

    def shown_at(self, at: float) -> Observation:
        return [observation for since, observation in self.script if since <= at][-1]

    async def observe(self, *, force: bool = False) -> _Snapshot:
        shown = self.shown_at(trio.current_time())
        await trio.sleep(READ_SECONDS)
        self.reads.append((trio.current_time(), shown))
        return _Snapshot(shown)


@attrs.define
class _EveryStepPane(_Pane):
    """The script on the real clock, each screen read at least once and in order: a loaded
    machine may read late, and a time-only script would then skip a short stretch."""

    shown: int = 0

    def shown_at(self, at: float) -> Observation:
        if self.shown + 1 < len(self.script) and self.script[self.shown + 1][0] <= at:
            self.shown += 1
        return self.script[self.shown][1]


@attrs.define
class _Tmux:
    """Records every key command with its time, as `akk.tmux.keys` issues them; the pane
    takes keys as spelled (`keys.detour` finds no mode, no synchronized panes)."""

    commands: list[tuple[float, tuple[str, ...]]] = attrs.Factory(list)

    async def command(self, *args: str) -> list[str]:
        if args[0] == "display-message":
            return ["0||0|0"]
        self.commands.append((trio.current_time(), args))
        return []

    def client(self) -> _Tmux:
        return self

    def enters(self) -> list[float]:
        return [at for at, args in self.commands if args[-1:] == ("Enter",)]


def _rows(path: Path) -> None:
    conn = open_store(path)
    try:
        with conn:
            conn.execute(
                "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
                "VALUES ('ctl', 'ctl', 0, 0)"
            )
            conn.execute(
                "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
                "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
                "VALUES ('term_x', 's', '%1', 1, 'codex', 2, 3, 'codex', 0, 0)"
            )
    finally:
        conn.close()


@asynccontextmanager
async def _reserved(
    tmp_path: Path, method: TypingMethod
) -> AsyncIterator[tuple[ActorRef, TaskReceipt]]:
    """A real StoreActor and a task reserved in it, as the TerminalActor leaves it."""
    path = tmp_path / "akk.sqlite3"
    _rows(path)
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(path))])
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        store = root.ref("store")

        def reserve(conn: Any) -> TaskReceipt:
            now = time.time()
            turn = turns.insert(
                conn, controller_id="ctl", client_request_id="r1", terminal_id="term_x",
                request_sha256="0" * 64, request_chars=1, evidence_status="unknown",
                evidence=None, evidence_limit=None, inactivity_seconds=600,
                lifetime_seconds=600, now=now,
            )  # fmt: skip
            dispatch = dispatches.reserve(
                conn, controller_id="ctl", turn_id=turn.turn_id, terminal_id="term_x",
                kind=Kind.TASK, typing=method.value, screen_seq=1, now=now,
            )  # fmt: skip
            return TaskReceipt(turn, dispatch, 1, None)

        yield store, await transact(store, reserve)
        nursery.cancel_scope.cancel()


async def _send(
    tmp_path: Path, script: Sequence[tuple[float, Observation]], text: str, method: TypingMethod
) -> tuple[_Pane, _Tmux, TaskReceipt]:
    """Type ``text`` into a scripted pane (times from the call) as the TerminalActor does."""
    tmux = _Tmux()
    with trio.fail_after(20):
        async with _reserved(tmp_path, method) as (store, receipt):
            start = trio.current_time()
            pane = _EveryStepPane([(start + at, observation) for at, observation in script])
            done = await type_and_submit(
                cast(Observer, pane), cast(ClientLink, tmux), store, receipt, text, method
            )
    return pane, tmux, done


async def test_a_composer_showing_another_text_gets_no_enter(tmp_path: Path) -> None:
    pane, tmux, done = await _send(tmp_path, [(0, EMPTY), (0.03, OTHER_SHOWN)], TASK, LITERAL)

    assert tmux.enters() == []
    assert [args[:4] for _, args in tmux.commands] == [("send-keys", "-t", "%1", "-l")]
    assert done.dispatch.stage is Stage.ABORTED and done.enter_at is None
    assert (done.turn.state, done.turn.reason) == (TurnState.FAILED, "composer_mismatch")
    assert {observation for _, observation in pane.reads} == {EMPTY, OTHER_SHOWN}


async def test_a_key_that_joins_the_task_within_the_guard_gets_no_enter(tmp_path: Path) -> None:
    """The task shows, then (before the guard passed) something else: no Enter ever."""
    script = [(0, EMPTY), (0.03, TASK_SHOWN), (0.03 + GUARD / 2, OTHER_SHOWN)]
    pane, tmux, done = await _send(tmp_path, script, TASK, LITERAL)

    assert tmux.enters() == []
    assert done.dispatch.stage is Stage.ABORTED
    assert TASK_SHOWN in {observation for _, observation in pane.reads}


async def test_typed_keys_get_their_enter_a_guard_after_the_task_first_showed(
    tmp_path: Path,
) -> None:
    pane, tmux, done = await _send(tmp_path, [(0, EMPTY), (0.03, TASK_SHOWN)], TASK, LITERAL)

    (enter,) = tmux.enters()
    shown = [at for at, observation in pane.reads if observation is TASK_SHOWN]
    assert enter - shown[0] >= GUARD
    assert pane.reads[-1][1] is TASK_SHOWN and pane.reads[-1][0] <= enter
    assert done.dispatch.stage is Stage.ENTER_SENT and done.enter_at is not None


async def test_a_bracketed_paste_gets_its_enter_at_the_first_read_that_shows_it(
    tmp_path: Path,
) -> None:
    """Codex clears its burst window on a paste: the proof alone lets Enter go."""
    pane, tmux, done = await _send(tmp_path, [(0, EMPTY), (0.03, PASTE_SHOWN)], PASTED, PASTE)

    (enter,) = tmux.enters()
    shown = [at for at, observation in pane.reads if observation is PASTE_SHOWN]
    assert len(shown) == 1 and pane.reads[-1] == (shown[0], PASTE_SHOWN)
    assert enter >= shown[0]
    assert done.dispatch.stage is Stage.ENTER_SENT


# ---------------------------------------------------------------- the model

_SHOWN = st.sampled_from([EMPTY, TASK_SHOWN, OTHER_SHOWN, PROMPT])
_SCRIPTS = st.lists(
    st.tuples(
        st.sampled_from([0.05, 0.06, 0.09]) | st.floats(min_value=0.05, max_value=0.3), _SHOWN
    ),
    min_size=1,
    max_size=8,
)
"""Stretches of one screen each, every one long enough for the polling to read it, all of
them within the proof's deadline."""


@settings(max_examples=examples(300))
@given(stretches=_SCRIPTS, last=_SHOWN)
# A person's key comes and goes within the guard: the task's stretch starts again.
@example(stretches=[(0.1, EMPTY), (0.05, TASK_SHOWN), (0.05, OTHER_SHOWN)], last=TASK_SHOWN)
def test_a_proof_is_given_only_after_the_task_showed_unbroken_for_the_guard(
    stretches: list[tuple[float, Observation]], last: Observation
) -> None:
    script, at = [], 0.0
    for seconds, observation in stretches:
        script.append((at, observation))
        at += seconds
    script.append((at, last))  # shown from then on

    async def prove() -> tuple[bool, float, _Pane]:
        pane = _Pane(script)
        proven = await prove_composer(cast(Observer, pane), TASK, LITERAL)
        return proven, trio.current_time(), pane

    proven, ended, pane = trio.run(prove, clock=trio.testing.MockClock(autojump_threshold=0))

    # When the task began its unbroken stretch on the screen the last read saw.
    seen, since = ended - READ_SECONDS, None
    for start, observation in script:
        if start > seen:
            break
        since = (since if since is not None else start) if observation is TASK_SHOWN else None
    if proven:
        assert pane.reads[-1][1] is TASK_SHOWN
        assert since is not None and ended - since >= GUARD
    if last is TASK_SHOWN:
        assert proven, f"the task showed from {at:.3f} on, yet no proof by {ended:.3f}"
        assert ended <= at + GUARD + 0.1
