"""`akk serve --auto-qualify`: qualify each newly seen unpinned binary in the background.

Off by default. A pane whose binary runs a version no profile pins, and that
no qualification row binds (`unpinned_version`), is queued once per binary
(by its SHA-256). One qualification runs at a time, its every process at
the lowest CPU priority (`nice` 19), with the server's own pinned set. A
qualified binary's row is recorded as the operator method would record it,
and the panes re-bind at once; until then the pane stays unsupported, so
nothing is ever read with a profile that was not proven. A refused binary is
not tried again until the server restarts: the log says why it was refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import trio

from akk.actors.store import transact
from akk.actors.terminal_board import TerminalBoard
from akk.discovery.identity import TerminalIdentity
from akk.profiles.qualified_versions import QualifiedVersions
from akk.qualify import command, qualification
from akk.qualify.client import Agent
from akk.qualify.qualification import QualifyError
from akk.runtime.actor import ActorRef
from akk.store import qualifications

log = logging.getLogger(__name__)

SCAN_INTERVAL = 2.0
"""Seconds between looks at the board for a binary to qualify."""
NICENESS = 19
"""The lowest CPU priority: the person's own work and AKK's serving come first."""
ACTOR = "akk-auto-qualify"
"""Who the store's audit row names for a row this records."""


def wanted(identity: TerminalIdentity) -> bool:
    """Whether a pane's binary is one to qualify: unpinned, unbound, its digest known."""
    return (
        identity.profile is None
        and identity.version is not None
        and identity.binary_sha256 is not None
        and (identity.profile_reason or "").startswith("unpinned_version")
    )


class AutoQualifier:
    """Watches the board and qualifies each new unpinned binary, one at a time."""

    def __init__(
        self,
        board: TerminalBoard,
        store: ActorRef,
        qualified: QualifiedVersions,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._board = board
        self._store = store
        self._qualified = qualified
        self._clock = clock
        self.tried: dict[str, str] = {}
        """Each binary SHA-256 tried since the start, with how it ended."""

    async def run(self) -> None:
        """Scan and qualify until cancelled (a supervised plain task)."""
        while True:
            for snapshot in self._board:
                identity = snapshot.identity
                if wanted(identity) and identity.binary_sha256 not in self.tried:
                    await self.qualify(identity)
            await trio.sleep(SCAN_INTERVAL)

    async def qualify(self, identity: TerminalIdentity) -> None:
        """Qualify the binary `identity`'s pane runs; record its row if it qualifies."""
        sha = identity.binary_sha256
        assert sha is not None
        agent: Agent = "claude" if identity.agent == "claude" else "codex"
        self.tried[sha] = "running"
        log.info(
            "auto-qualify: %s %s at %s (sha256 %s)",
            identity.agent, identity.version, identity.executable, sha,
        )  # fmt: skip
        registry = self._qualified.registry
        try:
            found = await qualification.probe(agent, Path(identity.executable))
            if found.sha256 != sha:
                raise QualifyError(f"{identity.executable} changed since the pane started it")
            judged = await qualification.qualify(found, registry.pinned, niceness=NICENESS)
        except QualifyError as exc:
            self.tried[sha] = f"error: {exc}"
            log.warning("auto-qualify: %s %s: %s", identity.agent, identity.version, exc)
            return
        if not judged.qualified:
            self.tried[sha] = "refused: " + "; ".join(judged.problems)
            log.warning(
                "auto-qualify: %s %s refused: %s; run `akk qualify %s --binary %s` for the report",
                identity.agent, identity.version, "; ".join(judged.problems),
                identity.agent, identity.executable,
            )  # fmt: skip
            return
        row = command.row(judged, self._clock())
        pinned = registry.base_agents
        await transact(
            self._store, lambda conn: qualifications.record(conn, row, pinned, actor=ACTOR)
        )
        await self._qualified.refresh()  # its panes re-bind now, not at the next poll
        self.tried[sha] = "qualified"
        log.info(
            "auto-qualify: %s %s qualified, read as %s (%s)",
            identity.agent, identity.version, judged.base.id,
            ", ".join(phase.describe() for phase in judged.phases),
        )  # fmt: skip
