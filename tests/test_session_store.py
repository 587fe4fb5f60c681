"""App-server sessions and invocations in the real store: migration, ownership, CAS, facts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import apsw
import attrs
import pytest

from akk.backends.names import CODEX_APP_SERVER
from akk.sessions import policy
from akk.store import sessions, turns
from akk.store.database import CasConflict, StoreError, open_store
from akk.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from akk.store.sessions import Cleanup, Outcome, SessionRetired, SessionRow, ThreadIntent

T0 = 1_000_000.0
BINDING = policy.ThreadConfig(
    agent_version="0.154.0", protocol_version="v2", model="gpt-5", effort="high",
    approval_policy="never", sandbox="workspace-write",
)  # fmt: skip
CODER = policy.Owner(controller_id="ctl", task="t1", unit=None, role="coder", workspace="/w")
REVIEWER = attrs.evolve(CODER, role="reviewer")


def _controller(conn: apsw.Connection, controller_id: str) -> None:
    conn.execute(
        "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
        "VALUES (?, ?, 0, 0)",
        (controller_id, controller_id),
    )


def _turn(conn: apsw.Connection, turn_id: str, controller_id: str = "ctl") -> str:
    conn.execute(
        "INSERT INTO turns (turn_id, controller_id, client_request_id, backend, request_sha256, "
        "request_chars, state, evidence_status, inactivity_seconds, hard_deadline_at, "
        "last_activity_at, created_at, updated_at) VALUES (?, ?, ?, 'app_server', ?, 1, "
        "'dispatching', 'unknown', 60, 0, 0, 0, 0)",
        (turn_id, controller_id, turn_id, "0" * 64),
    )
    return turn_id


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    connection = open_store(tmp_path / "akk.sqlite3")
    with connection:
        _controller(connection, "ctl")
        _controller(connection, "other")
        for n in range(1, 7):
            _turn(connection, f"turn_{n}")
    yield connection
    connection.close()


CREATE = policy.Decision(policy.Action.CREATE, "new_scope_or_role")


def _create(conn: apsw.Connection, owner: policy.Owner = CODER, at: float = T0) -> SessionRow:
    with conn:
        return sessions.create(
            conn,
            owner=owner,
            binding=BINDING,
            backend=CODEX_APP_SERVER,
            home="/h",
            decision=CREATE,
            now=at,
        )


def _rebuild(conn: apsw.Connection, old: SessionRow, reason: str, at: float) -> SessionRow:
    decision = policy.Decision(policy.Action.REBUILD, reason, old.session_id)
    with conn:
        return sessions.create(
            conn, owner=old.owner, binding=BINDING,
            backend=CODEX_APP_SERVER, home="/h", decision=decision, now=at,
            replaces=old,
        )  # fmt: skip


def _settle(conn: apsw.Connection, row: sessions.InvocationRow) -> sessions.InvocationRow:
    with conn:
        return sessions.update_invocation(
            conn, row, dispatch=policy.Dispatch.ACCEPTED, outcome=Outcome.DONE,
            outcome_at=T0, cleanup=Cleanup.CONFIRMED, cleanup_at=T0,
        )  # fmt: skip


def _reserve(
    conn: apsw.Connection, session: SessionRow, turn_id: str, at: float = T0
) -> sessions.InvocationRow:
    with conn:
        return sessions.reserve(
            conn, session, turn_id=turn_id, round=1, thread_intent=ThreadIntent.START, now=at
        )


# Migration


def _v4_store(path: Path) -> apsw.Connection:
    """A store at schema v4, as an older akk left it (owner-only, like open_store makes it)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = ON")
    with conn:
        for version, sql in enumerate(MIGRATIONS[:4], start=1):
            conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    return conn


