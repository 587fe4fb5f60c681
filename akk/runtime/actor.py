"""Actors: Trio tasks with a bounded mailbox, private state, and a rank.

An actor owns its state and handles one message at a time. Others reach it
through an `ActorRef`: `tell` (no reply, never blocks) or `ask` (await the
reply, with a deadline). The mailbox belongs to the ref, not to one run of the
actor, so messages and refs survive restarts.

Typed: an actor is an `Actor[M]` over its message union `M`, and its ref an
`ActorRef[M]`, so `tell` takes only those messages. A message that is asked
subclasses `Ask[R]`, naming its reply type: `ask` returns an `R`, checked by
mypy at every call, and the actor's handler must return one.

Every actor class has a `Rank`. An actor may `ask` only actors of strictly
lower rank; `ask` checks this before enqueueing anything, so no cycle of
waiting actors can form. Upward news travels by `tell`.
"""

from __future__ import annotations

import abc
import contextvars
import enum
import logging
import math
from typing import Any, ClassVar, Generic, cast

import attrs
import trio
from typing_extensions import TypeVar

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorError",
    "ActorRef",
    "ActorStopped",
    "Ask",
    "AskTimeout",
    "Incarnation",
    "MailboxFull",
    "Rank",
    "RankViolation",
    "StopActor",
    "act_as",
    "current_actor",
    "detach_from_actor",
]

logger = logging.getLogger("akk.actors")

Message = TypeVar("Message", default=object)
"""The union of messages one actor takes (``object`` where a ref is not narrowed)."""

Reply = TypeVar("Reply")


class Ask(Generic[Reply]):
    """Base of every message that is asked: its type argument is the type of its reply.

    ``@attrs.frozen class ReadThread(Ask[ThreadFacts])`` makes
    ``await ref.ask(ReadThread(...))`` a ``ThreadFacts`` to mypy; the actor's
    handler for it returns one.
    """

    __slots__ = ()


class Rank(enum.IntEnum):
    """Canonical lock order: an actor may ask only strictly lower ranks."""

    STORE = 10
    TERMINAL = 20
    BACKEND = 21  # beside terminals: a Turn runs on one or the other, neither asks the other
    WATCHER = 25
    TURN = 30
    DESTINATION = 40
    CONNECTION = 50


class ActorError(Exception):
    """Base of every error the actor runtime raises; `reason` is a stable code."""

    reason: ClassVar[str] = "actor_error"


class RankViolation(ActorError):
    """An actor asked an actor of equal or higher rank; nothing was enqueued."""

    reason = "rank_violation"


class MailboxFull(ActorError):
    """The target's bounded mailbox is full; the message was not enqueued."""

    reason = "mailbox_full"


class AskTimeout(trio.TooSlowError, ActorError):
    """No reply arrived before the deadline.

    `delivered` tells whether the message reached the mailbox. If it did, the
    actor may still handle it later; the caller must treat the outcome as
    unknown. If it did not, the message was never seen and is safe to retry.
    """

    reason = "ask_timeout"

    def __init__(self, message: str, *, delivered: bool) -> None:
        super().__init__(message)
        self.delivered = delivered


class ActorCrashed(ActorError):
    """The handler raised while handling this very message; the actor crashed."""

    reason = "actor_crashed"


class ActorStopped(ActorError):
    """The actor stopped before replying, or is gone for good."""

    reason = "actor_stopped"


class StopActor(Exception):
    """Raise from `Actor.receive` to end this incarnation normally.

    The asker of the current message (if any) gets `reply`. A supervisor treats
    this as a normal exit: permanent children restart, transient and temporary
    ones are done.
    """

    def __init__(self, reply: object = None) -> None:
        super().__init__("actor asked to stop")
        self.reply = reply


_CURRENT: contextvars.ContextVar[ActorRef[Any] | None] = contextvars.ContextVar(
    "akk_current_actor", default=None
)


def current_actor() -> ActorRef[Any] | None:
    """Return the ref of the actor whose code is running, or None outside actors."""
    return _CURRENT.get()


def act_as(name: str, rank: Rank) -> None:
    """Run the current task (and the tasks it starts) with ``rank``, as an actor would.

    For the tasks that play an actor's part without a mailbox, such as one
    WebSocket connection (rank CONNECTION): their asks are rank-checked too.
    """
    _CURRENT.set(ActorRef(name, rank, mailbox_size=1))


