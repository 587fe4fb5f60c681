"""`make demo`: one real client, AKK and the reference controller, narrated live.

It installs the newest pinned client of one agent (the lab installer), starts
the lab's scripted model server with the demo scenario and the client in a
private tmux server (`akk.qualify.launcher.launch`), and `akk serve` on a
throwaway state directory (`tools.lab.akk_runner.AkkProcess`). Then the
reference controller (`tools.demo.controller`) sends the task and answers
every prompt by its policy, while this module prints each step: the event and
its projection, the semantic answer and the ids it carries, what reached the
model, the outcome, and the time each step took. Everything it started is
stopped and removed when it ends, on its own, at the deadline or on Ctrl-C.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.client import connect
from akk.qualify import scenarios as sc
from akk.qualify.client import Agent
from akk.qualify.launcher import LabSession, launch
from akk.qualify.model_server import ModelServer, RecordedRequest
from tools.demo import controller
from tools.lab import clients
from tools.lab.akk_runner import AkkProcess, idle_terminal
from tools.lab.installer import install_many

Json = dict[str, Any]

CONTROLLER_ID = "demo-controller"
SCENARIOS: dict[Agent, str] = {"claude": "demo_claude", "codex": "demo_codex"}
ANSWERED: dict[Agent, str] = {"claude": sc.ANSWERED_CLAUDE, "codex": sc.ANSWERED_CODEX}
"""What the client sends the model once the questionnaire is answered."""

CODEX_NOTE = (
    "Codex shows request_user_input only in Plan mode, where its profile answers "
    "single-select questions (it has no multi-select), so this demo asks one; the pane "
    "was switched to Plan mode (Shift+Tab) before AKK started."
)
ATTACH_SECONDS = 20.0
"""Attached mode: how long the demo waits for the person to attach (Enter starts at once)."""
PAUSE_SECONDS = 1.5
"""Attached mode: how long a prompt stays on screen before the controller answers it."""
HOLD_SECONDS = 15.0
"""Attached mode: how long the finished pane stays up before everything is removed."""
TIMINGS_NOTE = textwrap.fill(
    "event: its cause (the model's reply, or the controller's previous call) to the event "
    "at the controller, the client drawing its prompt included; call: the send or answer "
    "call's round trip (keys sent and proven on screen); at model: that call to the model "
    "server receiving what it carried.",
    80,
)
MODEL_TEXT = 150
"""Characters of a model request's newest input shown."""


@attrs.frozen
class Settings:
    """What the demo was asked for (`tools/demo/__main__.py` reads it from the environment)."""

    agent: Agent
    attach: bool
    """Print the `tmux attach` command and pace the demo for a person to watch."""
    deadline: float
    """Seconds from the client's start to the end of the demo."""


def pretty(value: Any, indent: str = "") -> str:
    """JSON, indented, with every object or list that fits on one line kept on one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(indent) + len(flat) <= 100 or not isinstance(value, dict | list) or not value:
        return flat
    inner = indent + "  "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {pretty(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    return "[\n" + ",\n".join(f"{inner}{pretty(v, inner)}" for v in value) + f"\n{indent}]"


def ms(seconds: float | None) -> str:
    """Whole milliseconds, or "-" when not measured."""
    return "-" if seconds is None else f"{1000 * seconds:.0f} ms"


@attrs.define
class Printer:
    """Lines stamped with the seconds since the demo started."""

    started: float = attrs.Factory(time.monotonic)

    def line(self, tag: str, text: str) -> None:
        print(f"{time.monotonic() - self.started:6.1f}s  {tag:<8} {text}", flush=True)

    def block(self, text: str) -> None:
        print(textwrap.indent(text, " " * 17), flush=True)


@attrs.define
class Timing:
    """One step's times: its event after its cause, the answer call, the answer at the model."""

    step: str
    event: float | None = None
    cause: str = ""
    call: float | None = None
    model: float | None = None


