"""The managed-Turn methods: send, status of a Turn, cancel, close, ack.

Each runs in its connection's task (rank CONNECTION) and reaches the actors
downward only: the Turn's backend (the contract) for the dispatch, the
TurnActor for a cancel. Every refusal is an RpcError with a protocol reason and a next step;
a refused send or cancel sent zero keys.
"""

from __future__ import annotations

import time
from typing import Any

from akk import faults
from akk.actors.store import transact
from akk.actors.terminal_board import TerminalSnapshot, project_snapshot, terminal_row
from akk.actors.turn import Cancel, Close, nothing_to
from akk.backends.contract import Refusal, RespondKey, Task
from akk.evidence import request_digest
from akk.faults import Point
from akk.methods.common import (
    MAX_REQUEST_CHARS,
    MethodContext,
    available_actions,
    owned,
    pruned_request,
)
from akk.methods.list_view import with_holder
from akk.protocol.errors import Reason, RpcError
from akk.protocol.excerpt import excerpt
from akk.protocol.text_check import check_text
from akk.store import audit, dispatches, outbox, responds, retention, sessions, turns
from akk.store.turns import TERMINAL, Turn

DISPATCH_TIMEOUT = 60.0
STATUS_DISPATCHES = 100
STATUS_RECEIPTS = 50
"""The newest dispatches and receipts `status` shows of a Turn (`omitted` counts the rest):
a Watch a controller answers for through weeks stays within one frame."""


