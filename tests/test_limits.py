"""A hostile local process or controller cannot stop `akk serve` or make it hold unbounded memory.

Each test runs a real `akk serve` process under `ulimit -n 1024` and attacks it
over loopback, then checks that a legitimate controller is still served.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio
from trio_websocket import ConnectionClosed, open_websocket_url

from akk.client import connect
from akk.config import EndpointLimits, ServiceConfig
from akk.server.connections import NOT_READING
from akk.service import run_service
from akk.store.location import StateDir
from tools.lab.akk_runner import mint_offline

DESCRIPTOR_LIMIT = 1024
FLOOD_FRAMES = 20
"""Frames each non-reading controller of the multibyte test sends."""
BURST = 400
"""Controllers of the burst test, each with its own credential (six times the handshake slots)."""
CREDENTIALS = 512
"""Controller credentials minted: one for each connection the cap test holds, as each says
hello (a controller's newest hello closes its older connections)."""


@attrs.frozen
class Served:
    proc: subprocess.Popen[str]
    url: str
    state: StateDir
    operator: str
    controllers: dict[str, str]

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def open_descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTOR_LIMIT, DESCRIPTOR_LIMIT))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """`akk serve --port 0` with at most 1024 descriptors, watching no real tmux server."""
    state = StateDir(tmp_path / "akk")
    controllers = mint_offline(state, *(f"bot-{i}" for i in range(CREDENTIALS)))
    env = {**os.environ, "TMUX_TMPDIR": str(tmp_path), "AKK_STATE_DIR": str(state.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "akk", "serve", "--port", "0", "--log-level", "WARNING"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limit_descriptors,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on" in line, line + (proc.stderr.read() if proc.stderr else "")
        yield Served(proc, line.split()[4], state, state.token(), controllers)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            raise


def _raise_own_descriptor_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, needed), hard))


async def _serves_a_controller(served: Served, token: str) -> None:
    async with connect(served.url, token) as ctl:
        assert "terminals" in await ctl.call("list")


async def test_stalled_handshakes_cannot_exhaust_descriptors(served: Served) -> None:
    """1,100 connections that never finish (or never start) their upgrade."""
    _raise_own_descriptor_limit(4096)
    port = int(served.url.rsplit(":", 1)[1].split("/")[0])
    attackers: list[socket.socket] = []
    try:
        for i in range(1100):
            sock = socket.create_connection(("127.0.0.1", port))
            if i % 2:
                # Half start an upgrade and stall mid-headers (slowloris).
                sock.sendall(b"GET /v1 HTTP/1.1\r\nHost: x\r\n")
            attackers.append(sock)
        with trio.fail_after(20):
            await _serves_a_controller(served, served.controllers["bot-0"])
        assert served.proc.poll() is None, "akk serve died"
        assert served.open_descriptors() < DESCRIPTOR_LIMIT - 200
        with trio.fail_after(20):
            async with connect(served.url, served.operator) as operator:
                report = await operator.call("doctor")
        stats = report["server"]
        assert stats["handshakes_evicted"] >= 1100 - report["limits"]["max_handshakes"] - 5
        # An evicted peer is told to come back (a slow controller retries), not hung up on.
        stalled = attackers[1]
        stalled.settimeout(10)
        answer = stalled.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert b"\r\nRetry-After: 1\r\n" in answer, answer
        assert report["supervisor"]["escalations"] == 0
        print(
            f"\n1,100 stalled handshakes: server held {served.open_descriptors()} descriptors, "
            f"evicted {stats['handshakes_evicted']}"
        )
    finally:
        for sock in attackers:
            sock.close()


async def test_a_burst_of_controllers_beyond_the_handshake_slots_all_connect(
    served: Served,
) -> None:
    """400 controllers connect at once, six times the handshake slots: the ones whose
    upgrade is too slow are evicted with 503 and Retry-After, retry, and every one is
    served."""
    _raise_own_descriptor_limit(4096)
    served_count = 0

    async def one(token: str) -> None:
        nonlocal served_count
        await _serves_a_controller(served, token)
        served_count += 1

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for i in range(BURST):
                nursery.start_soon(one, served.controllers[f"bot-{i}"])
        async with connect(served.url, served.operator) as operator:
            report = await operator.call("doctor")
    assert served_count == BURST
    assert served.proc.poll() is None
    evicted = report["server"]["handshakes_evicted"]
    print(f"\n{BURST} controllers at once: {evicted} evicted and retried")


