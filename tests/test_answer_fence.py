"""The answer's fence, inside its reservation: what became of the Turn while the answer was
on its way decides the refusal (`akk.backends.terminal.checks.fence_check`).

A lab test cannot time a Turn's settling between the method's check and the fence; the
fence's own rule is read here on a real store.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from akk.backends.contract import Refusal
from akk.backends.terminal.checks import fence_check
from akk.backends.terminal.resolve import Answer
from akk.backends.terminal.steps import DispatchAnswer
from akk.profiles.keyplan import Intent
from akk.protocol.errors import Reason
from akk.screen.fingerprint import Appearance
from akk.store import turns
from akk.store.turns import Turn, TurnState
from tests.store_rows import store_with_t1


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    yield from store_with_t1(tmp_path)


def _running(conn: apsw.Connection) -> Turn:
    with conn:
        turn = turns.insert(
            conn, controller_id="ctl", client_request_id="r", terminal_id="t1",
            request_sha256="0" * 64, request_chars=5, evidence_status="unknown", evidence=None,
            evidence_limit="test", inactivity_seconds=600, lifetime_seconds=600,
            now=time.time(),
        )  # fmt: skip
        return turns.update(conn, turn, state=TurnState.RUNNING)


def _fence(conn: apsw.Connection, turn: Turn, *, next_turn: bool) -> Refusal | None:
    answer = Answer(Intent.CHOOSE, chosen=(0,), next_turn=next_turn)
    message = DispatchAnswer(
        turn_id=turn.turn_id, controller_id="ctl", interaction_id="int_x", offer_id="off_x",
        seen=Appearance(b"f" * 32, 1), answer=answer,
    )  # fmt: skip
    return fence_check(conn, message, time.time())


def _reason(refusal: Refusal | None) -> Reason | None:
    return None if refusal is None else refusal.reason


def test_an_answer_is_refused_by_what_became_of_its_turn(conn: apsw.Connection) -> None:
    turn = _running(conn)
    # Open: past the Turn's rules, to the interaction's (this one was never recorded).
    assert _reason(_fence(conn, turn, next_turn=False)) is Reason.PROMPT_CHANGED
    assert _reason(_fence(conn, turn, next_turn=True)) is Reason.NOT_IDLE  # round still on
    with conn:
        turn = turns.settle(conn, turn, TurnState.DONE, now=time.time(), summary="done")
    settled = _fence(conn, turn, next_turn=False)
    assert settled is not None and settled.reason is Reason.CONFLICT
    assert "already done" in settled.message and "queue_next_turn" in settled.message
    assert _reason(_fence(conn, turn, next_turn=True)) is Reason.PROMPT_CHANGED  # its round
    with conn:
        turn = turns.update(conn, turn, closed_at=time.time())
    for next_turn in (False, True):
        closed = _fence(conn, turn, next_turn=next_turn)
        assert closed is not None and closed.reason is Reason.CLOSED
        assert "is closed" in closed.message
