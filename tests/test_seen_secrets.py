"""A drawing caught half done shows no piece of a key.

`tmux capture-pane` may catch a pane between two of its client's writes: the new
drawing's rows down to some row, that row half redrawn, the old drawing below.
A key's tail row then shows without the row that named it, or a key's first
characters glued to what the old row held. The pane's Observer remembers what
its drawings so far masked (`SeenSecrets`), and what AKK is about to type, and
masks their pieces on its newest drawing; a key whose prefix says what it is is
masked from its fourth character, however it is cut. The rows below are Codex
0.171.0's approval of the lab's command at 80 columns, as the lab drew it
(tests/lab/test_wrapped_secrets.py runs the real clients).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from akk.actors.terminal_board import terminal_row
from akk.protocol.excerpt import excerpt
from akk.protocol.redaction import FRAGMENT, MASK, SeenSecrets, redact, redact_screen
from akk.qualify.scenarios import (
    COMMAND_SECRET,
    COMMAND_SECRET_BODY,
    SECRET_TASK,
    TASK_SECRET,
    TASK_SECRET_BODY,
)
from tests import corpus
from tests.captured_pane import VERSION, DrawnPane, observing, shown_settled, store_actor

COLS, ROWS = 80, 24


def _screen(*rows: str) -> list[str]:
    """``rows`` at the bottom of an 80x24 pane, each padded to its width."""
    return [row.ljust(COLS) for row in ("",) * (ROWS - len(rows)) + rows]


def _shows(secret: str, text: str) -> bool:
    return any(secret[at : at + FRAGMENT] in text for at in range(len(secret) - FRAGMENT + 1))


APPROVAL = _screen(
    "  Would you like to run the following command?",
    "",
    "  $ touch lab-secret-ran.txt && echo",
    f"  {COMMAND_SECRET[:78]}",
    f"  {COMMAND_SECRET[78:]} lab-secret-ran",
    "",
    "› 1. Yes, proceed (y)",
    "  3. No, and tell Codex what to do differently (esc)",
)
HALF_DONE = _screen(
    "  Would you like to run the following command?",
    "",
    "✗ You canceled the request to run touch lab-secret-ran.txt && echo",
    "  Reason: The lab scenario needs to run this command outside the sandbox.",
    f"  {COMMAND_SECRET[78:]} lab-secret-ran",
    "",
    "› 1. Yes, proceed (y)",
    "  3. No, and tell Codex what to do differently (esc)",
)
"""The cancelled command's history drawn over the approval's rows down to the key's first;
its tail row (15 characters of the key) not yet redrawn."""


def test_a_key_s_tail_row_left_by_a_half_done_drawing_is_masked_once_its_key_was_drawn() -> None:
    whole = [row.strip() for row in redact_screen(APPROVAL).lines[-5:-3]]
    assert whole == [MASK, f"{MASK} lab-secret-ran"]  # the whole key masks both its rows
    alone = "\n".join(excerpt(HALF_DONE) or [])
    assert COMMAND_SECRET[78:] in alone  # on its own, the tail is text like any other
    seen = SeenSecrets(4096)
    seen.add(redact_screen(APPROVAL).secrets)
    shown = "\n".join(excerpt(HALF_DONE, seen=seen.pieces) or [])
    assert not _shows(COMMAND_SECRET_BODY, shown), shown
    assert "lab-secret-ran" in shown and "Reason: The lab scenario" in shown


@pytest.mark.parametrize(
    "prefix", ["github_pat_", "ghp_", "glpat-", "xoxb-", "sk-proj-", "sk_live_", "akkc_"]
)
def test_a_key_its_prefix_names_is_masked_from_its_fourth_character_however_cut(
    prefix: str,
) -> None:
    """The key's first drawing, cut some characters in, before what the old row held from
    there on: no other rule finds it shorter than its full length."""
    body = COMMAND_SECRET_BODY
    for cut in (4, 9, 19):
        for old in ("", "b-o_t01c3s/work   │", "ing (0s • esc to interrupt)"):
            shown = redact(f"  │ {prefix}{body[:cut]}{old}")
            assert body[:4] not in shown, shown


async def test_the_observer_masks_on_its_newest_drawing_what_its_earlier_ones_masked(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        async with store_actor(tmp_path / "akk.db") as store:
            screen, pane = observing(store, size=(COLS, ROWS))
            pane.screen = APPROVAL
            await screen.observe()
            pane.screen = HALF_DONE
            snapshot = await screen.observe()
    assert snapshot is not None and snapshot.lines == tuple(HALF_DONE)
    shown = excerpt(snapshot.lines, seen=snapshot.seen_secrets)
    assert not _shows(COMMAND_SECRET_BODY, "\n".join(shown or [])), shown


async def test_what_akk_types_is_masked_from_its_first_drawing(tmp_path: Path) -> None:
    """The task's key, half drawn on its very first drawing: its prefix row not yet drawn."""
    half = _screen(f"  {TASK_SECRET_BODY[:30]}")
    with trio.fail_after(20):
        async with store_actor(tmp_path / "akk.db") as store:
            screen, pane = observing(store, size=(COLS, ROWS))
            screen.typing(SECRET_TASK)
            pane.screen = half
            snapshot = await screen.observe()
    assert snapshot is not None
    assert TASK_SECRET_BODY[:30] in "\n".join(excerpt(snapshot.lines) or [])
    shown = excerpt(snapshot.lines, seen=snapshot.seen_secrets)
    assert not _shows(TASK_SECRET, "\n".join(shown or [])), shown


