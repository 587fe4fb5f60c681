"""Retention against a real store (apsw): what goes, what stays, tombstones, batches, file size.

Times are explicit (the store never reads a clock): every record is written at a
chosen instant and a pass runs at another, so "older than N days" is exact.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from akk.discovery.process import alive, start_ticks
from akk.store import audit, dispatches, outbox, responds, retention, terminals, turns
from akk.store.database import open_store
from akk.store.dispatches import Kind
from akk.store.responds import Responded
from akk.store.retention import DAY, Plan
from akk.store.turns import TurnState
from tests.store_rows import add_ctl_and_t1

NOW = 2_000_000_000.0
OLD = NOW - 40 * DAY
RECENT = NOW - 5 * DAY


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    connection = open_store(tmp_path / "akk.sqlite3")
    retention.use_incremental_vacuum(connection)
    add_ctl_and_t1(connection)
    yield connection
    connection.close()


def _record(
    conn: apsw.Connection,
    at: float,
    *,
    state: TurnState = TurnState.DONE,
    delivery: str = "accepted",
    stage: str = "accepted",
    session_id: str | None = None,
    message: str = "",
) -> str:
    """One Turn as a run leaves it at ``at``: its dispatch, a prompt and its offer, a
    respond's client_request_id, its outcome notification in ``delivery``, an audit row.
    ``state`` uncertain: no outcome."""
    with conn:
        turn = turns.insert(
            conn, controller_id="ctl", client_request_id=secrets.token_hex(8), terminal_id="t1",
            request_sha256="0" * 64, request_chars=4, evidence_status="unknown", evidence=None,
            evidence_limit="test", inactivity_seconds=60, lifetime_seconds=3600, now=at,
        )  # fmt: skip
        conn.execute(
            "INSERT INTO interactions (interaction_id, terminal_id, turn_id, kind, fingerprint, "
            "profile, projection, state, created_at, updated_at) "
            "VALUES (?, 't1', ?, 'permission', x'00', 'p', '{}', 'consumed', ?, ?)",
            (f"int_{turn.turn_id}", turn.turn_id, at, at),
        )
        conn.execute(
            "INSERT INTO offers (offer_id, interaction_id, controller_id, fingerprint, state, "
            "created_at, expires_at, updated_at) VALUES (?, ?, 'ctl', x'00', 'consumed', ?, ?, ?)",
            (f"ofr_{turn.turn_id}", f"int_{turn.turn_id}", at, at, at),
        )
        dispatch = _dispatch(conn, turn.turn_id, at)
        conn.execute("UPDATE dispatches SET stage = ? WHERE dispatch_id = ?", (stage, dispatch))
        responds.record(conn, "ctl", f"rsp_{turn.turn_id}", Responded(turn.turn_id, 2, "0"), at)
        if session_id is not None:
            conn.execute(
                "UPDATE turns SET session_id = ? WHERE turn_id = ?", (session_id, turn.turn_id)
            )
            conn.execute(
                "INSERT INTO invocations (turn_id, round, session_id, attempt, thread_intent, "
                "reserved_at, dispatch, outcome, updated_at) "
                "VALUES (?, 1, ?, 1, 'start', ?, 'accepted', ?, ?)",
                (turn.turn_id, session_id, at,
                 "uncertain" if state is TurnState.UNCERTAIN else "done", at),
            )  # fmt: skip
        fresh = turns.get(conn, turn.turn_id)
        assert fresh is not None
        if state.settled:
            turns.settle(
                conn, fresh, state, now=at, summary="s", updated_at=at, final_message=message
            )
            conn.execute(
                "UPDATE notifications SET state = ?, updated_at = ? WHERE turn_id = ?",
                (delivery, at, turn.turn_id),
            )
        else:
            turns.update(conn, fresh, state=state, updated_at=at)
        audit.record(conn, at=at, actor="ctl", action="send", outcome="ok", turn_id=turn.turn_id)
    return turn.turn_id


def _dispatch(conn: apsw.Connection, turn_id: str, at: float) -> str:
    row = dispatches.reserve(
        conn, controller_id="ctl", turn_id=turn_id, terminal_id=None, kind=Kind.TASK,
        typing="literal", screen_seq=None, now=at,
    )  # fmt: skip
    return row.dispatch_id


def _session(conn: apsw.Connection, *, retired_at: float | None, task: str) -> str:
    session_id = "sess_" + secrets.token_hex(12)
    with conn:
        conn.execute(
            "INSERT INTO sessions (session_id, controller_id, task, role, workspace, generation, "
            "policy_version, backend, home, agent_version, protocol_version, history, "
            "retired_at, decision_action, decision_reason, created_at, updated_at) "
            "VALUES (?, 'ctl', ?, 'r', '/w', 1, 1, 'codex_app_server', '/h', '1', '1', "
            "'persisted', ?, 'create', 'new', ?, ?)",
            (session_id, task, retired_at, OLD, OLD),
        )
    return session_id


def _exists(conn: apsw.Connection, turn_id: str) -> bool:
    return turns.get(conn, turn_id) is not None


def _rows(conn: apsw.Connection) -> dict[str, int]:
    return {
        table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        for table in retention.TABLES
    }


def test_old_settled_and_delivered_records_go_with_every_row_of_theirs(
    conn: apsw.Connection,
) -> None:
    old = _record(conn, OLD)
    abandoned = _record(conn, OLD, state=TurnState.FAILED, delivery="retryable_failure")
    recent = _record(conn, RECENT)
    deleted = retention.run(conn, Plan(now=NOW, retain_days=30))
    assert not _exists(conn, old) and not _exists(conn, abandoned) and _exists(conn, recent)
    of_each = ("turns", "notifications", "dispatches", "offers", "interactions", "responds")
    assert {t: deleted[t] for t in of_each} == dict.fromkeys(of_each, 2)
    assert deleted["audit"] == 2  # each record's own row; its prune line stays
    lines = conn.execute(
        "SELECT turn_id, outcome, at, detail FROM audit WHERE action = 'prune' ORDER BY turn_id"
    ).fetchall()
    assert sorted((row[0], row[1], row[2]) for row in lines) == sorted(
        [(old, "done", NOW), (abandoned, "failed", NOW)]
    )
    assert all(f'"settled_at": {OLD}' in row[3] for row in lines)
    assert _rows(conn)["turns"] == 1


def test_the_age_is_the_injected_clock_s(conn: apsw.Connection) -> None:
    record = _record(conn, RECENT)
    retention.run(conn, Plan(now=NOW, retain_days=30))
    assert _exists(conn, record)
    retention.run(conn, Plan(now=RECENT + 30 * DAY + 1, retain_days=30))
    assert not _exists(conn, record)
    # A fractional retention prunes within seconds of the outcome (a bench's setting).
    soon = _record(conn, NOW)
    retention.run(conn, Plan(now=NOW + 2, retain_days=1 / DAY))
    assert not _exists(conn, soon)


def test_open_uncertain_and_undelivered_records_survive_any_age(conn: apsw.Connection) -> None:
    kept = [
        _record(conn, OLD, state=TurnState.RUNNING, stage="text_injected"),
        _record(conn, OLD, state=TurnState.UNCERTAIN, stage="uncertain"),
        _record(conn, OLD, delivery="pending"),
        _record(conn, OLD, delivery="delivering"),
        _record(conn, OLD, stage="uncertain"),  # settled, but one step is unproven
    ]
    retired = _session(conn, retired_at=OLD, task="a")
    kept.append(_record(conn, OLD, state=TurnState.UNCERTAIN, session_id=retired))
    current = _session(conn, retired_at=None, task="b")
    kept.append(_record(conn, OLD, session_id=current))
    deleted = retention.run(conn, Plan(now=NOW + 1000 * DAY, retain_days=30))
    assert all(_exists(conn, turn_id) for turn_id in kept)
    assert deleted["turns"] == 0 and deleted["sessions"] == 0
    assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (2,)


def test_a_retired_session_follows_its_last_invocation(conn: apsw.Connection) -> None:
    current = _session(conn, retired_at=None, task="t")
    retired = _session(conn, retired_at=OLD, task="t")
    with conn:
        conn.execute("UPDATE sessions SET replaces = ? WHERE session_id = ?", (retired, current))
    first = _record(conn, OLD, session_id=retired)
    second = _record(conn, RECENT, session_id=retired)
    retention.run(conn, Plan(now=NOW, retain_days=30))
    assert not _exists(conn, first) and _exists(conn, second)
    assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (2,)
    deleted = retention.run(conn, Plan(now=NOW + 30 * DAY, retain_days=30))
    assert not _exists(conn, second) and deleted["sessions"] == 1
    assert conn.execute("SELECT session_id, replaces FROM sessions").fetchall() == [(current, None)]


def test_dry_run_counts_equal_what_a_pass_deletes(conn: apsw.Connection) -> None:
    retired = _session(conn, retired_at=OLD, task="t")
    for at in (OLD, OLD, RECENT):
        _record(conn, at)
        _record(conn, at, session_id=retired)
    _record(conn, OLD, delivery="pending")
    _record(conn, OLD, state=TurnState.UNCERTAIN, stage="uncertain")
    with conn:
        audit.record(conn, at=OLD, actor="ctl", action="list", outcome="ok")
        audit.record(conn, at=OLD, actor="ctl", action="status", outcome="not_found",
                     turn_id="turn_never")  # fmt: skip
        audit.record(conn, at=RECENT, actor="ctl", action="list", outcome="ok")
    plan = Plan(now=NOW + 31 * DAY, retain_days=30, batch=2)
    with conn:
        counted = retention.count(conn, plan)
    before = _rows(conn)
    deleted = retention.run(conn, plan)
    assert counted == deleted
    assert deleted["turns"] == 6 and deleted["sessions"] == 1
    assert deleted["audit"] == 6 + 3  # six records' rows, three old calls
    after = _rows(conn)
    assert after["turns"] == before["turns"] - 6
    # And later, past the tombstones' horizon, they and their prune lines go (counted first).
    late = Plan(now=NOW + 31 * DAY + retention.TOMBSTONE_DAYS * DAY + 1, retain_days=10_000)
    with conn:
        counted = retention.count(conn, late)
    deleted = retention.run(conn, late)
    assert counted == deleted and deleted["tombstones"] == 6 and deleted["audit"] == 6


def test_no_transaction_deletes_more_than_a_batch(conn: apsw.Connection) -> None:
    for _ in range(23):
        _record(conn, OLD)
    with conn:
        for i in range(31):
            audit.record(conn, at=OLD, actor="ctl", action="list", outcome=str(i))
    plan = Plan(now=NOW, retain_days=30, batch=5)
    batches: list[dict[str, int]] = []
    while True:
        with conn:
            done = retention.step(conn, plan)
        if not any(done.values()):
            break
        batches.append(done)
    records = [b["turns"] for b in batches if b["turns"]]
    assert records == [5, 5, 5, 5, 3]
    # A record's batch deletes its own rows with it; every other batch at most `batch` rows.
    assert all(sum(b.values()) <= 5 for b in batches if not b["turns"])
    assert sum(b["audit"] for b in batches if not b["turns"]) == 31


def test_a_pruned_id_leaves_a_tombstone_with_its_date(conn: apsw.Connection) -> None:
    record = _record(conn, OLD, state=TurnState.CANCELLED)
    with conn:
        request = turns.get(conn, record)
    assert request is not None
    retention.run(conn, Plan(now=NOW, retain_days=30))
    with conn:
        stone = retention.lookup(conn, record)
        again = retention.lookup_request(conn, "ctl", request.client_request_id)
    assert stone == retention.Tombstone(record, "ctl", "managed_send", "cancelled", OLD, NOW)
    assert again == stone
    assert retention.lookup(conn, "turn_unknown") is None


def test_the_file_shrinks_after_a_large_prune(tmp_path: Path, conn: apsw.Connection) -> None:
    store = tmp_path / "akk.sqlite3"
    text = "x" * 2000
    with conn:  # one commit: each record's own transaction nests in it
        for _ in range(3000):
            _record(conn, OLD, message=text)
        for _ in range(20):
            _record(conn, RECENT)
    retention.checkpoint(conn)
    before = os.path.getsize(store)
    deleted = retention.run(conn, Plan(now=NOW, retain_days=30))
    after = os.path.getsize(store) + os.path.getsize(f"{store}-wal")
    assert deleted["turns"] == 3000
    assert after < before / 5, (before, after)
    assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)


def test_a_new_store_vacuums_incrementally_and_an_old_one_is_switched_once(
    tmp_path: Path,
) -> None:
    conn = open_store(tmp_path / "old.sqlite3")
    try:
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)
        assert not retention.use_incremental_vacuum(conn)
        # A store made before retention: no auto-vacuum (the file is rewritten to make it so).
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("VACUUM")
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (0,)
        assert retention.use_incremental_vacuum(conn)
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)
        assert not retention.use_incremental_vacuum(conn)
    finally:
        conn.close()


def test_notifications_of_a_pruned_record_no_longer_ack(conn: apsw.Connection) -> None:
    record = _record(conn, OLD)
    with conn:
        event_id = outbox.of_turn(conn, record)[0].event_id
    retention.run(conn, Plan(now=NOW, retain_days=30))
    with conn:
        assert outbox.ack(conn, "ctl", event_id, NOW) is None


def _watch(
    conn: apsw.Connection, at: float, *, unwatched: float | None, delivering: bool = False
) -> str:
    """A Watch of ``t1`` opened at ``at`` whose task never settled, with one event about it;
    ``unwatched``: when its owner unwatched it (its pending event withdrawn, as `unwatch`
    does); ``delivering``: the event was out on the wire then, so it stays owed."""
    with conn:
        watch = turns.insert_watch(
            conn, controller_id="ctl", evidence_status="unknown", evidence=None,
            evidence_limit="test", inactivity_seconds=60, lifetime_seconds=3600,
            now=at, terminal_id="t1",
        )  # fmt: skip
        event = turns.enqueue_event(conn, watch, "interaction_required", at)
        if delivering:
            conn.execute(
                "UPDATE notifications SET state = 'delivering' WHERE notification_id = ?",
                (event.notification_id,),
            )
        if unwatched is not None:
            outbox.withdraw_pending(conn, watch.turn_id, unwatched)
            turns.update(conn, watch, unwatched_at=unwatched, updated_at=unwatched)
    return watch.turn_id


def test_an_unwatched_watch_goes_once_its_unwatch_is_old_and_nothing_is_owed(
    conn: apsw.Connection,
) -> None:
    old = _watch(conn, OLD - DAY, unwatched=OLD)
    recent = _watch(conn, OLD, unwatched=RECENT)
    owed = _watch(conn, OLD - DAY, unwatched=OLD, delivering=True)
    observing = _watch(conn, OLD, unwatched=None)
    plan = Plan(now=NOW, retain_days=30)
    with conn:
        counted = retention.count(conn, plan)
    deleted = retention.run(conn, plan)
    assert counted == deleted and deleted["turns"] == 1 and deleted["notifications"] == 1
    assert not _exists(conn, old)
    assert all(_exists(conn, kept) for kept in (recent, owed, observing))
    with conn:
        stone = retention.lookup(conn, old)
    assert stone == retention.Tombstone(old, "ctl", "watch", "unwatched", OLD, NOW)
    line = conn.execute("SELECT outcome FROM audit WHERE action = 'prune'").fetchall()
    assert line == [("unwatched",)]
    # A Watch that settled before its owner unwatched it keeps its task's outcome.
    settled = _watch(conn, OLD - DAY, unwatched=None)
    with conn:
        fresh = turns.get(conn, settled)
        assert fresh is not None
        done = turns.settle(conn, fresh, TurnState.DONE, now=OLD, summary="s", updated_at=OLD)
        conn.execute("UPDATE notifications SET state = 'accepted' WHERE turn_id = ?", (settled,))
        turns.update(conn, done, unwatched_at=OLD, updated_at=OLD)
    retention.run(conn, plan)
    with conn:
        assert retention.lookup(conn, settled) == retention.Tombstone(
            settled, "ctl", "watch", "done", OLD, NOW
        )


def test_a_turn_closed_before_it_settled_goes_once_its_close_is_old(
    conn: apsw.Connection,
) -> None:
    """`close` stops following a Turn: nothing settles it any more, so its close is its end."""
    closed = _record(conn, OLD - DAY, state=TurnState.RUNNING)
    recent = _record(conn, OLD - DAY, state=TurnState.RUNNING)
    unproven = _record(conn, OLD - DAY, state=TurnState.UNCERTAIN)
    open_ = _record(conn, OLD - DAY, state=TurnState.RUNNING)
    with conn:
        for turn_id, at in ((closed, OLD), (recent, RECENT), (unproven, OLD)):
            fresh = turns.get(conn, turn_id)
            assert fresh is not None
            turns.update(conn, fresh, closed_at=at, updated_at=at)
    plan = Plan(now=NOW, retain_days=30)
    with conn:
        counted = retention.count(conn, plan)
    deleted = retention.run(conn, plan)
    assert counted == deleted and deleted["turns"] == 1
    assert not _exists(conn, closed)
    assert all(_exists(conn, kept) for kept in (recent, unproven, open_))
    with conn:
        stone = retention.lookup(conn, closed)
    assert stone == retention.Tombstone(closed, "ctl", "managed_send", "closed", OLD, NOW)


def _terminal(conn: apsw.Connection, terminal_id: str, gone_at: float | None) -> None:
    with conn:
        conn.execute(
            "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
            "agent_pid, process_start, executable, first_seen_at, last_seen_at, gone_at) "
            "VALUES (?, 's', '%2', 2, 'codex', 202, 4, 'codex', 0, 0, ?)",
            (terminal_id, gone_at),
        )


def _terminals(conn: apsw.Connection) -> set[str]:
    return {str(row[0]) for row in conn.execute("SELECT terminal_id FROM terminals")}


def test_a_gone_terminal_goes_once_nothing_kept_refers_to_it(conn: apsw.Connection) -> None:
    for terminal_id, gone_at in (
        ("alone", OLD), ("recent", RECENT), ("live", None), ("kept_turn", OLD),
        ("pruned_turn", OLD), ("prompt", OLD), ("answer", OLD),
    ):  # fmt: skip
        _terminal(conn, terminal_id, gone_at)
    with conn:
        conn.execute("UPDATE terminals SET gone_at = ? WHERE terminal_id = 't1'", (OLD,))
    kept = _record(conn, RECENT)
    pruned = _record(conn, OLD)
    with conn:
        conn.execute("UPDATE turns SET terminal_id = 'kept_turn' WHERE turn_id = ?", (kept,))
        conn.execute("UPDATE turns SET terminal_id = 'pruned_turn' WHERE turn_id = ?", (pruned,))
        # A prompt in a pane no Turn followed, and a step of no Turn's: their pane's row stays.
        conn.execute(
            "INSERT INTO interactions (interaction_id, terminal_id, kind, fingerprint, profile, "
            "projection, state, created_at, updated_at) "
            "VALUES ('int_pane', 'prompt', 'permission', x'00', 'p', '{}', 'gone', ?, ?)",
            (OLD, OLD),
        )
        conn.execute(
            "INSERT INTO dispatches (dispatch_id, controller_id, terminal_id, kind, stage, "
            "created_at, updated_at) VALUES ('dsp_pane', 'ctl', 'answer', 'answer', "
            "'accepted', ?, ?)",
            (OLD, OLD),
        )
    plan = Plan(now=NOW, retain_days=30, batch=2)
    with conn:
        counted = retention.count(conn, plan)
    deleted = retention.run(conn, plan)
    assert counted == deleted
    # t1 is gone too, but the kept record's prompt was in it: its row stays with it.
    assert deleted["terminals"] == 2 and deleted["turns"] == 1
    assert _terminals(conn) == {"t1", "recent", "live", "kept_turn", "prompt", "answer"}
    with conn:
        kept_turn = turns.get(conn, kept)
        assert kept_turn is not None and kept_turn.terminal_id == "kept_turn"
        assert terminals.pane_of(conn, "kept_turn") == ("s", "%2")
        assert terminals.pane_of(conn, "alone") is None and terminals.cwd_of(conn, "alone") is None
    # Once the kept record goes, so do the rows of the terminals it held.
    later = retention.run(conn, Plan(now=RECENT + 31 * DAY, retain_days=30))
    assert later["turns"] == 1 and later["terminals"] == 3
    assert _terminals(conn) == {"live", "prompt", "answer"}


def test_a_terminal_whose_agent_ended_unseen_is_recorded_gone_then_ages_out(
    conn: apsw.Connection,
) -> None:
    """A run killed (or a reboot) leaves its terminals un-gone: the sweep before each pass
    records gone those whose agent process no longer runs (`alive`: pid and start ticks),
    so their rows age out like any other gone terminal's."""
    me = os.getpid()
    ticks = start_ticks(me)
    assert ticks is not None
    _terminal(conn, "ended", None)  # agent pid 202 started at tick 4: long gone
    _terminal(conn, "running", None)
    with conn:
        conn.execute(
            "UPDATE terminals SET agent_pid = ?, process_start = ? WHERE terminal_id = 'running'",
            (me, ticks),
        )
        assert terminals.sweep_ended(conn, alive, OLD) == 2  # `t1` (pid 101) ended too
        assert terminals.sweep_ended(conn, alive, OLD) == 0
    gone = dict(conn.execute("SELECT terminal_id, gone_at FROM terminals").fetchall())
    assert gone == {"t1": OLD, "ended": OLD, "running": None}
    deleted = retention.run(conn, Plan(now=NOW, retain_days=30))
    assert deleted["terminals"] == 2 and _terminals(conn) == {"running"}