class TurnCalls:
    def __init__(self, ctx: MethodContext) -> None:
        self._ctx = ctx

    async def send(self, controller_id: str, params: dict[str, Any]) -> dict[str, Any]:
        terminal_id: str = params["terminal_id"]
        text: str = params["request"]
        _check_request(text)
        client_request_id: str = params["client_request_id"]
        existing, holder, stone = await self._ctx.reader.run(
            lambda conn: (
                turns.by_request(conn, controller_id, client_request_id),
                turns.unresolved_on(conn, terminal_id),
                retention.lookup_request(conn, controller_id, client_request_id),
            )
        )
        if existing is not None:
            return self._repeat(existing, text)
        if stone is not None:
            raise pruned_request(stone, client_request_id)
        if holder is not None:
            # Checked again inside the reservation; this answers before any capture.
            raise RpcError(Reason.CONFLICT, turns.held(holder, controller_id))
        task = Task(
            controller_id=controller_id,
            client_request_id=client_request_id,
            text=text,
            inactivity_seconds=self._ctx.settings.inactivity_minutes * 60,
            lifetime_seconds=self._ctx.settings.lifetime_minutes * 60,
            terminal_id=terminal_id,
        )
        started = await self._ctx.backends.named(TERMINAL).start(task)
        if isinstance(started, Refusal):
            if started.turn is not None:
                return self._repeat(started.turn, text)
            raise RpcError(started.reason, started.message)
        if not started.unresolved:
            self._ctx.destinations.wake(controller_id)
        return _send_result(started)

    async def respond(
        self,
        controller_id: str,
        operator: bool,
        turn_id: str,
        text: str,
        client_request_id: str | None,
    ) -> dict[str, Any]:
        """A new composer message inside the same Turn, once its agent is idle again.

        A ``client_request_id`` this controller gave a `respond` before returns that
        round's record and types nothing; with another Turn or text it is a conflict.
        """
        _check_request(text)
        key = None if client_request_id is None else RespondKey(controller_id, client_request_id)

        def read(conn: Any) -> tuple[Turn | None, responds.Responded | None]:
            found = turns.get(conn, turn_id)
            if key is None:
                return found, None
            return found, responds.get(conn, key.controller_id, key.client_request_id)

        found, earlier = await self._ctx.reader.run(read)
        turn = owned(found, turn_id, controller_id, operator)
        if key is not None and earlier is not None:
            return _responded_again(turn, earlier, key, text)
        _managed(turn, "respond")
        self._ctx.backends.of(turn).check_respond(turn)
        if turn.closed_at is not None:
            raise RpcError(Reason.CLOSED, f"turn {turn_id} is closed; send a new task instead")
        if not turn.state.settled:
            raise RpcError(
                Reason.NOT_IDLE,
                f"turn {turn_id} is {turn.state.value}; respond once its outcome arrived and "
                "the agent is idle again",
            )
        reopened = await self._ctx.backends.of(turn).dispatch(turn, text, key)
        if not reopened.unresolved:
            self._ctx.destinations.wake(reopened.controller_id)
        return _send_result(reopened) | {"round": reopened.round}

    def _repeat(self, turn: Turn, text: str) -> dict[str, Any]:
        if turn.request_sha256 != request_digest(text):
            raise RpcError(
                Reason.CONFLICT,
                f"client_request_id {turn.client_request_id!r} was already used with another "
                "text; use a new client_request_id for a new task",
            )
        return _send_result(turn)

    async def status(self, controller_id: str, operator: bool, turn_id: str) -> dict[str, Any]:
        def read(
            conn: Any,
        ) -> tuple[
            Turn | None,
            tuple[list[dispatches.Dispatch], int],
            tuple[list[dict[str, Any]], int],
            list[Any],
        ]:
            found = turns.get(conn, turn_id)
            owner = "" if found is None else found.controller_id
            return (
                found,
                dispatches.newest_of_turn(conn, turn_id, STATUS_DISPATCHES),
                audit.of_turn(conn, turn_id, owner, STATUS_RECEIPTS),
                outbox.of_turn(conn, turn_id),
            )

        turn, (steps, all_steps), (receipts, all_receipts), notes = await self._ctx.reader.run(read)
        turn = owned(turn, turn_id, controller_id, operator)
        retry = any(n.state == "retryable_failure" for n in notes)
        backend: dict[str, Any] = {}
        if turn.session_id is not None:
            session_id, round_ = turn.session_id, turn.round
            session, invocation = await self._ctx.reader.run(
                lambda conn: (
                    sessions.get(conn, session_id),
                    sessions.invocation(conn, turn_id, round_),
                )
            )
            backend = {
                "session": None if session is None else session.public(),
                "invocation": None if invocation is None else invocation.public(),
            }
        result: dict[str, Any] = {
            "watch" if turn.is_watch else "turn": turn.public()
            | {"available_actions": available_actions(turn, retryable=retry)},
            "dispatches": [d.public() for d in steps],
            "receipts": receipts,
            "omitted": {
                "dispatches": all_steps - len(steps),
                "receipts": all_receipts - len(receipts),
            },
            "interaction": await self._ctx.backends.of(turn).shown(turn, controller_id),
            "terminal": None,
            "screen_excerpt": None,
            **backend,
        }
        snapshot = self._ctx.board.get(turn.terminal_id or "")
        if snapshot is not None:
            shown = excerpt(
                snapshot.lines, secret=snapshot.secret_question, seen=snapshot.seen_secrets
            )
            result["terminal"] = await self._terminal_row(snapshot, controller_id, operator)
            result["screen_excerpt"] = shown
            if shown is None:
                result["screen_excerpt_withheld"] = "secret_input"
        return result

    async def terminal_status(
        self, controller_id: str, operator: bool, terminal_id: str
    ) -> dict[str, Any]:
        """`status {terminal_id}`: the pane's row, its prompt (shown, not offered), excerpt."""
        snapshot = self._ctx.board.get(terminal_id)
        if snapshot is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"no terminal {terminal_id!r} (its pane closed or its agent restarted); "
                "call list for the current terminal ids",
            )
        # A terminal's prompt is shown, never offered: answers go through the Turn.
        projected = project_snapshot(snapshot, self._ctx.ids, None)
        shown = excerpt(snapshot.lines, secret=snapshot.secret_question, seen=snapshot.seen_secrets)
        result: dict[str, Any] = {
            "terminal": await self._terminal_row(snapshot, controller_id, operator),
            "interaction": None if projected is None else projected.projection,
            "screen_excerpt": shown,
        }
        if shown is None:
            result["screen_excerpt_withheld"] = "secret_input"
        return result

    async def _terminal_row(
        self, snapshot: TerminalSnapshot, controller_id: str, operator: bool
    ) -> dict[str, Any]:
        """The terminal's row as `list` shows it to this caller: the Turn holding the pane
        (its ids to its owner and the operator only) and the calls valid on it now."""
        terminal_id = snapshot.identity.terminal_id
        holder = await self._ctx.reader.run(lambda conn: turns.unresolved_on(conn, terminal_id))
        visible = holder is not None and (operator or holder.controller_id == controller_id)
        return with_holder(terminal_row(snapshot), holder, visible=visible)

    async def cancel(self, controller_id: str, operator: bool, turn_id: str) -> dict[str, Any]:
        turn = owned(
            await self._ctx.reader.run(lambda conn: turns.get(conn, turn_id)),
            turn_id, controller_id, operator,
        )  # fmt: skip
        _managed(turn, "cancel")
        if (refused := nothing_to("cancel", turn)) is not None:
            raise RpcError(*refused)
        actor = self._ctx.desk.ref(turn_id)
        if actor is None:
            raise RpcError(Reason.INTERNAL, "the Turn is not followed right now; try again")
        reply = await actor.ask(Cancel(), timeout=DISPATCH_TIMEOUT)
        if not reply.ok:
            raise RpcError(reply.reason or Reason.INTERNAL, reply.message)
        return {"turn_id": turn_id, "state": "cancelling"}

    async def close(self, controller_id: str, operator: bool, turn_id: str) -> dict[str, Any]:
        turn = owned(
            await self._ctx.reader.run(lambda conn: turns.get(conn, turn_id)),
            turn_id, controller_id, operator,
        )  # fmt: skip
        if turn.is_watch:
            raise RpcError(
                Reason.INVALID_PARAMS,
                f"{turn_id} is a standalone Watch: it has no management to close; stop "
                "observing it with unwatch {watch_id}",
            )
        if turn.closed_at is None:
            now = time.time()

            def close(conn: Any) -> Turn:
                fresh = turns.get(conn, turn_id)
                assert fresh is not None
                return (
                    turns.update(conn, fresh, closed_at=now) if fresh.closed_at is None else fresh
                )

            turn = await transact(self._ctx.store, close)
            actor = self._ctx.desk.ref(turn_id)
            if actor is not None:
                actor.tell(Close())
        return turn.public() | {"available_actions": available_actions(turn)}

    async def ack(self, controller_id: str, event_id: str) -> dict[str, Any]:
        now = time.time()
        acked = await transact(
            self._ctx.store, lambda conn: outbox.ack(conn, controller_id, event_id, now)
        )
        if acked is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"this controller has no event {event_id[:80]!r}; ack the event_id of an event "
                "it received",
            )
        await faults.reached(Point.ACKED)
        return {"event_id": event_id, "state": acked.state}


