"""Sessions of the session backends and their invocations (typed repository).

A session belongs to one owner (controller, task, unit, role, workspace),
records the backend it runs on (its registered name) and holds one thread; a
rebuild retires it and starts the owner's next generation in the same
transaction, so an owner never has two current sessions (a unique partial
index). An invocation is one Turn round sent through a session: it is reserved
before its dispatch (the app-server's turn/start) is written, and a session has
at most one whose outcome is pending (one active turn per thread).

Every function runs inside a transaction the caller holds. Updates are
compare-and-swap on ``revision``. ``facts`` reads what `akk.sessions.policy`
decides from; the store never guesses a fact it does not hold.
"""

from __future__ import annotations

import enum
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

import apsw
import attrs

from akk.sessions import policy
from akk.store import turns
from akk.store.database import CasConflict, StoreError, cas_update


class ThreadIntent(enum.StrEnum):
    """How an invocation's thread was obtained."""

    START = "start"  # thread/start: a new thread
    RESUME = "resume"  # thread/resume of the stored thread id
    LOADED = "loaded"  # the thread was already loaded in the running app-server


class Outcome(enum.StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STALLED = "stalled"
    TIMED_OUT = "timed_out"
    UNCERTAIN = "uncertain"  # stated, and durable: never retried blindly


class Cleanup(enum.StrEnum):
    UNCONFIRMED = "unconfirmed"
    CONFIRMED = "confirmed"  # the turn is no longer active, or its process is reaped


class SessionRetired(StoreError):
    """An invocation was reserved through a session that is retired (or gone)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id} is retired; read the owner's current session and decide again"
        )


@attrs.frozen
class SessionRow:
    """One row of ``sessions``."""

    session_id: str
    controller_id: str
    task: str
    unit: str | None
    role: str
    workspace: str
    generation: int
    policy_version: int
    backend: str
    home: str
    """The backend's home (CODEX_HOME for the Codex app-server), never shown."""
    agent_version: str
    protocol_version: str
    model: str | None
    effort: str | None
    approval_policy: str | None
    sandbox: str | None
    thread_id: str | None
    persistence: str
    history: policy.History
    checkpoint: str | None
    context_tokens: int | None
    context_window: int | None
    replaces: str | None
    retired_at: float | None
    retire_reason: str | None
    decision_action: policy.Action
    decision_reason: str
    created_at: float
    updated_at: float
    revision: int

    @property
    def owner(self) -> policy.Owner:
        return policy.Owner(
            controller_id=self.controller_id, task=self.task, unit=self.unit, role=self.role,
            workspace=self.workspace,
        )  # fmt: skip

    @property
    def binding(self) -> policy.ThreadConfig:
        return policy.ThreadConfig(
            agent_version=self.agent_version, protocol_version=self.protocol_version,
            model=self.model, effort=self.effort, approval_policy=self.approval_policy,
            sandbox=self.sandbox,
        )  # fmt: skip

    def public(self) -> dict[str, Any]:
        """What `list` shows of the session (never its home)."""
        return {
            "session_id": self.session_id,
            "controller_id": self.controller_id,
            "backend": self.backend,
            "scope": {"task": self.task, "role": self.role, "unit": self.unit},
            "workspace": self.workspace,
            "generation": self.generation,
            "thread_id": self.thread_id,
            "history": self.history.value,
            "checkpoint": self.checkpoint,
            "decision": {"action": self.decision_action.value, "reason": self.decision_reason},
            "replaces": self.replaces,
            "retired_at": self.retired_at,
            "retire_reason": self.retire_reason,
            "created_at": self.created_at,
        }


@attrs.frozen
class InvocationRow:
    """One row of ``invocations``."""

    turn_id: str
    round: int
    session_id: str
    attempt: int
    thread_intent: ThreadIntent
    reserved_at: float
    sent_at: float | None
    native_turn_id: str | None
    receipt_sha256: str | None
    dispatch: policy.Dispatch
    outcome: Outcome
    outcome_at: float | None
    cleanup: Cleanup
    cleanup_at: float | None
    updated_at: float
    revision: int

    @property
    def fact(self) -> policy.Invocation:
        """The invocation as the policy sees it."""
        return policy.Invocation(
            turn_id=self.turn_id,
            dispatch=self.dispatch,
            outcome_confirmed=self.outcome is not Outcome.PENDING,
            cleanup_confirmed=self.cleanup is Cleanup.CONFIRMED,
        )

    def public(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "round": self.round,
            "session_id": self.session_id,
            "attempt": self.attempt,
            "thread_intent": self.thread_intent.value,
            "reserved_at": self.reserved_at,
            "sent_at": self.sent_at,
            "native_turn_id": self.native_turn_id,
            "dispatch": self.dispatch.value,
            "outcome": self.outcome.value,
            "outcome_at": self.outcome_at,
            "cleanup": self.cleanup.value,
            "cleanup_at": self.cleanup_at,
        }


_SESSION_COLUMNS = [a.name for a in attrs.fields(SessionRow)]
_INVOCATION_COLUMNS = [a.name for a in attrs.fields(InvocationRow)]

_SAME_OWNER = "controller_id = ? AND task = ? AND coalesce(unit, '') = ? AND role = ?"
"""SQL matching an owner's sessions on one workspace (the unique index's key)."""


def _owner_args(owner: policy.Owner) -> tuple[str, str, str, str]:
    return (owner.controller_id, owner.task, owner.unit or "", owner.role)


def new_session_id() -> str:
    return "sess_" + secrets.token_hex(12)


def get(conn: apsw.Connection, session_id: str) -> SessionRow | None:
    found = _sessions(conn, "WHERE session_id = ?", (session_id,))
    return found[0] if found else None


def current(conn: apsw.Connection, owner: policy.Owner) -> SessionRow | None:
    """The owner's unretired session, if any (at most one: the unique index)."""
    found = _sessions(
        conn,
        f"WHERE {_SAME_OWNER} AND workspace = ? AND retired_at IS NULL",
        (*_owner_args(owner), owner.workspace),
    )
    return found[0] if found else None


def others_on_workspace(
    conn: apsw.Connection, workspace: str, owner: policy.Owner
) -> list[SessionRow]:
    """The unretired sessions of every other owner on ``workspace``, oldest first."""
    return _sessions(
        conn,
        f"WHERE workspace = ? AND retired_at IS NULL AND NOT ({_SAME_OWNER}) "
        "ORDER BY created_at, session_id",
        (workspace, *_owner_args(owner)),
    )


def create(
    conn: apsw.Connection,
    *,
    owner: policy.Owner,
    backend: str,
    binding: policy.ThreadConfig,
    home: str,
    decision: policy.Decision,
    now: float,
    replaces: SessionRow | None = None,
) -> SessionRow:
    """The owner's next session: its thread is not started yet (history ``unknown``).

    A ``rebuild`` names the owner's current session in ``replaces``; it is
    retired in this same transaction, with the decision's reason (CasConflict
    if it moved on). The generation is one more than the owner's latest, 1 for
    its first. Raises apsw.ConstraintError if the owner still has a current
    session, ValueError for a decision that creates no session, a rebuild
    without ``replaces`` (or a create with it) or another owner's session.
    """
    if decision.action not in (policy.Action.CREATE, policy.Action.REBUILD):
        raise ValueError(f"a {decision.action.value} decision creates no session")
    if (decision.action is policy.Action.REBUILD) != (replaces is not None):
        raise ValueError(f"a {decision.action.value} decision with replaces={replaces!r}")
    if replaces is not None:
        if replaces.owner != owner:
            raise ValueError(f"session {replaces.session_id} belongs to another owner")
        retire(conn, replaces, reason=decision.reason, now=now)
    generation = _scalar(
        conn,
        f"SELECT coalesce(max(generation), 0) + 1 FROM sessions WHERE {_SAME_OWNER} "
        "AND workspace = ?",
        (*_owner_args(owner), owner.workspace),
    )
    session_id = new_session_id()
    columns: dict[str, object] = {
        "session_id": session_id,
        **attrs.asdict(owner),
        "generation": generation,
        "policy_version": policy.POLICY_VERSION,
        "backend": backend,
        "home": home,
        **attrs.asdict(binding),
        "history": policy.History.UNKNOWN.value,
        "replaces": None if replaces is None else replaces.session_id,
        "decision_action": decision.action.value,
        "decision_reason": decision.reason,
        "created_at": now,
        "updated_at": now,
    }
    conn.execute(
        f"INSERT INTO sessions ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
        tuple(columns.values()),
    )
    row = get(conn, session_id)
    assert row is not None
    return row


def retire(conn: apsw.Connection, row: SessionRow, *, reason: str, now: float) -> SessionRow:
    """The session holds no current thread of its owner any more (compare-and-swap)."""
    return update(conn, row, retired_at=now, retire_reason=reason, updated_at=now)


def update(conn: apsw.Connection, row: SessionRow, **changes: object) -> SessionRow:
    """Compare-and-swap ``changes`` onto ``row``; raises CasConflict if it moved on."""
    cas_update(conn, "sessions", "session_id", row.session_id, row.revision, _stored(changes))
    fresh = get(conn, row.session_id)
    assert fresh is not None
    return fresh


def reserve(
    conn: apsw.Connection,
    session: SessionRow,
    *,
    turn_id: str,
    round: int,
    thread_intent: ThreadIntent | str,
    now: float,
) -> InvocationRow:
    """Reserve round ``round`` of ``turn_id`` through ``session``, before anything is sent.

    Its attempt is the owner's task counter: one more than the owner's earlier
    invocations across all generations. Raises SessionRetired if the session
    is no longer its owner's current one, apsw.ConstraintError if the session
    already has an invocation whose outcome is pending (or this round exists).
    """
    conn.execute(
        "INSERT INTO invocations (turn_id, round, session_id, attempt, thread_intent, "
        "reserved_at, dispatch, updated_at) "
        "SELECT ?, ?, session_id, ?, ?, ?, ?, ? FROM sessions "
        "WHERE session_id = ? AND retired_at IS NULL",
        (
            turn_id, round, attempts(conn, session.owner) + 1, ThreadIntent(thread_intent).value,
            now, policy.Dispatch.NOT_SENT.value, now, session.session_id,
        ),
    )  # fmt: skip
    if conn.changes() != 1:
        raise SessionRetired(session.session_id)
    found = invocation(conn, turn_id, round)
    assert found is not None
    return found


def attempts(conn: apsw.Connection, owner: policy.Owner) -> int:
    """How many invocations the owner's task has had, across all its generations."""
    return _scalar(
        conn,
        "SELECT count(*) FROM invocations WHERE session_id IN "
        f"(SELECT session_id FROM sessions WHERE {_SAME_OWNER} AND workspace = ?)",
        (*_owner_args(owner), owner.workspace),
    )


def invocation(conn: apsw.Connection, turn_id: str, round: int) -> InvocationRow | None:
    found = _invocations(conn, "WHERE turn_id = ? AND round = ?", (turn_id, round))
    return found[0] if found else None


def latest(conn: apsw.Connection, session_id: str) -> InvocationRow | None:
    """The session's most recently reserved invocation, if any."""
    found = _invocations(
        conn, "WHERE session_id = ? ORDER BY reserved_at DESC, rowid DESC LIMIT 1", (session_id,)
    )
    return found[0] if found else None


def update_invocation(
    conn: apsw.Connection, row: InvocationRow, **changes: object
) -> InvocationRow:
    """Compare-and-swap ``changes`` onto ``row``; raises CasConflict if it moved on.

    (`cas_update` keys a row by one column; an invocation's key is two.)
    """
    values = _stored(changes)
    settable = set(_INVOCATION_COLUMNS) - {"turn_id", "round", "revision"}
    if not values.keys() <= settable:
        raise ValueError(f"not settable on an invocation: {sorted(values.keys() - settable)}")
    values.setdefault("updated_at", time.time())
    assignments = ", ".join(f"{name} = ?" for name in values)
    conn.execute(
        f"UPDATE invocations SET {assignments}, revision = revision + 1 "
        "WHERE turn_id = ? AND round = ? AND revision = ?",
        (*values.values(), row.turn_id, row.round, row.revision),
    )
    changed = conn.changes() == 1
    fresh = invocation(conn, row.turn_id, row.round)
    if not changed or fresh is None:
        found = None if fresh is None else fresh.revision
        raise CasConflict("invocations", f"{row.turn_id} round {row.round}", row.revision, found)
    return fresh


def fail_unsent(
    conn: apsw.Connection, turn_id: str, round_: int, *, reason: str, summary: str, now: float
) -> tuple[turns.Turn, InvocationRow]:
    """A round that provably never reached its agent: its invocation ``not_sent`` (failed,
    nothing to clean up) and its Turn ``failed`` for ``reason``. Returns both as stored."""
    inv = invocation(conn, turn_id, round_)
    fresh = turns.get(conn, turn_id)
    assert inv is not None and fresh is not None
    update_invocation(
        conn, inv, dispatch=policy.Dispatch.NOT_SENT, outcome="failed", outcome_at=now,
        cleanup="confirmed", cleanup_at=now,
    )  # fmt: skip
    failed = turns.settle(conn, fresh, turns.TurnState.FAILED, now=now, reason=reason,
                          summary=summary)  # fmt: skip
    return failed, inv


def settle_invocation(
    conn: apsw.Connection,
    turn_id: str,
    round_: int,
    state: turns.TurnState,
    now: float,
    *,
    outcome: str | None = None,
    cleanup: bool = False,
    checkpoint: bool = False,
    context: tuple[int | None, int | None] = (None, None),
) -> None:
    """Record, in a Turn's settle, its round's invocation outcome (``outcome``, default the
    Turn's ``state``) and cleanup; with ``checkpoint``, the session's latest completed native
    turn and its context (``context``: tokens and window, None keeps the stored one)."""
    inv = invocation(conn, turn_id, round_)
    if inv is None:
        return
    changes: dict[str, object] = {"outcome": outcome or state.value, "outcome_at": now}
    if cleanup:
        changes |= {"cleanup": "confirmed", "cleanup_at": now}
    update_invocation(conn, inv, **changes)
    session = get(conn, inv.session_id)
    if session is not None and checkpoint and inv.native_turn_id is not None:
        tokens, window = context
        update(
            conn, session, checkpoint=inv.native_turn_id,
            context_tokens=tokens if tokens is not None else session.context_tokens,
            context_window=window if window is not None else session.context_window,
        )  # fmt: skip


def facts(
    conn: apsw.Connection,
    request: policy.Request,
    *,
    resume_verified: bool,
    active_turn: Callable[[InvocationRow], bool],
    terminals: frozenset[str] = frozenset(),
) -> policy.Facts:
    """The facts `policy.decide` needs for ``request``, as the store holds them.

    ``active_turn`` says whether a latest invocation's turn is still active in
    its thread (a session without invocations has none). ``terminals`` are the
    panes whose agent works in the request's directory: their open Turns are
    writers there.
    """

    def fact(row: SessionRow) -> policy.Session:
        last = latest(conn, row.session_id)
        return policy.Session(
            session_id=row.session_id,
            owner=row.owner,
            binding=row.binding,
            policy_version=row.policy_version,
            history=row.history,
            resume_verified=resume_verified,
            active_turn=last is not None and active_turn(last),
            latest=None if last is None else last.fact,
            context_tokens=row.context_tokens,
            context_window=row.context_window,
            attempts=_scalar(
                conn, "SELECT count(*) FROM invocations WHERE session_id = ?", (row.session_id,)
            ),
        )

    owner = request.owner
    mine = current(conn, owner)
    others = others_on_workspace(conn, owner.workspace, owner)
    return policy.Facts(
        request=request,
        session=None if mine is None else fact(mine),
        workspace=tuple(fact(other) for other in others),
        writers=tuple(
            turn.turn_id
            for turn in sorted(
                filter(None, (turns.unresolved_on(conn, t) for t in terminals)),
                key=lambda turn: turn.created_at,
            )
        ),
    )


def listing(
    conn: apsw.Connection, controller_id: str | None, limit: int = 200
) -> list[dict[str, Any]]:
    """A controller's (every one's for None) current sessions, newest first, then the most
    recently retired ones; at most ``limit`` in all, each with its latest invocation."""
    whose = "controller_id IS NOT NULL" if controller_id is None else "controller_id = ?"
    rows = _sessions(
        conn,
        f"WHERE {whose} ORDER BY retired_at IS NOT NULL, coalesce(retired_at, created_at) DESC, "
        "rowid DESC LIMIT ?",
        (limit,) if controller_id is None else (controller_id, limit),
    )
    shown = []
    for row in rows:
        last = latest(conn, row.session_id)
        invocation = None
        if last is not None:
            usage = conn.execute(
                "SELECT usage_status FROM turns WHERE turn_id = ?", (last.turn_id,)
            ).fetchone()
            invocation = last.public() | {"usage_status": usage[0] if usage else "unknown"}
        shown.append(row.public() | {"latest_invocation": invocation})
    return shown


def count_current(conn: apsw.Connection, controller_id: str | None) -> int:
    """How many sessions of a controller (every one's for None) are current (not retired)."""
    whose = "controller_id IS NOT NULL" if controller_id is None else "controller_id = ?"
    return _scalar(
        conn,
        f"SELECT count(*) FROM sessions WHERE {whose} AND retired_at IS NULL",
        () if controller_id is None else (controller_id,),
    )


def _scalar(conn: apsw.Connection, sql: str, args: tuple[object, ...]) -> int:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return int(row[0])


def _stored(changes: Mapping[str, object]) -> dict[str, object]:
    return {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in changes.items()}


def _sessions(conn: apsw.Connection, where: str, args: tuple[object, ...]) -> list[SessionRow]:
    rows = conn.execute(f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions {where}", args)
    found = []
    for row in rows:
        values = dict(zip(_SESSION_COLUMNS, row, strict=True))
        values["history"] = policy.History(values["history"])
        values["decision_action"] = policy.Action(values["decision_action"])
        found.append(SessionRow(**values))
    return found


def _invocations(
    conn: apsw.Connection, where: str, args: tuple[object, ...]
) -> list[InvocationRow]:
    rows = conn.execute(f"SELECT {', '.join(_INVOCATION_COLUMNS)} FROM invocations {where}", args)
    found = []
    for row in rows:
        values = dict(zip(_INVOCATION_COLUMNS, row, strict=True))
        values["thread_intent"] = ThreadIntent(values["thread_intent"])
        values["dispatch"] = policy.Dispatch(values["dispatch"])
        values["outcome"] = Outcome(values["outcome"])
        values["cleanup"] = Cleanup(values["cleanup"])
        found.append(InvocationRow(**values))
    return found
