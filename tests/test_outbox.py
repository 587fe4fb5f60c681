"""The durable outbox and Turn records against an independent model (real apsw, Hypothesis)."""

from __future__ import annotations

from pathlib import Path

import apsw
import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from akk.store import outbox, turns
from akk.store.database import open_store
from akk.store.schema import MIGRATIONS
from akk.store.turns import TurnState
from tests.tier import examples

MAX_ATTEMPTS = 3
LEASE = 30.0


def _store(tmp_path: Path) -> apsw.Connection:
    conn = open_store(tmp_path / "akk.sqlite3")
    with conn:
        for controller in ("a", "b"):
            conn.execute(
                "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
                "VALUES (?, ?, 0, 0)",
                (controller, controller),
            )
    return conn


@attrs.define
class _Model:
    """What the outbox must do, written independently of it."""

    controller: str
    event_id: str
    state: str = "pending"
    attempts: int = 0
    due_at: float = 0.0
    lease_until: float | None = None


operations = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.sampled_from(["a", "b"])),
        st.tuples(st.just("deliver"), st.sampled_from(["a", "b"])),
        st.tuples(st.just("ack"), st.sampled_from(["a", "b"]), st.integers(0, 7)),
        st.tuples(st.just("advance"), st.floats(0, 100)),
        st.tuples(st.just("reconnect"), st.sampled_from(["a", "b"])),
    ),
    max_size=40,
)


@settings(
    max_examples=examples(150),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=operations)
def test_outbox_follows_its_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple]
) -> None:  # type: ignore[type-arg]
    conn = _store(tmp_path_factory.mktemp("outbox"))
    now = 1000.0
    model: list[_Model] = []
    sent_ids: dict[str, set[str]] = {"a": set(), "b": set()}
    for op in ops:
        with conn:
            if op[0] == "enqueue":
                n = outbox.enqueue(conn, controller_id=op[1], turn_id=None, kind="done",
                                   body={"summary": "x"}, now=now)  # fmt: skip
                assert n.event()["event_id"] == n.event_id
                model.append(_Model(op[1], n.event_id, due_at=now))
            elif op[0] == "deliver":
                expected = [
                    m for m in model
                    if m.controller == op[1] and (
                        (m.state == "pending" and m.due_at <= now)
                        or (m.state == "delivering" and (m.lease_until or 0) <= now)
                    )
                ]  # fmt: skip
                due = outbox.due(conn, op[1], now)
                assert [d.event_id for d in due] == [m.event_id for m in expected]
                for notification, m in zip(due, expected, strict=True):
                    leased = outbox.lease(conn, notification, now, lease_seconds=LEASE,
                                          max_attempts=MAX_ATTEMPTS)  # fmt: skip
                    if m.attempts >= MAX_ATTEMPTS:
                        assert leased is None
                        m.state, m.lease_until = "retryable_failure", None
                        continue
                    assert leased is not None
                    assert leased.event()["event_id"] == m.event_id  # redelivery keeps the id
                    m.state, m.attempts, m.lease_until = "delivering", m.attempts + 1, now + LEASE
                    sent_ids[op[1]].add(m.event_id)
            elif op[0] == "ack":
                mine = [m for m in model if m.controller == op[1]]
                others = [m for m in model if m.controller != op[1]]
                if others and op[2] % 2:
                    # Another controller's event: refused, nothing changes.
                    assert (
                        outbox.ack(conn, op[1], others[op[2] % len(others)].event_id, now) is None
                    )
                elif mine:
                    m = mine[op[2] % len(mine)]
                    acked = outbox.ack(conn, op[1], m.event_id, now)
                    assert acked is not None and acked.state == "accepted"
                    m.state, m.lease_until = "accepted", None
            elif op[0] == "advance":
                now += op[1]
            elif op[0] == "reconnect":
                outbox.release_leases(conn, op[1], now)
                for m in model:
                    if m.controller == op[1] and m.state == "delivering":
                        m.state, m.due_at, m.lease_until = "pending", now, None
        stored = {n.event_id: n for c in ("a", "b") for n in _all(conn, c)}
        for m in model:
            assert stored[m.event_id].state == m.state
            assert stored[m.event_id].attempts == m.attempts
            assert stored[m.event_id].controller_id == m.controller
        # Who has something to deliver: what a burst of hellos starts Destinations for.
        owed = {m.controller for m in model if m.state in ("pending", "delivering")}
        assert outbox.waiting_among(conn, ["a", "b", "nobody"]) == owed
        assert set(outbox.controllers_waiting(conn)) == owed
    # Nothing was ever sent to a controller that does not own it.
    for controller, ids in sent_ids.items():
        assert all(m.controller == controller for m in model if m.event_id in ids)
    conn.close()


