"""A Watch's record in the store: renew arithmetic, observation generations and their notices.

Times are explicit arguments here (the store never reads a clock), so every
deadline is checked exactly. The lab tests (tests/lab/test_watch.py) drive the
same paths through `akk serve` against the real clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from hypothesis import given
from hypothesis import strategies as st

from akk.store import outbox, turns
from akk.store.turns import Turn, TurnState
from tests.store_rows import store_with_t1

HOUR = 3600.0
START = 1_000_000.0


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    yield from store_with_t1(tmp_path)


def _watch(conn: apsw.Connection, lifetime: float = 12 * HOUR) -> Turn:
    with conn:
        return turns.insert_watch(
            conn, controller_id="ctl", terminal_id="t1", evidence_status="unknown",
            evidence=None, evidence_limit="test", inactivity_seconds=HOUR,
            lifetime_seconds=lifetime, now=START,
        )  # fmt: skip


def _expire(conn: apsw.Connection, watch: Turn, at: float) -> Turn:
    with conn:
        return turns.settle(
            conn, watch, TurnState.TIMED_OUT, now=at, reason="timed_out", summary="deadline"
        )


def _states(conn: apsw.Connection, watch_id: str) -> list[tuple[str, int, str]]:
    rows = conn.execute(
        "SELECT kind, round, state FROM notifications WHERE turn_id = ? ORDER BY rowid",
        (watch_id,),
    )
    return [(str(kind), int(round_), str(state)) for kind, round_, state in rows]


def test_a_watch_is_a_running_record_without_a_turn_id(conn: apsw.Connection) -> None:
    watch = _watch(conn)
    assert watch.is_watch and watch.state is TurnState.RUNNING and watch.unresolved
    assert watch.ids == {"turn_id": None, "watch_id": watch.turn_id}
    public = watch.public()
    assert (public["task_kind"], public["management_state"]) == ("watch", "none")
    assert public["observation_state"] == "observing"
    assert public["deadline_at"] == START + 12 * HOUR
    assert turns.unresolved_on(conn, "t1") == watch


def test_an_unwatched_watch_no_longer_holds_its_terminal(conn: apsw.Connection) -> None:
    watch = _watch(conn)
    with conn:
        stopped = turns.update(conn, watch, unwatched_at=START + 5)
    assert not stopped.unresolved and stopped.observation_state == "stopped"
    assert turns.unresolved_on(conn, "t1") is None
    assert turns.unresolved(conn) == []


@given(
    saved=st.floats(0, 48 * HOUR),
    now=st.floats(0, 48 * HOUR),
    minutes=st.integers(1, 10_080),
)
def test_renew_takes_the_later_of_the_saved_deadline_and_now_plus_minutes(
    saved: float, now: float, minutes: int
) -> None:
    watch = _record(task_kind="watch", hard_deadline_at=saved)
    send = _record(task_kind="managed_send", hard_deadline_at=saved)
    assert turns.renewed_deadline(watch, now, minutes * 60) == max(saved, now + minutes * 60)
    # Never the old deadline plus the minutes; a managed Send never outlives its lifetime.
    assert turns.renewed_deadline(send, now, minutes * 60) == saved


def test_reviving_an_expired_watch_withdraws_its_unsent_expiry_and_starts_a_generation(
    conn: apsw.Connection,
) -> None:
    watch = _expire(conn, _watch(conn, lifetime=HOUR), START + HOUR)
    assert _states(conn, watch.turn_id) == [("timed_out", 1, "pending")]
    assert watch.observation_state == "expired"
    with conn:
        revived = turns.revive(
            conn, watch, now=START + 2 * HOUR, deadline=START + 3 * HOUR, ended=None
        )
    assert (revived.state, revived.round, revived.settled_at) == (TurnState.RUNNING, 2, None)
    assert (revived.hard_deadline_at, revived.last_activity_at) == (
        START + 3 * HOUR,
        START + 2 * HOUR,
    )
    assert _states(conn, watch.turn_id) == [("timed_out", 1, "withdrawn")]
    # The new generation has its own expiry notice.
    again = _expire(conn, revived, START + 3 * HOUR)
    assert _states(conn, watch.turn_id) == [
        ("timed_out", 1, "withdrawn"),
        ("timed_out", 2, "pending"),
    ]
    assert again.round == 2


def test_an_expiry_notice_already_delivered_is_never_withdrawn(conn: apsw.Connection) -> None:
    watch = _expire(conn, _watch(conn, lifetime=HOUR), START + HOUR)
    (notice,) = outbox.of_turn(conn, watch.turn_id)
    with conn:
        outbox.ack(conn, "ctl", notice.event_id, START + HOUR + 1)
        turns.revive(conn, watch, now=START + 2 * HOUR, deadline=START + 3 * HOUR, ended=None)
    assert _states(conn, watch.turn_id) == [("timed_out", 1, "accepted")]


def test_a_task_that_ended_while_unobserved_records_its_real_outcome_at_once(
    conn: apsw.Connection,
) -> None:
    watch = _watch(conn)
    with conn:
        stopped = turns.update(conn, watch, unwatched_at=START + 5)
        ended = (TurnState.DONE, None, "the agent finished", {"final_message": "All done."})
        settled = turns.revive(
            conn, stopped, now=START + 60, deadline=START + 12 * HOUR, ended=ended
        )
    assert (settled.state, settled.round, settled.final_message) == (
        TurnState.DONE,
        2,
        "All done.",
    )
    assert settled.unwatched_at is None and settled.observation_state == "settled"
    ((kind, round_, state),) = _states(conn, watch.turn_id)
    assert (kind, round_, state) == ("done", 2, "pending")
    (notice,) = outbox.of_turn(conn, watch.turn_id)
    event = json.loads(notice.payload)
    assert (event["turn_id"], event["watch_id"]) == (None, watch.turn_id)
    assert event["outcome"]["final_message"] == "All done."


def test_a_running_or_settled_watch_is_not_revived(conn: apsw.Connection) -> None:
    watch = _watch(conn)
    with pytest.raises(AssertionError), conn:
        turns.revive(conn, watch, now=START, deadline=START + HOUR, ended=None)


def test_the_terminal_is_held_by_the_watch_with_a_next_step(conn: apsw.Connection) -> None:
    watch = _watch(conn)
    mine = turns.held(watch, watch.controller_id)
    assert "unwatch" in mine and watch.turn_id in mine
    # Another controller learns the terminal is taken, never the watch's id.
    theirs = turns.held(watch, "someone-else")
    assert watch.turn_id not in theirs and "another idle terminal" in theirs


def _record(**changes: object) -> Turn:
    base: dict[str, object] = {
        "turn_id": "watch_x", "controller_id": "ctl", "client_request_id": "watch_x",
        "terminal_id": "t1", "backend": "terminal", "native_session": None,
        "request_sha256": "0" * 64, "request_chars": 0, "round": 1,
        "state": TurnState.RUNNING, "reason": None, "final_message": None,
        "evidence_status": "unknown", "evidence": None, "evidence_limit": None,
        "usage_input": None, "usage_output": None, "usage_cache_read": None,
        "usage_cache_write": None, "usage_status": "unknown", "inactivity_seconds": HOUR,
        "hard_deadline_at": START, "last_activity_at": START, "created_at": START,
        "updated_at": START, "settled_at": None, "closed_at": None, "revision": 0,
    }  # fmt: skip
    return Turn(**(base | changes))  # type: ignore[arg-type]


def test_unwatch_withdraws_what_was_never_sent_and_keeps_what_was(conn: apsw.Connection) -> None:
    watch = _watch(conn)
    with conn:
        sent = turns.enqueue_event(conn, watch, "interaction_required", START + 1, interaction=None)
        outbox.ack(conn, "ctl", sent.event_id, START + 2)
        turns.enqueue_event(conn, watch, "approval_required", START + 3, interaction=None)
        turns.enqueue_event(conn, watch, "response_uncertain", START + 4, interaction=None)
        withdrawn = outbox.withdraw_pending(conn, watch.turn_id, START + 5)
    assert withdrawn == 2
    assert _states(conn, watch.turn_id) == [
        ("interaction_required", 1, "accepted"),
        ("approval_required", 1, "withdrawn"),
        ("response_uncertain", 1, "withdrawn"),
    ]
    assert outbox.due(conn, "ctl", START + 60) == []
