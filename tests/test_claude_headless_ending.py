"""A headless Claude that misbehaves is ended and reaped, and its Turn gets the outcome it earned.

The whole backend runs (ClaudeHeadless, its RunDesk and RunHost, the TurnActor and
its follower, a real store); Claude is a stand-in, a small Python script given as
the binary, that plays one misbehaviour each: it writes its `result` and never
exits, ignores the interrupt (at a stall, at the owner's cancel), floods AKK with
permission requests, writes a line nested past any parser's limit, asks after its
result. What real Claude does is proven in tests/lab/test_claude_backend*.py.

Time is real (the stand-in is a process), so every wait is a condition under an
absolute `trio.fail_after`, and the bounds under test are set short (`LIMITS`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import apsw
import attrs
import trio

from akk.actors.store import StoreActor, transact
from akk.actors.turn import Cancel
from akk.actors.turn_desk import TurnDesk
from akk.backends.claude_headless import board as run_board
from akk.backends.claude_headless import transcript
from akk.backends.claude_headless.backend import ClaudeHeadless
from akk.backends.claude_headless.host import RunDesk
from akk.backends.claude_headless.process import Limits
from akk.backends.claude_headless.setup import ClaudeSetup
from akk.backends.context import BackendContext
from akk.backends.names import CLAUDE_HEADLESS
from akk.discovery import children
from akk.discovery.process import start_ticks
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.fingerprint import IdMinter
from akk.sessions import policy
from akk.store import outbox, sessions, turns
from akk.store.reader import StoreReader
from akk.store.sessions import ThreadIntent
from akk.store.turns import Turn, TurnState
from tests.test_claude_answers import OWNER, _rows

LIMITS = Limits(
    interrupt_seconds=0.5,
    ladder=children.Ladder(close_seconds=0.3, term_seconds=0.3, kill_seconds=5.0),
)

SESSION = "0b7d2d52-6c0e-4a53-9b1c-2f9f3f5c8e11"
"""A session AKK stored before (a resume)."""

PRELUDE = """
import json, os, signal, sys, time
SESSION = sys.argv[-1]  # --session-id ID or --resume ID
def say(value):
    line = value if isinstance(value, str) else json.dumps(value)
    sys.stdout.write(line + "\\n"); sys.stdout.flush()
def init():
    say({"type": "system", "subtype": "init", "session_id": SESSION, "cwd": os.getcwd(),
         "model": "m", "permissionMode": "default", "tools": ["Bash"],
         "claude_code_version": "2.1.332"})
def result(text="all done", error=False):
    say({"type": "result", "subtype": "error_during_execution" if error else "success",
         "is_error": error, "result": None if error else text, "session_id": SESSION,
         "usage": {"input_tokens": 3, "output_tokens": 4}})
def ask(n, command="ls"):
    say({"type": "control_request", "request_id": f"req-{n}",
         "request": {"subtype": "can_use_tool", "tool_name": "Bash",
                     "input": {"command": command}, "tool_use_id": f"tu-{n}"}})
def stubborn():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)
sys.stdin.readline()  # the round's user message
"""


@attrs.define
class _Wakes:
    """Stands in for the DestinationDesk: every wake-up sets `woken` (a condition to wait on)."""

    woken: trio.Event = attrs.field(factory=trio.Event)

    def wake(self, controller_id: str) -> None:
        self.woken.set()
        self.woken = trio.Event()


@attrs.define
class _Stack:
    backend: ClaudeHeadless
    runs: RunDesk
    store: Any
    reader: StoreReader
    wakes: _Wakes
    desk: TurnDesk
    workspace: Path
    config: Path

    async def turn(self, turn_id: str) -> Turn:
        found = await self.reader.run(lambda conn: turns.get(conn, turn_id))
        assert found is not None
        return found

    async def until(self, turn_id: str, done: Callable[[Turn], bool]) -> Turn:
        """The Turn once ``done`` holds (looked at on each wake-up and each exit)."""
        while True:
            woken = self.wakes.woken
            turn = await self.turn(turn_id)
            if done(turn):
                return turn
            host = self.runs.host(turn_id)
            with trio.move_on_after(0.2):  # the exit audit wakes no controller
                if host is not None and host.board.exit is None:
                    await host.board.changed.wait()
                else:
                    await woken.wait()

    async def settled(self, turn_id: str) -> Turn:
        return await self.until(turn_id, lambda turn: not turn.unresolved)

    async def exits(self, turn_id: str) -> list[dict[str, Any]]:
        """The audited exits of the Turn's processes."""
        sql = "SELECT detail FROM audit WHERE action = 'claude_exit' AND turn_id = ?"

        def read(conn: apsw.Connection) -> list[dict[str, Any]]:
            return [json.loads(str(d)) for (d,) in conn.execute(sql, (turn_id,)).fetchall()]

        found: list[dict[str, Any]] = await self.reader.run(read)
        return found

    async def exited(self, turn_id: str) -> list[dict[str, Any]]:
        """The audited exits, once there is one: its process's cleanup is recorded with it,
        after the host's board shows the exit."""
        while not (found := await self.exits(turn_id)):
            await trio.sleep(0.02)
        return found

    async def summary(self, turn_id: str) -> str:
        """The summary of the Turn's outcome, as its settle event carries it."""
        events = await self.reader.run(lambda conn: outbox.of_turn(conn, turn_id))
        summary: str = events[-1].event()["summary"]
        return summary

    async def asked(self, turn_id: str) -> int:
        """How many interactions the Turn recorded."""
        sql = "SELECT COUNT(*) FROM interactions WHERE turn_id = ?"

        def count(conn: apsw.Connection) -> int:
            (found,) = conn.execute(sql, (turn_id,)).fetchall()
            return int(cast(int, found[0]))

        counted: int = await self.reader.run(count)
        return counted

    async def invocation(self, turn_id: str) -> sessions.InvocationRow:
        found = await self.reader.run(lambda conn: sessions.invocation(conn, turn_id, 1))
        assert found is not None
        return found


