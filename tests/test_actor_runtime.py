"""Actor runtime: mailboxes, tell/ask, deadlines, ranks, crashes, graceful stop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from akk.runtime import (
    Actor,
    ActorCrashed,
    ActorRef,
    ActorStopped,
    AskTimeout,
    Incarnation,
    MailboxFull,
    Rank,
    RankViolation,
    StopActor,
    current_actor,
)


class Boom(Exception):
    """A scheduled failure inside a handler."""


class Recorder(Actor):
    """Records every message; replies with the count; 'crash' raises, 'stop' stops."""

    rank = Rank.STORE

    def __init__(self) -> None:
        self.received: list[object] = []
        self.stopped_calls = 0

    async def stopped(self) -> None:
        self.stopped_calls += 1

    async def receive(self, message: object) -> object:
        self.received.append(message)
        if message == "crash":
            raise Boom("handler failed")
        if message == "stop":
            raise StopActor(reply="bye")
        if message == "whoami":
            return current_actor()
        return len(self.received)


class Gate(Actor):
    """Blocks on 'wait' until the test opens the gate."""

    rank = Rank.TERMINAL
    mailbox_size = 2

    def __init__(self) -> None:
        self.opened = trio.Event()
        self.received: list[object] = []

    async def receive(self, message: object) -> object:
        self.received.append(message)
        if message == "wait":
            await self.opened.wait()
            return "opened"
        return message


class TurnRecorder(Recorder):
    rank = Rank.TURN


class DestinationRecorder(Recorder):
    rank = Rank.DESTINATION


class Asker(Actor):
    """A Turn-rank actor that asks whatever ref it is given."""

    rank = Rank.TURN

    async def receive(self, message: object) -> object:
        assert isinstance(message, ActorRef)
        try:
            return await message.ask("hello", timeout=1)
        except RankViolation as exc:
            return exc


def ref_for(actor: Actor, name: str = "a") -> ActorRef:
    return ActorRef(name, type(actor).rank, mailbox_size=type(actor).mailbox_size)


@asynccontextmanager
async def running(actor: Actor, name: str = "a") -> AsyncIterator[ActorRef]:
    """Run one incarnation of `actor` for the duration of the block."""
    ref = ref_for(actor, name)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Incarnation(ref, actor).run)
        yield ref
        nursery.cancel_scope.cancel()


async def test_tell_then_ask_sees_messages_in_order() -> None:
    actor = Recorder()
    with trio.fail_after(5):
        async with running(actor) as ref:
            ref.tell("one")
            ref.tell("two")
            assert await ref.ask("three", timeout=1) == 3
    assert actor.received == ["one", "two", "three"]


async def test_current_actor_is_the_running_actors_ref() -> None:
    assert current_actor() is None
    with trio.fail_after(5):
        async with running(Recorder()) as ref:
            assert await ref.ask("whoami", timeout=1) is ref


async def test_full_mailbox_refuses_tell_with_reason() -> None:
    gate = Gate()
    with trio.fail_after(5):
        async with running(gate) as ref:
            ref.tell("wait")
            await trio.testing.wait_all_tasks_blocked()
            ref.tell("x")
            ref.tell("y")
            with pytest.raises(MailboxFull, match="full \\(2 messages\\)") as info:
                ref.tell("z")
            assert info.value.reason == "mailbox_full"
            assert ref.pending == 2
            gate.opened.set()
            assert await ref.ask("after", timeout=1) == "after"
    assert gate.received == ["wait", "x", "y", "after"]


async def test_ask_times_out_after_delivery(autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(60):
        async with running(Gate()) as ref:
            start = trio.current_time()
            with pytest.raises(AskTimeout, match="outcome is unknown") as info:
                await ref.ask("wait", timeout=3)
            assert trio.current_time() - start == 3
            assert info.value.delivered
            assert isinstance(info.value, trio.TooSlowError)


async def test_ask_times_out_before_delivery_when_mailbox_stays_full(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(60):
        async with running(Gate()) as ref:
            ref.tell("wait")
            await trio.testing.wait_all_tasks_blocked()
            ref.tell("x")
            ref.tell("y")
            with pytest.raises(AskTimeout, match="safe to retry") as info:
                await ref.ask("never", timeout=2)
            assert not info.value.delivered
            assert ref.pending == 2


async def test_ask_waits_for_mailbox_space_within_deadline() -> None:
    gate = Gate()
    with trio.fail_after(5):
        async with running(gate) as ref, trio.open_nursery() as nursery:
            ref.tell("wait")
            await trio.testing.wait_all_tasks_blocked()
            ref.tell("x")
            ref.tell("y")
            replies: list[object] = []

            async def late_ask() -> None:
                replies.append(await ref.ask("late", timeout=5))

            nursery.start_soon(late_ask)
            await trio.testing.wait_all_tasks_blocked()
            assert ref.pending == 2
            gate.opened.set()
        assert replies == ["late"]


@pytest.mark.parametrize("target_type", [TurnRecorder, DestinationRecorder])
async def test_ask_to_equal_or_higher_rank_is_refused_before_enqueue(
    target_type: type[Recorder],
) -> None:
    target_actor = target_type()
    target = ref_for(target_actor, "target")
    with trio.fail_after(5):
        # The target does not run yet: an enqueued message would sit in its mailbox.
        async with running(Asker(), "asker") as asker:
            refusal = await asker.ask(target, timeout=1)
            assert isinstance(refusal, RankViolation)
            assert "may not ask" in str(refusal)
            assert refusal.reason == "rank_violation"
            assert target.pending == 0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Incarnation(target, target_actor).run)
            assert await target.ask("probe", timeout=1) == 1
            nursery.cancel_scope.cancel()
    assert target_actor.received == ["probe"]


async def test_ask_to_lower_rank_and_from_outside_actors_is_allowed() -> None:
    store_actor = Recorder()
    with trio.fail_after(5):
        async with running(store_actor, "store") as store, running(Asker(), "asker") as asker:
            assert await asker.ask(store, timeout=1) == 1
            # Plain code (no actor) may ask any rank, even the highest.
            async with running(DestinationRecorder(), "dest") as dest:
                assert await dest.ask("hi", timeout=1) == 1
    assert store_actor.received == ["hello"]


async def test_crash_fails_only_the_message_in_flight() -> None:
    first = Recorder()
    ref = ref_for(first)
    crashed: list[BaseException] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def ask_crash() -> None:
                try:
                    await ref.ask("crash", timeout=1)
                except ActorCrashed as exc:
                    crashed.append(exc)

            nursery.start_soon(ask_crash)
            await trio.testing.wait_all_tasks_blocked()
            ref.tell("kept")
            with pytest.raises(Boom):
                await Incarnation(ref, first).run()
        assert len(crashed) == 1
        assert "Boom: handler failed" in str(crashed[0])
        assert first.stopped_calls == 1
        assert ref.pending == 1
        second = Recorder()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Incarnation(ref, second).run)
            assert await ref.ask("next", timeout=1) == 2
            nursery.cancel_scope.cancel()
    assert second.received == ["kept", "next"]


async def test_stop_actor_replies_and_ends_normally() -> None:
    actor = Recorder()
    ref = ref_for(actor)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Incarnation(ref, actor).run)
            assert await ref.ask("stop", timeout=1) == "bye"
        ref.tell("left over")
    assert ref.pending == 1
    assert actor.stopped_calls == 1


async def test_graceful_stop_finishes_the_message_in_flight() -> None:
    gate = Gate()
    ref = ref_for(gate)
    incarnation = Incarnation(ref, gate, shutdown_timeout=10)
    replies: list[object] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(incarnation.run)

            async def ask_wait() -> None:
                replies.append(await ref.ask("wait", timeout=5))

            nursery.start_soon(ask_wait)
            await trio.testing.wait_all_tasks_blocked()
            ref.tell("queued")
            incarnation.stop()
            await trio.testing.wait_all_tasks_blocked()
            gate.opened.set()
    assert replies == ["opened"]
    assert gate.received == ["wait"]
    assert ref.pending == 1


async def test_stop_cancels_after_shutdown_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = Gate()
    ref = ref_for(gate)
    incarnation = Incarnation(ref, gate, shutdown_timeout=2)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(incarnation.run)
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()

            async def stop_soon() -> None:
                await trio.testing.wait_all_tasks_blocked()
                incarnation.stop()

            nursery.start_soon(stop_soon)
            with pytest.raises(ActorStopped, match="partly handled"):
                await ref.ask("wait", timeout=30)
            assert trio.current_time() - start == 2


async def test_closed_ref_fails_pending_askers_and_refuses_tells() -> None:
    ref = ActorRef("gone", Rank.STORE, mailbox_size=4)
    outcomes: list[BaseException] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def ask_pending() -> None:
                try:
                    await ref.ask("hello", timeout=5)
                except ActorStopped as exc:
                    outcomes.append(exc)

            nursery.start_soon(ask_pending)
            await trio.testing.wait_all_tasks_blocked()
            assert ref.pending == 1
            ref.close()
    assert len(outcomes) == 1
    assert ref.closed
    with pytest.raises(ActorStopped, match="stopped for good"):
        ref.tell("late")
    with pytest.raises(ActorStopped):
        await ref.ask("late", timeout=1)


def test_mailbox_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="mailbox_size"):
        ActorRef("bad", Rank.STORE, mailbox_size=0)
