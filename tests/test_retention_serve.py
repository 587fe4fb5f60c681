"""Retention in a real `akk serve`: `akk gc` through the server, the periodic pass, and what a
controller hears of a pruned record over the WebSocket."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
import trio

from akk.client import AkkError, connect
from akk.store import retention, turns
from akk.store.database import open_reader, open_store
from akk.store.location import StateDir
from akk.store.retention import DAY
from akk.store.turns import TurnState
from tests.store_rows import add_ctl_and_t1
from tests.test_cli import akk, serving
from tests.test_retention import _record, _terminal, _watch


def _seed(
    state: Path, records: dict[str, tuple[float, TurnState, str]], *, bulk: int = 0
) -> dict[str, str]:
    """A store with controller `ctl`, terminal `t1`, one record per name, (at, state,
    delivery) each, and ``bulk`` more 40 days old with a 2,000-character final message;
    returns the named ids. No server runs yet."""
    directory = StateDir.resolve(str(state))
    directory.ensure()
    conn = open_store(directory.store_path)
    try:
        add_ctl_and_t1(conn)
        with conn:
            for _ in range(bulk):
                _record(conn, time.time() - 40 * DAY, message="x" * 2000)
        return {
            name: _record(conn, at, state=turn_state, delivery=delivery)
            for name, (at, turn_state, delivery) in records.items()
        }
    finally:
        conn.close()


def _kept(state: Path) -> set[str]:
    conn = open_reader(StateDir.resolve(str(state)).store_path)
    try:
        return {str(row[0]) for row in conn.execute("SELECT turn_id FROM turns")}
    finally:
        conn.close()


def _gc(state: Path, *args: str) -> dict[str, Any]:
    done = akk(state, "gc", "--json", *args)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_gc_through_the_server_counts_then_deletes_and_status_says_pruned(
    tmp_path: Path,
) -> None:
    state = tmp_path / "akk"
    old = time.time() - 40 * DAY
    ids = _seed(
        state,
        {
            "done": (old, TurnState.DONE, "accepted"),
            "abandoned": (old, TurnState.FAILED, "retryable_failure"),
            "undelivered": (old, TurnState.DONE, "pending"),
            "uncertain": (old, TurnState.UNCERTAIN, "pending"),
            "recent": (time.time(), TurnState.DONE, "accepted"),
        },
        bulk=400,
    )
    conn = open_store(StateDir.resolve(str(state)).store_path)
    try:
        unwatched = _watch(conn, old - DAY, unwatched=old)
        _terminal(conn, "t2", old)  # its pane closed 40 days ago; nothing refers to it
    finally:
        conn.close()
    with serving(state, "--retain-days", "1000") as line:
        assert set(ids.values()) <= _kept(state)  # the pass at start: nothing that old
        counted = _gc(state, "--older-than", "30", "--dry-run")
        assert counted["dry_run"] and len(_kept(state)) == len(ids) + 401
        deleted = _gc(state, "--older-than", "30")
        assert not deleted["dry_run"]
        assert deleted["counts"] == counted["counts"]
        assert deleted["counts"]["turns"] == 403 and deleted["counts"]["offers"] == 402
        assert deleted["counts"]["terminals"] == 1  # t2; t1 is live
        # The freed pages went back to the file system and the log was truncated.
        assert deleted["store_bytes_after"] < deleted["store_bytes_before"] / 3, deleted
        assert _kept(state) == {ids["undelivered"], ids["uncertain"], ids["recent"]}
        shown = akk(state, "gc", "--older-than", "30")
        assert shown.returncode == 0, shown.stderr
        assert "rows deleted" in shown.stdout and "notifications" in shown.stdout

        token = StateDir.resolve(str(state)).token()

        async def status() -> tuple[AkkError, AkkError]:
            with trio.fail_after(20):
                async with connect(line.split()[4], token) as ctl:
                    await ctl.call("hello", {})
                    with pytest.raises(AkkError) as refused:
                        await ctl.call("status", {"turn_id": ids["done"]})
                    kept = await ctl.call("status", {"turn_id": ids["recent"]})
                    assert kept["turn"]["turn_id"] == ids["recent"]
                    assert kept["turn"]["terminal_id"] == "t1"
                    # renew would resume an unwatched Watch; a pruned one is not_found.
                    with pytest.raises(AkkError) as renewed:
                        await ctl.call("renew", {"watch_id": unwatched})
                    return refused.value, renewed.value

        error, stopped = trio.run(status)
    assert (error.reason, error.detail) == ("not_found", "pruned")
    assert error.data is not None and error.data["outcome"] == "done"
    pruned_at = datetime.datetime.fromisoformat(error.data["pruned_at"]).timestamp()
    assert time.time() - 120 < pruned_at <= time.time()
    assert "pruned by retention on" in error.message
    assert (stopped.reason, stopped.detail) == ("not_found", "pruned")
    assert stopped.data is not None and stopped.data["outcome"] == "unwatched"
    unwatched_at = datetime.datetime.fromisoformat(stopped.data["settled_at"]).timestamp()
    assert abs(unwatched_at - old) < 1
    assert f"{unwatched} was unwatched on" in stopped.message


def test_the_periodic_pass_prunes_while_serving_and_a_replayed_send_is_refused(
    tmp_path: Path,
) -> None:
    state = tmp_path / "akk"
    ids = _seed(
        state,
        {
            "first": (time.time() - 60, TurnState.DONE, "accepted"),
            "open": (time.time() - 60, TurnState.RUNNING, "pending"),
        },
    )
    conn = open_store(StateDir.resolve(str(state)).store_path)
    try:
        request = turns.get(conn, ids["first"])
    finally:
        conn.close()
    assert request is not None
    created = akk(state, "token", "create", "ctl")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    with serving(state, "--retain-days", str(30 / DAY), "--prune-every", "0.2") as line:
        deadline = time.monotonic() + 20
        while ids["first"] in _kept(state):
            assert time.monotonic() < deadline, "no retention pass pruned the old record"
            time.sleep(0.05)
        assert ids["open"] in _kept(state)

        async def replay() -> AkkError:
            with trio.fail_after(20):
                async with connect(line.split()[4], token) as ctl:
                    await ctl.call("hello", {})
                    with pytest.raises(AkkError) as refused:
                        await ctl.call(
                            "send",
                            {
                                "terminal_id": "t1",
                                "request": "again",
                                "client_request_id": request.client_request_id,
                            },
                        )
                    return refused.value

        error = trio.run(replay)
    assert (error.reason, error.detail) == ("conflict", "pruned")
    assert "never typed again" in error.message
    conn = apsw.Connection(str(StateDir.resolve(str(state)).store_path))
    try:
        assert retention.lookup(conn, ids["first"]) is not None
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)
    finally:
        conn.close()


def test_gc_without_a_server_runs_on_the_store_under_the_state_directory_s_lock(
    tmp_path: Path,
) -> None:
    state = tmp_path / "akk"
    old = time.time() - 40 * DAY
    ids = _seed(
        state,
        {
            "done": (old, TurnState.DONE, "accepted"),
            "undelivered": (old, TurnState.DONE, "delivering"),
            "recent": (time.time(), TurnState.DONE, "accepted"),
        },
    )
    counted = _gc(state, "--dry-run")  # the default: 30 days
    assert counted["retain_days"] == retention.DEFAULT_DAYS and _kept(state) == set(ids.values())
    deleted = _gc(state)
    assert deleted["counts"] == counted["counts"] and deleted["counts"]["turns"] == 1
    assert _kept(state) == {ids["undelivered"], ids["recent"]}
    refused = akk(state, "gc", "--older-than", "-1")
    assert refused.returncode == 2 and "not a number of days" in refused.stderr
