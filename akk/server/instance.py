"""One server per state directory, and how the CLI proves it talks to that server.

``akk serve`` holds an exclusive ``flock`` on the state directory for its whole
lifetime, and writes ``endpoint.json`` (host, port, PID and a random nonce,
0600). Before the CLI sends a credential anywhere it proves the server:

1. someone holds the directory's lock (else the file is stale: nobody serves);
2. the recorded PID is alive;
3. the listener at the recorded port answers a fresh challenge with
   HMAC-SHA256(nonce, challenge), which only the process that wrote the 0600
   file can compute. The challenge goes to ``/v1/proof`` without any
   credential; an impostor on a reused port learns nothing.

A server that serves wss:// also records its leaf certificate (PEM). The CLI
then trusts that one certificate and nothing else (``Endpoint.tls_context``):
the record, not the host name, says which server it expects, so a
certificate issued for a name (or a self-signed one) works on any address
the server binds, and every proof and call goes over TLS.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import ssl
import time

import attrs
import trio
import wsproto
import wsproto.events
import wsproto.utilities

from akk.discovery.process import pid_alive
from akk.store.location import ENDPOINT_TMP_FILE, StateDir

PROOF_PATH = "/v1/proof"
CHALLENGE_HEADER = b"akk-challenge"
PROOF_HEADER = b"akk-proof"
PROOF_STATUS = 403
_LOCK_WAIT = 2.0  # seconds a starting server waits for a CLI's short hold on the lock
_PROOF_REPLY_BYTES = 16 * 1024  # the most of a listener's reply to a challenge that is read


class InstanceError(Exception):
    """Another server holds the state directory, or the recorded one cannot be proven."""


_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----"
)
_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


def leaf_certificate(chain_pem: str) -> str:
    """The first certificate of a PEM chain (the server's own); raise ValueError if none."""
    found = _CERTIFICATE.search(chain_pem)
    if found is None:
        raise ValueError("no PEM certificate in the file")
    return found.group(0) + "\n"


@attrs.frozen
class Endpoint:
    """Where a running `akk serve` listens (``endpoint.json`` in the state directory)."""

    host: str
    port: int
    pid: int
    nonce: str = attrs.field(repr=False)
    scheme: str = "ws"
    """"wss" when the server serves TLS."""
    certificate: str | None = attrs.field(default=None, repr=False)
    """The server's leaf certificate (PEM) when it serves TLS."""

    @property
    def url(self) -> str:
        """Where a client on this host reaches the server (a wildcard bind via loopback)."""
        return f"{self.scheme}://{self.authority}/v1"

    @property
    def web_origin(self) -> str:
        """The server's origin as a browser on this host names it (the console's pages)."""
        return f"{'https' if self.scheme == 'wss' else 'http'}://{self.authority}"

    @property
    def reach_host(self) -> str:
        """The address a client on this host connects to (a wildcard bind via loopback)."""
        return _WILDCARDS.get(self.host, self.host)

    @property
    def authority(self) -> str:
        """``host:port`` as a URL or a Host header names the server."""
        host = self.reach_host
        shown = f"[{host}]" if ":" in host else host
        return f"{shown}:{self.port}"

    def tls_context(self) -> ssl.SSLContext | None:
        """A client context that trusts exactly this server's certificate (None for ws://).

        Verification stays on: the peer must present the recorded certificate
        and prove its key. The host name is not checked because the pinned
        certificate already names the one server meant.
        """
        if self.certificate is None:
            return None
        context = ssl.create_default_context(cadata=self.certificate)
        context.check_hostname = False
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        return context

    def proof(self, challenge: str) -> str:
        """What this endpoint's server answers to ``challenge``."""
        return proof_for(self.nonce, challenge)


def new_nonce() -> str:
    return secrets.token_hex(32)


def proof_for(nonce: str, challenge: str) -> str:
    """HMAC-SHA256 of ``challenge`` under the server's ``nonce`` (both hex)."""
    return hmac.new(bytes.fromhex(nonce), challenge.encode(), hashlib.sha256).hexdigest()


class InstanceLock:
    """The exclusive lock that makes one process the server of a state directory."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> InstanceLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def acquire(state: StateDir, *, wait: float = _LOCK_WAIT) -> InstanceLock:
    """Take the state directory for this process; raise InstanceError naming the holder.

    Waits up to ``wait`` seconds, because a CLI command holds the lock for a
    moment while it checks or writes the store (with ``wait=0`` the CLI takes
    it for such a write, and fails at once if a server holds it).
    """
    fd = os.open(state.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return InstanceLock(fd)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                raise
        if time.monotonic() >= deadline:
            os.close(fd)
            raise InstanceError(_held_message(state))
        time.sleep(0.05)


def server_running(state: StateDir) -> bool:
    """Whether some process holds the state directory's lock right now."""
    if not state.path.is_dir():
        return False
    fd = os.open(state.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)  # also drops the shared lock if we got it
    return False


def read_endpoint(state: StateDir) -> Endpoint | None:
    """The endpoint recorded in the state directory, or None (absent or unreadable)."""
    try:
        data = json.loads(state.endpoint_path.read_text())
        certificate = data.get("certificate")
        return Endpoint(
            host=str(data["host"]),
            port=int(data["port"]),
            pid=int(data["pid"]),
            nonce=str(data["nonce"]),
            scheme="wss" if data.get("scheme") == "wss" else "ws",
            certificate=None if certificate is None else str(certificate),
        )
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def write_endpoint(state: StateDir, endpoint: Endpoint) -> None:
    tmp = state.endpoint_path.with_name(ENDPOINT_TMP_FILE)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(attrs.asdict(endpoint), f)
    os.replace(tmp, state.endpoint_path)


def remove_endpoint(state: StateDir, endpoint: Endpoint) -> None:
    """Remove ``endpoint.json`` if it is still the one this server wrote."""
    if read_endpoint(state) == endpoint:
        state.endpoint_path.unlink(missing_ok=True)


async def proven_endpoint(state: StateDir, *, timeout: float = 5.0) -> Endpoint:
    """The running server's endpoint, proven as described above; raise InstanceError."""
    endpoint = read_endpoint(state)
    running = server_running(state)
    if endpoint is None:
        if running:
            raise InstanceError(
                f"`akk serve` holds {state.path} but has not written its endpoint yet; "
                "try again in a moment"
            )
        raise InstanceError(f"no running `akk serve` for {state.path}; start it with `akk serve`")
    if not running or not pid_alive(endpoint.pid):
        raise InstanceError(
            f"server not running (stale endpoint from PID {endpoint.pid}); "
            "start it with `akk serve`"
        )
    challenge = secrets.token_hex(32)
    answer = await _ask_proof(endpoint, challenge, timeout)
    if answer is None or not hmac.compare_digest(answer, endpoint.proof(challenge)):
        raise InstanceError(
            f"the listener at {endpoint.host}:{endpoint.port} did not prove it is the "
            f"`akk serve` of {state.path} (PID {endpoint.pid}); no credential was sent. "
            "Check what listens there (`akk doctor`)"
        )
    return endpoint


async def _ask_proof(endpoint: Endpoint, challenge: str, timeout: float) -> str | None:
    """The listener's answer to `challenge`, or None: not ours, gone, or silent for `timeout`.

    The upgrade request goes out through wsproto itself: trio-websocket waits out
    its whole timeout when a listener hangs up mid-handshake, as a stand-in on a
    reused port may, and this returns at once. At most `_PROOF_REPLY_BYTES` of
    the reply are read.
    """
    host = endpoint.reach_host
    context = endpoint.tls_context()
    with trio.move_on_after(timeout):
        stream: trio.abc.Stream | None = None
        try:
            stream = await trio.open_tcp_stream(host, endpoint.port)
            if context is not None:
                stream = trio.SSLStream(stream, context, server_hostname=host)
                await stream.do_handshake()
            return await _proof_reply(stream, endpoint, challenge)
        except (OSError, trio.BrokenResourceError, wsproto.utilities.ProtocolError):
            return None
        finally:
            if stream is not None:
                await trio.aclose_forcefully(stream)
    return None


async def _proof_reply(stream: trio.abc.Stream, endpoint: Endpoint, challenge: str) -> str | None:
    connection = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    request = wsproto.events.Request(
        host=endpoint.authority,
        target=PROOF_PATH,
        extra_headers=[(CHALLENGE_HEADER, challenge.encode())],
    )
    await stream.send_all(connection.send(request))
    received = 0
    while received < _PROOF_REPLY_BYTES:
        data = await stream.receive_some(_PROOF_REPLY_BYTES - received)
        received += len(data)
        connection.receive_data(bytes(data) or None)  # b"": the listener hung up
        for event in connection.events():
            if not isinstance(event, wsproto.events.RejectConnection):
                return None  # accepted (a server that takes this path is not ours), or closed
            if event.status_code != PROOF_STATUS:
                return None
            for name, value in event.headers:
                if name.lower() == PROOF_HEADER:
                    return value.decode(errors="replace")
            return None
        if not data:
            return None
    return None


def _held_message(state: StateDir) -> str:
    endpoint = read_endpoint(state)
    if endpoint is not None and pid_alive(endpoint.pid):
        return (
            f"another `akk serve` (PID {endpoint.pid}, {endpoint.url}) is running for "
            f"{state.path}; stop it first, or pass another --state-dir"
        )
    return (
        f"another process holds {state.path} (an `akk serve` starting up or shutting down, "
        "or an `akk` command writing to the store); try again, or pass another --state-dir"
    )
