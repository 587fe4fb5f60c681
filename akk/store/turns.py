"""Turns: one task a controller sent, from reservation to its one outcome (typed repository).

Every function runs inside a transaction the caller holds (the StoreActor's,
or a reader's). Updates are compare-and-swap on ``revision``. Settling a Turn
writes its outcome notification in the same transaction, and the unique index
on outcome notifications makes a second outcome impossible.
"""

from __future__ import annotations

import enum
import json
import secrets
from typing import Any

import apsw
import attrs

from akk.evidence import request_digest
from akk.store import dispatches, outbox
from akk.store.credentials import OPERATORS
from akk.store.database import cas_update
from akk.store.dispatches import Dispatch, Kind, Stage

TERMINAL = "terminal"
"""The ``backend`` of the rows `insert` and `insert_watch` write: a Turn or Watch in a pane
(the terminal backend registers under this name; the registry judges every other)."""


class TurnState(enum.StrEnum):
    DISPATCHING = "dispatching"  # reserved; keys may be on their way
    RUNNING = "running"  # the agent accepted the task
    UNCERTAIN = "uncertain"  # keys may have been sent, acceptance not proven (never retyped)
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STALLED = "stalled"
    TIMED_OUT = "timed_out"

    @property
    def settled(self) -> bool:
        return self in _SETTLED


_SETTLED = frozenset(
    {TurnState.DONE, TurnState.FAILED, TurnState.CANCELLED, TurnState.STALLED, TurnState.TIMED_OUT}
)


@attrs.frozen
class Turn:
    """One row of ``turns``."""

    turn_id: str
    controller_id: str
    client_request_id: str
    terminal_id: str | None
    backend: str
    native_session: str | None
    request_sha256: str
    request_chars: int
    round: int
    state: TurnState
    reason: str | None
    final_message: str | None
    evidence_status: str
    evidence: str | None
    evidence_limit: str | None
    usage_input: int | None
    usage_output: int | None
    usage_cache_read: int | None
    usage_cache_write: int | None
    usage_status: str
    inactivity_seconds: float
    hard_deadline_at: float
    last_activity_at: float
    created_at: float
    updated_at: float
    settled_at: float | None
    closed_at: float | None
    revision: int
    task_kind: str = "managed_send"  # or "watch": a task a person started, observed only
    unwatched_at: float | None = None
    session_id: str | None = None
    """The AKK session (task, scope, role) a backend Turn runs in."""
    person_messages: int = 0
    """Messages a person sent at the pane into the current round, by the agent's own file."""

    @property
    def unresolved(self) -> bool:
        """Still followed: not settled, not closed and not unwatched."""
        return not self.state.settled and self.closed_at is None and self.unwatched_at is None

    @property
    def is_watch(self) -> bool:
        return self.task_kind == "watch"

    def answerable_by(self, controller_id: str) -> bool:
        """Whether ``controller_id`` may answer this record's prompts: its owner or the operator
        (the CLI or the console), and never on a Watch, which observes and never sends."""
        owner = controller_id == self.controller_id or controller_id in OPERATORS
        return owner and not self.is_watch

    @property
    def ids(self) -> dict[str, str | None]:
        """The record's ids as events and results carry them: a Watch has no turn_id."""
        return {"turn_id": None if self.is_watch else self.turn_id, "watch_id": self.turn_id}

    @property
    def native_turn_id(self) -> str | None:
        """A session record's own native turn id, from its evidence (None before its receipt)."""
        if self.session_id is None or self.evidence_status != "bound" or not self.evidence:
            return None
        native = json.loads(self.evidence).get("native_turn_id")
        return native if isinstance(native, str) else None

    @property
    def observation_state(self) -> str:
        if self.unwatched_at is not None or self.closed_at is not None:
            return "stopped"
        if self.state is TurnState.TIMED_OUT:
            return "expired"
        return "settled" if self.state.settled else "observing"

    @property
    def usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.usage_input,
            "output_tokens": self.usage_output,
            "cache_read_tokens": self.usage_cache_read,
            "cache_write_tokens": self.usage_cache_write,
            "usage_status": self.usage_status,
        }

    def public(self) -> dict[str, Any]:
        """What `status` and `list` show of the Turn (never the request text)."""
        management = "closed" if self.closed_at is not None else "managed"
        return self.ids | {
            "task_kind": self.task_kind,
            "controller_id": self.controller_id,
            "client_request_id": None if self.is_watch else self.client_request_id,
            "terminal_id": self.terminal_id,
            "backend": self.backend,
            "session_id": self.session_id or self.native_session,
            "state": self.state.value,
            "round": self.round,
            "reason": self.reason,
            "management_state": "none" if self.is_watch else management,
            "observation_state": self.observation_state,
            "deadline_at": self.hard_deadline_at,
            "final_message": self.final_message,
            "person_messages": self.person_messages,
            "evidence": {"status": self.evidence_status, "limit": self.evidence_limit},
            "usage": self.usage,
            "request_chars": self.request_chars,
            "created_at": self.created_at,
            "settled_at": self.settled_at,
            "closed_at": self.closed_at,
        }


