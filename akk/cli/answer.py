"""`akk answer`: a person answers, from the shell, what a Turn's agent asks.

The operator's way to a prompt without a browser, and the only one for a
backend Turn, which has no pane. Each step is what a controller does: `status`
for the Turn (which offers its prompt to the operator), the prompt shown with
numbered choices, the person's reply read against it (`akk.cli.answer_form`),
then `approve` or `respond_interaction` with that prompt's own ids. A prompt
that changed meanwhile is refused by the server with nothing sent, and shown
again; an offer that only expired is renewed for the same prompt. A
questionnaire goes on step by step while the person answers. AKK itself never
answers: nothing is sent but what the person chose, once.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import trio

from akk.cli import records
from akk.cli.answer_form import Call, Unanswered, read_call
from akk.cli.errors import CliError
from akk.cli.server_calls import operator_call, operator_session, terminal_id
from akk.cli.status_text import INDENT, interaction_lines
from akk.cli.text import out, shown
from akk.client import AkkError, Controller
from akk.protocol.schema import OUTCOME_KINDS
from akk.store.location import StateDir

NEXT_STEP_SECONDS = 10.0
"""How long a questionnaire's answered step waits for its next step to show."""

_RENEWED = frozenset({"offer_expired", "status_required"})
"""Refusals of an answer whose prompt may still stand: status offers it again."""


def run(args: argparse.Namespace) -> int:
    state = StateDir.resolve(args.state_dir)
    turn_id = _turn_of(state, args.record)
    status = operator_call(state, "status", {"turn_id": turn_id})
    while True:
        projection = _pending(turn_id, status)
        for line in interaction_lines(projection, numbered=True):
            out.print(shown(line))
        settled = status["turn"]["state"] in OUTCOME_KINDS
        try:
            call = read_call(projection, _ask, _say, settled=settled)
        except Unanswered as exc:
            raise CliError(f"{exc}; nothing was sent. `akk answer {turn_id}` asks again") from None
        reply = _send(state, call, projection["interaction_id"])
        if reply is None:  # the prompt changed before the answer: nothing went out
            out.print(shown("the prompt changed before the answer was sent (nothing was sent):"))
            status = operator_call(state, "status", {"turn_id": turn_id})
            continue
        out.print(shown(f"sent: {reply['outcome']} ({reply['dispatch_id']})"))
        if not _leads_on(projection):
            out.print(shown(f"`akk status {turn_id}` shows what the agent does next"))
            return 0
        status = _next_step(state, turn_id, projection["interaction_id"])
        if status is None:
            out.print(shown(f"it asks nothing more just now; `akk status {turn_id}` shows it"))
            return 0


def _turn_of(state: StateDir, record: str) -> str:
    """The Turn that ``record`` (a turn_id, or a terminal's id or pane) names."""
    turn_id: str | None = record
    if not record.startswith(records.RECORD_PREFIXES):

        async def asked(ctl: Controller) -> Any:
            return await ctl.call("status", {"terminal_id": await terminal_id(ctl, record)})

        status = operator_session(state, asked)
        turn_id = status["terminal"]["turn_id"]
        if turn_id is None and status["interaction"] is None:
            raise CliError(f"{record}'s agent asks nothing now; nothing was sent")
    if turn_id is None or not turn_id.startswith("turn_"):
        raise CliError(
            f"{record} is not followed by a Turn of AKK's (a task a person started, or a Watch "
            "of one, which never sends input): answer it at its pane"
        )
    return turn_id


def _pending(turn_id: str, status: dict[str, Any]) -> dict[str, Any]:
    """The prompt ``status`` shows for the Turn, pending; else CliError saying why not."""
    projection: dict[str, Any] | None = status["interaction"]
    if projection is None:
        raise CliError(f"{turn_id}'s agent asks nothing now; nothing was sent")
    if projection["state"] == "manual_required":
        for line in interaction_lines(projection):
            out.print(shown(line))
        raise CliError(
            "AKK sends nothing for this prompt: a person answers it where the agent runs"
        )
    return projection


def _leads_on(projection: dict[str, Any]) -> bool:
    """Whether answering ``projection`` shows a next step to answer: a questionnaire's step
    before its last, or a queued question opened (its picker)."""
    if projection["kind"] == "permission":
        return False
    step = projection.get("step")
    return step is None or step["index"] < step["total"]


def _send(state: StateDir, call: Call, interaction_id: str) -> dict[str, Any] | None:
    """Make ``call``; None when the prompt changed first (nothing was sent). An offer that
    expired while the person read is renewed for the same prompt (same id) and used once."""

    async def answer(ctl: Controller) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await ctl.call(call.method, call.params)
            return result
        except AkkError as exc:
            if exc.reason == "prompt_changed":
                return None
            if exc.reason not in _RENEWED:
                raise
        status = await ctl.call("status", {"turn_id": call.params["turn_id"]})
        if (status["interaction"] or {}).get("interaction_id") != interaction_id:
            return None
        again: dict[str, Any] = await ctl.call(call.method, call.params)
        return again

    return operator_session(state, answer)


def _next_step(state: StateDir, turn_id: str, answered: str) -> dict[str, Any] | None:
    """The Turn's status once it shows a prompt other than ``answered`` (its next step);
    None if none shows within `NEXT_STEP_SECONDS`."""

    async def wait(ctl: Controller) -> dict[str, Any] | None:
        with trio.move_on_after(NEXT_STEP_SECONDS):
            while True:
                status: dict[str, Any] = await ctl.call("status", {"turn_id": turn_id})
                shown_now = status["interaction"]
                if shown_now is not None and shown_now["interaction_id"] != answered:
                    return status
                if status["turn"]["state"] in OUTCOME_KINDS:
                    return None
                await trio.sleep(0.2)
        return None

    result: dict[str, Any] | None = operator_session(state, wait, timeout=NEXT_STEP_SECONDS + 10)
    return result


def _ask(prompt: str) -> str | None:
    out.print(shown(f"{INDENT}{prompt}"), end="")
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


def _say(line: str) -> None:
    out.print(shown(f"{INDENT}{line}"))
