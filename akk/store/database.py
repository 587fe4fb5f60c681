"""Opening, migrating and writing the AKK store (one SQLite file, via apsw).

The store runs in WAL mode with ``synchronous=FULL``: a commit that returned
is on disk, which is what lets a reservation be trusted before any key is sent.
Only the StoreActor holds the write connection; readers open their own.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

import apsw

from akk.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


class StoreError(Exception):
    """The store cannot be used; the message says why and what to do next."""


class CasConflict(StoreError):
    """A compare-and-swap update found another revision than the one expected."""

    def __init__(self, table: str, key: str, expected: int, found: int | None) -> None:
        self.table, self.key, self.expected, self.found = table, key, expected, found
        what = "no such row" if found is None else f"revision {found}"
        super().__init__(
            f"{table} {key}: expected revision {expected}, found {what}; "
            "re-read the row and decide again"
        )


def open_store(path: Path) -> apsw.Connection:
    """Open (creating if needed) the store for writing and bring its schema up to date.

    Raises StoreError for a file that is not an AKK store or whose schema is
    newer than this program knows.
    """
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
    conn = _connect(path, apsw.SQLITE_OPEN_READWRITE)
    try:
        _check_identity(conn, path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def open_reader(path: Path) -> apsw.Connection:
    """Open a read-only connection to an existing, current store."""
    if not path.exists():
        raise StoreError(f"no store at {path}; start `akk serve` once to create it")
    conn = _connect(path, apsw.SQLITE_OPEN_READONLY)
    try:
        _check_identity(conn, path)
        version = _user_version(conn)
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"{path} has schema version {version}, this akk needs {SCHEMA_VERSION}; "
                "run `akk serve` once to migrate it"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def store_version(path: Path) -> int:
    """The schema version recorded in the store at ``path`` (for `akk doctor`)."""
    conn = _connect(path, apsw.SQLITE_OPEN_READONLY)
    try:
        _check_identity(conn, path)
        return _user_version(conn)
    finally:
        conn.close()


def cas_update(
    conn: apsw.Connection,
    table: str,
    key_column: str,
    key: str,
    revision: int,
    changes: Mapping[str, object],
) -> int:
    """Update one row only if its revision is still ``revision``; return the new revision.

    Raises CasConflict when the row moved on (or is gone). ``updated_at`` is
    set when the table has it.
    """
    columns = dict(changes)
    for name in (table, key_column, *columns):
        if not _IDENTIFIER.match(name):
            raise ValueError(f"not an identifier: {name!r}")
    if _has_column(conn, table, "updated_at"):
        columns.setdefault("updated_at", time.time())
    assignments = ", ".join(f"{name} = ?" for name in columns)
    conn.execute(
        f"UPDATE {table} SET {assignments}, revision = revision + 1 "
        f"WHERE {key_column} = ? AND revision = ?",
        (*columns.values(), key, revision),
    )
    if conn.changes() == 1:
        return revision + 1
    row = conn.execute(f"SELECT revision FROM {table} WHERE {key_column} = ?", (key,)).fetchone()
    raise CasConflict(table, key, revision, None if row is None else int(row[0]))


def _connect(path: Path, flags: int) -> apsw.Connection:
    try:
        conn = apsw.Connection(str(path), flags=flags)
        conn.set_busy_timeout(5000)
        conn.execute("PRAGMA foreign_keys = ON")
    except apsw.Error as exc:
        raise StoreError(
            f"cannot open store {path}: {exc}; check the path and its permissions"
        ) from exc
    return conn


def _check_identity(conn: apsw.Connection, path: Path) -> None:
    """Refuse SQLite files that some other program owns, and files that are not SQLite."""
    try:
        app_id = _scalar(conn, "PRAGMA application_id")
        tables = _scalar(conn, "SELECT count(*) FROM sqlite_schema")
    except apsw.NotADBError as exc:
        raise StoreError(
            f"{path} is not an SQLite database; move it away or pass another --state-dir"
        ) from exc
    if app_id == APPLICATION_ID or (app_id == 0 and tables == 0):
        return
    raise StoreError(
        f"{path} is an SQLite database that AKK did not create; "
        "move it away or pass another --state-dir"
    )


def _user_version(conn: apsw.Connection) -> int:
    return _scalar(conn, "PRAGMA user_version")


def _scalar(conn: apsw.Connection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    assert row is not None, sql
    return int(row[0])


def _migrate(conn: apsw.Connection) -> None:
    version = _user_version(conn)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the store has schema version {version}, newer than this akk knows "
            f"({SCHEMA_VERSION}); upgrade akk, or pass another --state-dir"
        )
    while version < SCHEMA_VERSION:
        with conn:
            conn.execute(MIGRATIONS[version])
            version += 1
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _has_column(conn: apsw.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))
