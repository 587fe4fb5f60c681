"""`python -m tools.demo` (what `make demo` runs): AKK, a real client and a controller.

Environment: AGENT=claude|codex (default claude: the newest pinned version is
installed and driven), DEMO_CONTROLLER=reference|claude (default reference:
AKK's reference controller answers; claude: a real Claude Code, driven by its
scripted model, uses `akk mcp`'s tools to drive a Codex pane, so AGENT is
codex), DEMO_ATTACH=1|0 (default 1: print the `tmux attach` command, wait for
the person, pace the answers and keep the finished pane up a moment; 0 runs
straight through, for CI), DEMO_DEADLINE=seconds (default 180).
"""

from __future__ import annotations

import os
import signal
import sys

import trio

from akk.qualify.client import AGENTS
from tools.demo import agent_controller
from tools.demo.run import Settings, demo
from tools.lab.installer import InstallError

CONTROLLERS = ("reference", "claude")
"""Who answers the pane: AKK's reference controller, or a Claude Code through `akk mcp`."""


def main() -> int:
    """Run the demo as the environment says; return the exit status."""
    controller = os.environ.get("DEMO_CONTROLLER") or "reference"
    if controller not in CONTROLLERS:
        print(
            f"DEMO_CONTROLLER must be one of {', '.join(CONTROLLERS)}, not {controller!r}",
            file=sys.stderr,
        )
        return 2
    by_agent = controller == "claude"
    wanted = os.environ.get("AGENT") or ("codex" if by_agent else "claude")
    if by_agent and wanted != "codex":
        print(
            "DEMO_CONTROLLER=claude drives a Codex pane: leave AGENT unset or codex",
            file=sys.stderr,
        )
        return 2
    agent = next((agent for agent in AGENTS if agent == wanted), None)
    if agent is None:
        print(f"AGENT must be one of {', '.join(AGENTS)}, not {wanted!r}", file=sys.stderr)
        return 2
    attach = os.environ.get("DEMO_ATTACH", "1") != "0"
    deadline = float(os.environ.get("DEMO_DEADLINE") or 180)
    # A plain `kill` unwinds like Ctrl-C: everything started is stopped and removed. Ctrl-C
    # is set too: a shell that starts the demo as a background job hands it SIGINT ignored.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        run = agent_controller.demo if by_agent else demo
        return trio.run(run, Settings(agent, attach, deadline))
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
