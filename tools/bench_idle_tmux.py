"""Idle cost of watching tmux panes: CPU, RSS and process spawns of the watching process.

Starts a private tmux server with N panes (default 50, spread over several
sessions) that each print a static screen and sleep, then runs the change
detection loop (`ActivityMonitor` over one control client, capturing every
pane it reports as changed, as a TerminalActor would) for a fixed time.

    .venv/bin/python -m tools.bench_idle_tmux [--duration 60] [--panes 50] [--interval 0.25]

Spawns are counted with an audit hook on subprocess and exec/fork events of
this Python process, so "0 after start-up" is exact, not sampled.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs
import trio

from akk.tmux import ActivityMonitor, capture, open_control_client
from akk.tmux.activity import DEFAULT_INTERVAL

_SPAWN_EVENTS = frozenset(
    {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec"}
)
_SCREEN = "".join(
    f"\x1b[1;3{i % 8}mline {i:02d}\x1b[0m static screen 漢字 {'-' * 60}\n" for i in range(38)
)


@attrs.define
class SpawnCounter:
    """Counts process spawns of this interpreter via `sys.addaudithook`."""

    count: int = 0

    def hook(self, event: str, _args: tuple[object, ...]) -> None:
        if event in _SPAWN_EVENTS:
            self.count += 1


def _ticks(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{key} missing from /proc/self/status")


def _start_server(sock: str, screen: Path, panes: int, per_session: int) -> int:
    """Start the private server with `panes` panes; return the server pid."""
    command = f"cat {screen}; exec sleep 100000"
    for n in range(panes):
        if n % per_session == 0:
            args = ["new-session", "-d", "-s", f"s{n // per_session}", "-x", "120", "-y", "40"]
            if n == 0:
                args = ["-f", "/dev/null", *args]
        else:
            args = ["new-window", "-d", "-t", f"s{n // per_session}"]
        subprocess.run(["tmux", "-S", sock, *args, command], check=True)
    pid = subprocess.run(
        ["tmux", "-S", sock, "display", "-p", "#{pid}"], capture_output=True, text=True, check=True
    )
    return int(pid.stdout)


async def _watch(sock: str, duration: float, interval: float, spawns: SpawnCounter) -> None:
    async with open_control_client(sock) as client:
        monitor = ActivityMonitor(client, interval=interval)
        updates = monitor.updates()
        first = await anext(updates)
        for pane_id in first.changed:
            await capture(client, pane_id)
        server_pid = int((await client.command("display-message", "-p", "#{pid}"))[0])
        client_pid = client._process.pid
        base_spawns = spawns.count
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = usage.ru_utime + usage.ru_stime
        server0, client0 = _ticks(server_pid), _ticks(client_pid)
        polls = captures = 0
        start = time.monotonic()
        with trio.move_on_after(duration):
            async for update in updates:
                polls += 1
                for pane_id in update.changed:
                    await capture(client, pane_id)
                    captures += 1
        elapsed = time.monotonic() - start
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime - cpu0
        await updates.aclose()
        print(f"panes watched            {len(first.panes)}")
        print(f"duration                 {elapsed:.1f} s (poll interval {interval} s)")
        print(f"updates / captures       {polls} / {captures}")
        print(f"watcher CPU              {cpu:.3f} s ({100 * cpu / elapsed:.2f} % of one core)")
        print(f"tmux -C client CPU       {_ticks(client_pid) - client0:.3f} s")
        print(f"tmux server CPU          {_ticks(server_pid) - server0:.3f} s")
        print(f"watcher RSS now / peak   {_rss_kib('VmRSS') / 1024:.1f} / "
              f"{_rss_kib('VmHWM') / 1024:.1f} MiB")  # fmt: skip
        print(f"process spawns           {spawns.count - base_spawns} after start-up "
              f"({base_spawns} during start-up)")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run the benchmark, always kill the private server."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds to watch")
    parser.add_argument("--panes", type=int, default=50)
    parser.add_argument("--per-session", type=int, default=10, help="panes per tmux session")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="poll seconds")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="akk-bench-", dir="/tmp")
    sock = os.path.join(root, "s.sock")
    screen = Path(root) / "screen.ansi"
    screen.write_text(_SCREEN)
    spawns = SpawnCounter()
    sys.addaudithook(spawns.hook)
    try:
        _start_server(sock, screen, args.panes, args.per_session)
        trio.run(_watch, sock, args.duration, args.interval, spawns)
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
