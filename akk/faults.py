"""Named fault points for the fault-injection harness.

Every step that can touch a terminal (or, later, an app-server) and every step
of the outbox passes a named point. Points are off unless the environment arms
one: ``AKK_FAULT=<point>:<action>[:<seconds>]`` (several separated by ``,``).
Actions:

- ``crash``: SIGKILL this process at once (what a power cut or OOM kill does);
- ``raise``: raise ``InjectedFault`` from the point;
- ``delay``: sleep ``seconds`` (default 2) at the point, e.g. to let a test
  type into the pane between AKK's text and its Enter;
- ``drop``: at a point guarding one key (``drops``), that key is not sent, as
  if the terminal lost it.

A point fires once per process unless its action is ``delay``. The armed set
is read once, at import, so tests arm it for a subprocess (`akk serve`) through
the environment, or call ``arm`` in their own process.

A point that fires logs one structured WARNING line first (`FIRED`: the point,
the action and the pid, nothing from the Turn), flushed before a ``crash``
kills the process, so a test can tell which point a dead server died at
(`fired_in`).
"""

from __future__ import annotations

import enum
import logging
import os
import re
import signal

import attrs
import trio

log = logging.getLogger("akk.faults")

ENV = "AKK_FAULT"


class Point(enum.StrEnum):
    """Every named point, in the order a managed Turn passes them."""

    # The dispatch of a task, under the TerminalActor.
    EVIDENCE_SNAPSHOT = "evidence_snapshot"  # after the evidence position is read
    RESERVED = "reserved"  # after the reservation committed, before any key
    TEXT_TYPED = "text_typed"  # after the text was sent, before its stage is recorded
    TEXT_INJECTED = "text_injected"  # after `text_injected` committed, before the proof
    BEFORE_ENTER = "before_enter"  # after the composer proof, before the Enter
    ENTER_SENT = "enter_sent"  # after the Enter, before its stage is recorded
    ENTER_RECORDED = "enter_recorded"  # after `enter_sent` committed
    # An answer to a prompt (approve, respond_interaction), under the TerminalActor.
    ANSWER_RESERVED = "answer_reserved"  # after the reservation (offer consumed), before any key
    ANSWER_EDITOR = "answer_editor"  # before the walk onto a free-text editor (or ``drop``)
    ANSWER_TEXT_INJECTED = "answer_text_injected"  # after the free text's stage, before its proof
    ANSWER_TOGGLE = "answer_toggle"  # before the keys toggling one multi-select box (or ``drop``)
    ANSWER_SENT = "answer_sent"  # after the step's last key, before its stage is recorded
    ANSWER_RECORDED = "answer_recorded"  # after `enter_sent` committed, before the postcondition
    # The Turn, reading the agent's own files.
    EVIDENCE_READ = "evidence_read"  # after a read of the agent's file, before using it
    ACCEPTED = "accepted"  # after acceptance committed
    OUTCOME = "outcome"  # after the outcome and its notification committed
    # Cancel.
    INTERRUPT_RESERVED = "interrupt_reserved"  # after the cancel's reservation, before the key
    INTERRUPT_SENT = "interrupt_sent"  # after the interrupt key, before its stage
    INTERRUPT_RECORDED = "interrupt_recorded"  # after `enter_sent` committed, before the reply
    # A Turn on the Codex app-server backend, under the BackendActor and the TurnActor.
    BACKEND_THREAD_START = "backend_thread_start"  # before thread/start is written
    BACKEND_THREAD_STARTED = "backend_thread_started"  # after its result, before it is stored
    BACKEND_THREAD_PERSISTED = "backend_thread_persisted"  # after the thread id committed
    BACKEND_TURN_SENDING = "backend_turn_sending"  # after `maybe_sent` committed, before turn/start
    BACKEND_TURN_WRITTEN = "backend_turn_written"  # after turn/start's result, before it is stored
    BACKEND_TURN_ACCEPTED = "backend_turn_accepted"  # after the native turn id committed
    BACKEND_TURN_RUNNING = "backend_turn_running"  # during the turn (a TurnActor's look)
    BACKEND_COMPLETED = "backend_completed"  # after turn/completed, before the outcome commits
    # A cancel of a Turn on the app-server, under the BackendActor.
    BACKEND_INTERRUPT_RESERVED = "backend_interrupt_reserved"  # after its step, before the request
    BACKEND_INTERRUPT_SENT = "backend_interrupt_sent"  # after turn/interrupt's answer, before stage
    # A queue_next_turn answer's round (under the methods), before its StartTurn is asked.
    BACKEND_ANSWER_QUEUED = "backend_answer_queued"  # after its step and round committed
    # A Turn on the Claude headless backend, under its RunHost and the TurnActor.
    CLAUDE_SPAWN = "claude_spawn"  # after the session and message ids committed, before spawn
    CLAUDE_SPAWNED = "claude_spawned"  # after the process started, before `maybe_sent`
    CLAUDE_WRITTEN = "claude_written"  # after the user line was written, before it is recorded
    CLAUDE_ACCEPTED = "claude_accepted"  # after acceptance (system/init) committed
    CLAUDE_RUNNING = "claude_running"  # during the turn, its line reserved (a TurnActor's look)
    CLAUDE_RESULT = "claude_result"  # after `result`, before the outcome commits
    # An answer to a headless Claude's control request, under its RunActor.
    CLAUDE_ANSWER_RESERVED = "claude_answer_reserved"  # after the reservation, before the line
    CLAUDE_ANSWER_SENT = "claude_answer_sent"  # after the control_response line, before its stage
    CLAUDE_ANSWER_RECORDED = "claude_answer_recorded"  # after `accepted` committed
    # A cancel of a headless Claude's round, under its RunActor.
    CLAUDE_INTERRUPT_RESERVED = "claude_interrupt_reserved"  # after its step, before the line
    CLAUDE_INTERRUPT_SENT = "claude_interrupt_sent"  # after the interrupt line, before its stage
    # The outbox.
    LEASED = "leased"  # after a notification's lease committed, before it is sent
    DELIVERED = "delivered"  # after the event frame was written, before the ack
    ACKED = "acked"  # after the ack committed, before the reply


