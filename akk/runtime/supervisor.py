"""Supervisors: run children from child specs, restart them as OTP would.

A supervisor runs each child (an actor, or a plain async function such as a
nested supervisor's `run`) in its own shielded cancel scope, so a crash or a
cancellation never reaches a sibling. Only the supervisor stops a child.

When a child ends, its `Restart` type decides: permanent children always
restart, transient ones only after a crash, temporary ones never. Every
restart counts toward the intensity limit: more than `max_restarts` restarts
within `period` seconds, and the supervisor stops all its children and raises
`SupervisorEscalation`, which its parent counts as that child's crash.
"""

from __future__ import annotations

import enum
import inspect
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from akk.runtime.actor import (
    Actor,
    ActorError,
    ActorRef,
    Incarnation,
    detach_from_actor,
)

__all__ = [
    "ChildSpec",
    "DuplicateChild",
    "Restart",
    "Strategy",
    "Supervisor",
    "SupervisorError",
    "SupervisorEscalation",
    "SupervisorNotRunning",
    "SupervisorStats",
    "UnknownChild",
]

logger = logging.getLogger("akk.actors")

_STOP_GRACE = 1.0
"""Seconds past a child's shutdown timeout that stopping it may take before it is given up."""


class Restart(enum.Enum):
    """When a child that ended is started again (OTP semantics)."""

    PERMANENT = "permanent"
    """Always restart, after a crash or a normal return."""
    TRANSIENT = "transient"
    """Restart only after a crash."""
    TEMPORARY = "temporary"
    """Never restart."""


class Strategy(enum.Enum):
    """What else restarts when one child restarts."""

    ONE_FOR_ONE = "one_for_one"
    """Only the child that ended."""
    ONE_FOR_ALL = "one_for_all"
    """The whole group: stop the others, then start all again (temporary ones are dropped)."""


@attrs.frozen
class ChildSpec:
    """How to start one child and when to restart it.

    `start` returns an `Actor` (a fresh one per incarnation) or an awaitable
    for a plain task, e.g. `other_supervisor.run`. `shutdown_timeout` bounds
    how long a stopping actor may finish its message in flight and run its
    `stopped` hook; a plain task is cancelled at once and bounds its own cleanup.
    """

    key: str
    start: Callable[[], Actor[Any]] | Callable[[], Awaitable[None]]
    restart: Restart = Restart.PERMANENT
    shutdown_timeout: float = 5.0


class SupervisorError(ActorError):
    """A supervisor operation was refused."""

    reason = "supervisor_error"


class DuplicateChild(SupervisorError):
    """A child with this key is already running."""

    reason = "duplicate_child"


class UnknownChild(SupervisorError):
    """No child actor with this key is running."""

    reason = "unknown_child"


class SupervisorNotRunning(SupervisorError):
    """The supervisor is not running, or is shutting down."""

    reason = "supervisor_not_running"


class SupervisorEscalation(ActorError):
    """Restart intensity exceeded: the supervisor stopped its children and gave up."""

    reason = "supervisor_escalation"

    def __init__(self, message: str, *, supervisor: str, child: str, restarts: int) -> None:
        super().__init__(message)
        self.supervisor = supervisor
        self.child = child
        self.restarts = restarts


@attrs.frozen
class SupervisorStats:
    """Counters since the supervisor was created (across re-runs)."""

    crashes: Mapping[str, int]
    restarts: Mapping[str, int]
    escalations: int


@attrs.frozen
class _Exit:
    """A child's incarnation ended without the supervisor asking it to."""

    child: _Child
    generation: int
    error: Exception | None


@attrs.define(eq=False)
class _Child:
    """A running child: its spec, stable ref, and current incarnation."""

    spec: ChildSpec
    ref: ActorRef[Any] | None
    generation: int = 0
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)
    incarnation: Incarnation | None = None
    stop_requested: bool = False


def _ending(child: _Child) -> bool:
    """Whether ``child``'s current run is over or ending of itself (not a restart)."""
    incarnation = child.incarnation
    return child.done.is_set() or (incarnation is not None and incarnation.stopping)


def _discard(made: Actor[Any] | Awaitable[None]) -> None:
    """Close a coroutine that will never run, so it does not warn."""
    if inspect.iscoroutine(made):
        made.close()


