"""One qualification: a user's own client binary, run offline through the plan, then judged.

The phases, each timed:

1. probe: the binary pinned (`pinned`: hashed while copied into a private
   directory, the copy checked), then the version the copy prints for
   ``--version``, in a throwaway HOME; every later phase runs the copy only;
2. evidence: one echo Turn, and what the client's own file says about it
   (`evidence.check`); a client the lab cannot drive that far is refused here;
   headless (Claude): the stream-json protocol the headless backend relies on,
   through the backend's own code (`headless.prove`; reported, it does not
   decide: the headless backend runs the binary only when it held);
3. capture: the nearest pinned version's capture plans (`trial.jobs_for`) at
   the sizes users have (`QUALIFY_SIZES`), each in a private tmux server
   against the scripted model server, the client under bubblewrap with the
   person's HOME hidden where bubblewrap is present;
4. classify: every screen read with the nearest version's profile as this
   version (`trial.run`), held to its label;
5. schema (Codex): the binary's app-server bundle against the nearest pinned
   one (reported; it does not decide).

The binary is qualified only when every screen reads exactly as its label and
the evidence checks hold. Nothing here reads or writes the person's HOME,
sessions or account: every run has its own HOME (and CODEX_HOME) in a temp
directory, and talks only to the model server on loopback.
"""

from __future__ import annotations

import collections
import enum
import functools
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.discovery.process import VersionCache
from akk.profiles.registry import Profile
from akk.qualify import appserver, compare, evidence, headless, pin, trial
from akk.qualify.appserver import SchemaCheck, SchemaError
from akk.qualify.client import Agent, Binary
from akk.qualify.headless import HeadlessProof
from akk.qualify.launcher import Confinement
from akk.qualify.parallel import PARALLEL
from akk.qualify.plans.plan import Job
from akk.qualify.row_diff import DEFAULT_MAX_ROWS

QUALIFY_SIZES: tuple[tuple[int, int], ...] = ((120, 40), (80, 24), (100, 30))
"""The pane sizes the plan runs at: the default, the narrow 80x24, and a laptop split.

The corpus also holds 132x43 and 200x50; wider panes wrap less, and running
them too takes Claude past the 5-minute target on 2 cores.
"""


class QualifyError(RuntimeError):
    """The binary cannot be qualified at all (not found, no version, already pinned...)."""


@attrs.frozen
class Probe:
    """The binary as found: what it says it is, and the digest a pane's binary must match."""

    agent: Agent
    version: str
    path: Path
    """The file qualified (its real path; for an npm wrapper, its native binary): what the
    report names."""
    sha256: str
    seconds: float = 0.0
    """How long the probe took (the report's first phase)."""
    copy: Path | None = None
    """The private copy of `path` that every run of the qualification starts; it exists
    only inside `pinned`'s block (None: not pinned, nothing may run it)."""


@asynccontextmanager
async def pinned(agent: Agent, binary: Path, *, sha256: str | None = None) -> AsyncIterator[Probe]:
    """Pin ``binary`` (`pin.pinned`: a private copy of the file hashed) and probe the copy.

    The copy prints its version for ``--version`` in a throwaway HOME; nothing
    else ever runs for the probe. ``sha256`` is the hash the binary must have
    (what a pane runs): another is refused before anything runs. Raises
    QualifyError with the reason (no file, owned or writable by others, an npm
    wrapper without its binary, another hash, no version). The copy is gone
    when the block ends.
    """
    start = time.monotonic()
    async with AsyncExitStack() as stack:
        try:
            held = await stack.enter_async_context(pin.pinned(agent, binary, sha256=sha256))
        except pin.PinError as exc:
            raise QualifyError(str(exc)) from None
        version = await VersionCache().version_of_program(agent, [str(held.runs)])
        if version is None:
            raise QualifyError(f"{held.named} printed no {agent} version for --version")
        try:
            compare.version_key(version)
        except ValueError as exc:
            raise QualifyError(f"{held.named}: {exc}") from None
        seconds = time.monotonic() - start
        yield Probe(agent, version, held.named, held.sha256, seconds, copy=held.runs)


def plan(client: Binary, nearest: str, plans: Iterable[str] | None = None) -> list[Job]:
    """The jobs a qualification runs: `nearest`'s whole corpus (or only `plans`) at
    `QUALIFY_SIZES`."""
    return trial.jobs_for(
        client, nearest, plans, select=lambda job: (job.cols, job.rows) in QUALIFY_SIZES
    )


