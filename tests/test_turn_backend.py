"""The backend seam: the one TurnActor and the methods, run against a backend made in this test.

No screen and no app-server: `_Agent` is the whole "agent" (what it asks, what
reached it), `_Follower` follows a Turn on it (`TurnFollower`) and `_Answers`
dispatches its rounds and answers its prompts (`TurnBackend`). Everything else
is real: the StoreActor, the DestinationDesk and its outbox, the offers and the
fence, the TurnActor and its settle (which writes the reported `Usage`), and
the `send`, `respond`, `status`, `approve` and `respond_interaction` methods.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import apsw
import attrs
import jsonschema
import pytest
import trio
import trio.testing

from akk import evidence
from akk.actors.destination import DestinationDesk, OutboxPolicy
from akk.actors.pruner import Pruner, RetentionSettings
from akk.actors.store import StoreActor, transact
from akk.actors.terminal_board import TerminalBoard
from akk.actors.turn import Close, Tick, TurnActor
from akk.actors.turn_desk import TurnDesk
from akk.actors.turn_follower import CancelResult, TurnControl, Usage
from akk.backends.contract import History, Refusal, RespondKey, Task
from akk.backends.offers import check_offer, offer_refusal
from akk.backends.registry import Backends
from akk.config import TurnSettings
from akk.discovery.identity import TerminalIdentity
from akk.methods.common import MethodContext
from akk.methods.interactions import InteractionCalls
from akk.methods.turns import TurnCalls
from akk.profiles.qualified_versions import QualifiedVersions
from akk.profiles.registry import PINNED
from akk.protocol.errors import Reason, RpcError
from akk.protocol.schema import METHODS, TERMINAL_ROW
from akk.runtime.actor import ActorRef
from akk.runtime.supervisor import ChildSpec, Restart, Supervisor
from akk.screen.fingerprint import Appearance, IdMinter
from akk.server.auth import CredentialBook
from akk.server.connections import ConnectionRegistry
from akk.sessions import policy
from akk.store import interactions, outbox, responds, turns
from akk.store.database import open_store
from akk.store.interactions import Interaction, InteractionState
from akk.store.reader import StoreReader
from akk.store.responds import Responded
from akk.store.sessions import InvocationRow
from akk.store.turns import Turn, TurnState

OWNER = "a"
FIRST = Appearance(b"\x01" * 32, 1)
SECOND = Appearance(b"\x02" * 32, 2)


@attrs.define
class _Agent:
    """The backend's own world: what it asks now, what reached it, what it was asked."""

    asks: dict[str, Appearance] = attrs.field(factory=dict)
    finished: str | None = None
    received: list[tuple[str, str]] = attrs.field(factory=list)
    """(interaction_id, decision) for every answer that reached the agent."""
    reads: int = 0
    """Looks that only read the agent (a reconcile after a restart is one)."""
    rounds: list[str] = attrs.field(factory=list)
    """The text of every round that reached the agent, in order."""
    spent: Usage | None = None
    """What the agent reports its round spent, once it finished."""


def _projection(interaction_id: str) -> dict[str, Any]:
    return {"interaction_id": interaction_id, "kind": "permission", "questions": []}


def _record_asked(conn: apsw.Connection, agent: _Agent, turn: Turn) -> bool:
    """Record what ``agent`` asks of ``turn``; True when one is new (its wake-up was written)."""
    new = False
    for interaction_id, seen in agent.asks.items():
        new |= interactions.record(
            conn, interaction_id=interaction_id, terminal_id=None, turn_id=turn.turn_id,
            kind="permission", seen=seen, profile="in-test", step_index=1, step_total=1,
            projection=_projection(interaction_id), now=time.time(), announce=turn,
        )[1]  # fmt: skip
    return new


