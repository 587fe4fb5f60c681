"""A new file's permission (Claude's Write): read off every pinned version's screens, and
actionable only for the one pending Write call whose path and lines it draws.

The screens are the corpus's `claude_write` (one short line), `claude_write_shapes` (a
line longer than the row, blank lines, a tab, trailing spaces, ten lines) and
`claude_write_long` (taller than the pane: a person's), at 120x40 and 80x24.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from akk.evidence import PendingCall
from akk.evidence.model import FileWrite, file_write, input_digest
from akk.profiles.claude import PROFILES
from akk.profiles.observation import NewFile, Observation, OptionRole, State
from akk.profiles.permission import (
    PENDING_CALL_MISMATCH,
    PENDING_CALL_UNKNOWN,
    asked_tool,
    bind_pending,
    shows_file,
)
from akk.protocol.projection import project
from akk.qualify.scenarios import SCENARIOS, ClaudeTool
from akk.screen import Grid, IdMinter
from akk.screen.fingerprint import Appearance
from tests import corpus

VERSIONS = sorted(profile.version for profile in PROFILES)
SHOWN = ("claude_write", "claude_write_shapes")
"""The scenarios whose whole prompt fits the pane: AKK may answer them."""


def _screens(scenario: str) -> list[Path]:
    found = sorted((corpus.ROOT / "claude").glob(f"*/**/{scenario}-permission.json"))
    found += sorted((corpus.ROOT / "claude").glob(f"*/{scenario}-permission.json"))
    return sorted(set(found))


def _written(scenario: str) -> FileWrite:
    reply = SCENARIOS[scenario].steps[0].reply
    assert isinstance(reply, ClaudeTool)
    writes = file_write(dict(reply.input))
    assert writes is not None
    return writes


def _call(writes: FileWrite | None, call_id: str = "toolu_1", tool: str = "Write") -> PendingCall:
    given = {} if writes is None else {"file_path": writes.path, "content": writes.content}
    return PendingCall(call_id, tool, None, input_digest(given), writes=writes)


def _observed(path: Path) -> Observation:
    observation = corpus.observed(path)[1]
    assert observation.actionable and observation.prompt is not None, (path, observation.reason)
    return observation


def _drawn(observation: Observation) -> NewFile:
    assert observation.prompt is not None
    drawn = observation.prompt.questions[0].new_file
    assert drawn is not None
    return drawn


def test_every_pinned_version_has_its_new_file_screens_at_both_sizes() -> None:
    for scenario in (*SHOWN, "claude_write_long"):
        screens = _screens(scenario)
        assert {corpus.label(p)["version"] for p in screens} == set(VERSIONS), scenario
        assert {(corpus.label(p)["cols"], corpus.label(p)["rows"]) for p in screens} == {
            (120, 40),
            (80, 24),
        }, scenario


@pytest.mark.parametrize("scenario", SHOWN)
def test_a_new_file_s_prompt_reads_its_path_and_every_line(scenario: str) -> None:
    writes = _written(scenario)
    lines = writes.content.split("\n")[:-1]
    for path in _screens(scenario):
        observation = _observed(path)
        assert observation.state is State.PERMISSION
        (question,) = observation.prompt.questions  # type: ignore[union-attr]
        assert (question.header, question.tool, question.command) == ("Create file", "Write", None)
        assert question.prompt == f"Do you want to create {writes.path}?"
        roles = [option.role for option in question.options]
        assert roles == [OptionRole.APPROVE_ONCE, OptionRole.APPROVE_PERSISTENT, OptionRole.REJECT]
        drawn = _drawn(observation)
        assert drawn.path == writes.path and len(drawn.lines) == len(lines), path
        for shown, line in zip(drawn.lines, lines, strict=True):
            # Only what the preview cannot draw differs: a tab, a row's end, a break.
            assert "".join(shown.split()) == "".join(line.split()), (path, shown, line)
        assert shows_file(drawn, writes), path
        # A model writes an absolute path; Claude draws it relative to its directory.
        assert shows_file(drawn, attrs.evolve(writes, path=f"/home/person/project/{writes.path}"))


def test_a_new_file_taller_than_the_pane_is_a_person_s() -> None:
    for path in _screens("claude_write_long"):
        observation = corpus.observed(path)[1]
        assert not observation.actionable and observation.prompt is None, path
        assert observation.state is State.UNKNOWN, path


@pytest.mark.parametrize("version", VERSIONS)
def test_a_new_file_is_offered_in_its_call_s_words_and_only_for_that_call(version: str) -> None:
    for path in _screens("claude_write_shapes"):
        if corpus.label(path)["version"] != version:
            continue
        observation = _observed(path)
        assert asked_tool(observation) == "Write"
        writes = _written("claude_write_shapes")
        call = _call(writes)
        bound, matched = bind_pending(observation, [call, _call(None, "toolu_r", "Read")])
        assert matched == call and bound.prompt is not None
        (offered,) = bound.prompt.offered
        # The whole path and content, exactly: the tab and trailing spaces the screen lost.
        assert offered.detail == f"{writes.path}\n\n{writes.content}"
        assert "\tindented" in offered.detail and "'spaces'   \n" in offered.detail
        assert bound.prompt == observation.prompt  # the drawing is what a proof compares
        refused = _refusals(writes)
        for why, (calls, reason) in refused.items():
            bound, matched = bind_pending(observation, calls)
            assert matched is None and not bound.actionable, (path, why)
            assert bound.reason == reason, (path, why)


def _refusals(writes: FileWrite) -> dict[str, tuple[list[PendingCall] | None, str]]:
    content, lines = writes.content, writes.content.split("\n")
    other = attrs.evolve
    return {
        "the file unreadable": (None, PENDING_CALL_UNKNOWN),
        "no pending call": ([], PENDING_CALL_UNKNOWN),
        "a Bash call only": ([_call(None, "toolu_b", "Bash")], PENDING_CALL_UNKNOWN),
        "two Write calls": ([_call(writes), _call(writes, "toolu_2")], PENDING_CALL_UNKNOWN),
        "a Write of no such shape": ([_call(None)], PENDING_CALL_MISMATCH),
        "another path": ([_call(other(writes, path="lab_other.py"))], PENDING_CALL_MISMATCH),
        "another directory's name": (
            [_call(other(writes, path=f"/project/not_{writes.path}"))],
            PENDING_CALL_MISMATCH,
        ),
        "a character more": ([_call(other(writes, content="x" + content))], PENDING_CALL_MISMATCH),
        "a character changed in the last line": (
            [_call(other(writes, content=content.replace("ten", "teN")))],
            PENDING_CALL_MISMATCH,
        ),
        "a line more": (
            [_call(other(writes, content=content + "main()\n"))],
            PENDING_CALL_MISMATCH,
        ),
        "a blank line more at the end": (
            [_call(other(writes, content=content + "\n"))],
            PENDING_CALL_MISMATCH,
        ),
        "a line less": (
            [_call(other(writes, content="\n".join(lines[1:])))],
            PENDING_CALL_MISMATCH,
        ),
        "two lines joined": (
            [_call(other(writes, content=content.replace("main()\nmain()", "main()main()")))],
            PENDING_CALL_MISMATCH,
        ),
    }


def _rows(path: Path) -> tuple[Grid, list[str]]:
    _, grid = corpus.screen(path)
    return grid, grid.lines()


def _with_row(grid: Grid, y: int, text: str) -> Grid:
    """`grid` with row `y` redrawn as `text`, in the style of that row's second cell (a
    title's, a path's or a line's first character)."""
    row = grid.row(y)
    cells = [attrs.evolve(row[1], char=char) for char in text.ljust(grid.cols)]
    return attrs.evolve(grid, cells=tuple(
        tuple(cells) if i == y else grid.row(i) for i in range(grid.rows)
    ))  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_a_new_file_drawn_otherwise_is_not_read(version: str) -> None:
    """A line's number skipped or out of its column, a row outside the gutter, a rule
    missing: unknown. Another title (an edit, an overwrite) is a person's."""
    (path,) = [p for p in _screens("claude_write") if corpus.label(p)["version"] == version
               and corpus.label(p)["cols"] == 120]  # fmt: skip
    profile = corpus.observed(path)[0]
    grid, texts = _rows(path)
    first = next(y for y, text in enumerate(texts) if text.startswith("  1 "))
    fence = first - 1
    title = next(y for y, text in enumerate(texts) if text.strip() == "Create file")
    unread = {
        "number skipped": _with_row(grid, first, "  2 written by the lab model"),
        "number out of its column": _with_row(grid, first, " 1 written by the lab model"),
        "a row in the gutter": _with_row(grid, first, "  x written by the lab model"),
        "a rule missing": _with_row(grid, fence, ""),
        "no path": _with_row(grid, fence - 1, ""),
    }
    for why, changed in unread.items():
        observation = profile.classify(changed)
        assert not observation.actionable and observation.state is State.UNKNOWN, why
    for other in ("Edit file", "Overwrite file"):
        observation = profile.classify(_with_row(grid, title, f" {other}"))
        assert observation.state is State.BLOCKED and not observation.actionable, other
        assert observation.reason == f"blocked: this permission ({other}) is left to a person"


