"""`send` on a session backend: sessions owned by task, scope and role.

`send {scope: {task, role, unit?}, backend, cwd, request, client_request_id}`
(backend: the protocol name of a registered backend that keeps sessions; or `send
{session_id, …}`, on its session's backend) runs one Turn on that backend. The policy
(`akk.sessions.policy`) decides from stored facts and the backend's own
(`TurnBackend.history`) whether it continues the owner's thread (resume), starts one (create),
replaces it (rebuild, with the controller's optional `handoff` first in the
new thread) or must wait (`reconcile_required`, nothing started). The
decision is taken again inside the reservation's transaction, so two sends
racing for one thread cannot both pass; then its backend dispatches it.
"""

from __future__ import annotations

import os
import time
from contextlib import suppress
from typing import Any

import apsw
import attrs
import trio

from akk.actors.store import transact_reservation
from akk.actors.turn import Reload
from akk.evidence import request_digest
from akk.methods.common import (
    MAX_REQUEST_CHARS,
    MethodContext,
    available_actions,
    owned,
    pruned_request,
)
from akk.protocol.errors import Reason, RpcError
from akk.protocol.text_check import check_text
from akk.runtime.actor import ActorError
from akk.sessions import policy
from akk.store import retention, sessions, turns
from akk.store.sessions import SessionRow, ThreadIntent
from akk.store.turns import Turn
from akk.workspace_roots import RootError, canonical, covered

MAX_HANDOFF_CHARS = 50_000


@attrs.frozen
class _Reserved:
    turn: Turn
    decision: policy.Decision
    text: str


