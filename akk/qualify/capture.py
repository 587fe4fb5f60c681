"""Capture the fixture corpus: drive a real client through a plan, save its screens.

A plan (`akk.qualify.plans`) is played against the scenario's scripted model
in a private tmux server. Each shot writes the exact ``tmux capture-pane -p -e``
output to ``<out>/<agent>/<version>/[<folder>/][<cols>x<rows>/]<plan>[-<step>].ansi``
(the size folder only for sizes other than 120x40, the plan's own folder only
where it names one) and a ``.json`` beside it with the expected classification
(`akk.qualify.plans.labels`).

A shot takes the pane only once it is settled (`settled`): its cells and its
title unchanged for `SHOT_QUIET_SECONDS`, the title not saying the client
still works, and the pane's processes at rest (the tmux server and all it
runs: no thread running or waiting for a CPU). The cells alone do not prove
it: Codex draws a finished turn's last row, then keeps working with only its
title's spinner moving, and draws ``Worked for …`` later, on a loaded
machine more than the quiet time later. That screen in between reads
``working``; taken for the finished one, it refused a qualification that held.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import attrs
import trio

from akk.discovery.rest import at_rest
from akk.qualify.client import Client
from akk.qualify.launcher import (
    POLL_SECONDS,
    UNCONFINED,
    Confinement,
    LabSession,
    ScreenTimeout,
    launch,
)
from akk.qualify.plans.corpus import PLANS
from akk.qualify.plans.plan import (
    DEFAULT_SIZE,
    Action,
    Job,
    Paste,
    Plan,
    Press,
    Release,
    Settle,
    Shot,
    Submit,
    Type,
    WaitIdle,
    WaitLine,
    WaitText,
)
from akk.qualify.scenarios import SCENARIOS

PRESS_QUIET_SECONDS = 0.3
"""How long a screen stays still before keys are pressed on it."""

SHOT_QUIET_SECONDS = 0.4
"""How long the pane (its cells and its title) stays unchanged before a shot takes it."""

SHOT_SETTLE_SECONDS = 10.0
"""How long a shot waits for a settled pane before its job fails (not producible)."""

SHOT_ANIMATED_SECONDS = 3.0
"""How long an `animated` shot waits for a settled pane before it takes it as it is."""

BUSY_TITLE = re.compile(r"^[\u2800-\u28ff] ")
"""A pane title that says the client still works: every pinned Codex puts a Braille
spinner before its title while a turn runs, until the turn's end is drawn."""


class CaptureError(RuntimeError):
    """A plan could not be driven to its capture points."""


class Unsettled(CaptureError):
    """A shot's pane never settled before its deadline; carries the last look at it."""

    def __init__(self, message: str, look: Look) -> None:
        super().__init__(f"{message}\n--- last screen ---\n{look.screen}\n--- end of screen ---")
        self.look = look


@attrs.frozen
class Look:
    """The pane at one instant: the title its client set (OSC 0/2) and its cells."""

    title: str
    screen: str
    """The exact ``tmux capture-pane -p -e`` output."""

    @property
    def busy(self) -> bool:
        """Whether the title says the client is still working (`BUSY_TITLE`)."""
        return BUSY_TITLE.match(self.title) is not None


async def look(lab: LabSession) -> Look:
    """The pane's title and cells, read by one tmux command sequence (the same instant)."""
    out = await lab.tmux(
        *("display-message", "-p", "-t", lab.pane, "#{pane_title}"),
        ";",
        *("capture-pane", "-p", "-e", "-t", lab.pane),
    )
    # tmux drops control characters from a title, so it is the first line alone.
    title, _, screen = out.partition("\n")
    return Look(title, screen)


async def settled(
    read: Callable[[], Awaitable[Look]],
    *,
    resting: Callable[[], bool] = lambda: True,
    quiet: float = SHOT_QUIET_SECONDS,
    timeout: float = SHOT_SETTLE_SECONDS,
    animated: bool = False,
) -> str:
    """The screen once `read` gave the same look for `quiet` seconds, no busy title, and
    `resting()` held before a last read that still gave that look.

    Every read counts: any change of a cell, a style or the title starts the
    quiet time again. Which screen it is does not matter here; a settled
    screen that reads differently from its label is taken as it is, and
    refused by the comparison. Raises Unsettled after `timeout` seconds,
    unless `animated`: then the last screen is taken as it is, if its title
    does not say the client works.
    """
    seen = await read()
    since = trio.current_time()
    with trio.move_on_after(timeout):
        while True:
            quiet_yet = not seen.busy and trio.current_time() - since >= quiet
            # Rest first, then the read: a frame written before the rest is on that read.
            done = quiet_yet and resting()
            if not done:
                await trio.sleep(POLL_SECONDS)
            now = await read()
            if now != seen:
                seen, since = now, trio.current_time()
            elif done:
                return seen.screen
    if animated and not seen.busy:
        return seen.screen
    if seen.busy:
        why = f"its title says the client still works ({seen.title!r})"
    elif trio.current_time() - since >= quiet:
        why = "the client (or tmux) never came to rest"
    else:
        why = f"it kept changing (last {trio.current_time() - since:.1f} s before the deadline)"
    raise Unsettled(
        f"the pane did not settle within {timeout} s: {why}; a shot takes only a settled "
        "screen, so this one is not producible. Run it again on a less busy machine "
        "(or with fewer plan runs at a time)",
        seen,
    )


@attrs.frozen
class Captured:
    """One written fixture pair."""

    screen: Path
    label: Path