BEFORE_ENTER = (
    Point.EVIDENCE_SNAPSHOT,
    Point.RESERVED,
    Point.TEXT_TYPED,
    Point.TEXT_INJECTED,
    Point.BEFORE_ENTER,
)
"""The points of a send at which its task may be typed but never submitted."""

SEND_POINTS = (
    *BEFORE_ENTER,
    Point.ENTER_SENT,
    Point.ENTER_RECORDED,
    Point.EVIDENCE_READ,
    Point.ACCEPTED,
    Point.OUTCOME,
    Point.LEASED,
    Point.DELIVERED,
    Point.ACKED,
)
"""Every point a managed send passes, in order (the fault tests and bench visit each)."""


BACKEND_POINTS = (
    Point.BACKEND_THREAD_START,
    Point.BACKEND_THREAD_STARTED,
    Point.BACKEND_THREAD_PERSISTED,
    Point.BACKEND_TURN_SENDING,
    Point.BACKEND_TURN_WRITTEN,
    Point.BACKEND_TURN_ACCEPTED,
    Point.BACKEND_TURN_RUNNING,
    Point.BACKEND_COMPLETED,
)
"""Every point a backend send passes, in order (the backend fault tests visit each)."""

CLAUDE_POINTS = (
    Point.CLAUDE_SPAWN,
    Point.CLAUDE_SPAWNED,
    Point.CLAUDE_WRITTEN,
    Point.CLAUDE_ACCEPTED,
    Point.CLAUDE_RUNNING,
    Point.CLAUDE_RESULT,
)
"""Every point a Claude headless send passes, in order (its fault tests visit each)."""