def quoted(request: RecordedRequest) -> str:
    """A request's newest input on one line, cut after MODEL_TEXT characters, quoted."""
    text = request.newest_input.replace("\n", " ⏎ ")
    return repr(text if len(text) <= MODEL_TEXT else text[:MODEL_TEXT] + "…")


@attrs.define
class ModelFeed:
    """Hands each conversation request a model server records to ``show``, once, in order."""

    server: ModelServer
    show: Callable[[RecordedRequest], None]
    looked: int = 0
    """How many of the server's requests have been looked at."""

    async def watch(self) -> None:
        """Show each request as it arrives (runs until cancelled)."""
        while True:

            def unseen(request: RecordedRequest, first: int = self.looked) -> bool:
                return request.index >= first

            await self.server.wait_for_request(unseen, timeout=math.inf)
            self.flush()

    def flush(self) -> None:
        """Show the conversation requests recorded since the last look."""
        for request in self.server.requests[self.looked :]:
            if not request.auxiliary:
                self.show(request)
        self.looked = len(self.server.requests)


@attrs.define
class Narrator:
    """The demo's `controller.Reporter`: prints what happens and times each step."""

    out: Printer
    server: ModelServer
    pause: float
    timings: list[Timing] = attrs.Factory(list)
    last_call: float = 0.0
    """When the newest call that puts input into the pane (send or answer) was issued."""
    at_model_pending: bool = False

    def sending(self) -> None:
        self.timings.append(Timing("send the task"))
        self.last_call, self.at_model_pending = time.monotonic(), True

    def sent(self, hello: Json, turn: Json) -> None:
        if self.timings[0].call is None:
            self.timings[0].call = time.monotonic() - self.last_call
            self.out.line(
                "hello", f"protocol {hello['protocol']}, server {hello['server_version']}"
            )
        decision = turn["session_decision"]
        self.out.line(
            "send",
            f"{sc.DEMO_TASK!r} -> {turn['turn_id']} ({turn['state']}; session "
            f"{decision['action']}: {decision['reason']})  ⏱ {ms(self.timings[0].call)}",
        )

    def event(self, event: Json, *, redelivered: bool) -> None:
        now, kind = time.monotonic(), event["kind"]
        if redelivered:
            self.out.line("event", f"{kind} {event['event_id']} again: handled already, acked")
            return
        cause_at, cause = self._cause()
        timing = f"⏱ {ms(now - cause_at)} after {cause}"
        if kind in controller.WAKE_UPS:
            shown = event["interaction"]
            step = f"{shown['kind']} {shown['step']['index']}/{shown['step']['total']}"
            self.timings.append(Timing(step, now - cause_at, cause))
            self.out.line("event", f"{kind}: {step}  {timing}")
            self.out.block(pretty(shown))
        elif kind in controller.OUTCOMES:
            self.timings.append(Timing(f"outcome {kind}", now - cause_at, cause))
            outcome = event.get("outcome") or {}
            self.out.line(kind, f"{outcome.get('final_message', event['summary'])!r}  {timing}")
            if usage := outcome.get("usage"):
                self.out.block(
                    f"usage: input {usage['input_tokens']} · output {usage['output_tokens']} · "
                    f"cache read {usage['cache_read_tokens']} · cache write "
                    f"{usage['cache_write_tokens']} ({usage['usage_status']})"
                )
        else:
            self.out.line("event", f"{kind}: {event.get('summary', '')}  {timing}")

    async def offered(self, interaction: Json) -> None:
        self.out.line("status", f"{interaction['interaction_id']} is on screen; offer recorded")
        await trio.sleep(self.pause)

    def answering(self, interaction: Json, method: str, params: Json) -> None:
        self.last_call, self.at_model_pending = time.monotonic(), True
        if method == "approve":
            command = interaction["questions"][0].get("detail", "")
            self.out.line("answer", f"{params['decision']} for `{command}` (the policy's call)")
        else:
            labels = {
                o["option_id"]: o["label"] for q in interaction["questions"] for o in q["options"]
            }
            for question, given in zip(interaction["questions"], params["answers"], strict=True):
                chosen = ", ".join(labels[i] for i in given["selected_option_ids"])
                self.out.line("answer", f"{question['header'] or question['prompt']}: {chosen}")
        self.out.block(f"{method} {pretty(params)}")

    def answered(self, reply: Json) -> None:
        self.timings[-1].call = time.monotonic() - self.last_call
        self.out.line(
            reply["outcome"], f"keys sent and proven on screen  ⏱ {ms(self.timings[-1].call)}"
        )

    def problem(self, text: str) -> None:
        self.out.line("!", text)

    def reached(self, request: RecordedRequest) -> None:
        """Print a conversation request the model received (timed after the call that caused it)."""
        note = ""
        if self.at_model_pending:
            self.timings[-1].model = request.at - self.last_call
            self.at_model_pending = False
            note = f"  ⏱ {ms(self.timings[-1].model)} after the call"
        self.out.line("model <-", f"#{request.index} {quoted(request)}{note}")

    def _cause(self) -> tuple[float, str]:
        """The latest thing that could have brought an event: a model reply or an answer call."""
        replied = [
            at for i, at in self.server.finished_at.items() if not self.server.requests[i].auxiliary
        ]
        if replied and max(replied) > self.last_call:
            return max(replied), "the model's reply"
        return self.last_call, "the controller's call"

    def summary(self) -> None:
        """One row per step, and what each column measures."""
        self.out.line("timings", f"{'step':<22}{'event':>10}  {'call':>9}  {'at model':>9}  after")
        for t in self.timings:
            self.out.block(
                f"{t.step:<22}{ms(t.event):>10}  {ms(t.call):>9}  {ms(t.model):>9}  {t.cause}"
            )
        self.out.block(TIMINGS_NOTE)


