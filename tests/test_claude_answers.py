"""The headless Claude's interaction methods over a real store and the real RunActor.

The requests are the captured ones (fixtures/claude_headless/<version>/); the
process is a pipe that records every line the RunActor writes, so each case can
assert what would have reached Claude: exactly one line for an answer, none for
a refusal. The lab proves the same lines work on real Claude
(tests/lab/test_claude_backend_answers.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, cast

import attrs
import jsonschema
import pytest
import trio

from akk import faults
from akk.actors.store import StoreActor, transact
from akk.backends.claude_headless import prompts, wire
from akk.backends.claude_headless.actor import RunActor, RunMessage
from akk.backends.claude_headless.answers import HeadlessAnswers, prompts_of, remember_asked
from akk.backends.claude_headless.board import RunBoard
from akk.backends.claude_headless.process import ClaudeProcess, ConnectionClosed, NotWritten
from akk.backends.context import BackendContext
from akk.faults import InjectedFault, Point
from akk.protocol.errors import Reason, RpcError
from akk.protocol.schema import METHODS
from akk.runtime.actor import ActorRef, Incarnation, Rank
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.screen.fingerprint import IdMinter
from akk.store import dispatches, interactions, outbox, turns
from akk.store.database import open_store
from akk.store.dispatches import Stage
from akk.store.interactions import Interaction, InteractionState
from akk.store.reader import StoreReader
from akk.store.turns import Turn, TurnState
from tests.small_fs import small_filesystem
from tests.test_full_disk_terminal import fill_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_headless" / "2.1.332"
OWNER, OTHER = "ctl_owner", "ctl_other"


def _request(case: str, index: int = 0) -> wire.ControlRequest:
    """The ``index``-th can_use_tool request Claude 2.1.332 sent in the captured ``case``."""
    captured = json.loads((FIXTURES / f"{case}.json").read_text())["control_requests"][index]
    request = captured["request"]
    return wire.ControlRequest(captured["request_id"], request["subtype"], request)


@attrs.define
class _Pipe:
    """Stands in for the ClaudeProcess: the lines written to it, or the way it broke."""

    lines: list[bytes] = attrs.field(factory=list)
    broken: str | None = None
    closed: str | None = None
    """Closed before the line: it refuses it unwritten (`NotWritten`)."""

    async def send(self, line: bytes) -> None:
        if self.closed is not None:
            raise NotWritten(self.closed)
        if self.broken is not None:
            raise ConnectionClosed(self.broken)
        self.lines.append(line)


@attrs.define
class _Host:
    """One round's process as `answers.Hosts` sees it: its board and its RunActor's ref."""

    board: RunBoard
    ref: ActorRef[RunMessage]

    def host(self, turn_id: str) -> _Host | None:
        return self


async def _serve(incarnation: Incarnation[RunMessage]) -> None:
    """Run the RunActor; a crash (an injected fault) ends it, as it ends its RunHost."""
    with suppress(InjectedFault):
        await incarnation.run()


@attrs.define
class _Wakes:
    """Stands in for the DestinationDesk: who was woken."""

    woken: list[str] = attrs.field(factory=list)

    def wake(self, controller_id: str) -> None:
        self.woken.append(controller_id)


@attrs.define
class _Lab:
    answers: HeadlessAnswers
    store: ActorRef
    board: RunBoard
    pipe: _Pipe
    reader: StoreReader
    wakes: _Wakes
    turn: Turn
    ids: IdMinter

    def ask(self, *requests: wire.ControlRequest) -> None:
        for request in requests:
            self.board.apply(request)

    async def row(self, interaction_id: str) -> Interaction:
        found = await self.reader.run(lambda conn: interactions.get(conn, interaction_id))
        assert found is not None
        return found

    async def events(self) -> list[str]:
        stored = await self.reader.run(lambda conn: outbox.of_turn(conn, self.turn.turn_id))
        return [n.kind for n in stored]

    async def steps(self) -> list[dispatches.Dispatch]:
        return await self.reader.run(lambda conn: dispatches.of_turn(conn, self.turn.turn_id))


def _rows(path: Path) -> None:
    conn = open_store(path)
    try:
        with conn:
            for controller in (OWNER, OTHER):
                conn.execute(
                    "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
                    "VALUES (?, ?, 0, 0)",
                    (controller, controller),
                )
            conn.execute(
                "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
                "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
                "VALUES ('term_x', 's', '%1', 1, 'claude', 2, 3, 'claude', 0, 0)"
            )
    finally:
        conn.close()


@asynccontextmanager
async def _lab(tmp_path: Path) -> AsyncIterator[_Lab]:
    path = tmp_path / "akk.sqlite3"
    _rows(path)
    root = Supervisor("root", children=[ChildSpec("store", lambda: StoreActor(path))])
    reader = StoreReader(path)
    try:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                await nursery.start(root.run)
                store = root.ref("store")

                def insert(conn: Any) -> Turn:
                    turn = turns.insert(
                        conn, controller_id=OWNER, client_request_id="r1", terminal_id="term_x",
                        request_sha256="0" * 64, request_chars=1, evidence_status="unknown",
                        evidence=None, evidence_limit=None, inactivity_seconds=600,
                        lifetime_seconds=600, now=time.time(),
                    )  # fmt: skip
                    return turns.update(conn, turn, state=TurnState.RUNNING)

                turn = await transact(store, insert)
                board, pipe, wakes = RunBoard(generation=1, pid=4242), _Pipe(), _Wakes()
                board.init = wire.Init("sid", "/w", "m", "default", ("Bash",), "2.1.332", {})
                actor = RunActor(cast(ClaudeProcess, pipe), board=board, store=store)
                ref = ActorRef[RunMessage]("claude in-test", Rank.BACKEND)
                nursery.start_soon(_serve, Incarnation(ref, actor))
                ids = IdMinter(b"k" * 32)
                ctx = BackendContext(
                    store=store, reader=reader, ids=ids, desk=cast(Any, None),
                    destinations=cast(Any, wakes), offer_minutes=10,
                )  # fmt: skip
                answers = HeadlessAnswers(ctx, hosts=_Host(board, ref))
                yield _Lab(answers, store, board, pipe, reader, wakes, turn, ids)
                nursery.cancel_scope.cancel()
    finally:
        reader.close()
        faults.disarm()


def _sent(line: bytes) -> dict[str, Any]:
    response: dict[str, Any] = json.loads(line)["response"]
    assert response["subtype"] == "success"
    return response


@pytest.mark.parametrize("decision", ["approve_once", "reject"])
async def test_a_permission_is_offered_to_its_owner_and_answered_once(
    tmp_path: Path, decision: str
) -> None:
    async with _lab(tmp_path) as lab:
        request = _request("bash_allow")
        lab.ask(request)
        turn, answers = lab.turn, lab.answers
        # Nothing was shown to anyone yet: nothing may be answered.
        asked = answers.prompts(turn)[0]
        row = await lab.row(await _recorded(lab))
        with pytest.raises(RpcError) as no_status:
            await answers.approve(turn, row, OWNER, decision)
        assert no_status.value.reason is Reason.STATUS_REQUIRED
        shown = await answers.shown(turn, OWNER)
        assert shown is not None and shown["interaction_id"] == asked.interaction_id
        assert shown["kind"] == "permission" and shown["decisions"] == ["approve_once", "reject"]
        assert "lab-bash-ran" in shown["questions"][0]["detail"]
        assert await lab.events() == ["approval_required"]  # once, however often it is seen
        # Seen by another controller: shown, not offered.
        assert await answers.shown(turn, OTHER) == shown
        with pytest.raises(RpcError) as foreign:
            await answers.approve(turn, await lab.row(asked.interaction_id), OTHER, decision)
        assert foreign.value.reason is Reason.STATUS_REQUIRED
        with pytest.raises(RpcError) as always:
            await answers.approve(turn, await lab.row(asked.interaction_id), OWNER, "always")
        assert always.value.reason is Reason.INVALID_PARAMS
        assert lab.pipe.lines == []

        reply = await answers.approve(turn, await lab.row(asked.interaction_id), OWNER, decision)
        assert reply["outcome"] == "dispatched"
        jsonschema.validate(reply, METHODS["approve"]["result"])  # what the method returns
        (line,) = lab.pipe.lines
        sent = _sent(line)
        assert sent["request_id"] == request.request_id
        if decision == "approve_once":
            assert sent["response"] == {
                "behavior": "allow",
                "updatedInput": request.request["input"],
            }
        else:
            assert sent["response"] == {"behavior": "deny", "message": prompts.REJECTED}
        assert "updatedPermissions" not in sent["response"]
        (step,) = await lab.steps()
        assert (step.kind.value, step.stage) == ("approval", Stage.ACCEPTED)
        # A replay (the same offer, the request asked again or not) never writes again.
        with pytest.raises(RpcError) as replay:
            await answers.approve(turn, await lab.row(asked.interaction_id), OWNER, decision)
        assert replay.value.reason is Reason.CONFLICT
        with pytest.raises(RpcError) as gone:
            await answers.still_asked(turn, await lab.row(asked.interaction_id), "ntf_1")
        assert gone.value.reason is Reason.PROMPT_CHANGED
        assert len(lab.pipe.lines) == 1


async def _recorded(lab: _Lab) -> str:
    """The follower's announce: record what the process asks (its wake-up once)."""

    def record(conn: Any) -> bool:
        fresh = turns.get(conn, lab.turn.turn_id)
        assert fresh is not None
        found = prompts_of(fresh, lab.board, lab.ids)
        return remember_asked(conn, fresh, found, lab.board, time.time())

    assert await transact(lab.store, record) is True
    assert await transact(lab.store, record) is False
    return lab.answers.prompts(lab.turn)[0].interaction_id