def _all(conn: apsw.Connection, controller: str) -> list[outbox.Notification]:
    rows = conn.execute(
        "SELECT notification_id FROM notifications WHERE controller_id = ?", (controller,)
    )
    return [n for (nid,) in rows if (n := outbox.get(conn, nid)) is not None]


def _turn(conn: apsw.Connection, request_id: str = "r1") -> turns.Turn:
    conn.execute(
        "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, agent_pid, "
        "process_start, executable, first_seen_at, last_seen_at) "
        "VALUES ('t1', 's', '%1', 1, 'claude', 2, 3, 'claude', 0, 0) ON CONFLICT DO NOTHING"
    )
    return turns.insert(
        conn, controller_id="a", client_request_id=request_id, terminal_id="t1",
        request_sha256="0" * 64, request_chars=5, evidence_status="unknown", evidence=None,
        evidence_limit="test", inactivity_seconds=60, lifetime_seconds=600, now=1.0,
    )  # fmt: skip


def test_a_turn_settles_once_with_its_notification(tmp_path: Path) -> None:
    conn = _store(tmp_path)
    with conn:
        turn = _turn(conn)
        assert turns.unresolved_on(conn, "t1") == turn
        done = turns.settle(conn, turn, TurnState.DONE, now=2.0, summary="ok")
    assert done.state is TurnState.DONE and not done.unresolved
    (event,) = _all(conn, "a")
    assert event.kind == "done" and event.event()["turn_id"] == turn.turn_id
    # A second outcome for the same Turn cannot be written, even bypassing the CAS.
    with pytest.raises(apsw.ConstraintError), conn:
        outbox.enqueue(conn, controller_id="a", turn_id=turn.turn_id, kind="failed",
                       body={}, now=3.0)  # fmt: skip
    with conn:
        assert turns.unresolved_on(conn, "t1") is None
        assert turns.by_request(conn, "a", "r1") == done
    conn.close()


def test_turn_states_are_checked_by_the_store(tmp_path: Path) -> None:
    conn = _store(tmp_path)
    with conn:
        turn = _turn(conn)
    with pytest.raises(apsw.ConstraintError), conn:
        conn.execute("UPDATE turns SET state = 'finished' WHERE turn_id = ?", (turn.turn_id,))
    conn.close()


def test_v3_refuses_to_drop_rows_it_did_not_expect(tmp_path: Path) -> None:
    """The v3 rebuild rolls back whole if any rebuilt table holds a row."""
    path = tmp_path / "akk.sqlite3"
    conn = apsw.Connection(str(path))
    with conn:
        for version, sql in enumerate(MIGRATIONS[:2], start=1):
            conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute(
            "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
            "VALUES ('a', 'a', 0, 0)"
        )
        conn.execute(
            "INSERT INTO turns (turn_id, controller_id, client_request_id, backend, "
            "request_sha256, state, created_at, updated_at) "
            "VALUES ('t', 'a', 'r', 'terminal', 'x', 'running', 0, 0)"
        )
    with pytest.raises(apsw.ConstraintError), conn:
        conn.execute(MIGRATIONS[2])
    assert conn.execute("SELECT count(*) FROM turns").fetchone() == (1,)
    conn.close()
