"""Which client binary a lab run starts: its agent, the version it claims, and its file."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

import attrs

Agent = Literal["claude", "codex"]
AGENTS: tuple[Agent, ...] = ("claude", "codex")


class Client(Protocol):
    """A runnable client: a pinned lab install (`tools.lab.clients`) or a binary to qualify."""

    @property
    def agent(self) -> Agent: ...

    @property
    def version(self) -> str: ...

    @property
    def name(self) -> str:
        """``claude-2.1.263``: file and test names, progress lines."""
        ...

    def binary(self) -> Path:
        """The executable the pane runs."""
        ...


@attrs.frozen
class Binary:
    """A client given by its executable: what `akk qualify` runs (the user's own binary)."""

    agent: Agent
    version: str
    """What the binary itself prints for ``--version`` (never assumed)."""
    path: Path

    @property
    def name(self) -> str:
        """``claude-2.1.333``."""
        return f"{self.agent}-{self.version}"

    def binary(self) -> Path:
        """The executable."""
        return self.path
