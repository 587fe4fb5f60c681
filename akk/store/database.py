"""Opening, migrating and writing the AKK store (one SQLite file, via apsw).

The store runs in WAL mode with ``synchronous=FULL``: a commit that returned
is on disk, which is what lets a reservation be trusted before any key is sent.
Only the StoreActor holds the write connection; readers open their own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import apsw

from akk.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
_MAGIC = b"SQLite format 3\0"
_HEADER_BYTES = 100


BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for another one's lock before SQLITE_BUSY."""


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


class StoreUnwritable(StoreError):
    """The store cannot write now (disk full, quota, I/O error, read-only, locked); reads work.

    Nothing of the failed transaction was committed. ``problem`` names the store
    and the cause; ``next_step`` what a person does. The next write is simply
    tried again: nothing needs a restart once the cause is gone.
    """

    def __init__(self, problem: str, next_step: str) -> None:
        self.problem, self.next_step = problem, next_step
        super().__init__(f"{problem}; {next_step}")


def unwritable(path: Path, exc: apsw.Error, system_errno: int) -> StoreUnwritable | None:
    """The StoreUnwritable ``exc``, raised by a write on ``path``, is (None for another error).

    ``system_errno`` is the connection's errno of that failure (``Connection.system_errno``):
    it tells a quota or a read-only filesystem from a full disk or a failing device.
    """
    if not isinstance(exc, (apsw.FullError, apsw.IOError, apsw.ReadOnlyError, apsw.BusyError)):
        return None
    # apsw sets both codes on every SQLite error; its stubs do not declare them.
    extended, primary = getattr(exc, "extendedresult", -1), getattr(exc, "result", -1)
    code = apsw.mapping_extended_result_codes.get(extended) or apsw.mapping_result_codes.get(
        primary, type(exc).__name__
    )
    name = errno.errorcode.get(system_errno)
    space = f"on the filesystem of {path.parent} (`akk doctor` shows how much is free)"
    if isinstance(exc, apsw.BusyError):
        cause = f"locked past its busy timeout ({code})"
        step = f"check that no other program holds {path.name} (an `akk gc` run without a server)"
    elif system_errno == errno.EDQUOT:
        cause, step = f"disk quota exceeded ({code}, EDQUOT)", f"free this user's quota {space}"
    elif isinstance(exc, apsw.FullError) or system_errno == errno.ENOSPC:
        cause, step = f"disk full ({code})", f"free space {space}"
    elif isinstance(exc, apsw.ReadOnlyError) or system_errno == errno.EROFS:
        cause = f"read-only ({code}{f', {name}' if name else ''})"
        step = f"make {path.parent} and {path.name} writable again"
    else:
        cause = f"I/O error ({code}{f', {name}' if name else ''})"
        step = f"check the device holding {path.parent} (its kernel log)"
    return StoreUnwritable(
        f"the store at {path} cannot write: {cause}",
        f"{step}, then retry; AKK writes again by itself, with no restart",
    )