_COLUMNS = [a.name for a in attrs.fields(Turn)]


def new_turn_id() -> str:
    return "turn_" + secrets.token_hex(12)


def insert(
    conn: apsw.Connection,
    *,
    controller_id: str,
    client_request_id: str,
    terminal_id: str,
    request_sha256: str,
    request_chars: int,
    evidence_status: str,
    evidence: str | None,
    evidence_limit: str | None,
    inactivity_seconds: float,
    lifetime_seconds: float,
    now: float,
) -> Turn:
    return _insert(
        conn, turn_id=new_turn_id(), controller_id=controller_id,
        client_request_id=client_request_id, terminal_id=terminal_id,
        request_sha256=request_sha256, request_chars=request_chars,
        state=TurnState.DISPATCHING.value, evidence_status=evidence_status, evidence=evidence,
        evidence_limit=evidence_limit, inactivity_seconds=inactivity_seconds,
        hard_deadline_at=now + lifetime_seconds, last_activity_at=now, created_at=now,
        updated_at=now,
    )  # fmt: skip


def insert_watch(
    conn: apsw.Connection,
    *,
    controller_id: str,
    evidence_status: str,
    evidence: str | None,
    evidence_limit: str | None,
    inactivity_seconds: float,
    lifetime_seconds: float,
    now: float,
    terminal_id: str | None = None,
    backend: str = TERMINAL,
    native_session: str | None = None,
    request_sha256: str | None = None,
) -> Turn:
    """A Watch of the task a person started: running from the start.

    On ``terminal_id`` (the terminal backend), or found by its ``native_session``
    in its agent's own file (another ``backend``, with ``evidence`` bound already).
    Nothing was typed, so there is no request yet: its digest is of "" until the
    agent's file shows the person's message (then that message's, ``request_sha256``).
    """
    watch_id = "watch_" + secrets.token_hex(12)
    return _insert(
        conn, turn_id=watch_id, controller_id=controller_id, client_request_id=watch_id,
        terminal_id=terminal_id, backend=backend, native_session=native_session,
        task_kind="watch", request_sha256=request_sha256 or request_digest(""),
        request_chars=0, state=TurnState.RUNNING.value, evidence_status=evidence_status,
        evidence=evidence, evidence_limit=evidence_limit, inactivity_seconds=inactivity_seconds,
        hard_deadline_at=now + lifetime_seconds, last_activity_at=now, created_at=now,
        updated_at=now,
    )  # fmt: skip