class Supervisor:
    """Runs children from child specs and restarts them per spec.

    Usable on its own (`await nursery.start(sup.run)`) or as a child of another
    supervisor (`ChildSpec(key="terminals", start=sup.run)`). Each `run` starts
    the static children afresh; dynamic children do not survive a re-run.
    """

    def __init__(
        self,
        name: str,
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        period: float = 5.0,
        children: Sequence[ChildSpec] = (),
    ) -> None:
        keys = [spec.key for spec in children]
        duplicates = sorted({key for key in keys if keys.count(key) > 1})
        if duplicates:
            raise ValueError(f"supervisor {name!r}: duplicate child keys {duplicates}")
        if max_restarts < 0 or period <= 0:
            raise ValueError(
                f"supervisor {name!r}: need max_restarts >= 0 and period > 0, "
                f"got {max_restarts} and {period}"
            )
        self.name = name
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.period = period
        self._specs = tuple(children)
        self._children: dict[str, _Child] = {}
        self._history: list[float] = []
        self._crashes: Counter[str] = Counter()
        self._restarts: Counter[str] = Counter()
        self._escalations = 0
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._exits: trio.MemorySendChannel[_Exit] | None = None
        self._running = False

    @property
    def stats(self) -> SupervisorStats:
        """Snapshot of crash and restart counts per child key."""
        return SupervisorStats(
            crashes=dict(self._crashes),
            restarts=dict(self._restarts),
            escalations=self._escalations,
        )

    def child_keys(self) -> list[str]:
        """Keys of the children currently supervised, in start order."""
        return list(self._children)

    def ref(self, key: str) -> ActorRef[Any]:
        """Return the stable ref of the child actor `key`.

        Raises `UnknownChild` if no such child runs or it is a plain task.
        """
        child = self._children.get(key)
        if child is None:
            raise UnknownChild(
                f"supervisor {self.name!r} has no child {key!r}; "
                f"running children: {sorted(self._children)}"
            )
        if child.ref is None:
            raise UnknownChild(
                f"child {key!r} of supervisor {self.name!r} is a plain task without a mailbox"
            )
        return child.ref

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the static children and supervise until cancelled.

        Reports started once every static child is launched. On cancellation
        stops all children gracefully (reverse start order, shielded, each
        bounded by its shutdown timeout) and returns by re-raising. Raises
        `SupervisorEscalation` when restart intensity is exceeded, and any
        exception a static child's factory raises at startup.
        """
        if self._running:
            raise SupervisorError(f"supervisor {self.name!r} is already running")
        made: list[Actor[Any] | Awaitable[None]] = []
        try:
            for spec in self._specs:
                made.append(spec.start())
        except BaseException:
            for item in made:
                _discard(item)
            raise
        self._running = True
        self._history.clear()
        exits_send, exits_receive = trio.open_memory_channel[_Exit](math.inf)
        escalation: SupervisorEscalation | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._exits = exits_send
                try:
                    for spec, item in zip(self._specs, made, strict=True):
                        self._add(spec, item)
                    task_status.started()
                    escalation = await self._supervise(exits_receive)
                finally:
                    self._nursery = None
                    with trio.CancelScope(shield=True):
                        await self._stop_all()
        finally:
            self._exits = None
            self._running = False
        if escalation is not None:
            raise escalation

    async def start_child(
        self, spec: ChildSpec, *, replace_ending: bool = False
    ) -> ActorRef[Any] | None:
        """Start a dynamic child; return its ref (None for a plain task).

        ``replace_ending``: a child under `spec.key` that is ending (its actor raised
        `StopActor`, or its run returned) but not yet removed is waited for and replaced,
        instead of counting as running: who starts it again is never told "it runs"
        by one that reads no further message.

        Raises `DuplicateChild` if `spec.key` runs already,
        `SupervisorNotRunning` outside `run`, and whatever the factory raises.
        """
        async with self._lock:
            if self._nursery is None:
                raise SupervisorNotRunning(
                    f"supervisor {self.name!r} is not running; start it before adding children"
                )
            ending = self._children.get(spec.key)
            if replace_ending and ending is not None and _ending(ending):
                await self._stop(ending)
                self._remove(ending)
            if spec.key in self._children:
                raise DuplicateChild(
                    f"supervisor {self.name!r} already runs a child {spec.key!r}; "
                    "stop it first or pick another key"
                )
            return self._add(spec, spec.start()).ref

    async def stop_child(self, key: str) -> None:
        """Stop child `key` gracefully for good; it is not restarted.

        An actor finishes the message in flight (within its shutdown timeout),
        then pending askers get `ActorStopped`. A plain task is cancelled.
        Raises `UnknownChild` if no such child runs.
        """
        async with self._lock:
            child = self._children.get(key)
            if child is None:
                raise UnknownChild(
                    f"supervisor {self.name!r} has no child {key!r} to stop; "
                    f"running children: {sorted(self._children)}"
                )
            await self._stop(child)
            self._remove(child)
            logger.info(
                "supervisor %s: child %s stopped on request",
                self.name,
                key,
                extra={"supervisor": self.name, "child": key, "event": "stopped"},
            )

    def _add(self, spec: ChildSpec, made: Actor[Any] | Awaitable[None]) -> _Child:
        ref = None
        if isinstance(made, Actor):
            rank = type(made).rank
            ref = ActorRef(f"{self.name}/{spec.key}", rank, mailbox_size=type(made).mailbox_size)
        child = _Child(spec=spec, ref=ref)
        self._children[spec.key] = child
        self._launch(child, made)
        return child

    def _launch(self, child: _Child, made: Actor[Any] | Awaitable[None] | None) -> None:
        assert self._nursery is not None, "launch only while running"
        child.generation += 1
        child.scope = trio.CancelScope(shield=True)
        child.done = trio.Event()
        child.incarnation = None
        child.stop_requested = False
        self._nursery.start_soon(
            self._run_child, child, child.generation, made, name=f"{self.name}/{child.spec.key}"
        )

    async def _run_child(
        self, child: _Child, generation: int, made: Actor[Any] | Awaitable[None] | None
    ) -> None:
        detach_from_actor()
        error: Exception | None = None
        try:
            with child.scope:
                try:
                    if made is None:
                        made = child.spec.start()
                    if isinstance(made, Actor):
                        assert child.ref is not None, "actor children have a ref"
                        incarnation = Incarnation(
                            child.ref, made, shutdown_timeout=child.spec.shutdown_timeout
                        )
                        child.incarnation = incarnation
                        if child.stop_requested:
                            incarnation.stop()
                        await incarnation.run()
                    else:
                        await made
                except Exception as exc:
                    error = exc
        finally:
            child.done.set()
        if not child.stop_requested and self._exits is not None:
            self._exits.send_nowait(_Exit(child, generation, error))

    async def _supervise(
        self, exits: trio.MemoryReceiveChannel[_Exit]
    ) -> SupervisorEscalation | None:
        async for event in exits:
            async with self._lock:
                child = event.child
                current = self._children.get(child.spec.key)
                if current is not child or child.generation != event.generation:
                    continue
                escalation = await self._on_exit(child, event.error)
                if escalation is not None:
                    return escalation
        return None

    async def _on_exit(self, child: _Child, error: Exception | None) -> SupervisorEscalation | None:
        key = child.spec.key
        fields = {"supervisor": self.name, "child": key}
        if error is not None:
            self._crashes[key] += 1
            logger.warning(
                "supervisor %s: child %s crashed: %s: %s",
                self.name,
                key,
                type(error).__name__,
                error,
                exc_info=error,
                extra={
                    **fields,
                    "event": "crashed",
                    "reason_type": type(error).__name__,
                    "reason": str(error),
                },
            )
        else:
            logger.info(
                "supervisor %s: child %s returned normally",
                self.name,
                key,
                extra={**fields, "event": "returned"},
            )
        restart = child.spec.restart
        if restart is Restart.TEMPORARY or (restart is Restart.TRANSIENT and error is None):
            self._remove(child)
            return None
        if self._intensity_exceeded():
            self._escalations += 1
            escalation = SupervisorEscalation(
                f"supervisor {self.name!r} gave up: more than {self.max_restarts} restarts "
                f"within {self.period} s (last: child {key!r}); its children were stopped. "
                "Read the 'akk.actors' log for the crash reasons",
                supervisor=self.name,
                child=key,
                restarts=len(self._history),
            )
            escalation.__cause__ = error
            logger.error(
                "supervisor %s: restart intensity exceeded, escalating",
                self.name,
                extra={**fields, "event": "escalated", "restarts": len(self._history)},
            )
            return escalation
        if self.strategy is Strategy.ONE_FOR_ONE:
            self._relaunch(child)
            return None
        group = list(self._children.values())
        for other in reversed(group):
            if other is not child:
                await self._stop(other)
        for member in group:
            if member is not child and member.spec.restart is Restart.TEMPORARY:
                self._remove(member)
            else:
                self._relaunch(member)
        return None

    def _relaunch(self, child: _Child) -> None:
        self._restarts[child.spec.key] += 1
        logger.info(
            "supervisor %s: restarting child %s",
            self.name,
            child.spec.key,
            extra={"supervisor": self.name, "child": child.spec.key, "event": "restarted"},
        )
        self._launch(child, None)

    def _intensity_exceeded(self) -> bool:
        """Record one restart; True if more than max_restarts fall within period."""
        now = trio.current_time()
        self._history.append(now)
        self._history = [t for t in self._history if now - t < self.period]
        return len(self._history) > self.max_restarts

    async def _stop(self, child: _Child) -> None:
        """Stop one incarnation gracefully and wait for it (shielded, bounded)."""
        child.stop_requested = True
        if child.incarnation is not None:
            child.incarnation.stop()
        else:
            child.scope.cancel()
        # Shielded so a cancelled parent still stops its children in order, but
        # bounded: an incarnation is cut at its shutdown timeout, so this waits
        # only for its cleanup; a plain task gets the same bound.
        bound = child.spec.shutdown_timeout + _STOP_GRACE
        with trio.CancelScope(shield=True, deadline=trio.current_time() + bound) as waiting:
            await child.done.wait()
        if waiting.cancelled_caught:
            logger.error(
                "supervisor %r: child %r did not stop within %.1f s; moving on",
                self.name, child.spec.key, bound,
            )  # fmt: skip

    def _remove(self, child: _Child) -> None:
        if self._children.get(child.spec.key) is child:
            del self._children[child.spec.key]
        if child.ref is not None:
            child.ref.close()

    async def _stop_all(self) -> None:
        for child in reversed(list(self._children.values())):
            await self._stop(child)
            self._remove(child)
