"""What a new binary writes to its own file: one real Turn, read with AKK's evidence parsers.

AKK ends a managed Turn `done` only when the agent's own file says so (the
Claude transcript, the Codex rollout). A qualified version must write that file
the way the nearest pinned version does: one echo Turn runs in a lab pane, and
the parse must show the task accepted (its exact text, by digest), the Turn
done with the model's reply as its final message, and its usage counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from akk.evidence import claude, codex
from akk.evidence.files import identify, read_lines, records
from akk.evidence.model import EvidenceLost, Progress, Record, Tokens, request_digest
from akk.qualify.client import Client
from akk.qualify.launcher import POLL_SECONDS, Confinement, LabError, ScreenTimeout, launch
from akk.qualify.scenarios import ECHO_REPLY, ECHO_TASK, SCENARIOS

TURN_TIMEOUT_S = 60.0
"""From Enter to the file's proof of the outcome."""


@attrs.frozen
class EvidenceCheck:
    """What the file proved; `problems` empty means every check held."""

    file: str | None
    accepted: bool
    outcome: str | None
    final_message: str | None
    usage: dict[str, int] | None
    usage_status: str | None
    problems: tuple[str, ...]
    ran: bool = True
    """False when the lab could not start the client and send it the task (`problems` says
    why): nothing else of the qualification can run either."""
    screen: str | None = None
    """The last screen the lab saw when it waited in vain for one (`ran` False)."""

    def describe(self) -> str:
        """One line for the report (and the last screen seen, when the lab could not run)."""
        if not self.problems:
            return (
                f"evidence: accepted, {self.outcome}, final message {self.final_message!r}, "
                f"usage {self.usage} ({self.usage_status})"
            )
        line = "evidence: " + "; ".join(self.problems)
        if self.screen is None:
            return line
        shown = [f"  | {row}" for row in self.screen.rstrip().splitlines()]
        return "\n".join([line, "  the last screen the lab saw:", *shown])


def parse(agent: str, found: Sequence[Record], task: str) -> Progress | None:
    """The Turn whose prompt is `task` among `found` (None: no record of it yet)."""
    digest = request_digest(task)
    module = claude if agent == "claude" else codex
    anchor = next((i for i, r in enumerate(found) if module.is_request(r.data, digest)), None)
    if anchor is None:
        return None
    if agent == "claude":
        return claude.progress(found, anchor)
    # The lab session is new: its running total starts at zero.
    return codex.progress(found, anchor, Tokens.zero())


def judge(file: str | None, progress: Progress | None) -> EvidenceCheck:
    """The checks on one Turn's parse: accepted, done with the reply, usage counted."""
    if progress is None:
        return EvidenceCheck(file, False, None, None, None, None, ("the task was never accepted",))
    problems = []
    if progress.outcome != "done":
        problems.append(f"outcome {progress.outcome}, not done ({progress.failure or 'no end'})")
    if progress.final_message is None or ECHO_REPLY not in progress.final_message:
        problems.append(f"final message {progress.final_message!r}, not the model's reply")
    usage = progress.usage
    if usage is None or usage.input + usage.cache_read + usage.cache_write <= 0:
        problems.append(f"no input tokens counted ({usage})")
    elif usage.output <= 0:
        problems.append(f"no output tokens counted ({usage})")
    return EvidenceCheck(
        file,
        progress.accepted,
        progress.outcome,
        progress.final_message,
        None if usage is None else attrs.asdict(usage),
        progress.usage_status.value,
        tuple(problems),
    )


async def check(client: Client, *, confine: Confinement) -> EvidenceCheck:
    """Run one echo Turn on `client` and judge what its own file says about it.

    A client the lab cannot start, or that never shows its idle composer or
    the task, is a failed check (`ran` False) with what the lab saw, never an
    error; its processes are gone when this returns.
    """
    try:
        async with launch(client, SCENARIOS["echo"], confine=confine) as lab:
            await lab.submit(ECHO_TASK)
            file: str | None = None
            progress: Progress | None = None
            with trio.move_on_after(TURN_TIMEOUT_S):
                while True:
                    file, progress = _read(client.agent, lab.transcript_files())
                    if progress is not None and progress.outcome is not None:
                        break
                    await trio.sleep(POLL_SECONDS)
            return judge(file, progress)
    except LabError as exc:
        said = str(exc).strip().splitlines()
        problem = f"the lab could not run the echo Turn: {said[0] if said else type(exc).__name__}"
        screen = exc.screen if isinstance(exc, ScreenTimeout) else None
        return EvidenceCheck(None, False, None, None, None, None, (problem,), False, screen)


def _read(agent: str, paths: Sequence[Path]) -> tuple[str | None, Progress | None]:
    for path in reversed(paths):
        identified = identify(str(path))
        if identified is None:
            continue
        try:
            found = records(read_lines(identified[0], 0))
        except EvidenceLost:
            continue
        progress = parse(agent, found, ECHO_TASK)
        if progress is not None:
            return str(path), progress
    return (str(paths[-1]) if paths else None), None
