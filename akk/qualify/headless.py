"""The headless proof: what the Claude headless backend relies on, proven on a new binary.

A screen qualification says nothing about `claude -p`'s stream-json protocol, so
`akk qualify` of a Claude binary also runs this, offline, against the packaged
scripted model server, through the backend's own code: `process.open_claude`
with the backend's flags (`process.STREAM_FLAGS`), `wire`'s lines, the answers
`prompts` builds, the `RunBoard` the backend folds lines into, and
`transcript`'s path rule and round reader. Each of
`setup.HEADLESS_CHECKS` is checked in order; the first that fails ends the
proof with its reason. The backend runs an unpinned Claude only when its
qualification's report says every check held (`setup.headless_unproven`).

One new session under an id chosen first (`--session-id`): a task that makes
the model call Bash (allowed with AKK's allow: the command runs once), then
AskUserQuestion (answered as AKK answers it: the chosen label reaches the
model once), then reply; the `result` and the transcript must both say done
with the usage the model sent. Then a `--resume` of it in a new process, whose
model request carries the first task, in the same transcript file. Like the
rest of a qualification it runs in its own HOME in a temp directory, under
bubblewrap when asked (`launcher.sandbox_argv`, through a two-line script the
backend's process code starts instead of the binary), and talks only to the
model server on loopback.
"""

from __future__ import annotations

import secrets
import shlex
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.backends.claude_headless import prompts, transcript, wire
from akk.backends.claude_headless.board import RunBoard
from akk.backends.claude_headless.process import (
    ClaudeError,
    NewSession,
    Resume,
    Start,
    open_claude,
)
from akk.backends.claude_headless.setup import HEADLESS_CHECKS
from akk.evidence import EvidenceError, EvidenceFile, UsageStatus, request_digest
from akk.profiles.observation import InteractionKind
from akk.qualify.client import Binary
from akk.qualify.launcher import Confinement, run_processes, sandbox_argv
from akk.qualify.model_server import ModelServer, RecordedRequest, served_tokens
from akk.qualify.run_files import prepare
from akk.qualify.scenarios import AskUserQuestion, Bash, Option, Question, Scenario, Step, Text
from akk.screen.fingerprint import IdMinter

PROOF_TIMEOUT = 120.0
"""The whole proof: two process starts and four model turns take 3-6 s on 2 shared cores."""

TASK = "qualify: prove the headless protocol"
MARKER = "akk-headless-ran"
COMMAND = f"echo ran >> {MARKER}.txt && echo {MARKER}"
QUESTION = Question(
    "Which color should the proof pick?",
    "Color",
    (Option("Red", "warm"), Option("Blue", "cool"), Option("Green", "leaves")),
)
CHOSEN = "Blue"
ANSWERED = f'"{QUESTION.question}"="{CHOSEN}"'
"""What the model's next request carries once the question is answered (every pinned Claude)."""
FINAL = "The headless proof is complete."
RECALL = "qualify: what did I ask first?"
RECALL_REPLY = "You asked me to prove the headless protocol."

SCENARIO = Scenario(
    "headless_proof",
    task=TASK,
    agents=frozenset({"claude"}),
    steps=(
        Step(TASK, Bash(COMMAND, "Record that the proof ran")),
        Step(MARKER, AskUserQuestion((QUESTION,))),
        Step(ANSWERED, Text(FINAL)),
        Step(RECALL, Text(RECALL_REPLY)),
    ),
)


class NotProven(Exception):
    """One check did not hold; the message says what was seen."""

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"{check}: {detail}")
        self.check = check