async def test_a_reason_quoting_a_row_caught_half_done_masks_what_earlier_drawings_masked(
    tmp_path: Path,
) -> None:
    """Claude 2.1.332 leaves a permission of a title it does not answer to a person, and the
    profile's reason quotes that title row: here it shows the tail of a key drawn whole
    before."""
    tail = COMMAND_SECRET[78:]
    drawn = (corpus.ROOT / "claude" / VERSION / "claude_write-permission.ansi").read_text()
    write = drawn.replace("Create file", f"Create file {tail}").splitlines()
    with trio.fail_after(20):
        async with store_actor(tmp_path / "akk.db") as store:
            screen, pane = observing(store)
            pane.screen = [*[""] * 39, f"  $ echo {COMMAND_SECRET}"]  # the whole key drawn
            await screen.observe()
            shown = await shown_settled(screen, pane, write)
            snapshot = await screen.observe(force=True)
    assert snapshot is not None and snapshot.observation.reason is not None
    assert tail in redact(snapshot.observation.reason)  # on its own, text like any other
    reason = terminal_row(snapshot)["observation"]["reason"]
    detail = shown.projection["detail"]
    for text in (reason, detail):
        assert "is left to a person" in text and not _shows(COMMAND_SECRET_BODY, text), text


async def test_the_first_look_is_a_drawing_two_captures_in_a_row_agree_on(
    tmp_path: Path,
) -> None:
    """After a restart, nothing is remembered yet: a first capture caught half done (the
    key's tail row left over) is taken again, and the drawing that stands is the one read."""
    with trio.fail_after(20):
        async with store_actor(tmp_path / "akk.db") as store:
            screen, pane = observing(store, DrawnPane(HALF_DONE, APPROVAL), size=(COLS, ROWS))
            snapshot = await screen.observe()
            assert snapshot is not None and snapshot.lines == tuple(APPROVAL)
            assert pane.captures == 3  # the half-done one, then the whole one twice
            pane.drawings.append(HALF_DONE)  # later looks take one capture each
            again = await screen.observe()
            assert again is not None and pane.captures == 4
    for shown in (snapshot, again):
        text = "\n".join(excerpt(shown.lines, seen=shown.seen_secrets) or [])
        assert not _shows(COMMAND_SECRET_BODY, text), text


