"""The CLI proves the server before any credential leaves: listeners that are not it.

Each listener below sits on the port a (held, live) state directory records. The
proof must fail with the reason, never send a credential, and come back at once
rather than wait out its timeout: a stand-in that hangs up mid-handshake, one
that streams bytes without end, and one that answers with a wrong proof.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from akk.server.instance import (
    CHALLENGE_HEADER,
    Endpoint,
    InstanceError,
    acquire,
    new_nonce,
    proven_endpoint,
    write_endpoint,
)
from akk.store.location import StateDir

Listener = Callable[[trio.SocketStream], Awaitable[None]]
TIMEOUT = 60.0  # the proof's own deadline: far beyond the test's, so waiting it out fails


async def _hangs_up(stream: trio.SocketStream) -> None:
    await stream.receive_some(65536)
    await stream.aclose()


async def _streams_without_end(stream: trio.SocketStream) -> None:
    await stream.receive_some(65536)
    await stream.send_all(b"HTTP/1.1 403 Forbidden\r\nX-Filler: ")
    while True:
        await stream.send_all(b"a" * 4096)


async def _answers_wrongly(stream: trio.SocketStream) -> None:
    request = await stream.receive_some(65536)
    assert CHALLENGE_HEADER in request.lower()
    assert b"authorization" not in request.lower() and b"bearer" not in request.lower()
    await stream.send_all(
        b"HTTP/1.1 403 Forbidden\r\nakk-proof: " + b"0" * 64 + b"\r\ncontent-length: 0\r\n\r\n"
    )
    await stream.aclose()


@pytest.mark.parametrize("listener", [_hangs_up, _streams_without_end, _answers_wrongly])
async def test_a_listener_that_is_not_the_server_is_refused_at_once(
    tmp_path: Path, listener: Listener
) -> None:
    state = StateDir(tmp_path / "akk")
    state.path.mkdir(mode=0o700)
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, listener, 0, host="127.0.0.1")
        (socket,) = await nursery.start(serve)
        port = socket.socket.getsockname()[1]
        write_endpoint(state, Endpoint("127.0.0.1", port, os.getpid(), new_nonce()))
        refused = pytest.raises(InstanceError, match="did not prove")
        # The lock held as the server the record names would hold it.
        with acquire(state), trio.fail_after(10), refused:
            await proven_endpoint(state, timeout=TIMEOUT)
        nursery.cancel_scope.cancel()
