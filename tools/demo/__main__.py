"""`python -m tools.demo` (what `make demo` runs): AKK, a real client and the reference controller.

Environment: AGENT=claude|codex (default claude: the newest pinned version is
installed and driven), DEMO_ATTACH=1|0 (default 1: print the `tmux attach`
command, wait for the person, pace the answers and keep the finished pane up
a moment; 0 runs straight through, for CI), DEMO_DEADLINE=seconds (default 180).
"""

from __future__ import annotations

import os
import signal
import sys

import trio

from akk.qualify.client import AGENTS
from tools.demo.run import Settings, demo
from tools.lab.installer import InstallError


def main() -> int:
    """Run the demo as the environment says; return the exit status."""
    wanted = os.environ.get("AGENT") or "claude"
    agent = next((agent for agent in AGENTS if agent == wanted), None)
    if agent is None:
        print(f"AGENT must be one of {', '.join(AGENTS)}, not {wanted!r}", file=sys.stderr)
        return 2
    attach = os.environ.get("DEMO_ATTACH", "1") != "0"
    deadline = float(os.environ.get("DEMO_DEADLINE") or 180)
    # A plain `kill` unwinds like Ctrl-C: everything started is stopped and removed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return trio.run(demo, Settings(agent, attach, deadline))
    except trio.TooSlowError:
        print(
            f"the demo did not finish within {deadline:g} s (DEMO_DEADLINE); "
            "everything it started is stopped and removed",
            file=sys.stderr,
        )
        return 1
    except InstallError as exc:
        print(f"the client could not be installed:\n{exc}", file=sys.stderr)
        return 1
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        print("\ninterrupted: everything the demo started is stopped and removed", flush=True)
        return 130


def _interrupted(exc: BaseException) -> bool:
    """Whether `exc` is Ctrl-C (or a kill), bare or inside the groups nurseries wrap it in."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_interrupted(inner) for inner in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)


if __name__ == "__main__":
    sys.exit(main())
