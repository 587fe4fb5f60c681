"""A file's permission (Claude's Write of a new file or over one that exists, Edit of one
that exists): read off every pinned version's screens, and actionable only for the one
pending call whose path and lines it draws.

The screens are the corpus's `claude_write` (one short line), `claude_write_shapes` (a
line longer than the row, blank lines, a tab, trailing spaces, ten lines),
`claude_write_long` (sixty lines: taller than the pane), `claude_edit` (one line
changed), `claude_edit_shapes` (three lines whose middle one stays, the last cut
mid-line and made longer than the row), `claude_overwrite` (one line of three changed)
and `claude_overwrite_shapes` (thirty lines: two inserted, one changed into a long one,
one removed, far apart: three hunks, taller than the 80x24 pane), at 120x40 and 80x24.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from akk.evidence import PendingCall
from akk.evidence.model import FileEdit, FileWrite, file_edit, file_write, input_digest
from akk.profiles.claude import PROFILES
from akk.profiles.observation import FileView, Observation, OptionRole, State
from akk.profiles.permission import (
    FILE_SHOWN_MAX,
    FILE_TOO_LONG,
    PENDING_CALL_MISMATCH,
    PENDING_CALL_UNKNOWN,
    asked_tool,
    bind_pending,
    offered_file,
    shows_file,
)
from akk.protocol.projection import project
from akk.qualify.scenarios import EDIT_SHAPES_NEW, SCENARIOS, ClaudeTool
from akk.screen import Grid, IdMinter
from akk.screen.fingerprint import Appearance
from tests import corpus

VERSIONS = sorted(profile.version for profile in PROFILES)
SHOWN = (
    "claude_write",
    "claude_write_shapes",
    "claude_write_long",
    "claude_edit",
    "claude_edit_shapes",
    "claude_overwrite",
    "claude_overwrite_shapes",
)
"""The scenarios whose prompt AKK may answer (the long one is taller than the pane)."""
OVERWRITTEN = ("claude_overwrite", "claude_overwrite_shapes")
"""The scenarios that write over a file that exists (a Write drawn as its changes)."""


def _asked(scenario: str) -> tuple[str, str]:
    """The title of the scenario's prompt, and what its question asks to do."""
    if scenario in OVERWRITTEN:
        return "Overwrite file", "overwrite"
    if _tool(scenario).name == "Write":
        return "Create file", "create"
    return "Edit file", "make this edit to"


def _screens(scenario: str) -> list[Path]:
    root = corpus.ROOT / "claude"
    return sorted({*root.glob(f"*/**/{scenario}-permission.json"),
                   *root.glob(f"*/{scenario}-permission.json")})  # fmt: skip


def _screen(scenario: str, version: str, cols: int = 120) -> Path:
    (path,) = [p for p in _screens(scenario) if corpus.label(p)["version"] == version
               and corpus.label(p)["cols"] == cols]  # fmt: skip
    return path


def _tool(scenario: str) -> ClaudeTool:
    """The scenario's Write or Edit call."""
    replies = [step.reply for step in SCENARIOS[scenario].steps]
    (tool,) = [reply for reply in replies
               if isinstance(reply, ClaudeTool) and reply.name in ("Write", "Edit")]  # fmt: skip
    return tool


def _call(scenario: str, call_id: str = "toolu_1", **changed: object) -> PendingCall:
    """The scenario's call as the agent's file records it, with `changed` input fields."""
    tool = _tool(scenario)
    given = {**tool.input, **changed}
    return PendingCall(
        call_id, tool.name, None, input_digest(given), writes=file_write(given),
        edits=file_edit(given),
    )  # fmt: skip


def _observed(path: Path) -> Observation:
    observation = corpus.observed(path)[1]
    assert observation.actionable and observation.prompt is not None, (path, observation.reason)
    return observation


def _drawn(observation: Observation) -> FileView:
    assert observation.prompt is not None
    drawn = observation.prompt.questions[0].file
    assert drawn is not None
    return drawn


def test_every_pinned_version_has_its_file_screens_at_both_sizes() -> None:
    for scenario in SHOWN:
        screens = _screens(scenario)
        assert {corpus.label(p)["version"] for p in screens} == set(VERSIONS), scenario
        sizes = {(corpus.label(p)["cols"], corpus.label(p)["rows"]) for p in screens}
        assert sizes == {(120, 40), (80, 24)}, scenario


