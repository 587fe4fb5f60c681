"""The store: migrations, refusals, permissions, compare-and-swap, crash safety."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from akk.store.database import (
    CasConflict,
    StoreError,
    cas_update,
    open_reader,
    open_store,
    store_version,
)
from akk.store.location import StateDir
from akk.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from tests.test_state_dir import immutable

TABLES = {
    "meta",
    "qualifications",
    "credentials",
    "terminals",
    "controllers",
    "sessions",
    "invocations",
    "turns",
    "watches",
    "interactions",
    "offers",
    "dispatches",
    "notifications",
    "audit",
    "tombstones",
    "responds",
}


def _tables(conn: apsw.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
    return {name for (name,) in rows if not name.startswith("sqlite_")}


def test_migrates_an_empty_store_to_the_current_schema(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "s.db")
    assert _tables(conn) == TABLES
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
    conn.close()
    again = open_store(tmp_path / "s.db")  # reopening is a no-op migration
    assert _tables(again) == TABLES


def test_refuses_a_newer_schema(tmp_path: Path) -> None:
    open_store(tmp_path / "s.db").execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer than this akk"):
        open_store(tmp_path / "s.db")


def test_refuses_a_foreign_sqlite_file(tmp_path: Path) -> None:
    other = apsw.Connection(str(tmp_path / "s.db"))
    other.execute("CREATE TABLE photos (id INTEGER)")
    other.close()
    with pytest.raises(StoreError, match="did not create"):
        open_store(tmp_path / "s.db")
    with pytest.raises(StoreError, match="did not create"):
        open_reader(tmp_path / "s.db")


def test_refuses_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(b"this is not a database, it is a grocery list\n" * 100)
    for open_it in (open_store, open_reader, store_version):
        with pytest.raises(StoreError, match="not an SQLite database; move it away"):
            open_it(tmp_path / "s.db")


def test_reader_refuses_missing_and_outdated_stores(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="akk serve"):
        open_reader(tmp_path / "missing.db")


PAGE = 4096


@pytest.fixture
def full_store(tmp_path: Path) -> Path:
    """A closed store of well over 100 pages, everything checkpointed into the main file."""
    db = tmp_path / "s.db"
    conn = open_store(db)
    with conn:
        for i in range(3000):
            conn.execute("INSERT INTO meta VALUES (?, ?)", (f"k{i}", "v" * 100))
    conn.close()
    assert not Path(f"{db}-wal").exists()
    assert db.stat().st_size % PAGE == 0 and db.stat().st_size > 100 * PAGE
    return db


def _overwrite_pages(db: Path) -> None:
    with db.open("r+b") as f:
        f.seek(3 * PAGE)
        f.write(random.Random(7).randbytes(5 * PAGE))


def _zero_an_index_root(db: Path) -> None:
    conn = apsw.Connection(str(db))
    row = conn.execute(
        "SELECT rootpage FROM sqlite_schema WHERE name = 'sqlite_autoindex_meta_1'"
    ).fetchone()
    conn.close()
    assert row is not None
    (root,) = row
    with db.open("r+b") as f:
        f.seek((root - 1) * PAGE)
        f.write(bytes(PAGE))


def _cut(size: Callable[[int], int]) -> Callable[[Path], None]:
    return lambda db: os.truncate(db, size(db.stat().st_size))


_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "pages overwritten with garbage": (_overwrite_pages, "malformed"),
    "an index's root page zeroed": (_zero_an_index_root, "quick_check: *** in database main"),
    "cut to half, on a page boundary": (_cut(lambda n: n // PAGE // 2 * PAGE), "truncated"),
    "cut to a non-multiple of the page size": (_cut(lambda n: n // 2 + 123), "truncated"),
    "cut to 100 bytes": (_cut(lambda n: 100), "truncated"),
    "cut to 50 bytes": (_cut(lambda n: 50), "shorter than an SQLite header"),
}


@pytest.mark.parametrize("damage, cause", _DAMAGE.values(), ids=_DAMAGE.keys())
def test_refuses_a_damaged_store_saying_what_to_do(
    full_store: Path, damage: Callable[[Path], None], cause: str
) -> None:
    damage(full_store)
    with pytest.raises(StoreError) as refused:
        open_store(full_store)
    message = str(refused.value)
    assert message.startswith(f"{full_store} is corrupt (")
    assert cause in message
    assert f"mv {full_store} {full_store}.bad" in message and "restore a backup" in message
    assert "\n" not in message
    # Readers need not notice every damaged page, but may raise nothing but StoreError.
    for read in (open_reader, store_version):
        try:
            read(full_store)
        except StoreError as exc:
            assert "\n" not in str(exc)


def test_an_empty_file_is_a_new_store(tmp_path: Path) -> None:
    # What a crash between creating the file and the first commit leaves behind.
    (tmp_path / "s.db").touch(mode=0o600)
    assert _tables(open_store(tmp_path / "s.db")) == TABLES


def test_refuses_a_store_others_can_read(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    open_store(db).close()
    os.chmod(db, 0o644)
    with pytest.raises(StoreError) as refused:
        open_store(db)
    # Opening made SQLite create the -wal and -shm files, with the store's mode.
    assert str(refused.value) == (
        f"{db} has mode 644; {db}-wal has mode 644; {db}-shm has mode 644, so other users "
        f"may read the store; run: chmod 600 {db} {db}-wal {db}-shm"
    )
    os.chmod(db, 0o600)
    held = open_store(db)  # keeps the -wal and -shm files in place
    held.execute("INSERT INTO meta VALUES ('k', 'v')")  # SQLite resets an empty -wal's mode
    os.chmod(f"{db}-wal", 0o640)
    with pytest.raises(StoreError) as refused:
        open_store(db)
    assert str(refused.value).endswith(f"; run: chmod 600 {db} {db}-wal {db}-shm")
    assert f"{db}-wal has mode 640" in str(refused.value)
    held.close()


def test_refuses_a_store_it_cannot_write(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    open_store(db).close()
    unwritable: contextlib.AbstractContextManager[None]
    if os.geteuid() == 0:  # mode 0400 does not stop root; the immutable flag does
        unwritable = immutable(db)
    else:
        os.chmod(db, 0o400)
        unwritable = contextlib.nullcontext()
    with unwritable, pytest.raises(StoreError) as refused:
        open_store(db)
    assert str(refused.value).startswith(f"{db} is read-only for this user")
    assert f"chmod 600 {db}" in str(refused.value)


def test_state_dir_is_private_and_files_are_0600(state_dir: StateDir) -> None:
    state_dir.ensure()
    conn = open_store(state_dir.store_path)
    conn.execute("INSERT INTO meta VALUES ('k', 'v')")
    state_dir.token()
    assert stat.S_IMODE(state_dir.path.stat().st_mode) == 0o700
    files = list(state_dir.path.iterdir())
    assert {p.name for p in files} >= {"akk.sqlite3", "akk.sqlite3-wal", "token"}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    conn.close()


def _controller_and_watch(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO controllers VALUES ('c', 'c', 0, 0)")
    conn.execute(
        "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, agent_pid, "
        "process_start, executable, first_seen_at, last_seen_at) "
        "VALUES ('t', '/s', '%1', 1, 'claude', 2, 3, '/bin/claude', 0, 0)"
    )
    conn.execute(
        "INSERT INTO watches (watch_id, controller_id, terminal_id, state, created_at, "
        "updated_at) VALUES ('w', 'c', 't', 'active', 0, 0)"
    )


def test_compare_and_swap(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "s.db")
    _controller_and_watch(conn)
    assert cas_update(conn, "watches", "watch_id", "w", 0, {"state": "stopped"}) == 1
    with pytest.raises(CasConflict) as stale:
        cas_update(conn, "watches", "watch_id", "w", 0, {"state": "active"})
    assert (stale.value.expected, stale.value.found) == (0, 1)
    assert conn.execute("SELECT state, revision FROM watches").fetchone() == ("stopped", 1)
    with pytest.raises(CasConflict) as missing:
        cas_update(conn, "watches", "watch_id", "nope", 0, {"state": "active"})
    assert missing.value.found is None
    with pytest.raises(ValueError, match="identifier"):
        cas_update(conn, "watches; DROP TABLE audit", "watch_id", "w", 1, {"state": "x"})


def test_one_open_dispatch_per_terminal(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "s.db")
    _controller_and_watch(conn)
    insert = (
        "INSERT INTO dispatches (dispatch_id, controller_id, terminal_id, kind, stage, "
        "created_at, updated_at) VALUES (?, 'c', 't', 'answer', ?, 0, 0)"
    )
    conn.execute(insert, ("d1", "reserved"))
    with pytest.raises(apsw.ConstraintError):
        conn.execute(insert, ("d2", "reserved"))
    cas_update(conn, "dispatches", "dispatch_id", "d1", 0, {"stage": "accepted"})
    conn.execute(insert, ("d2", "reserved"))


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from akk.store.database import open_store

    conn = open_store(Path(sys.argv[1]))
    mode = sys.argv[2]
    batch = 0
    if mode == "hold":
        with conn:
            for i in range(5000):
                conn.execute("INSERT INTO meta VALUES (?, 'uncommitted')", (f"u{i}",))
            print("in-transaction", flush=True)
            sys.stdin.read()
    else:
        print("writing", flush=True)
        while True:
            with conn:
                for i in range(50):
                    conn.execute("INSERT INTO meta VALUES (?, ?)", (f"b{batch}-{i}", str(batch)))
            batch += 1
    """
)


