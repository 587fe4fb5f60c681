"""The lab's processes: a backend's by its parent, never by a command line its forks share;
a run whose launching process was killed, ended by the next sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import trio

from akk.discovery.process import children, read_process, start_ticks
from akk.qualify.launcher import OWNER_FILE, end_abandoned
from tools.lab.akk_runner import backend_processes

_FORKS = """
import os, sys, time
if os.fork() == 0:
    time.sleep(60)  # a fork that has not exec'd yet: its parent's command line
    os._exit(0)
print("forked", flush=True)
time.sleep(60)
"""


def test_a_backend_s_fork_is_not_counted_as_a_second_backend_process() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _FORKS, "app-server"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # one group: the fork ends with it
    ) as backend:
        try:
            assert backend.stdout is not None and backend.stdout.readline() == "forked\n"
            (fork,) = children(backend.pid)
            forked = read_process(fork)
            assert forked is not None and "app-server" in forked.argv
            assert backend_processes(os.getpid(), "app-server") == [backend.pid]
        finally:
            os.killpg(backend.pid, signal.SIGKILL)


def test_only_a_run_whose_launcher_is_gone_is_ended(tmp_path: Path) -> None:
    def run(name: str, owner: str | None) -> Path:
        root = tmp_path / f"akk-lab-{name}"
        root.mkdir()
        if owner is not None:
            (root / OWNER_FILE).write_text(owner)
        return root

    with subprocess.Popen(["sleep", "60"]) as gone:
        ticks = start_ticks(gone.pid)
        gone.kill()
    me, my_ticks = os.getpid(), start_ticks(os.getpid())
    assert ticks is not None and my_ticks is not None
    dead = run("dead", f"{gone.pid} {ticks}\n")
    reused = run("reused", f"{me} {my_ticks - 1}\n")  # the pid now names another process
    live = run("live", f"{me} {my_ticks}\n")
    unclaimed = run("unclaimed", None)
    half_written = run("half", "")
    other = tmp_path / "not-a-run"
    other.mkdir()
    (other / OWNER_FILE).write_text(f"{gone.pid} {ticks}\n")

    assert trio.run(end_abandoned, tmp_path) == [dead, reused]
    assert not dead.exists() and not reused.exists()
    assert live.exists() and unclaimed.exists() and half_written.exists() and other.exists()
