"""Idle cost of `akk serve` watching N idle agent panes: CPU seconds and RSS.

A private tmux server gets N panes (default 200, ten windows per session).
Each prints a captured Claude idle screen from fixtures/ and then becomes a
process named `claude` (a copy of `sleep` under that name), so the watcher
discovers N agent terminals and runs a TerminalActor for each; their version
is unprovable, so they bind no profile, which idle cost does not depend on.
Then a real `akk serve` subprocess watches them for --duration seconds, and
its CPU time, RSS and descriptors are read from /proc, with the output
clients it attached (tmux processes of their own) and the tmux server's CPU.

--flood K makes the first K panes print without pause instead (`seq`, a new
line each time, so every capture differs): the cost of a pane that floods.

    .venv/bin/python -m tools.bench_serve_idle [--panes 200] [--duration 60] [--flood 0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures/claude/2.1.263/echo-idle.ansi"
SETTLE = 5.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def idle_agent_bin(root: Path) -> Path:
    """A new ``root/bin`` whose `claude` is `sleep`: the agent process a pane's watcher finds."""
    bindir = root / "bin"
    bindir.mkdir()
    sleep = shutil.which("sleep")
    assert sleep is not None
    shutil.copy(sleep, bindir / "claude")
    return bindir


FLOOD = "exec seq 999999999999"
"""What a flooding pane's shell runs beside its agent: a new line each time, without pause."""


def start_panes(sock: str, bindir: Path, panes: int, busy: int, doing: str = FLOOD) -> None:
    """``panes`` agent panes, ten windows per session; the first ``busy`` run ``doing``
    (a shell command) beside their agent, the others show an idle screen."""
    idle = f"cat {FIXTURE}; exec {bindir / 'claude'} 100000"
    # The agent stays in the pane's process tree (the watcher finds it below the pane).
    working = f"{bindir / 'claude'} 100000 & {doing}"
    for n in range(panes):
        command = working if n < busy else idle
        session = f"s{n // 10}"
        if n % 10 == 0:
            args = ["new-session", "-d", "-s", session, "-x", "120", "-y", "40"]
        else:
            args = ["new-window", "-d", "-t", session]
        subprocess.run(["tmux", "-S", sock, "-f", os.devnull, *args, command], check=True)


def pss_kib(pid: int) -> int:
    """Proportional set size: shared pages (the tmux binary, libc) split among their users."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise RuntimeError("no Pss")


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def output_clients(sock: str) -> list[int]:
    """Pids of the tmux output clients attached (control clients with pause-after)."""
    listed = subprocess.run(
        ["tmux", "-S", sock, "list-clients", "-F", "#{client_pid} #{client_flags}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [int(line.split()[0]) for line in listed.splitlines() if "pause-after" in line]


def list_terminals(env: dict[str, str]) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "akk", "list", "--json"], env=env, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    terminals: list[dict[str, object]] = json.loads(done.stdout)["terminals"]
    return terminals


def serve_watching(sock: str, env: dict[str, str], panes: int) -> subprocess.Popen[str]:
    """A real `akk serve` watching the tmux server at ``sock``, once it lists ``panes``
    terminals (the caller stops it)."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "akk", "serve", "--port", "0", "--tmux-socket", sock,
         "--log-level", "WARNING"],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert serve.stdout is not None
    serve.stdout.readline()
    deadline = time.monotonic() + 60
    while len(list_terminals(env)) < panes:
        if time.monotonic() > deadline:
            serve.send_signal(signal.SIGINT)
            raise SystemExit(f"akk serve did not find {panes} terminals")
        time.sleep(0.2)
    return serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panes", type=int, default=200)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--flood", type=int, default=0, help="panes that print without pause")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="akk-bench-"))
    sock = str(root / "tmux.sock")
    bindir = idle_agent_bin(root)
    env = {**os.environ, "AKK_STATE_DIR": str(root / "state")}
    serve = None
    try:
        start_panes(sock, bindir, args.panes, args.flood)
        serve = serve_watching(sock, env, args.panes)
        time.sleep(SETTLE)  # start-up (first captures, output clients attaching) is not idle
        tmux_pid = int(
            subprocess.run(
                ["tmux", "-S", sock, "display", "-p", "#{pid}"], capture_output=True,
                text=True, check=True,
            ).stdout
        )  # fmt: skip
        serve_cpu, tmux_cpu = cpu_seconds(serve.pid), cpu_seconds(tmux_pid)
        started = time.monotonic()
        time.sleep(args.duration)
        used = cpu_seconds(serve.pid) - serve_cpu
        tmux_used = cpu_seconds(tmux_pid) - tmux_cpu
        elapsed = time.monotonic() - started
        clients = output_clients(sock)
        what = (
            f"{args.panes} agent panes ({args.flood} flooding)"
            if args.flood
            else (f"{args.panes} idle agent panes")
        )
        print(f"akk serve watching {what} for {elapsed:.0f} s:")
        print(f"  CPU {used:.2f} s ({100 * used / elapsed:.2f}% of one core)")
        print(f"  RSS {rss_kib(serve.pid) / 1024:.1f} MiB, {descriptors(serve.pid)} descriptors")
        print(
            f"  output clients: {len(clients)}, RSS "
            f"{sum(rss_kib(pid) for pid in clients) / 1024:.1f} MiB together, PSS "
            f"{sum(pss_kib(pid) for pid in clients) / 1024:.1f} MiB"
        )
        print(f"  tmux server CPU meanwhile {tmux_used:.2f} s ({100 * tmux_used / elapsed:.1f}%)")
        print(f"  terminals listed: {len(list_terminals(env))}")
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGINT)
            serve.wait(10)
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