def _choose(shown: dict[str, Any], picks: dict[str, list[str] | str]) -> list[dict[str, Any]]:
    """Answers by question header: labels to select, or a free text."""
    answers = []
    for question in shown["questions"]:
        pick = picks[question["header"]]
        if isinstance(pick, str):
            answers.append(
                {"question_id": question["question_id"], "response_kind": "free_text",
                 "text": pick}
            )  # fmt: skip
            continue
        answers.append(
            {
                "question_id": question["question_id"],
                "response_kind": question["response_kind"],
                "selected_option_ids": [
                    o["option_id"] for o in question["options"] if o["label"] in pick
                ],
            }
        )
    return answers


async def test_questions_are_validated_then_answered_together_once(tmp_path: Path) -> None:
    async with _lab(tmp_path) as lab:
        request = _request("ask_three")
        lab.ask(request)
        turn, answers = lab.turn, lab.answers
        shown = await answers.shown(turn, OWNER)
        assert shown is not None and shown["kind"] == "questionnaire"
        assert shown["capabilities"]["batch_response"] is True
        assert await lab.events() == ["interaction_required"]
        row = await lab.row(shown["interaction_id"])
        headers = [q["header"] for q in shown["questions"]]
        picks: dict[str, list[str] | str] = {
            q["header"]: [q["options"][0]["label"]] for q in shown["questions"]
        }
        full = _choose(shown, picks)
        empty = {**full[0], "selected_option_ids": []}
        blank = {**full[0], "response_kind": "free_text", "text": " "}
        for bad in (full[:1], [*full, full[0]], [empty, *full[1:]], [blank, *full[1:]]):
            with pytest.raises(RpcError) as refused:
                await answers.respond(turn, row, OWNER, {"answers": bad})
            assert refused.value.reason is Reason.INVALID_PARAMS
        with pytest.raises(RpcError) as mode:
            await answers.respond(
                turn, row, OWNER, {"answers": full, "delivery_mode": "queue_next_turn"}
            )
        assert mode.value.reason is Reason.INVALID_PARAMS
        with pytest.raises(RpcError) as as_permission:
            await answers.approve(turn, row, OWNER, "approve_once")
        assert as_permission.value.reason is Reason.INVALID_PARAMS
        assert lab.pipe.lines == [] and await lab.steps() == []

        picks[headers[1]] = "Medium, please"
        reply = await answers.respond(turn, row, OWNER, {"answers": _choose(shown, picks)})
        assert reply["outcome"] == "dispatched"
        jsonschema.validate(reply, METHODS["respond_interaction"]["result"])
        (line,) = lab.pipe.lines
        given = _sent(line)["response"]
        questions = request.request["input"]["questions"]  # type: ignore[index]
        assert given["behavior"] == "allow"
        assert given["updatedInput"]["answers"] == {
            questions[0]["question"]: questions[0]["options"][0]["label"],
            questions[1]["question"]: "Medium, please",
            questions[2]["question"]: questions[2]["options"][0]["label"],
        }
        (step,) = await lab.steps()
        assert (step.kind.value, step.stage) == ("answer", Stage.ACCEPTED)
        consumed = await lab.row(shown["interaction_id"])
        assert consumed.state is InteractionState.CONSUMED