def plan_digest(jobs: Iterable[Job]) -> str:
    """SHA-256 of the plan's canonical JSON: every plan's actions and labels, and each size."""
    described = sorted(
        json.dumps(
            {
                "plan": attrs.asdict(job.plan, value_serializer=_canonical),
                "size": [job.cols, job.rows],
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        for job in jobs
    )
    return hashlib.sha256("\n".join(described).encode()).hexdigest()


def _canonical(_: object, __: object, value: Any) -> Any:
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, re.Pattern):
        return {"pattern": value.pattern, "flags": value.flags}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


@attrs.frozen
class Judgement:
    """A finished qualification: the verdict and everything that led to it."""

    probe: Probe
    base: Profile
    """The nearest pinned version's profile, which a qualified binary is read with."""
    plan_digest: str
    comparisons: tuple[compare.Comparison, ...]
    evidence: evidence.EvidenceCheck
    schema: SchemaCheck | None
    """Codex only; None for Claude, or when the binary printed no bundle (see `schema_note`)."""
    schema_note: str | None
    sandboxed: bool
    phases: tuple[compare.Phase, ...]
    partial: tuple[str, ...] = ()
    """The only plans that ran, for a partial check (empty: the whole plan ran)."""
    headless: HeadlessProof | None = None
    """Claude only: the headless proof (reported; the headless backend reads it)."""

    @property
    def qualified(self) -> bool:
        """Every screen reads exactly as its label and the evidence checks hold."""
        return bool(self.comparisons) and not self.problems

    @property
    def unproduced_only(self) -> bool:
        """Refused only because some screens could not be produced: every other screen
        reads as its label, the evidence holds and the whole plan ran. A busy machine
        does this; the same binary may qualify on a quieter one."""
        statuses = {c.status for c in self.comparisons}
        return (
            "not_producible" in statuses
            and statuses <= {"same", "not_producible"}
            and not (self.evidence.problems or self.partial)
        )

    @property
    def problems(self) -> list[str]:
        """Why it is refused, one line per failing check (empty: qualified)."""
        counts = collections.Counter(c.status for c in self.comparisons)
        found = []
        if counts["differs"]:
            found.append(f"{counts['differs']} screens read differently from their labels")
        if counts["not_producible"]:
            found.append(f"{counts['not_producible']} screens could not be produced")
        found += [f"evidence: {problem}" for problem in self.evidence.problems]
        if self.partial:
            found.append(f"only {', '.join(self.partial)} ran: a partial check qualifies nothing")
        return found

    def text(self, *, max_rows: int = DEFAULT_MAX_ROWS) -> str:
        """The readable report: the comparison's, then evidence, schema and the verdict."""
        probe = self.probe
        body = compare.report(
            probe.agent,
            probe.version,
            self.base.version,
            self.comparisons,
            self.phases,
            max_rows=max_rows,
        )
        lines = [
            f"binary: {probe.path} (sha256 {probe.sha256})",
            "isolation: bubblewrap, the person's HOME hidden"
            if self.sandboxed
            else "isolation: a private HOME by environment only (bubblewrap not found)",
            f"plan: {len(self.comparisons)} screens, digest {self.plan_digest}",
            body.rstrip("\n"),
            self.evidence.describe(),
        ]
        if probe.agent == "codex":
            lines.append(
                self.schema.describe() if self.schema else f"app-server schema: {self.schema_note}"
            )
        if self.headless is not None:
            lines.append(self.headless.describe())
        if self.qualified:
            lines.append(f"QUALIFIED: {probe.agent} {probe.version}, read as {self.base.id}")
        else:
            lines.append(f"REFUSED: {probe.agent} {probe.version}: " + "; ".join(self.problems))
        return "\n".join(lines) + "\n"

    def report(self) -> dict[str, Any]:
        """The report as JSON data (`--json`, and the stored row's report)."""
        counts = collections.Counter(c.status for c in self.comparisons)
        return {
            "agent": self.probe.agent,
            "version": self.probe.version,
            "binary": str(self.probe.path),
            "binary_sha256": self.probe.sha256,
            "base_profile": self.base.id,
            "plan_digest": self.plan_digest,
            "qualified": self.qualified,
            "problems": self.problems,
            "sandboxed": self.sandboxed,
            "partial": list(self.partial),
            "phases": [attrs.asdict(phase) for phase in self.phases],
            "screens": {status: counts[status] for status in ("same", "differs", "not_producible")},
            "differing": [_differing(c) for c in self.comparisons if c.status != "same"],
            "evidence": attrs.asdict(self.evidence),
            "schema": None if self.schema is None else attrs.asdict(self.schema),
            "schema_note": self.schema_note,
            "headless": None if self.headless is None else self.headless.to_json(),
        }


def _differing(c: compare.Comparison) -> dict[str, Any]:
    return {
        "screen": c.point.name,
        "status": c.status,
        "expected": compare.describe_expected(c.expected),
        "pinned_read_as": None if c.old is None else c.old.describe(),
        "read_as": None if c.new is None else c.new.describe(),
        "note": c.note,
        "rows": [attrs.asdict(row) for row in c.rows],
        "drawn": list(c.drawn),
    }


def nearest_profile(agent: str, version: str, pinned: Mapping[tuple[str, str], Profile]) -> Profile:
    """The profile of the nearest pinned version; QualifyError if `version` is itself pinned."""
    if (agent, version) in pinned:
        raise QualifyError(f"{agent} {version} is pinned: AKK supports it as it is")
    versions = [v for a, v in pinned if a == agent]
    try:
        return pinned[(agent, compare.nearest(version, versions))]
    except LookupError:
        raise QualifyError(f"no pinned {agent} version to read {version} with") from None


def corpus() -> Path | None:
    """The pinned versions' committed screens, when AKK runs from its source checkout.

    With them the report sets each differing capture's rows against the pinned
    version's own screen, row by row and cell by cell; without them it shows
    the capture's rows as drawn.
    """
    found = Path(__file__).resolve().parents[2] / "fixtures"
    return found if found.is_dir() else None


def sandbox_available() -> bool:
    """Whether bubblewrap is here (it is a bootstrap dependency, but a user may lack it)."""
    return shutil.which("bwrap") is not None


async def qualify(
    found: Probe,
    pinned: Mapping[tuple[str, str], Profile],
    *,
    parallel: int = PARALLEL,
    sandbox: bool | None = None,
    niceness: int = 0,
    plans: Iterable[str] | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> Judgement:
    """Run the plan on `found`'s pinned copy and judge it against the nearest pinned profile.

    `sandbox` None: bubblewrap when present. `niceness` lowers the priority of
    every process a run starts (`akk serve --auto-qualify` passes 19). `plans`
    runs only those capture plans: a check that can refuse, never a whole qualification (`command`
    runs the whole plan). A client the lab cannot start and drive through one
    echo Turn (`evidence.check`) is refused at once, with what the lab saw.
    Raises QualifyError when there is nothing to qualify against
    (`nearest_profile`), or `found` is not pinned (only `pinned`'s copy runs).
    """
    if found.copy is None:
        raise QualifyError(f"{found.path} is not pinned: a qualification runs only its copy")
    base = nearest_profile(found.agent, found.version, pinned)
    client = Binary(found.agent, found.version, found.copy)
    chosen = None if plans is None else tuple(plans)
    jobs = plan(client, base.version, chosen)
    sandboxed = sandbox_available() if sandbox is None else sandbox
    confine = Confinement(sandbox=sandboxed, niceness=niceness)
    phases = [compare.Phase("probe", found.seconds, "SHA-256, private copy, --version")]
    judged = functools.partial(
        Judgement, found, base, plan_digest(jobs), sandboxed=sandboxed, partial=chosen or ()
    )
    start = time.monotonic()
    checked = await evidence.check(client, confine=confine)
    phases.append(compare.Phase("evidence", time.monotonic() - start, "one echo Turn"))
    progress(checked.describe())
    if not checked.ran:
        # Every plan run would fail the same way, each after its own wait.
        unrun = "not generated: the client did not run" if found.agent == "codex" else None
        return judged((), checked, None, unrun, phases=tuple(phases))
    proof: HeadlessProof | None = None
    if found.agent == "claude":
        proof = await headless.prove(found.copy, found.version, confine=confine)
        phases.append(compare.Phase("headless", proof.seconds, "stream-json, two processes"))
        progress(proof.describe())

    out = Path(tempfile.mkdtemp(prefix="akk-qualify-"))
    try:
        ran = await trial.run(
            jobs, out, base, fixtures=corpus(), parallel=parallel, confine=confine,
            progress=progress,
        )  # fmt: skip
        phases.append(compare.Phase("capture", ran.capture_seconds, ran.captured.describe()))
        phases.append(compare.Phase("classify", ran.classify_seconds))
    finally:
        # Shielded: a qualification cancelled (a server stopping) must not leave its screens.
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(lambda: shutil.rmtree(out, ignore_errors=True))

    schema: SchemaCheck | None = None
    note: str | None = None
    if found.agent == "codex":
        start = time.monotonic()
        try:
            bundle = await trio.to_thread.run_sync(appserver.generate, found.copy)
            schema = await trio.to_thread.run_sync(appserver.check, bundle, base.version)
        except (SchemaError, OSError, subprocess.SubprocessError) as exc:
            note = f"not generated: {exc}"
        phases.append(compare.Phase("schema", time.monotonic() - start))
    return judged(ran.comparisons, checked, schema, note, phases=tuple(phases), headless=proof)
