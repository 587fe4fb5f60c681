"""`retry_callback`: one more delivery of one notification, on its exact record.

From the bottom up: the outbox's lease counts granted retries; the retry keeps
the event and its attempt history; a real `akk serve` (store, destinations,
WebSocket) drives a notification to ``retryable_failure`` with a controller
that never acks, retries it and redelivers the same ``event_id``; every
forbidden state is refused with its reason and changes nothing; and a wake-up
about a prompt is retried only while the terminal still shows that prompt.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest
import trio

from akk.actors.destination import DestinationDesk, OutboxPolicy
from akk.actors.pruner import Pruner, RetentionSettings
from akk.actors.store import StoreActor
from akk.actors.terminal_board import TerminalBoard, TerminalSnapshot
from akk.actors.turn_desk import TurnDesk
from akk.backends.codex_app_server.answers import AppServerAnswers
from akk.backends.codex_app_server.host import BackendDesk
from akk.backends.codex_app_server.prompts import BackendPrompt
from akk.backends.context import BackendContext
from akk.backends.names import CODEX_APP_SERVER
from akk.backends.registry import Backends
from akk.backends.terminal.answers import TerminalAnswers
from akk.client import AkkError, Controller, connect
from akk.config import ServiceConfig, TurnSettings
from akk.discovery.identity import TerminalIdentity
from akk.methods.callbacks import CallbackCalls
from akk.methods.common import MethodContext
from akk.profiles.observation import InteractionKind, Observation, State
from akk.profiles.qualified_versions import QualifiedVersions
from akk.profiles.registry import PINNED
from akk.protocol.errors import Reason, RpcError
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.fingerprint import Appearance, IdMinter
from akk.server.auth import CredentialBook
from akk.server.connections import ConnectionRegistry
from akk.server.instance import Endpoint
from akk.service import run_service
from akk.sessions import policy
from akk.store import interactions, outbox, sessions, turns
from akk.store.database import CasConflict, open_reader, open_store
from akk.store.interactions import Interaction, InteractionState
from akk.store.location import StateDir
from akk.store.outbox import Notification
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState
from tools.lab.akk_runner import mint_offline

TERMINAL = "term_1"
SEEN = Appearance(b"\x01" * 32, 1_000)


# ---- the stage: rows written straight into the store ------------------------------------


def _controllers(conn: apsw.Connection, *names: str) -> None:
    for name in names:
        conn.execute(
            "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
            "VALUES (?, ?, 0, 0) ON CONFLICT DO NOTHING",
            (name, name),
        )


def _record(
    conn: apsw.Connection, controller: str, request_id: str, *, watch: bool = False
) -> Turn:
    """A settled-free record of ``controller`` on TERMINAL (a managed Send, or a Watch).

    Its deadlines lie ahead: a served store follows every unresolved record, and one past
    its lifetime would time out (a second outcome in its round) while the test runs.
    """
    conn.execute(
        "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, agent_pid, "
        "process_start, executable, first_seen_at, last_seen_at) "
        "VALUES (?, 's', '%1', 1, 'claude', 2, 3, 'claude', 0, 0) ON CONFLICT DO NOTHING",
        (TERMINAL,),
    )
    turn = turns.insert(
        conn, controller_id=controller, client_request_id=request_id, terminal_id=TERMINAL,
        request_sha256="0" * 64, request_chars=5, evidence_status="unknown", evidence=None,
        evidence_limit="test", inactivity_seconds=600, lifetime_seconds=600, now=time.time(),
    )  # fmt: skip
    if watch:
        conn.execute("UPDATE turns SET task_kind = 'watch' WHERE turn_id = ?", (turn.turn_id,))
    found = turns.get(conn, turn.turn_id)
    assert found is not None
    return found


def _note(
    conn: apsw.Connection, turn: Turn, kind: str, state: str, *, attempts: int = 0
) -> Notification:
    """One notification about ``turn``, put in ``state`` as if the outbox had got it there."""
    written = turns.enqueue_event(conn, turn, kind, 1.0, interaction=None, summary="s")
    return _force(conn, written, state, attempts=attempts)


def _force(conn: apsw.Connection, note: Notification, state: str, *, attempts: int) -> Notification:
    lease = 10**12 if state == "delivering" else None
    conn.execute(
        "UPDATE notifications SET state = ?, attempts = ?, lease_expires_at = ?, "
        "last_error = ?, revision = revision + 1 WHERE notification_id = ?",
        (
            state, attempts, lease,
            "not acked after 8 attempts" if state == "retryable_failure" else None,
            note.notification_id,
        ),
    )  # fmt: skip
    found = outbox.get(conn, note.notification_id)
    assert found is not None
    return found


def _asked(conn: apsw.Connection, turn: Turn, seen: Appearance = SEEN) -> Interaction:
    """A questionnaire on TERMINAL for ``turn``, with its interaction_required wake-up."""
    interaction_id = f"int_{seen.number}"
    projection = {"interaction_id": interaction_id, "kind": "questionnaire", "questions": []}
    row, _ = interactions.record(
        conn, interaction_id=interaction_id, terminal_id=TERMINAL, turn_id=turn.turn_id,
        kind="questionnaire", seen=seen, profile="claude-code@test", step_index=1, step_total=1,
        projection=projection, now=1.0, announce=turn,
    )  # fmt: skip
    return row


def _wake_up_of(conn: apsw.Connection, turn: Turn) -> Notification:
    (found,) = [n for n in outbox.of_turn(conn, turn.turn_id) if n.kind == "interaction_required"]
    return found


# ---- the outbox: leases count granted retries -------------------------------------------


def test_a_retry_grants_exactly_one_more_attempt_and_keeps_the_event(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "akk.sqlite3")
    with conn:
        _controllers(conn, "a")
        note = outbox.enqueue(conn, controller_id="a", turn_id=None, kind="done",
                              body={"summary": "x"}, now=0.0)  # fmt: skip
        for now in (0.0, 10.0):
            leased = outbox.lease(conn, note, now, lease_seconds=5, max_attempts=2)
            assert leased is not None and leased.state == "delivering"
            note = leased
        assert outbox.lease(conn, note, 20.0, lease_seconds=5, max_attempts=2) is None
        failed = outbox.get(conn, note.notification_id)
        assert failed is not None and failed.state == "retryable_failure"
        assert (failed.attempts, failed.retries) == (2, 0)

        retried = outbox.retry(conn, failed, 30.0)
        assert (retried.state, retried.attempts, retried.retries) == ("pending", 2, 1)
        assert retried.next_attempt_at == 30.0 and retried.lease_expires_at is None
        assert (retried.event_id, retried.payload) == (failed.event_id, failed.payload)
        assert outbox.due(conn, "a", 30.0) == [retried]
        last_error = conn.execute(
            "SELECT last_error FROM notifications WHERE notification_id = ?",
            (note.notification_id,),
        ).fetchone()
        assert last_error == ("not acked after 2 attempts",)

        again = outbox.lease(conn, retried, 30.0, lease_seconds=5, max_attempts=2)
        assert again is not None and (again.attempts, again.retries) == (3, 1)
        assert again.event()["event_id"] == failed.event_id
        # That was the one granted attempt: the next lease gives up again.
        assert outbox.lease(conn, again, 40.0, lease_seconds=5, max_attempts=2) is None
        final = outbox.get(conn, note.notification_id)
        assert final is not None and (final.state, final.attempts) == ("retryable_failure", 3)
    conn.close()


def test_a_retry_is_compare_and_swap(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "akk.sqlite3")
    with conn:
        _controllers(conn, "a")
        turn = _record(conn, "a", "r1")
        failed = _note(conn, turn, "done", "retryable_failure", attempts=8)
        outbox.retry(conn, failed, 5.0)
    # The same stale row cannot be retried twice (a second call re-reads and decides again).
    with pytest.raises(CasConflict), conn:
        outbox.retry(conn, failed, 6.0)
    with conn:
        assert outbox.of_turn(conn, turn.turn_id)[0].retries == 1
    conn.close()


# ---- a real server ----------------------------------------------------------------------

FAST = OutboxPolicy(lease_seconds=0.3, backoff_seconds=0.05, max_backoff_seconds=0.1,
                    max_attempts=1, send_timeout=2.0)  # fmt: skip


@attrs.frozen
class _Served:
    endpoint: Endpoint
    state: StateDir
    tokens: dict[str, str]

    def read(self, query: Callable[[apsw.Connection], Any]) -> Any:
        conn = open_reader(self.state.store_path)
        try:
            with conn:
                return query(conn)
        finally:
            conn.close()

    def note(self, notification_id: str) -> Notification:
        found = self.read(lambda conn: outbox.get(conn, notification_id))
        assert isinstance(found, Notification)
        return found

    async def until(self, notification_id: str, state: str) -> Notification:
        """The notification once the server has put it in ``state`` (the caller bounds the wait)."""
        while (found := self.note(notification_id)).state != state:
            await trio.sleep(0.02)
        return found


@asynccontextmanager
async def _serving(
    tmp_path: Path, stage: Callable[[apsw.Connection], None], *names: str
) -> AsyncIterator[_Served]:
    """`akk serve` in this process (no tmux), over a store set up by ``stage``."""
    state = StateDir(tmp_path / "akk")
    tokens = mint_offline(state, *names)
    conn = open_store(state.store_path)
    try:
        with conn:
            _controllers(conn, *names)
            stage(conn)
    finally:
        conn.close()
    config = ServiceConfig(state=state, port=0, tmux_sockets=(), outbox=FAST)
    async with trio.open_nursery() as nursery:
        endpoint = await nursery.start(
            lambda task_status: run_service(config, task_status=task_status)
        )
        yield _Served(endpoint, state, tokens | {"operator": state.token()})
        nursery.cancel_scope.cancel()


async def _refused(ctl: Controller, params: dict[str, Any]) -> AkkError:
    with pytest.raises(AkkError) as refused:
        await ctl.call("retry_callback", params)
    assert refused.value.message
    return refused.value


async def test_an_unacked_event_is_retried_with_its_event_id_until_acked(tmp_path: Path) -> None:
    ids: dict[str, str] = {}

    def stage(conn: apsw.Connection) -> None:
        turn = _record(conn, "c1", "r1")
        settled = turns.settle(conn, turn, TurnState.DONE, now=2.0, summary="finished")
        ids["turn"] = settled.turn_id

    with trio.fail_after(30):
        async with (
            _serving(tmp_path, stage, "c1") as served,
            connect(served.endpoint.url, served.tokens["c1"]) as ctl,
            aclosing(ctl.events()) as events,
        ):
            first = await anext(events)
            assert first["kind"] == "done" and first["turn_id"] == ids["turn"]
            # Never acked: its one automatic attempt runs out.
            failed = await served.until(first["notification_id"], "retryable_failure")
            assert (failed.attempts, failed.retries) == (1, 0)

            # One more attempt, twice: each keeps the event and counts on.
            for round in (1, 2):
                result = await ctl.call("retry_callback", {"turn_id": ids["turn"]})
                assert result == {
                    "notification_id": first["notification_id"], "event_id": first["event_id"],
                    "kind": "done", "state": "pending", "attempts": round, "retries": round,
                }  # fmt: skip
                again = await anext(events)
                assert again == first  # the original body, event_id and all
                if round == 1:
                    failed = await served.until(first["notification_id"], "retryable_failure")
                    assert (failed.attempts, failed.retries) == (2, 1)
            assert (await ctl.ack(first["event_id"]))["state"] == "accepted"
            accepted = served.note(first["notification_id"])
            assert (accepted.state, accepted.attempts, accepted.retries) == ("accepted", 3, 2)

            refused = await _refused(ctl, {"turn_id": ids["turn"]})
            assert refused.reason == Reason.NOT_FOUND  # none left in retryable_failure
            refused = await _refused(
                ctl, {"turn_id": ids["turn"], "notification_id": first["notification_id"]}
            )
            assert refused.reason == Reason.CONFLICT and "accepted" in refused.message

            receipts = (await ctl.call("status", {"turn_id": ids["turn"]}))["receipts"]
            retries = [r for r in receipts if r["action"] == "retry_callback"]
            assert [(r["controller_id"], r["outcome"]) for r in retries] == [("c1", "ok")] * 2
            assert retries[0]["detail"] == {
                "notification_id": first["notification_id"], "event_id": first["event_id"],
                "kind": "done", "attempts": 1, "retries": 1,
            }  # fmt: skip
            assert "finished" not in json.dumps(receipts)  # no payload text in the audit


async def test_every_forbidden_retry_is_refused_with_its_reason_and_changes_nothing(
    tmp_path: Path,
) -> None:
    ids: dict[str, str] = {}

    def stage(conn: apsw.Connection) -> None:
        # c3 never connects, so nothing here is delivered while the calls run.
        record = _record(conn, "c3", "states")
        ids["record"] = record.turn_id
        # Outcome kinds are one per round: the others are any number per record.
        for state, kind in (
            ("accepted", "done"), ("pending", "response_uncertain"),
            ("delivering", "invalidated"), ("withdrawn", "response_uncertain"),
        ):  # fmt: skip
            ids[state] = _note(conn, record, kind, state, attempts=1).notification_id
        two = _record(conn, "c3", "two", watch=True)
        ids["two"] = two.turn_id
        ids["two_a"] = _note(conn, two, "done", "retryable_failure").notification_id
        ids["two_b"] = _note(conn, two, "response_uncertain", "retryable_failure").notification_id
        for ended in ("closed_at", "unwatched_at"):
            gone = _record(conn, "c3", ended)
            _note(conn, gone, "done", "retryable_failure")
            conn.execute(f"UPDATE turns SET {ended} = 5 WHERE turn_id = ?", (gone.turn_id,))
            ids[ended] = gone.turn_id
        answered = _record(conn, "c3", "answered")
        row = _asked(conn, answered)
        interactions.set_state(conn, row, InteractionState.CONSUMED)
        _force(conn, _wake_up_of(conn, answered), "retryable_failure", attempts=8)
        ids["answered"] = answered.turn_id
        left = _record(conn, "c3", "left")
        _asked(conn, left, Appearance(b"\x02" * 32, 2_000))
        _force(conn, _wake_up_of(conn, left), "retryable_failure", attempts=8)
        ids["left"] = left.turn_id

    with trio.fail_after(30):
        async with (
            _serving(tmp_path, stage, "c1", "c3") as served,
            connect(served.endpoint.url, served.tokens["operator"]) as operator,
            connect(served.endpoint.url, served.tokens["c1"]) as other,
        ):
            before = served.read(_everything)
            record = ids["record"]
            expected: list[tuple[Controller, dict[str, Any], Reason, str]] = [
                (operator, {"turn_id": record, "notification_id": ids["accepted"]},
                 Reason.CONFLICT, "accepted"),
                (operator, {"turn_id": record, "notification_id": ids["pending"]},
                 Reason.CONFLICT, "still being delivered"),
                (operator, {"watch_id": record, "notification_id": ids["delivering"]},
                 Reason.CONFLICT, "still being delivered"),
                (operator, {"turn_id": record, "notification_id": ids["withdrawn"]},
                 Reason.CONFLICT, "withdrawn"),
                (operator, {"turn_id": record}, Reason.NOT_FOUND, "no notification in"),
                (operator, {"turn_id": record, "notification_id": ids["two_a"]},
                 Reason.NOT_FOUND, "has no notification"),
                (operator, {"watch_id": ids["two"]}, Reason.INVALID_PARAMS, ids["two_a"]),
                (operator, {"turn_id": ids["closed_at"]}, Reason.CLOSED, "closed"),
                (operator, {"watch_id": ids["unwatched_at"]}, Reason.CLOSED, "unwatched"),
                (operator, {"turn_id": ids["answered"]}, Reason.PROMPT_CHANGED, "answered"),
                (operator, {"turn_id": ids["left"]}, Reason.PROMPT_CHANGED, "screen"),
                (operator, {"turn_id": "turn_unknown"}, Reason.NOT_FOUND, "turn_unknown"),
                (other, {"watch_id": ids["two"], "notification_id": ids["two_a"]},
                 Reason.NOT_OWNER, "another controller"),
                (other, {"turn_id": "turn_unknown"}, Reason.NOT_FOUND, "turn_unknown"),
            ]  # fmt: skip
            for ctl, params, reason, said in expected:
                refused = await _refused(ctl, params)
                assert (refused.reason, said in refused.message) == (reason, True), (
                    params, refused.message,
                )  # fmt: skip
            several = await _refused(operator, {"watch_id": ids["two"]})
            assert ids["two_b"] in several.message and "response_uncertain" in several.message
            assert served.read(_everything) == before  # zero side effects

            # Naming one of the two is allowed; the operator may act on c3's record.
            result = await operator.call(
                "retry_callback", {"watch_id": ids["two"], "notification_id": ids["two_b"]}
            )
            assert (result["notification_id"], result["state"]) == (ids["two_b"], "pending")
            # Now in flight (c3 has no connection to take it): a second retry is refused.
            refused = await _refused(
                operator, {"watch_id": ids["two"], "notification_id": ids["two_b"]}
            )
            assert refused.reason == Reason.CONFLICT
            # The only one left is retried without naming it.
            result = await operator.call("retry_callback", {"turn_id": ids["two"]})
            assert result["notification_id"] == ids["two_a"]


def _everything(conn: apsw.Connection) -> tuple[list[tuple[Any, ...]], ...]:
    tables = ("notifications", "turns", "interactions", "audit")
    return tuple(
        conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall() for table in tables
    )


# ---- a wake-up about a prompt: only while that prompt is still on screen ----------------


class _Asked(AppServerAnswers):
    """The app-server's answers, asking exactly ``asked`` of every Turn (no process runs)."""

    def __init__(self, asked: list[str], ctx: BackendContext, *, hosts: BackendDesk) -> None:
        super().__init__(ctx, hosts=hosts)
        self._asked = asked

    def prompts(self, turn: Turn) -> list[BackendPrompt]:
        return [
            BackendPrompt(
                request_id=1,
                method="item/permissions/requestApproval",
                kind=InteractionKind.PERMISSION,
                thread_id=None,
                native_turn_id=None,
                seen=SEEN,
                projection={"interaction_id": interaction_id},
            )
            for interaction_id in self._asked
        ]


