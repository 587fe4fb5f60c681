"""The session backends on a store that fills up: status still shows a request, an answer
is refused with the store's message, and an answer already sent waits for the store.

The full disk is real (`tests.small_fs`). Headless Claude is the real
`HeadlessAnswers` and RunActor of `tests.test_claude_answers`, writing to a
recording pipe, with the methods' `InteractionCalls` in front of it for the
controller's calls; the app-server's is its real BackendActor answering through
a recording stand-in for the connection.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import apsw
import attrs
import jsonschema
import pytest
import trio

from akk.actors import store as store_actor
from akk.actors.store import StoreActor, transact
from akk.backends.claude_headless.host import RoundPlan, RunHost
from akk.backends.claude_headless.process import NewSession
from akk.backends.claude_headless.setup import ClaudeSetup
from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.actor import (
    AnswerRequest,
    BackendActor,
    CodexSetup,
    StartTurn,
    Unsent,
)
from akk.backends.codex_app_server.board import BackendBoard
from akk.backends.codex_app_server.prompts import fingerprint
from akk.backends.codex_app_server.rounds import AppServerRounds, unsent
from akk.backends.contract import AnswerReceipt
from akk.backends.names import CLAUDE_HEADLESS, CODEX_APP_SERVER
from akk.methods.common import MethodContext
from akk.methods.interactions import InteractionCalls
from akk.protocol.errors import Reason, RpcError
from akk.protocol.schema import METHODS
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.fingerprint import Appearance
from akk.sessions import policy
from akk.store import interactions, sessions, turns
from akk.store.database import StoreUnwritable
from akk.store.dispatches import Kind, Stage
from akk.store.reader import StoreReader
from akk.store.sessions import ThreadIntent
from tests.small_fs import small_filesystem
from tests.test_claude_answers import OWNER, _lab, _Pipe, _request, _rows, _sent
from tests.test_full_disk_terminal import fill_store


@asynccontextmanager
async def _store(db: Path) -> AsyncIterator[Supervisor]:
    """A StoreActor on ``db`` (made with the controllers and terminal of `_rows`) under a root
    supervisor, stopped on the way out."""
    _rows(db)
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(db))])
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        yield root
        nursery.cancel_scope.cancel()


def _calls(lab: object) -> InteractionCalls:
    """The methods' answer calls over the lab's store and its one backend."""
    answers = lab.answers  # type: ignore[attr-defined]
    ctx = SimpleNamespace(
        store=lab.store,  # type: ignore[attr-defined]
        reader=lab.reader,  # type: ignore[attr-defined]
        backends=SimpleNamespace(of=lambda turn: answers),
    )
    return InteractionCalls(cast(MethodContext, ctx))


async def test_status_shows_a_request_not_answerable_while_the_store_cannot_write(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs") as fs:
        async with _lab(fs) as lab:
            lab.ask(_request("bash_allow"))
            asked = lab.answers.prompts(lab.turn)[0]
            filler = await fill_store(fs, lab.store)
            db = fs / "akk.sqlite3"

            # status is a read: it shows what Claude asks, not answerable now, and says why.
            shown = await lab.answers.shown(lab.turn, OWNER)
            assert shown is not None and shown["interaction_id"] == asked.interaction_id
            assert shown["kind"] == "permission"
            assert "lab-bash-ran" in shown["questions"][0]["detail"]
            why = shown["not_answerable"]
            assert f"the store at {db} cannot write: disk full (SQLITE_FULL" in why
            assert "no offer of it could be recorded" in why

            # An answer is refused with the store's message (the endpoint answers it as
            # internal), and nothing reaches Claude.
            params = {"turn_id": lab.turn.turn_id, "decision": "approve_once"}
            with pytest.raises(StoreUnwritable) as refused:
                await _calls(lab).approve(OWNER, params)
            assert f"the store at {db} cannot write: disk full" in str(refused.value)
            assert lab.pipe.lines == []

            # Space returns: status offers it, and the answer goes out once.
            filler.unlink()
            offered = await lab.answers.shown(lab.turn, OWNER)
            assert offered is not None and "not_answerable" not in offered
            reply = await _calls(lab).approve(OWNER, params)
            assert reply["outcome"] == "dispatched"
            jsonschema.validate(reply, METHODS["approve"]["result"])
            (line,) = lab.pipe.lines
            assert _sent(line)["request_id"] == asked.request_id


async def test_an_answer_written_to_claude_waits_for_the_store_and_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk fills as the answer's line goes out: the RunActor holds its receipt and
    writes it once the store writes again, without a crash; the line went out once."""
    monkeypatch.setattr(store_actor, "RETRY_SECONDS", 0.05)
    with small_filesystem(tmp_path / "fs") as fs:
        async with _lab(fs) as lab:
            lab.ask(_request("bash_allow"))
            shown = await lab.answers.shown(lab.turn, OWNER)
            assert shown is not None and "not_answerable" not in shown
            filled: list[Path] = []
            send = _Pipe.send

            async def send_then_fill(pipe: _Pipe, line: bytes) -> None:
                await send(pipe, line)
                filled.append(await fill_store(fs, lab.store))

            monkeypatch.setattr(_Pipe, "send", send_then_fill)
            params = {"turn_id": lab.turn.turn_id, "decision": "approve_once"}
            reply: dict[str, object] = {}

            async def answer() -> None:
                reply.update(await _calls(lab).approve(OWNER, params))

            with caplog.at_level(logging.WARNING, logger="akk.store"):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(answer)
                    while not filled:
                        await trio.sleep(0.01)
                    await trio.sleep(0.5)  # several tries on the full store
                    assert reply == {}
                    (step,) = await lab.steps()
                    assert step.stage is Stage.RESERVED  # not recorded yet, and not lost
                    filled[0].unlink()
            assert reply["outcome"] == "dispatched"
            (step,) = await lab.steps()
            assert step.stage is Stage.ACCEPTED
            assert len(lab.pipe.lines) == 1
            waited = [r for r in caplog.records if "tried again until the store writes" in r.msg]
            assert len(waited) == 1  # logged once per outage


