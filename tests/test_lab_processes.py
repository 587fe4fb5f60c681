"""The lab names a backend's process by its parent, never by a command line its forks share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from akk.discovery.process import children, read_process
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
