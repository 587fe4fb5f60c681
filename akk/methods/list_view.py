"""`list`, kept current: the terminal rows and each controller's records, built and encoded
once per change instead of once per call.

Nothing here is ever stale. A terminal's row is rebuilt whenever the board's
snapshot of it is replaced (`TerminalBoard.version`); a controller's records
are read again whenever anything at all was committed to the store since they
were read (`StoreReader.version`, SQLite's ``data_version``: any writer, any
table, retention's deletes included). The store's reads are shared: the
callers that find their records out of date while one read runs wait for the
next, which reads all of theirs in one go (one worker-thread trip, not one per
call).

Visibility is exactly `list`'s: a controller sees its own Turns, Watches and
sessions (the operator everyone's); a terminal's Turn ids only when that Turn
is its own; and a credential narrowed to workspace roots only the panes under
them, checked at each call (the check reads the filesystem, so it is never
kept).
"""

from __future__ import annotations

import json
from typing import Any

import apsw
import attrs
import trio

from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot, terminal_row
from akk.methods.common import available_actions
from akk.profiles.observation import State
from akk.protocol.jsonrpc import Encoded
from akk.protocol.projection import cut
from akk.store import outbox, sessions, turns
from akk.store.reader import StoreReader
from akk.store.turns import Turn
from akk.workspace_roots import pane_allowed

Owner = str | None
"""Whose records a view shows: a controller_id, or None for the operator (everyone's)."""


LIST_ROWS = 200
"""The most open Turns and Watches, and the most sessions, one `list` reads of a caller."""
MESSAGE_CHARS = 200
"""The head of a record's final message a `list` row shows (`status` shows all it keeps)."""
RECORDS_MAX_BYTES = 512 << 10
"""The most one caller's Turn and Watch rows take as JSON, newest kept first."""
SESSIONS_MAX_BYTES = 256 << 10
"""The same for its session rows."""
TERMINALS_MAX_BYTES = 224 << 10
"""The most the panes' rows take as JSON, in pane order (about 420 panes): with the
records and sessions a reply stays within a 1 MiB frame."""


@attrs.frozen
class Records:
    """One caller's records at one store version, each list encoded as a JSON array, and
    how many open ones each leaves out (`omitted`)."""

    turns: str
    watches: str
    sessions: str
    omitted: dict[str, int]


@attrs.frozen
class _Generation:
    """What was read of the store at one version: every held pane's Turn, and views read."""

    version: int
    held: dict[str, Turn]
    records: dict[Owner, Records]


@attrs.define(eq=False)
class _Read:
    """One read of the store for every owner that joined it before it started."""

    owners: set[Owner] = attrs.field(factory=set)
    done: trio.Event = attrs.field(factory=trio.Event)
    result: _Generation | None = None
    error: Exception | None = None


@attrs.frozen
class _Row:
    """A terminal's row as its snapshot on the board makes it, and encoded while unheld."""

    snapshot: TerminalSnapshot
    row: dict[str, Any]
    unheld: str


@attrs.frozen
class _Pane:
    """One terminal as `list` shows it, at one board and store version."""

    cwd: str | None
    holder: str | None  # the controller whose unresolved Turn holds the pane
    shown: str  # the row for everyone but the holder and the operator
    held: str  # the row for them (the Turn's ids shown)


@attrs.frozen
class _Panes:
    """Every terminal at one board and store version, and their arrays for a caller who
    holds none of them and for the operator."""

    rows: list[_Pane]
    holders: frozenset[str]
    shown: _Fitted  # everyone's rows as a caller that holds none of them sees them
    held: _Fitted  # as the operator sees them (every holder's Turn ids)


@attrs.frozen
class _Fitted:
    """The panes' rows that fit `TERMINALS_MAX_BYTES`, as a JSON array, and how many did not."""

    array: str
    omitted: int