@attrs.define
class _App:
    """The app-server connection as the BackendActor answers through it: the answers sent."""

    answered: list[tuple[rpc.RequestId, dict[str, Any]]] = attrs.field(factory=list)
    then: Callable[[], Awaitable[None]] | None = None

    async def respond(self, request: rpc.ServerRequest, result: dict[str, Any]) -> None:
        self.answered.append((request.id, result))
        if self.then is not None:
            await self.then()


async def test_an_answer_sent_to_the_app_server_waits_for_the_store_and_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills as the BackendActor's answer goes out: it holds the receipt, writes
    it once the store writes again, and never crashes or sends twice."""
    monkeypatch.setattr(store_actor, "RETRY_SECONDS", 0.05)
    with small_filesystem(tmp_path / "fs") as fs, trio.fail_after(30):
        db = fs / "akk.sqlite3"
        async with _store(db) as root:
            store = root.ref("store")
            request = rpc.ServerRequest(7, "item/commandExecution/requestApproval", {"x": 1})
            board = BackendBoard(generation=1, alive=True)
            board.requests[request.id] = request
            seen = fingerprint(request, board.generation)

            def asked(conn: apsw.Connection) -> tuple[str, str, str]:
                now = time.time()
                turn = turns.insert(
                    conn, controller_id=OWNER, client_request_id="r1", terminal_id="term_x",
                    request_sha256="0" * 64, request_chars=1, evidence_status="unknown",
                    evidence=None, evidence_limit=None, inactivity_seconds=600,
                    lifetime_seconds=600, now=now,
                )  # fmt: skip
                row, _ = interactions.record(
                    conn, interaction_id="int_x", terminal_id=None, turn_id=turn.turn_id,
                    kind="permission", seen=Appearance(seen, 1), profile="codex-app-server",
                    step_index=1, step_total=1, projection={"interaction_id": "int_x"}, now=now,
                )  # fmt: skip
                offer = interactions.offer(conn, row, OWNER, now=now, lifetime=600)
                return turn.turn_id, row.interaction_id, offer.offer_id

            turn_id, interaction_id, offer_id = await transact(store, asked)
            filled: list[Path] = []

            async def fill_now() -> None:
                filled.append(await fill_store(fs, store))

            app = _App(then=fill_now)
            actor = BackendActor(
                cast(rpc.AppServer, app), setup=CodexSetup("codex", "/h", "0.171.0"),
                board=board, store=store, reader=cast(Any, None),
            )  # fmt: skip
            message = AnswerRequest(
                turn_id=turn_id, controller_id=OWNER, interaction_id=interaction_id,
                offer_id=offer_id, request_id=request.id, fingerprint=seen,
                kind=Kind.APPROVAL, result={"decision": "accept"},
            )  # fmt: skip
            receipts: list[object] = []

            async def answer() -> None:
                receipts.append(await actor.receive(message))

            # A send's history asks the same actor, whose mailbox waits: refused at once.
            host = SimpleNamespace(board=board, ref=None)
            desk = SimpleNamespace(setup=CodexSetup("codex", "/h", "0.171.0"), host=_returns(host))
            rounds = AppServerRounds(cast(Any, SimpleNamespace(store=store)), hosts=cast(Any, desk))
            async with trio.open_nursery() as answering:
                answering.start_soon(answer)
                while not filled:
                    await trio.sleep(0.01)
                await trio.sleep(0.5)  # several tries on the full store
                assert receipts == []
                with trio.fail_after(1), pytest.raises(RpcError) as refused:
                    await rounds.history(str(fs))
                assert refused.value.reason is Reason.INTERNAL
                assert "disk full" in refused.value.message
                assert "nothing was started" in refused.value.message
                filled[0].unlink()
            (receipt,) = receipts
            assert isinstance(receipt, AnswerReceipt) and receipt.proven
            assert receipt.dispatch.stage is Stage.ACCEPTED
            assert app.answered == [(7, {"decision": "accept"})]
            assert board.store_wait is None  # written: sends are asked through again
            assert root.stats.crashes.get("store", 0) == 0


def _returns(value: object) -> Callable[[], Awaitable[object]]:
    async def get() -> object:
        return value

    return get


def _reserved(workspace: Path, backend: str, conn: apsw.Connection) -> str:
    """A session Turn of ``backend`` with its first round reserved, on thread ``thr_1``."""
    owner = policy.Owner(OWNER, "task", None, "executor", str(workspace))
    binding = policy.ThreadConfig("1", "1", None, None, None, None)
    decision = policy.Decision(policy.Action.CREATE, "new_scope_or_role")
    session = sessions.create(
        conn, owner=owner, backend=backend, binding=binding, home=str(workspace),
        decision=decision, now=1.0,
    )  # fmt: skip
    session = sessions.update(conn, session, thread_id="thr_1")
    turn = turns.insert_backend(
        conn, backend=backend, controller_id=OWNER, client_request_id="b1",
        session_id=session.session_id, request_sha256="0" * 64, request_chars=4,
        inactivity_seconds=60, lifetime_seconds=600, now=1.0,
    )  # fmt: skip
    sessions.reserve(conn, session, turn_id=turn.turn_id, round=1,
                     thread_intent=ThreadIntent.LOADED, now=1.0)  # fmt: skip
    return turn.turn_id


@attrs.define
class _Starts:
    """The app-server connection as the BackendActor starts a turn through it: every request."""

    requests: list[str] = attrs.field(factory=list)

    async def request(self, method: str, params: dict[str, Any], *, timeout: float) -> Any:
        self.requests.append(method)
        raise AssertionError(f"{method} must not be written while the store cannot write")


async def test_a_turn_start_the_store_cannot_record_is_never_written_and_says_nothing_was_sent(
    tmp_path: Path,
) -> None:
    """The disk is full when the BackendActor would mark the invocation sent: turn/start is
    never written, the actor stays up, and the refusal says nothing was sent (not "may have
    started")."""
    with small_filesystem(tmp_path / "fs") as fs, trio.fail_after(30):
        db = fs / "akk.sqlite3"
        async with _store(db) as root:
            store = root.ref("store")

            turn_id = await transact(store, partial(_reserved, fs, CODEX_APP_SERVER))
            board = BackendBoard(generation=1, alive=True)
            board.loaded.add("thr_1")
            app = _Starts()
            reader = StoreReader(db)
            actor = BackendActor(
                cast(rpc.AppServer, app), setup=CodexSetup("codex", "/h", "0.171.0"),
                board=board, store=store, reader=reader.run,
            )  # fmt: skip
            filler = await fill_store(fs, store)
            receipt = await actor.receive(StartTurn(turn_id, 1, "task"))
            assert isinstance(receipt, Unsent) and "disk full" in receipt.why
            assert app.requests == []
            refusal = unsent(turn_id, receipt)
            assert refusal.reason is Reason.INTERNAL
            assert "Nothing was sent" in refusal.message and "may" not in refusal.message
            inv = await reader.run(lambda conn: sessions.invocation(conn, turn_id, 1))
            assert inv is not None and inv.dispatch is policy.Dispatch.NOT_SENT
            assert root.stats.crashes.get("store", 0) == 0
            filler.unlink()
            reader.close()


async def test_a_claude_line_the_store_cannot_mark_sent_is_never_written(tmp_path: Path) -> None:
    """The disk is full when the round's host would mark its line sent: the stand-in Claude
    gets nothing on its input, the host ends without a crash, and the board says why, so the
    Turn ends not_sent."""
    heard = tmp_path / "heard"
    stand_in = tmp_path / "claude"
    stand_in.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"open({str(heard)!r}, 'w').write(sys.stdin.read())\n"
    )  # fmt: skip
    stand_in.chmod(0o755)
    with small_filesystem(tmp_path / "fs") as fs, trio.fail_after(30):
        db = fs / "akk.sqlite3"
        async with _store(db) as root:
            store = root.ref("store")
            turn_id = await transact(store, partial(_reserved, fs, CLAUDE_HEADLESS))
            filler = await fill_store(fs, store)
            plan = RoundPlan(
                turn_id=turn_id, round=1, start=NewSession(str(uuid.uuid4())), cwd=str(tmp_path),
                text="task", message_uuid=str(uuid.uuid4()), transcript_start=0,
            )  # fmt: skip
            setup = ClaudeSetup(str(stand_in), str(tmp_path / "config"), "2.1.332")
            host = RunHost(setup, plan, store=store, wake=lambda: None)
            await host.run()
            assert host.written.is_set()
            assert host.board.unsent is not None and "disk full" in host.board.unsent
            assert heard.read_text() == ""  # its input closed with no line on it
            assert host.board.exit is not None
            assert root.stats.crashes.get("store", 0) == 0
            filler.unlink()
