"""A tool call's round trip through `akk mcp`, against the same call over the WebSocket.

Starts the newest pinned Codex in the lab (idle, echo scenario) and `akk serve`
watching it, as a process with its own state directory. Then calls `status
{terminal_id}` --calls times each way, alternating so both see the same load:

  direct  this process's `akk.client` controller, over the WebSocket;
  mcp     this process's MCP client session (the SDK's stdio client) to an
          `akk mcp` process, which makes the same call over its WebSocket.

Both controllers have their own credential, so neither supersedes the other.

    .venv/bin/python -m tools.bench_mcp [--calls 500] [--agent codex|claude]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio
from mcp import ClientSession, StdioServerParameters, stdio_client

from akk.client import connect
from akk.mcp.tools import tool_name
from akk.qualify.launcher import launch
from akk.qualify.scenarios import SCENARIOS
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess
from tools.lab.installer import install

WARM_UP = 20


def summary(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"{name:7} n={len(ordered)}  median {1000 * statistics.median(ordered):6.2f} ms  "
        f"p99 {1000 * p99:6.2f} ms  max {1000 * ordered[-1]:6.2f} ms"
    )


async def bench(agent: str, calls: int, scratch: Path) -> tuple[list[float], list[float]]:
    client = clients.newest(agent)  # type: ignore[arg-type]
    await trio.to_thread.run_sync(install, client)
    async with launch(client, SCENARIOS["echo"]) as lab:
        akk = AkkProcess(lab, scratch, "direct", "bridge")
        try:
            await trio.to_thread.run_sync(akk.start)
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "akk", "mcp", "--state-dir", str(akk.state.path)],
                env={"AKK_TOKEN": akk.tokens["bridge"]},
                cwd=os.getcwd(),
            )
            with (scratch / "bridge.err").open("w") as errlog:
                async with (
                    connect(akk.url, akk.tokens["direct"]) as ctl,
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    with trio.fail_after(30):
                        while not (rows := (await ctl.call("list"))["terminals"]):
                            await trio.sleep(0.05)
                    status = {"terminal_id": rows[0]["terminal_id"]}

                    async def direct() -> float:
                        began = time.perf_counter()
                        await ctl.call("status", status)
                        return time.perf_counter() - began

                    async def bridged() -> float:
                        began = time.perf_counter()
                        result = await session.call_tool(tool_name("status"), status)
                        elapsed = time.perf_counter() - began
                        assert not result.is_error, result.content
                        return elapsed

                    ways = [direct, bridged]
                    timings: dict[str, list[float]] = {"direct": [], "bridged": []}
                    for n in range(WARM_UP + calls):
                        for way in ways if n % 2 else reversed(ways):
                            elapsed = await way()
                            if n >= WARM_UP:
                                timings[way.__name__].append(elapsed)
        finally:
            await trio.to_thread.run_sync(akk.stop)
    return timings["direct"], timings["bridged"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--agent", choices=["codex", "claude"], default="codex")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="akk-bench-mcp-") as scratch:
        direct, bridged = trio.run(bench, args.agent, args.calls, Path(scratch))
    print(f"status {{terminal_id}} round trip, {clients.newest(args.agent).name} idle pane")
    print(summary("direct", direct))
    print(summary("mcp", bridged))
    overhead = statistics.median(bridged) - statistics.median(direct)
    print(f"the bridge adds {1000 * overhead:.2f} ms at the median")


if __name__ == "__main__":
    main()
