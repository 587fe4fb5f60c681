"""Regenerate the committed app-server schemas from the pinned Codex binaries.

`python -m tools.lab schemas` writes `akk/appserver/schemas/codex-<version>.json`,
the bundle `codex app-server generate-json-schema --out DIR` prints, for every
pinned Codex (or one `--version`); `--check` only compares.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tools.lab.clients import Client

SCHEMAS = Path(__file__).resolve().parents[2] / "akk" / "appserver" / "schemas"
BUNDLE = "codex_app_server_protocol.schemas.json"
_TIMEOUT_S = 120


class SchemaError(RuntimeError):
    """The binary did not produce its schema bundle; the message says why."""


def committed(client: Client) -> Path:
    """Where `client`'s bundle is committed."""
    return SCHEMAS / f"codex-{client.version}.json"


def generate(client: Client, cache: Path | None = None) -> bytes:
    """The bundle `client`'s binary generates now (run with a throwaway HOME and CODEX_HOME)."""
    if client.agent != "codex":
        raise SchemaError(f"{client.name} has no app-server; only Codex has one")
    binary = client.binary(cache)
    if not binary.is_file():
        raise SchemaError(
            f"{client.name} is not installed at {binary}; run "
            f"`python -m tools.lab install --agent codex --version {client.version}`"
        )
    scratch = Path(tempfile.mkdtemp(prefix="akk-schema-"))
    try:
        out = scratch / "out"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "CODEX_HOME": str(scratch),
               "LANG": "C.UTF-8"}  # fmt: skip
        done = subprocess.run(
            [str(binary), "app-server", "generate-json-schema", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=scratch,
            env=env,
        )
        if done.returncode != 0 or not (out / BUNDLE).is_file():
            raise SchemaError(
                f"{binary} app-server generate-json-schema failed ({done.returncode}): "
                f"{done.stderr.strip()[-500:]}"
            )
        return (out / BUNDLE).read_bytes()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def write(client: Client, cache: Path | None = None) -> Path:
    """Regenerate `client`'s committed bundle; return its path."""
    target = committed(client)
    target.write_bytes(generate(client, cache))
    return target


def differs(client: Client, cache: Path | None = None) -> bool:
    """Whether the committed bundle differs from what the binary generates."""
    target = committed(client)
    return not target.is_file() or target.read_bytes() != generate(client, cache)
