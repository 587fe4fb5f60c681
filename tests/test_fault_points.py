"""A fired fault point logs exactly which it was, and `AkkProcess.died_at` tells its crash apart.

Each case runs a real child process that passes one point under an armed
``AKK_FAULT`` and logs as `akk serve` does; the check is the one every fault
lab test and tools/bench_turns.py apply to a dead server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from akk import faults
from akk.faults import Point
from tools.lab.akk_runner import AkkProcess

_CHILD = """
import logging, sys, trio
from akk import faults
logging.basicConfig(level="WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
trio.run(faults.reached, faults.Point(sys.argv[1]))
"""


def _pass(armed: str, point: Point) -> tuple[int, int, str]:
    """Run a child armed with `armed` that passes `point`: its status, pid and log."""
    env = {**os.environ, faults.ENV: armed}
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, point.value], env=env, stderr=subprocess.PIPE, text=True
    ) as child:
        _, log = child.communicate(timeout=60)
    return child.returncode, child.pid, log


def test_a_crash_is_known_by_its_signal_its_point_and_its_pid() -> None:
    code, pid, log = _pass(f"{Point.TEXT_TYPED}:crash", Point.TEXT_TYPED)
    assert code == -signal.SIGKILL
    assert faults.fired_in(log) == [faults.Fired(Point.TEXT_TYPED, faults.Action.CRASH, pid)]
    assert AkkProcess.death_mismatch(Point.TEXT_TYPED, code, pid, log) is None
    # The wrong point, or another process's line, is no proof.
    wrong = AkkProcess.death_mismatch(Point.ENTER_SENT, code, pid, log)
    assert wrong == "it died at text_typed, not at enter_sent"
    assert "no crash point fired" in str(AkkProcess.death_mismatch(Point.TEXT_TYPED, code, 1, log))


def test_an_end_that_is_not_the_armed_crash_is_refused() -> None:
    # Armed, but the point is never reached: the process ends normally.
    code, pid, log = _pass(f"{Point.TEXT_TYPED}:crash", Point.ENTER_SENT)
    assert (code, faults.fired_in(log)) == (0, [])
    assert "status 0, not by SIGKILL" in str(
        AkkProcess.death_mismatch(Point.TEXT_TYPED, code, pid, log)
    )
    # A point that raises ends it non-zero, which is no crash either.
    code, pid, log = _pass(f"{Point.TEXT_TYPED}:raise", Point.TEXT_TYPED)
    assert code == 1 and faults.fired_in(log)[0].action is faults.Action.RAISE
    assert "status 1" in str(AkkProcess.death_mismatch(Point.TEXT_TYPED, code, pid, log))
    # SIGKILL from outside, with no point fired.
    with subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE) as child:
        child.kill()
    assert "no crash point fired" in str(
        AkkProcess.death_mismatch(Point.TEXT_TYPED, child.returncode, child.pid, "")
    )