CLAUDE_ANSWER_POINTS = (
    Point.CLAUDE_ANSWER_RESERVED,
    Point.CLAUDE_ANSWER_SENT,
    Point.CLAUDE_ANSWER_RECORDED,
)
"""The points of an answer to a headless Claude, in order (its fault tests visit each)."""

CLAUDE_INTERRUPT_POINTS = (Point.CLAUDE_INTERRUPT_RESERVED, Point.CLAUDE_INTERRUPT_SENT)
"""The points of the owner's cancel of a headless Claude round (its fault tests visit each)."""

ANSWER_POINTS = (
    Point.ANSWER_RESERVED,
    Point.ANSWER_EDITOR,
    Point.ANSWER_TEXT_INJECTED,
    Point.ANSWER_SENT,
    Point.ANSWER_RECORDED,
)
"""The points between an answer's reservation and its postcondition, in order."""


class Action(enum.StrEnum):
    CRASH = "crash"
    RAISE = "raise"
    DELAY = "delay"
    DROP = "drop"


class InjectedFault(Exception):
    """Raised at an armed point whose action is ``raise``."""


@attrs.frozen
class Arm:
    action: Action
    seconds: float = 2.0


def parse(spec: str) -> dict[Point, Arm]:
    """``point:action[:seconds],...`` → armed points; raises ValueError naming a bad part."""
    armed: dict[Point, Arm] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, rest = part.partition(":")
        action, _, seconds = rest.partition(":")
        try:
            point, how = Point(name), Action(action)
        except ValueError:
            raise ValueError(
                f"{ENV}: {part!r} is not point:action; points are "
                f"{', '.join(p.value for p in Point)}; actions crash, raise, delay, drop"
            ) from None
        armed[point] = Arm(how, float(seconds) if seconds else 2.0)
    return armed


_ARMED: dict[Point, Arm] = parse(os.environ.get(ENV, ""))


def arm(spec: str) -> None:
    """Arm points in this process (``point:action[:seconds]``), for in-process tests."""
    _ARMED.update(parse(spec))


def disarm() -> None:
    _ARMED.clear()


FIRED = re.compile(
    r"fault point fired: point=(?P<point>\w+) action=(?P<action>\w+) pid=(?P<pid>\d+)"
)
"""The line a point logs as it fires (`fired_in` reads it back)."""


@attrs.frozen
class Fired:
    """One point that fired, as its log line records it."""

    point: Point
    action: Action
    pid: int


def fired_in(log_text: str) -> list[Fired]:
    """Every point that fired according to a process's log, in order."""
    return [
        Fired(Point(m["point"]), Action(m["action"]), int(m["pid"]))
        for m in FIRED.finditer(log_text)
    ]


def _fired(point: Point, action: Action) -> None:
    """Log `point` firing (`FIRED`) and flush it out before the process may die."""
    log.warning("fault point fired: point=%s action=%s pid=%d", point, action, os.getpid())
    logger: logging.Logger | None = log
    while logger is not None:
        for handler in logger.handlers:
            handler.flush()
        logger = logger.parent if logger.propagate else None


def drops(point: Point) -> bool:
    """Whether the key guarded by ``point`` is to be lost (armed ``drop``; fires once)."""
    arm = _ARMED.get(point)
    if arm is None or arm.action is not Action.DROP:
        return False
    del _ARMED[point]
    _fired(point, arm.action)
    return True


async def reached(point: Point) -> None:
    """Pass ``point``: does nothing unless a test armed it."""
    arm = _ARMED.get(point)
    if arm is None or arm.action is Action.DROP:
        return
    if arm.action is Action.DELAY:
        _fired(point, arm.action)
        await trio.sleep(arm.seconds)
        return
    del _ARMED[point]
    _fired(point, arm.action)
    if arm.action is Action.CRASH:
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFault(f"fault injected at {point}")