def _stand_in(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{PRELUDE}{body}")
    path.chmod(0o755)
    return path


@asynccontextmanager
async def _stack(tmp_path: Path, body: str) -> AsyncIterator[_Stack]:
    db = tmp_path / "akk.sqlite3"
    _rows(db)
    workspace, config = tmp_path / "work", tmp_path / "config"
    workspace.mkdir()
    config.mkdir()
    binary = _stand_in(tmp_path / "claude", body)
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    reader = StoreReader(db)
    wakes = _Wakes()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            store = root.ref("store")
            backends = Supervisor("backends", max_restarts=5, period=30.0)
            turn_supervisor = Supervisor("turns", max_restarts=50, period=10.0)
            await root.start_child(ChildSpec("backends", backends.run))
            await root.start_child(ChildSpec("turns", turn_supervisor.run))
            setup = ClaudeSetup(str(binary), str(config), "2.1.332")
            runs = RunDesk(backends, setup=setup, store=store, limits=LIMITS)
            terminals = SimpleNamespace(listen=lambda _: None)
            desk = TurnDesk(
                turn_supervisor, store=store, reader=reader.run, board=cast(Any, terminals),
                notify=wakes.wake,
            )  # fmt: skip
            await root.start_child(ChildSpec("turn clock", desk.clock))
            ctx = BackendContext(
                store=store, reader=reader, ids=IdMinter(b"k" * 32), desk=desk,
                destinations=cast(Any, wakes), offer_minutes=10,
            )  # fmt: skip
            yield _Stack(ClaudeHeadless(ctx, runs=runs), runs, store, reader, wakes, desk,
                         workspace, config)  # fmt: skip
            nursery.cancel_scope.cancel()
    finally:
        reader.close()


async def _sent(stack: _Stack, *, inactivity: int = 600, thread_id: str | None = None) -> Turn:
    """A session Turn reserved as a send reserves it (a new session unless ``thread_id``),
    then dispatched."""

    def reserve(conn: apsw.Connection) -> Turn:
        owner = policy.Owner(OWNER, "task", None, "executor", str(stack.workspace))
        binding = policy.ThreadConfig("2.1.332", f"{CLAUDE_HEADLESS} 2.1.332", None, None,
                                      "default", None)  # fmt: skip
        decision = policy.Decision(policy.Action.CREATE, "new_scope_or_role")
        session = sessions.create(
            conn, owner=owner, backend=CLAUDE_HEADLESS, binding=binding,
            home=str(stack.config), decision=decision, now=time.time(),
        )  # fmt: skip
        if thread_id is not None:
            session = sessions.update(
                conn, session, thread_id=thread_id, history=policy.History.PERSISTED
            )
        turn = turns.insert_backend(
            conn, backend=CLAUDE_HEADLESS, controller_id=OWNER, client_request_id="c1",
            session_id=session.session_id, request_sha256="0" * 64, request_chars=4,
            inactivity_seconds=inactivity, lifetime_seconds=600, now=time.time(),
        )  # fmt: skip
        intent = ThreadIntent.START if thread_id is None else ThreadIntent.RESUME
        sessions.reserve(conn, session, turn_id=turn.turn_id, round=1, thread_intent=intent,
                         now=time.time())  # fmt: skip
        return turn

    turn = await transact(stack.store, reserve)
    return await stack.backend.dispatch(turn, "task")


async def _pids_gone(stack: _Stack, turn: Turn) -> None:
    facts = json.loads((await stack.turn(turn.turn_id)).evidence or "{}")
    assert start_ticks(facts["pid"]) is None
    assert children.group_members(facts["pid"]) == []


async def test_a_result_then_a_process_that_never_exits_is_killed_and_the_turn_is_done(
    tmp_path: Path,
) -> None:
    """Claude writes its result and stays alive past stdin's end and SIGTERM: AKK kills it
    after the ladder, reaps it, and the Turn is done with the result it wrote."""
    async with _stack(tmp_path, "init()\nresult()\nstubborn()\n") as stack:
        with trio.fail_after(20):
            turn = await _sent(stack)
            settled = await stack.settled(turn.turn_id)
            assert (settled.state, settled.final_message) == (TurnState.DONE, "all done")
            (ended,) = await stack.exits(turn.turn_id)
            assert (ended["how"], ended["returncode"], ended["reaped"]) == ("killed", -9, True)
            await _pids_gone(stack, turn)
            invocation = await stack.invocation(turn.turn_id)
            assert invocation.cleanup is sessions.Cleanup.CONFIRMED
            assert await stack.backend.confirm_ended(settled, invocation) == "settled"


async def test_a_process_that_ignores_the_interrupt_at_a_stall_is_ended(tmp_path: Path) -> None:
    """No activity for the window: the Turn stalls, its interrupt is ignored, and the
    process is ended within the grace and the ladder; its cleanup is then confirmed, so the
    session is not held."""
    body = "init()\nsys.stdin.readline()  # the interrupt, ignored\nstubborn()\n"
    async with _stack(tmp_path, body) as stack:
        with trio.fail_after(20):
            turn = await _sent(stack, inactivity=1)
            settled = await stack.settled(turn.turn_id)
            assert (settled.state, settled.reason) == (TurnState.STALLED, "stalled")

            await stack.exited(turn.turn_id)
            host = stack.runs.host(turn.turn_id)
            assert host is not None and host.board.exit is not None
            assert (host.board.exit.how, host.board.exit.reaped) == ("killed", True)
            assert "no result came within 0.5 s" in (host.board.closed or "")
            await _pids_gone(stack, turn)
            invocation = await stack.invocation(turn.turn_id)
            assert invocation.cleanup is sessions.Cleanup.CONFIRMED
            assert await stack.backend.confirm_ended(settled, invocation) == "settled"
            assert stack.runs.host(turn.turn_id) is None


async def test_a_process_that_ignores_the_owner_s_cancel_is_ended_and_the_turn_cancelled(
    tmp_path: Path,
) -> None:
    body = "init()\nsys.stdin.readline()  # the interrupt, ignored\nstubborn()\n"
    async with _stack(tmp_path, body) as stack:
        with trio.fail_after(20):
            turn = await _sent(stack)
            await stack.until(turn.turn_id, lambda t: t.state is TurnState.RUNNING)
            actor = stack.desk.ref(turn.turn_id)
            assert actor is not None
            reply = await actor.ask(Cancel(), timeout=10)
            assert reply.ok
            settled = await stack.settled(turn.turn_id)
            assert settled.state is TurnState.CANCELLED
            assert "ended without a result" in await stack.summary(turn.turn_id)
            (ended,) = await stack.exits(turn.turn_id)
            assert (ended["how"], ended["reaped"]) == ("killed", True)
            await _pids_gone(stack, turn)


async def test_a_flood_of_permission_requests_ends_the_process_with_a_reason(
    tmp_path: Path,
) -> None:
    """Past `MAX_REQUESTS` unanswered requests the process is ended and the Turn fails
    `too_many_requests`; AKK never holds more than the bound, nor records more."""
    body = f"init()\nfor n in range({run_board.MAX_REQUESTS * 4}):\n    ask(n)\nstubborn()\n"
    async with _stack(tmp_path, body) as stack:
        with trio.fail_after(20):
            turn = await _sent(stack)
            settled = await stack.settled(turn.turn_id)
            assert (settled.state, settled.reason) == (TurnState.FAILED, "too_many_requests")
            assert f"over {run_board.MAX_REQUESTS} control requests" in await stack.summary(
                turn.turn_id
            )
            assert await stack.asked(turn.turn_id) <= run_board.MAX_REQUESTS
            (ended,) = await stack.exits(turn.turn_id)
            assert ended["reaped"]
            await _pids_gone(stack, turn)


async def test_a_line_nested_past_the_parser_s_limit_is_skipped(tmp_path: Path) -> None:
    """200 KB of `[` is a bad line, logged and skipped: the round goes on to its result."""
    body = 'init()\nsay("[" * 200_000)\nsay(\'{"type":"x","a":\' + "[" * 100_000)\nresult()\n'
    async with _stack(tmp_path, body) as stack:
        with trio.fail_after(20):
            turn = await _sent(stack)
            settled = await stack.settled(turn.turn_id)
            assert (settled.state, settled.final_message) == (TurnState.DONE, "all done")


async def test_a_request_after_the_result_is_never_offered(tmp_path: Path) -> None:
    body = "init()\nresult()\nask(1, 'rm -rf ~')\nstubborn()\n"
    async with _stack(tmp_path, body) as stack:
        with trio.fail_after(20):
            turn = await _sent(stack)
            host = stack.runs.host(turn.turn_id)
            assert host is not None
            assert await stack.backend.shown(await stack.turn(turn.turn_id), OWNER) is None
            settled = await stack.settled(turn.turn_id)
            assert settled.state is TurnState.DONE
            assert host.board.requests == {}
            assert await stack.asked(turn.turn_id) == 0


async def test_a_resumed_session_whose_transcript_is_gone_is_not_started_afresh(
    tmp_path: Path,
) -> None:
    """The policy resumed the session, but its transcript is gone: nothing starts, the Turn
    fails history_missing, and the session's history is missing, so the next send rebuilds."""
    mark = tmp_path / "started"
    body = f"open({str(mark)!r}, 'w').write(' '.join(sys.argv[1:]))\ninit()\nresult()\n"
    async with _stack(tmp_path, body) as stack:
        with trio.fail_after(20):
            gone = transcript.path(str(stack.config), str(stack.workspace), SESSION)
            assert not await trio.Path(gone).exists()
            turn = await _sent(stack, thread_id=SESSION)
            assert (turn.state, turn.reason) == (TurnState.FAILED, "history_missing")
            assert "nothing was sent" in await stack.summary(turn.turn_id)
            invocation = await stack.invocation(turn.turn_id)
            assert invocation.dispatch is policy.Dispatch.NOT_SENT
            assert invocation.cleanup is sessions.Cleanup.CONFIRMED
            session = await stack.reader.run(lambda c: sessions.get(c, invocation.session_id))
            assert session is not None and session.history is policy.History.MISSING
            assert stack.runs.host(turn.turn_id) is None
    assert not mark.exists()


async def test_a_resumed_session_whose_transcript_is_there_is_resumed(tmp_path: Path) -> None:
    mark = tmp_path / "started"
    body = f"open({str(mark)!r}, 'w').write(' '.join(sys.argv[1:]))\ninit()\nresult()\n"
    async with _stack(tmp_path, body) as stack:
        with trio.fail_after(20):
            kept = trio.Path(transcript.path(str(stack.config), str(stack.workspace), SESSION))
            await kept.parent.mkdir(parents=True)
            await kept.write_text("{}\n")
            turn = await _sent(stack, thread_id=SESSION)
            settled = await stack.settled(turn.turn_id)
            assert settled.state is TurnState.DONE
    assert f"--resume {SESSION}" in mark.read_text()


async def test_a_settled_turn_s_process_left_by_an_earlier_akk_is_ended_at_recover(
    tmp_path: Path,
) -> None:
    """After a restart nobody follows a settled Turn: `confirm_ended` ends the process an
    earlier AKK left (its pid and start time match), then confirms its cleanup."""
    orphan = subprocess.Popen(  # noqa: ASYNC220 - started and reaped here, at once
        [sys.executable, "-c", "import signal, time\n"
         "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)"],
        start_new_session=True,
    )  # fmt: skip
    try:
        ticks = start_ticks(orphan.pid)
        assert ticks is not None
        async with _stack(tmp_path, "init()\nresult()\n") as stack:
            with trio.fail_after(30):
                turn = await _sent(stack)
                settled = await stack.settled(turn.turn_id)
                stack.runs.forget(turn.turn_id)  # as after a restart: no host of it
                facts = {"pid": orphan.pid, "start_ticks": ticks}

                def orphaned(conn: apsw.Connection) -> tuple[Turn, sessions.InvocationRow]:
                    fresh = turns.get(conn, turn.turn_id)
                    inv = sessions.invocation(conn, turn.turn_id, 1)
                    assert fresh is not None and inv is not None
                    inv = sessions.update_invocation(conn, inv, cleanup="unconfirmed")
                    return turns.update(conn, fresh, evidence=json.dumps(facts)), inv

                settled, invocation = await transact(stack.store, orphaned)
                async with trio.open_nursery() as reaper:  # it is this test's child: reap it
                    reaper.start_soon(partial(trio.to_thread.run_sync, orphan.wait,
                                              abandon_on_cancel=True))  # fmt: skip
                    assert await stack.backend.confirm_ended(settled, invocation) == "settled"
                assert orphan.returncode == -signal.SIGKILL
                invocation = await stack.invocation(turn.turn_id)
                assert invocation.cleanup is sessions.Cleanup.CONFIRMED
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()