def fixture_stem(
    out: Path, client: Client, plan: str, step: str | None, cols: int, rows: int
) -> Path:
    """The path of a fixture without extension (in the plan's own folder, if `PLANS` names one)."""
    folder = out / client.agent / client.version
    own = PLANS[plan].folder if plan in PLANS else None
    if own is not None:
        folder = folder / own
    if (cols, rows) != DEFAULT_SIZE:
        folder = folder / f"{cols}x{rows}"
    return folder / (plan if step is None else f"{plan}-{step}")


async def _act(lab: LabSession, action: Action) -> None:
    match action:
        case Submit(text=text):
            await lab.submit(text if text is not None else lab.scenario.task)
        case Type(text=text):
            # On tmux's command line an argument ending in ';' ends the command
            # (the ';' is dropped); '\;' there stands for a literal ';'.
            await lab.type_text(text[:-1] + "\\;" if text.endswith(";") else text)
        case Paste(text=text):
            await lab.paste(text)
        case Press(keys=keys):
            # Keys within ~200 ms of a widget's first paint are dropped (NOTES.md):
            # press only on a screen that has been quiet for a moment.
            with contextlib.suppress(ScreenTimeout):
                await lab.wait_stable(quiet=PRESS_QUIET_SECONDS, timeout=3.0)
            for key in keys:
                await lab.send_keys(key)
        case WaitText(texts=texts, timeout=timeout):
            await lab.wait_for_screen(
                lambda screen: any(text in screen for text in texts),
                timeout,
                what=" or ".join(repr(text) for text in texts),
            )
        case WaitLine(pattern=pattern, timeout=timeout):
            await lab.wait_for_screen(
                lambda screen: pattern.search(screen) is not None,
                timeout,
                what=f"a line matching {pattern.pattern!r}",
            )
        case WaitIdle():
            await lab.wait_idle()
        case Settle(seconds=seconds):
            with contextlib.suppress(ScreenTimeout):
                await lab.wait_stable(quiet=seconds, timeout=5.0)
        case Release(signal=signal):
            lab.server.signal(signal)
        case Shot():
            raise AssertionError("shots are handled by run_plan")


async def run_plan(
    plan: Plan,
    client: Client,
    *,
    cols: int,
    rows: int,
    out: Path,
    only_step: str | None = None,
    confine: Confinement = UNCONFINED,
) -> list[Captured]:
    """Drive `plan` on `client` and write its shots (or just `only_step`) under `out`.

    `confine` may run the client under bubblewrap and at a low priority.
    """
    if not plan.applies_to(client):
        raise CaptureError(f"plan {plan.name} is not for {client.name}")
    if not plan.fits(cols, rows):
        raise CaptureError(f"plan {plan.name} is measured for {plan.sizes}, not {cols}x{rows}")
    if only_step is not None and only_step not in plan.steps:
        raise CaptureError(f"plan {plan.name} has no step {only_step!r}; steps: {plan.steps}")
    written: list[Captured] = []
    async with launch(
        client,
        SCENARIOS[plan.scenario],
        cols=cols,
        rows=rows,
        plan_mode=plan.plan_mode,
        preseed=plan.preseed,
        confine=confine,
    ) as lab:
        # The tmux server, and under it the pane's shell, the client and its children.
        server = int(await lab.tmux("display-message", "-p", "#{pid}"))
        for action in plan.actions:
            if not isinstance(action, Shot):
                await _act(lab, action)
                continue
            if only_step is not None and action.step != only_step:
                continue
            # A running turn's screen (its spinner) never settles: taken as it is.
            screen = (
                await settled(
                    lambda: look(lab),
                    resting=lambda: at_rest([server]),
                    timeout=SHOT_ANIMATED_SECONDS if action.animated else SHOT_SETTLE_SECONDS,
                    animated=action.animated,
                )
                if action.settle
                else await lab.capture()
            )
            action = attrs.evolve(action, expected=plan.expected_at(action, cols, rows))
            stem = fixture_stem(out, client, plan.name, action.step, cols, rows)
            written.append(_write(stem, screen, plan, action, client, cols, rows))
            if only_step is not None:
                break
    return written


def _write(
    stem: Path, screen: str, plan: Plan, shot: Shot, client: Client, cols: int, rows: int
) -> Captured:
    stem.parent.mkdir(parents=True, exist_ok=True)
    screen_path = stem.with_name(stem.name + ".ansi")
    label_path = stem.with_name(stem.name + ".json")
    screen_path.write_text(screen)
    label = {
        "agent": client.agent,
        "version": client.version,
        "cols": cols,
        "rows": rows,
        "plan": plan.name,
        "scenario": plan.scenario,
        "step": shot.step,
        "expected": shot.expected.to_json(),
    }
    label_path.write_text(json.dumps(label, indent=2, ensure_ascii=False) + "\n")
    return Captured(screen_path, label_path)


async def run_jobs(jobs: Sequence[Job], out: Path, *, parallel: int = 2) -> list[str]:
    """Run capture jobs, `parallel` at a time; return one line per failed job."""
    limiter = trio.CapacityLimiter(parallel)
    failures: list[str] = []

    async def one(job: Job) -> None:
        async with limiter:
            start = trio.current_time()
            try:
                with trio.fail_after(120):
                    written = await run_plan(
                        job.plan, job.client, cols=job.cols, rows=job.rows, out=out
                    )
            except (CaptureError, ScreenTimeout, trio.TooSlowError) as exc:
                first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                failures.append(f"{job.name}: {first_line}")
                print(f"FAILED {job.name}: {exc}", file=sys.stderr, flush=True)
                return
            took = trio.current_time() - start
            print(f"ok {job.name}: {len(written)} screens ({took:.1f} s)", flush=True)

    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(one, job)
    return failures
