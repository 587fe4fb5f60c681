"""An answer to the app-server on a store that cannot write its reservation.

The full disk is real (`tests.small_fs`); the BackendActor is the real one, run in its
own incarnation behind its ref, as its host runs it, answering through a recording
stand-in for the connection. A reservation that is not on disk never reaches the
app-server: the answer is refused (`internal`, naming the store's problem), nothing
is sent, and the actor (so the app-server and every Turn on it) stays up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import trio

from akk.actors.store import transact
from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.actor import (
    AnswerRequest,
    BackendActor,
    BackendMessage,
    CodexSetup,
)
from akk.backends.codex_app_server.board import BackendBoard
from akk.backends.codex_app_server.prompts import fingerprint
from akk.backends.contract import AnswerReceipt, Refusal
from akk.protocol.errors import Reason
from akk.runtime.actor import ActorRef, Incarnation, Rank
from akk.store.dispatches import Kind, Stage
from tests.small_fs import small_filesystem
from tests.test_app_server_requests import _offered
from tests.test_claude_answers import OWNER
from tests.test_full_disk_sessions import _App, _store
from tests.test_full_disk_terminal import fill_store


async def test_an_answer_the_store_cannot_reserve_is_refused_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs") as fs, trio.fail_after(30):
        db = fs / "akk.sqlite3"
        async with _store(db) as root:
            store = root.ref("store")
            request = rpc.ServerRequest(7, "item/commandExecution/requestApproval",
                                        {"threadId": "thr", "command": "ls"})  # fmt: skip
            board = BackendBoard(generation=1, alive=True)
            board.requests[request.id] = request
            seen = fingerprint(request, board.generation)
            turn_id, interaction_id, offer_id = await transact(store, _offered(seen))
            app = _App()
            actor = BackendActor(
                cast(rpc.AppServer, app), setup=CodexSetup("codex", "/h", "0.171.0"),
                board=board, store=store, reader=cast(Any, None),
            )  # fmt: skip
            ref = ActorRef[BackendMessage]("backend", Rank.BACKEND, mailbox_size=4)
            answer = AnswerRequest(
                turn_id=turn_id, controller_id=OWNER, interaction_id=interaction_id,
                offer_id=offer_id, request_id=request.id, fingerprint=seen,
                kind=Kind.APPROVAL, result={"decision": "accept"},
            )  # fmt: skip
            async with trio.open_nursery() as nursery:
                nursery.start_soon(Incarnation(ref, actor).run)
                filler = await fill_store(fs, store)
                refused = await ref.ask(answer, timeout=10)
                assert isinstance(refused, Refusal) and refused.reason is Reason.INTERNAL
                assert f"the store at {db} cannot write: disk full" in refused.message
                assert "nothing was sent" in refused.message
                assert app.answered == [] and request.id in board.requests

                # Space returns: the same actor (never crashed) answers it, once.
                filler.unlink()
                receipt = await ref.ask(answer, timeout=10)
                assert isinstance(receipt, AnswerReceipt) and receipt.proven
                assert receipt.dispatch.stage is Stage.ACCEPTED
                assert app.answered == [(7, {"decision": "accept"})]
                nursery.cancel_scope.cancel()
            assert root.stats.crashes.get("store", 0) == 0