def _check_request(text: str) -> None:
    """The text rule for a typed request (any profile), before any record is read."""
    if len(text) > MAX_REQUEST_CHARS:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"request has {len(text)} characters, more than the {MAX_REQUEST_CHARS} a send "
            "accepts; shorten it or put the details in a file the agent can read",
        )
    check_text(text, "request", specials=())


def _managed(record: Turn, method: str) -> None:
    """Refuse a management call on a Watch: it observes a person's task and never sends input."""
    if record.is_watch:
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"{record.turn_id} is a Watch: it never sends input, so {method} does not apply. "
            "Act at the terminal, or send a task of your own once the pane is idle",
        )


def _responded_again(
    turn: Turn, earlier: responds.Responded, key: RespondKey, text: str
) -> dict[str, Any]:
    """A `respond` repeating ``key``: the round it started, typed once; or a conflict."""
    if earlier.turn_id != turn.turn_id or earlier.request_sha256 != request_digest(text):
        given = (
            f"turn {earlier.turn_id}'s round {earlier.round}"
            if earlier.turn_id != turn.turn_id
            else f"round {earlier.round} with another text"
        )
        raise RpcError(
            Reason.CONFLICT,
            f"client_request_id {key.client_request_id!r} was already given to a respond, "
            f"for {given}; nothing was typed. Use a new client_request_id for a new message",
        )
    return _send_result(turn) | {"round": earlier.round}


def _send_result(turn: Turn) -> dict[str, Any]:
    return {
        "turn_id": turn.turn_id,
        "session_id": turn.native_session,
        "watch_id": turn.turn_id,
        "state": turn.state.value,
        "session_decision": {"action": "resume", "reason": "terminal_conversation"},
    }
