"""Wrapped and advised permission commands: every cell is bound, a cut command is refused.

Properties over the captured permission screens whose command wraps over
several rows (Claude's ``claude_bash_expansion`` and ``claude_bash_long`` under its
``│`` gutter, Codex's ``codex_exec_long``) or carries an advisory row (Claude's
``claude_bash_warning``: ``Quoted text in this command can't be checked before it runs``;
``claude_bash_variable``: ``Contains simple_expansion`` on 2.1.263-2.1.267):

1. One changed cell (its character or any style) in a row of the command or of
   an advisory either leaves no actionable permission (fail closed) or changes
   the prompt's fingerprint, and so its interaction id.
2. A command missing its last wrapped row(s) (the rows below shifted up, or the
   rows blanked) is never an actionable permission projecting a prefix of the
   real command: a controller approving it would approve a command it was not
   shown whole. No screen rule can see every such cut (``SCREEN_ACCEPTS``: a
   Claude prompt without its last gutter row reads exactly like one for a shorter
   command), so the screen is checked as the TerminalActor checks it, against the
   pending call the agent's own file records (`akk.profiles.permission`), here the
   scenario's real command from akk/qualify/scenarios.py.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from akk.evidence import PendingCall
from akk.evidence.model import input_digest
from akk.profiles.observation import InteractionKind, Observation
from akk.profiles.permission import PENDING_CALL_MISMATCH, asked_tool, bind_pending
from akk.profiles.registry import PROFILES, Profile
from akk.protocol.projection import project
from akk.qualify.scenarios import SCENARIOS, Bash, ExecCommand
from akk.screen import BLANK, Grid, IdMinter, fingerprint
from akk.screen.fingerprint import Appearance
from tests import corpus
from tests.test_fingerprint import _FIELDS, SECRET, TERMINAL, _changed_cell_in_row
from tests.tier import examples

# The plans drawn to wrap or warn; any other permission screen whose command wraps
# or shows an advisory is picked up from the screens themselves.
PLANS = (
    "claude_bash_expansion",
    "claude_bash_long",
    "claude_bash_warning",
    "claude_bash_variable",
    "codex_exec_long",
)
IDS = IdMinter(SECRET)


@attrs.frozen(repr=False)
class Case:
    """One permission fixture, classified, with the rows its command and advisories fill."""

    name: str
    profile: Profile
    grid: Grid
    command: str  # the scenario's own command (akk/qualify/scenarios.py), never read off the screen
    observation: Observation
    command_rows: tuple[int, ...]
    advisory_rows: tuple[int, ...]

    def __repr__(self) -> str:
        return f"Case({self.name!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis prints the case with every example; its grid runs to a megabyte.
        printer.text(repr(self))

    @functools.cached_property
    def fingerprint(self) -> bytes:
        """The fingerprint of the screen as captured (worked out once, not once per example)."""
        return _fingerprint(self, self.grid, self.observation)

    @property
    def text_rows(self) -> tuple[int, ...]:
        return self.command_rows + self.advisory_rows

    @property
    def pending(self) -> PendingCall:
        """The call the agent's file records for this prompt: the scenario's command."""
        tool = asked_tool(self.observation)
        given = {"command": self.command} if tool == "Bash" else {"cmd": self.command}
        return PendingCall("call_lab", tool, self.command, input_digest(given))


def _words(text: str) -> str:
    return " ".join(text.split())


def _body(text: str) -> str:
    """A row's text without its indent and the command's ``$ `` or gutter prefix."""
    text = text.strip()
    for prefix in ("$ ", "│ "):
        text = text.removeprefix(prefix)
    return text.strip()


def _command_rows(grid: Grid, top: int, bottom: int, command: str) -> tuple[int, ...]:
    """The first run of rows in top..bottom-1 that spells `command`, joined at spaces."""
    whole = _words(command)
    for first in range(top, bottom):
        parts: list[str] = []
        for y in range(first, bottom):
            parts.append(_body(grid.row_text(y)))
            joined = _words(" ".join(parts))
            if not parts[-1] or not whole.startswith(joined):
                break
            if joined == whole:
                return tuple(range(first, y + 1))
    return ()


def _advisory_rows(grid: Grid, after: int, bottom: int, advisories: list[str]) -> tuple[int, ...]:
    """The rows under the command (blank rows and rules skipped) that spell its advisories.

    On 2.1.263-2.1.267 the command's description stands between them (skipped).
    """
    rows: list[int] = []
    for y in range(after, bottom):
        text = grid.row_text(y).strip()
        if not text or len(set(text)) == 1:
            continue
        if not any(text in advisory for advisory in advisories):
            if rows or not advisories:
                break
            continue
        rows.append(y)
    return tuple(rows)


def _scenario_command(scenario: str, labelled: str) -> str:
    """The command the scenario's model reply runs that the label names (asserted one)."""
    commands = [
        step.reply.command if isinstance(step.reply, Bash) else step.reply.cmd
        for step in SCENARIOS[scenario].steps
        if isinstance(step.reply, Bash | ExecCommand)
    ]
    assert labelled in commands, (scenario, labelled, commands)
    return labelled


