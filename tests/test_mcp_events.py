"""The bridge's event buffer: at least once, bounded, and the wait on it (autojump clock)."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from akk.mcp.events import EventBuffer


def event(n: int, summary: str = "") -> dict[str, Any]:
    return {"event_id": f"evt_{n}", "kind": "done", "turn_id": "turn_1", "summary": summary}


def test_an_event_stays_until_acked_and_a_repeat_is_held_once() -> None:
    buffer = EventBuffer()
    assert buffer.add(event(1)) and buffer.add(event(2))
    assert not buffer.add(event(1))  # the server's redelivery after a reconnect
    assert not buffer.add({"kind": "done"})  # no event_id: nothing to ack it by
    assert [e["event_id"] for e in buffer.pending(10)] == ["evt_1", "evt_2"]
    assert [e["event_id"] for e in buffer.pending(10)] == ["evt_1", "evt_2"]  # still held
    assert [e["event_id"] for e in buffer.pending(1)] == ["evt_1"]
    buffer.acked("evt_1")
    buffer.acked("evt_404")
    assert [e["event_id"] for e in buffer.pending(10)] == ["evt_2"]
    assert buffer.arrivals == 2 and buffer.dropped == 0


def test_a_full_buffer_drops_the_newest_and_asks_for_a_resync_once_there_is_room() -> None:
    buffer = EventBuffer(max_events=4)
    for n in range(6):
        buffer.add(event(n))
    assert len(buffer) == 4 and buffer.dropped == 2
    assert [e["event_id"] for e in buffer.pending(10)] == [f"evt_{n}" for n in range(4)]
    assert not buffer.resync_due  # no room yet: a resend would be dropped again
    buffer.acked("evt_0")
    assert not buffer.resync_due
    buffer.acked("evt_1")
    assert buffer.resync_due
    buffer.resynced()
    assert buffer.dropped == 0 and not buffer.resync_due
    assert buffer.add(event(4))  # the server's resend now fits


def test_the_byte_bound_holds_for_any_event_size() -> None:
    big = event(1, "x" * 1000)
    size = len(json.dumps(big))
    buffer = EventBuffer(max_bytes=2 * size + 10)
    assert buffer.add(big) and buffer.add(event(2, "x" * 1000))
    assert not buffer.add(event(3, "x" * 1000))
    assert not buffer.add(event(4, "y" * 10_000))  # one event larger than the bound
    assert buffer.dropped == 2 and len(buffer) == 2
    buffer.acked("evt_1")
    buffer.acked("evt_2")
    assert buffer.add(event(3, "x" * 1000))


async def test_wait_returns_held_events_at_once_and_otherwise_waits_for_the_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    buffer = EventBuffer()
    start = trio.current_time()
    assert await buffer.wait(10, timeout=30) == []
    assert trio.current_time() - start == 30  # waited the whole timeout for nothing
    buffer.add(event(1))
    start = trio.current_time()
    assert [e["event_id"] for e in await buffer.wait(10, timeout=30)] == ["evt_1"]
    assert trio.current_time() == start  # held already: no wait
    buffer.acked("evt_1")
    got: list[dict[str, Any]] = []

    async def waiter() -> None:
        got.extend(await buffer.wait(10, timeout=30))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(5)
        assert got == []
        buffer.add(event(2))
    assert [e["event_id"] for e in got] == ["evt_2"]
    assert trio.current_time() - start == 5  # woken by the arrival, not the timeout


async def test_arrived_misses_no_arrival(autojump_clock: trio.testing.MockClock) -> None:
    buffer = EventBuffer()
    buffer.add(event(1))
    with trio.move_on_after(1):
        await buffer.arrived(0)  # one arrived already: returns at once
        assert buffer.arrivals == 1
    with trio.move_on_after(1) as idle:
        await buffer.arrived(1)
    assert idle.cancelled_caught  # nothing new: it waits
    buffer.add(event(1))  # a repeat is no arrival
    assert buffer.arrivals == 1
