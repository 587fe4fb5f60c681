"""`akk doctor`: checks that a person can act on, one line each."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import attrs

from akk.instance import pid_alive, read_endpoint
from akk.store.database import StoreError, store_version
from akk.store.location import StateDir, StateDirError
from akk.store.schema import SCHEMA_VERSION


@attrs.frozen
class Check:
    name: str
    ok: bool
    detail: str
    next_step: str = ""


def run_checks(state: StateDir, port: int) -> list[Check]:
    """Every check, in the order a person would fix them."""
    return [_tmux(), _state_dir(state), _store(state), _port(state, port), *_lab_clients()]


def server_checks(report: dict[str, Any]) -> list[Check]:
    """What the running server reports of itself (operator `doctor` call)."""
    server = report["server"]
    limits = report["limits"]
    checks = [
        Check(
            "server",
            True,
            f"pid {report['pid']}: {server['connections']}/{limits['max_connections']} "
            f"connections, {report['connected_controllers']} controllers said hello, "
            f"{report['credentials']} credentials",
        )
    ]
    refused = server["refused_full"] + server["handshakes_evicted"] + server["accept_errors"]
    if refused:
        checks.append(
            Check(
                "server load",
                False,
                f"{server['refused_full']} upgrades refused at the connection limit, "
                f"{server['handshakes_evicted']} stalled handshakes dropped, "
                f"{server['accept_errors']} accepts failed (descriptors)",
                "look for a process opening connections it never uses; raise --max-connections "
                "or `ulimit -n`",
            )
        )
    for watcher in report["watchers"]:
        if watcher["failures"]:
            checks.append(
                Check(
                    f"watcher {watcher['socket']}",
                    False,
                    f"{watcher['failures']} failures in a row, last: {watcher['last_error']}",
                    "see the server log; it retries with backoff on its own",
                )
            )
        else:
            state = "attached" if watcher["attached"] else "waiting for the tmux server"
            checks.append(Check(f"watcher {watcher['socket']}", True, state))
    return checks


def _tmux() -> Check:
    path = shutil.which("tmux")
    if path is None:
        return Check("tmux", False, "not found on PATH", "install it: apt-get install tmux")
    version = subprocess.run(
        [path, "-V"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return Check("tmux", True, f"{version} at {path}")


def _state_dir(state: StateDir) -> Check:
    if not state.path.exists():
        return Check("state dir", True, f"{state.path} (created on first `akk serve`)")
    try:
        state.ensure()
    except StateDirError as exc:
        return Check("state dir", False, str(exc), "fix the directory or pass --state-dir")
    loose = [
        p.name
        for p in state.path.iterdir()
        if p.is_file() and stat.S_IMODE(p.stat().st_mode) & 0o077
    ]
    if loose:
        return Check(
            "state dir",
            False,
            f"files readable by others: {', '.join(loose)}",
            f"chmod 600 {' '.join(str(state.path / n) for n in loose)}",
        )
    return Check("state dir", True, f"{state.path} (0700, files 0600)")


def _store(state: StateDir) -> Check:
    if not state.store_path.exists():
        return Check("store", True, "none yet (created on first `akk serve`)")
    try:
        version = store_version(state.store_path)
    except StoreError as exc:
        return Check("store", False, str(exc), "move the file away or pass --state-dir")
    if version > SCHEMA_VERSION:
        return Check(
            "store",
            False,
            f"schema v{version} is newer than this akk (v{SCHEMA_VERSION})",
            "upgrade akk or pass another --state-dir",
        )
    note = "" if version == SCHEMA_VERSION else f" (migrates to v{SCHEMA_VERSION} on serve)"
    return Check("store", True, f"schema v{version}{note} at {state.store_path}")


def _port(state: StateDir, port: int) -> Check:
    endpoint = read_endpoint(state)
    if endpoint is not None and endpoint.port == port and pid_alive(endpoint.pid):
        return Check("port", True, f"{port}: akk serve is running (pid {endpoint.pid})")
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return Check(
                "port",
                False,
                f"127.0.0.1:{port} is taken ({exc.strerror})",
                "stop what holds it, or run akk serve --port N",
            )
    return Check("port", True, f"127.0.0.1:{port} is free")


def _lab_clients() -> list[Check]:
    cache = Path(os.environ.get("AKK_LAB_CACHE", Path.home() / ".cache" / "akk-lab"))
    if not cache.is_dir():
        return [Check("lab clients", True, f"none installed under {cache} (only tests need them)")]
    installed = sorted(p.name for p in cache.iterdir() if p.is_dir() and not p.name.startswith("."))
    return [Check("lab clients", True, f"{', '.join(installed) or 'none'} under {cache}")]
