"""Lab: the answers prompts.py builds reach the model exactly once, on the oldest and newest Claude.

One set-up per version (one model server, one HOME, one headless session under
AKK's id, no pane): a Bash call approved once (its marker file exists, its
output reaches the model once), another rejected (no marker; the deny message
reaches the model once), then AskUserQuestion with three single-select
questions answered in one batch, a multi-select one and a free-text one, each
answer at the model exactly once with the chosen labels. Every answer is what
`prompts` builds from the request as it arrived, and every round is then read
back from the session's own transcript (`transcript.read_round`): done, its
final message, and the usage the model server sent. The answer -> model
seconds are printed and kept in the test's user_properties.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.backends.claude_headless import prompts, transcript, wire
from akk.backends.claude_headless.process import ClaudeProcess, NewSession, open_claude
from akk.evidence import UsageStatus, request_digest
from akk.profiles.observation import InteractionKind
from akk.qualify.launcher import run_processes
from akk.qualify.model_server import ModelServer, RecordedRequest, served_tokens
from akk.qualify.run_files import prepare
from akk.qualify.scenarios import (
    AskUserQuestion,
    Bash,
    Option,
    Question,
    Scenario,
    Step,
    Text,
)
from akk.screen.fingerprint import IdMinter
from tests.lab.conftest import ensure_installed
from tools.lab import clients
from tools.lab.clients import Client

OLDEST_AND_NEWEST = [
    client
    for client in clients.PINNED
    if client.agent == "claude" and client.version in ("2.1.263", "2.1.332")
]
IDS = IdMinter(b"lab-prompts-secret-0123456789abcdef")

ALLOW_TASK = "lab: run the allowed command"
ALLOW_MARKER = "lab-allowed-ran"
REJECT_TASK = "lab: run the rejected command"
REJECT_MARKER = "lab-rejected-ran"
THREE_TASK = "lab: ask three questions"
MULTI_TASK = "lab: ask a multi-select question"
FREE_TASK = "lab: ask for free text"
FREE_TEXT = "Magenta, with a thin border"

_COLOR = Question(
    "Which color do you prefer?",
    "Color",
    (Option("Red", "warm"), Option("Blue", "cool"), Option("Green", "leaves")),
)
_SIZE = Question("Which size should it be?", "Size", (Option("Small", "s"), Option("Large", "l")))
_SHAPE = Question(
    "Which shape should it have?",
    "Shape",
    (Option("Round", "soft"), Option("Square", "sharp"), Option("Hexagon", "six")),
)
_EXTRAS = Question(
    "Which extras do you want?",
    "Extras",
    (Option("Emoji", "a"), Option("Signature", "b"), Option("Date", "c"), Option("Border", "d")),
    multi_select=True,
)
_NAME = Question("What should it be called?", "Name", (Option("Card", "c"), Option("Note", "n")))


def _bash(marker: str) -> Bash:
    return Bash(f"touch {marker}.txt && echo {marker}", f"Create {marker}.txt")


SCENARIO = Scenario(
    "claude_headless_prompts",
    task=ALLOW_TASK,
    agents=frozenset({"claude"}),
    steps=(
        Step(ALLOW_TASK, _bash(ALLOW_MARKER)),
        Step(ALLOW_MARKER, Text("The allowed command ran.")),
        Step(REJECT_TASK, _bash(REJECT_MARKER)),
        Step(prompts.REJECTED, Text("I did not run it.")),
        Step(THREE_TASK, AskUserQuestion((_COLOR, _SIZE, _SHAPE))),
        Step(f'"{_SHAPE.question}"=', Text("Noted the three answers.")),
        Step(MULTI_TASK, AskUserQuestion((_EXTRAS,))),
        Step(f'"{_EXTRAS.question}"=', Text("Noted the extras.")),
        Step(FREE_TASK, AskUserQuestion((_NAME,))),
        Step(f'"{_NAME.question}"=', Text("Noted the name.")),
    ),
)


def _choose(labels: dict[str, list[str]]) -> Any:
    """An answer builder: for each question (by prompt), the labels to select."""

    def build(prompt: prompts.HeadlessPrompt) -> dict[str, Any]:
        answers = []
        for shown in prompt.projection["questions"]:
            chosen = labels[shown["prompt"]]
            if chosen == [FREE_TEXT]:
                answers.append(
                    {"question_id": shown["question_id"], "response_kind": "free_text",
                     "text": FREE_TEXT}
                )  # fmt: skip
                continue
            answers.append(
                {
                    "question_id": shown["question_id"],
                    "response_kind": shown["response_kind"],
                    "selected_option_ids": [
                        o["option_id"] for o in shown["options"] if o["label"] in chosen
                    ],
                }
            )
        return prompts.answers_response(prompt, answers, IDS)

    return build


def _decide(decision: str) -> Any:
    def build(prompt: prompts.HeadlessPrompt) -> dict[str, Any]:
        return prompts.decision_response(prompt, decision)

    return build


async def _round(
    claude: ClaudeProcess,
    server: ModelServer,
    text: str,
    kind: InteractionKind,
    answer: Any,
    reached_model: str,
) -> tuple[str, dict[str, Any], float]:
    """Send `text` under a fresh message uuid; answer its one control request with `answer`.

    Returns the message uuid, the response sent, and the seconds from writing the
    answer to the model request that carries `reached_model`.
    """
    message_uuid = str(uuid.uuid4())
    await claude.send(wire.user_message(text, uuid=message_uuid))
    answered_at = 0.0
    sent: dict[str, Any] = {}
    with trio.fail_after(60):
        async for message in claude.messages:
            assert not isinstance(message, wire.WireError), message
            if isinstance(message, wire.ControlRequest):
                assert not sent, "one control request per round"
                prompt = prompts.prompt_of(
                    message.request_id,
                    dict(message.request),
                    generation=1,
                    ids=IDS,
                    turn_id=None,
                )
                assert (prompt.kind, prompt.actionable) == (kind, True), prompt.projection
                sent = answer(prompt)
                answered_at = time.monotonic()
                await claude.send(wire.control_success(message.request_id, sent))
            if isinstance(message, wire.Result):
                break
    assert sent, "the round asked nothing"

    def carries(request: RecordedRequest) -> bool:
        return not request.auxiliary and reached_model in request.newest_input

    at_model = await server.wait_for_request(carries, timeout=10)
    return message_uuid, sent, at_model.at - answered_at


@pytest.mark.lab
@pytest.mark.parametrize("client", OLDEST_AND_NEWEST, ids=lambda client: client.name)
async def test_permission_and_question_answers_reach_the_model_once(
    client: Client, request: pytest.FixtureRequest
) -> None:
    await ensure_installed(client)
    server = ModelServer(SCENARIO)
    root = Path(tempfile.mkdtemp(prefix="akk-lab-"))
    seconds: list[float] = []
    try:
        with trio.fail_after(240):
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)
                files = prepare(client, root, server.port)
                config, work = files.home / ".claude", files.workdir
                session = str(uuid.uuid4())
                rounds: list[tuple[str, str, str, list[RecordedRequest]]] = []
                async with open_claude(
                    client.binary(), NewSession(session), cwd=work, config_dir=config,
                    env=files.env,
                ) as claude:  # fmt: skip

                    async def probe(
                        text: str, kind: InteractionKind, answer: Any, reached: str, final: str
                    ) -> dict[str, Any]:
                        first = len(server.main_requests())
                        message_uuid, sent, took = await _round(
                            claude, server, text, kind, answer, reached
                        )
                        seconds.append(took)
                        assert server.count_inputs_containing(reached) == 1, server.summary()
                        rounds.append((message_uuid, text, final, server.main_requests()[first:]))
                        return sent

                    # approve_once: allow with the input unchanged; the command runs once.
                    allowed = await probe(
                        ALLOW_TASK, InteractionKind.PERMISSION, _decide("approve_once"),
                        ALLOW_MARKER, "The allowed command ran.",
                    )  # fmt: skip
                    assert allowed["updatedInput"]["command"] == _bash(ALLOW_MARKER).command
                    assert (work / f"{ALLOW_MARKER}.txt").exists()
                    # reject: deny; the command never runs, the message reaches the model.
                    await probe(
                        REJECT_TASK, InteractionKind.PERMISSION, _decide("reject"),
                        prompts.REJECTED, "I did not run it.",
                    )  # fmt: skip
                    assert not (work / f"{REJECT_MARKER}.txt").exists()
                    # Three single-select questions, one batch.
                    await probe(
                        THREE_TASK, InteractionKind.QUESTIONNAIRE,
                        _choose({_COLOR.question: ["Blue"], _SIZE.question: ["Large"],
                                 _SHAPE.question: ["Hexagon"]}),
                        f'"{_COLOR.question}"="Blue", "{_SIZE.question}"="Large", '
                        f'"{_SHAPE.question}"="Hexagon"',
                        "Noted the three answers.",
                    )  # fmt: skip
                    # Multi-select: labels joined in option order.
                    await probe(
                        MULTI_TASK, InteractionKind.QUESTIONNAIRE,
                        _choose({_EXTRAS.question: ["Border", "Emoji"]}),
                        f'"{_EXTRAS.question}"="Emoji, Border"', "Noted the extras.",
                    )  # fmt: skip
                    # Free text instead of an option.
                    await probe(
                        FREE_TASK, InteractionKind.QUESTIONNAIRE,
                        _choose({_NAME.question: [FREE_TEXT]}),
                        f'"{_NAME.question}"="{FREE_TEXT}"', "Noted the name.",
                    )  # fmt: skip
                ended = await claude.aclose()
                nursery.cancel_scope.cancel()

        assert (ended.returncode, ended.reaped) == (0, True), ended
        assert run_processes(root) == []
        # Each round, read back from the session's own transcript.
        found = transcript.locate(config, work, session)
        assert found is not None, sorted(p.name for p in (config / "projects").glob("*/*"))
        for message_uuid, text, final, served in rounds:
            read = transcript.read_round(found, message_uuid, request_digest(text))
            assert (read.verdict, read.final_message) == ("done", final), text
            assert (read.usage, read.usage_status) == (served_tokens(served), UsageStatus.COMPLETE)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ordered = sorted(seconds)
    request.node.user_properties.append(("answer_to_model_s", ordered))
    print(f"{client.name} answer -> model: {', '.join(f'{s:.3f}' for s in ordered)} s")
