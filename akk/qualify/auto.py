"""`akk serve --auto-qualify`: qualify each newly seen unpinned binary in the background.

Off by default. A pane whose binary runs a version no profile pins, and that
no qualification row binds (`unpinned_version`), is queued once per binary
(by its SHA-256). One qualification runs at a time, its every process at
the lowest CPU priority (`nice` 19), with the server's own pinned set. The
binary is pinned first (`qualification.pinned`): the file at the pane's path
is copied and must hash as what the pane runs, or nothing runs at all. A
qualified binary's row is recorded as the operator method would record it,
and the panes re-bind at once; until then the pane stays unsupported, so
nothing is ever read with a profile that was not proven. A binary refused only
because some screens could not be produced (a busy machine, most often: every
process of it runs after everyone else's) is tried again `BUSY_RETRY_SECONDS`
later, `BUSY_TRIES` times in all. Any other refused binary, or one that could
not be tried, is not tried again until the server restarts: the log says why.
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
from akk.qualify.launcher import LabError
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
BUSY_RETRY_SECONDS = 600.0
"""How long after a refusal for screens not produced alone the binary is tried again."""
BUSY_TRIES = 3
"""Qualifications of one binary, at most, since the server started."""


def wanted(identity: TerminalIdentity) -> bool:
    """Whether a pane's binary is one to qualify: unpinned, unbound, its file and digest known."""
    return (
        identity.profile is None
        and identity.version is not None
        and identity.binary is not None
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
        self._tries: dict[str, int] = {}
        self._again: dict[str, float] = {}
        """When (trio time) each binary refused for screens not produced is tried again."""

    async def run(self) -> None:
        """Scan and qualify until cancelled (a supervised plain task)."""
        while True:
            for snapshot in self._board:
                identity = snapshot.identity
                if wanted(identity) and self._due(str(identity.binary_sha256)):
                    await self.qualify(identity)
            await trio.sleep(SCAN_INTERVAL)

    def _due(self, sha: str) -> bool:
        again = self._again.get(sha)
        return sha not in self.tried or (again is not None and trio.current_time() >= again)

    async def qualify(self, identity: TerminalIdentity) -> None:
        """Qualify the binary `identity`'s pane runs; record its row if it qualifies.

        Ends with the binary's outcome in `tried`, logged: qualified, refused, or
        the error that stopped it (never "running" after it returns or raises).
        """
        sha = identity.binary_sha256
        assert sha is not None and identity.binary is not None
        self.tried[sha] = "running"
        self._again.pop(sha, None)
        self._tries[sha] = self._tries.get(sha, 0) + 1
        log.info(
            "auto-qualify: %s %s at %s (sha256 %s)",
            identity.agent, identity.version, identity.binary, sha,
        )  # fmt: skip
        try:
            self.tried[sha] = await self._qualify(identity, Path(identity.binary), sha)
        except (QualifyError, LabError) as exc:
            said = str(exc).strip().splitlines()
            self.tried[sha] = f"error: {said[0] if said else type(exc).__name__}"
            log.warning("auto-qualify: %s %s: %s", identity.agent, identity.version,
                        self.tried[sha])  # fmt: skip
        except BaseException as exc:
            # A bug, or the server stopping: never retried, never shown as running.
            self.tried[sha] = f"error: {type(exc).__name__}"
            raise

    async def _qualify(self, identity: TerminalIdentity, binary: Path, sha: str) -> str:
        agent: Agent = "claude" if identity.agent == "claude" else "codex"
        registry = self._qualified.registry
        async with qualification.pinned(agent, binary, sha256=sha) as found:
            judged = await qualification.qualify(found, registry.pinned, niceness=NICENESS)
        if not judged.qualified:
            refused = "refused: " + "; ".join(judged.problems)
            if judged.unproduced_only and self._tries[sha] < BUSY_TRIES:
                self._again[sha] = trio.current_time() + BUSY_RETRY_SECONDS
                refused += f"; tried again in {BUSY_RETRY_SECONDS:.0f} s"
            screens = [c.point.name for c in judged.comparisons if c.status != "same"]
            log.warning(
                "auto-qualify: %s %s %s (try %d of %d; screens: %s); run `akk qualify %s "
                "--binary %s` for the report", identity.agent, identity.version, refused,
                self._tries[sha], BUSY_TRIES, ", ".join(screens[:10]) or "none",
                identity.agent, binary,
            )  # fmt: skip
            return refused
        row = command.row(judged, self._clock())
        pinned = registry.base_agents
        await transact(
            self._store, lambda conn: qualifications.record(conn, row, pinned, actor=ACTOR)
        )
        await self._qualified.refresh()  # its panes re-bind now, not at the next poll
        log.info(
            "auto-qualify: %s %s qualified, read as %s (%s)",
            identity.agent, identity.version, judged.base.id,
            ", ".join(phase.describe() for phase in judged.phases),
        )  # fmt: skip
        return "qualified"