@attrs.frozen
class HeadlessProof:
    """What the proof showed: each check that held, in order, and the first that did not."""

    checks: tuple[str, ...]
    problem: str | None
    """``check: what was seen``; None when every check held."""
    sandboxed: bool
    seconds: float

    @property
    def proven(self) -> bool:
        return self.problem is None and self.checks == HEADLESS_CHECKS

    def describe(self) -> str:
        """One line for the report."""
        if self.proven:
            return f"headless: proven ({len(self.checks)} checks, {self.seconds:.1f} s)"
        return (
            f"headless: NOT proven ({self.problem}); the headless backend will not run this binary"
        )

    def to_json(self) -> dict[str, Any]:
        """The report's ``headless`` entry (what `setup.headless_unproven` reads)."""
        return {
            "proven": self.proven,
            "checks": list(self.checks),
            "problem": self.problem,
            "sandboxed": self.sandboxed,
            "seconds": round(self.seconds, 3),
        }


@attrs.define
class _Proof:
    """One proof run: what it started, and each check as it holds."""

    server: ModelServer
    binary: Path
    config: Path
    work: Path
    env: Mapping[str, str]
    session: str = attrs.field(factory=lambda: str(uuid.uuid4()))
    ids: IdMinter = attrs.field(factory=lambda: IdMinter(secrets.token_bytes(32)))
    held: list[str] = attrs.field(factory=list)

    def hold(self, check: str, ok: bool, detail: str) -> None:
        if not ok:
            raise NotProven(check, detail)
        self.held.append(check)

    async def run(self, root: Path) -> None:
        first_uuid = str(uuid.uuid4())
        start = len(self.server.requests)
        board, asked = await self._round(NewSession(self.session), TASK, first_uuid)
        init, result = board.init, board.result
        assert init is not None and result is not None
        self.hold(
            "init_session",
            (init.session_id, init.permission_mode) == (self.session, "default"),
            f"system/init says session {init.session_id}, mode {init.permission_mode}; AKK "
            f"chose {self.session}, mode default",
        )
        tasks = [
            r for r in self.server.requests[start:] if not r.auxiliary and TASK in r.newest_input
        ]
        self.hold("task_once", len(tasks) == 1, f"the task reached the model {len(tasks)} times")
        marker = self.work / f"{MARKER}.txt"
        ran = marker.read_text() if marker.is_file() else ""
        self.hold(
            "bash_allow",
            asked.get("Bash") == 1
            and ran == "ran\n"
            and self.server.count_inputs_containing(MARKER) == 1,
            f"Bash asked {asked.get('Bash', 0)} times; the command ran {ran.count('ran')} "
            f"times; its output reached the model {self.server.count_inputs_containing(MARKER)} "
            "times",
        )
        answered = [r for r in self.server.main_requests() if ANSWERED in r.newest_input]
        others = [o.label for o in QUESTION.options if o.label != CHOSEN]
        self.hold(
            "question_answer",
            asked.get(prompts.QUESTION_TOOL) == 1
            and len(answered) == 1
            and not any(f'"{label}"' in answered[0].newest_input for label in others),
            f"AskUserQuestion asked {asked.get(prompts.QUESTION_TOOL, 0)} times; the answer "
            f"reached the model {len(answered)} times",
        )
        served = served_tokens(self.server.main_requests()[_first_turn(self.server, start) :])
        self.hold(
            "result_usage",
            (result.subtype, result.is_error, result.result) == ("success", False, FINAL)
            and result.usage == served
            and served.output > 0,
            f"result {result.subtype} (error {result.is_error}) {result.result!r}, usage "
            f"{result.usage}; the model sent {served}",
        )
        file = transcript.path(self.config, self.work, self.session)
        found = transcript.locate(self.config, self.work, self.session)
        if found is None:
            raise NotProven("transcript", f"no transcript at {file}")
        read = _read(found, first_uuid, TASK, "transcript")
        self.hold(
            "transcript",
            (read.verdict, read.final_message, read.usage, read.usage_status)
            == ("done", FINAL, served, UsageStatus.COMPLETE),
            f"{file} reads {read.verdict}, {read.final_message!r}, usage {read.usage} "
            f"({read.usage_status.value})",
        )
        await self._resume(found)
        left = run_processes(root)  # each process was reaped with its group (`aclose`)
        self.hold("exits", not left, f"processes of the run still alive: {left}")

    async def _resume(self, before: EvidenceFile) -> None:
        message_uuid = str(uuid.uuid4())
        start = len(self.server.requests)
        board, asked = await self._round(Resume(self.session), RECALL, message_uuid)
        init, result = board.init, board.result
        assert init is not None and result is not None
        recalled = [
            r for r in self.server.requests[start:] if not r.auxiliary and RECALL in r.newest_input
        ]
        history = _history(recalled[0]) if len(recalled) == 1 else ""
        after = transcript.locate(self.config, self.work, self.session)
        read = None if after is None else _read(after, message_uuid, RECALL, "resume")
        self.hold(
            "resume",
            init.session_id == self.session
            and not asked
            and TASK in history
            and FINAL in history
            and (result.is_error, result.result) == (False, RECALL_REPLY)
            and after is not None
            and (after.device, after.inode) == (before.device, before.inode)
            and read is not None
            and (read.verdict, read.final_message) == ("done", RECALL_REPLY),
            f"--resume: init session {init.session_id}, the recall reached the model "
            f"{len(recalled)} times, with the first task in its history: {TASK in history}; "
            f"result {result.result!r}; transcript {after and after.path} reads "
            f"{read and read.verdict}",
        )

    async def _round(
        self, start: Start, text: str, message_uuid: str
    ) -> tuple[RunBoard, dict[str, int]]:
        """One process, one user line: its lines folded into a board as the backend does,
        each can_use_tool answered as AKK answers it; to the process's exit.

        A failure is the resume check's in a resumed round; before that, init's until
        `system/init` of the chosen session arrived, then the result's.
        """
        board = RunBoard(generation=1)

        def failed(detail: str) -> NotProven:
            resumed = isinstance(start, Resume)
            return NotProven("resume" if resumed else _check(board), detail)

        asked: dict[str, int] = {}
        async with open_claude(
            self.binary, start, cwd=self.work, config_dir=self.config, env=self.env
        ) as claude:
            await claude.send(wire.user_message(text, uuid=message_uuid))
            async for message in claude.messages:
                if isinstance(message, wire.WireError):
                    raise failed(f"a line AKK cannot read: {message}")
                if isinstance(message, wire.Init) and (
                    message.session_id != start.session_id or message.permission_mode != "default"
                ):
                    raise failed(
                        f"system/init says session {message.session_id}, mode "
                        f"{message.permission_mode}; AKK chose {start.session_id}, mode default"
                    )
                board.apply(message)
                if isinstance(message, wire.ControlRequest):
                    tool = str(message.request.get("tool_name"))
                    asked[tool] = asked.get(tool, 0) + 1
                    await claude.send(self._answer(board, message, failed))
                if isinstance(message, wire.Result):
                    await claude.close_input()
            ended = await claude.aclose()
        if board.init is None or board.result is None:
            missing = "system/init" if board.init is None else "a result"
            raise failed(f"{claude.closed_reason} before {missing}")
        if (ended.returncode, ended.reaped) != (0, True):
            raise NotProven("exits", f"after its input closed the process ended as {ended}")
        return board, asked

    def _answer(
        self,
        board: RunBoard,
        request: wire.ControlRequest,
        failed: Callable[[str], NotProven],
    ) -> bytes:
        """The line AKK's RunActor would write: `approve_once` for Bash, the chosen label for
        the question; ``failed`` names the check an unexpected request fails."""
        prompt = prompts.prompt_of(
            request.request_id, dict(request.request), generation=board.generation,
            ids=self.ids, turn_id=None,
        )  # fmt: skip
        if prompt.kind is InteractionKind.PERMISSION and prompt.tool == "Bash":
            check, response = "bash_allow", _approve(prompt)
        elif prompt.kind is InteractionKind.QUESTIONNAIRE and prompt.actionable:
            check, response = "question_answer", _choose(prompt, self.ids)
        else:
            raise failed(
                f"an unexpected request: {request.subtype} {prompt.tool} "
                f"({prompt.projection.get('manual_reason', prompt.kind.value)})",
            )
        if prompt.input != request.request.get("input"):
            raise NotProven(check, "the request's input did not survive as AKK reads it")
        return wire.control_success(request.request_id, response)


