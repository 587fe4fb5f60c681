"""A reference controller: the small, complete loop a controller author copies from.

It connects with its own credential (the operator mints it with
`akk token create NAME`), says `hello`, sends one task and follows that Turn's
events, acking each once handled. To answer a prompt it calls `status` first
(which records its offer), lets `policy` decide by labels, and sends the ids
those labels carry. It never guesses and never repeats blindly:

- `prompt_changed` / `offer_expired`: the screen moved on and zero keys were
  sent; read `status` again and decide afresh (a new prompt has its own event);
- `response_uncertain`: keys may have reached the pane; report it, never resend;
- a dropped connection: connect again and `send` with the same
  `client_request_id` (AKK returns the same Turn and types nothing twice);
  unacked events come again with the same `event_id`, and those already
  handled are only acked.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from contextlib import aclosing
from typing import Any, Protocol

import attrs
import trio
from trio_websocket import ConnectionClosed

from akk.client import AkkError, ConnectError, Controller, connect

Json = dict[str, Any]

OUTCOMES = frozenset({"done", "failed", "cancelled", "stalled", "timed_out"})
WAKE_UPS = frozenset({"interaction_required", "approval_required"})
LOOK_AGAIN = frozenset({"prompt_changed", "offer_expired"})
LOOKS = 3
RECONNECTS = 5

# -- the policy: everything this controller decides is in this section

SAFE_PROGRAMS = frozenset({"ls", "cat", "echo"})
_SHELL_SYNTAX = re.compile(r"[;|&$`<>(){}\\*?~!\n]")

ANSWERS: Mapping[str, tuple[str, ...]] = {
    "Which language should the greeting be in?": ("French",),
    "Which extras should the card have?": ("Emoji", "Date"),
}
"""The labels this controller picks, by question."""


@attrs.frozen
class Decision:
    """A permission's decision, or the option labels chosen per question_id."""

    permission: str | None = None
    labels: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)


def command_is_safe(command: str) -> bool:
    """True only for `ls`, `cat` and `echo` inside the working directory.

    Parts may be joined by `&&`; `echo` alone may write, with one `> FILE` at
    its end. Other programs, any other shell syntax, absolute paths and hidden
    or parent paths are not safe.
    """
    parts = [part.strip() for part in command.split("&&")]
    return all(part and _simple_is_safe(part) for part in parts)


def _simple_is_safe(part: str) -> bool:
    if part.startswith("echo ") and part.count(">") == 1:
        part, target = (side.strip() for side in part.split(">"))
        if not re.fullmatch(r"\w[\w.-]*", target):
            return False
    if _SHELL_SYNTAX.search(part):
        return False
    try:
        words = shlex.split(part)
    except ValueError:
        return False
    paths = [] if words[:1] == ["echo"] else [w for w in words[1:] if not w.startswith("-")]
    hidden = any(p.startswith("/") or any(s.startswith(".") for s in p.split("/")) for p in paths)
    return bool(words) and words[0] in SAFE_PROGRAMS and not hidden


def policy(interaction: Json) -> Decision | None:
    """This controller's whole judgement. None leaves the prompt to the person at the pane."""
    if interaction["state"] != "pending":
        return None
    if interaction["kind"] == "permission":
        commands = [question.get("detail", "") for question in interaction["questions"]]
        safe = bool(commands) and all(command_is_safe(command) for command in commands)
        wanted = "approve_once" if safe else "reject"
        return Decision(permission=wanted) if wanted in interaction["decisions"] else None
    labels: dict[str, tuple[str, ...]] = {}
    for question in interaction["questions"]:
        offered = [option["label"] for option in question["options"]]
        if question["response_kind"] == "confirm":  # a review: submit what was chosen
            chosen: tuple[str, ...] = tuple(
                o["label"] for o in question["options"] if o.get("role") == "submit"
            )
        else:
            chosen = ANSWERS.get(question["prompt"], ())
        if not chosen or not set(chosen) <= set(offered):
            return None
        labels[question["question_id"]] = chosen
    return Decision(labels=labels)


