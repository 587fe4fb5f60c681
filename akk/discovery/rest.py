"""Whether processes are at rest: none of their threads runs or waits for a CPU.

A screen that stood still proves little on a loaded machine: a starved client
shows a frame half written for as long as it gets no CPU, and so does a tmux
server that has not read the rest of it yet. Read from /proc, with no signal
sent and nothing changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

RESTING_STATES = frozenset("SIZ")
"""The states (``/proc/PID/stat``) of a thread that is not about to draw: sleeping, idle, gone."""


def at_rest(pids: Iterable[int], *, descendants: bool = True) -> bool:
    """Whether every thread of these processes (and, with ``descendants``, of all their
    descendants) sleeps.

    A thread that runs, waits for a CPU (``R``), for the disk (``D``) or is
    stopped may still change the screen. A process that is gone is at rest.
    """
    stack = list(pids)
    while stack:
        pid = stack.pop()
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue  # the process ended meanwhile
        for task in tasks:
            try:
                state = (task / "stat").read_text().rpartition(")")[2].split()[0]
                if descendants:
                    stack += [int(child) for child in (task / "children").read_text().split()]
            except (OSError, IndexError):
                continue  # the thread ended meanwhile
            if state not in RESTING_STATES:
                return False
    return True