class ListView:
    """Serves `list` for every connection from rows and records kept current."""

    def __init__(self, board: TerminalBoard, reader: StoreReader) -> None:
        self._board = board
        self._reader = reader
        self._rows: dict[str, _Row] = {}
        self._board_version = -1
        self._order: list[TerminalSnapshot] = []
        self._generation: _Generation | None = None
        self._next: _Read | None = None
        self._reading = trio.Lock()
        # The panes at one board version with one store read's holders, and their two arrays.
        self._panes: tuple[int, dict[str, Turn], _Panes] | None = None

    async def listing(self, owner: Owner, narrowed: tuple[str, ...]) -> Encoded:
        """`list` for ``owner`` (None: the operator) whose credential is narrowed to
        ``narrowed`` (empty: not narrowed), reflecting every change committed before the call."""
        generation = await self._records(owner)
        records = generation.records[owner]
        panes = self._current_panes(generation)
        if narrowed:
            terminals = _fitted(
                [_row_for(p, owner) for p in panes.rows if pane_allowed(p.cwd, narrowed)]
            )
        elif owner is None:
            terminals = panes.held
        elif owner in panes.holders:
            terminals = _fitted([_row_for(p, owner) for p in panes.rows])
        else:
            terminals = panes.shown
        omitted = records.omitted | {"terminals": terminals.omitted}
        return Encoded(
            f'{{"terminals":{terminals.array},"turns":{records.turns},'
            f'"watches":{records.watches},"sessions":{records.sessions},'
            f'"omitted":{_json(omitted)}}}'
        )

    async def _records(self, owner: Owner) -> _Generation:
        """A generation holding ``owner``'s records, read after this call began."""
        version = await self._reader.version()
        generation = self._generation
        if generation is not None and generation.version == version and owner in generation.records:
            return generation
        read = self._next
        leader = read is None
        if read is None:
            read = self._next = _Read()
        read.owners.add(owner)
        if leader:
            # Who opened the read runs it; it must finish for every one who joined.
            with trio.CancelScope(shield=True):
                await self._run(read)
        await read.done.wait()
        if read.error is not None:
            raise read.error
        assert read.result is not None
        return read.result

    async def _run(self, read: _Read) -> None:
        async with self._reading:
            if self._next is read:
                self._next = None  # later callers join the next read
            try:
                # Read after the version: a write committed in between makes the view newer
                # than its version says, never older, and no later call reads that version.
                version = await self._reader.version()
                base = self._generation
                if base is None or base.version != version:
                    base = None
                owners = read.owners
                result = await self._reader.run(lambda conn: _read(conn, version, base, owners))
                if base is not None and await self._reader.version() != version:
                    # The records may be newer than the base's holders: read all in one go.
                    result = await self._reader.run(lambda conn: _read(conn, version, None, owners))
                self._generation = read.result = result
            except Exception as error:
                read.error = error
            finally:
                read.done.set()

    def _current_panes(self, generation: _Generation) -> _Panes:
        """Every terminal's row with its holder, encoded as each kind of caller sees them."""
        board_version = self._board.version
        if board_version != self._board_version:
            self._board_version = board_version
            self._order = sorted(self._board, key=lambda s: s.identity.pane_id)
            live = {s.identity.terminal_id for s in self._order}
            for terminal_id in [t for t in self._rows if t not in live]:
                del self._rows[terminal_id]
        cached = self._panes
        if cached is not None and cached[0] == board_version and cached[1] is generation.held:
            return cached[2]
        rows = [self._pane(snapshot, generation.held) for snapshot in self._order]
        panes = _Panes(
            rows=rows,
            holders=frozenset(p.holder for p in rows if p.holder is not None),
            shown=_fitted([p.shown for p in rows]),
            held=_fitted([p.held for p in rows]),
        )
        self._panes = (board_version, generation.held, panes)
        return panes

    def _pane(self, snapshot: TerminalSnapshot, held: dict[str, Turn]) -> _Pane:
        terminal_id = snapshot.identity.terminal_id
        known = self._rows.get(terminal_id)
        if known is None or known.snapshot is not snapshot:
            row = terminal_row(snapshot)
            known = _Row(snapshot, row, _json(with_holder(row, None, visible=False)))
            self._rows[terminal_id] = known
        holder = held.get(terminal_id)
        if holder is None:
            return _Pane(snapshot.identity.cwd, None, known.unheld, known.unheld)
        return _Pane(
            cwd=snapshot.identity.cwd,
            holder=holder.controller_id,
            shown=_json(with_holder(known.row, holder, visible=False)),
            held=_json(with_holder(known.row, holder, visible=True)),
        )