def insert_backend(
    conn: apsw.Connection,
    *,
    backend: str,
    controller_id: str,
    client_request_id: str,
    session_id: str,
    request_sha256: str,
    request_chars: int,
    inactivity_seconds: float,
    lifetime_seconds: float,
    now: float,
) -> Turn:
    """A Turn to run on the session ``backend`` in ``session_id``: reserved, nothing sent yet.

    Its evidence is the backend's own answer (pending until its dispatch's result
    is stored).
    """
    return _insert(
        conn, turn_id=new_turn_id(), controller_id=controller_id,
        client_request_id=client_request_id, backend=backend, session_id=session_id,
        request_sha256=request_sha256, request_chars=request_chars,
        state=TurnState.DISPATCHING.value, evidence_status="pending", evidence=None,
        evidence_limit=None, inactivity_seconds=inactivity_seconds,
        hard_deadline_at=now + lifetime_seconds, last_activity_at=now, created_at=now,
        updated_at=now,
    )  # fmt: skip


def _insert(conn: apsw.Connection, **columns: object) -> Turn:
    """Write one new row of ``turns`` with these columns (a terminal's unless ``backend``)."""
    columns.setdefault("backend", TERMINAL)
    names = list(columns)
    marks = ", ".join("?" * len(names))
    conn.execute(
        f"INSERT INTO turns ({', '.join(names)}) VALUES ({marks})", tuple(columns.values())
    )
    turn = get(conn, str(columns["turn_id"]))
    assert turn is not None
    return turn


def held(holder: Turn, caller: str) -> str:
    """Why a terminal takes no task while ``holder`` follows it, and what ``caller`` can do.

    Names the holder's id only to its own controller: another controller's
    record is never named to a caller (its ids are not theirs to act on).
    """
    if holder.controller_id != caller:
        return (
            "another controller's record follows the task on this terminal, so it takes no "
            "task now; send to another idle terminal (list shows each one's activity_state), "
            "or try this one again once list shows it idle with a send action"
        )
    if holder.is_watch:
        return (
            f"watch {holder.turn_id} observes the task running on this terminal; wait for "
            "its outcome (or unwatch it) before sending a task"
        )
    return (
        f"turn {holder.turn_id} is still open on this terminal; wait for its outcome, or close "
        "it, before sending another task"
    )


def get(conn: apsw.Connection, turn_id: str) -> Turn | None:
    return _one(conn, "WHERE turn_id = ?", (turn_id,))


def by_request(conn: apsw.Connection, controller_id: str, client_request_id: str) -> Turn | None:
    return _one(
        conn,
        "WHERE controller_id = ? AND client_request_id = ?",
        (controller_id, client_request_id),
    )


_FOLLOWED = "settled_at IS NULL AND closed_at IS NULL AND unwatched_at IS NULL"
"""SQL for `Turn.unresolved`: not settled, not closed, not unwatched."""


def unresolved_on(conn: apsw.Connection, terminal_id: str) -> Turn | None:
    """The Turn that holds ``terminal_id``, if any."""
    return _one(
        conn,
        f"WHERE terminal_id = ? AND {_FOLLOWED}",
        (terminal_id,),
    )


def unresolved_of_native(conn: apsw.Connection, native_session: str) -> Turn | None:
    """The record that follows the agent's own session or thread ``native_session``, if any:
    a Watch of it, or a session's Turn (named there before its dispatch's result is in)."""
    return _one(
        conn,
        "WHERE (native_session = ? OR session_id IN "
        f"(SELECT session_id FROM sessions WHERE thread_id = ?)) AND {_FOLLOWED}",
        (native_session, native_session),
    )


def follower_of(conn: apsw.Connection, record: Turn) -> Turn | None:
    """The unresolved record that follows ``record``'s task now (itself, or another), if any:
    on its terminal, or of its agent's own session or thread."""
    if record.terminal_id is not None:
        return unresolved_on(conn, record.terminal_id)
    if record.native_session is not None:
        return unresolved_of_native(conn, record.native_session)
    return None


def unresolved(conn: apsw.Connection) -> list[Turn]:
    """Every Turn still followed (resumed after a restart)."""
    return _many(conn, f"WHERE {_FOLLOWED} ORDER BY created_at", ())


def of_controller(conn: apsw.Connection, controller_id: str | None, limit: int = 200) -> list[Turn]:
    """A controller's (every one's for None) newest ``limit`` Turns not closed, oldest first."""
    whose = "controller_id IS NOT NULL" if controller_id is None else "controller_id = ?"
    return _many(
        conn,
        f"WHERE {whose} AND closed_at IS NULL ORDER BY created_at DESC, rowid DESC LIMIT ?",
        (limit,) if controller_id is None else (controller_id, limit),
    )[::-1]


