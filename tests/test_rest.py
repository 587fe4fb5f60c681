"""`at_rest`: whether processes, and their descendants, have a thread that runs."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from akk.discovery.rest import at_rest


async def test_at_rest_sees_a_running_descendant_and_a_sleeping_tree() -> None:
    # Each shell waits for its child: the loop always runs or waits for a CPU.
    spinning = await trio.lowlevel.open_process(
        ["sh", "-c", f"{sys.executable} -c 'while True: pass' & wait"]
    )
    sleeping = await trio.lowlevel.open_process(["sh", "-c", "sleep 60 & wait"])
    try:
        with trio.fail_after(10):
            while not (_children(sleeping.pid) and at_rest([sleeping.pid])):
                await trio.sleep(0.01)
            while not _children(spinning.pid):
                await trio.sleep(0.01)
        assert not any(at_rest([spinning.pid]) for _ in range(20))
        # The shell itself only waits: its own threads are at rest.
        assert at_rest([spinning.pid], descendants=False)
    finally:
        for process in (spinning, sleeping):
            for child in _children(process.pid):
                os.kill(child, signal.SIGKILL)
            process.kill()
            await process.wait()
    assert at_rest([spinning.pid, sleeping.pid])  # gone: nothing left to draw


def test_a_process_that_ends_while_at_rest_reads_it_is_at_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The race: a child is listed, then ends before its threads are read. Its
    # /proc directory is gone by then, whatever a check just before it said.
    gone = max(int(name) for name in os.listdir("/proc") if name.isdigit()) + 1_000_000
    monkeypatch.setattr(Path, "is_dir", lambda self: True)
    assert at_rest([gone])


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []
