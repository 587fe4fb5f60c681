"""Manual screens: which screens they are, one appearance per run, one wake-up once settled.

The appearance logic (`akk.protocol.wakeups.follow` and `Manual.settled`) is checked as
the TerminalActor feeds it and the TurnActor reads it: a run of manual
observations is one appearance whatever its redraws, it is woken about once
one drawing stayed SETTLE_SECONDS and its processes then rested (or stayed
SETTLE_CAP_SECONDS), and a readable screen ends it. Then the
projection and its wake-up as the store writes them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import apsw
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from akk.actors.terminal_board import TerminalSnapshot, project_snapshot
from akk.discovery.identity import TerminalIdentity
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    PromptView,
    State,
    StepKind,
)
from akk.protocol.schema import INTERACTION
from akk.protocol.wakeups import (
    SETTLE_CAP_SECONDS,
    SETTLE_SECONDS,
    Manual,
    digest,
    follow,
    manual_reason,
)
from akk.screen.fingerprint import Appearance, IdMinter
from akk.screen.region import Region
from akk.store import interactions, turns
from akk.store.database import open_store
from akk.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from tests import corpus

IDS = IdMinter(b"k" * 32)
IDENTITY = TerminalIdentity(
    "t1", "s", "%7", 1, "claude", 101, 3, "claude", "2.1.332", "/w", "claude-code@2.1.332", None
)
CUT = Observation(State.UNKNOWN, "p", reason="permission prompt truncated: no question row")


@pytest.mark.parametrize(
    ("observation", "profiled", "lines", "expected"),
    [
        (Observation(State.IDLE, "p"), True, (), None),
        (Observation(State.WORKING, "p"), True, (), None),
        (Observation(State.UNKNOWN, "p", reason="blank screen"), True, (), None),
        (Observation(State.UNKNOWN, None, reason="not_observed_yet"), False, (), None),
        (Observation(State.UNKNOWN, None, reason="unpinned_version: x"), False, (),
         "unsupported_version"),
        (Observation(State.UNKNOWN, "p", reason="version_mismatch: v9"), True, (),
         "unsupported_version"),
        (Observation(State.BLOCKED, "p", reason="blocked: trust screen needs a person"), True, (),
         "user_verification"),
        (Observation(State.BLOCKED, "p", reason="blocked: non-Bash permission (Edit) is left to a "
         "person"), True, (), "unsupported_shape"),
        (CUT, True, (), "prompt_cut_off"),
        (Observation(State.BLOCKED, "p", reason="blocked: api_key screen needs a person"), True,
         ("Detected a custom API key", "Do you want to use this API key?"), "secret_input"),
        (Observation(State.UNKNOWN, None, reason="unpinned_version: x"), False,
         ("Paste code here if prompted",), "secret_input"),
        (Observation(State.UNKNOWN, "p", reason="unexpected row 6"), True, ("  ↑ 3 more lines",),
         "prompt_cut_off"),
        (Observation(State.UNKNOWN, "p", reason="unexpected row 6"), True, ("❯ 1. Yes",),
         "unreadable_prompt"),
    ],
)  # fmt: skip
def test_which_screens_are_manual_and_why(
    observation: Observation, profiled: bool, lines: tuple[str, ...], expected: str | None
) -> None:
    assert manual_reason(observation, profiled=profiled, lines=lines) == expected


PERSON_SCREENS = [
    path
    for path in corpus.MAIN
    if path.stem.startswith(("claude_transcript_view", "claude_person_modes", "codex_person_modes"))
    or "_person_while_working-" in path.stem
]
WAKES = {
    "claude_transcript_view-dialog_waiting": "prompt_hidden",
    "claude_person_modes-transcript": None,
    "claude_transcript_view-working": None,
}
"""The detailed transcript a person opens wakes nobody, unless a prompt waits behind it. A
person at the composer while a turn works (a draft, the shell mode, Codex's history search)
reads working and wakes nobody. The other person modes (at rest, a picker, the rewind menu,
Claude's history search) are no view over the agent's work: they wake the owner of a Turn
(`unreadable_prompt`), Claude's search once the spinner above it rests."""


@pytest.mark.parametrize("path", PERSON_SCREENS, ids=corpus.name)
def test_only_a_prompt_behind_a_person_s_view_wakes_its_owner(path: Path) -> None:
    label, grid = corpus.screen(path)
    _, observation = corpus.observed(path)
    found = manual_reason(observation, profiled=True, lines=grid.lines())
    if label["expected"]["state"] != "unknown":
        assert found is None
    else:
        assert found == WAKES.get(path.stem, "unreadable_prompt"), (path.stem, observation.reason)


def test_a_read_prompt_is_never_a_manual_screen_even_when_refused() -> None:
    """A prompt the profile read keeps its own fingerprinted appearance (pending_call_*)."""
    prompt = PromptView(InteractionKind.PERMISSION, StepKind.PERMISSION, (), Region(0, 1, 0, 1))
    refused = Observation(State.PERMISSION, "p", prompt, reason="pending_call_mismatch")
    assert manual_reason(refused, profiled=True) is None


# One observation: a readable screen (None) or manual drawing n, whether the pane's processes
# rested right before it, then seconds until the next.
_steps = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(0, 2)),
        st.booleans(),
        st.sampled_from((0.03, 0.2, 0.6, 3.0)),
    ),
    max_size=30,
)