class SessionCalls:
    def __init__(self, ctx: MethodContext) -> None:
        self._ctx = ctx

    async def send(
        self, controller_id: str, params: dict[str, Any], *, roots: tuple[str, ...]
    ) -> dict[str, Any]:
        """Run one backend Turn; its workspace must lie under ``roots`` (the caller's
        effective workspace roots), else invalid_params and nothing starts."""
        text: str = params["request"]
        handoff: str | None = params.get("handoff")
        _check_text(text, "request")
        if handoff is not None:
            _check_text(handoff, "handoff")
        if "scope" in params:
            self._session_backend(params)  # refused before anything, a repeat included
        client_request_id: str = params["client_request_id"]
        existing = await self._ctx.reader.run(
            lambda conn: _with_session(
                conn, turns.by_request(conn, controller_id, client_request_id)
            )
        )
        if existing is not None:
            return _repeat(*existing, _sent(text, handoff))
        stone = await self._ctx.reader.run(
            lambda conn: retention.lookup_request(conn, controller_id, client_request_id)
        )
        if stone is not None:
            raise pruned_request(stone, client_request_id)
        owner, name = await self._owner(controller_id, params)
        _check_workspace(owner.workspace, roots, params.get("cwd") if "scope" in params else None)
        backend = self._ctx.backends.named(name)
        history = await backend.history(owner.workspace)
        binding = history.binding
        request = policy.Request(owner, binding, fresh_context=handoff is not None)
        terminals = await self._workspace_terminals(owner.workspace)
        verified = history.resume_verified
        decision = await self._ctx.reader.run(
            lambda conn: self._decide(conn, request, terminals, verified)
        )
        if decision.action is policy.Action.WAIT:
            mine = await self._ctx.reader.run(lambda conn: _holds(conn, decision, controller_id))
            raise _wait(decision, mine)
        settings, now = self._ctx.settings, time.time()

        def reserve(conn: apsw.Connection) -> _Reserved:
            # Decided again here: the StoreActor runs one transaction at a time, so a terminal
            # Turn reserved meanwhile in the same directory is seen.
            stone = retention.lookup_request(conn, controller_id, client_request_id)
            if stone is not None:  # pruned since the first look: never sent again
                raise pruned_request(stone, client_request_id)
            if turns.by_request(conn, controller_id, client_request_id) is not None:
                raise RpcError(
                    Reason.CONFLICT,
                    f"client_request_id {client_request_id!r} was used by another send "
                    "meanwhile; call send again with it for that record, or use a new one",
                )
            decision = self._decide(conn, request, terminals, verified)
            if decision.action is policy.Action.WAIT:
                raise _wait(decision, _holds(conn, decision, controller_id))
            current = sessions.current(conn, owner)
            if decision.action is policy.Action.RESUME:
                assert current is not None
                session = sessions.update(
                    conn, current, decision_action=decision.action.value,
                    decision_reason=decision.reason, updated_at=now,
                )  # fmt: skip
            else:
                replaced = current if decision.action is policy.Action.REBUILD else None
                session = sessions.create(
                    conn, owner=owner, backend=name, binding=binding, home=history.home,
                    decision=decision, now=now, replaces=replaced,
                )  # fmt: skip
            sent = _sent(text, handoff)
            turn = turns.insert_backend(
                conn, backend=name, controller_id=controller_id,
                client_request_id=client_request_id,
                session_id=session.session_id, request_sha256=request_digest(sent),
                request_chars=len(text), inactivity_seconds=settings.inactivity_minutes * 60,
                lifetime_seconds=settings.lifetime_minutes * 60, now=now,
            )  # fmt: skip
            intent = ThreadIntent.START if session.thread_id is None else ThreadIntent.RESUME
            if session.thread_id in history.loaded:
                intent = ThreadIntent.LOADED
            sessions.reserve(conn, session, turn_id=turn.turn_id, round=1, thread_intent=intent,
                             now=now)  # fmt: skip
            return _Reserved(turn, decision, sent)

        reserved = await transact_reservation(self._ctx.store, reserve)
        turn = reserved.turn
        try:
            turn = await backend.dispatch(turn, reserved.text)
        except RpcError as exc:
            exc.data["session_decision"] = reserved.decision.public()
            raise
        if not turn.unresolved:
            self._ctx.destinations.wake(controller_id)
        return _send_result(turn, reserved.decision)

    async def recover(self, controller_id: str, operator: bool, turn_id: str) -> dict[str, Any]:
        """`recover` of a session Turn: reconcile it from its thread, read-only, on its backend.

        An open Turn is followed again and reconciles at its next look (thread/read),
        however its process ended. A settled one whose native turn was not proven
        ended (a timeout or stall interrupts it best effort) gets its cleanup confirmed
        once the thread shows that turn is not running. Nothing is ever sent again.
        """
        turn = owned(
            await self._ctx.reader.run(lambda conn: turns.get(conn, turn_id)),
            turn_id, controller_id, operator,
        )  # fmt: skip
        if turn.closed_at is not None:
            raise RpcError(Reason.CLOSED, f"{turn_id} was closed; recover does not resume it")
        invocation = await self._ctx.reader.run(
            lambda conn: sessions.invocation(conn, turn_id, turn.round)
        )
        assert invocation is not None, turn_id
        thread = "unchecked"
        backend = self._ctx.backends.of(turn)
        if turn.unresolved:
            await backend.follow_again(turn_id, restarted=False)
            actor = self._ctx.desk.ref(turn_id)
            if actor is not None:
                with suppress(ActorError):
                    actor.tell(Reload(reconcile=True))
        elif invocation.cleanup != "confirmed":
            thread = await backend.confirm_ended(turn, invocation)
        round_ = turn.round
        fresh, invocation = await self._ctx.reader.run(
            lambda conn: (turns.get(conn, turn_id), sessions.invocation(conn, turn_id, round_))
        )
        assert fresh is not None and invocation is not None
        turn = fresh
        return turn.public() | {
            "available_actions": available_actions(turn),
            "supervised": turn.unresolved,
            "verification": {
                "backend": turn.backend,
                "thread": thread,
                "invocation": invocation.public(),
            },
        }

    def _decide(
        self,
        conn: apsw.Connection,
        request: policy.Request,
        terminals: frozenset[str],
        resume_verified: bool,
    ) -> policy.Decision:
        """The session decision on this transaction's facts and the backend's (`History`);
        ``terminals`` work in its directory."""

        def active(invocation: sessions.InvocationRow) -> bool:
            turn = turns.get(conn, invocation.turn_id)
            return turn is not None and turn.unresolved

        facts = sessions.facts(
            conn, request, resume_verified=resume_verified, active_turn=active,
            terminals=terminals,
        )  # fmt: skip
        return policy.decide(facts, self._ctx.session_limits)

    async def _workspace_terminals(self, workspace: str) -> frozenset[str]:
        """The terminals on the board whose agent's working directory is ``workspace``."""
        found = set()
        for snapshot in self._ctx.board:
            cwd = snapshot.identity.cwd
            if cwd is not None and await trio.to_thread.run_sync(os.path.realpath, cwd) == (
                workspace
            ):
                found.add(snapshot.identity.terminal_id)
        return frozenset(found)

    async def _owner(self, controller_id: str, params: dict[str, Any]) -> tuple[policy.Owner, str]:
        """Who owns the send's session, and the name of the backend it runs on."""
        session_id = params.get("session_id")
        if session_id is not None:
            row: SessionRow | None = await self._ctx.reader.run(
                lambda conn: sessions.get(conn, session_id)
            )
            if row is None or row.controller_id != controller_id:
                terminal_id = await self._ctx.reader.run(
                    lambda conn: _terminal_of(conn, controller_id, session_id)
                )
                if terminal_id is not None:
                    raise RpcError(
                        Reason.NOT_FOUND,
                        f"{session_id} is the agent's own session id of terminal "
                        f"{terminal_id} (a terminal conversation), not a session AKK runs on a "
                        "backend; nothing was sent. Send with terminal_id "
                        f"{terminal_id!r} to type into that conversation",
                    )
                raise RpcError(
                    Reason.NOT_FOUND,
                    f"this controller has no session {session_id[:80]!r}; list shows its "
                    "sessions, or send with scope to start one",
                )
            if row.retired_at is not None:
                raise RpcError(
                    Reason.CLOSED,
                    f"session {session_id} was replaced ({row.retire_reason}); send with its "
                    "scope to continue the current one",
                )
            return row.owner, row.backend
        name = self._session_backend(params)
        scope = params["scope"]
        cwd: str = params["cwd"]
        if not os.path.isabs(cwd):
            raise RpcError(
                Reason.INVALID_PARAMS, "send with scope needs cwd: an absolute directory path"
            )
        try:
            workspace = await trio.to_thread.run_sync(lambda: canonical(cwd, what="cwd"))
        except RootError as exc:
            raise RpcError(Reason.INVALID_PARAMS, str(exc)) from None
        owner = policy.Owner(
            controller_id=controller_id, task=scope["task"], unit=scope.get("unit"),
            role=scope["role"], workspace=workspace,
        )  # fmt: skip
        return owner, name

    def _session_backend(self, params: dict[str, Any]) -> str:
        """The registered session backend the send names (the schema allows only the names
        of `akk.backends.names`); refused (invalid_params, nothing started) for one this
        server does not run."""
        name: str = params["backend"]
        choices = self._ctx.backends.sessions()
        if name not in choices:
            named = ", ".join(f'"{choice}"' for choice in choices) or "none registered"
            raise RpcError(
                Reason.INVALID_PARAMS,
                f"send with scope names backend {name!r}, not one this server runs ({named}); "
                "nothing was started. Pass one of them, or pass terminal_id instead to type "
                "into a terminal",
            )
        return name