class _Follower:
    """A `TurnFollower` over ``agent``: announces what it asks, settles when it finished."""

    def __init__(self, agent: _Agent) -> None:
        self._agent = agent
        self._control: TurnControl | None = None

    def attach(self, control: TurnControl) -> None:
        self._control = control

    def read(self, conn: apsw.Connection, turn: Turn) -> None:
        """Nothing beside the Turn."""

    def started(self, turn: Turn) -> None:
        """Nothing to set up."""

    def reloaded(self, reconcile: bool) -> None:
        """Every look reads the agent afresh."""

    async def look(self, now: float) -> bool:
        assert self._control is not None
        agent = self._agent
        agent.reads += 1
        await self._control.announce(
            lambda row: row.interaction_id in agent.asks,
            lambda conn, fresh: _record_asked(conn, agent, fresh),
        )
        if agent.finished is not None:
            await self._control.settle(TurnState.DONE, None, agent.finished, usage=agent.spent)
        return True

    async def before_deadline(self) -> None:
        """Nothing to interrupt."""

    async def interrupt(self, turn: Turn) -> CancelResult:
        return CancelResult(True)

    def settling(self, conn: apsw.Connection, fresh: Turn, state: TurnState, now: float) -> None:
        """No facts beside the Turn's."""


class _Answers:
    """A `TurnBackend` over ``agent``: dispatches its rounds (reserving each in the store
    first, as a backend that reserves its own does), offers what it asks, answers through
    the real fence. ``follow`` starts a TurnActor on a Turn; ``actor`` is the last one."""

    name = turns.TERMINAL  # the name a send with terminal_id goes to
    keeps_sessions = False
    witness = None

    def __init__(
        self,
        agent: _Agent,
        store: ActorRef,
        reader: StoreReader,
        follow: Callable[[str], Awaitable[ActorRef]],
    ) -> None:
        self._agent = agent
        self._store = store
        self._reader = reader
        self._follow = follow
        self.actor: ActorRef | None = None

    async def start(self, task: Task) -> Turn | Refusal:
        def reserve(conn: apsw.Connection) -> Turn:
            turn = turns.insert(
                conn, controller_id=task.controller_id, client_request_id=task.client_request_id,
                terminal_id=task.terminal_id, request_sha256=evidence.request_digest(task.text),
                request_chars=len(task.text), evidence_status="unknown", evidence=None,
                evidence_limit="in-test backend", inactivity_seconds=task.inactivity_seconds,
                lifetime_seconds=task.lifetime_seconds, now=time.time(),
            )  # fmt: skip
            return turns.update(conn, turn, state=TurnState.RUNNING)

        turn = await transact(self._store, reserve)
        self._agent.rounds.append(task.text)
        self.actor = await self._follow(turn.turn_id)
        return turn

    async def dispatch(self, turn: Turn, text: str, key: RespondKey | None = None) -> Turn:
        def reopen(conn: apsw.Connection) -> Turn:
            fresh = turns.get(conn, turn.turn_id)
            assert fresh is not None
            digest = evidence.request_digest(text)
            reopened = turns.reopen(
                conn, fresh, request_sha256=digest,
                request_chars=len(text), evidence_status="unknown", evidence=None,
                evidence_limit="in-test backend", now=time.time(),
            )  # fmt: skip
            if key is not None:
                responds.record(
                    conn, key.controller_id, key.client_request_id,
                    Responded(turn.turn_id, reopened.round, digest), time.time(),
                )  # fmt: skip
            return turns.update(conn, reopened, state=TurnState.RUNNING)

        reopened = await transact(self._store, reopen)
        self._agent.rounds.append(text)
        self.actor = await self._follow(turn.turn_id)
        return reopened

    async def follow_again(self, turn_id: str, *, restarted: bool) -> None:
        self.actor = await self._follow(turn_id)

    async def history(self, workspace: str) -> History:
        raise RpcError(Reason.INVALID_PARAMS, "the in-test backend keeps no sessions")

    async def confirm_ended(self, turn: Turn, invocation: InvocationRow) -> str:
        raise RpcError(Reason.INVALID_PARAMS, "the in-test backend keeps no sessions")

    async def shown(self, turn: Turn, controller_id: str) -> dict[str, Any] | None:
        asked = [i for i in self._agent.asks if turn.unresolved]
        if not asked:
            return None
        interaction_id, now = asked[0], time.time()

        def offer(conn: apsw.Connection) -> Interaction:
            row = interactions.get(conn, interaction_id)
            assert row is not None
            interactions.offer(conn, row, controller_id, now=now, lifetime=600.0)
            return row

        row = await transact(self._store, offer)
        return row.public()

    async def approve(
        self, turn: Turn, row: Interaction, controller_id: str, value: str
    ) -> dict[str, Any]:
        return await self._answer(row, controller_id, value)

    async def respond(
        self, turn: Turn, row: Interaction, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._answer(row, controller_id, "respond")

    async def still_asked(self, turn: Turn, row: Interaction, notification_id: str) -> None:
        if row.interaction_id not in self._agent.asks:
            raise RpcError(Reason.PROMPT_CHANGED, "no longer asked")

    def check_respond(self, turn: Turn) -> None:
        """Continues with respond."""

    async def _answer(self, row: Interaction, controller_id: str, value: str) -> dict[str, Any]:
        """The fence as every backend has it: the fresh offer, then take it, then send once."""
        offer = await self._reader.run(
            lambda conn: interactions.offer_of(conn, row.interaction_id, controller_id)
        )
        check_offer(row, offer, row.interaction_id in self._agent.asks)
        if row.state is InteractionState.GONE or row.interaction_id not in self._agent.asks:
            raise RpcError(Reason.PROMPT_CHANGED, "the agent no longer asks it; nothing was sent")
        assert offer is not None
        now = time.time()

        def take(conn: apsw.Connection) -> None:
            try:
                interactions.take_offer(
                    conn, row.interaction_id, controller_id, offer.offer_id, now
                )
            except interactions.OfferUnusable as exc:
                raise RpcError(*offer_refusal(exc)) from None

        await transact(self._store, take)
        self._agent.received.append((row.interaction_id, value))
        del self._agent.asks[row.interaction_id]
        return {"outcome": "dispatched", "interaction_id": row.interaction_id, "dispatch_id": "-"}


@attrs.define
class _Sink:
    """The owner's connection: every event the outbox delivered, by event id."""

    events: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    arrived: trio.Event = attrs.field(factory=trio.Event)

    async def send_event(self, event: dict[str, Any], *, timeout: float) -> bool:
        self.events[event["event_id"]] = event
        self.arrived.set()
        self.arrived = trio.Event()
        return True

    def kinds(self) -> list[str]:
        return sorted(e["kind"] for e in self.events.values())

    async def until(self, done: Callable[[], bool]) -> None:
        while not done():
            await self.arrived.wait()


def _terminal_row(path: Path) -> None:
    """The owner and the terminal its Turn is sent to, as the store knows them."""
    conn = open_store(path)
    try:
        with conn:
            conn.execute(
                "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
                "VALUES (?, ?, 0, 0)",
                (OWNER, OWNER),
            )
            conn.execute(
                "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
                "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
                "VALUES ('term_seam', 's', '%1', 1, 'claude', 2, 3, 'claude', 0, 0)"
            )
    finally:
        conn.close()


async def test_one_turn_actor_runs_a_backend_through_the_outbox_offers_and_fence(
    tmp_path: Path,
) -> None:
    path = tmp_path / "akk.sqlite3"
    _terminal_row(path)
    agent = _Agent(asks={"int_1": FIRST})
    sink = _Sink()
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(path))])
    reader = StoreReader(path)
    try:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                await nursery.start(root.run)
                store = root.ref("store")
                destination_supervisor = Supervisor("destinations")
                destinations = DestinationDesk(
                    destination_supervisor, store=store, reader=reader.run,
                    sink=lambda controller_id: sink if controller_id == OWNER else None,
                    policy=OutboxPolicy(),
                )  # fmt: skip
                await root.start_child(ChildSpec("destinations", destination_supervisor.run))
                await root.start_child(ChildSpec("outbox", destinations.run))
                turn_supervisor = Supervisor("turns")
                await nursery.start(turn_supervisor.run)

                async def stopped(turn_id: str) -> None:
                    with trio.fail_after(5):
                        while turn_id in turn_supervisor.child_keys():
                            await trio.testing.wait_all_tasks_blocked()

                async def follow(turn_id: str) -> ActorRef:
                    """A new TurnActor on the same store (as a restarted AKK starts one)."""
                    spec = ChildSpec(
                        turn_id,
                        lambda: TurnActor(
                            turn_id, store=store, reader=reader.run,
                            notify=destinations.wake, follower=_Follower(agent),
                        ),
                        restart=Restart.TRANSIENT,
                    )  # fmt: skip
                    await turn_supervisor.start_child(spec)
                    return turn_supervisor.ref(turn_id)

                backend = _Answers(agent, store, reader, follow)
                ctx = _context(store, reader, destinations, tmp_path, backend)
                calls, answers = TurnCalls(ctx), InteractionCalls(ctx)

                # The first round goes out through the contract, once, however often it is sent.
                task = {"terminal_id": "term_seam", "request": "do it", "client_request_id": "r1"}
                sent = await calls.send(OWNER, task)
                assert await calls.send(OWNER, task) == sent
                jsonschema.validate(sent, METHODS["send"]["result"])
                assert agent.rounds == ["do it"]
                turn_id = sent["turn_id"]
                asks, agent.asks = agent.asks, {}  # nothing asked yet: status offers nothing
                await _status_shows_the_pane_as_list_does(ctx, calls, turn_id)
                agent.asks = asks
                actor = backend.actor
                assert actor is not None

                # The prompt is announced once, through the outbox.
                await actor.ask(Tick(), timeout=5)
                await sink.until(lambda: sink.kinds() == ["approval_required"])

                # A restart: the desk's resume follows every unresolved Turn again through its
                # backend's resumer; the new TurnActor on the same store reconciles by reading.
                actor.tell(Close())
                await stopped(turn_id)
                reads = agent.reads
                assert await ctx.desk.resume(ctx.backends.resumers()) == 1
                actor = backend.actor
                assert actor is not None
                await actor.ask(Tick(), timeout=5)
                assert agent.reads == reads + 1
                assert agent.received == []
                stored = await reader.run(lambda conn: outbox.of_turn(conn, turn_id))
                assert [n.kind for n in stored] == ["approval_required"]

                # status offers int_1; then the agent asks something else: int_1 is gone.
                status = await calls.status(OWNER, False, turn_id)
                assert status["interaction"]["interaction_id"] == "int_1"
                agent.asks = {"int_2": SECOND}
                await actor.ask(Tick(), timeout=5)
                gone = await reader.run(lambda conn: interactions.get(conn, "int_1"))
                assert gone is not None and gone.state is InteractionState.GONE
                # Its owner is told once, with the interaction as it now stands.
                stored = await reader.run(lambda conn: outbox.of_turn(conn, turn_id))
                (told,) = [n.event() for n in stored if n.kind == "invalidated"]
                assert told["interaction"]["interaction_id"] == "int_1"
                assert told["interaction"]["state"] == "gone"
                stale = {"turn_id": turn_id, "interaction_id": "int_1", "answers": []}
                with pytest.raises(RpcError) as refused:
                    await answers.respond_interaction(OWNER, stale)
                assert refused.value.reason is Reason.PROMPT_CHANGED
                assert agent.received == []  # the stale fence sent nothing

                # Without status, int_2 is not offered; after it, one approve reaches the agent.
                approve = {"turn_id": turn_id, "decision": "allow"}
                with pytest.raises(RpcError) as refused:
                    await answers.approve(OWNER, approve)
                assert refused.value.reason is Reason.PROMPT_CHANGED  # offered_to: int_1
                assert agent.received == []
                status = await calls.status(OWNER, False, turn_id)
                assert status["interaction"]["interaction_id"] == "int_2"
                result = await answers.approve(OWNER, approve)
                assert result["outcome"] == "dispatched"
                jsonschema.validate(result, METHODS["approve"]["result"])
                assert agent.received == [("int_2", "allow")]
                agent.asks = {"int_2": SECOND}  # even asked again, the fence holds: once
                with pytest.raises(RpcError) as refused:
                    await answers.approve(OWNER, approve)
                assert refused.value.reason is Reason.CONFLICT
                assert agent.received == [("int_2", "allow")]
                agent.asks = {}

                # The outcome: settled once with the usage the backend reported, delivered
                # through the outbox.
                agent.finished = "the agent finished"
                agent.spent = Usage(evidence.UsageStatus.COMPLETE, evidence.Tokens(7, 5, 3, 2))
                await actor.ask(Tick(), timeout=5)
                await sink.until(lambda: "done" in sink.kinds())
                assert sink.kinds() == [
                    "approval_required", "approval_required", "done", "invalidated"
                ]  # fmt: skip
                settled = await reader.run(lambda conn: turns.get(conn, turn_id))
                assert settled is not None and settled.state is TurnState.DONE
                (outcome,) = [e for e in sink.events.values() if e["kind"] == "done"]
                assert outcome["summary"] == "the agent finished"
                assert outcome["outcome"]["usage"] == {
                    "input_tokens": 7, "output_tokens": 5, "cache_read_tokens": 3,
                    "cache_write_tokens": 2, "usage_status": "complete",
                }  # fmt: skip

                # The next round goes out through the contract too; a backend that saw no
                # count reports only its status.
                await stopped(turn_id)
                agent.finished, agent.spent = None, None
                reopened = await calls.respond(OWNER, False, turn_id, "and then", "next")
                assert reopened["round"] == 2 and reopened["state"] == "running"
                jsonschema.validate(reopened, METHODS["respond"]["result"])
                assert agent.rounds == ["do it", "and then"]
                # Its client_request_id again: that round's record, while it runs and after
                # (below); nothing reaches the agent. Another text with it is a conflict.
                repeated = await calls.respond(OWNER, False, turn_id, "and then", "next")
                assert (repeated["turn_id"], repeated["round"]) == (turn_id, 2)
                with pytest.raises(RpcError) as reused:
                    await calls.respond(OWNER, False, turn_id, "and else", "next")
                assert reused.value.reason is Reason.CONFLICT
                assert "round 2 with another text" in reused.value.message
                assert agent.rounds == ["do it", "and then"]
                actor = backend.actor
                assert actor is not None
                agent.finished = "the second round finished"
                agent.spent = Usage(evidence.UsageStatus.UNKNOWN)
                await actor.ask(Tick(), timeout=5)
                await sink.until(lambda: sink.kinds().count("done") == 2)
                again = await reader.run(lambda conn: turns.get(conn, turn_id))
                assert again is not None and again.state is TurnState.DONE and again.round == 2
                assert again.usage_status == "unknown"
                settled_again = await calls.respond(OWNER, False, turn_id, "and then", "next")
                assert (settled_again["round"], settled_again["state"]) == (2, "done")
                assert agent.rounds == ["do it", "and then"]
                nursery.cancel_scope.cancel()
    finally:
        reader.close()