@given(_steps)
def test_one_wake_up_per_run_that_settles_none_per_redraw(
    steps: list[tuple[int | None, bool, float]],
) -> None:
    minted: list[Appearance] = []

    def mint(screen: bytes) -> Appearance:
        minted.append(Appearance(screen, len(minted) + 1))
        return minted[-1]

    current: Manual | None = None
    clock, woken = 0.0, []
    announced: Appearance | None = None
    expected, run_ids = 0, []
    run_settled, drawn, drawn_since = False, None, 0.0
    for shown, resting, gap in steps:
        observation = Observation(State.IDLE, "p") if shown is None else _unread(shown)
        lines = ("idle",) if shown is None else (f"drawing {shown}",)
        before = current
        current = follow(
            current, observation, profiled=True, agent="claude", lines=lines, now=clock,
            mint=mint, resting=resting,
        )  # fmt: skip
        if shown is None:
            assert current is None  # a readable screen ends the appearance
            expected += run_settled
            run_settled, drawn = False, None
        else:
            assert current is not None
            if before is None or (before.screen != digest(lines) and not before.settled(clock)):
                # Named by its newest drawing until it settles: nobody was shown it yet.
                assert current.seen.fingerprint == digest(lines)
                run_ids.append(current.seen)
            else:
                assert current.seen == before.seen  # once shown, a redraw keeps it
            if shown != drawn:
                drawn, drawn_since = shown, clock
            elif resting and clock - drawn_since >= SETTLE_SECONDS:
                run_settled = True  # stood still, and nothing was left to draw
        # The TurnActor looks every tick until the next observation.
        for tick in (clock, clock + gap - 1e-9):
            snapshot = TerminalSnapshot(IDENTITY, observation, None, lines, clock, manual=current)
            if (shows := snapshot.showing(tick)) != announced:
                if shows is not None:
                    woken.append(shows)
                announced = shows
        if drawn is not None and clock + gap - 1e-9 - drawn_since >= SETTLE_CAP_SECONDS:
            run_settled = True  # stood still however busy its processes
        clock += gap
    expected += run_settled
    assert len(woken) == expected
    assert len(set(woken)) == len(woken)  # never twice for one appearance
    assert set(woken) <= set(run_ids)
    assert len(set(run_ids)) == len(run_ids)  # each run is a new appearance


def _unread(drawing: int) -> Observation:
    return Observation(State.UNKNOWN, "p", reason=f"unexpected row {drawing}")


def _manual(lines: tuple[str, ...], *, rested: bool = True) -> TerminalSnapshot:
    """The screen ``lines`` drawn at 0, and looked at again SETTLE_SECONDS later, its
    processes at rest just before if ``rested``."""
    mint = lambda screen: Appearance(screen, 42)  # noqa: E731
    current = None
    for now in (0.0, SETTLE_SECONDS):
        current = follow(
            current, CUT, profiled=True, agent="claude", lines=lines, now=now, mint=mint,
            resting=rested,
        )  # fmt: skip
    return TerminalSnapshot(IDENTITY, CUT, None, lines, SETTLE_SECONDS, manual=current)


def test_a_manual_screen_may_be_passing_only_for_its_first_settle_time() -> None:
    """Passing: possibly a frame caught between two drawings of a prompt, so the prompt
    before it is not taken off the screen yet (`TurnFollower.look`). Not once it settled,
    and not past SETTLE_SECONDS from its first drawing, however it keeps changing."""
    mint = lambda screen: Appearance(screen, 42)  # noqa: E731
    first = follow(None, _unread(1), profiled=True, agent="claude", lines=("a",), now=10.0,
                   mint=mint)  # fmt: skip
    assert first is not None
    assert first.passing(10.0) and first.passing(10.0 + SETTLE_SECONDS * 0.9)
    assert not first.passing(10.0 + SETTLE_SECONDS)
    redrawn = follow(first, _unread(2), profiled=True, agent="claude", lines=("b",),
                     now=10.0 + SETTLE_SECONDS * 0.9, mint=mint)  # fmt: skip
    assert redrawn is not None and redrawn.began == 10.0
    assert not redrawn.settled(10.0 + SETTLE_SECONDS) and not redrawn.passing(10.0 + SETTLE_SECONDS)


def test_a_manual_screen_settles_once_its_processes_rest_or_it_stood_for_the_cap() -> None:
    """A screen that stood still while its client (or tmux) still had a frame to write may
    be that frame half written: it waits for them to rest, or for SETTLE_CAP_SECONDS."""
    lines = (" Do you want to proceed?", " ❯ 1. Yes", " ↑ 3 more lines")
    busy = _manual(lines, rested=False)
    assert project_snapshot(busy, IDS, "turn_1", now=SETTLE_CAP_SECONDS * 0.9) is None
    assert project_snapshot(busy, IDS, "turn_1", now=SETTLE_CAP_SECONDS) is not None
    assert busy.manual is not None
    early = follow(
        busy.manual, CUT, profiled=True, agent="claude", lines=lines, now=SETTLE_SECONDS * 0.9,
        mint=lambda screen: Appearance(screen, 42), resting=True,
    )  # fmt: skip
    assert early is not None and not early.settled(SETTLE_SECONDS)  # at rest, not still yet
    assert project_snapshot(_manual(lines), IDS, "turn_1", now=SETTLE_SECONDS) is not None


