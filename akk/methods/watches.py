"""The observation methods: watch, unwatch, renew and recover.

Each acts on one exact stored record and never picks "the latest task", a
matching directory or another terminal. A Watch observes the task a person
started in one pane: the terminal's exact incarnation (pane + agent process)
and the agent's own file, where the person's message names the task. It never
sends input. A managed Send's `turn_id` is accepted wherever a `watch_id` is,
except by `unwatch` (a Send stays managed until `close`).

- `renew` never adds minutes to the old deadline: the new one is the later of
  the saved deadline and now + minutes. An expired or unwatched Watch resumes,
  in a new observation generation (its `round`), only while the same task is
  still active; a task that ended meanwhile gets its actual outcome instead.
  A managed Send's renew refreshes its inactivity window only: it never
  outlives its original hard lifetime.
- `recover` re-reads the record's task and supervises its monitor again. It
  extends nothing and never resumes an unwatched Watch; a task that cannot be
  verified is reported `unknown`, never rebound to another terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import apsw
import trio

from akk import evidence
from akk.actors.store import transact
from akk.actors.turn import Close, Reload
from akk.backends.file_watch.locate import find_task
from akk.backends.names import FILE_WATCHES
from akk.backends.terminal.witness import check_watchable
from akk.evidence.model import Agent
from akk.methods.common import MethodContext, available_actions, owned
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorStopped, MailboxFull
from akk.store import audit, outbox, turns
from akk.store.turns import Turn, TurnState
from akk.workspace_roots import pane_allowed


class WatchCalls:
    def __init__(self, ctx: MethodContext) -> None:
        self._ctx = ctx

    async def watch(self, controller_id: str, terminal_id: str) -> dict[str, Any]:
        """Observe the task a person started in ``terminal_id``; idempotent for its owner."""
        snapshot = self._ctx.board.get(terminal_id)
        if snapshot is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"no terminal {terminal_id[:80]!r} (its pane closed or its agent restarted); "
                "call list for the current terminal ids",
            )
        check_watchable(snapshot)
        held = await self._ctx.reader.run(lambda conn: turns.unresolved_on(conn, terminal_id))
        if held is not None:
            return _mine(held, controller_id)
        identity = snapshot.identity
        try:
            snap = await trio.to_thread.run_sync(
                evidence.snapshot, identity.agent, identity.agent_pid, identity.process_start
            )
            found: tuple[str, str | None, str | None] = ("pending", snap.to_json(), None)
        except evidence.EvidenceUnavailable as exc:
            found = ("unknown", None, str(exc)[:300])
        status, snapshot_json, limit = found
        return await self._open(
            controller_id, lambda conn: turns.unresolved_on(conn, terminal_id),
            {"terminal_id": terminal_id}, terminal_id=terminal_id, evidence_status=status,
            evidence=snapshot_json, evidence_limit=limit,
        )  # fmt: skip

    async def watch_task(
        self,
        controller_id: str,
        agent: Agent,
        native_id: str,
        home: str,
        narrowed: tuple[str, ...],
    ) -> dict[str, Any]:
        """Observe the task running in a person's Codex thread or Claude session
        ``native_id`` (its agent's files under ``home``); idempotent for its owner.

        ``narrowed``: the caller's credential roots, which the task's cwd must lie under.
        """
        found = await trio.to_thread.run_sync(find_task, agent, home, native_id)
        if not pane_allowed(found.cwd, narrowed):
            raise RpcError(
                Reason.NOT_OWNER,
                f"the task of {native_id} runs outside this credential's workspace roots "
                f"({', '.join(narrowed)}); nothing is watched. Ask the operator for a "
                "credential with that root",
            )
        backend = FILE_WATCHES[agent]
        return await self._open(
            controller_id, lambda conn: turns.unresolved_of_native(conn, native_id),
            {"backend": backend, "native_session": native_id}, backend=backend,
            native_session=native_id, request_sha256=found.request_sha256,
            evidence_status="bound", evidence=found.binding.to_json(), evidence_limit=None,
        )  # fmt: skip

    async def _open(
        self,
        controller_id: str,
        holder: Callable[[apsw.Connection], Turn | None],
        detail: dict[str, object],
        **columns: Any,
    ) -> dict[str, Any]:
        """The caller's new Watch (``columns`` name its task), audited with ``detail`` and
        followed; or, when ``holder`` finds the record that follows that task already, the
        caller's own again, refused if it is another's."""
        settings, now = self._ctx.settings, time.time()

        def insert(conn: apsw.Connection) -> Turn:
            held = holder(conn)
            if held is not None:
                return held
            watch = turns.insert_watch(
                conn, controller_id=controller_id,
                inactivity_seconds=settings.inactivity_minutes * 60,
                lifetime_seconds=settings.lifetime_minutes * 60, now=now, **columns,
            )  # fmt: skip
            audit.record(
                conn, at=now, actor=controller_id, action="watch", outcome="observing",
                controller_id=controller_id, turn_id=watch.turn_id, detail=detail,
            )  # fmt: skip
            return watch

        watch = await transact(self._ctx.store, insert)
        if watch.controller_id != controller_id or not watch.is_watch:
            return _mine(watch, controller_id)  # another record took the task meanwhile
        await self._ctx.backends.witness(watch).follow(watch.turn_id)
        return _result(watch)

    async def unwatch(self, controller_id: str, operator: bool, watch_id: str) -> dict[str, Any]:
        """Stop observing; notifications not yet sent are withdrawn."""
        record = await self._owned(controller_id, operator, watch_id)
        if not record.is_watch:
            raise RpcError(
                Reason.INVALID_PARAMS,
                f"{watch_id} is a managed Send, which stays managed: close it with close "
                "{turn_id} to stop following it",
            )
        withdrawn, now = 0, time.time()
        if record.unwatched_at is None:

            def stop(conn: apsw.Connection) -> tuple[Turn, int]:
                nonlocal withdrawn
                fresh = _fresh(conn, watch_id)
                if fresh.unwatched_at is not None:
                    return fresh, 0
                count = outbox.withdraw_pending(conn, watch_id, now)
                audit.record(
                    conn, at=now, actor=controller_id, action="unwatch", outcome="stopped",
                    controller_id=fresh.controller_id, turn_id=watch_id,
                    detail={"withdrawn": count},
                )  # fmt: skip
                return turns.update(conn, fresh, unwatched_at=now), count

            record, withdrawn = await transact(self._ctx.store, stop)
            actor = self._ctx.desk.ref(watch_id)
            if actor is not None:
                actor.tell(Close(record.round))  # a renew reviving it first wins
        return _result(record) | {"withdrawn": withdrawn}

    async def renew(
        self, controller_id: str, operator: bool, record_id: str, minutes: int | None
    ) -> dict[str, Any]:
        """Verify the original task and extend its observation (see the module docstring)."""
        record = await self._owned(controller_id, operator, record_id)
        _check_not_closed(record)
        now = time.time()
        seconds = (minutes or self._ctx.settings.lifetime_minutes) * 60
        if record.unresolved:
            record = await transact(
                self._ctx.store, lambda conn: _extend(conn, record_id, now, seconds)
            )
            if record.unresolved:
                actor = self._ctx.desk.ref(record_id)
                if actor is not None:
                    with suppress(MailboxFull, ActorStopped):
                        actor.tell(Reload())  # its deadlines moved
                return _result(record) | {"renewed": True}
            # It settled meanwhile (its deadline passed first): revived as any expired Watch.
            _check_not_closed(record)
        revivable = record.is_watch and (
            record.state is TurnState.TIMED_OUT or record.unwatched_at is not None
        )
        if not revivable:
            # Its outcome stands: there is no running observation to extend.
            return _result(record) | {"renewed": False}
        witness = self._ctx.backends.witness(record)
        ended = await witness.ended(record)
        deadline = turns.renewed_deadline(record, now, seconds)

        def revive(conn: apsw.Connection) -> Turn:
            fresh = _fresh(conn, record_id)
            if fresh.revision != record.revision:
                raise RpcError(Reason.CONFLICT, f"{record_id} changed meanwhile; renew again")
            if turns.follower_of(conn, fresh) is not None:
                raise RpcError(
                    Reason.CONFLICT,
                    f"another record follows the task of {record_id} now (a managed Send or "
                    "another controller's watch), and one record follows a task; nothing "
                    "changed. Call list for your own records",
                )
            outcome = None
            if ended is not None:
                spent = {} if ended.usage is None else ended.usage.columns()
                outcome = (ended.state, ended.reason, ended.summary, spent | ended.changes)
            revived = turns.revive(conn, fresh, now=now, deadline=deadline, ended=outcome)
            audit.record(
                conn, at=now, actor=controller_id, action="renew",
                outcome=revived.state.value, controller_id=fresh.controller_id,
                turn_id=record_id, detail={"round": revived.round},
            )  # fmt: skip
            return revived

        revived = await transact(self._ctx.store, revive)
        if revived.unresolved:
            await witness.follow(record_id)
        else:
            self._ctx.destinations.wake(revived.controller_id)
        return _result(revived) | {"renewed": True}

    async def recover(self, controller_id: str, operator: bool, record_id: str) -> dict[str, Any]:
        """Re-read the record's exact task and supervise its monitor again (extends nothing)."""
        record = await self._owned(controller_id, operator, record_id)
        if record.closed_at is not None or record.unwatched_at is not None:
            stopped = "closed" if record.closed_at is not None else "unwatched"
            raise RpcError(
                Reason.CLOSED,
                f"{record_id} was {stopped}; recover does not resume it"
                + (" (renew does, while its task is active)" if record.is_watch else ""),
            )
        witness = self._ctx.backends.witness(record)
        where = await witness.whereabouts(record)
        reconciled = await witness.reconcile(record) if where == "present" else 0
        if record.unresolved:
            await witness.follow(record_id)
        record = await self._owned(controller_id, operator, record_id)
        on_pane = record.terminal_id is not None
        if where != "present" or (record.evidence_status == "unknown" and not on_pane):
            task = "unknown"  # never rebound: the record keeps its own terminal or file
        else:
            task = "screen_only" if record.evidence_status == "unknown" else "verified"
        return _result(record) | {
            "supervised": record.unresolved,
            "reconciled_steps": reconciled,
            "verification": {
                # A pane's record is where its terminal is; a watch by native id where its file is.
                ("terminal" if on_pane else "file"): where,
                "evidence": record.evidence_status,
                "task": task,
            },
        }

    # -- helpers

    async def _owned(self, controller_id: str, operator: bool, record_id: str) -> Turn:
        record = await self._ctx.reader.run(lambda conn: turns.get(conn, record_id))
        return owned(record, record_id, controller_id, operator)


def _mine(held: Turn, controller_id: str) -> dict[str, Any]:
    """The caller's own Watch of this task again; refused if another record follows it."""
    if held.is_watch and held.controller_id == controller_id:
        return _result(held)
    raise RpcError(
        Reason.CONFLICT,
        "another record already follows this terminal's task (a managed Send or another "
        "controller's watch); one record follows a task. Call list for your own records",
    )


def _check_not_closed(record: Turn) -> None:
    if record.closed_at is not None:
        raise RpcError(
            Reason.CLOSED,
            f"{record.turn_id} is closed, and closed management is never reopened; send a new "
            "task instead",
        )


def _extend(conn: apsw.Connection, record_id: str, now: float, seconds: float) -> Turn:
    """The record with its deadlines moved while it is still followed; else as stored (it
    settled meanwhile, and a settled record's deadline is never written)."""
    fresh = _fresh(conn, record_id)
    if not fresh.unresolved:
        return fresh
    deadline = turns.renewed_deadline(fresh, now, seconds)
    return turns.update(conn, fresh, last_activity_at=now, hard_deadline_at=deadline)


def _fresh(conn: apsw.Connection, record_id: str) -> Turn:
    """The record as stored now; not_found if retention pruned it since it was read (the
    method table then answers with its tombstone, as for any call naming a pruned id)."""
    fresh = turns.get(conn, record_id)
    if fresh is None:
        raise RpcError(Reason.NOT_FOUND, f"{record_id} was pruned meanwhile; nothing is kept")
    return fresh


def _result(record: Turn) -> dict[str, Any]:
    return record.public() | {"available_actions": available_actions(record)}
