"""`list` kept current (`akk.methods.list_view`) equals a rebuild from scratch after every change.

The rebuild below is `list` as it was built per call before the view was kept:
every terminal's row from the board, the holders and the caller's records read
from the store. A Hypothesis test drives a real store (writes on a connection
of their own, as the StoreActor and retention make them) and a real board
through random changes, and after each one compares what the operator, two
controllers and a credential narrowed to a root are shown.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import apsw
import attrs
import hypothesis.strategies as st
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings

from akk.actors.terminal_board import TerminalBoard, terminal_row
from akk.discovery.identity import TerminalIdentity
from akk.methods.common import available_actions
from akk.methods.list_view import (
    MESSAGE_CHARS,
    RECORDS_MAX_BYTES,
    SESSIONS_MAX_BYTES,
    TERMINALS_MAX_BYTES,
    ListView,
    Owner,
)
from akk.profiles.observation import Observation, State
from akk.sessions import policy
from akk.store import credentials, outbox, sessions, terminals, turns
from akk.store.database import open_store
from akk.store.reader import StoreReader
from akk.store.turns import TurnState
from akk.workspace_roots import pane_allowed
from tests.tier import examples

T = TypeVar("T")
PANES = 4
OWNERS = ("ctl_a", "ctl_b")
ROOT = "/nonexistent/akk-list-view/a"
CWDS = (ROOT, "/nonexistent/akk-list-view/b", None)
VIEWERS: tuple[tuple[Owner, tuple[str, ...]], ...] = (
    (None, ()),
    ("ctl_a", ()),
    ("ctl_b", ()),
    ("ctl_a", (ROOT,)),
)


def identity(pane: int, cwd: str | None, profile: str | None) -> TerminalIdentity:
    return TerminalIdentity(
        terminal_id=f"term_{pane}", tmux_socket="/tmp/sock", pane_id=f"%{pane}", pane_pid=100,
        agent="claude", agent_pid=200 + pane, process_start=1, executable="claude",
        version="1.0.0", cwd=cwd, profile=profile,
        profile_reason=None if profile else "version_not_qualified",
    )  # fmt: skip


def rebuild(board: TerminalBoard, conn: apsw.Connection, owner: Owner, narrowed: Any) -> Any:
    """`list` built from scratch, as every call built it before the view was kept."""
    held = {t.terminal_id: t for t in turns.unresolved(conn)}
    mine = turns.of_controller(conn, owner)
    retryable = outbox.retryable_records(conn, owner)
    rows = []
    for snapshot in sorted(board, key=lambda s: s.identity.pane_id):
        row = terminal_row(snapshot)
        if not pane_allowed(row["cwd"], narrowed):
            continue
        holder = held.get(row["terminal_id"])
        if holder is not None and owner in (None, holder.controller_id):
            row |= holder.ids
            row["session_id"] = holder.native_session
        actions = [{"method": "status", "params": {"terminal_id": row["terminal_id"]}}]
        state = row["observation"]["state"]
        if holder is None and row["profile"] and state not in ("idle_draft", "unknown"):
            method = "send" if state == "idle" else "watch"
            actions.append({"method": method, "params": {"terminal_id": row["terminal_id"]}})
        row["available_actions"] = actions
        rows.append(row)
    fitting, used = [], 0
    for row in rows:  # in pane order, while they fit their bound
        used += len(json.dumps(row, separators=(",", ":"))) + 1
        if used > TERMINALS_MAX_BYTES:
            break
        fitting.append(row)

    def shown(record: turns.Turn) -> dict[str, Any]:
        retry = record.turn_id in retryable
        row = record.public() | {"available_actions": available_actions(record, retryable=retry)}
        if row["final_message"] is not None and len(row["final_message"]) > MESSAGE_CHARS:
            whole = len(row["final_message"])
            row["final_message"] = (
                f"{row['final_message'][:MESSAGE_CHARS]}…[cut: {whole:,} characters in all]"
            )
        return row

    # Newest first, while the rows (and a comma each) fit their bound.
    records, used = [], 0
    for record in reversed(mine):
        used += len(json.dumps(shown(record), separators=(",", ":"))) + 1
        if used > RECORDS_MAX_BYTES:
            break
        records.insert(0, record)
    listed, used, session_rows = sessions.listing(conn, owner), 0, []
    for row in listed:
        used += len(json.dumps(row, separators=(",", ":"))) + 1
        if used > SESSIONS_MAX_BYTES:
            break
        session_rows.append(row)
    whose = "controller_id IS NOT NULL" if owner is None else "controller_id = ?"
    args = () if owner is None else (owner,)
    open_rows = conn.execute(
        f"SELECT task_kind FROM turns WHERE {whose} AND closed_at IS NULL", args
    ).fetchall()
    current = conn.execute(
        f"SELECT count(*) FROM sessions WHERE {whose} AND retired_at IS NULL", args
    ).fetchone()[0]
    return {
        "terminals": fitting,
        "turns": [shown(t) for t in records if not t.is_watch],
        "watches": [shown(t) for t in records if t.is_watch],
        "sessions": session_rows,
        "omitted": {
            "turns": sum(kind != "watch" for (kind,) in open_rows)
            - sum(not t.is_watch for t in records),
            "watches": sum(kind == "watch" for (kind,) in open_rows)
            - sum(t.is_watch for t in records),
            "sessions": current - sum(r["retired_at"] is None for r in session_rows),
            "terminals": len(rows) - len(fitting),
        },
    }


@attrs.define
class World:
    """A store, its writer, a board and the view under test."""

    conn: apsw.Connection
    reader: StoreReader
    board: TerminalBoard
    view: ListView
    records: list[str] = attrs.field(factory=list)

    async def check(self) -> None:
        for owner, narrowed in VIEWERS:
            got = json.loads((await self.view.listing(owner, narrowed)).json)
            assert got == rebuild(self.board, self.conn, owner, narrowed), (owner, narrowed)


@contextmanager
def world(path: Path) -> Iterator[World]:
    if path.exists():
        path.unlink()
    conn = open_store(path)
    with conn:
        for owner in OWNERS:
            credentials.record_use(conn, owner, owner, 1.0)
        for pane in range(PANES):
            terminals.record_seen(conn, identity(pane, None, None), 1.0)
    board = TerminalBoard()
    reader = StoreReader(path)
    try:
        yield World(conn, reader, board, ListView(board, reader))
    finally:
        reader.close()
        conn.close()


def apply(w: World, change: tuple[Any, ...]) -> None:
    """Make one change to the board or the store."""
    kind, *args = change
    board, conn, now = w.board, w.conn, time.time()
    if kind == "announce":
        pane, cwd, profile = args
        board.announce(identity(pane, cwd, profile), None, trio.current_time())
    elif kind == "observe":
        pane, state = args
        snapshot = board.get(f"term_{pane}")
        if snapshot is not None:
            observation = Observation(state, snapshot.identity.profile)
            board.publish(attrs.evolve(snapshot, observation=observation, seq=snapshot.seq + 1))
    elif kind == "retire":
        board.retire(f"term_{args[0]}")
    elif kind == "forget":
        board.forget(f"term_{args[0]}")
    elif kind in ("send", "watch"):
        owner, pane = args
        with conn:
            if conn.execute(
                "SELECT 1 FROM turns WHERE terminal_id = ? AND state NOT IN "
                "('done', 'failed', 'cancelled', 'stalled', 'timed_out') "
                "AND closed_at IS NULL AND unwatched_at IS NULL",
                (f"term_{pane}",),
            ).fetchone():
                return  # one unresolved record per pane, as the methods enforce
            common = dict(
                controller_id=OWNERS[owner], evidence_status="pending", evidence=None,
                evidence_limit=None, inactivity_seconds=60.0, lifetime_seconds=600.0, now=now,
                terminal_id=f"term_{pane}",
            )  # fmt: skip
            if kind == "watch":
                record = turns.insert_watch(conn, **common)  # type: ignore[arg-type]
            else:
                record = turns.insert(
                    conn, client_request_id=f"req-{len(w.records)}", request_sha256="0" * 64,
                    request_chars=1, **common,  # type: ignore[arg-type]
                )  # fmt: skip
        w.records.append(record.turn_id)
    elif w.records:
        turn_id = w.records[args[0] % len(w.records)]
        with conn:
            record = turns.get(conn, turn_id)
            if record is None:
                return
            if kind == "settle" and not record.state.settled:
                turns.settle(conn, record, TurnState.DONE, now=now, summary="done")
            elif kind == "fail_delivery":
                conn.execute(
                    "UPDATE notifications SET state = 'retryable_failure' WHERE turn_id = ?",
                    (turn_id,),
                )
            elif kind == "unwatch" and record.is_watch:
                turns.update(conn, record, unwatched_at=now)
            elif kind == "close" and not record.is_watch:
                turns.update(conn, record, closed_at=now)
            elif kind == "prune":
                # As retention deletes a record: its notifications first, then the row.
                conn.execute("DELETE FROM notifications WHERE turn_id = ?", (turn_id,))
                conn.execute("DELETE FROM turns WHERE turn_id = ?", (turn_id,))


panes = st.integers(0, PANES - 1)
records = st.integers(0, 20)
changes = st.one_of(
    st.tuples(st.just("announce"), panes, st.sampled_from(CWDS), st.sampled_from([None, "p"])),
    st.tuples(st.just("observe"), panes, st.sampled_from(list(State))),
    st.tuples(st.sampled_from(["retire", "forget"]), panes),
    st.tuples(st.sampled_from(["send", "watch"]), st.integers(0, len(OWNERS) - 1), panes),
    st.tuples(st.sampled_from(["settle", "fail_delivery", "unwatch", "close", "prune"]), records),
)


@settings(
    max_examples=examples(60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(changes, max_size=25))
def test_the_kept_view_equals_a_rebuild_after_every_change(
    tmp_path: Path, steps: list[tuple[Any, ...]]
) -> None:
    async def main() -> None:
        with trio.fail_after(60), world(tmp_path / "store.db") as w:
            await w.check()
            for change in steps:
                apply(w, change)
                await w.check()

    trio.run(main)


def test_callers_at_once_share_a_read_and_see_what_was_committed_before_they_called(
    tmp_path: Path,
) -> None:
    """Callers at once each get their own view; one that calls after a write, while the
    others' read is under way, sees the write; those that called before see it or not."""

    async def main() -> None:
        with trio.fail_after(60), world(tmp_path / "store.db") as w:
            apply(w, ("announce", 0, ROOT, "p"))
            apply(w, ("announce", 1, None, "p"))
            apply(w, ("send", 0, 0))
            apply(w, ("watch", 1, 1))
            before = {v: rebuild(w.board, w.conn, *v) for v in VIEWERS}
            early: list[tuple[tuple[Owner, tuple[str, ...]], Any]] = []
            late: list[tuple[tuple[Owner, tuple[str, ...]], Any]] = []

            async def call(viewer: tuple[Owner, tuple[str, ...]], into: list[Any]) -> None:
                shown = json.loads((await w.view.listing(*viewer)).json)
                into.append((viewer, shown))

            async with trio.open_nursery() as nursery:
                for n in range(20):
                    nursery.start_soon(call, VIEWERS[n % len(VIEWERS)], early)
                await trio.testing.wait_all_tasks_blocked()
                apply(w, ("settle", 0))
                for n in range(20):
                    nursery.start_soon(call, VIEWERS[n % len(VIEWERS)], late)
            after = {v: rebuild(w.board, w.conn, *v) for v in VIEWERS}
            assert before != after
            assert len(early) == len(late) == 20
            for viewer, shown in early:
                assert shown in (before[viewer], after[viewer])
            for viewer, shown in late:
                assert shown == after[viewer]

    trio.run(main)


