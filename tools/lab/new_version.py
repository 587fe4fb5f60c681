"""``python -m tools.lab new-version AGENT VERSION``: what an unpinned version draws differently.

The pipeline, one phase after the other, each timed:

1. install: the version goes into the lab cache like a pinned one (npm, then its
   ``--version`` line verified), without joining `clients.PINNED`;
2. capture: every capture plan of the corpus (`plans.corpus.corpus_jobs`), at every
   size and variant, exactly as `capture --all` would for the NEAREST pinned
   version of the agent (`compare.nearest`), written into a scratch directory,
   never into fixtures/ (`trial.run`);
3. classify: every capture under the nearest version's profile read as VERSION,
   and the nearest version's committed fixture of the same capture point under
   its own profile (`trial.classify_job`); a run whose screen taken as it moved read
   differently is captured and read once more, alone (`trial.run`).

The report (`compare.report`) then says, per plan, step and size, whether the
capture classifies the way the committed fixture does, and for each that
differs the label, both outcomes, and the rows that differ. With it, adding the
version is a data row (profile, PINNED) plus its fixtures. `akk qualify` is the
same comparison, run by a user on their own binary, without fixtures.
"""

from __future__ import annotations

import collections
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
import trio

from akk.profiles.registry import PROFILES
from akk.qualify import compare, trial
from akk.qualify.client import Agent
from akk.qualify.row_diff import DEFAULT_MAX_ROWS
from tools.lab import clients
from tools.lab.clients import FIXTURES, Client
from tools.lab.installer import InstallError, install


def nearest_pinned(agent: str, version: str, pinned: Iterable[Client] = clients.PINNED) -> Client:
    """The pinned client `compare.nearest` picks for `version` (LookupError: none pinned)."""
    own = [c for c in pinned if c.agent == agent]
    if not own:
        raise LookupError(f"no pinned {agent} version")
    chosen = compare.nearest(version, (c.version for c in own))
    return next(c for c in own if c.version == chosen)


@attrs.frozen
class Result:
    """A finished run: the comparisons in corpus order, and the phase timings."""

    client: Client
    nearest: Client
    comparisons: tuple[compare.Comparison, ...]
    phases: tuple[compare.Phase, ...]
    out: Path

    def text(self, *, where: str | None = None, max_rows: int = DEFAULT_MAX_ROWS) -> str:
        """The report."""
        return compare.report(
            self.client.agent,
            self.client.version,
            self.nearest.version,
            self.comparisons,
            self.phases,
            baseline=f"fixtures/{self.client.agent}/{self.nearest.version}/",
            where=where,
            max_rows=max_rows,
        )


def check_out(out: Path) -> None:
    """Refuse an output directory that holds or is inside the committed corpus."""
    where = out.absolute()
    if where.is_relative_to(FIXTURES) or FIXTURES.is_relative_to(where):
        raise ValueError(f"{out} holds or is inside {FIXTURES}: new-version never writes there")


async def run(
    agent: Agent,
    version: str,
    out: Path,
    *,
    plans: Iterable[str] | None = None,
    parallel: int = 2,
    cache: Path | None = None,
) -> Result:
    """Install `version`, capture the corpus of its nearest pinned version with it, compare.

    Raises InstallError if the version cannot be installed and verified, and
    ValueError for a malformed version or an unknown plan name.
    """
    compare.version_key(version)
    nearest = nearest_pinned(agent, version)
    client = Client(agent, version)
    jobs = trial.jobs_for(client, nearest.version, plans)
    check_out(out)

    start = time.monotonic()
    installed = await trio.to_thread.run_sync(install, client, cache)
    install_s = time.monotonic() - start
    install_note = "npm install, --version verified" if installed.fresh else "already installed"

    target = out / client.agent / client.version
    shutil.rmtree(target, ignore_errors=True)  # from scratch, as `capture --all`
    profile = PROFILES[(nearest.agent, nearest.version)]
    ran = await trial.run(
        jobs, out, profile, fixtures=FIXTURES, parallel=parallel,
        progress=lambda line: print(line, file=sys.stderr),
    )  # fmt: skip
    phases = (
        compare.Phase("install", install_s, install_note),
        compare.Phase("capture", ran.capture_seconds, ran.captured.describe()),
        compare.Phase("classify", ran.classify_seconds),
    )
    return Result(client, nearest, ran.comparisons, phases, out)


def main(
    agent: Agent,
    version: str,
    *,
    out: Path | None,
    plans: Sequence[str] | None,
    parallel: int,
    max_rows: int,
) -> int:
    """The `new-version` command: print the report; exit 0 only if every screen is the same."""
    scratch = out is None
    root = Path(tempfile.mkdtemp(prefix="akk-new-version-")) if out is None else out
    began = time.monotonic()
    try:
        try:
            result = trio.run(lambda: run(agent, version, root, plans=plans, parallel=parallel))
        except (InstallError, ValueError, LookupError) as exc:
            print(f"new-version failed: {exc}", file=sys.stderr)
            return 2
        where = (
            f"{root} (a temp dir, removed now; pass --out DIR to keep them)"
            if scratch
            else str(root)
        )
        text = result.text(where=where, max_rows=max_rows)
        text += f"wall clock: {time.monotonic() - began:.1f} s\n"
        print(text, end="")
        if not scratch:
            (root / f"new-version-{agent}-{version}.txt").write_text(text)
        counts = collections.Counter(c.status for c in result.comparisons)
        return 0 if counts["same"] == len(result.comparisons) else 1
    finally:
        if scratch:
            shutil.rmtree(root, ignore_errors=True)