def _load(label_path: Path) -> Case | None:
    label = corpus.label(label_path)
    expected = label["expected"]
    if (
        expected["kind"] != "permission"
        or expected["manual_only"]
        or expected["tool"] in ("Write", "Edit")
    ):
        return None  # a command's prompt, which a profile reads (a file's: test_file_permissions)
    _, grid = corpus.screen(label_path)
    profile, observation = corpus.observed(label_path)
    command_rows: tuple[int, ...] = ()
    advisory_rows: tuple[int, ...] = ()
    if observation.actionable and observation.prompt is not None:
        region = observation.prompt.region
        command_rows = _command_rows(grid, region.top, region.bottom, expected["command"])
        _, *advisories = observation.prompt.questions[0].detail.split("\n\n")
        if command_rows:
            after = command_rows[-1] + 1
            advisory_rows = _advisory_rows(grid, after, region.bottom, advisories)
    if label["plan"] not in PLANS and len(command_rows) < 2 and not advisory_rows:
        return None
    return Case(
        name=corpus.name(label_path),
        profile=profile,
        grid=grid,
        command=_scenario_command(label["scenario"], expected["command"]),
        observation=observation,
        command_rows=command_rows,
        advisory_rows=advisory_rows,
    )


CASES = [
    case
    for agent in ("claude", "codex")
    for label_path in sorted((corpus.ROOT / agent).glob("*/**/*.json"))
    if (case := _load(label_path)) is not None
]
WRAPPED = [case for case in CASES if len(case.command_rows) >= 2]


def _name(case: Case) -> str:
    return case.name


def _actionable_permission(observation: Observation) -> bool:
    prompt = observation.prompt
    return (
        observation.actionable and prompt is not None and prompt.kind is InteractionKind.PERMISSION
    )


def _fingerprint(case: Case, grid: Grid, observation: Observation) -> bytes:
    assert observation.prompt is not None
    region = observation.prompt.region
    return fingerprint(grid, region, profile_id=case.profile.id, terminal_identity=TERMINAL)


def _interaction_id(fp: bytes) -> str:
    return IDS.interaction_id(Appearance(fp, 0))


def _projection(case: Case, observation: Observation, grid: Grid) -> dict[str, Any]:
    assert observation.prompt is not None
    seen = Appearance(_fingerprint(case, grid, observation), 0)
    return project(
        observation.prompt,
        seen=seen,
        ids=IDS,
        agent=case.profile.agent,
        turn_id=None,
    )


def test_the_wrapped_and_advised_commands_of_every_pinned_version_are_covered() -> None:
    for case in CASES:
        assert _actionable_permission(case.observation), (case.name, case.observation.reason)
        assert case.command_rows, f"{case.name}: its command is not drawn inside its region"
        # The whole screen is the prompt for exactly its pending call: still actionable.
        bound, call = bind_pending(case.observation, [case.pending])
        assert _actionable_permission(bound) and call == case.pending, (case.name, bound.reason)
    assert {(case.profile.agent, case.profile.version) for case in WRAPPED} == set(PROFILES)
    advised = {case.profile.version for case in CASES if case.advisory_rows}
    assert advised >= {
        profile.version
        for profile in PROFILES.values()
        if getattr(getattr(profile, "permission", None), "advisories", ())
    }
    assert advised


# -- 1. every cell of the command and its advisories is bound


@pytest.mark.parametrize("case", CASES, ids=_name)
@settings(max_examples=examples(30))
@given(data=st.data(), field=st.sampled_from(_FIELDS))
def test_a_changed_cell_in_the_command_or_an_advisory_changes_the_interaction(
    case: Case, data: st.DataObject, field: str
) -> None:
    grid = case.grid
    assert case.text_rows, f"{case.name}: no command rows found in its region"
    x, y, changed = _changed_cell_in_row(grid, case.text_rows, data, field)
    observation = case.profile.classify(changed)
    if not _actionable_permission(observation):
        event("refused")
        return
    event("still actionable")
    fp = _fingerprint(case, changed, observation)
    bound = f"cell ({x}, {y}) {field} is not bound by region {observation.prompt}"
    assert fp != case.fingerprint, bound
    assert _interaction_id(fp) != _interaction_id(case.fingerprint)


# -- 2. a command cut short of its last wrapped rows is never actionable


def _shift_up(grid: Grid, gone: tuple[int, ...]) -> Grid:
    """`grid` without rows `gone`, the rows below moved up and blank rows added at the bottom."""
    kept = [grid.row(y) for y in range(grid.rows) if y not in gone]
    blank = (BLANK,) * grid.cols
    return Grid(cols=grid.cols, rows=grid.rows, cells=(*kept, *[blank] * len(gone)))


def _blank_out(grid: Grid, gone: tuple[int, ...]) -> Grid:
    """`grid` with rows `gone` blank."""
    blank = (BLANK,) * grid.cols
    cells = tuple(blank if y in gone else grid.row(y) for y in range(grid.rows))
    return Grid(cols=grid.cols, rows=grid.rows, cells=cells)


CUTS = {"shift": _shift_up, "blank": _blank_out}

SCREEN_ACCEPTS = {
    # The screen left is exactly how Claude draws the shorter command: a guttered command
    # may be one row (the gutter marks shell expansion, not wrapping), and nothing else on
    # its prompt repeats the command. No screen rule can tell them apart.
    ("claude", "shift"): "its last gutter row removed and the rows below moved up",
}
"""Cuts a classifier alone cannot see, by (agent, cut); only the pending call refuses them.
Codex's are all refused on screen (its persistent row quotes the command), as are Claude's
blanks: inside the command fence (2.1.328 and later), or before the description that follows
the command directly (earlier versions)."""


def _truncations() -> list[Any]:
    return [pytest.param(case, how, id=f"{case.name}-{how}") for case in WRAPPED for how in CUTS]


def _silently_truncated(shown: str, real: str) -> bool:
    shown, real = _words(shown), _words(real)
    return shown != real and real.startswith(shown)


@pytest.mark.parametrize(("case", "how"), _truncations())
@settings(max_examples=10)
@given(data=st.data())
def test_a_command_missing_its_last_wrapped_rows_is_never_actionable(
    case: Case, how: str, data: st.DataObject
) -> None:
    rows = case.command_rows
    dropped = data.draw(st.integers(1, len(rows) - 1), label="rows dropped")
    gone = rows[-dropped:]
    cut = CUTS[how](case.grid, gone)
    classified = case.profile.classify(cut)
    observation, call = bind_pending(classified, [case.pending])
    if _actionable_permission(classified):
        event("accepted on screen")
        assert (case.profile.agent, how) in SCREEN_ACCEPTS, f"{case.name}: a new screen hole"
        # Refused only because the agent's file records the whole command.
        assert observation.reason == PENDING_CALL_MISMATCH and call is None
    if not _actionable_permission(observation):
        return
    projection = _projection(case, observation, cut)
    (question,) = projection["questions"]
    shown = question["detail"].split("\n\n")[0]
    assert not _silently_truncated(shown, case.command), (
        f"{case.name}: with rows {gone} {how}, the screen is a {projection['state']} "
        f"{projection['kind']} offering {projection['decisions']} for the command {shown!r}; "
        f"the real command is {case.command!r}"
    )