def open_store(path: Path) -> apsw.Connection:
    """Open (creating if needed) the store for writing, check it, and bring its schema up to date.

    An empty file counts as a new store (a crash between creating the file and
    the first commit leaves one). Raises StoreError, whose message says what to
    do, for a store others can read, one this process cannot write, a file that
    is not an AKK store, a corrupt or truncated store (``PRAGMA quick_check``),
    or a schema newer than this program knows.
    """
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise StoreError(
                f"cannot create store {path} ({exc.strerror}); "
                "make its directory writable or pass another --state-dir"
            ) from exc
        os.close(fd)
    conn = _connect(path, apsw.SQLITE_OPEN_READWRITE)
    try:
        with _sqlite_errors(path):
            _check_identity(conn, path)
            _check_integrity(conn, path)
            _refuse_loose_modes(path)
            if conn.readonly("main"):
                raise StoreError(
                    f"{path} is read-only for this user (uid {os.geteuid()}); let it write "
                    f"the file (chmod 600 {path} as its owner) or pass another --state-dir"
                )
            if not conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall():
                # A new store frees deleted rows' pages for retention from its first table
                # on (an older one is switched once, with a VACUUM, by `use_incremental_vacuum`).
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def open_reader(path: Path) -> apsw.Connection:
    """Open a read-only connection to an existing, current store; raise StoreError if unusable."""
    if not path.exists():
        raise StoreError(f"no store at {path}; start `akk serve` once to create it")
    conn = _connect(path, apsw.SQLITE_OPEN_READONLY)
    try:
        with _sqlite_errors(path):
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
    """The schema version recorded in the store at ``path`` (for `akk doctor`).

    Raises StoreError for a missing, foreign or unreadable store.
    """
    conn = _connect(path, apsw.SQLITE_OPEN_READONLY)
    try:
        with _sqlite_errors(path):
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
    update_if(conn, table, key_column, key, ("revision = ?", (revision,)), changes, revision)
    return revision + 1


def update_if(
    conn: apsw.Connection,
    table: str,
    key_column: str,
    key: str,
    condition: tuple[str, tuple[object, ...]],
    changes: Mapping[str, object],
    revision: int,
) -> None:
    """Update one row only while ``condition`` (SQL and its parameters) holds of it, and
    count its revision on. Raises CasConflict naming ``revision``, the one the caller read,
    when the row moved on (or is gone). ``updated_at`` is set when the table has it.
    """
    columns = dict(changes)
    for name in (table, key_column, *columns):
        if not _IDENTIFIER.match(name):
            raise ValueError(f"not an identifier: {name!r}")
    if _has_column(conn, table, "updated_at"):
        columns.setdefault("updated_at", time.time())
    assignments = ", ".join(f"{name} = ?" for name in columns)
    where, parameters = condition
    conn.execute(
        f"UPDATE {table} SET {assignments}, revision = revision + 1 "
        f"WHERE {key_column} = ? AND ({where})",
        (*columns.values(), key, *parameters),
    )
    if conn.changes() == 1:
        return
    row = conn.execute(f"SELECT revision FROM {table} WHERE {key_column} = ?", (key,)).fetchone()
    raise CasConflict(table, key, revision, None if row is None else int(row[0]))


def _connect(path: Path, flags: int) -> apsw.Connection:
    with _sqlite_errors(path):
        conn = apsw.Connection(str(path), flags=flags)
    try:
        with _sqlite_errors(path):
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _check_identity(conn: apsw.Connection, path: Path) -> None:
    """Refuse SQLite files that some other program owns."""
    app_id = _scalar(conn, "PRAGMA application_id")
    tables = _scalar(conn, "SELECT count(*) FROM sqlite_schema")
    if app_id == APPLICATION_ID or (app_id == 0 and tables == 0):
        return
    raise StoreError(
        f"{path} is an SQLite database that AKK did not create; "
        "move it away or pass another --state-dir"
    )


def _check_integrity(conn: apsw.Connection, path: Path) -> None:
    """Refuse a store whose pages or indexes are damaged (``PRAGMA quick_check``)."""
    try:
        problems = [" ".join(str(row[0]).split()) for row in conn.execute("PRAGMA quick_check")]
    except apsw.CorruptError as exc:
        raise StoreError(_corrupt(path, f"quick_check: {exc}")) from exc
    if problems == ["ok"]:
        return
    first = problems[0] if len(problems[0]) <= 160 else problems[0][:160] + "…"
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    raise StoreError(_corrupt(path, f"quick_check: {first}{more}"))