def checks(lab: LabSession, agent: Agent, outcome: Json) -> list[tuple[bool, str]]:
    """What the demo proves at the far end, each with whether it held."""
    found: list[tuple[bool, str]] = []
    for what, text in (
        ("the task", sc.DEMO_TASK),
        ("the questionnaire's answers", ANSWERED[agent]),
        ("the approved command's output", sc.DEMO_GREETING),
    ):
        count = lab.server.count_inputs_containing(text)
        found.append((count == 1, f"the model received {what} exactly once ({count}x)"))
    card = lab.workdir / sc.DEMO_FILE
    wrote = card.is_file() and card.read_text().strip() == sc.DEMO_GREETING
    found.append((wrote, f"the approved command ran: {sc.DEMO_FILE} says {sc.DEMO_GREETING!r}"))
    found.append((outcome["kind"] == "done", f"the Turn ended {outcome['kind']}"))
    return found


async def demo(settings: Settings) -> int:
    """Run the demo; return 0 when every check held, else 1.

    Raises trio.TooSlowError past the deadline and InstallError when the client
    cannot be installed; everything started is gone by then either way.
    """
    out = Printer()
    client = clients.newest(settings.agent)
    out.line("demo", f"AKK drives {client.name} through the reference controller")
    await install_many([client])
    scenario = sc.SCENARIOS[SCENARIOS[settings.agent]]
    root = Path(tempfile.mkdtemp(prefix="akk-demo-"))
    try:
        with trio.fail_after(settings.deadline):
            plan_mode = settings.agent == "codex"
            async with launch(client, scenario, plan_mode=plan_mode) as lab:
                out.line(
                    "client",
                    f"{client.name} idle after {lab.ready_after or 0:.1f} s, talking to the "
                    f"scripted model server on 127.0.0.1:{lab.server.port} ({scenario.name})",
                )
                out.block(f"tmux -S {lab.socket} attach -t lab")
                if plan_mode:
                    out.block(textwrap.fill(CODEX_NOTE, 80))
                status = await _with_akk(settings, out, lab, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out.line("cleanup", "akk serve, tmux server, client and model server stopped; state removed")
    return status


@attrs.frozen
class Serving:
    """`akk serve` started for a demo: its process, URL, start time and the lab pane's row."""

    akk: AkkProcess
    url: str
    started: float
    row: Json


@asynccontextmanager
async def serving_demo(
    out: Printer, lab: LabSession, root: Path, controller_id: str = CONTROLLER_ID
) -> AsyncIterator[Serving]:
    """Start `akk serve` on the lab pane (a credential minted for ``controller_id``), print it,
    and wait until it lists the pane idle; stopped on exit."""
    # Its own session: a Ctrl-C reaches the demo alone, which stops it in its clean-up
    # (in the terminal's process group it would stop first and refuse the demo's calls).
    akk = AkkProcess(lab, root, controller_id, own_session=True)
    try:
        started = time.monotonic()
        url = await trio.to_thread.run_sync(akk.start)
        assert akk.proc is not None
        out.line("serve", f"akk serve listening on {url} after {time.monotonic() - started:.1f} s")
        out.block(f"state {akk.state.path}, pid {akk.proc.pid}")
        out.block(
            f"credential minted for controller {controller_id!r} (as `akk token create` does)"
        )
        async with connect(url, akk.state.token()) as operator:
            row = await idle_terminal(operator, timeout=30)
        yield Serving(akk, url, started, row)
    finally:
        akk.stop()


async def wait_to_attach(settings: Settings, out: Printer, lab: LabSession, what: str) -> None:
    """With attach on, print how to watch the pane and wait ATTACH_SECONDS for ``what`` (a
    line saying what happens then, and that Enter does it now)."""
    if not settings.attach:
        return
    out.line("attach", f"tmux -S {lab.socket} attach -t lab   (in another terminal)")
    out.block(what)
    with trio.move_on_after(ATTACH_SECONDS):
        await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)