def _context(
    store: ActorRef,
    reader: StoreReader,
    board: TerminalBoard,
    destinations: DestinationDesk,
    tmp_path: Path,
    *,
    asked: list[str] | None = None,
) -> MethodContext:
    """The methods' context over the real store, board and outbox; no app-server runs."""
    ids = IdMinter(b"k" * 32)
    desk = TurnDesk(
        Supervisor("turns"), store=store, reader=reader.run, board=board,
        notify=destinations.wake,
    )  # fmt: skip
    hosts = BackendDesk(
        Supervisor("backends"), setup="no app-server in this test", store=store,
        reader=reader.run, cwd=str(tmp_path),
    )  # fmt: skip
    ctx = BackendContext(
        store=store, reader=reader, ids=ids, desk=desk, destinations=destinations,
        offer_minutes=10.0,
    )  # fmt: skip
    backends = Backends()
    backends.register(TerminalAnswers(ctx, board=board, accept_seconds=20.0))
    backends.register(_Asked([] if asked is None else asked, ctx, hosts=hosts))
    return MethodContext(
        store=store, reader=reader, board=board, ids=ids, desk=desk, destinations=destinations,
        settings=TurnSettings(), backends=backends,
        session_limits=policy.RebuildLimits(), workspace_roots=(),
        book=CredentialBook("operator", {}), connections=ConnectionRegistry(), health=dict,
        qualified=QualifiedVersions(PINNED, reader),
        pruner=Pruner(store, reader, tmp_path / "akk.sqlite3", RetentionSettings()),
    )  # fmt: skip