@pytest.mark.parametrize("scenario", SHOWN)
def test_a_file_s_prompt_reads_its_path_and_every_line(scenario: str) -> None:
    tool = _tool(scenario)
    path = tool.input["file_path"]
    for screen in _screens(scenario):
        observation = _observed(screen)
        assert observation.state is State.PERMISSION
        (question,) = observation.prompt.questions  # type: ignore[union-attr]
        title, action = _asked(scenario)
        assert (question.header, question.tool, question.command) == (title, tool.name, None)
        assert question.prompt == f"Do you want to {action} {path}?"
        roles = [option.role for option in question.options]
        assert roles == [OptionRole.APPROVE_ONCE, OptionRole.APPROVE_PERSISTENT, OptionRole.REJECT]
        drawn = _drawn(observation)
        assert drawn.path == path
        assert shows_file(drawn, _call(scenario)), screen
        # A model writes an absolute path; Claude draws it relative to its directory.
        assert shows_file(drawn, _call(scenario, file_path=f"/home/person/project/{path}"))


def test_a_new_file_is_drawn_line_for_line() -> None:
    content = _tool("claude_write_shapes").input["content"]
    assert isinstance(content, str)
    lines = content.split("\n")[:-1]
    for screen in _screens("claude_write_shapes"):
        drawn = _drawn(_observed(screen))
        assert drawn.signs == "" and len(drawn.lines) == len(lines), screen
        for shown, line in zip(drawn.lines, lines, strict=True):
            # Only what the preview cannot draw differs: a tab, a row's end, a break.
            assert "".join(shown.split()) == "".join(line.split()), (screen, shown, line)


def test_an_edit_is_drawn_as_its_change_with_context() -> None:
    for screen in _screens("claude_edit_shapes"):
        drawn = _drawn(_observed(screen))
        # Three lines of context around; the kept middle line is context too.
        assert drawn.signs == "   -+ -+   ", screen
        assert drawn.lines[0] == "line 2 of the file to edit"
        long = EDIT_SHAPES_NEW.split("\n")[-1] + " to edit"  # the rest of line 7
        assert "".join(drawn.lines[7].split()) == "".join(long.split()), screen


def test_a_new_file_taller_than_the_pane_is_read_from_its_question_and_its_last_lines() -> None:
    content = _tool("claude_write_long").input["content"]
    assert isinstance(content, str)
    lines = content.split("\n")[:-1]
    for screen in _screens("claude_write_long"):
        observation = _observed(screen)
        drawn = _drawn(observation)
        assert observation.prompt is not None and observation.prompt.region.top == 0
        assert drawn.first > 1 and drawn.lines == tuple(lines[drawn.first - 1 :]), screen
        # What scrolled off is the call's, offered whole: a line the pane cannot show
        # changed still binds, one it shows does not.
        hidden = content.replace("line 1 of", "line one of")
        assert bind_pending(observation, [_call("claude_write_long", content=hidden)])[1]
        shown = content.replace("line 60 of", "line sixty of")
        refused = bind_pending(observation, [_call("claude_write_long", content=shown)])[0]
        assert refused.reason == PENDING_CALL_MISMATCH
        # Its content is what a controller approves, so it must show whole: a file of
        # more than that is a person's, and its text is never projected.
        long = content.replace("line 1 of", "y" * FILE_SHOWN_MAX + " line 1 of")
        refused = bind_pending(observation, [_call("claude_write_long", content=long)])[0]
        assert refused.reason == FILE_TOO_LONG and not refused.actionable
        assert refused.prompt is not None and refused.prompt.asked == ()


def test_a_file_written_over_is_drawn_as_its_changes_each_at_its_number() -> None:
    """Three lines of context around each change; a change far from the one before is
    drawn apart, numbered in a column of its own. A kept or added line carries its number
    in the new file, a removed one its number in the old; 80x24 shows the last lines."""
    content = _tool("claude_overwrite_shapes").input["content"]
    assert isinstance(content, str)
    lines = content.split("\n")
    signs = "  ++   " + "   -+   " + "   -  "
    numbers = (1, 2, 3, 4, 5, 6, 7, 14, 15, 16, 15, 17, 18, 19, 20, 27, 28, 29, 28, 30, 31)
    for screen in _screens("claude_overwrite_shapes"):
        drawn = _drawn(_observed(screen))
        cut = corpus.label(screen)["rows"] == 24
        assert drawn.cut == cut and 0 < len(drawn.lines) <= len(numbers), screen
        assert drawn.signs == signs[-len(drawn.lines) :], screen
        assert drawn.numbers == numbers[-len(drawn.lines) :], screen
        for shown, sign, number in zip(drawn.lines, drawn.signs, drawn.numbers, strict=True):
            if sign != "-":
                assert "".join(shown.split()) == "".join(lines[number - 1].split()), screen
        observation = _observed(screen)
        if cut:  # what scrolled off is the call's, offered whole; what shows must match
            hidden = content.replace("a line the lab model inserted", "a line the model hid")
            assert bind_pending(observation, [_call("claude_overwrite_shapes", content=hidden)])[1]
        shown = content.replace("line 29 of", "line twenty-nine of")
        refused = bind_pending(observation, [_call("claude_overwrite_shapes", content=shown)])[0]
        assert refused.reason == PENDING_CALL_MISMATCH, screen


def _refusals(scenario: str, first: int) -> dict[str, tuple[list[PendingCall] | None, str]]:
    """Calls the scenario's screen, its lines drawn from `first` on, must refuse, and why."""
    tool = _tool(scenario)
    other = "Edit" if tool.name == "Write" else "Write"
    refused: dict[str, tuple[list[PendingCall] | None, str]] = {
        "the file unreadable": (None, PENDING_CALL_UNKNOWN),
        "no pending call": ([], PENDING_CALL_UNKNOWN),
        "another tool's call only": (
            [attrs.evolve(_call(scenario, "toolu_b"), tool=other)],
            PENDING_CALL_UNKNOWN,
        ),
        "two calls": ([_call(scenario), _call(scenario, "toolu_2")], PENDING_CALL_UNKNOWN),
        "an input of no such shape": (
            [PendingCall("toolu_1", tool.name, None, input_digest({}))],
            PENDING_CALL_MISMATCH,
        ),
        "another path": ([_call(scenario, file_path="lab_other.py")], PENDING_CALL_MISMATCH),
        "another directory's name": (
            [_call(scenario, file_path=f"/project/not_{tool.input['file_path']}")],
            PENDING_CALL_MISMATCH,
        ),
    }
    if tool.name == "Write":
        content = tool.input["content"]
        assert isinstance(content, str)
        changed = {
            "a character changed in the last line": content[:-3] + content[-3:].upper(),
            "a line less": content.split("\n", 1)[1],
        }
        if scenario in OVERWRITTEN:  # (a line more where no change is drawn would bind)
            changed["a line more at its top"] = "main()\n" + content
        else:
            changed["a line more"] = content + "main()\n"
            changed["a blank line more at the end"] = content + "\n"
        if content.count("\n") > 1:  # (one line's last newline is drawn by no row)
            changed["two lines joined"] = content.replace("\n", "", 1)
        if first == 1:  # (a line scrolled off is the call's to show)
            changed["a character more"] = "x" + content
        refused |= {
            why: ([_call(scenario, content=text)], PENDING_CALL_MISMATCH)
            for why, text in changed.items()
        }
    else:
        old, new = tool.input["old_string"], tool.input["new_string"]
        assert isinstance(old, str) and isinstance(new, str)
        edits = {
            "its old text a character off": {"old_string": old[:-1] + "X"},
            "its new text a character off": {"new_string": new[:-1] + "X"},
            "its new text a line longer": {"new_string": new + "\nline 8 of the file"},
            "its new text a character less at its start": {"new_string": new[1:]},
            "an old text the hunk does not hold": {"old_string": "line 1 of the file"},
            "an empty old text": {"old_string": "", "new_string": new},
        }
        refused |= {
            why: ([_call(scenario, **fields)], PENDING_CALL_MISMATCH)
            for why, fields in edits.items()
        }
    return refused


@pytest.mark.parametrize("scenario", SHOWN)
def test_a_file_s_permission_is_offered_in_its_call_s_words_and_only_for_that_call(
    scenario: str,
) -> None:
    for screen in _screens(scenario):
        observation = _observed(screen)
        assert asked_tool(observation) == _tool(scenario).name
        call = _call(scenario)
        reader = PendingCall("toolu_r", "Read", None, input_digest({}))
        bound, matched = bind_pending(observation, [call, reader])
        assert matched == call and bound.prompt is not None, screen
        (offered,) = bound.prompt.offered
        change = call.writes or call.edits
        assert change is not None and offered.detail == offered_file(change)
        assert bound.prompt == observation.prompt  # the drawing is what a proof compares
        for why, (calls, reason) in _refusals(scenario, _drawn(observation).first).items():
            bound, matched = bind_pending(observation, calls)
            assert matched is None and not bound.actionable, (screen, why)
            assert bound.reason == reason, (screen, why)


def test_what_a_file_s_permission_is_offered_as() -> None:
    written = _call("claude_write_shapes").writes
    assert written is not None
    # The whole path and content, exactly: the tab and trailing spaces the screen lost.
    offered = offered_file(written)
    assert offered == f"lab_written.py\n\n{written.content}"
    assert "\tindented" in offered and "'spaces'   \n" in offered
    edit = FileEdit("/p/a.py", "x = 1\ny = 2", "x = 3", every=False)
    assert offered_file(edit) == "/p/a.py\n\n-x = 1\n-y = 2\n+x = 3"
    every = attrs.evolve(edit, every=True)
    assert offered_file(every) == "/p/a.py\n\n-x = 1\n-y = 2\n+x = 3\n\n(every occurrence)"