async def test_a_request_akk_does_not_answer_is_manual_and_said_at_once(tmp_path: Path) -> None:
    async with _lab(tmp_path) as lab:
        plan = wire.ControlRequest(
            "req-plan", "can_use_tool",
            {"subtype": "can_use_tool", "tool_name": "ExitPlanMode", "input": {"plan": "x"},
             "tool_use_id": "toolu_plan"},
        )  # fmt: skip
        lab.ask(plan)
        shown = await lab.answers.shown(lab.turn, OWNER)
        assert shown is not None and shown["state"] == "manual_required"
        assert shown["manual_reason"] == "plan_approval"
        assert await lab.events() == ["approval_required"]
        assert lab.wakes.woken == [OWNER]
        row = await lab.row(shown["interaction_id"])
        assert await lab.reader.run(
            lambda conn: interactions.offer_of(conn, row.interaction_id, OWNER)
        ) is None  # fmt: skip
        with pytest.raises(RpcError) as manual:
            await lab.answers.approve(lab.turn, row, OWNER, "approve_once")
        assert manual.value.reason is Reason.MANUAL_REQUIRED
        assert lab.pipe.lines == []


async def test_an_answer_that_may_have_been_written_is_uncertain_and_never_resent(
    tmp_path: Path,
) -> None:
    async with _lab(tmp_path) as lab:
        lab.ask(_request("bash_allow"))
        turn, answers = lab.turn, lab.answers
        shown = await answers.shown(turn, OWNER)
        assert shown is not None
        lab.pipe.broken = "claude stopped reading its input (it exited or crashed)"
        with pytest.raises(RpcError) as uncertain:
            await answers.approve(turn, await lab.row(shown["interaction_id"]), OWNER, "reject")
        assert uncertain.value.reason is Reason.RESPONSE_UNCERTAIN
        assert "will not be sent again" in uncertain.value.message
        (step,) = await lab.steps()
        assert step.stage is Stage.UNCERTAIN
        assert await lab.events() == ["approval_required", "response_uncertain"]
        assert OWNER in lab.wakes.woken


