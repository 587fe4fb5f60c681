"""A permission drawn before its call is in the agent's file is held, then offered.

The Observer reads a captured Claude 2.1.332 Bash permission through a stand-in
for tmux, with a real StoreActor whose Turn is bound to a transcript written
here: the real file of that version's `permission` case, up to the tool call.
While the call is missing the snapshot is held (busy: nobody is woken about
it or may answer it) and asks to be read again although the screen stays the
same; once the call is written it is actionable, bound to that call; and a
call that never comes makes it `pending_call_unknown` after the grace, not
before, and not held any more. A step AKK answered that shows again still bound to
the call just answered (the agent asking the identical thing before its file says
so) is held too, until the file names the new call, or for the grace.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import apsw
import pytest
import trio

from akk import evidence
from akk.actors.terminal_board import TerminalSnapshot
from akk.backends.terminal import observer as observer_module
from akk.backends.terminal.observer import PENDING_GRACE, PENDING_POLL, Observer
from akk.evidence.files import identify
from akk.profiles.permission import PENDING_CALL_MISMATCH, PENDING_CALL_UNKNOWN
from akk.protocol import wakeups
from akk.store import turns
from akk.store.database import open_store
from tests import corpus
from tests.captured_pane import VERSION, CapturedPane, observing, store_actor
from tests.store_rows import add_ctl_and_t1

SCREEN = corpus.ROOT / "claude" / VERSION / "claude_bash-permission"
TRANSCRIPT = corpus.ROOT / "evidence" / "claude" / VERSION / "permission.jsonl"


def _pane() -> CapturedPane:
    """A pane showing the permission screen."""
    return CapturedPane(SCREEN.with_suffix(".ansi").read_text().splitlines())


def _lines() -> tuple[list[bytes], int]:
    """The transcript's lines, and the index of the one that holds the tool call."""
    lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
    for index, line in enumerate(lines):
        content = json.loads(line).get("message", {}).get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_use" for b in content):
            return lines, index
    raise AssertionError("the fixture has no tool call")


def _binding(file: Path) -> str:
    """A binding of ``file`` from its start."""
    found = identify(str(file))
    assert found is not None
    anchor = evidence.Anchor(0, "0" * 64)
    return evidence.Binding("claude", found[0], 0, anchor, session_id=None).to_json()


def _turn(conn: apsw.Connection, file: Path, *, bound: bool) -> None:
    """Controller ``ctl``, terminal ``t1``, and a Turn there: bound to ``file`` from its
    start, or sent and not bound yet."""
    add_ctl_and_t1(conn)
    turns.insert(
        conn, controller_id="ctl", client_request_id="r1", terminal_id="t1",
        request_sha256="0" * 64, request_chars=4,
        evidence_status="bound" if bound else "pending",
        evidence=_binding(file) if bound else None, evidence_limit=None,
        inactivity_seconds=600, lifetime_seconds=600, now=time.time(),
    )  # fmt: skip


def _mid_draw(screen: list[str]) -> list[str]:
    """``screen`` with the command caught half drawn (the last three characters missing)."""
    return [
        line.removesuffix("ran") if line.endswith("echo lab-bash-ran") else line for line in screen
    ]


@asynccontextmanager
async def _observer(
    tmp_path: Path, *, upto: int | None = None, bound: bool = True, pane: CapturedPane | None = None
) -> AsyncIterator[tuple[Observer, Path, Path]]:
    """An Observer of the permission screen, its Turn's transcript written up to line ``upto``
    (default: up to the call); with the file and the store."""
    lines, call_at = _lines()
    file = tmp_path / "session.jsonl"
    file.write_bytes(b"".join(lines[: call_at if upto is None else upto]))
    db = tmp_path / "akk.sqlite3"
    conn = open_store(db)
    try:
        _turn(conn, file, bound=bound)
    finally:
        conn.close()
    label = corpus.label(SCREEN.with_suffix(".json"))
    async with store_actor(db) as store:
        screen, _ = observing(store, pane or _pane(), (label["cols"], label["rows"]))
        yield screen, file, db