def test_an_edit_of_every_occurrence_binds_only_where_every_one_is_changed() -> None:
    drawn = FileView("a.py", ("ctx", "x = 1", "x = 2", "ctx"), " -+ ")
    once = PendingCall("t", "Edit", None, "d", edits=FileEdit("a.py", "x = 1", "x = 2"))
    assert shows_file(drawn, once)
    both = FileView("a.py", ("a", "b", "a", "b"), "-+-+")
    every = PendingCall("t", "Edit", None, "d", edits=FileEdit("a.py", "a", "b", every=True))
    assert shows_file(both, every)
    assert not shows_file(both, attrs.evolve(every, edits=FileEdit("a.py", "a", "b")))


def test_inputs_of_another_shape_create_and_edit_nothing() -> None:
    assert file_write({"file_path": "a", "content": 1}) is None
    assert file_write({"file_path": "a"}) is None
    assert file_write({"file_path": "a", "content": ""}) == FileWrite("a", "")
    assert file_edit({"file_path": "a", "old_string": "x", "new_string": "y"}) == FileEdit(
        "a", "x", "y"
    )
    assert (
        file_edit({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": 1})
        is None
    )
    assert file_edit({"file_path": "a", "old_string": "x"}) is None
    assert file_edit(["a"]) is None


def _with_row(grid: Grid, y: int, text: str) -> Grid:
    """`grid` with row `y` redrawn as `text`, in the style of that row's second cell (a
    title's, a path's or a line's first character)."""
    row = grid.row(y)
    cells = [attrs.evolve(row[1], char=char) for char in text.ljust(grid.cols)]
    return attrs.evolve(grid, cells=tuple(
        tuple(cells) if i == y else grid.row(i) for i in range(grid.rows)
    ))  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_a_file_drawn_otherwise_is_not_read(version: str) -> None:
    """A line's number skipped or out of its column, a row outside the gutter, an unknown
    sign, a rule missing, a title its question is not: unknown. Another title is a
    person's."""
    path = _screen("claude_write", version)
    profile = corpus.observed(path)[0]
    _, grid = corpus.screen(path)
    texts = grid.lines()
    first = next(y for y, text in enumerate(texts) if text.startswith("  1 "))
    title = next(y for y, text in enumerate(texts) if text.strip() == "Create file")
    edit_path = _screen("claude_edit", version)
    _, edit = corpus.screen(edit_path)
    changed = next(y for y, text in enumerate(edit.lines()) if text.startswith(" 2 -"))
    unread = {
        "number skipped": _with_row(grid, first, "  2 written by the lab model"),
        "number out of its column": _with_row(grid, first, " 1 written by the lab model"),
        "a row in the gutter": _with_row(grid, first, "  x written by the lab model"),
        "a rule missing": _with_row(grid, first - 1, ""),
        "no path": _with_row(grid, first - 2, ""),
        "an unknown sign": _with_row(edit, changed, " 2 *the second line, as it was"),
        "an edit's number out of its column": _with_row(
            edit, changed, "  2 -the second line, as it was"
        ),
    }
    unread["a new file's question under another title"] = _with_row(grid, title, " Overwrite file")
    for why, screen in unread.items():
        observation = profile.classify(screen)
        assert not observation.actionable and observation.state is State.UNKNOWN, why
    observation = profile.classify(_with_row(grid, title, " Delete file"))
    assert observation.state is State.BLOCKED and not observation.actionable
    assert observation.reason == "blocked: this permission (Delete file) is left to a person"
    # A sign turned over reads, but is no longer the call's change.
    turned = profile.classify(_with_row(edit, changed, " 2 +the second line, as it was"))
    assert turned.actionable, turned.reason
    assert bind_pending(turned, [_call("claude_edit")])[0].reason == PENDING_CALL_MISMATCH


def test_a_file_s_projection_shows_the_call_and_redacts_a_key_in_it() -> None:
    observation = _observed(_screen("claude_write", VERSIONS[-1]))
    key = "sk-ant-api03-" + "Q" * 40
    # A call that wrote a key there would draw it too: the drawing changes as the call does.
    assert observation.prompt is not None
    question = observation.prompt.questions[0]
    keyed = attrs.evolve(question, file=attrs.evolve(_drawn(observation), lines=(key,)))
    keyed_view = attrs.evolve(
        observation, prompt=attrs.evolve(observation.prompt, questions=(keyed,))
    )
    bound, call = bind_pending(keyed_view, [_call("claude_write", content=f"{key}\n")])
    assert call is not None and bound.prompt is not None
    ids = IdMinter(b"k" * 32)
    projection = project(
        bound.prompt, seen=Appearance(b"f" * 32, 0), ids=ids, agent="claude", turn_id=None
    )
    detail = projection["questions"][0]["detail"]
    assert detail.startswith("lab-written.txt\n\n") and key not in detail
    assert projection["decisions"] == ["approve_once", "reject"]