def _tables(conn: apsw.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
    return {str(name) for (name,) in rows}


def test_a_v4_store_migrates_to_v5_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "akk.sqlite3"
    old = _v4_store(path)
    with old:
        _controller(old, "ctl")
        _turn(old, "turn_kept")
        old.execute(
            "INSERT INTO credentials (controller_id, token_sha256, created_at) VALUES (?, ?, 0)",
            ("ctl", "a" * 64),
        )
    old.close()
    conn = open_store(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert {"sessions", "invocations"} <= _tables(conn)
    kept = turns.get(conn, "turn_kept")
    assert kept is not None and kept.controller_id == "ctl" and kept.state.value == "dispatching"
    assert conn.execute("SELECT token_sha256 FROM credentials").fetchall() == [("a" * 64,)]
    columns = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
    assert {"thread_id", "generation", "history", "decision_reason"} <= columns
    assert "terminal_id" not in columns  # the v1 table is gone
    # The v5 tables work on the migrated store, and a turn may name its session.
    session = _create(conn)
    with conn:
        conn.execute("UPDATE turns SET session_id = ?", (session.session_id,))
    assert sessions.current(conn, CODER) == session
    conn.close()


def test_v5_refuses_to_drop_a_sessions_row_it_did_not_expect(tmp_path: Path) -> None:
    """The v5 rebuild of `sessions` rolls back whole if the v1 table holds a row."""
    path = tmp_path / "akk.sqlite3"
    old = _v4_store(path)
    with old:
        old.execute(
            "INSERT INTO sessions (session_id, backend, agent, state, created_at, updated_at) "
            "VALUES ('s1', 'app_server', 'codex', 'idle', 0, 0)"
        )
    old.close()
    with pytest.raises(StoreError, match="CHECK constraint failed"):
        open_store(path)
    again = apsw.Connection(str(path))
    assert again.execute("PRAGMA user_version").fetchone() == (4,)
    assert again.execute("SELECT session_id, agent FROM sessions").fetchall() == [("s1", "codex")]
    assert "invocations" not in _tables(again)
    again.close()


# Sessions


def test_create_starts_an_owner_s_first_generation_with_no_thread(conn: apsw.Connection) -> None:
    row = _create(conn)
    assert row.session_id.startswith("sess_") and len(row.session_id) == 29
    assert (row.generation, row.history, row.thread_id, row.replaces) == (
        1, policy.History.UNKNOWN, None, None,
    )  # fmt: skip
    assert (row.owner, row.binding, row.policy_version) == (CODER, BINDING, policy.POLICY_VERSION)
    assert (row.decision_action, row.decision_reason) == (policy.Action.CREATE, "new_scope_or_role")
    assert row.persistence == "persistent" and row.backend == "codex_app_server"
    public = row.public()
    assert public["scope"] == {"task": "t1", "role": "coder", "unit": None}
    assert public["decision"] == {"action": "create", "reason": "new_scope_or_role"}
    assert public["history"] == "unknown" and "codex_home" not in public
    assert sessions.get(conn, row.session_id) == row and sessions.get(conn, "sess_x") is None


def test_a_rebuild_retires_the_replaced_session_in_the_same_transaction(
    conn: apsw.Connection,
) -> None:
    first = _create(conn)
    second = _rebuild(conn, first, "context_limit", T0 + 5)
    assert (second.generation, second.replaces) == (2, first.session_id)
    assert (second.decision_action, second.decision_reason) == (
        policy.Action.REBUILD,
        "context_limit",
    )
    retired = sessions.get(conn, first.session_id)
    assert retired is not None
    assert (retired.retired_at, retired.retire_reason) == (T0 + 5, "context_limit")
    assert sessions.current(conn, CODER) == second
    # A transaction that fails after the rebuild leaves the old one current, and no new one.
    with pytest.raises(RuntimeError), conn:
        sessions.create(
            conn, owner=CODER, binding=BINDING,
            backend=CODEX_APP_SERVER, home="/h", now=T0 + 9, replaces=second,
            decision=policy.Decision(policy.Action.REBUILD, "history_missing", second.session_id),
        )  # fmt: skip
        raise RuntimeError("the transaction fails after the rebuild")
    assert sessions.current(conn, CODER) == second
    assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (2,)
    # A rebuild from a stale read conflicts, and retires nothing.
    with pytest.raises(CasConflict), conn:
        sessions.create(
            conn, owner=CODER, binding=BINDING,
            backend=CODEX_APP_SERVER, home="/h", now=T0 + 9, replaces=first,
            decision=policy.Decision(policy.Action.REBUILD, "history_missing", first.session_id),
        )  # fmt: skip
    assert sessions.current(conn, CODER) == second
    third = _rebuild(conn, second, "fresh_context_requested", T0 + 10)
    assert third.generation == 3


def test_create_refuses_decisions_that_create_nothing_and_other_owners_sessions(
    conn: apsw.Connection,
) -> None:
    coder = _create(conn)
    for decision, replaces in (
        (policy.Decision(policy.Action.WAIT, "thread_busy", coder.session_id), None),
        (policy.Decision(policy.Action.RESUME, "same_scope_and_role", coder.session_id), coder),
        (policy.Decision(policy.Action.REBUILD, "binding_changed", coder.session_id), None),
        (CREATE, coder),
        # Roles never share a thread: a reviewer's rebuild cannot replace the coder's session.
        (policy.Decision(policy.Action.REBUILD, "binding_changed", coder.session_id), coder),
    ):
        with pytest.raises(ValueError), conn:
            sessions.create(
                conn, owner=REVIEWER, binding=BINDING, backend=CODEX_APP_SERVER, home="/h",
                decision=decision,
                now=T0, replaces=replaces,
            )  # fmt: skip
    assert sessions.current(conn, CODER) == coder and sessions.current(conn, REVIEWER) is None


def test_an_owner_has_one_current_session_and_each_role_and_unit_is_an_owner(
    conn: apsw.Connection,
) -> None:
    coder = _create(conn)
    with pytest.raises(apsw.ConstraintError):
        _create(conn)
    # No unit and an empty unit are the same owner (the index coalesces them).
    with pytest.raises(apsw.ConstraintError):
        _create(conn, attrs.evolve(CODER, unit=""))
    owners = [
        REVIEWER,
        attrs.evolve(CODER, unit="u1"),
        attrs.evolve(CODER, task="t2"),
        attrs.evolve(CODER, controller_id="other"),
        attrs.evolve(CODER, workspace="/elsewhere"),
    ]
    made = {owner: _create(conn, owner, T0 + n) for n, owner in enumerate(owners, start=1)}
    for owner, row in made.items():
        assert sessions.current(conn, owner) == row and row.generation == 1
    others = sessions.others_on_workspace(conn, "/w", CODER)
    assert [row.owner for row in others] == owners[:4]
    assert coder not in others and made[owners[4]] not in others
    assert sessions.others_on_workspace(conn, "/elsewhere", CODER) == []
    reviewer = made[REVIEWER]
    with conn:
        sessions.retire(conn, reviewer, reason="operator", now=T0 + 9)
    assert sessions.current(conn, REVIEWER) is None
    assert REVIEWER not in [row.owner for row in sessions.others_on_workspace(conn, "/w", CODER)]
    # A new session of a retired owner continues its generations.
    assert _create(conn, REVIEWER, T0 + 10).generation == 2


def test_a_session_has_at_most_one_pending_invocation(conn: apsw.Connection) -> None:
    session = _create(conn)
    first = _reserve(conn, session, "turn_1")
    assert (first.dispatch, first.outcome, first.cleanup) == (
        policy.Dispatch.NOT_SENT, Outcome.PENDING, Cleanup.UNCONFIRMED,
    )  # fmt: skip
    assert (first.attempt, first.thread_intent, first.session_id) == (
        1, ThreadIntent.START, session.session_id,
    )  # fmt: skip
    with pytest.raises(apsw.ConstraintError):
        _reserve(conn, session, "turn_2")
    with pytest.raises(apsw.ConstraintError):  # a round is reserved once
        _reserve(conn, session, "turn_1")
    # Another role's session on the same workspace has its own thread.
    assert _reserve(conn, _create(conn, REVIEWER), "turn_3").attempt == 1
    with conn:
        failed = sessions.update_invocation(conn, first, outcome="uncertain", outcome_at=T0)
    assert failed.outcome is Outcome.UNCERTAIN and failed.revision == first.revision + 1
    second = _reserve(conn, session, "turn_2", T0 + 1)
    assert second.attempt == 2 and sessions.latest(conn, session.session_id) == second


def test_reserving_through_a_retired_session_is_refused(conn: apsw.Connection) -> None:
    first = _create(conn)
    _rebuild(conn, first, "history_missing", T0 + 1)
    with pytest.raises(SessionRetired, match="decide again"):
        _reserve(conn, first, "turn_1")
    assert sessions.invocation(conn, "turn_1", 1) is None


def test_attempts_count_the_owner_s_invocations_across_generations(
    conn: apsw.Connection,
) -> None:
    first = _create(conn)
    _settle(conn, _reserve(conn, first, "turn_1", T0 + 1))
    _settle(conn, _reserve(conn, first, "turn_2", T0 + 2))
    second = _rebuild(conn, first, "context_limit", T0 + 3)
    assert sessions.latest(conn, second.session_id) is None
    third = _reserve(conn, second, "turn_3", T0 + 4)
    assert third.attempt == 3 and sessions.attempts(conn, CODER) == 3
    assert _reserve(conn, _create(conn, REVIEWER), "turn_4").attempt == 1
    request = policy.Request(owner=CODER, binding=BINDING)
    facts = sessions.facts(conn, request, resume_verified=True, active_turn=lambda _: False)
    # The policy's attempt limit is per thread: the rebuilt session counts its own.
    assert facts.session is not None and facts.session.attempts == 1
    assert [other.attempts for other in facts.workspace] == [1]


def test_stale_rows_conflict(conn: apsw.Connection) -> None:
    session = _create(conn)
    with conn:
        moved = sessions.update(
            conn, session, thread_id="thr-1", history=policy.History.PERSISTED, updated_at=T0
        )
    assert (moved.thread_id, moved.history, moved.revision) == (
        "thr-1", policy.History.PERSISTED, 1,
    )  # fmt: skip
    with pytest.raises(CasConflict, match="expected revision 0, found revision 1"), conn:
        sessions.update(conn, session, checkpoint="n1")
    row = _reserve(conn, moved, "turn_1")
    with conn:
        sent = sessions.update_invocation(
            conn, row, dispatch=policy.Dispatch.MAYBE_SENT, sent_at=T0
        )
    with pytest.raises(CasConflict, match="turn_1 round 1: expected revision 0"), conn:
        sessions.update_invocation(conn, row, dispatch=policy.Dispatch.NOT_SENT)
    with pytest.raises(ValueError), conn:
        sessions.update_invocation(conn, sent, round=2)
    assert sessions.invocation(conn, "turn_1", 1) == sent


def test_facts_are_what_the_policy_decides_from(conn: apsw.Connection) -> None:
    request = policy.Request(owner=CODER, binding=BINDING)

    def decide(active: bool = False, verified: bool = True) -> policy.Decision:
        facts = sessions.facts(
            conn, request, resume_verified=verified, active_turn=lambda _: active
        )
        return policy.decide(facts)

    assert decide() == CREATE
    session = _create(conn)
    # No invocation yet: no active turn, whatever the callable says.
    assert decide(active=True).reason == "history_unknown"
    row = _reserve(conn, session, "turn_1")
    with conn:
        row = sessions.update_invocation(conn, row, dispatch=policy.Dispatch.MAYBE_SENT)
    assert decide() == policy.Decision(
        policy.Action.WAIT, "previous_dispatch_unconfirmed", session.session_id, "turn_1"
    )
    assert decide(active=True).reason == "thread_busy"
    with conn:
        row = sessions.update_invocation(
            conn, row, dispatch=policy.Dispatch.ACCEPTED, native_turn_id="n1"
        )
    assert decide().reason == "previous_outcome_unconfirmed"
    with conn:
        row = sessions.update_invocation(conn, row, outcome=Outcome.DONE, outcome_at=T0)
    assert decide().reason == "previous_cleanup_unconfirmed"
    _settle(conn, row)
    assert decide().reason == "history_unknown"
    with conn:
        sessions.update(conn, session, thread_id="thr", history=policy.History.PERSISTED)
    assert decide(verified=False).reason == "resume_unverified"
    assert decide() == policy.Decision(
        policy.Action.RESUME, "same_scope_and_role", session.session_id
    )
    # Another role's unsettled invocation on the workspace holds this owner's send.
    reviewer = _create(conn, REVIEWER)
    _reserve(conn, reviewer, "turn_2")
    assert decide() == policy.Decision(
        policy.Action.WAIT, "previous_outcome_unconfirmed", reviewer.session_id, "turn_2"
    )


def test_listing(conn: apsw.Connection) -> None:
    first = _create(conn)
    _settle(conn, _reserve(conn, first, "turn_1", T0 + 1))
    second = _rebuild(conn, first, "context_limit", T0 + 2)
    open_one = _reserve(conn, second, "turn_2", T0 + 3)
    reviewer = _create(conn, REVIEWER, T0 + 4)
    with conn:
        sessions.update_invocation(
            conn, _reserve(conn, reviewer, "turn_3", T0 + 5), outcome=Outcome.CANCELLED
        )
    stranger = _create(conn, attrs.evolve(CODER, controller_id="other"), T0 + 6)
    shown = sessions.listing(conn, "ctl")
    # Current sessions, newest first, then the retired ones.
    assert [row["session_id"] for row in shown] == [
        reviewer.session_id, second.session_id, first.session_id,
    ]  # fmt: skip
    # With the usage completeness of its Turn (which this test's turns row leaves unknown).
    assert shown[1]["latest_invocation"] == open_one.public() | {"usage_status": "unknown"}
    assert shown[2]["retire_reason"] == "context_limit"
    assert shown[2]["latest_invocation"]["outcome"] == "done"
    every = sessions.listing(conn, None)
    assert every[0]["session_id"] == stranger.session_id
    assert stranger.public() | {"latest_invocation": None} in every
    assert len(sessions.listing(conn, None, limit=2)) == 2


def test_open_terminal_turns_in_the_workspace_are_writers(conn: apsw.Connection) -> None:
    with conn:
        for terminal in ("term_here", "term_elsewhere"):
            conn.execute(
                "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
                "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
                "VALUES (?, '/s', '%1', 1, 'claude', 2, 3, 'claude', 0, 0)",
                (terminal,),
            )
        for turn_id, terminal, settled in (
            ("turn_1", "term_here", None),
            ("turn_2", "term_here", T0),
            ("turn_3", "term_elsewhere", None),
        ):
            conn.execute(
                "UPDATE turns SET terminal_id = ?, backend = 'terminal', settled_at = ? "
                "WHERE turn_id = ?",
                (terminal, settled, turn_id),
            )
    request = policy.Request(owner=CODER, binding=BINDING)

    def decide(terminals: frozenset[str]) -> policy.Decision:
        facts = sessions.facts(
            conn, request, resume_verified=True, active_turn=lambda _: False, terminals=terminals
        )
        return policy.decide(facts)

    # Only the open Turn of a pane working in this directory holds it; a settled one does not.
    assert decide(frozenset({"term_here"})) == policy.Decision(
        policy.Action.WAIT, "workspace_busy", None, "turn_1"
    )
    assert decide(frozenset()) == CREATE
    with conn:
        conn.execute("UPDATE turns SET settled_at = ? WHERE turn_id = 'turn_1'", (T0,))
    assert decide(frozenset({"term_here", "term_elsewhere"})).reason == "workspace_busy"
    assert decide(frozenset({"term_here"})) == CREATE
