"""The store: migrations, refusals, permissions, compare-and-swap, crash safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

from akk.store.database import CasConflict, StoreError, cas_update, open_reader, open_store
from akk.store.location import StateDir, StateDirError
from akk.store.schema import APPLICATION_ID, SCHEMA_VERSION

TABLES = {
    "meta",
    "terminals",
    "controllers",
    "sessions",
    "turns",
    "watches",
    "interactions",
    "offers",
    "dispatches",
    "notifications",
    "audit",
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
    with sqlite3.connect(tmp_path / "s.db") as other:
        other.execute("CREATE TABLE photos (id INTEGER)")
    with pytest.raises(StoreError, match="did not create"):
        open_store(tmp_path / "s.db")
    with pytest.raises(StoreError, match="did not create"):
        open_reader(tmp_path / "s.db")


def test_refuses_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(b"this is not a database, it is a grocery list\n" * 100)
    with pytest.raises(StoreError, match="not an SQLite database"):
        open_store(tmp_path / "s.db")


def test_reader_refuses_missing_and_outdated_stores(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="akk serve"):
        open_reader(tmp_path / "missing.db")


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


def test_token_is_stable_and_secret_is_separate(state_dir: StateDir) -> None:
    token = state_dir.token()
    assert token == state_dir.token()
    assert len(token) >= 32
    assert len(state_dir.id_secret()) == 32
    assert state_dir.id_secret() == state_dir.id_secret()


def test_refuses_a_directory_that_is_not_akks(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    os.chmod(tmp_path, 0o700)
    with pytest.raises(StateDirError, match="not an AKK state directory"):
        StateDir(tmp_path).ensure()


def test_refuses_a_directory_others_can_read(tmp_path: Path) -> None:
    path = tmp_path / "akk"
    path.mkdir(mode=0o755)
    os.chmod(path, 0o755)
    with pytest.raises(StateDirError, match="chmod 700"):
        StateDir(path).ensure()


def test_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AKK_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert StateDir.resolve().path == tmp_path / "xdg" / "akk"
    monkeypatch.setenv("AKK_STATE_DIR", str(tmp_path / "env"))
    assert StateDir.resolve().path == tmp_path / "env"
    assert StateDir.resolve(tmp_path / "flag").path == tmp_path / "flag"
    monkeypatch.delenv("AKK_STATE_DIR")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert StateDir.resolve().path == tmp_path / "home" / ".local" / "state" / "akk"


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
    assert cas_update(conn, "watches", "watch_id", "w", 0, {"state": "unwatched"}) == 1
    with pytest.raises(CasConflict) as stale:
        cas_update(conn, "watches", "watch_id", "w", 0, {"state": "active"})
    assert (stale.value.expected, stale.value.found) == (0, 1)
    assert conn.execute("SELECT state, revision FROM watches").fetchone() == ("unwatched", 1)
    with pytest.raises(CasConflict) as missing:
        cas_update(conn, "watches", "watch_id", "nope", 0, {"state": "active"})
    assert missing.value.found is None
    with pytest.raises(ValueError, match="identifier"):
        cas_update(conn, "watches; DROP TABLE audit", "watch_id", "w", 1, {"state": "x"})


def test_one_open_dispatch_per_terminal(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "s.db")
    _controller_and_watch(conn)
    insert = (
        "INSERT INTO dispatches (dispatch_id, terminal_id, kind, stage, created_at, updated_at) "
        "VALUES (?, 't', 'answer', ?, 0, 0)"
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
