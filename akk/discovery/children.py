"""The processes AKK starts itself (app-servers, headless Claude): end them, always reap.

Each child runs in its own session, so its pid is also its process group id and
whatever it spawns (a Bash tool's shell) is in that group. `stop` is the one ladder
every owner uses to end a child: close its input, wait, SIGTERM the group, wait,
SIGKILL the group, wait, reap, then kill what is left in the group. `end_orphan`
ends a child an earlier AKK process started (not ours to reap). `rss_bytes` is the
memory a child holds now.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Literal

import attrs
import trio

from akk.discovery.process import PROC, start_ticks

How = Literal["exited", "terminated", "killed", "unreaped"]


@attrs.frozen
class Ladder:
    """How long `stop` waits on each rung before the next, harder one."""

    close_seconds: float = 5.0
    """After the input closes (the child's cue to exit), before SIGTERM."""
    term_seconds: float = 2.0
    """After SIGTERM, before SIGKILL."""
    kill_seconds: float = 5.0
    """After SIGKILL, before giving up on the reap (reported, never hidden)."""


@attrs.frozen
class Stopped:
    """How a child ended under `stop`."""

    how: How
    """exited: by itself (after its input closed, or before); terminated: after SIGTERM;
    killed: after SIGKILL; unreaped: still there after SIGKILL (needs a person)."""
    returncode: int | None
    """Negative: the signal that ended it (-9 for SIGKILL)."""
    reaped: bool
    """The process was waited for and its pid no longer names it."""
    stragglers: tuple[int, ...]
    """Processes left in the child's group after it ended (killed)."""


async def stop(
    process: trio.Process,
    ticks: int | None,
    hang_up: Callable[[], Awaitable[None]],
    ladder: Ladder,
) -> Stopped:
    """End `process` (started with `start_new_session=True`) and reap it; shielded.

    `hang_up` closes its input; then the ladder's SIGTERM and SIGKILL of its group
    follow, each once the step before had its seconds. `ticks` is its recorded
    start time, so a reused pid is never taken for it. Bounded by the ladder's
    seconds plus about two seconds for stragglers.
    """
    with trio.CancelScope(shield=True):
        await hang_up()
        how: How = "exited"
        steps: tuple[tuple[signal.Signals | None, float], ...] = (
            (None, ladder.close_seconds),
            (signal.SIGTERM, ladder.term_seconds),
            (signal.SIGKILL, ladder.kill_seconds),
        )
        for sig, seconds in steps:
            if process.returncode is not None:
                break
            if sig is not None:
                how = "terminated" if sig == signal.SIGTERM else "killed"
                # Unreaped, the pid (and so the group id) cannot be reused yet.
                signal_group(process.pid, sig)
            with trio.move_on_after(seconds):
                await process.wait()
        now = start_ticks(process.pid)
        gone = now is None or (ticks is not None and now != ticks)
        reaped = process.returncode is not None and gone
        stragglers = await kill_group(process.pid) if reaped else ()
    return Stopped("unreaped" if not reaped else how, process.returncode, reaped, stragglers)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send `sig` to process group `pgid`; a group already gone is no error."""
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def group_members(pgid: int) -> list[int]:
    """Live processes (zombies left out: they are dead already) in process group `pgid`."""
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] != b"Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


async def kill_group(pgid: int) -> tuple[int, ...]:
    """SIGKILL what is left in the (leaderless) group; return who was left."""
    left = tuple(await trio.to_thread.run_sync(group_members, pgid))
    if left:
        # A member still holds the group id, so it cannot name another group.
        signal_group(pgid, signal.SIGKILL)
        # Not our children: init reaps them, so there is nothing to wait on but /proc.
        for _ in range(100):
            if not await trio.to_thread.run_sync(group_members, pgid):
                break
            await trio.sleep(0.02)
    return left


async def end_orphan(pid: int, ticks: int) -> bool:
    """End a child an earlier AKK process started (its pipes died with that process).

    ``ticks`` is its recorded start time: a pid now naming another process is left
    alone. SIGTERM, then SIGKILL, to its process group, each with a bounded wait on
    /proc (it is not our child: init reaps it). Returns whether it is gone.
    """
    for sig, seconds in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        if start_ticks(pid) != ticks:
            return True
        signal_group(pid, sig)
        for _ in range(int(seconds / 0.05)):
            if start_ticks(pid) != ticks:
                break
            await trio.sleep(0.05)
    return start_ticks(pid) != ticks


def rss_bytes(pid: int) -> int | None:
    """The process's resident set size now (None once it is gone)."""
    try:
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None
