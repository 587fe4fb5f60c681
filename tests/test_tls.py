"""Beyond loopback only with TLS: wss:// end to end, and plaintext refused at start.

The certificate is made here with the machine's `openssl`. Every listener is
on loopback; the one start that binds beyond loopback runs inside a network
namespace of its own, whose only interface is its own loopback.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from akk.client import ConnectError, connect, tls_context
from akk.config import ServiceConfig, TlsFiles
from akk.server.endpoint import ListenError, is_loopback, listen_check
from akk.server.instance import (
    Endpoint,
    InstanceError,
    proven_endpoint,
    read_endpoint,
    write_endpoint,
)
from akk.service import run_service
from akk.store.location import StateDir
from tools.lab.akk_runner import mint_offline

AKK = [sys.executable, "-m", "akk"]


def _certificate(where: Path, name: str = "server") -> TlsFiles:
    """A self-signed certificate for localhost and 127.0.0.1, made with openssl."""
    cert, key = where / f"{name}.pem", where / f"{name}-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return TlsFiles(str(cert), str(key))


def _read(path: str) -> str:
    return Path(path).read_text()


@asynccontextmanager
async def _serving(state: StateDir, tls: TlsFiles) -> AsyncIterator[Endpoint]:
    config = ServiceConfig(state=state, port=0, tmux_sockets=(), tls=tls)
    async with trio.open_nursery() as nursery:
        endpoint: Endpoint = await nursery.start(
            lambda task_status: run_service(config, task_status=task_status)
        )
        yield endpoint
        nursery.cancel_scope.cancel()


async def test_a_wss_round_trip_checks_the_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tls = _certificate(tmp_path)
    pem = _read(tls.cert)
    state = StateDir(tmp_path / "akk")
    tokens = mint_offline(state, "ctl")
    monkeypatch.delenv("AKK_TLS_CA", raising=False)
    with trio.fail_after(30):
        async with _serving(state, tls) as endpoint:
            assert endpoint.url.startswith("wss://127.0.0.1:")
            url = f"wss://localhost:{endpoint.port}/v1"
            async with connect(url, tokens["ctl"], ssl_context=tls_context(tls.cert)) as ctl:
                assert ctl.server["controller_id"] == "ctl"
                assert (await ctl.call("list"))["terminals"] == []
            monkeypatch.setenv("AKK_TLS_CA", tls.cert)  # the CA file from the environment
            async with connect(url, tokens["ctl"]) as ctl:
                assert ctl.server["scope"] == "controller"
            monkeypatch.delenv("AKK_TLS_CA")
            # Checking stays on: the system's authorities do not know this certificate, and
            # another certificate for the same name is not it. The credential never leaves.
            other = _certificate(tmp_path, "impostor")
            for context in (None, tls_context(other.cert)):
                with pytest.raises(ConnectError, match="TLS handshake"):
                    async with connect(url, tokens["ctl"], ssl_context=context):
                        pass
            # The endpoint record pins the server's own certificate for the CLI.
            recorded = read_endpoint(state)
            assert recorded is not None and recorded.scheme == "wss"
            assert recorded.certificate == pem
            assert (await proven_endpoint(state)) == recorded
            # A record pinning another certificate proves nothing: its handshake fails.
            write_endpoint(state, attrs.evolve(recorded, certificate=_read(other.cert)))
            with pytest.raises(InstanceError, match="did not prove"):
                await proven_endpoint(state)
            write_endpoint(state, recorded)
            listed = await trio.run_process(
                [*AKK, "token", "list", "--json", "--state-dir", str(state.path)],
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
            assert listed.returncode == 0, listed.stderr
            (row,) = json.loads(listed.stdout)["credentials"]
            assert row["controller_id"] == "ctl" and row["connected"] is False


def test_only_loopback_may_be_served_in_the_clear() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert is_loopback(host), host
        assert listen_check(host, tls=False, insecure=False) is None
    for host in ("0.0.0.0", "", "::", "192.0.2.7", "no-such-host.invalid"):
        assert not is_loopback(host), host
        with pytest.raises(ListenError, match="--tls-cert FILE and --tls-key FILE"):
            listen_check(host, tls=False, insecure=False)
        assert listen_check(host, tls=True, insecure=False) is None
        warning = listen_check(host, tls=False, insecure=True)
        assert warning is not None and "--insecure-listen-anywhere" in warning


def _serve(state: Path, *options: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*prefix, *AKK, "serve", "--state-dir", str(state), "--port", "0", "--tmux-socket",
         str(state.parent / "no-tmux"), *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_plaintext_beyond_loopback_is_refused_at_start(tmp_path: Path) -> None:
    state = tmp_path / "akk"
    tls = _certificate(tmp_path)
    for options, message in (
        (("--host", "0.0.0.0"), "akk: --host 0.0.0.0 is beyond loopback"),
        (("--host", "127.0.0.1", "--tls-cert", tls.cert), "--tls-cert and --tls-key go together"),
        (("--tls-cert", tls.cert, "--tls-key", str(tmp_path / "gone.pem")), "does not exist"),
        (("--tls-cert", tls.key, "--tls-key", tls.cert), "cannot use --tls-cert"),
    ):
        proc = _serve(state, *options)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, (options, out, err)
        assert message in err and "Traceback" not in err, err
        assert "listening" not in out
        assert not (state / "endpoint.json").exists()  # refused before anything bound


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_insecure_listen_anywhere_starts_and_warns_every_time(tmp_path: Path) -> None:
    """Bound to 0.0.0.0 inside a network namespace whose only interface is its loopback."""
    state = tmp_path / "akk"
    for _ in range(2):
        proc = _serve(
            state, "--host", "0.0.0.0", "--insecure-listen-anywhere", prefix=("unshare", "-n")
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "listening on ws://127.0.0.1:" in line and "bound to 0.0.0.0" in line, line
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "WARNING" in err and "--insecure-listen-anywhere" in err, err