async def _published(screen: Observer) -> tuple[TerminalSnapshot, float]:
    """Look at a held screen every PENDING_POLL until it is published; the snapshot and
    how long it was held, from before the first look (which starts its clocks)."""
    began = trio.current_time()
    snapshot = await screen.observe()
    assert snapshot is not None and snapshot.busy
    while snapshot.busy:
        await trio.sleep(PENDING_POLL)
        latest = await screen.observe()
        assert latest is not None
        snapshot = latest
    return snapshot, trio.current_time() - began


async def test_a_permission_is_held_until_its_call_is_written_then_offered(
    tmp_path: Path,
) -> None:
    lines, call_at = _lines()
    with trio.fail_after(20):
        async with _observer(tmp_path) as (screen, file, _db):
            held = await screen.observe()
            assert held is not None and held.busy and screen.recheck == PENDING_POLL
            assert held.observation.reason == PENDING_CALL_UNKNOWN  # were it published now
            # The same screen, read again: still held while the file has no call.
            again = await screen.observe()
            assert again is not None and again.busy and again.seq == held.seq + 1
            with file.open("ab") as out:
                out.write(lines[call_at])
            offered = await screen.observe()
            assert offered is not None and not offered.busy and screen.recheck is None
            assert offered.observation.actionable and offered.observation.reason is None
            assert offered.seen is not None and offered.seen != held.seen  # binds the call
            # Its appearance began once bound, but it was painted when first held: an
            # answer's first keys wait out the client's settle from then, not from now.
            assert screen.painted_since <= held.observed_at <= screen.seen_since
            # Unchanged from now on: no recheck, the published snapshot stands.
            assert await screen.observe() is offered


async def test_a_call_that_never_comes_is_pending_call_unknown_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grace = 0.3
    monkeypatch.setattr(observer_module, "PENDING_GRACE", grace)
    with trio.fail_after(20):
        async with _observer(tmp_path) as (screen, _file, _db):
            snapshot, held_for = await _published(screen)
            assert held_for >= grace - PENDING_POLL
            assert snapshot.observation.reason == PENDING_CALL_UNKNOWN
            assert not snapshot.observation.actionable and screen.recheck is None
            # It stays published as it is: a later look of the same screen is no new one.
            assert await screen.observe() is snapshot


async def test_a_permission_of_a_turn_not_bound_yet_is_held_until_its_binding(
    tmp_path: Path,
) -> None:
    """Before its Turn is bound, no call in the file can be told the Turn's own (earlier
    Turns' calls, two files): the prompt is held, though the whole file shows the call."""
    _, call_at = _lines()
    with trio.fail_after(20):
        async with _observer(tmp_path, upto=call_at + 1, bound=False) as (screen, file, db):
            held = await screen.observe()
            assert held is not None and held.busy and screen.recheck == PENDING_POLL
            conn = open_store(db)
            try:
                conn.execute(
                    "UPDATE turns SET evidence_status = 'bound', evidence = ?", (_binding(file),)
                )
            finally:
                conn.close()
            offered = await screen.observe()
            assert offered is not None and not offered.busy
            assert offered.observation.actionable and offered.observation.reason is None


async def test_a_screen_caught_mid_draw_is_read_again_not_published(tmp_path: Path) -> None:
    """The command half drawn does not match the call: held, and bound once drawn whole."""
    _, call_at = _lines()
    pane = _pane()
    whole, pane.screen = pane.screen, _mid_draw(pane.screen)
    with trio.fail_after(20):
        async with _observer(tmp_path, upto=call_at + 1, pane=pane) as (screen, _file, _db):
            held = await screen.observe()
            assert held is not None and held.busy and screen.recheck == PENDING_POLL
            assert held.observation.reason == PENDING_CALL_MISMATCH  # were it published now
            pane.screen = whole
            offered = await screen.observe()
            assert offered is not None and not offered.busy
            assert offered.observation.actionable and offered.observation.reason is None


