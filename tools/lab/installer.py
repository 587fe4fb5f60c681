"""Install pinned clients from npm into a per-version cache, verified and atomic.

A version's directory exists under its final name only after npm finished and
the binary printed the expected ``--version`` line: npm runs in a scratch
directory beside it that is renamed into place. A killed install therefore
leaves at most a scratch directory, which the next install of that version
removes. An install that already verifies makes no npm call.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import trio

from tools.lab.clients import Client, cache_root

_NPM_TIMEOUT_S = 600
_VERSION_TIMEOUT_S = 30
_SCRATCH_PREFIX = ".incomplete-"


class InstallError(RuntimeError):
    """A client could not be installed or verified; the message says what to do."""


@attrs.frozen
class Installed:
    """A verified install: the client, its binary, and whether npm ran just now."""

    client: Client
    binary: Path
    fresh: bool


def verify(client: Client, cache: Path | None = None) -> str | None:
    """Return None if the cached binary prints the expected version, else why not."""
    return _verify_binary(client, client.binary(cache))


def _verify_binary(client: Client, binary: Path) -> str | None:
    if not binary.is_file():
        return f"{binary} does not exist"
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=_VERSION_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} --version failed: {exc}"
    first_line = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    if done.returncode != 0 or first_line != client.version_line:
        return (
            f"{binary} --version printed {first_line!r} (exit {done.returncode}), "
            f"expected {client.version_line!r}"
        )
    return None


@contextmanager
def _version_lock(cache: Path, client: Client) -> Iterator[None]:
    # Parallel pytest workers and a concurrent `make` may install the same
    # version; one waits for the other and then finds it verified.
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f".{client.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _remove_scratch(cache: Path, client: Client) -> None:
    for stale in cache.glob(f"{_SCRATCH_PREFIX}{client.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)


def install(client: Client, cache: Path | None = None) -> Installed:
    """Install one client unless already verified; raise InstallError on failure.

    Blocking (runs npm); call it from a worker thread in async code.
    """
    cache = cache or cache_root()
    target = client.install_dir(cache)
    with _version_lock(cache, client):
        if verify(client, cache) is None:
            return Installed(client, client.binary(cache), fresh=False)
        _remove_scratch(cache, client)
        scratch = cache / f"{_SCRATCH_PREFIX}{client.name}-{os.getpid()}"
        scratch.mkdir()
        try:
            _npm_install(client, scratch)
            problem = _verify_binary(client, client.binary_in(scratch))
            if problem is not None:
                raise InstallError(
                    f"{client.name}: npm installed {client.npm_spec} but {problem}. "
                    "Check that the platform package exists for this machine."
                )
            if target.exists():
                # An unverifiable leftover (e.g. a hand-edited tree): replace it.
                shutil.rmtree(target)
            scratch.rename(target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return Installed(client, client.binary(cache), fresh=True)


def _npm_install(client: Client, prefix: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError(
            "npm is not on PATH; install Node.js 20+ with npm, then rerun "
            "`python -m tools.lab install`"
        )
    command = [
        npm,
        "install",
        "--no-audit",
        "--no-fund",
        "--save-exact",
        "--prefix",
        str(prefix),
        client.npm_spec,
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=_NPM_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise InstallError(
            f"{client.name}: npm install did not finish in {_NPM_TIMEOUT_S} s; "
            "check the registry connection and rerun"
        ) from exc
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise InstallError(
            f"{client.name}: `npm install {client.npm_spec}` exited {done.returncode}:\n"
            f"{tail}\nFix the cause above (registry access, disk space) and rerun."
        )


async def install_many(
    clients: Iterable[Client],
    cache: Path | None = None,
    *,
    parallel: int = 3,
    report: bool = True,
) -> list[Installed]:
    """Install clients, ``parallel`` at a time; raise InstallError listing every failure."""
    limiter = trio.CapacityLimiter(parallel)
    done: list[Installed] = []
    failures: list[str] = []

    async def one(client: Client) -> None:
        async with limiter:
            start = trio.current_time()
            try:
                result = await trio.to_thread.run_sync(install, client, cache)
            except InstallError as exc:
                failures.append(str(exc))
                if report:
                    print(f"FAILED {client.name}", file=sys.stderr)
                return
            done.append(result)
            if report:
                how = "installed" if result.fresh else "already installed"
                took = trio.current_time() - start
                print(f"ok {client.name}: {how}, verified ({took:.1f} s) {result.binary}")

    async with trio.open_nursery() as nursery:
        for client in clients:
            nursery.start_soon(one, client)
    if failures:
        raise InstallError("\n\n".join(failures))
    return done