def _row_for(pane: _Pane, owner: Owner) -> str:
    return pane.held if owner in (None, pane.holder) else pane.shown


_NEITHER = frozenset({State.IDLE_DRAFT, State.UNKNOWN})
"""Screens on which neither `send` (a composer holding text) nor `watch` (no task proven to
run) is taken: the pane offers only `status` until a person clears its draft, or it reads."""


def with_holder(row: dict[str, Any], holder: Turn | None, *, visible: bool) -> dict[str, Any]:
    """A terminal's row with the Turn that holds it (its ids only if ``visible``: to its
    owner and the operator) and the calls valid on the pane now; `status` shows this too."""
    shown = dict(row)
    terminal_id = shown["terminal_id"]
    if visible and holder is not None:
        shown |= holder.ids
        shown["session_id"] = holder.native_session
    actions: list[dict[str, Any]] = [{"method": "status", "params": {"terminal_id": terminal_id}}]
    state = shown["observation"]["state"]
    if holder is None and shown["profile"] and state not in _NEITHER:
        method = "send" if state == State.IDLE else "watch"
        actions.append({"method": method, "params": {"terminal_id": terminal_id}})
    shown["available_actions"] = actions
    return shown


def _read(
    conn: apsw.Connection, version: int, base: _Generation | None, owners: set[Owner]
) -> _Generation:
    """``owners``' records (added to ``base``, read at the same version, if given)."""
    if base is None:
        held = {t.terminal_id: t for t in turns.unresolved(conn) if t.terminal_id is not None}
        records: dict[Owner, Records] = {}
    else:
        held, records = base.held, dict(base.records)
    for owner in owners:
        records[owner] = _records_of(conn, owner)
    return _Generation(version, held, records)


def _records_of(conn: apsw.Connection, owner: Owner) -> Records:
    """``owner``'s newest open records and sessions, as many as fit their byte bounds."""
    retryable = outbox.retryable_records(conn, owner)
    newest = turns.of_controller(conn, owner, LIST_ROWS)[::-1]
    rows = _fitting([_json(_listed(r, r.turn_id in retryable)) for r in newest], RECORDS_MAX_BYTES)
    kept = list(zip(newest, rows, strict=False))  # oldest first again below
    listed = sessions.listing(conn, owner, LIST_ROWS)
    shown = _fitting([_json(s) for s in listed], SESSIONS_MAX_BYTES)
    # Counted only past a read's row limit: under it, what was read is all there is.
    if len(newest) < LIST_ROWS:
        open_turns, open_watches = (
            sum(not r.is_watch for r in newest),
            sum(r.is_watch for r in newest),
        )
    else:
        open_turns, open_watches = turns.count_open(conn, owner)
    current = (
        sum(s["retired_at"] is None for s in listed)
        if len(listed) < LIST_ROWS
        else sessions.count_current(conn, owner)
    )
    omitted = {
        "turns": open_turns - sum(not r.is_watch for r, _ in kept),
        "watches": open_watches - sum(r.is_watch for r, _ in kept),
        "sessions": current - sum(s["retired_at"] is None for s in listed[: len(shown)]),
    }
    return Records(
        turns=_array(row for r, row in reversed(kept) if not r.is_watch),
        watches=_array(row for r, row in reversed(kept) if r.is_watch),
        sessions=_array(shown),
        omitted=omitted,
    )


def _listed(record: Turn, retryable: bool) -> dict[str, Any]:
    """A record's row: its public fields (the final message cut to its head) and actions."""
    row = record.public() | {"available_actions": available_actions(record, retryable=retryable)}
    if isinstance(message := row["final_message"], str):
        row["final_message"] = cut(message, MESSAGE_CHARS)
    return row


def _fitting(rows: list[str], room: int) -> list[str]:
    """The leading rows whose array fits in ``room`` bytes."""
    kept: list[str] = []
    for row in rows:
        if len(row) + 1 > room:
            break
        room -= len(row) + 1
        kept.append(row)
    return kept


def _fitted(rows: list[str]) -> _Fitted:
    kept = _fitting(rows, TERMINALS_MAX_BYTES)
    return _Fitted(_array(kept), len(rows) - len(kept))


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))  # compact: every reply carries each row


def _array(items: Any) -> str:
    return "[" + ",".join(items) + "]"