@pytest.mark.parametrize("resting", [True, False], ids=["at_rest", "busy"])
async def test_a_screen_that_disagrees_with_its_call_is_published_once_it_stood_still(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resting: bool
) -> None:
    """Not for the whole grace: a mismatch that stays is a person's as soon as the screen
    has stood still for SETTLE_SECONDS with its processes at rest, or, while the tmux
    server (here a busy loop) never rests, for SETTLE_CAP_SECONDS."""
    monkeypatch.setattr(wakeups, "SETTLE_SECONDS", 0.3)
    if not resting:
        monkeypatch.setattr(wakeups, "SETTLE_CAP_SECONDS", 1.0)
    settle, cap = (0.3 if resting else 1.0), wakeups.SETTLE_CAP_SECONDS
    _, call_at = _lines()
    pane = _pane()
    pane.screen = _mid_draw(pane.screen)
    spinning = await trio.lowlevel.open_process([sys.executable, "-c", "while True: pass"])
    if not resting:
        pane.server_pid = spinning.pid
    try:
        with trio.fail_after(20):
            async with _observer(tmp_path, upto=call_at + 1, pane=pane) as (screen, _file, _db):
                snapshot, held_for = await _published(screen)
                assert settle - PENDING_POLL <= held_for < (cap if resting else PENDING_GRACE)
                assert snapshot.observation.reason == PENDING_CALL_MISMATCH
                assert not snapshot.observation.actionable and screen.recheck is None
                assert await screen.observe() is snapshot
    finally:
        spinning.kill()
        await spinning.wait()


def _asked_again(line: bytes) -> list[bytes]:
    """The records of the call on ``line`` answered, and the same call made again (another
    id, the same command): what the file holds once the agent asks the identical thing."""
    record = json.loads(line)
    (call,) = [b for b in record["message"]["content"] if b.get("type") == "tool_use"]
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": "done"}
    answered = {"type": "user", "message": {"role": "user", "content": [result]}}
    record["message"]["content"] = [{**call, "id": call["id"] + "_again"}]
    return [(json.dumps(r) + "\n").encode() for r in (answered, record)]


async def test_a_step_answered_then_asked_again_is_held_until_its_new_call_is_written(
    tmp_path: Path,
) -> None:
    """Claude may draw the identical prompt asked again before it writes the first one's
    result and the new call: for that moment the screen binds to the call just answered.
    It is held (nobody is offered a prompt that changes under them) until the new call."""
    lines, call_at = _lines()
    with trio.fail_after(20):
        async with _observer(tmp_path, upto=call_at + 1) as (screen, file, _db):
            offered = await screen.observe()
            assert offered is not None and not offered.busy and offered.observation.actionable
            assert offered.observation.prompt is not None and offered.observation.prompt.call
            screen.spend(offered.observation.prompt)  # AKK's answer ended that step
            again = await screen.observe(force=True)
            assert again is not None and again.busy and screen.recheck == PENDING_POLL
            with file.open("ab") as out:
                out.writelines(_asked_again(lines[call_at]))
            asked = await screen.observe()
            assert asked is not None and not asked.busy and asked.observation.actionable
            assert asked.observation.prompt is not None
            assert asked.observation.prompt.call != offered.observation.prompt.call
            assert asked.seen != offered.seen  # a new interaction, for the new call


async def test_a_step_answered_and_shown_again_with_no_new_call_is_offered_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person went back to the step (Claude's tabs): the file names no other call, so
    after the grace it is offered, bound to the same call."""
    grace = 0.3
    monkeypatch.setattr(observer_module, "PENDING_GRACE", grace)
    _, call_at = _lines()
    with trio.fail_after(20):
        async with _observer(tmp_path, upto=call_at + 1) as (screen, _file, _db):
            offered = await screen.observe()
            assert offered is not None and offered.observation.prompt is not None
            screen.spend(offered.observation.prompt)
            await screen.observe(force=True)
            snapshot, held_for = await _published(screen)
            assert held_for >= grace - PENDING_POLL
            assert snapshot.observation.actionable and screen.recheck is None
            assert snapshot.observation.prompt == offered.observation.prompt
