"""The operator console's costs: its page weight, and the server's extra CPU while it is open.

Page weight: every file of the page as served (uncompressed) and gzipped, as a
browser on another host would fetch them (on loopback nothing compresses).

CPU: a private tmux server gets N agent panes (default 50, as `bench_serve_idle`
makes them); --ticking K of them print the time every second, so their screens
change as a working agent's do. A real `akk serve` watches them; its CPU time
is read from /proc for --duration seconds with no console, then for as long
with one console following (logged in through `akk ui`'s link, reading every
push as the page does). The difference is the console's cost.

    .venv/bin/python -m tools.bench_console [--panes 50] [--ticking 10] [--duration 30]

`tools.bench_console_latency` measures the time from a prompt's first paint in
a pane to the form in a real browser.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import trio
from trio_websocket import open_websocket_url

from tools.bench_serve_idle import cpu_seconds, idle_agent_bin, serve_watching, start_panes

STATIC = Path(__file__).resolve().parent.parent / "akk" / "console" / "static"
SETTLE = 5.0
TICK = "while :; do date +%T.%N; sleep 1; done"
"""What a ticking pane's shell runs beside its agent: the time, every second."""


def page_weight() -> tuple[int, int, int]:
    """Files, bytes and gzipped bytes of the page."""
    files = [p for p in STATIC.iterdir() if p.is_file()]
    raw = sum(p.stat().st_size for p in files)
    packed = sum(len(gzip.compress(p.read_bytes(), 9)) for p in files)
    return len(files), raw, packed


def login_cookie(env: dict[str, str]) -> tuple[str, str]:
    """`akk ui`'s link traded for a session: (authority, cookie pair)."""
    done = subprocess.run(
        [sys.executable, "-m", "akk", "ui"], env=env, capture_output=True, text=True, check=True
    )
    link = urllib.parse.urlsplit(done.stdout.strip().splitlines()[-1])
    conn = http.client.HTTPConnection(link.hostname or "", link.port, timeout=10)
    conn.request("GET", f"{link.path}?{link.query}")
    response = conn.getresponse()
    assert response.status == 303, response.status
    return f"{link.hostname}:{link.port}", (response.getheader("Set-Cookie") or "").split(";")[0]


async def follow(authority: str, cookie: str, seconds: float) -> tuple[int, int]:
    """Follow the console for ``seconds``: pushes and bytes received."""
    headers = [(b"Cookie", cookie.encode()), (b"Origin", f"http://{authority}".encode())]
    frames = size = 0
    async with open_websocket_url(f"ws://{authority}/ui/ws", extra_headers=headers) as ws:
        for n, method in enumerate(("hello", "console_follow"), 1):
            await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                                              "params": {}}))  # fmt: skip
            await ws.get_message()
        with trio.move_on_after(seconds):
            while True:
                frame = await ws.get_message()
                frames, size = frames + 1, size + len(frame)
    return frames, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panes", type=int, default=50)
    parser.add_argument("--ticking", type=int, default=10, help="panes that print every second")
    parser.add_argument("--duration", type=float, default=30.0)
    args = parser.parse_args()
    files, raw, packed = page_weight()
    print(f"page: {files} files, {raw:,} bytes ({packed:,} bytes gzipped)")
    root = Path(tempfile.mkdtemp(prefix="akk-bench-console-"))
    sock = str(root / "tmux.sock")
    env = {**os.environ, "AKK_STATE_DIR": str(root / "state")}
    serve = None
    try:
        start_panes(sock, idle_agent_bin(root), args.panes, args.ticking, TICK)
        serve = serve_watching(sock, env, args.panes)
        time.sleep(SETTLE)  # start-up (first captures, output clients attaching) is not steady
        before = cpu_seconds(serve.pid)
        began = time.monotonic()
        time.sleep(args.duration)
        alone = (cpu_seconds(serve.pid) - before) / (time.monotonic() - began)
        authority, cookie = login_cookie(env)
        before, began = cpu_seconds(serve.pid), time.monotonic()
        frames, size = trio.run(follow, authority, cookie, args.duration)
        watched = (cpu_seconds(serve.pid) - before) / (time.monotonic() - began)
        what = f"{args.panes} agent panes ({args.ticking} printing every second)"
        print(f"akk serve watching {what}, {args.duration:.0f} s each:")
        print(f"  without a console: CPU {100 * alone:.2f}% of one core")
        print(f"  with one console:  CPU {100 * watched:.2f}% of one core "
              f"(+{100 * (watched - alone):.2f} points)")  # fmt: skip
        print(f"  pushes {frames / args.duration:.1f}/s, {size / args.duration / 1024:.1f} KiB/s")
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGINT)
            serve.wait(10)
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
