"""What a capture plan is: data that drives one scenario to the screens to capture.

A plan names the scenario to play, the launch options, and a list of actions
(submit the task, type, press keys, wait for text, release a signal) with
`Shot`s at the points to capture; a `Job` is one plan on one client at one
pane size. `akk.qualify.capture` runs them.
"""

from __future__ import annotations

import re

import attrs

from akk.qualify.client import Agent, Client
from akk.qualify.plans.labels import Expected
from akk.qualify.run_files import Preseed

SIZES: tuple[tuple[int, int], ...] = ((120, 40), (80, 24))
"""The sizes the corpus is captured at: the default and the narrow one."""

DEFAULT_SIZE = (120, 40)


@attrs.frozen
class Submit:
    """Type a message and press Enter (the scenario's task when text is None)."""

    text: str | None = None


@attrs.frozen
class Type:
    """Type characters, one key press each."""

    text: str


@attrs.frozen
class Paste:
    """Paste text as AKK does: a tmux buffer, then ``paste-buffer -p -r`` (bracketed)."""

    text: str


@attrs.frozen
class Press:
    """Press tmux keys in order (``Down``, ``Enter``, ``Tab``...)."""

    keys: tuple[str, ...]


@attrs.frozen
class WaitText:
    """Wait until any of the texts shows on the plain screen."""

    texts: tuple[str, ...]
    timeout: float = 20.0


@attrs.frozen
class WaitLine:
    """Wait until `pattern` (anchored per line with ``^``) matches the plain screen."""

    pattern: re.Pattern[str]
    timeout: float = 20.0


@attrs.frozen
class WaitIdle:
    """Wait for the idle, empty composer."""


@attrs.frozen
class Settle:
    """Wait until the screen has been still for `seconds` (a fresh composer may drop keys)."""

    seconds: float


@attrs.frozen
class Release:
    """Send a signal to the model server (e.g. end a held stream)."""

    signal: str


@attrs.frozen
class Shot:
    """Capture the screen here as `<plan>-<step>` with its expected classification.

    `settle` takes the screen only once the pane has come to rest: its cells
    and title unchanged for a moment, the title not saying the client still
    works, its processes at rest (`capture.settled`); a pane that never does
    fails the job. Without it the screen is taken as it is: a running turn's
    spinner never rests.
    """

    step: str | None
    expected: Expected
    settle: bool = True
    animated: bool = False
    """The screen may animate for as long as it shows (Codex 0.155.1 turns a logo above
    its trust question): settled if it comes to rest, else taken as it is after a
    short wait, unless its title says the client works."""


Action = Submit | Type | Paste | Press | WaitText | WaitLine | WaitIdle | Settle | Release | Shot


@attrs.frozen
class Plan:
    """How to drive one scenario to its capture points."""

    name: str
    scenario: str
    agents: frozenset[Agent]
    actions: tuple[Action, ...]
    plan_mode: bool = False
    preseed: Preseed = attrs.field(factory=Preseed)
    versions: frozenset[str] | None = None
    """Only these versions of the agents (None: every pinned version)."""
    sizes: tuple[tuple[int, int], ...] | None = None
    """Only these pane sizes, the ones its texts are measured for (None: every size)."""
    folder: str | None = None
    """A folder of its own under the version's, outside the screens the profile tests glob."""
    unreadable_sizes: tuple[tuple[int, int], ...] = ()
    """Pane sizes where the client draws the prompt cut off (taller than the pane): every
    shot there is expected `unknown`, a screen AKK must not act on."""

    def fits(self, cols: int, rows: int) -> bool:
        """Whether the plan's labels hold at this pane size."""
        return self.sizes is None or (cols, rows) in self.sizes

    def expected_at(self, shot: Shot, cols: int, rows: int) -> Expected:
        """`shot`'s label at this pane size: ``unknown`` where the prompt is cut off."""
        return Expected("unknown") if (cols, rows) in self.unreadable_sizes else shot.expected

    def applies_to(self, client: Client) -> bool:
        """Whether the plan runs on this pinned client."""
        if client.agent not in self.agents:
            return False
        return self.versions is None or client.version in self.versions

    @property
    def steps(self) -> list[str | None]:
        """The capture points, in order."""
        return [action.step for action in self.actions if isinstance(action, Shot)]


@attrs.frozen
class Job:
    """One plan on one client at one size."""

    plan: Plan
    client: Client
    cols: int
    rows: int

    @property
    def name(self) -> str:
        """For progress and failure lines."""
        return f"{self.client.name} {self.plan.name} {self.cols}x{self.rows}"