def _approve(prompt: prompts.HeadlessPrompt) -> dict[str, Any]:
    return prompts.decision_response(prompt, "approve_once")


def _choose(prompt: prompts.HeadlessPrompt, ids: IdMinter) -> dict[str, Any]:
    (shown,) = prompt.projection["questions"]
    chosen = [o["option_id"] for o in shown["options"] if o["label"] == CHOSEN]
    answer = {
        "question_id": shown["question_id"],
        "response_kind": shown["response_kind"],
        "selected_option_ids": chosen,
    }
    return prompts.answers_response(prompt, [answer], ids)


def _check(board: RunBoard) -> str:
    """The check a failure before the result belongs to."""
    return "init_session" if board.init is None else "result_usage"


def _first_turn(server: ModelServer, start: int) -> int:
    """The index among the main requests of the first one received at or after `start`."""
    return sum(1 for r in server.requests[:start] if not r.auxiliary)


def _history(request: RecordedRequest) -> str:
    return "" if request.body is None else str(request.body.get("messages"))


def _read(found: EvidenceFile, message_uuid: str, text: str, check: str) -> transcript.Round:
    try:
        return transcript.read_round(found, message_uuid, request_digest(text))
    except EvidenceError as exc:
        raise NotProven(check, f"{found.path}: {exc}") from None


