"""Reservations and receipts of input-bearing steps (typed repository).

A dispatch is reserved, durably, before any key; each later stage is recorded
after it happened. At most one dispatch per terminal is open (reserved,
text_injected or enter_sent) at a time (a unique partial index). What a
restarted server finds open may have typed anything: it becomes ``uncertain``
and is never retried.
"""

from __future__ import annotations

import enum
import secrets

import apsw
import attrs

from akk.store.database import cas_update


class Stage(enum.StrEnum):
    RESERVED = "reserved"
    TEXT_INJECTED = "text_injected"
    ENTER_SENT = "enter_sent"
    ACCEPTED = "accepted"
    NOT_ACCEPTED = "not_accepted"
    UNCERTAIN = "uncertain"
    ABORTED = "aborted"

    @property
    def open(self) -> bool:
        return self in (Stage.RESERVED, Stage.TEXT_INJECTED, Stage.ENTER_SENT)


class Kind(enum.StrEnum):
    TASK = "task"
    ANSWER = "answer"
    APPROVAL = "approval"
    RESPOND = "respond"
    CANCEL = "cancel"


@attrs.frozen
class Dispatch:
    dispatch_id: str
    controller_id: str
    turn_id: str | None
    terminal_id: str | None
    kind: Kind
    stage: Stage
    reason: str | None
    typing: str | None
    screen_seq: int | None
    interaction_id: str | None
    offer_id: str | None
    plan_sha256: str | None
    created_at: float
    updated_at: float
    revision: int

    def public(self) -> dict[str, object]:
        return {
            "dispatch_id": self.dispatch_id,
            "controller_id": self.controller_id,
            "interaction_id": self.interaction_id,
            "kind": self.kind.value,
            "stage": self.stage.value,
            "reason": self.reason,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


_COLUMNS = [a.name for a in attrs.fields(Dispatch)]


def reserve(
    conn: apsw.Connection,
    *,
    controller_id: str,
    turn_id: str,
    terminal_id: str | None,
    kind: Kind,
    typing: str | None,
    screen_seq: int | None,
    now: float,
    interaction_id: str | None = None,
    offer_id: str | None = None,
    fingerprint: bytes | None = None,
    plan_sha256: str | None = None,
) -> Dispatch:
    """Reserve one input-bearing step; raises apsw.ConstraintError if the terminal has one open.

    ``terminal_id`` None: an answer to an app-server request (no screen, no keys).

    An answer's reservation names the interaction and the offer it consumes and
    the digest of its key plan: the audit receipt (who, which interaction,
    outcome), never the answer itself.
    """
    dispatch_id = "dsp_" + secrets.token_hex(12)
    conn.execute(
        "INSERT INTO dispatches (dispatch_id, controller_id, turn_id, terminal_id, "
        "interaction_id, offer_id, kind, stage, typing, fingerprint, plan_sha256, screen_seq, "
        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'reserved', ?, ?, ?, ?, ?, ?)",
        (
            dispatch_id, controller_id, turn_id, terminal_id, interaction_id, offer_id,
            kind.value, typing, fingerprint, plan_sha256, screen_seq, now, now,
        ),
    )  # fmt: skip
    found = get(conn, dispatch_id)
    assert found is not None
    return found


def get(conn: apsw.Connection, dispatch_id: str) -> Dispatch | None:
    found = _select(conn, "WHERE dispatch_id = ?", (dispatch_id,))
    return found[0] if found else None


def of_turn(conn: apsw.Connection, turn_id: str) -> list[Dispatch]:
    return _select(conn, "WHERE turn_id = ? ORDER BY created_at", (turn_id,))


def newest_of_turn(conn: apsw.Connection, turn_id: str, limit: int) -> tuple[list[Dispatch], int]:
    """The Turn's newest ``limit`` dispatches, oldest first, and how many it has in all."""
    newest = _select(
        conn, "WHERE turn_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?", (turn_id, limit)
    )
    row = conn.execute("SELECT count(*) FROM dispatches WHERE turn_id = ?", (turn_id,)).fetchone()
    assert row is not None
    return newest[::-1], int(row[0])


def of_turns(conn: apsw.Connection, turn_ids: list[str]) -> dict[str, list[Dispatch]]:
    """Each of ``turn_ids``' dispatches, oldest first (the stages the console shows)."""
    found: dict[str, list[Dispatch]] = {turn_id: [] for turn_id in turn_ids}
    for start in range(0, len(turn_ids), 500):  # within SQLite's bound on parameters
        batch = turn_ids[start : start + 500]
        marks = ", ".join("?" * len(batch))
        for dispatch in _select(conn, f"WHERE turn_id IN ({marks}) ORDER BY created_at", (*batch,)):
            if dispatch.turn_id is not None:
                found[dispatch.turn_id].append(dispatch)
    return found


def all_open(conn: apsw.Connection) -> list[Dispatch]:
    return _select(conn, "WHERE stage IN ('reserved', 'text_injected', 'enter_sent')", ())


def open_on(conn: apsw.Connection, terminal_id: str) -> list[Dispatch]:
    """The terminal's open step, if any (at most one: the unique index)."""
    return _select(
        conn,
        "WHERE terminal_id = ? AND stage IN ('reserved', 'text_injected', 'enter_sent')",
        (terminal_id,),
    )


def advance(
    conn: apsw.Connection, dispatch: Dispatch, stage: Stage, reason: str | None = None
) -> Dispatch:
    """Record ``stage`` (compare-and-swap)."""
    cas_update(
        conn, "dispatches", "dispatch_id", dispatch.dispatch_id, dispatch.revision,
        {"stage": stage.value, "reason": reason},
    )  # fmt: skip
    fresh = get(conn, dispatch.dispatch_id)
    assert fresh is not None
    return fresh


def _select(conn: apsw.Connection, where: str, args: tuple[object, ...]) -> list[Dispatch]:
    rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM dispatches {where}", args)
    found = []
    for row in rows:
        values = dict(zip(_COLUMNS, row, strict=True))
        values["kind"] = Kind(values["kind"])
        values["stage"] = Stage(values["stage"])
        found.append(Dispatch(**values))
    return found


def reserve_cancel(
    conn: apsw.Connection, *, controller_id: str, turn_id: str, now: float
) -> Dispatch:
    """Reserve the owner's cancel of a backend Turn (no terminal: a protocol's interrupt)."""
    return reserve(
        conn, controller_id=controller_id, turn_id=turn_id, terminal_id=None,
        kind=Kind.CANCEL, typing=None, screen_seq=None, now=now,
    )  # fmt: skip


def cancel_asked(conn: apsw.Connection, turn_id: str, since: float) -> bool:
    """Whether the owner's cancel of ``turn_id`` was reserved at or after ``since`` (its
    round's start) and not provably refused: a run that follows the Turn again (after a
    restart) still knows the owner asked, and never sends it again."""
    return any(
        step.kind is Kind.CANCEL and step.stage is not Stage.NOT_ACCEPTED
        and step.created_at >= since
        for step in of_turn(conn, turn_id)
    )  # fmt: skip