def _snapshot(seen: Appearance | None, *, busy: bool = False) -> TerminalSnapshot:
    identity = TerminalIdentity(
        terminal_id=TERMINAL, tmux_socket="s", pane_id="%1", pane_pid=1, agent="claude",
        agent_pid=2, process_start=3, executable="claude", version="test", cwd=None,
        profile="claude-code@test", profile_reason=None,
    )  # fmt: skip
    return TerminalSnapshot(identity, Observation(State.UNKNOWN, None), seen, (), 0.0, busy=busy)


async def test_an_interaction_wake_up_is_retried_only_while_its_prompt_is_shown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "akk.sqlite3"
    conn = open_store(path)
    with conn:
        _controllers(conn, "a")
        turn = _record(conn, "a", "r1")
        row = _asked(conn, turn)
        wake_up = _force(conn, _wake_up_of(conn, turn), "retryable_failure", attempts=8)
    conn.close()
    board = TerminalBoard()
    board.announce(_snapshot(None).identity, None, 0.0)
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(path))])
    reader = StoreReader(path)
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(root.run)
                store = root.ref("store")
                desk = DestinationDesk(
                    Supervisor("destinations"), store=store, reader=reader.run,
                    sink=lambda controller_id: None, policy=OutboxPolicy(),
                )  # fmt: skip
                calls = CallbackCalls(_context(store, reader, board, desk, tmp_path))
                params = {"turn_id": turn.turn_id}
                for shown, reason in (
                    (None, Reason.PROMPT_CHANGED),  # the screen shows no prompt
                    (Appearance(SEEN.fingerprint, SEEN.number + 1), Reason.PROMPT_CHANGED),
                    (SEEN, Reason.CONFLICT),  # mid-step: cannot tell yet
                ):
                    board.publish(_snapshot(shown, busy=shown == SEEN))
                    with pytest.raises(RpcError) as refused:
                        await calls.retry("a", False, params)
                    assert refused.value.reason == reason
                board.publish(_snapshot(SEEN))
                result = await calls.retry("a", False, params)
                assert (result["event_id"], result["retries"]) == (wake_up.event_id, 1)
                retried = await reader.run(lambda c: outbox.get(c, wake_up.notification_id))
                assert retried is not None and retried.state == "pending"
                audit = await reader.run(
                    lambda c: c.execute(
                        "SELECT interaction_id, outcome FROM audit WHERE action = 'retry_callback'"
                    ).fetchall()
                )
                assert audit == [(row.interaction_id, "ok")]
                nursery.cancel_scope.cancel()
    finally:
        reader.close()


