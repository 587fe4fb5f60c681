"""A secret a screen wraps leaves no piece: redaction reads the rows as the logical text they show.

Every single-row secret shape of `tests.test_redaction` is laid out as a client
lays out text it wraps (a terminal's soft wrap filling each row, Claude's
composer and history rows, its Bash command under the ``│`` gutter, Codex's
command rows, word-wrapped or broken inside the key, at any pane width and any
offset), then put among a captured screen's rows or spliced into a captured
Bash permission. No 8-character piece of the secret may reach the status
excerpt, the projection, the `list` row's `asks`, the ``approval_required``
event or the stored interaction.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from akk.actors.terminal_board import TerminalSnapshot, project_snapshot, terminal_row
from akk.discovery.identity import TerminalIdentity
from akk.profiles.observation import Observation
from akk.profiles.registry import PROFILES
from akk.protocol.excerpt import excerpt
from akk.protocol.projection import Shown
from akk.protocol.redaction import MASK, WRAP_MARGIN, redact_screen
from akk.screen.fingerprint import Appearance, IdMinter
from akk.screen.render import render
from akk.store import interactions, turns
from akk.store.database import open_store
from tests import corpus
from tests.test_redaction import SHAPES, Shape, leaks
from tests.tier import examples

IDS = IdMinter(bytes(range(32)))
# Real keys run longer than most rows: an Anthropic key has 108 characters.
_BODY = "Xq7Lm2Pz9Rt4Vb8Nc1Zd6Fh3Jk5Wy0Qa2Ub7Ie4Os9Gx1Tv6" * 4
LONG = [
    Shape("anthropic_108", f"ANTHROPIC_API_KEY=sk-ant-api03-{_BODY[:95]} claude",
          f"sk-ant-api03-{_BODY[:95]}", ("ANTHROPIC_API_KEY=", " claude")),
    Shape("bearer_160", f'curl -H "Authorization: Bearer {_BODY[3:163]}" https://x.io',
          _BODY[3:163], ("Authorization: Bearer ",)),
    Shape("base64_180", f"blob {_BODY[5:185]}== end", _BODY[5:185], ("blob ", " end")),
]  # fmt: skip
ONE_ROW = [shape for shape in SHAPES if "\n" not in shape.line] + LONG

# (first row's drawing, further rows' drawing, right margin) of each way a pinned
# client draws text it wraps.
DRAWINGS = {
    "soft_wrap": ("", "", 0),  # a shell's output in the pane itself
    "claude_composer": ("❯ ", "  ", 4),
    "claude_history": ("  ⎿  $ ", "     ", 1),
    "claude_gutter": (" │ ", " │ ", 3),
    "claude_question": ("│ ", "│ ", 2),
    "codex_command": ("  $ ", "  ", 2),
    "codex_option": ("› 1. ", "     ", 0),
    "codex_notes": ("    ", "    ", 3),
}
FILLER = "run the check then " * 14


def before(offset: int) -> str:
    """`offset` characters of words and a space, to shift where the rows break the secret."""
    return FILLER[:offset].rstrip() + " " if offset else ""


def wrap(text: str, width: int, *, fill: bool) -> list[str]:
    """`text` word-wrapped at `width`; a word longer than a row is broken inside.

    With ``fill`` a long word starts on the row it follows (as a terminal and
    Bun's wrapAnsi do); otherwise on a row of its own first.
    """
    rows = [""]
    for word in text.split(" "):
        gap = " " if rows[-1] else ""
        if len(rows[-1]) + len(gap) + len(word) <= width:
            rows[-1] += gap + word
            continue
        if not fill or len(word) <= width or len(rows[-1]) + 1 >= width:
            rows.append("")
        elif rows[-1]:
            rows[-1] += " "
        while len(rows[-1]) + len(word) > width:
            room = width - len(rows[-1])
            rows[-1] += word[: max(room, 0)]
            word = word[max(room, 0) :]
            rows.append("")
        rows[-1] += word
    return [row for row in rows if row]


def drawn(text: str, cols: int, drawing: str, *, fill: bool) -> list[str]:
    """`text` as the client draws it at `cols` columns, every row padded to the pane."""
    first, lead, margin = DRAWINGS[drawing]
    rows = wrap(text, cols - max(len(first), len(lead)) - margin, fill=fill)
    drawn = [((first if y == 0 else lead) + row).ljust(cols) for y, row in enumerate(rows)]
    assert all(len(row) == cols for row in drawn)
    return drawn


@functools.cache
def background(cols: int) -> tuple[list[str], list[str]]:
    """A captured idle Claude screen's top rows and its composer, cut or padded to `cols`."""
    _, grid = corpus.screen(corpus.ROOT / "claude" / "2.1.332" / "echo-finished.json")
    rows = [line[:cols].ljust(cols) for line in grid.lines() if line.strip()]
    return rows[:5], rows[-4:]


def assert_no_piece(secret: str, *texts: str) -> None:
    for text in texts:
        assert not leaks(secret, text), text


BASIC_AUTH = next(shape for shape in ONE_ROW if shape.name == "basic_auth")


@settings(max_examples=examples(600))
# Every row of a 20-column pane reaches the edge: the chain from the top glues the
# header to "Hello from the lab" above it, so only the header's own row reads it.
@example(BASIC_AUTH, 20, 0, "claude_history", False)
@given(
    st.sampled_from(ONE_ROW),
    st.one_of(st.integers(min_value=20, max_value=60), st.integers(min_value=20, max_value=250)),
    st.integers(min_value=0, max_value=250),
    st.sampled_from(sorted(DRAWINGS)),
    st.booleans(),
)
def test_a_wrapped_secret_leaves_no_piece_in_the_excerpt(
    shape: Shape, cols: int, offset: int, drawing: str, fill: bool
) -> None:
    text = before(offset) + shape.line
    rows = drawn(text, cols, drawing, fill=fill)
    top, bottom = background(cols)
    shown = excerpt([*top, *rows, "".ljust(cols), *bottom])
    event(f"secret split over rows: {not any(shape.secret in row for row in rows)}")
    if shown is None:  # a row reads as a prompt for a password: nothing is shown at all
        event("not excerpted")
        return
    assert_no_piece(shape.secret, *shown)
    # Not vacuous: the secret's rows are in the excerpt, masked.
    assert MASK in "\n".join(shown)


def test_the_margin_covers_every_profile_s_wrap() -> None:
    """Every pinned client wraps within `WRAP_MARGIN` of the right edge, by its profile's numbers.

    Codex's margins count its indent too: they bound its right margin from above.
    """
    for (agent, version), profile in PROFILES.items():
        p: Any = profile
        if agent == "claude":
            margins = [p.composer.wrap_margin, p.questionnaire.editor_wrap_margin]
        else:
            margins = [p.composer_margin, p.command_margin, p.notes_margin]
        assert max(margins) < WRAP_MARGIN, (version, margins)
    assert max(margin for _, _, margin in DRAWINGS.values()) < WRAP_MARGIN


# -- a Bash permission whose command wraps under Claude's gutter

_GUTTER = "\x1b[2m│\x1b[0m\x1b[39m\x1b[49m "
_HISTORY = "⎿  $ "
_SGR = re.compile(r"\x1b\[[0-9;]*m")
BASH_LONG = sorted(
    p
    for version in ("2.1.263", "2.1.332")
    for p in (corpus.ROOT / "claude" / version).glob("**/claude_bash_long-permission.json")
)


def spliced(label_path: Path, command: str, margin: int, *, fill: bool) -> tuple[Any, Any]:
    """The captured Bash permission with `command` under its gutter and in its history rows.

    The gutter rows are wrapped `margin` columns short of the pane's edge, the
    history rows (when the capture still shows them) as Claude cuts them: three
    rows and an ellipsis.
    """
    label = corpus.label(label_path)
    cols = label["cols"]
    lines = label_path.with_suffix(".ansi").read_text().split("\n")
    gutter = [y for y, line in enumerate(lines) if _GUTTER in line]
    lead = [lines[y][: lines[y].index(_GUTTER) + len(_GUTTER)] for y in (gutter[0], gutter[-1])]
    room = cols - len(_SGR.sub("", lead[1]))
    rows = wrap(command, room - margin, fill=fill)
    new = [*lines[: gutter[0]], *(lead[y > 0] + row for y, row in enumerate(rows))]
    new += lines[gutter[-1] + 1 :]
    history = [y for y, line in enumerate(new) if _HISTORY in line]
    if history:
        (top,) = history
        end = next(y for y in range(top + 1, len(new)) if not _SGR.sub("", new[y]).strip())
        told = wrap(command, cols - 8, fill=True)
        told = [*told[:2], told[2][: cols - 10] + " …"] if len(told) > 3 else told
        shown = [("  ⎿  $ " if y == 0 else "     ") + row for y, row in enumerate(told)]
        new[top:end] = ["\x1b[38;5;246m" + row + "\x1b[39m" for row in shown]
    grid = render("\n".join(new), cols, label["rows"] - len(lines) + len(new))
    profile = PROFILES[(label["agent"], label["version"])]
    return profile, grid


def snapshot(profile: Any, grid: Any, observation: Observation) -> TerminalSnapshot:
    identity = TerminalIdentity(
        terminal_id="t1", tmux_socket="s", pane_id="%1", pane_pid=1, agent="claude",
        agent_pid=2, process_start=3, executable="claude", version="test", cwd=None,
        profile=profile.id, profile_reason=None,
    )  # fmt: skip
    seen = Appearance(b"\x01" * 32, 1)
    return TerminalSnapshot(identity, observation, seen, grid.lines(), 0.0)


def permission_texts(
    shape: Shape, label_path: Path, margin: int, offset: int, *, fill: bool
) -> tuple[TerminalSnapshot, Shown]:
    command = f"{before(offset)}{shape.line} && make"
    profile, grid = spliced(label_path, command, margin, fill=fill)
    observation = profile.classify(grid)
    assert observation.actionable and observation.prompt is not None, observation.reason
    # The profile read the command raw (its rows joined at spaces, breaks inside words too).
    read = observation.prompt.questions[0].detail.split("\n\n")[0]
    assert "".join(read.split()) == "".join(command.split())
    shown = snapshot(profile, grid, observation)
    projected = project_snapshot(shown, IDS, "turn_1")
    assert projected is not None
    return shown, projected


SENDGRID = next(shape for shape in ONE_ROW if shape.name == "sendgrid")
NARROW_BASH_LONG = next(path for path in BASH_LONG if "2.1.332/60x40" in str(path))


@settings(max_examples=examples(300))
# At 60 columns Claude repeats the command above its prompt cut after three rows with an
# ellipsis: the key there, cut short, matches no rule (found by this test, 2026-12-07).
@example(SENDGRID, NARROW_BASH_LONG, 0, 100, False)
@given(
    st.one_of(st.sampled_from(LONG), st.sampled_from(ONE_ROW)),
    st.sampled_from(BASH_LONG),
    st.integers(min_value=0, max_value=WRAP_MARGIN - 1),
    st.integers(min_value=0, max_value=120),
    st.booleans(),
)
def test_a_wrapped_secret_in_a_bash_command_leaves_no_piece(
    shape: Shape, label_path: Path, margin: int, offset: int, fill: bool
) -> None:
    shown, projected = permission_texts(shape, label_path, margin, offset, fill=fill)
    detail = projected.prompt.questions[0].detail
    event(f"secret broken inside: {shape.secret not in detail}")
    public = json.dumps(projected.projection, ensure_ascii=False)
    shown_rows = excerpt(shown.lines)
    assert shown_rows is not None
    assert_no_piece(shape.secret, public, terminal_row(shown)["asks"], *shown_rows)
    assert MASK in projected.projection["questions"][0]["detail"]


@pytest.mark.parametrize("shape", ONE_ROW, ids=lambda s: s.name)
def test_the_stored_interaction_and_its_event_leave_no_piece(shape: Shape, tmp_path: Path) -> None:
    """What `status`, `events` and the store hold of a prompt is its projection, as stored."""
    label_path = next(p for p in BASH_LONG if "80x24" in str(p))
    shown, projected = permission_texts(shape, label_path, 2, 37, fill=True)
    conn = open_store(tmp_path / "akk.sqlite3")
    with conn:
        conn.execute(
            "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
            "VALUES ('a', 'a', 0, 0)"
        )
        conn.execute(
            "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
            "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
            "VALUES ('t1', 's', '%1', 1, 'claude', 2, 3, 'claude', 0, 0)"
        )
        turn = turns.insert(
            conn, controller_id="a", client_request_id="r1", terminal_id="t1",
            request_sha256="0" * 64, request_chars=5, evidence_status="unknown", evidence=None,
            evidence_limit="test", inactivity_seconds=60, lifetime_seconds=600, now=1.0,
        )  # fmt: skip
        prompt = projected.prompt
        _, new = interactions.record(
            conn, interaction_id=projected.interaction_id, terminal_id="t1",
            turn_id=turn.turn_id, kind=prompt.kind.value, seen=projected.seen,
            profile=shown.identity.profile or "", step_index=prompt.step_index,
            step_total=prompt.step_total, projection=projected.projection, now=1.0,
            announce=turn,
        )  # fmt: skip
        assert new
        stored = [
            json.dumps(row, ensure_ascii=False, default=str)
            for table in ("interactions", "notifications", "turns")
            for row in conn.execute(f"SELECT * FROM {table}").fetchall()
        ]
    conn.close()
    assert any("approval_required" in row for row in stored)
    assert any(MASK in row for row in stored)
    assert_no_piece(shape.secret, *stored)


def test_redacting_a_screen_keeps_its_rows() -> None:
    rows = drawn(f"export GH_TOKEN={'Ab1Cd2Ef3Gh4' * 6} && make", 30, "claude_gutter", fill=True)
    masked = redact_screen(rows).lines
    assert len(masked) == len(rows)
    assert all(m.startswith(" │ ") for m in masked)
    assert masked[0].rstrip() == f" │ export GH_TOKEN={MASK}"
    assert masked[-1].rstrip() == f" │ {MASK} && make"
