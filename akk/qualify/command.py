"""What `akk qualify AGENT` qualifies, and what a qualified binary's row says.

Without ``--binary`` the candidates are the binaries a running server sees in
its panes of that agent that bind no profile (the terminals table of the
state directory's store), else the agent's command on PATH. Each candidate is
probed (`qualification.probe`); a pinned version needs nothing, every other one
runs the whole plan, one at a time.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from akk.profiles.registry import Registry
from akk.qualify import qualification
from akk.qualify.client import Agent
from akk.qualify.qualification import Judgement, Probe, QualifyError
from akk.server.instance import server_running
from akk.store import qualifications
from akk.store.database import open_reader
from akk.store.location import StateDir


def candidates(agent: Agent, state: StateDir) -> list[Path]:
    """The binaries to qualify: the running server's unbound panes' binaries, else PATH's."""
    found: list[Path] = []
    if server_running(state) and state.store_path.is_file():
        conn = open_reader(state.store_path)
        try:
            rows = conn.execute(
                "SELECT DISTINCT executable FROM terminals "
                "WHERE agent = ? AND gone_at IS NULL AND profile IS NULL ORDER BY executable",
                (agent,),
            ).fetchall()
        finally:
            conn.close()
        # A pure-JS Claude runs under node: its executable is the interpreter, not the client.
        found = [
            Path(str(executable))
            for (executable,) in rows
            if not os.path.basename(str(executable)).startswith("node")
        ]
    if not found and (on_path := shutil.which(agent)) is not None:
        found = [Path(on_path).resolve()]
    return found


@attrs.frozen
class Attempt:
    """One candidate's result: a judgement, or why there was nothing to judge."""

    path: Path
    judgement: Judgement | None = None
    pinned: Probe | None = None
    """Set when the binary's version is pinned: supported as it is, nothing ran."""
    error: str | None = None


async def attempt(
    agent: Agent,
    path: Path,
    registry: Registry,
    *,
    parallel: int,
    progress: Callable[[str], None],
) -> Attempt:
    """Probe `path` and, unless its version is pinned, qualify it."""
    try:
        found = await qualification.probe(agent, path)
        if (found.agent, found.version) in registry.pinned:
            return Attempt(path, pinned=found)
        progress(f"qualifying {agent} {found.version} at {found.path} (sha256 {found.sha256})")
        judged = await qualification.qualify(
            found, registry.pinned, parallel=parallel, progress=progress
        )
    except QualifyError as exc:
        return Attempt(path, error=str(exc))
    return Attempt(path, judgement=judged)


def run(
    agent: Agent,
    paths: list[Path],
    registry: Registry,
    *,
    parallel: int,
    progress: Callable[[str], None],
) -> list[Attempt]:
    """Every candidate, one at a time (a qualification already takes both cores)."""

    async def each() -> list[Attempt]:
        return [
            await attempt(agent, path, registry, parallel=parallel, progress=progress)
            for path in paths
        ]

    return trio.run(each)


def row(judged: Judgement, now: float) -> qualifications.Qualification:
    """The state directory's row for a qualified binary."""
    if not judged.qualified:
        raise ValueError("only a qualified binary gets a row")
    return qualifications.Qualification(
        agent=judged.probe.agent,
        version=judged.probe.version,
        binary_sha256=judged.probe.sha256,
        base_profile=judged.base.id,
        plan_digest=judged.plan_digest,
        qualified_at=now,
        report=judged.report(),
    )