def _start_writer(db: Path, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() in ("in-transaction", "writing")
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_killed_mid_transaction_leaves_the_previous_state(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conn = open_store(db)
    conn.execute("INSERT INTO meta VALUES ('committed', 'yes')")
    conn.close()
    _kill(_start_writer(db, "hold"))
    conn = open_store(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert conn.execute("SELECT key, value FROM meta").fetchall() == [("committed", "yes")]


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5])
def test_killed_while_committing_keeps_whole_transactions_only(
    tmp_path: Path, delay: float
) -> None:
    db = tmp_path / "s.db"
    open_store(db).close()
    proc = _start_writer(db, "loop")
    try:
        proc.wait(delay)
    except subprocess.TimeoutExpired:
        _kill(proc)
    conn = open_store(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    sizes = conn.execute("SELECT value, count(*) FROM meta GROUP BY value").fetchall()
    assert sizes, "the writer committed nothing before it was killed"
    assert all(count == 50 for _, count in sizes), sizes


def test_a_v8_store_migrates_to_v9_keeping_every_row_with_one_name_per_backend(
    tmp_path: Path,
) -> None:
    """v9: an app-server Turn's 'app_server' becomes 'codex_app_server' (its session's name),
    every row of every table is kept, every index of the rebuilt tables is back, and the
    CHECKs leave names to the registry (a new backend's name is stored, an empty one is not)."""
    path = tmp_path / "s.db"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    old = apsw.Connection(str(path))
    with old:
        for version, sql in enumerate(MIGRATIONS[:8], start=1):
            old.execute(sql)
            old.execute(f"PRAGMA user_version = {version}")
        old.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    with old:
        old.execute(
            "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
            "VALUES ('ctl', 'ctl', 0, 0)"
        )
        old.execute(
            "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
            "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
            "VALUES ('term', 's', '%1', 1, 'claude', 2, 3, 'claude', 0, 0)"
        )
        old.execute(
            "INSERT INTO sessions (session_id, controller_id, task, role, workspace, generation, "
            "policy_version, backend, codex_home, agent_version, protocol_version, history, "
            "decision_action, decision_reason, created_at, updated_at) VALUES ('sess_1', 'ctl', "
            "'t1', 'coder', '/w', 1, 1, 'codex_app_server', '/codex-home', '0.171.0', 'v2', "
            "'unknown', 'create', 'new_scope_or_role', 0, 0)"
        )
        for turn_id, terminal, backend, session in (
            ("turn_pane", "term", "terminal", None),
            ("turn_app", None, "app_server", "sess_1"),
        ):
            old.execute(
                "INSERT INTO turns (turn_id, controller_id, client_request_id, session_id, "
                "terminal_id, backend, request_sha256, request_chars, state, evidence_status, "
                "inactivity_seconds, hard_deadline_at, last_activity_at, created_at, updated_at) "
                "VALUES (?, 'ctl', ?, ?, ?, ?, ?, 1, 'running', 'unknown', 60, 9, 0, 0, 0)",
                (turn_id, turn_id, session, terminal, backend, "0" * 64),
            )
        old.execute(
            "INSERT INTO invocations (turn_id, round, session_id, attempt, thread_intent, "
            "reserved_at, dispatch, updated_at) VALUES ('turn_app', 1, 'sess_1', 1, 'start', 0, "
            "'not_sent', 0)"
        )
    rows = {table: _rows(old, table) for table in _tables(old)}
    indexes = _indexes(old)
    old.close()

    conn = open_store(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert indexes <= _indexes(conn)  # later migrations add some
    backend = {
        turn_id: name for turn_id, name in conn.execute("SELECT turn_id, backend FROM turns")
    }
    assert backend == {"turn_pane": "terminal", "turn_app": "codex_app_server"}
    expected = rows | {
        "turns": [
            # v13 adds person_messages, 0 for every Turn before it
            (*("codex_app_server" if value == "app_server" else value for value in row), 0)
            for row in rows["turns"]
        ]
    }
    assert {table: _rows(conn, table) for table in rows} == expected
    columns = [row[1] for row in conn.execute("PRAGMA table_info(sessions)")]
    assert "home" in columns and "codex_home" not in columns
    assert conn.execute("SELECT home FROM sessions").fetchall() == [("/codex-home",)]
    with conn:
        conn.execute("UPDATE turns SET backend = 'claude_headless' WHERE turn_id = 'turn_app'")
    with pytest.raises(apsw.ConstraintError), conn:
        conn.execute("UPDATE sessions SET backend = ''")
    conn.close()


def _rows(conn: apsw.Connection, table: str) -> list[tuple[object, ...]]:
    return [tuple(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid")]


def _indexes(conn: apsw.Connection) -> set[tuple[str, str]]:
    """Every named index of the store, with its table."""
    rows = conn.execute(
        "SELECT name, tbl_name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL"
    )
    return {(str(name), str(table)) for name, table in rows}