def call_for(interaction: Json, decision: Decision) -> tuple[str, Json]:
    """The method and params that carry `decision`: labels become the ids `status` showed."""
    if decision.permission is not None:
        return "approve", {"turn_id": interaction["turn_id"], "decision": decision.permission}
    answers = []
    for question in interaction["questions"]:
        ids = {option["label"]: option["option_id"] for option in question["options"]}
        chosen = decision.labels[question["question_id"]]
        answers.append(
            {
                "question_id": question["question_id"],
                "response_kind": question["response_kind"],
                "selected_option_ids": [ids[label] for label in chosen],
            }
        )
    params = {"interaction_id": interaction["interaction_id"], "turn_id": interaction["turn_id"]}
    return "respond_interaction", params | {"answers": answers}


# -- the loop


class Reporter(Protocol):
    """What the controller tells its host (the demo prints it; a bot would log it)."""

    def sent(self, hello: Json, turn: Json) -> None: ...
    def event(self, event: Json, *, redelivered: bool) -> None: ...
    async def offered(self, interaction: Json) -> None: ...
    def answering(self, interaction: Json, method: str, params: Json) -> None: ...
    def answered(self, reply: Json) -> None: ...
    def problem(self, text: str) -> None: ...


async def follow(
    url: str, token: str, terminal_id: str, task: str, reporter: Reporter, *, request_id: str
) -> Json:
    """Send `task` to the terminal and see its Turn through; return the outcome event.

    Raises ConnectError when the server stays unreachable over RECONNECTS tries.
    """
    handled: set[str] = set()
    for attempt in range(RECONNECTS + 1):
        if attempt:
            await trio.sleep(min(2.0**attempt, 10.0))
        try:
            async with connect(url, token, name="reference controller") as ctl:
                params = {"terminal_id": terminal_id, "request": task}
                turn = await ctl.call("send", params | {"client_request_id": request_id})
                reporter.sent(ctl.server, turn)
                outcome = await _events(ctl, turn["turn_id"], handled, reporter)
                if outcome is not None:
                    return outcome
                reporter.problem("the server closed the connection")
        except (ConnectionClosed, ConnectError) as exc:
            reporter.problem(f"connection lost: {exc}")
    raise ConnectError(f"no connection to {url} after {RECONNECTS} reconnects; is `akk serve` up?")


async def _events(
    ctl: Controller, turn_id: str, handled: set[str], reporter: Reporter
) -> Json | None:
    async with aclosing(ctl.events()) as events:
        async for event in events:
            redelivered = event["event_id"] in handled
            reporter.event(event, redelivered=redelivered)
            if not redelivered and event.get("turn_id") == turn_id:
                if event["kind"] in WAKE_UPS:
                    await answer(ctl, event, reporter)
                elif event["kind"] == "response_uncertain":
                    reporter.problem("an answer is uncertain: never resent; a person should look")
            # Acked only once handled (had this controller died first, it comes again);
            # remembered first, so an ack lost with the connection is only repeated.
            handled.add(event["event_id"])
            await ctl.ack(event["event_id"])
            if event.get("turn_id") == turn_id and event["kind"] in OUTCOMES:
                return event
    return None


async def answer(ctl: Controller, event: Json, reporter: Reporter) -> None:
    """Answer the prompt `event` announced, if `status` still shows exactly that one."""
    wanted = event["interaction"]["interaction_id"]
    for _ in range(LOOKS):
        shown = (await ctl.call("status", {"turn_id": event["turn_id"]}))["interaction"]
        if shown is None or shown["interaction_id"] != wanted:
            reporter.problem("that prompt is gone; a newer one comes with its own event")
            return
        await reporter.offered(shown)
        decision = policy(shown)
        if decision is None:
            reporter.problem("the policy has no answer: left to the person at the pane")
            return
        method, params = call_for(shown, decision)
        reporter.answering(shown, method, params)
        try:
            reporter.answered(await ctl.call(method, params))
            return
        except AkkError as exc:
            if exc.reason not in LOOK_AGAIN:
                reporter.problem(f"{method} refused, not retried: {exc}")
                return
            reporter.problem(f"{exc.reason}: zero keys were sent; reading status again")