def _confined(binary: Path, root: Path, confine: Confinement) -> Path:
    """What the backend's process code starts: the binary itself, or a script that
    execs it under bubblewrap and `nice` (the SHA-256 is always the binary's own)."""
    argv = [str(binary)]
    if confine.sandbox:
        argv = sandbox_argv(argv, root)
    if confine.niceness:
        argv = ["nice", "-n", str(confine.niceness), *argv]
    if argv == [str(binary)]:
        return binary
    script = root / "confined-claude"
    script.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


async def prove(
    binary: Path,
    version: str,
    *,
    confine: Confinement,
    progress: Callable[[str], None] = lambda line: None,
) -> HeadlessProof:
    """Run the headless proof on `binary` (a Claude of `version`); never raises for a check
    that fails (the proof says which and why)."""
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="akk-qualify-headless-"))
    server = ModelServer(SCENARIO)
    held: list[str] = []
    problem: str | None = None
    try:
        with trio.move_on_after(PROOF_TIMEOUT) as deadline:
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)
                try:
                    files = prepare(Binary("claude", version, binary), root, server.port)
                    proof = _Proof(
                        server, _confined(binary, root, confine), files.home / ".claude",
                        files.workdir, files.env, held=held,
                    )  # fmt: skip
                    await proof.run(root)
                except NotProven as exc:
                    problem = str(exc)
                except (ClaudeError, OSError) as exc:
                    problem = f"{_next(held)}: {exc}"
                finally:
                    nursery.cancel_scope.cancel()
        if deadline.cancelled_caught:
            problem = f"{_next(held)}: no end within {PROOF_TIMEOUT:.0f} s"
    finally:
        # Shielded: a proof cancelled half-way must not leave its HOME behind.
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))
    proven = HeadlessProof(tuple(held), problem, confine.sandbox, time.monotonic() - started)
    progress(proven.describe())
    return proven


def _next(held: list[str]) -> str:
    """The check that was running when the proof stopped."""
    return HEADLESS_CHECKS[len(held)] if len(held) < len(HEADLESS_CHECKS) else "exits"