def detach_from_actor() -> None:
    """Mark the current task as running outside any actor.

    Trio copies context variables into child tasks, so a task spawned on behalf
    of an actor would otherwise inherit its rank. Supervisors call this for
    plain-function children.
    """
    _CURRENT.set(None)


class Actor(abc.ABC, Generic[Message]):
    """One actor's behaviour and private state, over its message union ``Message``.

    Subclasses set `rank` and implement `receive`. State that must outlive a
    crash belongs in the store; rebuild it in `started`.
    """

    rank: ClassVar[Rank]
    mailbox_size: ClassVar[int] = 64

    async def started(self) -> None:
        """Run before the first message of each incarnation (rebuild state here)."""

    async def stopped(self) -> None:
        """Run when an incarnation ends for any reason (release resources here).

        Runs shielded from cancellation, bounded by the shutdown timeout.
        """

    @abc.abstractmethod
    async def receive(self, message: Message) -> object:
        """Handle one message; the return value is the reply to `ask` (an `Ask[R]`'s ``R``)."""


@attrs.define(eq=False)
class _Reply:
    """Where one `ask` waits for its answer."""

    done: trio.Event = attrs.Factory(trio.Event)
    value: object = None
    error: ActorError | None = None

    def succeed(self, value: object) -> None:
        self.value = value
        self.done.set()

    def fail(self, error: ActorError) -> None:
        self.error = error
        self.done.set()


@attrs.frozen
class _Envelope:
    message: Any  # one of its ref's Message union: `tell` and `ask` admitted only those
    reply: _Reply | None


class ActorRef(Generic[Message]):
    """Stable handle to an actor: survives restarts of the actor behind it.

    The bounded mailbox lives here. Messages pending when an incarnation crashes
    stay for the next one; when the ref is closed (the actor is gone for good)
    pending askers get `ActorStopped`.
    """

    def __init__(self, name: str, rank: Rank, *, mailbox_size: int = 64) -> None:
        if mailbox_size < 1:
            raise ValueError(f"mailbox_size must be at least 1, got {mailbox_size}")
        self.name = name
        self.rank = rank
        self.mailbox_size = mailbox_size
        self._send, self._receive = trio.open_memory_channel[_Envelope](mailbox_size)
        self._closed = False

    def __repr__(self) -> str:
        return f"<ActorRef {self.name} rank={self.rank.name}>"

    @property
    def pending(self) -> int:
        """Number of messages waiting in the mailbox (not counting one in flight)."""
        return self._send.statistics().current_buffer_used

    @property
    def closed(self) -> bool:
        """True once the actor is gone for good."""
        return self._closed

    def tell(self, message: Message) -> None:
        """Enqueue `message` without waiting for a reply; never blocks.

        Raises `MailboxFull` when the mailbox is full and `ActorStopped` when
        the actor is gone for good.
        """
        try:
            self._send.send_nowait(_Envelope(message, None))
        except trio.WouldBlock:
            raise MailboxFull(
                f"mailbox of actor {self.name!r} is full ({self.mailbox_size} messages); "
                "the actor is overloaded or stuck: retry later or look at its crash log"
            ) from None
        except trio.ClosedResourceError:
            raise self._stopped_error() from None

    async def ask(self, message: Ask[Reply], *, timeout: float) -> Reply:
        """Send `message` and return the actor's reply, of the type its `Ask` names.

        Raises `RankViolation` at once (nothing enqueued) when called from an
        actor whose rank is not strictly higher than this one's. Waits for
        mailbox space within the deadline. Raises `AskTimeout` on deadline,
        `ActorCrashed` if the handler raised on this message, `ActorStopped` if
        the actor stopped before replying.
        """
        caller = _CURRENT.get()
        if caller is not None and caller.rank <= self.rank:
            raise RankViolation(
                f"actor {caller.name!r} (rank {caller.rank.name}) may not ask "
                f"{self.name!r} (rank {self.rank.name}): ask only strictly lower ranks; "
                "send news upward with tell instead"
            )
        reply = _Reply()
        delivered = False
        with trio.move_on_after(timeout):
            try:
                await self._send.send(_Envelope(message, reply))
            except trio.ClosedResourceError:
                raise self._stopped_error() from None
            delivered = True
            await reply.done.wait()
        if not reply.done.is_set():
            where = "was not handled in time" if delivered else "never reached the mailbox"
            raise AskTimeout(
                f"ask to actor {self.name!r} timed out after {timeout} s; the message {where}"
                + ("; its outcome is unknown" if delivered else "; it is safe to retry"),
                delivered=delivered,
            )
        if reply.error is not None:
            raise reply.error
        # The one place a reply's type is taken on trust: the handler of an Ask[R] returns an R.
        return cast(Reply, reply.value)

    def close(self) -> None:
        """Mark the actor gone for good; pending and future askers get `ActorStopped`.

        Idempotent. Call only when no incarnation is running.
        """
        if self._closed:
            return
        self._closed = True
        self._send.close()
        dropped = 0
        while True:
            try:
                envelope = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            dropped += 1
            if envelope.reply is not None:
                envelope.reply.fail(self._stopped_error())
        self._receive.close()
        if dropped:
            logger.info(
                "actor %s closed with %d pending messages dropped",
                self.name,
                dropped,
                extra={"actor": self.name, "dropped": dropped},
            )

    def _stopped_error(self) -> ActorStopped:
        return ActorStopped(
            f"actor {self.name!r} is stopped for good; look it up again from its supervisor "
            "if it was replaced"
        )

    async def _next(self) -> _Envelope | None:
        """Wait for the next message; None once the mailbox is closed."""
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return None