def _refuse_loose_modes(path: Path) -> None:
    """Refuse a store (or its WAL files) that users other than the owner may read or write."""
    loose: list[str] = []
    for name in (path, *_companions(path)):
        try:
            mode = stat.S_IMODE(name.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            loose.append(f"{name} has mode {mode:o}")
    if loose:
        files = " ".join(str(name) for name in (path, *_companions(path)) if name.exists())
        raise StoreError(
            f"{'; '.join(loose)}, so other users may read the store; run: chmod 600 {files}"
        )


@contextlib.contextmanager
def _sqlite_errors(path: Path) -> Iterator[None]:
    """Turn any apsw.Error raised inside into a StoreError saying what to do."""
    try:
        yield
    except apsw.Error as exc:
        raise StoreError(_explain(path, exc)) from exc


def _explain(path: Path, exc: apsw.Error) -> str:
    if isinstance(exc, apsw.NotADBError):
        return f"{path} is not an SQLite database; move it away or pass another --state-dir"
    if isinstance(exc, apsw.CorruptError):
        return _corrupt(path, f"SQLite: {exc}")
    if isinstance(exc, apsw.ReadOnlyError):
        return (
            f"cannot write store {path} ({exc}); let this user write it and its directory "
            f"(chmod 600 {path}; chmod u+w {path.parent}), or pass another --state-dir"
        )
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return (
            f"store {path} is locked by another process ({exc}); stop the other `akk serve` "
            "(`akk doctor` shows it) or pass another --state-dir"
        )
    if isinstance(exc, apsw.FullError):
        return f"the disk holding {path} is full ({exc}); free some space and start again"
    if isinstance(exc, apsw.CantOpenError):
        return (
            f"cannot open store {path} ({exc}); check that this user may read and write it "
            "and its directory, or pass another --state-dir"
        )
    return (
        f"store {path} failed ({type(exc).__name__}: {exc}); run `akk doctor`, and if the "
        "store is damaged move it away or restore a backup"
    )


def _corrupt(path: Path, detail: str) -> str:
    truncated = _truncation(path)
    cause = f"{truncated}; {detail}" if truncated else detail
    # The WAL files go along under matching names: a stale -wal left next to a
    # restored backup would be replayed into it.
    moves = [f"mv {path} {path}.bad"] + [
        f"mv {name} {path}.bad{name.name.removeprefix(path.name)}"
        for name in _companions(path)
        if name.exists()
    ]
    return (
        f"{path} is corrupt ({cause}); move it away ({' && '.join(moves)}) "
        "and start again, or restore a backup"
    )


def _truncation(path: Path) -> str | None:
    """Say so when the file is shorter than its own SQLite header records."""
    try:
        with path.open("rb") as f:
            header = f.read(_HEADER_BYTES)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return None
    if len(header) < _HEADER_BYTES:
        if header and _MAGIC.startswith(header[: len(_MAGIC)]):
            return f"the file is {size} bytes, shorter than an SQLite header: it was truncated"
        return None
    if not header.startswith(_MAGIC):
        return None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return None
    # The page count at offset 28 is only valid when offset 92 matches the change counter.
    pages = int.from_bytes(header[28:32], "big") if header[92:96] == header[24:28] else 0
    if size < pages * page_size:
        return (
            f"the file is {size} bytes but its header records {pages} pages of {page_size}: "
            "it was truncated"
        )
    if size % page_size:
        return (
            f"the file is {size} bytes, not a whole number of {page_size}-byte pages: "
            "it was truncated or overwritten"
        )
    return None


def _companions(path: Path) -> tuple[Path, Path]:
    """The WAL files SQLite keeps next to the store."""
    return path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")


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
    # A migration may rebuild a table others refer to (SQLite's documented way:
    # foreign keys off, rebuild, then check them all before the commit).
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        while version < SCHEMA_VERSION:
            with conn:
                conn.execute(MIGRATIONS[version])
                broken = conn.execute("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise StoreError(
                        f"migration to schema version {version + 1} would break "
                        f"{len(broken)} references (first: {broken[0]}); the store is unchanged"
                    )
                version += 1
                conn.execute(f"PRAGMA user_version = {version}")
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    finally:
        conn.execute("PRAGMA foreign_keys = ON")


def _has_column(conn: apsw.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))