class CommitsBeforeItsNextRead(StoreReader):
    """A reader that lets a write commit at the worst moment for the view: after it has read
    the store's version, before its next read transaction starts."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.write: Callable[[], None] | None = None

    async def run(self, query: Callable[[apsw.Connection], T]) -> T:
        write, self.write = self.write, None
        if write is not None:
            write()
        return await super().run(query)


def test_a_write_that_commits_as_a_read_starts_is_shown_whole_or_not_at_all(
    tmp_path: Path,
) -> None:
    """A controller's records read after a write are never shown with the holders read
    before it (the view kept from the operator's call, which was current when the read began)."""

    async def main() -> None:
        with trio.fail_after(60), world(tmp_path / "store.db") as w:
            apply(w, ("announce", 0, ROOT, "p"))
            apply(w, ("send", 0, 0))
            reader = CommitsBeforeItsNextRead(tmp_path / "store.db")
            view = ListView(w.board, reader)
            try:
                await view.listing(None, ())  # holders and the operator's records, kept
                before = rebuild(w.board, w.conn, "ctl_a", ())
                reader.write = lambda: apply(w, ("settle", 0))
                shown = json.loads((await view.listing("ctl_a", ())).json)
                after = rebuild(w.board, w.conn, "ctl_a", ())
            finally:
                reader.close()
            assert reader.write is None and before != after
            assert shown == after

    trio.run(main)


CREATE = policy.Decision(policy.Action.CREATE, "new_scope_or_role")


def test_a_list_of_long_records_fits_a_frame_and_says_what_it_left_out(tmp_path: Path) -> None:
    """280 open Turns and 20 Watches with 4,000-character final messages (48 KB each as JSON:
    astral characters are escaped to 12 bytes), and 250 current sessions: `list` was 10 MB,
    past the 1 MiB frame controllers' libraries accept. Now each message shows its head, the
    newest rows that fit are kept, and `omitted` counts the open records left out."""
    message = "\U0001f600" * 4_000
    binding = policy.ThreadConfig(  # as the app-server backend binds a thread
        agent_version="0.154.0", protocol_version="v2", model="gpt-5", effort="high",
        approval_policy="never", sandbox="workspace-write",
    )  # fmt: skip

    async def main() -> None:
        with trio.fail_after(60), world(tmp_path / "store.db") as w:
            with w.conn:
                for n in range(300):  # every 15th a Watch
                    common = dict(
                        controller_id="ctl_a", evidence_status="pending", evidence=None,
                        evidence_limit=None, inactivity_seconds=60.0, lifetime_seconds=600.0,
                        now=1_000.0 + n, terminal_id=None,
                    )  # fmt: skip
                    record = (
                        turns.insert_watch(w.conn, **common)  # type: ignore[arg-type]
                        if n % 15 == 0
                        else turns.insert(
                            w.conn, client_request_id=f"{n}" + "\U0001f600" * 190,
                            request_sha256="0" * 64,
                            request_chars=1, **common,  # type: ignore[arg-type]
                        )
                    )  # fmt: skip
                    turns.settle(w.conn, record, TurnState.DONE, now=2_000.0 + n,
                                 summary=message[:200], final_message=message)  # fmt: skip
                for n in range(250):
                    owner = policy.Owner(controller_id="ctl_a", task=f"t{n}", unit=None,
                                         role="coder", workspace="/w/" + "路" * 300)  # fmt: skip
                    sessions.create(w.conn, owner=owner, backend="codex_app_server",
                                    binding=binding, home="/h", now=3_000.0 + n,
                                    decision=CREATE)  # fmt: skip
            listed = (await w.view.listing("ctl_a", ())).json
            assert len(listed.encode()) < (1 << 20) - (200 << 10)  # room for 200 panes' rows
            shown = json.loads(listed)
            assert shown == rebuild(w.board, w.conn, "ctl_a", ())
            records = shown["turns"] + shown["watches"]
            assert shown["turns"] and shown["watches"]
            newest = max(r["created_at"] for r in records)
            assert newest == 1_299.0  # the newest are kept
            assert {r["final_message"] for r in records} == {
                "\U0001f600" * 200 + "…[cut: 4,000 characters in all]"
            }
            omitted = shown["omitted"]
            assert omitted["turns"] + omitted["watches"] == 300 - len(records) > 100
            assert omitted["watches"] == 20 - len(shown["watches"])
            assert omitted["sessions"] == 250 - len(shown["sessions"]) > 0
            status_message = turns.get(w.conn, records[0]["turn_id"])
            assert status_message is not None and status_message.final_message == message

    trio.run(main)


def test_the_panes_rows_fit_their_bound_in_pane_order_and_say_how_many_are_left_out(
    tmp_path: Path,
) -> None:
    """600 panes whose cwds are 1,000 CJK characters (6 KB each as JSON): the rows were
    3.6 MB. Now the first that fit 224 KiB are shown, and `omitted` counts the rest."""

    async def main() -> None:
        with trio.fail_after(60), world(tmp_path / "store.db") as w:
            for pane in range(600):
                cwd = f"/w/{pane:03}/" + "路" * 1_000
                w.board.announce(identity(pane, cwd, "claude"), None, trio.current_time())
            for owner, narrowed in VIEWERS[:2]:
                listed = (await w.view.listing(owner, narrowed)).json
                assert len(listed.encode()) <= TERMINALS_MAX_BYTES + 1_024
                shown = json.loads(listed)
                assert shown == rebuild(w.board, w.conn, owner, narrowed)
                kept = [row["pane"] for row in shown["terminals"]]
                assert kept == sorted(f"%{pane}" for pane in range(600))[: len(kept)]
                assert shown["omitted"]["terminals"] == 600 - len(kept) > 500

    trio.run(main)