async def test_an_app_server_request_s_wake_up_is_retried_only_while_it_is_asked(
    tmp_path: Path,
) -> None:
    """A backend Turn's interaction has no terminal: what the app-server asks decides."""
    path = tmp_path / "akk.sqlite3"
    conn = open_store(path)
    with conn:
        _controllers(conn, "a")
        owner = policy.Owner("a", "task", None, "executor", str(tmp_path))
        binding = policy.ThreadConfig("0.169.0", "0.169.0", None, None, None, None)
        decision = policy.Decision(policy.Action.CREATE, "new_scope_or_role")
        session = sessions.create(
            conn, owner=owner, backend=CODEX_APP_SERVER, binding=binding, home=str(tmp_path),
            decision=decision, now=1.0,
        )  # fmt: skip
        turn = turns.insert_backend(
            conn, backend=CODEX_APP_SERVER, controller_id="a", client_request_id="b1",
            session_id=session.session_id, request_sha256="0" * 64, request_chars=5,
            inactivity_seconds=60, lifetime_seconds=600, now=1.0,
        )  # fmt: skip
        projection = {"interaction_id": "int_b", "kind": "permission", "questions": []}
        interactions.record(
            conn, interaction_id="int_b", terminal_id=None, turn_id=turn.turn_id,
            kind="permission", seen=SEEN, profile="codex-app-server-0.169.0", step_index=1,
            step_total=1, projection=projection, now=1.0, announce=turn,
        )  # fmt: skip
        (note,) = [n for n in outbox.of_turn(conn, turn.turn_id) if n.kind == "approval_required"]
        wake_up = _force(conn, note, "retryable_failure", attempts=8)
    conn.close()
    asked: list[str] = []
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(path))])
    reader = StoreReader(path)
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(root.run)
                store = root.ref("store")
                desk = DestinationDesk(
                    Supervisor("destinations"), store=store, reader=reader.run,
                    sink=lambda controller_id: None, policy=OutboxPolicy(),
                )  # fmt: skip
                calls = CallbackCalls(
                    _context(store, reader, TerminalBoard(), desk, tmp_path, asked=asked)
                )
                params = {"turn_id": turn.turn_id}
                with pytest.raises(RpcError) as refused:
                    await calls.retry("a", False, params)
                assert refused.value.reason == Reason.PROMPT_CHANGED
                asked.append("int_b")
                result = await calls.retry("a", False, params)
                assert (result["event_id"], result["retries"]) == (wake_up.event_id, 1)
                nursery.cancel_scope.cancel()
    finally:
        reader.close()