class Incarnation(Generic[Message]):
    """One run of an actor behind a ref: started, messages, stopped.

    `run` returns when the actor stops normally (`StopActor`, `stop`, or a
    closed ref) and raises the handler's exception when the actor crashes. A
    crash fails only the message in flight; the rest stay in the mailbox.
    """

    def __init__(
        self, ref: ActorRef[Message], actor: Actor[Message], *, shutdown_timeout: float = 5.0
    ) -> None:
        self.ref = ref
        self.actor = actor
        self.shutdown_timeout = shutdown_timeout
        self._scope = trio.CancelScope()
        self._idle: trio.CancelScope | None = None
        self._stopping = False
        self._cleanup_deadline = math.inf

    @property
    def stopping(self) -> bool:
        """True once it ends normally (`StopActor` or `stop`): it reads no further message."""
        return self._stopping

    def stop(self) -> None:
        """Stop gracefully: finish the message in flight, then end.

        After `shutdown_timeout` seconds the incarnation is cancelled; an asker
        whose message was interrupted gets `ActorStopped`.
        """
        if self._stopping:
            return
        self._stopping = True
        self._cleanup_deadline = trio.current_time() + self.shutdown_timeout
        self._scope.deadline = self._cleanup_deadline
        if self._idle is not None:
            self._idle.cancel()

    async def run(self) -> None:
        """Run until stopped or crashed; see the class docstring."""
        token = _CURRENT.set(self.ref)
        try:
            with self._scope:
                try:
                    await self.actor.started()
                    await self._loop()
                finally:
                    deadline = self._cleanup_deadline
                    if deadline == math.inf:
                        deadline = trio.current_time() + self.shutdown_timeout
                    with trio.CancelScope(shield=True, deadline=deadline):
                        await self.actor.stopped()
        finally:
            _CURRENT.reset(token)

    async def _loop(self) -> None:
        while not self._stopping:
            with trio.CancelScope() as idle:
                self._idle = idle
                envelope = await self.ref._next()
            self._idle = None
            if idle.cancelled_caught or envelope is None:
                return
            await self._handle(envelope)

    async def _handle(self, envelope: _Envelope) -> None:
        reply = envelope.reply
        try:
            result = await self.actor.receive(envelope.message)
        except StopActor as stop:
            self._stopping = True
            if reply is not None:
                reply.succeed(stop.reply)
        except Exception as exc:
            if reply is not None:
                reply.fail(
                    ActorCrashed(
                        f"actor {self.ref.name!r} crashed handling this message "
                        f"({type(exc).__name__}: {exc}); its supervisor decides on a restart"
                    )
                )
            raise
        except BaseException:
            if reply is not None:
                reply.fail(
                    ActorStopped(
                        f"actor {self.ref.name!r} was stopped while handling this message; "
                        "it may have been partly handled"
                    )
                )
            raise
        else:
            if reply is not None:
                reply.succeed(result)