async def conclude(settings: Settings, out: Printer, results: list[tuple[bool, str]]) -> int:
    """Print each check, hold the pane a while with attach on; 0 if every check held, else 1."""
    for held, what in results:
        out.line("check", f"{'ok  ' if held else 'FAIL'} {what}")
    if settings.attach:
        out.line("hold", f"the pane stays up {HOLD_SECONDS:g} s more (Ctrl-C ends now)")
        await trio.sleep(HOLD_SECONDS)
    return 0 if all(held for held, _ in results) else 1


async def _with_akk(settings: Settings, out: Printer, lab: LabSession, root: Path) -> int:
    async with serving_demo(out, lab, root) as served:
        row = served.row
        seen = time.monotonic() - served.started
        out.line(
            "list", f"pane {row['pane']} idle under {row['profile']}  ⏱ {ms(seen)} after start"
        )
        listing = await trio.run_process(
            [sys.executable, "-m", "akk", "list", "--state-dir", str(served.akk.state.path)],
            capture_stdout=True,
        )
        out.block("$ akk list\n" + listing.stdout.decode().rstrip())
        await wait_to_attach(
            settings, out, lab, f"the task goes out in {ATTACH_SECONDS:g} s; Enter sends it now"
        )
        narrator = Narrator(out, lab.server, PAUSE_SECONDS if settings.attach else 0.0)
        feed = ModelFeed(lab.server, narrator.reached)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(feed.watch)
            narrator.sending()
            token = served.akk.tokens[CONTROLLER_ID]
            outcome = await controller.follow(
                served.url, token, row["terminal_id"], sc.DEMO_TASK, narrator, request_id="demo-1"
            )
            nursery.cancel_scope.cancel()
        feed.flush()
        narrator.summary()
        return await conclude(settings, out, checks(lab, settings.agent, outcome))
