"""A file change approval shows the changes it would apply, and approves only those.

`item/fileChange/requestApproval` names its item and carries no changes; the app-server
reports them in the fileChange item first (item/started, then item/fileChange/patchUpdated
and item/completed), as its README's approval flow says: item/started, the request,
serverRequest/resolved, item/completed. The host's real pump folds them into the board
(bounded); the request's `detail` shows them, and its fingerprint covers them, so the
BackendActor refuses an answer fenced against other changes than those shown.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from akk.backends.codex_app_server import board as boards
from akk.backends.codex_app_server import rpc
from akk.backends.codex_app_server.board import BackendBoard
from akk.backends.codex_app_server.host import BackendHost
from akk.backends.codex_app_server.prompts import FILE_CHANGE, fingerprint
from akk.backends.contract import AnswerReceipt, Refusal
from akk.protocol.errors import Reason
from akk.screen.fingerprint import IdMinter
from akk.store.dispatches import Kind
from akk.store.turns import Turn
from tests.test_app_server_board import JSON
from tests.test_app_server_requests import SETUP, _completed, _peer, answering
from tests.test_backend_prompts import UPDATE
from tests.test_full_disk_sessions import _App, _store

IDS = IdMinter(b"k" * 32)
APPROVAL = {"threadId": "thr", "turnId": "t1", "itemId": "call_patch", "startedAtMs": 1}


def _item(method: str, changes: Any, item_id: str = "call_patch") -> dict[str, Any]:
    item = {"type": "fileChange", "id": item_id, "changes": changes, "status": "inProgress"}
    params = {"threadId": "thr", "turnId": "t1", "item": item}
    if method == "item/fileChange/patchUpdated":
        params = {"threadId": "thr", "turnId": "t1", "itemId": item_id, "changes": changes}
    return {"method": method, "params": params | {"startedAtMs": 1}}


def _turn() -> Turn:
    """The Turn the prompts are asked of (only `unresolved` and `turn_id` are read)."""
    return cast(Turn, type("T", (), {"unresolved": True, "turn_id": "turn_x"})())


async def test_the_host_shows_the_items_changes_and_follows_their_updates(tmp_path: Path) -> None:
    """The host's real pump: the item, then its approval: `detail` shows the diff and
    approve_once is offered; a later update of the item changes the interaction; the
    turn's completion forgets the item with the request."""
    host = BackendHost(SETUP, store=cast(Any, None), reader=cast(Any, None), cwd=str(tmp_path))
    board = host.board
    board.generation, board.alive = 1, True
    with trio.fail_after(30):
        async with _peer(tmp_path) as peer, trio.open_nursery() as nursery:
            nursery.start_soon(host._pump, peer.server)
            request = {"id": "srv-1", "method": FILE_CHANGE, "params": APPROVAL}
            await peer.say(_item("item/started", [UPDATE]), request)
            await trio.testing.wait_all_tasks_blocked()
            (first,) = board.prompts("t1", _turn(), IDS)
            (question,) = first.projection["questions"]
            assert question["detail"] == "update /tmp/work/notes.txt\n" + UPDATE["diff"]
            assert first.projection["decisions"] == ["approve_once", "reject"]

            await peer.say(_item("item/fileChange/patchUpdated", [UPDATE | {"diff": "+x\n"}]))
            await trio.testing.wait_all_tasks_blocked()
            (second,) = board.prompts("t1", _turn(), IDS)
            assert second.interaction_id != first.interaction_id
            assert second.projection["questions"][0]["detail"].endswith("\n+x\n")

            await peer.say(_completed("t1"))
            await trio.testing.wait_all_tasks_blocked()
            assert board.requests == {} and board.changes == {}
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("changed", [True, False])
async def test_an_approval_of_changes_other_than_those_shown_is_refused(
    changed: bool, tmp_path: Path
) -> None:
    """The controller saw the item's changes; if they change before its answer, the answer
    is refused (prompt_changed) and nothing is sent; unchanged, it is sent once."""
    board = BackendBoard(generation=1, alive=True)
    request = rpc.ServerRequest("srv-1", FILE_CHANGE, APPROVAL)
    board.requests[request.id] = request
    board.apply(rpc.ServerNotification("item/started", _item("item/started", [UPDATE])["params"]))
    seen = fingerprint(request, 1, board.changes_of(request))
    if changed:
        later = _item("item/fileChange/patchUpdated", [UPDATE | {"diff": "+rm -rf ~\n"}])
        board.apply(rpc.ServerNotification(later["method"], later["params"]))
    with trio.fail_after(30):
        async with _store(tmp_path / "akk.sqlite3") as root:
            store = root.ref("store")
            app = _App()
            actor, answer, _ = await answering(
                store, app, board, seen, request_id=request.id, kind=Kind.APPROVAL,
                result={"decision": "accept"},
            )  # fmt: skip
            reply = await actor.receive(answer)
    if changed:
        assert isinstance(reply, Refusal) and reply.reason is Reason.PROMPT_CHANGED
        assert app.answered == []
    else:
        assert isinstance(reply, AnswerReceipt) and reply.proven
        assert app.answered == [("srv-1", {"decision": "accept"})]