async def test_a_crash_between_reservation_and_write_leaves_the_answer_uncertain(
    tmp_path: Path,
) -> None:
    async with _lab(tmp_path) as lab:
        lab.ask(_request("bash_allow"))
        turn, answers = lab.turn, lab.answers
        shown = await answers.shown(turn, OWNER)
        assert shown is not None
        # The actor dies after the reservation, before its line (a SIGKILL of akk serve there
        # leaves the dispatch open for the restart to make uncertain: the lab proves that).
        faults.arm(f"{Point.CLAUDE_ANSWER_RESERVED}:raise")
        with pytest.raises(RpcError) as uncertain:
            await answers.approve(turn, await lab.row(shown["interaction_id"]), OWNER, "reject")
        assert uncertain.value.reason is Reason.RESPONSE_UNCERTAIN
        assert lab.pipe.lines == []
        (step,) = await lab.steps()
        assert step.stage is Stage.UNCERTAIN
        assert await lab.events() == ["approval_required", "response_uncertain"]
        with pytest.raises(RpcError) as replay:
            await answers.approve(turn, await lab.row(shown["interaction_id"]), OWNER, "reject")
        assert replay.value.reason is Reason.CONFLICT
        # A restart finds nothing open: the answer is said uncertain once, and never sent.
        assert await lab.reader.run(dispatches.all_open) == []
        assert lab.pipe.lines == []


