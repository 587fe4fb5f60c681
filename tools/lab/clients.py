"""The pinned client versions the lab supports, and where each one lives in the cache.

This table is the single source of the supported set: the installer, the launcher,
the smoke tests and the capture tool all read it.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import attrs

from akk.qualify.client import Agent

_NPM_PACKAGE: dict[Agent, str] = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
}

# What `<binary> --version` prints, e.g. "2.1.263 (Claude Code)" / "codex-cli 0.153.4".
_VERSION_LINE: dict[Agent, str] = {
    "claude": "{version} (Claude Code)",
    "codex": "codex-cli {version}",
}


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
"""The committed screen corpus of the pinned versions (`fixtures/<agent>/<version>/`)."""


class UnsupportedClient(LookupError):
    """An agent/version pair that is not in the pinned table."""


@attrs.frozen
class Client:
    """One pinned client version: its npm spec, cache directory and native binary."""

    agent: Agent
    version: str

    @property
    def name(self) -> str:
        """The cache directory name and test id, e.g. ``claude-2.1.263``."""
        return f"{self.agent}-{self.version}"

    @property
    def npm_spec(self) -> str:
        """The exact npm package spec to install."""
        return f"{_NPM_PACKAGE[self.agent]}@{self.version}"

    @property
    def version_line(self) -> str:
        """The line ``--version`` must print for a verified install."""
        return _VERSION_LINE[self.agent].format(version=self.version)

    def install_dir(self, cache: Path | None = None) -> Path:
        """The per-version npm prefix under the cache root."""
        return (cache or cache_root()) / self.name

    def binary(self, cache: Path | None = None) -> Path:
        """The native binary of the cached install."""
        return self.binary_in(self.install_dir(cache))

    def binary_in(self, prefix: Path) -> Path:
        """The native binary under an npm prefix.

        The npm postinstall step is never run (npm 11 holds install scripts
        back), so the wrapper script is unusable and the platform package's
        binary is used directly.
        """
        return prefix / _binary_relpath(self.agent)


PINNED: tuple[Client, ...] = (
    Client("claude", "2.1.263"),
    Client("claude", "2.1.266"),
    Client("claude", "2.1.267"),
    Client("claude", "2.1.328"),
    Client("claude", "2.1.332"),
    Client("codex", "0.153.4"),
    Client("codex", "0.154.0"),
    Client("codex", "0.155.1"),
    Client("codex", "0.169.0"),
    Client("codex", "0.171.0"),
)


def get(agent: str, version: str) -> Client:
    """Return the pinned client, or raise UnsupportedClient naming the supported set."""
    for client in PINNED:
        if client.agent == agent and client.version == version:
            return client
    supported = ", ".join(c.name for c in PINNED)
    raise UnsupportedClient(
        f"{agent} {version} is not a pinned lab client; supported: {supported}. "
        "To support a new version add a row to PINNED in tools/lab/clients.py."
    )


def newest(agent: Agent) -> Client:
    """The newest pinned version of `agent` (what the demo installs)."""
    return max(
        (client for client in PINNED if client.agent == agent),
        key=lambda client: tuple(int(part) for part in client.version.split(".")),
    )


def cache_root() -> Path:
    """The cache directory: ``$AKK_LAB_CACHE`` or ``~/.cache/akk-lab``."""
    override = os.environ.get("AKK_LAB_CACHE")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "akk-lab"


def _binary_relpath(agent: Agent) -> Path:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        npm_arch, rust_arch = "x64", "x86_64"
    elif machine in ("aarch64", "arm64"):
        npm_arch, rust_arch = "arm64", "aarch64"
    else:
        raise UnsupportedClient(
            f"no lab client binaries for machine {machine!r}; the lab runs on "
            "linux x86_64 or aarch64"
        )
    if agent == "claude":
        return Path(f"node_modules/@anthropic-ai/claude-code-linux-{npm_arch}/claude")
    return Path(
        f"node_modules/@openai/codex-linux-{npm_arch}/vendor/"
        f"{rust_arch}-unknown-linux-musl/bin/codex"
    )