async def test_a_request_read_before_the_item_said_ahead_of_it_still_shows_it() -> None:
    """The item and its approval travel on two channels: read in the other order, the
    request joins the board only after what the app-server said before it, so no
    reject-only appearance of it is ever shown."""
    requests_send, requests = trio.open_memory_channel[rpc.ServerRequest](4)
    notes_send, notes = trio.open_memory_channel[rpc.ServerNotification](4)
    notes_send.send_nowait(
        rpc.ServerNotification("item/started", _item("item/started", [UPDATE])["params"])
    )
    requests_send.send_nowait(rpc.ServerRequest("srv-1", FILE_CHANGE, APPROVAL))
    requests_send.close()
    app = SimpleNamespace(server_requests=requests, notifications=notes, awaiting=lambda _: True)
    host = BackendHost(SETUP, store=cast(Any, None), reader=cast(Any, None), cwd="/")
    host.board.generation = 1
    await host._requests(cast(rpc.AppServer, app))
    (prompt,) = host.board.prompts("t1", _turn(), IDS)
    assert prompt.projection["decisions"] == ["approve_once", "reject"]


def test_an_item_not_reported_offers_reject_only_until_it_is() -> None:
    board = BackendBoard(generation=1, alive=True)
    board.requests["srv-1"] = rpc.ServerRequest("srv-1", FILE_CHANGE, APPROVAL)
    (unknown,) = board.prompts("t1", _turn(), IDS)
    assert unknown.projection["decisions"] == ["reject"]
    assert "has not reported the changes" in str(unknown.unapprovable)
    other = _item("item/started", [UPDATE], item_id="call_other")
    board.apply(rpc.ServerNotification("item/started", other["params"]))
    assert board.prompts("t1", _turn(), IDS)[0].interaction_id == unknown.interaction_id
    board.apply(rpc.ServerNotification("item/started", _item("item/started", [UPDATE])["params"]))
    (known,) = board.prompts("t1", _turn(), IDS)
    assert known.projection["decisions"] == ["approve_once", "reject"]


def test_the_board_keeps_a_bounded_number_of_items_and_little_of_each() -> None:
    """A flood of fileChange items of megabytes keeps at most KEPT_FILE_CHANGES of them,
    the newest, and no diff that does not fit `detail`."""
    board = BackendBoard()
    huge = [UPDATE | {"diff": "+" + "x" * (1 << 20)}]
    for n in range(boards.KEPT_FILE_CHANGES + 10):
        note = _item("item/started", huge if n % 2 else [UPDATE], item_id=f"i{n}")
        board.apply(rpc.ServerNotification("item/started", note["params"]))
    assert len(board.changes) == boards.KEPT_FILE_CHANGES
    assert ("thr", "t1", f"i{boards.KEPT_FILE_CHANGES + 9}") in board.changes
    assert ("thr", "t1", "i0") not in board.changes
    assert all(len(c.text or "") <= 2_000 for c in board.changes.values())


FILE_CHANGE_NOTES = ["item/started", "item/completed", "item/fileChange/patchUpdated"]
_TEXT = st.sampled_from(["thr", "t1", "i"]) | JSON


@given(
    st.lists(
        st.tuples(
            st.sampled_from(FILE_CHANGE_NOTES),
            st.fixed_dictionaries({}, optional={
                "threadId": _TEXT, "turnId": _TEXT, "itemId": _TEXT, "changes": JSON,
                "item": st.fixed_dictionaries({}, optional={
                    "type": st.just("fileChange") | JSON, "id": _TEXT, "changes": JSON,
                }) | JSON,
            }) | JSON,
        ),
        max_size=6,
    )
)  # fmt: skip
def test_no_file_change_notification_raises_and_every_request_projects(
    notes: list[tuple[str, Any]],
) -> None:
    board = BackendBoard(generation=1)
    board.requests["srv"] = rpc.ServerRequest(
        "srv", FILE_CHANGE, {"threadId": "thr", "turnId": "t1", "itemId": "i"}
    )
    for method, params in notes:
        board.apply(rpc.ServerNotification(method, params))
    for changes in board.changes.values():
        assert changes.text is None or isinstance(changes.text, str)
    board.prompts("t1", _turn(), IDS)