def _check_workspace(workspace: str, roots: tuple[str, ...], cwd: object) -> None:
    """Refuse (invalid_params) a canonical ``workspace`` outside ``roots``; nothing is started.

    A resumed session's stored workspace is checked too: roots may have
    narrowed since it was created.
    """
    if covered(workspace, roots):
        return
    if isinstance(cwd, str):
        given = f"cwd {cwd[:200]!r}" + ("" if cwd == workspace else f" (really {workspace})")
    else:
        given = f"the session's workspace {workspace}"
    where = ", ".join(roots) or "none"
    raise RpcError(
        Reason.INVALID_PARAMS,
        f"{given} is outside the workspace roots this credential may use ({where}); "
        "nothing was started. Pass a cwd under one of them, or ask the operator to add the "
        "directory (`akk serve --workspace-root DIR`, or a credential minted with "
        "`akk token create NAME --workspace-root DIR`)",
    )


def _terminal_of(conn: apsw.Connection, controller_id: str, native_session: str) -> str | None:
    """The terminal whose agent's own session is ``native_session``, if one of the records
    `list` shows ``controller_id`` was typed into it (another's records are never named)."""
    return next(
        (
            turn.terminal_id
            for turn in reversed(turns.of_controller(conn, controller_id))
            if turn.native_session == native_session and turn.terminal_id is not None
        ),
        None,
    )