def count_open(conn: apsw.Connection, controller_id: str | None) -> tuple[int, int]:
    """How many Turns and Watches of a controller (every one's for None) are not closed."""
    whose = "controller_id IS NOT NULL" if controller_id is None else "controller_id = ?"
    row = conn.execute(
        f"SELECT count(*) FILTER (WHERE task_kind != 'watch'), "
        f"count(*) FILTER (WHERE task_kind = 'watch') FROM turns WHERE {whose} "
        "AND closed_at IS NULL",
        () if controller_id is None else (controller_id,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def update(conn: apsw.Connection, turn: Turn, **changes: object) -> Turn:
    """Compare-and-swap ``changes`` onto ``turn``; raises CasConflict if it moved on."""
    values = {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in changes.items()}
    cas_update(conn, "turns", "turn_id", turn.turn_id, turn.revision, values)
    fresh = get(conn, turn.turn_id)
    assert fresh is not None
    return fresh


def settle(
    conn: apsw.Connection,
    turn: Turn,
    state: TurnState,
    *,
    now: float,
    summary: str,
    reason: str | None = None,
    **changes: object,
) -> Turn:
    """Write the outcome of the Turn's current round and its notification, in this transaction."""
    assert state.settled
    settled = update(conn, turn, state=state, reason=reason, settled_at=now, **changes)
    enqueue_event(
        conn, settled, state.value, now, interaction=None, summary=summary,
        outcome={
            "state": state.value,
            "reason": reason,
            "final_message": settled.final_message,
            "person_messages": settled.person_messages,
            "usage": settled.usage,
        },
    )  # fmt: skip
    return settled


def enqueue_event(
    conn: apsw.Connection, turn: Turn, kind: str, now: float, **body: object
) -> outbox.Notification:
    """Write one event about ``turn`` for its controller, with the record's ids and round."""
    return outbox.enqueue(
        conn,
        controller_id=turn.controller_id,
        turn_id=turn.turn_id,
        round=turn.round,
        kind=kind,
        body=turn.ids | {"round": turn.round} | body,
        now=now,
    )


def renewed_deadline(record: Turn, now: float, seconds: float) -> float:
    """A renew's deadline: the later of the saved one and now + ``seconds``, never their sum.

    A managed Send never outlives its original hard lifetime: its deadline stays.
    """
    if not record.is_watch:
        return record.hard_deadline_at
    return max(record.hard_deadline_at, now + seconds)


def revive(
    conn: apsw.Connection,
    watch: Turn,
    *,
    now: float,
    deadline: float,
    ended: tuple[TurnState, str | None, str, dict[str, object]] | None,
) -> Turn:
    """An expired or unwatched Watch observes again, in its next generation (``round``).

    The old generations' expiry notices not accepted and not in flight (unsent, or
    given up on in ``retryable_failure``) are withdrawn. ``ended``
    (state, reason, summary, changes): the task ended meanwhile, so the new
    generation records that actual outcome at once instead of running.
    """
    assert watch.is_watch and not watch.unresolved
    outbox.withdraw_superseded(conn, watch.turn_id, TurnState.TIMED_OUT.value, watch.round + 1, now)
    revived = update(
        conn, watch, round=watch.round + 1, state=TurnState.RUNNING, reason=None,
        settled_at=None, unwatched_at=None, hard_deadline_at=deadline, last_activity_at=now,
    )  # fmt: skip
    if ended is None:
        return revived
    state, reason, summary, changes = ended
    return settle(conn, revived, state, now=now, reason=reason, summary=summary, **changes)


def answer_uncertain(conn: apsw.Connection, dispatch: Dispatch, why: str, now: float) -> None:
    """An answer's keys may have gone out without their effect proven: say so, once.

    The Turn keeps running (its own file still decides its outcome) with reason
    ``response_uncertain``; its controller gets a ``response_uncertain`` event
    naming the interaction. Nothing is sent again.
    """
    turn = get(conn, dispatch.turn_id or "")
    if turn is None:
        return
    if turn.unresolved:
        turn = update(conn, turn, reason="response_uncertain")
    enqueue_event(
        conn, turn, "response_uncertain", now, interaction=None,
        interaction_id=dispatch.interaction_id, dispatch_id=dispatch.dispatch_id,
        summary=f"AKK cannot prove the answer took effect: {why}. It will not send it again; "
        + ("look at the terminal (status shows its screen)" if turn.terminal_id is not None
           else "call status to see what the agent did"),
    )  # fmt: skip


def orphaned(conn: apsw.Connection, dispatch: Dispatch, cause: str, now: float) -> bool:
    """An open step whose sender is gone (AKK restarted, or its TerminalActor crashed).

    Nothing is sent again. An answer's keys may be out: ``uncertain``, with a
    ``response_uncertain`` event. A task or respond cut off before its Enter:
    ``uncertain``, and so is its Turn (a cut-off cancel leaves the task as it
    was). One whose Enter went out is the Turn's to settle from its evidence.
    Returns whether the step was settled here. ``cause`` is a reason code.
    """
    if dispatch.kind in (Kind.ANSWER, Kind.APPROVAL):
        if dispatch.terminal_id is None and _round_never_sent(conn, dispatch.turn_id or ""):
            why = f"nothing was sent: the round carrying it never reached the agent ({cause})"
            dispatches.advance(conn, dispatch, Stage.NOT_ACCEPTED, why)
            return True
        why = f"the answer's effect was never proven ({cause})"
        answer_uncertain(conn, dispatches.advance(conn, dispatch, Stage.UNCERTAIN, why), why, now)
        return True
    if dispatch.stage not in (Stage.RESERVED, Stage.TEXT_INJECTED):
        return False
    dispatches.advance(conn, dispatch, Stage.UNCERTAIN, cause)
    turn = get(conn, dispatch.turn_id or "")
    if turn is not None and turn.unresolved and dispatch.kind is not Kind.CANCEL:
        update(conn, turn, state=TurnState.UNCERTAIN, reason=cause)
    return True


def _round_never_sent(conn: apsw.Connection, turn_id: str) -> bool:
    """Whether the Turn's current round is a backend invocation provably never sent (an
    answer queued as its next round went nowhere with it)."""
    row = conn.execute(
        "SELECT i.dispatch FROM invocations i JOIN turns t"
        " ON t.turn_id = i.turn_id AND i.round = t.round WHERE t.turn_id = ?",
        (turn_id,),
    ).fetchone()
    return row is not None and row[0] == "not_sent"


def reopen(
    conn: apsw.Connection,
    turn: Turn,
    *,
    request_sha256: str,
    request_chars: int,
    evidence_status: str,
    evidence: str | None,
    evidence_limit: str | None,
    now: float,
) -> Turn:
    """`respond`: the settled Turn's next round starts (its earlier outcome stays delivered)."""
    return update(
        conn, turn, round=turn.round + 1, state=TurnState.DISPATCHING, reason=None,
        final_message=None, person_messages=0, settled_at=None, request_sha256=request_sha256,
        request_chars=request_chars, evidence_status=evidence_status, evidence=evidence,
        evidence_limit=evidence_limit, usage_input=None, usage_output=None,
        usage_cache_read=None, usage_cache_write=None, usage_status="unknown",
        last_activity_at=now,
    )  # fmt: skip


def _one(conn: apsw.Connection, where: str, args: tuple[object, ...]) -> Turn | None:
    found = _many(conn, where, args)
    return found[0] if found else None


def _many(conn: apsw.Connection, where: str, args: tuple[object, ...]) -> list[Turn]:
    rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM turns {where}", args)
    turns = []
    for row in rows:
        values = dict(zip(_COLUMNS, row, strict=True))
        values["state"] = TurnState(values["state"])
        turns.append(Turn(**values))
    return turns