async def _status_shows_the_pane_as_list_does(
    ctx: MethodContext, calls: TurnCalls, turn_id: str
) -> None:
    """`status` shows a held pane's row as `list` does: the holding Turn's ids to its owner
    and the operator only, and the calls valid on the pane (status alone while it is held)."""
    ctx.board.announce(SEAM, None, trio.current_time())
    try:
        status_only = [{"method": "status", "params": {"terminal_id": "term_seam"}}]
        for caller, operator, shown in [
            (OWNER, False, turn_id), ("b", False, None), ("b", True, turn_id),
        ]:  # fmt: skip
            result = await calls.terminal_status(caller, operator, "term_seam")
            row = result["terminal"]
            jsonschema.validate(result, METHODS["status"]["result"])
            jsonschema.validate(row, TERMINAL_ROW)
            assert (row["turn_id"], row["available_actions"]) == (shown, status_only), caller
        row = (await calls.status(OWNER, False, turn_id))["terminal"]
        assert (row["turn_id"], row["watch_id"]) == (turn_id, turn_id)
        assert row["available_actions"] == status_only
    finally:
        ctx.board.retire("term_seam")
        ctx.board.forget("term_seam")


SEAM = TerminalIdentity(
    terminal_id="term_seam", tmux_socket="s", pane_id="%1", pane_pid=1, agent="claude",
    agent_pid=2, process_start=3, executable="claude", version="1.0.0", cwd=None,
    profile="claude-code@1.0.0", profile_reason=None,
)  # fmt: skip
"""The pane the seam's Turns are sent to, as the watcher announces it."""


def _context(
    store: ActorRef,
    reader: StoreReader,
    destinations: DestinationDesk,
    tmp_path: Path,
    backend: _Answers,
) -> MethodContext:
    """The methods' context with ``answers`` as the one registered backend."""
    board, ids = TerminalBoard(), IdMinter(b"k" * 32)
    desk = TurnDesk(
        Supervisor("unused turns"), store=store, reader=reader.run, board=board,
        notify=destinations.wake,
    )  # fmt: skip
    backends = Backends()
    backends.register(backend)
    return MethodContext(
        store=store, reader=reader, board=board, ids=ids, desk=desk, destinations=destinations,
        settings=TurnSettings(), backends=backends,
        session_limits=policy.RebuildLimits(), workspace_roots=(),
        book=CredentialBook("operator", {}), connections=ConnectionRegistry(), health=dict,
        qualified=QualifiedVersions(PINNED, reader),
        pruner=Pruner(store, reader, tmp_path / "akk.sqlite3", RetentionSettings()),
    )  # fmt: skip