def test_a_new_file_s_projection_shows_the_call_and_redacts_a_key_in_it() -> None:
    (path,) = [p for p in _screens("claude_write") if corpus.label(p)["version"] == VERSIONS[-1]
               and corpus.label(p)["cols"] == 120]  # fmt: skip
    observation = _observed(path)
    writes = _written("claude_write")
    key = "sk-ant-api03-" + "Q" * 40
    # The screen draws what Claude drew; a call that wrote a key there would draw it too,
    # so the drawing is changed to the key's line here as the call is.
    keyed = attrs.evolve(writes, content=f"{key}\n")
    drawn = attrs.evolve(_drawn(observation), lines=(key,))
    assert observation.prompt is not None
    question = attrs.evolve(observation.prompt.questions[0], new_file=drawn)
    keyed_view = attrs.evolve(
        observation, prompt=attrs.evolve(observation.prompt, questions=(question,))
    )
    bound, call = bind_pending(keyed_view, [_call(keyed)])
    assert call is not None and bound.prompt is not None
    ids = IdMinter(b"k" * 32)
    projection = project(
        bound.prompt, seen=Appearance(b"f" * 32, 0), ids=ids, agent="claude", turn_id=None
    )
    detail = projection["questions"][0]["detail"]
    assert detail.startswith(f"{writes.path}\n\n") and key not in detail
    assert projection["decisions"] == ["approve_once", "reject"]