async def test_a_withdrawn_request_or_a_new_process_takes_no_answer(tmp_path: Path) -> None:
    async with _lab(tmp_path) as lab:
        request = _request("bash_allow")
        lab.ask(request)
        turn, answers = lab.turn, lab.answers
        shown = await answers.shown(turn, OWNER)
        assert shown is not None
        row = await lab.row(shown["interaction_id"])
        lab.board.apply(wire.ControlCancel(request.request_id))
        with pytest.raises(RpcError) as withdrawn:
            await answers.approve(turn, row, OWNER, "approve_once")
        assert withdrawn.value.reason is Reason.PROMPT_CHANGED
        # The same request from another process is another interaction (its fingerprint).
        lab.board.generation = 2
        lab.ask(request)
        again = await answers.shown(turn, OWNER)
        assert again is not None and again["interaction_id"] != shown["interaction_id"]
        with pytest.raises(RpcError) as stale:
            await answers.approve(turn, row, OWNER, "approve_once")
        assert stale.value.reason is Reason.PROMPT_CHANGED
        assert lab.pipe.lines == [] and await lab.steps() == []
        with pytest.raises(RpcError) as respond:
            answers.check_respond(turn)
        assert respond.value.reason is Reason.INVALID_PARAMS


RESULT = (
    b'{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"sid",'
    b'"usage":{"input_tokens":1,"output_tokens":2}}'
)


async def test_an_answer_provably_never_written_is_not_accepted_not_uncertain(
    tmp_path: Path,
) -> None:
    """The round ended (its input closed) between the fence and the write: the reserved
    answer was never written, so it is not_accepted and the controller is told nothing was
    sent; no response_uncertain."""
    async with _lab(tmp_path) as lab:
        lab.ask(_request("bash_allow"))
        turn, answers = lab.turn, lab.answers
        shown = await answers.shown(turn, OWNER)
        assert shown is not None
        lab.pipe.closed = "stdin is closed (the process is finishing)"
        with pytest.raises(RpcError) as refused:
            await answers.approve(turn, await lab.row(shown["interaction_id"]), OWNER, "reject")
        assert refused.value.reason is Reason.PROMPT_CHANGED
        assert "nothing was sent" in refused.value.message
        (step,) = await lab.steps()
        assert step.stage is Stage.NOT_ACCEPTED
        assert await lab.events() == ["approval_required"]
        assert lab.pipe.lines == []


async def test_a_request_after_the_result_is_never_offered_nor_answered(tmp_path: Path) -> None:
    async with _lab(tmp_path) as lab:
        lab.ask(_request("bash_allow"))
        turn, answers = lab.turn, lab.answers
        shown = await answers.shown(turn, OWNER)
        assert shown is not None
        row = await lab.row(shown["interaction_id"])
        lab.board.apply(wire.parse_line(RESULT))
        lab.ask(_request("bash_deny"))  # after its result: the round is over
        assert prompts_of(turn, lab.board, lab.ids) == []
        assert await answers.shown(turn, OWNER) is None
        with pytest.raises(RpcError) as over:
            await answers.approve(turn, row, OWNER, "reject")
        assert over.value.reason is Reason.PROMPT_CHANGED
        assert await lab.steps() == [] and lab.pipe.lines == []


async def test_an_answer_the_store_cannot_reserve_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    """A full disk (real, `tests.small_fs`) between the offer and the answer: the answer
    is refused (`internal`, naming the store's problem), nothing reaches Claude, and the
    RunActor stays up to write the same answer once the store writes again."""
    with small_filesystem(tmp_path / "fs") as fs:
        async with _lab(fs) as lab:
            lab.ask(_request("bash_allow"))
            turn, answers = lab.turn, lab.answers
            asked = answers.prompts(turn)[0]
            await _recorded(lab)
            assert await answers.shown(turn, OWNER) is not None  # offered to its owner
            filler = await fill_store(fs, lab.store)
            with pytest.raises(RpcError) as refused:
                await answers.approve(
                    turn, await lab.row(asked.interaction_id), OWNER, "approve_once"
                )
            assert refused.value.reason is Reason.INTERNAL
            assert "so nothing was sent" in refused.value.message
            assert lab.pipe.lines == []
            filler.unlink()
            reply = await answers.approve(
                turn, await lab.row(asked.interaction_id), OWNER, "approve_once"
            )
            assert reply["outcome"] == "dispatched" and len(lab.pipe.lines) == 1