def test_a_settled_manual_screen_is_projected_with_nothing_to_answer() -> None:
    snapshot = _manual((" Do you want to proceed?", " ❯ 1. Yes", " ↑ 3 more lines"))
    shown = project_snapshot(snapshot, IDS, "turn_1", now=SETTLE_SECONDS)
    assert shown is not None and not shown.actionable and shown.prompt is None
    projection = shown.projection
    jsonschema.validate(projection, INTERACTION)
    assert projection["interaction_id"] == IDS.interaction_id(
        Appearance(shown.seen.fingerprint, 42)
    )
    assert (projection["kind"], projection["state"]) == ("permission", "manual_required")
    assert projection["reason"] == projection["manual_reason"] == "prompt_cut_off"
    assert (projection["terminal_id"], projection["pane"]) == ("t1", "%7")
    assert projection["questions"] == [] and "decisions" not in projection
    other = project_snapshot(_manual(("Trust this folder?",)), IDS, None, now=1.0)
    assert other is not None and other.kind == "confirmation"  # one of PROTOCOL's kinds
    jsonschema.validate(other.projection, INTERACTION)


def _stage(conn: apsw.Connection) -> None:
    """Controller a and terminal t1 (pane %7), as the service records them."""
    conn.execute(
        "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
        "VALUES ('a', 'a', 0, 0)"
    )
    conn.execute(
        "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
        "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
        "VALUES ('t1', 's', '%7', 1, 'claude', 101, 3, 'claude', 0, 0)"
    )


@pytest.mark.parametrize(
    ("lines", "wake_up"),
    [((" Do you want to proceed?",), "approval_required"), (("??",), "interaction_required")],
)
def test_the_wake_up_of_a_manual_screen_names_the_pane(
    tmp_path: Path, lines: tuple[str, ...], wake_up: str
) -> None:
    conn = open_store(tmp_path / "akk.sqlite3")
    with conn:
        _stage(conn)
        turn = turns.insert(
            conn, controller_id="a", client_request_id="r", terminal_id="t1",
            request_sha256="0" * 64, request_chars=1, evidence_status="unknown", evidence=None,
            evidence_limit="test", inactivity_seconds=60, lifetime_seconds=3600, now=1.0,
        )  # fmt: skip
        shown = project_snapshot(_manual(lines), IDS, turn.turn_id, now=1.0)
        assert shown is not None
        for _ in range(2):  # the Turn's monitor, then a status call: one wake-up
            interactions.record(
                conn, interaction_id=shown.interaction_id, terminal_id="t1", turn_id=turn.turn_id,
                kind=shown.kind, seen=shown.seen, profile="p", step_index=1, step_total=1,
                projection=shown.projection, now=2.0, announce=turn,
            )  # fmt: skip
    ((kind, payload),) = conn.execute(
        "SELECT kind, payload FROM notifications WHERE kind IN (?, ?)",
        ("interaction_required", "approval_required"),
    )
    conn.close()
    body = json.loads(payload)
    assert kind == wake_up
    assert body["interaction"] == shown.projection
    assert "%7" in body["summary"] and "prompt_cut_off" in body["summary"]


def test_a_v6_store_keeps_its_interactions_and_offers_and_takes_unknown_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "akk.sqlite3"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    old = apsw.Connection(str(path))
    old.execute("PRAGMA foreign_keys = ON")
    with old:
        for version, sql in enumerate(MIGRATIONS[:6], start=1):
            old.execute(sql)
            old.execute(f"PRAGMA user_version = {version}")
        old.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        _stage(old)
        old.execute(
            "INSERT INTO interactions (interaction_id, terminal_id, kind, fingerprint, profile, "
            "projection, state, created_at, updated_at) "
            "VALUES ('int_a', 't1', 'permission', x'00', 'p', '{}', 'pending', 1, 1)"
        )
        old.execute(
            "INSERT INTO offers (offer_id, interaction_id, controller_id, fingerprint, state, "
            "created_at, expires_at, updated_at) VALUES ('ofr_a', 'int_a', 'a', x'00', 'open', "
            "1, 2, 1)"
        )
    old.close()
    conn = open_store(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    row = interactions.get(conn, "int_a")
    assert row is not None and row.kind == "permission"
    assert interactions.offer_of(conn, "int_a", "a") is not None
    with conn:
        conn.execute(
            "INSERT INTO interactions (interaction_id, terminal_id, kind, fingerprint, profile, "
            "projection, state, created_at, updated_at) "
            "VALUES ('int_b', 't1', 'unknown', x'01', 'p', '{}', 'pending', 1, 1)"
        )
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()