def _holds(conn: apsw.Connection, decision: policy.Decision, controller_id: str) -> bool:
    """Whether what a wait names (its Turn, else its session) is ``controller_id``'s own."""
    if decision.turn_id is not None:
        turn = turns.get(conn, decision.turn_id)
        return turn is not None and turn.controller_id == controller_id
    session = None if decision.session_id is None else sessions.get(conn, decision.session_id)
    return session is not None and session.controller_id == controller_id


def _wait(decision: policy.Decision, mine: bool) -> RpcError:
    """The refusal of a send that must wait. It names the Turn to wait for or reconcile only
    when that Turn is the caller's: another controller's ids are never disclosed."""
    what = decision.reason.replace("_", " ")
    if not mine:
        return RpcError(
            Reason.RECONCILE_REQUIRED,
            f"nothing was started: {what}, held by another controller's Turn in this "
            "workspace; send again once it has ended (its owner, or the operator with "
            "`akk list`, can see it)",
            data={"session_decision": decision.public()},
        )
    target = decision.turn_id or decision.session_id
    if decision.reason in ("thread_busy", "workspace_busy"):
        step = f"wait for turn {target}'s outcome (or cancel it), then send again"
    else:
        step = f"call recover {{turn_id: {target!r}}} to reconcile it, then send again"
    return RpcError(
        Reason.RECONCILE_REQUIRED,
        f"nothing was started: {what}; {step}",
        data={"session_decision": decision.public() | {"turn_id": decision.turn_id}},
    )


def _check_text(text: str, field: str) -> None:
    """The text rule for a backend request (no screen: the character rule), and its length."""
    limit = MAX_HANDOFF_CHARS if field == "handoff" else MAX_REQUEST_CHARS
    if len(text) > limit:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"{field} has {len(text)} characters, more than the {limit} a send accepts; "
            "shorten it or put the details in a file the agent can read",
        )
    check_text(text, field)


def _with_session(
    conn: apsw.Connection, turn: Turn | None
) -> tuple[Turn, SessionRow | None] | None:
    if turn is None:
        return None
    return turn, sessions.get(conn, turn.session_id) if turn.session_id else None


def _sent(text: str, handoff: str | None) -> str:
    """What the backend receives: a rebuild's handoff (from the controller) first."""
    return text if handoff is None else f"{handoff}\n\n{text}"


def _repeat(turn: Turn, session: SessionRow | None, sent: str) -> dict[str, Any]:
    """The same client_request_id again: the original record, never a second Turn."""
    if session is None:
        raise RpcError(
            Reason.CONFLICT,
            f"client_request_id {turn.client_request_id!r} was used for a terminal send; use a "
            "new client_request_id for a new task",
        )
    if turn.request_sha256 != request_digest(sent):
        raise RpcError(
            Reason.CONFLICT,
            f"client_request_id {turn.client_request_id!r} was already used with another "
            "text; use a new client_request_id for a new task",
        )
    decision = policy.Decision(policy.Action(session.decision_action), session.decision_reason)
    return _send_result(turn, decision)


def _send_result(turn: Turn, decision: policy.Decision) -> dict[str, Any]:
    return {
        "turn_id": turn.turn_id,
        "session_id": turn.session_id,
        "watch_id": turn.turn_id,
        "state": turn.state.value,
        "session_decision": decision.public(),
    }