async def test_idle_connections_fill_up_to_the_cap_and_no_further(served: Served) -> None:
    """Upgraded connections past --max-connections are refused with 503, never crash; the
    operator's last few connections stay free for it."""
    _raise_own_descriptor_limit(4096)
    with trio.fail_after(60):
        async with connect(served.url, served.operator) as operator:
            limits = (await operator.call("doctor"))["limits"]
        cap = limits["max_connections"]
        assert cap <= DESCRIPTOR_LIMIT - 256
        controllers_cap = cap - min(limits["operator_reserve"], cap // 4)
        assert controllers_cap < CREDENTIALS
        async with trio.open_nursery() as nursery:
            opened = trio.Event()
            count = 0

            async def hold(token: str) -> None:
                nonlocal count
                headers = [(b"Authorization", f"Bearer {token}".encode())]
                try:
                    async with open_websocket_url(served.url, extra_headers=headers) as ws:
                        # Said hello, so the hello timeout does not close it meanwhile.
                        await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 0,
                                                          "method": "hello"}))  # fmt: skip
                        assert "result" in json.loads(await ws.get_message())
                        count += 1
                        if count == controllers_cap:
                            opened.set()
                        await trio.sleep_forever()
                except Exception:
                    pass

            # In waves of 32: a burst beyond the handshake slots would evict its own
            # slowest members (by design: stalled upgrades must not hold slots).
            started = 0
            while started < controllers_cap:
                before = count
                for _ in range(min(32, controllers_cap - started)):
                    nursery.start_soon(hold, served.controllers[f"bot-{started}"])
                    started += 1
                while count < min(before + 32, controllers_cap):
                    await trio.sleep(0.01)
            await opened.wait()
            with pytest.raises(Exception, match="503"):
                await _serves_a_controller(served, served.controllers[f"bot-{CREDENTIALS - 1}"])
            async with connect(served.url, served.operator) as operator:
                report = await operator.call("doctor")
                assert report["server"]["connections"] == controllers_cap + 1
            assert served.proc.poll() is None
            nursery.cancel_scope.cancel()
        # Once they go, a controller is served again.
        with trio.fail_after(20):
            while True:
                try:
                    await _serves_a_controller(served, served.controllers[f"bot-{CREDENTIALS - 1}"])
                    break
                except Exception:
                    await trio.sleep(0.1)


async def test_non_reading_controllers_with_multibyte_frames_stay_bounded(served: Served) -> None:
    """8 controllers send frames of 3-byte characters and never read a reply.

    Each frame is 1.8 MB on the wire and 1.2 MB as a decoded string. The server's
    growth must stay under half of what 160 frames would hold if it kept even one
    decoded copy of each, so a leak of that size fails here.
    """
    frame = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {"name": "€" * 600_000}},
        ensure_ascii=False,
    )
    assert len(frame.encode()) > 1 << 20 > len(frame)  # over the limit in bytes, not characters
    baseline = served.rss_mib()
    peak = baseline
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:

            async def flood(token: str) -> None:
                headers = [(b"Authorization", f"Bearer {token}".encode())]
                try:
                    async with open_websocket_url(
                        served.url, extra_headers=headers, message_queue_size=0
                    ) as ws:
                        for _ in range(FLOOD_FRAMES):
                            await ws.send_message(frame)
                except Exception:
                    pass  # the server may close a peer that does not read

            for i in range(8):
                nursery.start_soon(flood, served.controllers[f"bot-{i}"])
            while len(nursery.child_tasks) > 0:
                peak = max(peak, served.rss_mib())
                await trio.sleep(0.05)
    print(f"\nRSS under 8 non-reading controllers: {baseline:.0f} → peak {peak:.0f} MiB")
    held_if_kept = 8 * FLOOD_FRAMES * len(frame) * 2 / (1 << 20)  # MiB, one UCS-2 copy of each
    assert peak - baseline < held_if_kept / 2
    with trio.fail_after(20):
        await _serves_a_controller(served, served.controllers["bot-0"])


async def test_a_peer_that_stops_reading_is_closed(tmp_path: Path) -> None:
    """No pong to the keepalive (its reader is stuck): closed with 4008, others unharmed."""
    state = StateDir(tmp_path / "akk")
    tokens = mint_offline(state, "stuck", "fine")
    config = ServiceConfig(
        state=state,
        port=0,
        tmux_sockets=(),
        limits=EndpointLimits(keepalive_interval=0.5, send_timeout=0.5),
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            headers = [(b"Authorization", f"Bearer {tokens['stuck']}".encode())]
            async with open_websocket_url(
                endpoint.url, extra_headers=headers, message_queue_size=0
            ) as ws:
                for call_id, method in ((1, "hello"), (2, "list")):
                    await ws.send_message(
                        json.dumps({"jsonrpc": "2.0", "id": call_id, "method": method})
                    )
                # Not reading: the library's reader blocks on the undelivered replies,
                # so the keepalive pings go unanswered until the server gives up on it.
                async with connect(endpoint.url, state.token()) as operator:
                    while (await operator.call("doctor"))["server"]["closed_not_reading"] < 1:
                        await trio.sleep(0.1)
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await ws.get_message()
                assert closed.value.reason.code == NOT_READING
            async with connect(endpoint.url, tokens["fine"]) as ctl:
                assert "terminals" in await ctl.call("list")
            nursery.cancel_scope.cancel()