async def test_a_first_look_at_a_pane_that_keeps_changing_takes_its_last_capture(
    tmp_path: Path,
) -> None:
    drawings = [_screen(f"  working ({n}s)") for n in range(8)]
    with trio.fail_after(20):
        async with store_actor(tmp_path / "akk.db") as store:
            screen, pane = observing(store, DrawnPane(*drawings), size=(COLS, ROWS))
            snapshot = await screen.observe()
    assert snapshot is not None and snapshot.lines == tuple(drawings[4])
    assert pane.captures == 5


ANONYMOUS_KEY = "Zq7Xr2Lm9Kp4Wt6Yb1Nc8Vd3Hs5Jf0Ga2Qe7Ru4Tx"
"""A key no prefix names: masked only once 40 of its characters show (docs/redaction.md)."""


async def test_a_new_key_s_first_drawing_caught_half_done_is_read_once_it_is_whole(
    tmp_path: Path,
) -> None:
    """A key drawn for the first time, after the first look: a capture that cut it after
    30 characters shows a head no rule masks and nothing remembers. The look takes the
    pane again, and reads the whole drawing, whose key is masked."""
    idle = _screen("› ")
    half = _screen("  the deploy key is", f"  {ANONYMOUS_KEY[:30]}")
    whole = _screen("  the deploy key is", f"  {ANONYMOUS_KEY} (keep it safe)")
    assert ANONYMOUS_KEY[:30] in redact(half[-1]) and ANONYMOUS_KEY[:8] not in redact(whole[-1])
    with trio.fail_after(20):
        async with store_actor(tmp_path / "akk.db") as store:
            screen, pane = observing(store, DrawnPane(idle, idle, half, whole), size=(COLS, ROWS))
            await screen.observe()
            assert pane.captures == 2  # the first look: two captures agree
            snapshot = await screen.observe()
            assert snapshot is not None and snapshot.lines == tuple(whole)
            assert pane.captures == 4  # the half-done one, then the whole one
            # The key now stays on screen: a look at a drawing with no new head takes one.
            pane.drawings.append(_screen("  the deploy key is", f"  {ANONYMOUS_KEY} (kept)"))
            again = await screen.observe()
            assert again is not None and pane.captures == 5
    for shown in (snapshot, again):
        text = "\n".join(excerpt(shown.lines, seen=shown.seen_secrets) or [])
        assert "the deploy key is" in text and not _shows(ANONYMOUS_KEY, text), text


async def test_a_short_random_run_that_stays_is_read_as_drawn(tmp_path: Path) -> None:
    """A run that looks random but stays as it is (a session id, an identifier) is the
    screen's own: taken once more when it first shows, then read as it is."""
    session = "session 0ffb4f33-fa98-4f0a-be3e-7564ceccf54f"
    idle, shown = _screen("› "), _screen(f"  {session}", "› ")
    with trio.fail_after(20):
        async with store_actor(tmp_path / "akk.db") as store:
            screen, pane = observing(store, DrawnPane(idle, idle, shown), size=(COLS, ROWS))
            await screen.observe()
            snapshot = await screen.observe()
            assert snapshot is not None and pane.captures == 4
            await screen.observe(force=True)
            assert pane.captures == 5
    assert session in "\n".join(excerpt(snapshot.lines) or [])


def test_the_memory_keeps_the_newest_drawn_within_its_bound() -> None:
    seen = SeenSecrets(100)
    first, second, third = "A1b2C3d4E5f6G7h8" * 3, "Zz9Yy8Xx7Ww6Vv5U" * 3, "Qq1Rr2Ss3Tt4Uu5V" * 3
    seen.add([first, "short", second])
    assert first[:FRAGMENT] in seen.pieces and second[-FRAGMENT:] in seen.pieces
    assert "short" not in seen.pieces  # shorter than a piece: nothing to mask
    seen.add([first])  # drawn again: now the newest
    seen.add([third])  # 144 characters: the least recently drawn goes
    assert first[:FRAGMENT] in seen.pieces and third[:FRAGMENT] in seen.pieces
    assert second[:FRAGMENT] not in seen.pieces
    before = seen.pieces
    seen.add([third[3:20]])  # a piece of a kept one, masked by it: nothing new to keep
    assert seen.pieces is before
