"""Supervisors: restart policy, intensity, strategies, dynamic children, nesting, shutdown."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from akk.runtime import (
    Actor,
    ActorCrashed,
    ActorRef,
    ActorStopped,
    ChildSpec,
    DuplicateChild,
    Rank,
    Restart,
    StopActor,
    Strategy,
    Supervisor,
    SupervisorError,
    SupervisorEscalation,
    SupervisorNotRunning,
    UnknownChild,
)
from tests.tier import examples


class Boom(Exception):
    """A scheduled crash."""


@attrs.define
class Tracker:
    """What the test can see of workers: incarnations started, latest worker per key."""

    starts: Counter[str] = attrs.Factory(Counter)
    latest: dict[str, Worker] = attrs.Factory(dict)


class Worker(Actor):
    """Counts its incarnations; 'crash' raises, 'exit' returns normally, else replies."""

    rank = Rank.TERMINAL

    def __init__(self, key: str, tracker: Tracker) -> None:
        self.key = key
        self.tracker = tracker
        self.incarnation = 0
        self.gate = trio.Event()
        self.ending: trio.Event | None = None
        """Set by a test: its stop waits for this (ending, not yet removed)."""

    async def started(self) -> None:
        self.tracker.starts[self.key] += 1
        self.tracker.latest[self.key] = self
        self.incarnation = self.tracker.starts[self.key]

    async def stopped(self) -> None:
        if self.ending is not None:
            await self.ending.wait()

    async def receive(self, message: object) -> object:
        if message == "crash":
            raise Boom(f"scheduled crash of {self.key}")
        if message == "exit":
            raise StopActor()
        if message == "wait":
            await self.gate.wait()
        return self.incarnation


def worker_spec(key: str, tracker: Tracker, restart: Restart = Restart.PERMANENT) -> ChildSpec:
    return ChildSpec(key=key, start=lambda: Worker(key, tracker), restart=restart)


async def start(nursery: trio.Nursery, supervisor: Supervisor) -> None:
    await nursery.start(supervisor.run)


async def test_ref_survives_restart_and_pending_messages_stay() -> None:
    tracker = Tracker()
    sup = Supervisor("root", children=[worker_spec("w", tracker)])
    replies: list[object] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await start(nursery, sup)
            ref = sup.ref("w")
            assert await ref.ask("ping", timeout=1) == 1

            async def ask_after_crash() -> None:
                replies.append(await ref.ask("ping", timeout=1))

            ref.tell("crash")
            nursery.start_soon(ask_after_crash)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(ActorCrashed, match="Boom"):
                await ref.ask("crash", timeout=1)
            assert sup.ref("w") is ref
            assert await ref.ask("ping", timeout=1) == 3
            nursery.cancel_scope.cancel()
    # The ping queued behind the first crash was answered by incarnation 2.
    assert replies == [2]
    assert sup.stats.crashes == {"w": 2}
    assert sup.stats.restarts == {"w": 2}


async def test_crash_is_logged_with_key_and_reason(caplog: pytest.LogCaptureFixture) -> None:
    tracker = Tracker()
    sup = Supervisor("root", children=[worker_spec("w", tracker)])
    caplog.set_level(logging.INFO, logger="akk.actors")
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await start(nursery, sup)
            sup.ref("w").tell("crash")
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    crashes = [r for r in caplog.records if getattr(r, "event", None) == "crashed"]
    assert len(crashes) == 1
    record = crashes[0]
    assert record.name == "akk.actors"
    assert record.levelno == logging.WARNING
    assert (record.child, record.reason_type, record.reason) == (  # type: ignore[attr-defined]
        "w",
        "Boom",
        "scheduled crash of w",
    )
    # The message that crashed the actor is never logged.
    assert "'crash'" not in caplog.text


async def test_normal_return_transient_stays_down_permanent_restarts() -> None:
    tracker = Tracker()
    sup = Supervisor(
        "root",
        children=[
            worker_spec("perm", tracker, Restart.PERMANENT),
            worker_spec("trans", tracker, Restart.TRANSIENT),
        ],
    )
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await start(nursery, sup)
            trans = sup.ref("trans")
            sup.ref("perm").tell("exit")
            trans.tell("exit")
            await trio.testing.wait_all_tasks_blocked()
            assert sup.child_keys() == ["perm"]
            assert await sup.ref("perm").ask("ping", timeout=1) == 2
            with pytest.raises(ActorStopped):
                await trans.ask("ping", timeout=1)
            nursery.cancel_scope.cancel()
    assert sup.stats.restarts == {"perm": 1}
    assert sup.stats.crashes == {}


async def test_dynamic_children_start_and_stop_by_key() -> None:
    tracker = Tracker()
    sup = Supervisor("terminals")
    plain_cancelled = trio.Event()

    async def plain() -> None:
        try:
            await trio.sleep_forever()
        finally:
            plain_cancelled.set()

    with pytest.raises(SupervisorNotRunning):
        await sup.start_child(worker_spec("pane:1", tracker))
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await start(nursery, sup)
            ref = await sup.start_child(worker_spec("pane:1", tracker))
            assert ref is sup.ref("pane:1")
            assert await sup.start_child(ChildSpec(key="poller", start=plain)) is None
            with pytest.raises(UnknownChild, match="plain task"):
                sup.ref("poller")
            with pytest.raises(DuplicateChild, match="pane:1"):
                await sup.start_child(worker_spec("pane:1", tracker))
            assert sup.child_keys() == ["pane:1", "poller"]

            # Stop with one message in flight and one pending.
            worker_ref = sup.ref("pane:1")
            outcomes: list[object] = []

            async def ask(message: str) -> None:
                try:
                    outcomes.append(await worker_ref.ask(message, timeout=5))
                except ActorStopped as exc:
                    outcomes.append(type(exc))

            nursery.start_soon(ask, "wait")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ask, "ping")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(sup.stop_child, "pane:1")
            await trio.testing.wait_all_tasks_blocked()
            assert sup.child_keys() == ["pane:1", "poller"]  # still finishing its message
            assert tracker.starts["pane:1"] == 1
            # Open the gate of the one running incarnation: the stop then completes.
            tracker.latest["pane:1"].gate.set()
            await trio.testing.wait_all_tasks_blocked()
            assert outcomes == [1, ActorStopped]
            assert sup.child_keys() == ["poller"]

            await sup.stop_child("poller")
            assert plain_cancelled.is_set()
            with pytest.raises(UnknownChild):
                await sup.stop_child("poller")
            # The key is free again; the new child gets a fresh ref.
            again = await sup.start_child(worker_spec("pane:1", tracker))
            assert again is not worker_ref
            assert await sup.ref("pane:1").ask("ping", timeout=1) == 2
            nursery.cancel_scope.cancel()
    assert sup.stats.restarts == {}
    assert sup.stats.crashes == {}


async def test_cancelling_run_stops_the_tree_gracefully() -> None:
    tracker = Tracker()
    sup = Supervisor("root", children=[worker_spec("a", tracker), worker_spec("b", tracker)])
    outcomes: list[object] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as askers, trio.open_nursery() as tree:
            await start(tree, sup)
            a = sup.ref("a")

            async def ask(message: str) -> None:
                try:
                    outcomes.append(await a.ask(message, timeout=5))
                except ActorStopped as exc:
                    outcomes.append(type(exc))

            askers.start_soon(ask, "wait")
            await trio.testing.wait_all_tasks_blocked()
            askers.start_soon(ask, "ping")
            await trio.testing.wait_all_tasks_blocked()
            tree.cancel_scope.cancel()
            # run() is cancelled; "a" must finish its message in flight before stopping.
            askers.start_soon(open_gate_when_blocked, tracker.latest["a"].gate, outcomes)
    assert outcomes == ["gate opened", 1, ActorStopped]
    assert sup.child_keys() == []
    assert a.closed


async def open_gate_when_blocked(gate: trio.Event, outcomes: list[object]) -> None:
    await trio.testing.wait_all_tasks_blocked()
    outcomes.append("gate opened")
    gate.set()


async def test_nested_supervisor_escalates_to_parent() -> None:
    tracker = Tracker()
    inner = Supervisor("terminals", max_restarts=1, period=10, children=[worker_spec("t", tracker)])
    outer = Supervisor(
        "root",
        max_restarts=1,
        period=10,
        children=[worker_spec("store", tracker), ChildSpec(key="terminals", start=inner.run)],
    )
    outcome: list[BaseException] = []

    async def run_outer(task_status: trio.TaskStatus[None]) -> None:
        try:
            await outer.run(task_status=task_status)
        except SupervisorEscalation as exc:
            outcome.append(exc)

    async def crash_inner_twice() -> None:
        for _ in range(2):
            inner.ref("t").tell("crash")
            await trio.testing.wait_all_tasks_blocked()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_outer)
            await trio.testing.wait_all_tasks_blocked()
            first_ref = inner.ref("t")
            await crash_inner_twice()
            # Inner gave up; outer counted it as a crash of "terminals" and restarted it.
            assert outer.stats.crashes == {"terminals": 1}
            assert outer.stats.restarts == {"terminals": 1}
            assert inner.stats.escalations == 1
            assert first_ref.closed
            assert await inner.ref("t").ask("ping", timeout=1) == 3
            # The sibling of the escalating supervisor kept its first incarnation.
            assert await outer.ref("store").ask("ping", timeout=1) == 1
            # A second escalation exceeds the outer intensity: the whole tree stops.
            await crash_inner_twice()
    assert len(outcome) == 1
    escalation = outcome[0]
    assert isinstance(escalation, SupervisorEscalation)
    assert (escalation.supervisor, escalation.child) == ("root", "terminals")
    assert isinstance(escalation.__cause__, SupervisorEscalation)
    assert outer.child_keys() == []
    assert inner.child_keys() == []


async def test_static_factory_failure_fails_run_plainly() -> None:
    tracker = Tracker()

    def broken() -> Actor:
        raise RuntimeError("no store file")

    sleeper_started = False

    async def sleeper() -> None:
        nonlocal sleeper_started
        sleeper_started = True

    sup = Supervisor(
        "root",
        children=[
            ChildSpec(key="plain", start=sleeper),
            worker_spec("a", tracker),
            ChildSpec(key="broken", start=broken),
        ],
    )
    with trio.fail_after(5), pytest.raises(RuntimeError, match="no store file"):
        await sup.run()
    assert not sleeper_started
    assert tracker.starts == Counter()
    assert sup.child_keys() == []


async def test_running_twice_at_once_is_refused() -> None:
    sup = Supervisor("root")
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await start(nursery, sup)
            with pytest.raises(SupervisorError, match="already running"):
                await sup.run()
            nursery.cancel_scope.cancel()


def test_duplicate_static_keys_are_refused() -> None:
    tracker = Tracker()
    with pytest.raises(ValueError, match="duplicate child keys"):
        Supervisor("root", children=[worker_spec("a", tracker), worker_spec("a", tracker)])


# --- Hypothesis: crash schedules against an independent model ---------------------------


@attrs.frozen
class Event:
    quarter: int  # time in quarter seconds: exact in floating point
    child: int
    action: str  # "crash" or "exit"


@attrs.frozen
class Scenario:
    restarts: tuple[Restart, ...]
    strategy: Strategy
    max_restarts: int
    period_quarters: int
    events: tuple[Event, ...]

    def key(self, index: int) -> str:
        return f"c{index}"


@st.composite
def scenarios(draw: Callable[[st.SearchStrategy[object]], object]) -> Scenario:
    count = draw(st.integers(1, 4))
    assert isinstance(count, int)
    restarts = draw(st.lists(st.sampled_from(Restart), min_size=count, max_size=count))
    events = draw(
        st.lists(
            st.builds(
                Event,
                st.integers(0, 24),
                st.integers(0, count - 1),
                st.sampled_from(["crash", "crash", "exit"]),
            ),
            max_size=12,
        )
    )
    assert isinstance(restarts, list)
    assert isinstance(events, list)
    strategy = draw(st.sampled_from(Strategy))
    max_restarts = draw(st.integers(0, 4))
    period_quarters = draw(st.integers(1, 12))
    assert isinstance(strategy, Strategy)
    assert isinstance(max_restarts, int)
    assert isinstance(period_quarters, int)
    return Scenario(
        restarts=tuple(restarts),
        strategy=strategy,
        max_restarts=max_restarts,
        period_quarters=period_quarters,
        events=tuple(sorted(events, key=lambda e: e.quarter)),
    )


@attrs.define
class Model:
    """What OTP says should happen, computed without the supervisor."""

    alive: list[str]
    crashes: Counter[str] = attrs.Factory(Counter)
    restarts: Counter[str] = attrs.Factory(Counter)
    history: list[float] = attrs.Factory(list)
    escalated_at: int | None = None


def model_step(model: Model, scenario: Scenario, index: int) -> bool:
    """Apply event `index`; return whether it reached a live child."""
    event = scenario.events[index]
    key = scenario.key(event.child)
    if key not in model.alive:
        return False
    policy = {scenario.key(i): restart for i, restart in enumerate(scenario.restarts)}
    crashed = event.action == "crash"
    if crashed:
        model.crashes[key] += 1
    if policy[key] is Restart.TEMPORARY or (policy[key] is Restart.TRANSIENT and not crashed):
        model.alive.remove(key)
        return True
    now = event.quarter / 4
    period = scenario.period_quarters / 4
    model.history = [t for t in [*model.history, now] if now - t < period]
    if len(model.history) > scenario.max_restarts:
        model.escalated_at = index
        model.alive.clear()
    elif scenario.strategy is Strategy.ONE_FOR_ONE:
        model.restarts[key] += 1
    else:
        for other in list(model.alive):
            if other != key and policy[other] is Restart.TEMPORARY:
                model.alive.remove(other)
            else:
                model.restarts[other] += 1
    return True


async def play(scenario: Scenario) -> None:
    tracker = Tracker()
    keys = [scenario.key(i) for i in range(len(scenario.restarts))]
    sup = Supervisor(
        "root",
        strategy=scenario.strategy,
        max_restarts=scenario.max_restarts,
        period=scenario.period_quarters / 4,
        children=[
            worker_spec(key, tracker, restart)
            for key, restart in zip(keys, scenario.restarts, strict=True)
        ],
    )
    model = Model(alive=list(keys))
    escalations: list[SupervisorEscalation] = []

    async def run_sup(task_status: trio.TaskStatus[None]) -> None:
        try:
            await sup.run(task_status=task_status)
        except SupervisorEscalation as exc:
            escalations.append(exc)

    async with trio.open_nursery() as nursery:
        await nursery.start(run_sup)
        await trio.testing.wait_all_tasks_blocked()
        refs: dict[str, ActorRef] = {key: sup.ref(key) for key in keys}
        for index, event in enumerate(scenario.events):
            await trio.sleep_until(event.quarter / 4)
            key = scenario.key(event.child)
            assert (key in sup.child_keys()) == (key in model.alive)
            if model_step(model, scenario, index):
                sup.ref(key).tell(event.action)
                await trio.testing.wait_all_tasks_blocked()
            assert bool(escalations) == (model.escalated_at is not None), index
            if escalations:
                break
            assert sorted(sup.child_keys()) == sorted(model.alive)
            # Survivors run exactly the incarnation the model predicts (siblings untouched).
            for alive in model.alive:
                assert await sup.ref(alive).ask("ping", timeout=1) == 1 + model.restarts[alive]
        nursery.cancel_scope.cancel()

    assert sup.stats.crashes == {k: v for k, v in model.crashes.items() if v}
    assert sup.stats.restarts == {k: v for k, v in model.restarts.items() if v}
    assert tracker.starts == Counter({key: 1 + model.restarts[key] for key in keys})
    assert sup.child_keys() == []
    for ref in refs.values():
        assert ref.closed
    if escalations:
        assert sup.stats.escalations == 1
        assert model.escalated_at is not None
        escalating = scenario.events[model.escalated_at].child
        assert escalations[0].child == scenario.key(escalating)


@settings(max_examples=examples(300))
@given(scenarios())
def test_crash_schedules_follow_the_model(scenario: Scenario) -> None:
    trio.run(play, scenario, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_child_ending_of_itself_is_replaced_on_request_never_taken_as_running() -> None:
    """A TurnActor that read an unwatch's Close stops; a renew that revives the record a
    moment later must get a new actor, not "it runs already" from the one that is ending."""
    tracker = Tracker()
    sup = Supervisor("turns")
    spec = worker_spec("turn:1", tracker, Restart.TRANSIENT)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await start(nursery, sup)
            old = await sup.start_child(spec)
            assert old is not None and await old.ask("ping", timeout=5) == 1
            tracker.latest["turn:1"].ending = ending = trio.Event()
            await old.ask("exit", timeout=5)
            assert sup.child_keys() == ["turn:1"]  # ending, not yet removed
            with pytest.raises(DuplicateChild):
                await sup.start_child(spec)

            async def finish() -> None:
                await trio.testing.wait_all_tasks_blocked()
                ending.set()

            nursery.start_soon(finish)
            new = await sup.start_child(spec, replace_ending=True)
            assert new is not None and new is not old
            await trio.testing.wait_all_tasks_blocked()
            assert sup.child_keys() == ["turn:1"]  # the old run's exit removed nothing
            assert await new.ask("ping", timeout=5) == 2
            with pytest.raises(ActorStopped):
                old.tell("ping")
            nursery.cancel_scope.cancel()
