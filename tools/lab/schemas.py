"""Regenerate the committed app-server schemas from the pinned Codex binaries.

`python -m tools.lab schemas` writes `akk/backends/codex_app_server/schemas/codex-<version>.json`,
the bundle `codex app-server generate-json-schema --out DIR` prints
(`akk.qualify.appserver.generate`), for every pinned Codex (or one `--version`);
`--check` only compares.
"""

from __future__ import annotations

from pathlib import Path

from akk.qualify.appserver import SchemaError, generate
from tools.lab.clients import Client

SCHEMAS = Path(__file__).resolve().parents[2] / "akk" / "backends" / "codex_app_server" / "schemas"


def committed(client: Client) -> Path:
    """Where `client`'s bundle is committed."""
    return SCHEMAS / f"codex-{client.version}.json"


def generated(client: Client, cache: Path | None = None) -> bytes:
    """The bundle `client`'s installed binary generates now."""
    if client.agent != "codex":
        raise SchemaError(f"{client.name} has no app-server; only Codex has one")
    binary = client.binary(cache)
    if not binary.is_file():
        raise SchemaError(
            f"{client.name} is not installed at {binary}; run "
            f"`python -m tools.lab install --agent codex --version {client.version}`"
        )
    return generate(binary)


def write(client: Client, cache: Path | None = None) -> Path:
    """Regenerate `client`'s committed bundle; return its path."""
    target = committed(client)
    target.write_bytes(generated(client, cache))
    return target


def differs(client: Client, cache: Path | None = None) -> bool:
    """Whether the committed bundle differs from what the binary generates."""
    target = committed(client)
    return not target.is_file() or target.read_bytes() != generated(client, cache)
