"""Run a pinned version's capture plans on another binary, and read every screen it drew.

A trial is the IO half of a comparison (`compare` is the pure half): the jobs
of the nearest pinned version's corpus, run on the new binary in private tmux
servers against the scripted model server, then every capture classified
with the nearest version's profile read as the new version (`run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from akk.profiles.qualified import as_version
from akk.profiles.registry import Profile
from akk.qualify import capture
from akk.qualify.capture import CaptureError
from akk.qualify.client import Binary, Client
from akk.qualify.compare import Comparison, Point, compare
from akk.qualify.launcher import UNCONFINED, Confinement, LabError
from akk.qualify.plans import corpus
from akk.qualify.plans.plan import Job, Plan, Shot

JOB_TIMEOUT_S = 120.0
"""A capture job that takes longer is not producible (as in `capture.run_jobs`)."""


def jobs_for(
    client: Client,
    nearest: str,
    plans: Iterable[str] | None = None,
    *,
    select: Callable[[Job], bool] = lambda job: True,
) -> list[Job]:
    """The corpus jobs of version `nearest`, to run on `client` (every plan, or only `plans`).

    `select` keeps a subset (`akk qualify`'s plan); ValueError names an unknown
    plan, or says that none of them runs on the agent.
    """
    wanted = None if plans is None else set(plans)
    if wanted is not None and (unknown := wanted - set(corpus.PLANS)):
        raise ValueError(f"no capture plan {', '.join(sorted(unknown))}")
    stand_in = Binary(client.agent, nearest, client.binary())
    jobs: dict[Job, None] = {}
    for job in corpus.corpus_jobs([stand_in]):
        if wanted is not None and job.plan.name not in wanted:
            continue
        # A plan kept to some versions (`Plan.versions`) runs on the new one as on `nearest`.
        trial = attrs.evolve(job, client=client, plan=attrs.evolve(job.plan, versions=None))
        # Once each: `claude_variant_jobs` also lists the shared plans (echo, draft, slow)
        # for Codex, and `codex_variant_jobs` lists echo and slow at the same sizes.
        if select(trial):
            jobs.setdefault(trial, None)
    if not jobs:
        raise ValueError(f"none of the plans {sorted(wanted or ())} runs on {client.agent}")
    return list(jobs)


@attrs.frozen
class CaptureRun:
    """How a trial's capture went: why each job that failed failed, and how many ran twice."""

    jobs: int
    parallel: int
    failures: Mapping[Job, str]
    rerun: int
    """Jobs that failed as on a busy machine (`BUSY`) and ran once more, alone."""
    retaken: int = 0
    """Jobs with a screen that read differently, run once more alone (`run`, `retaken`)."""

    def describe(self) -> str:
        """The capture phase's line in a report."""
        again = f", {self.rerun} run again alone" if self.rerun else ""
        read = (
            f", {self.retaken} retaken alone for a screen read differently" if self.retaken else ""
        )
        return (
            f"{self.jobs} plan runs, {self.parallel} at a time{again}{read}, "
            f"{len(self.failures)} failed"
        )


@attrs.frozen
class TrialRun:
    """A trial's captures, what each screen read, and how long each half took."""

    captured: CaptureRun
    comparisons: tuple[Comparison, ...]
    capture_seconds: float
    classify_seconds: float


async def run(
    jobs: Sequence[Job],
    out: Path,
    profile: Profile,
    *,
    fixtures: Path | None,
    parallel: int = 2,
    confine: Confinement = UNCONFINED,
    progress: Callable[[str], None] = lambda line: None,
) -> TrialRun:
    """Capture `jobs` under `out` (`capture_jobs`), and read every screen (`classify_job`).

    A job with a screen that read differently runs once more, alone, and its screens
    are read again (`retaken`); its second reading is the one judged. A screen taken as
    the pane moved (`Shot.settle` off, or `animated`) is the pane at one instant, which a
    loaded machine may have caught between two drawings (a popup not filled yet), so such
    a job always runs again. A settled screen runs again only while at most
    `RETAKE_SETTLED` jobs differ: a loaded machine once drew one (Claude's recalled
    history at 80x24) that read differently and never did so again, while a changed
    client differs the same way on every run, so its retake refuses it too, and many
    differing jobs are a changed client, not a loaded moment. The reading runs in a
    worker thread: it is seconds of CPU, and `akk serve --auto-qualify` runs a
    qualification on the server's own event loop.
    """
    classify_s = 0.0

    async def read(
        chosen: Sequence[Job], failures: Mapping[Job, str]
    ) -> dict[Job, list[Comparison]]:
        nonlocal classify_s
        start = time.monotonic()
        found = await trio.to_thread.run_sync(
            lambda: {job: classify_job(job, failures, profile, out, fixtures) for job in chosen}
        )
        classify_s += time.monotonic() - start
        return found

    start = time.monotonic()
    captured = await capture_jobs(jobs, out, parallel=parallel, confine=confine, progress=progress)
    capture_s = time.monotonic() - start
    readings = await read(jobs, captured.failures)
    again = retaken(jobs, readings)
    if again:
        for job in again:
            shown = ", ".join(
                c.point.step or c.point.plan for c in readings[job] if c.status == "differs"
            )
            progress(f"{job.name} read differently ({shown}): it runs again, alone")
        failures = dict(captured.failures)
        start = time.monotonic()
        await _run(again, out, 1, failures, confine, progress)
        capture_s += time.monotonic() - start
        captured = attrs.evolve(captured, failures=failures, retaken=len(again))
        readings |= await read(again, failures)
    comparisons = tuple(compared for job in jobs for compared in readings[job])
    return TrialRun(captured, comparisons, capture_s, classify_s)


RETAKE_SETTLED = 3
"""At most this many jobs with a settled screen that read differently run again (`run`)."""


def retaken(jobs: Sequence[Job], readings: Mapping[Job, Sequence[Comparison]]) -> list[Job]:
    """The jobs `run` runs once more: every one with a moving screen that read differently,
    and those with a settled one while at most `RETAKE_SETTLED` of them differ."""
    moved: list[Job] = []
    settled: list[Job] = []
    for job in jobs:
        differing = [
            shot
            for shot, compared in zip(_shots(job.plan), readings[job], strict=True)
            if compared.status == "differs"
        ]
        if any(not shot.settle or shot.animated for shot in differing):
            moved.append(job)
        elif differing:
            settled.append(job)
    chosen = set(moved) | (set(settled) if len(settled) <= RETAKE_SETTLED else set())
    return [job for job in jobs if job in chosen]


BUSY = (capture.Unsettled, trio.TooSlowError)
"""Failures a busy machine causes: a pane that never settled, a job out of time."""


async def capture_jobs(
    jobs: Sequence[Job],
    out: Path,
    *,
    parallel: int = 2,
    confine: Confinement = UNCONFINED,
    progress: Callable[[str], None] = lambda line: None,
) -> CaptureRun:
    """Run capture jobs as `capture.run_jobs` does, `parallel` at a time.

    Unlike `run_jobs`, any lab failure of one job (a client that never reaches
    its composer, a tmux error) only fails that job: a new version may well
    not start the way a pinned one does. A job that failed as on a busy
    machine (`BUSY`) runs once more when all the others are done, alone: what
    its refusal would tell a person to do. `progress` gets one line per run.
    """
    failures: dict[Job, str] = {}
    busy = await _run(jobs, out, parallel, failures, confine, progress)
    if busy:
        progress(f"{len(busy)} plan runs failed as on a busy machine: each runs again, alone")
        await _run(busy, out, 1, failures, confine, progress)
    return CaptureRun(len(jobs), parallel, failures, len(busy))


async def _run(
    jobs: Sequence[Job],
    out: Path,
    parallel: int,
    failures: dict[Job, str],
    confine: Confinement,
    progress: Callable[[str], None],
) -> list[Job]:
    """Run `jobs`, recording in `failures` why each failed (and forgetting an earlier failure
    of one that now ran); the jobs that failed as on a busy machine, in their order."""
    limiter = trio.CapacityLimiter(parallel)
    busy: set[Job] = set()

    async def one(job: Job) -> None:
        async with limiter:
            start = trio.current_time()
            try:
                with trio.fail_after(JOB_TIMEOUT_S):
                    written = await capture.run_plan(
                        job.plan, job.client, cols=job.cols, rows=job.rows, out=out, confine=confine
                    )
            except (CaptureError, LabError, trio.TooSlowError) as exc:
                text = str(exc).strip()
                failures[job] = f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
                progress(f"FAILED {job.name}: {failures[job]}")
                if isinstance(exc, BUSY):
                    busy.add(job)
                return
            failures.pop(job, None)
            took = trio.current_time() - start
            progress(f"ok {job.name}: {len(written)} screens ({took:.1f} s)")

    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(one, job)
    return [job for job in jobs if job in busy]


def _shots(plan: Plan) -> list[Shot]:
    return [action for action in plan.actions if isinstance(action, Shot)]


def classify_job(
    job: Job,
    failures: Mapping[Job, str],
    profile: Profile,
    out: Path,
    fixtures: Path | None,
) -> list[Comparison]:
    """Every capture point of `job` under `out`, in its plan's order, read with `profile` as
    the new version.

    With `fixtures` (a source checkout's corpus), each is also compared with
    `profile`'s own version's committed screen of the same point.
    """
    comparisons = []
    new_profile = as_version(profile, job.client.version)
    pinned = Binary(job.client.agent, profile.version, job.client.binary())
    for shot in _shots(job.plan):
        point = Point(job.plan.name, shot.step, job.cols, job.rows)
        size = point.cols, point.rows
        new_stem = capture.fixture_stem(out, job.client, point.plan, shot.step, *size)
        old_screen = None
        if fixtures is not None:
            old_stem = capture.fixture_stem(fixtures, pinned, point.plan, shot.step, *size)
            old_screen = _read(old_stem)
        compared = compare(
            point,
            job.plan.expected_at(shot, job.cols, job.rows).to_json(),
            old_screen,
            _read(new_stem),
            profile,
            new_profile,
            failure=failures.get(job),
        )
        if fixtures is None and compared.status != "not_producible":
            compared = attrs.evolve(compared, note=None)  # no fixture was looked for
        comparisons.append(compared)
    return comparisons


def _read(stem: Path) -> str | None:
    screen = stem.with_name(stem.name + ".ansi")
    return screen.read_text() if screen.is_file() else None
