"""The outbox when its rows move under a delivery: acks, reconnects, withdrawals, side by side.

From the bottom up: a withdrawal never takes back an event already dispatched
(whether a reconnect made it due again or not); a revival withdraws its old
rounds' expiry notices its controller never accepted; a DestinationActor whose
lease or postpone finds the row moved on (an ack, a new connection's release)
neither crashes nor drops the rest of its batch; and on a real `akk serve`, the
operator's commands run side by side: a one-shot command takes no events, a new
one releases no lease another still holds, and `akk send --wait` ends once its
Turn settled even when another command took its outcome event.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import apsw
import attrs
import trio

from akk.actors.destination import DestinationDesk, OutboxPolicy
from akk.actors.store import StoreActor, transact
from akk.cli.turns import _follow
from akk.client import connect
from akk.config import ServiceConfig
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.server.connections import ConnectionRegistry
from akk.server.instance import Endpoint
from akk.service import run_service
from akk.store import outbox, turns
from akk.store.credentials import OPERATOR_ID
from akk.store.database import open_reader, open_store
from akk.store.location import StateDir
from akk.store.outbox import Notification
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState
from tests.store_rows import add_ctl_and_t1

NOW = 1_000_000.0


def _settled(conn: apsw.Connection, controller: str, request_id: str) -> Turn:
    """A finished (closed) Turn of ``controller`` on ``t1``: one ``done`` notification."""
    turn = turns.insert(
        conn, controller_id=controller, client_request_id=request_id, terminal_id="t1",
        request_sha256="0" * 64, request_chars=5, evidence_status="unknown", evidence=None,
        evidence_limit="test", inactivity_seconds=600, lifetime_seconds=600, now=time.time(),
    )  # fmt: skip
    done = turns.settle(conn, turn, TurnState.DONE, now=time.time(), summary="finished")
    return turns.update(conn, done, closed_at=time.time())  # frees t1 for the next


def _watch(conn: apsw.Connection) -> Turn:
    return turns.insert_watch(
        conn, controller_id="ctl", evidence_status="unknown", evidence=None,
        evidence_limit="test", inactivity_seconds=600, lifetime_seconds=600, now=NOW,
    )  # fmt: skip


def test_a_withdrawal_keeps_every_event_already_dispatched(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "akk.sqlite3")
    add_ctl_and_t1(conn)
    with conn:
        a, b, c = _watch(conn), _watch(conn), _watch(conn)
        sent = [turns.enqueue_event(conn, w, "response_uncertain", NOW) for w in (a, b)]
        never = turns.enqueue_event(conn, c, "response_uncertain", NOW)
        for note in sent:
            outbox.lease(conn, note, NOW, lease_seconds=30, max_attempts=8)
        outbox.release_leases(conn, "ctl", NOW + 1)  # a reconnect: both due again...
        again = outbox.get(conn, sent[1].notification_id)
        assert again is not None
        outbox.lease(conn, again, NOW + 1, lease_seconds=30, max_attempts=8)  # ...b sent again
        counts = [outbox.withdraw_pending(conn, w.turn_id, NOW + 2) for w in (a, b, c)]
    # Only the one never dispatched is withdrawn, whether or not a reconnect came between.
    assert counts == [0, 0, 1]
    states = [outbox.get(conn, n.notification_id) for n in (*sent, never)]
    assert [(n.state, n.attempts) for n in states if n is not None] == [
        ("pending", 1),
        ("delivering", 2),
        ("withdrawn", 0),
    ]
    conn.close()


def test_a_revival_withdraws_an_old_expiry_given_up_on_and_keeps_an_accepted_one(
    tmp_path: Path,
) -> None:
    conn = open_store(tmp_path / "akk.sqlite3")
    add_ctl_and_t1(conn)
    with conn:
        watch = turns.insert_watch(
            conn, controller_id="ctl", terminal_id="t1", evidence_status="unknown",
            evidence=None, evidence_limit="test", inactivity_seconds=600, lifetime_seconds=60,
            now=NOW,
        )  # fmt: skip
        expired = turns.settle(
            conn, watch, TurnState.TIMED_OUT, now=NOW + 60, reason="timed_out", summary="x"
        )
        (first,) = outbox.of_turn(conn, watch.turn_id)
        conn.execute(
            "UPDATE notifications SET state = 'retryable_failure', attempts = 8 "
            "WHERE notification_id = ?",
            (first.notification_id,),
        )
        revived = turns.revive(conn, expired, now=NOW + 61, deadline=NOW + 120, ended=None)
        again = turns.settle(
            conn, revived, TurnState.TIMED_OUT, now=NOW + 120, reason="timed_out", summary="y"
        )
        second = outbox.of_turn(conn, watch.turn_id)[1]
        outbox.ack(conn, "ctl", second.event_id, NOW + 121)
        turns.revive(conn, again, now=NOW + 122, deadline=NOW + 180, ended=None)
    rows = conn.execute(
        "SELECT round, state FROM notifications WHERE turn_id = ? ORDER BY rowid",
        (watch.turn_id,),
    ).fetchall()
    assert rows == [(1, "withdrawn"), (2, "accepted")]
    conn.close()


# ---- a DestinationActor whose rows move on -----------------------------------------------


@asynccontextmanager
async def _destinations(
    tmp_path: Path,
    policy: OutboxPolicy,
    sink: Callable[[str], Any],
    *,
    reader: Callable[[StoreReader, Any], Callable[[Any], Awaitable[Any]]] | None = None,
    count: int = 1,
) -> AsyncIterator[tuple[Any, Supervisor, DestinationDesk, list[str]]]:
    """A real store with ``count`` ``done`` events for ``ctl`` and a DestinationDesk over it;
    ``reader`` wraps the store's reader (given the store's ref once it runs)."""
    path = tmp_path / "akk.sqlite3"
    conn = open_store(path)
    add_ctl_and_t1(conn)
    with conn:
        for index in range(count):
            _settled(conn, "ctl", f"r{index}")
        ids = [n.notification_id for n in outbox.due(conn, "ctl", time.time() + 1)]
    conn.close()
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(path))])
    plain = StoreReader(path)
    supervisor = Supervisor("destinations", max_restarts=20, period=10.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        store = root.ref("store")
        await root.start_child(ChildSpec("destinations", supervisor.run))
        read = plain.run if reader is None else reader(plain, store)
        desk = DestinationDesk(supervisor, store=store, reader=read, sink=sink, policy=policy)
        nursery.start_soon(desk.run)
        yield store, supervisor, desk, ids
        nursery.cancel_scope.cancel()


def _rows(tmp_path: Path) -> list[Notification]:
    conn = open_reader(tmp_path / "akk.sqlite3")
    try:
        with conn:
            rows = outbox.due(conn, "ctl", 10**12) + _of_state(conn, "accepted")
    finally:
        conn.close()
    return rows


def _of_state(conn: apsw.Connection, state: str) -> list[Notification]:
    rows = conn.execute("SELECT notification_id FROM notifications WHERE state = ?", (state,))
    return [n for (nid,) in rows if (n := outbox.get(conn, str(nid))) is not None]


async def test_an_ack_between_the_due_read_and_the_lease_skips_that_one_and_sends_the_rest(
    tmp_path: Path,
) -> None:
    sent: list[str] = []
    armed: list[bool] = []

    class Sink:
        async def send_event(self, event: dict[str, Any], *, timeout: float) -> bool:
            sent.append(event["notification_id"])
            return True

    def racing(plain: StoreReader, store: Any) -> Callable[[Any], Awaitable[Any]]:
        async def read(query: Any) -> Any:
            result = await plain.run(query)
            if armed and isinstance(result, tuple) and result[0]:
                armed.clear()
                first = result[0][0]  # its controller's late ack lands now
                await transact(store, lambda c: outbox.ack(c, "ctl", first.event_id, time.time()))
            return result

        return read

    policy = OutboxPolicy(lease_seconds=0.3, send_timeout=1)
    with trio.fail_after(20):
        staged = _destinations(tmp_path, policy, lambda c: Sink(), reader=racing, count=3)
        async with staged as (_, supervisor, _, ids):
            while len(sent) < 3:  # the first delivery of all three, never acked
                await trio.sleep(0.01)
            armed.append(True)  # the redelivery's due-read races an ack of the first
            while armed or len(sent) < 5:
                await trio.sleep(0.01)
            assert supervisor.stats.crashes == {}
            assert sent[3:5] == ids[1:]  # the other two went out in the same batch


async def test_a_failed_send_whose_row_a_reconnect_released_meanwhile_goes_to_the_new_one(
    tmp_path: Path,
) -> None:
    sent: list[tuple[str, str]] = []
    box: dict[str, Any] = {}

    class Old:
        """The old connection stops reading while its controller says hello again."""

        async def send_event(self, event: dict[str, Any], *, timeout: float) -> bool:
            sent.append(("old", event["event_id"]))
            now = time.time()
            await transact(box["store"], lambda c: outbox.release_leases(c, "ctl", now))
            return False

    class New:
        async def send_event(self, event: dict[str, Any], *, timeout: float) -> bool:
            sent.append(("new", event["event_id"]))
            return True

    current: dict[str, Any] = {"ctl": Old()}
    policy = OutboxPolicy(lease_seconds=30, send_timeout=0.2)
    with trio.fail_after(20):
        async with _destinations(tmp_path, policy, current.get) as (store, supervisor, desk, _):
            box["store"] = store
            while not sent:
                await trio.sleep(0.01)
            current["ctl"] = New()
            desk.wake("ctl")
            while len(sent) < 2:
                await trio.sleep(0.01)
            assert supervisor.stats.crashes == {}
            assert [who for who, _ in sent] == ["old", "new"] and sent[0][1] == sent[1][1]
    (row,) = _rows(tmp_path)
    assert (row.state, row.attempts) == ("delivering", 2)


# ---- the operator's commands side by side, on a real server ------------------------------


@attrs.define
class _Connection:
    """A connection as the registry holds it: the events written to it."""

    events: list[str] = attrs.field(factory=list)

    async def send_event(self, event: dict[str, Any], *, timeout: float) -> bool:
        self.events.append(event["event_id"])
        return True

    async def send_frame(self, frame: str, *, timeout: float) -> bool:
        return True

    def close_soon(self, code: int, reason: str) -> None:
        """Never closed here."""


async def test_each_live_operator_command_gets_each_event_and_a_controller_its_newest() -> None:
    registry = ConnectionRegistry()
    waiting, watching = _Connection(), _Connection()  # `akk send --wait`, `akk events`
    registry.claim(OPERATOR_ID, waiting, exclusive=False)
    registry.claim(OPERATOR_ID, watching, exclusive=False)
    sink = registry.current(OPERATOR_ID)
    assert sink is not None and await sink.send_event({"event_id": "evt_1"}, timeout=1)
    assert waiting.events == watching.events == ["evt_1"]

    old, new = _Connection(), _Connection()
    registry.claim("ctl", old)
    registry.claim("ctl", new)
    assert registry.current("ctl") is new


@asynccontextmanager
async def _operator_serving(tmp_path: Path) -> AsyncIterator[tuple[Endpoint, StateDir, str]]:
    """`akk serve` over a store with one settled Turn of the operator (its ``done`` event)."""
    state = StateDir(tmp_path / "akk")
    state.ensure()
    conn = open_store(state.store_path)
    add_ctl_and_t1(conn)
    with conn:
        conn.execute(
            "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
            "VALUES (?, ?, 0, 0) ON CONFLICT DO NOTHING",
            (OPERATOR_ID, OPERATOR_ID),
        )
        turn = _settled(conn, OPERATOR_ID, "r1")
    conn.close()
    config = ServiceConfig(state=state, port=0, tmux_sockets=())
    async with trio.open_nursery() as nursery:
        endpoint = await nursery.start(
            lambda task_status: run_service(config, task_status=task_status)
        )
        yield endpoint, state, turn.turn_id
        nursery.cancel_scope.cancel()


def _operator_rows(state: StateDir) -> list[tuple[str, int]]:
    conn = open_reader(state.store_path)
    try:
        with conn:
            rows = conn.execute("SELECT state, attempts FROM notifications ORDER BY rowid")
            found = [(str(s), int(a)) for s, a in rows]
    finally:
        conn.close()
    return found


async def test_a_one_shot_command_takes_no_event_and_releases_no_lease(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with _operator_serving(tmp_path) as (endpoint, state, turn_id):
            token = state.token()
            async with connect(endpoint.url, token) as first, aclosing(first.events()) as seen:
                event = await anext(seen)  # delivered to it, not acked yet
                assert event["turn_id"] == turn_id
                assert _operator_rows(state) == [("delivering", 1)]
                async with connect(endpoint.url, token, events=False) as one_shot:
                    await one_shot.call("list", {})
                    await trio.sleep(0.5)
                assert _operator_rows(state) == [("delivering", 1)]
                await first.ack(event["event_id"])
            assert _operator_rows(state) == [("accepted", 1)]


async def test_a_new_operator_command_leaves_the_leases_of_those_still_live(
    tmp_path: Path,
) -> None:
    with trio.fail_after(30):
        async with _operator_serving(tmp_path) as (endpoint, state, turn_id):
            token = state.token()
            async with connect(endpoint.url, token) as first, aclosing(first.events()) as seen:
                event = await anext(seen)
                assert event["turn_id"] == turn_id
                async with connect(endpoint.url, token):  # e.g. another `akk events`
                    await trio.sleep(0.5)
                # Not made due again (nor sent again): the first connection may ack yet.
                assert _operator_rows(state) == [("delivering", 1)]
                await first.ack(event["event_id"])
            assert _operator_rows(state) == [("accepted", 1)]


async def test_send_wait_ends_when_its_turn_settled_though_another_command_took_the_event(
    tmp_path: Path,
) -> None:
    with trio.fail_after(30):
        async with _operator_serving(tmp_path) as (endpoint, state, turn_id):
            token = state.token()
            async with connect(endpoint.url, token) as events, aclosing(events.events()) as seen:
                event = await anext(seen)  # `akk events` shows and acks it
                await events.ack(event["event_id"])
            async with connect(endpoint.url, token) as waiting:
                final = await _follow(waiting, turn_id, 1, quiet=True)
            assert final["turn"]["state"] == "done"
