"""What `akk qualify AGENT` qualifies, and what a qualified binary's row says.

Without ``--binary`` the candidates are the binaries a running server sees in
its panes of that agent that bind no profile (the terminals table of the
state directory's store), else the agent's command on PATH (an npm wrapper
there stands for the native binary it starts: `pin`). Each candidate is
pinned and probed (`qualification.pinned`); a pinned version needs nothing,
every other one runs the whole plan, one at a time. Each candidate ends with
its own result, whatever the others do: a judgement (qualified or refused,
with the reason), or why there was nothing to judge.
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
from akk.qualify.launcher import LabError
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
    """Pin and probe `path` and, unless its version is pinned, qualify its copy.

    Never raises for the binary or the lab: what went wrong is the attempt's `error`.
    """
    try:
        async with qualification.pinned(agent, path) as found:
            if (found.agent, found.version) in registry.pinned:
                return Attempt(path, pinned=found)
            progress(f"qualifying {agent} {found.version} at {found.path} (sha256 {found.sha256})")
            judged = await qualification.qualify(
                found, registry.pinned, parallel=parallel, progress=progress
            )
    except (QualifyError, LabError) as exc:
        said = str(exc).strip().splitlines()
        return Attempt(path, error=said[0] if said else type(exc).__name__)
    return Attempt(path, judgement=judged)


def run(
    agent: Agent,
    paths: list[Path],
    registry: Registry,
    *,
    parallel: int,
    progress: Callable[[str], None],
    finished: Callable[[Attempt], None] = lambda attempt: None,
) -> list[Attempt]:
    """Every candidate, one at a time (a qualification already takes both cores).

    `finished` gets each attempt as it ends (to record a qualified row before the
    next candidate starts).
    """

    async def each() -> list[Attempt]:
        attempts = []
        for path in paths:
            attempts.append(
                await attempt(agent, path, registry, parallel=parallel, progress=progress)
            )
            finished(attempts[-1])
        return attempts

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
