"""Whether a send continues a role's thread, starts one, rebuilds one or waits.

One pure function, `decide`, of facts the store holds (never of guesses), under
a versioned policy. The order of the rules is the policy:

1. **wait** while the thread has an active turn, or another session (or a
   terminal Turn) has one in the same workspace: one turn per thread, one
   writer per workspace.
2. **wait** while anything about the previous invocation of this session, or
   of any session writing the same workspace, is unconfirmed: its dispatch
   (`maybe_sent` with no outcome recorded yet), its outcome, or its cleanup. A
   fresh session does not bypass this: the earlier one is reconciled first
   (`recover`), which records its outcome (`uncertain` when nothing proves one).
3. **create** when no session of this owner (controller, task, unit, role,
   workspace) exists. Roles never share threads: each role is its own owner.
4. **rebuild** (with the controller's handoff) when the controller asks for a
   fresh context, the history is missing or its resume was rejected, resume is
   not verified for this client version, the binding changed, or the context
   or attempt limit is reached.
5. **resume** otherwise: every eligibility fact holds.
"""

from __future__ import annotations

import enum

import attrs

POLICY_VERSION = 1


class Action(enum.StrEnum):
    CREATE = "create"
    RESUME = "resume"
    REBUILD = "rebuild"
    WAIT = "wait"


class Dispatch(enum.StrEnum):
    """Whether an invocation's turn reached the app-server (never a boolean)."""

    NOT_SENT = "not_sent"  # reserved; proven never written
    MAYBE_SENT = "maybe_sent"  # written, or about to be: its result was not stored
    ACCEPTED = "accepted"  # the app-server's answer (the native turn id) is stored


class History(enum.StrEnum):
    """What is known of a session's thread history."""

    UNKNOWN = "unknown"  # thread/start may have run, its result was never stored (never
    # guessed from "the latest thread": the next send rebuilds)
    PERSISTED = "persisted"  # the thread id is stored and the thread keeps its history
    MISSING = "missing"  # the thread could not be found (thread/read or resume said so)
    REJECTED = "rejected"  # thread/resume refused it


@attrs.frozen
class Owner:
    """Who a session belongs to. Two owners never share a thread."""

    controller_id: str
    task: str
    unit: str | None
    role: str
    workspace: str
    """The canonical working directory (realpath)."""


@attrs.frozen
class ThreadConfig:
    """What a thread was started with; resuming under another binding is not verified."""

    agent_version: str
    protocol_version: str
    model: str | None
    effort: str | None
    approval_policy: str | None
    sandbox: str | None


@attrs.frozen
class Invocation:
    """The runtime facts of a session's latest invocation (each a separate fact)."""

    turn_id: str
    dispatch: Dispatch
    outcome_confirmed: bool
    """Its outcome (or `uncertain`, stated) is durable."""
    cleanup_confirmed: bool
    """Its turn is no longer active in the thread, or the process that ran it is reaped."""


@attrs.frozen
class Session:
    """The facts of one stored session (the latest generation of its owner)."""

    session_id: str
    owner: Owner
    binding: ThreadConfig
    policy_version: int
    history: History
    resume_verified: bool
    """`thread/resume` of this client version is proven to continue a thread."""
    active_turn: bool
    """The thread has a turn that is not settled."""
    latest: Invocation | None
    context_tokens: int | None
    """The thread's context in use after its latest turn (None: unknown)."""
    context_window: int | None
    """The model's context window (None: unknown)."""
    attempts: int
    """Invocations in this session's thread (the task's own counter, across generations,
    is the invocations' `attempt`; a rebuild starts the thread's count again)."""


@attrs.frozen
class Request:
    owner: Owner
    binding: ThreadConfig
    fresh_context: bool = False
    """The controller asked for a new thread (its handoff text starts it)."""


@attrs.frozen
class RebuildLimits:
    context_share: float = 0.8
    """Rebuild once this share of the model's context window is in use."""
    attempts: int = 100
    """Rebuild once the task has had this many invocations in one thread."""


@attrs.frozen
class Facts:
    request: Request
    session: Session | None
    """The owner's current (unretired) session, if any."""
    workspace: tuple[Session, ...] = ()
    """Other owners' current sessions on the same workspace."""
    writers: tuple[str, ...] = ()
    """Open terminal Turns whose agent works in the same workspace (their turn ids)."""


@attrs.frozen
class Decision:
    action: Action
    reason: str
    session_id: str | None = None
    """resume: the session continued; rebuild: the session replaced; wait: the one to
    reconcile or wait for (None for a terminal Turn's); create: None."""
    turn_id: str | None = None
    """wait: the invocation to reconcile (`recover {turn_id}`) or wait for."""

    def public(self) -> dict[str, str]:
        return {"action": self.action.value, "reason": self.reason}


def unconfirmed(session: Session) -> str | None:
    """The reason a session's latest invocation blocks the next one, or None."""
    latest = session.latest
    if latest is None:
        return None
    if not latest.outcome_confirmed:
        # A dispatch that may have happened stays `maybe_sent` for good; once reconciliation
        # recorded its outcome (`uncertain` included), it no longer blocks the thread.
        if latest.dispatch is Dispatch.MAYBE_SENT:
            return "previous_dispatch_unconfirmed"
        return "previous_outcome_unconfirmed"
    if not latest.cleanup_confirmed:
        return "previous_cleanup_unconfirmed"
    return None


def decide(facts: Facts, limits: RebuildLimits = RebuildLimits()) -> Decision:
    """The action for ``facts`` and its reason code (see the module's rules)."""
    session = facts.session
    if session is not None and session.active_turn:
        return _wait("thread_busy", session)
    for other in facts.workspace:
        if other.active_turn:
            return _wait("workspace_busy", other)
    if facts.writers:
        return Decision(Action.WAIT, "workspace_busy", None, facts.writers[0])
    for held in (*(() if session is None else (session,)), *facts.workspace):
        why = unconfirmed(held)
        if why is not None:
            return _wait(why, held)
    if session is None:
        return Decision(Action.CREATE, "new_scope_or_role")
    why = _rebuild_reason(facts.request, session, limits)
    if why is not None:
        return Decision(Action.REBUILD, why, session.session_id)
    return Decision(Action.RESUME, "same_scope_and_role", session.session_id)


def _wait(reason: str, session: Session) -> Decision:
    turn_id = session.latest.turn_id if session.latest is not None else None
    return Decision(Action.WAIT, reason, session.session_id, turn_id)


def _rebuild_reason(request: Request, session: Session, limits: RebuildLimits) -> str | None:
    if request.fresh_context:
        return "fresh_context_requested"
    if session.history is History.UNKNOWN:
        return "history_unknown"
    if session.history is History.MISSING:
        return "history_missing"
    if session.history is History.REJECTED:
        return "resume_rejected"
    if session.policy_version != POLICY_VERSION:
        return "policy_changed"
    if session.binding != request.binding:
        return "binding_changed"
    if not session.resume_verified:
        return "resume_unverified"
    window = session.context_window
    tokens = session.context_tokens
    if window and tokens is not None and tokens >= limits.context_share * window:
        return "context_limit"
    if session.attempts >= limits.attempts:
        return "attempt_limit"
    return None
