"""Capture headless Claude transcripts and can_use_tool requests into fixtures/claude_headless/.

    python -m tools.lab.headless_transcripts [--version 2.1.332] [--case echo]

Each case runs in a fresh HOME against the scripted model server, through
`akk.backends.claude_headless.process` under a session id and message uuids
chosen here, answering every control request with what `prompts` builds. It
writes `<version>/<case>.jsonl` (the session's transcript, every line as
written except 2.1.332's `api-request*` records, which are outside the record
chain) and `<case>.json`: the cwd and the project folder Claude chose, the
session id, each round's message uuid and text, the control requests as they
arrived, the responses sent, and what the model server received and sent back
(newest input, reply, usage, message count). The `*_cwd` cases keep only the
folder name (no transcript). tests/test_claude_transcript.py and
tests/test_claude_prompts.py read them. Run it under the lab lock
(`flock /tmp/akk-lab.lock ...`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.backends.claude_headless import prompts, wire
from akk.backends.claude_headless.process import ClaudeProcess, NewSession, Resume, open_claude
from akk.qualify.launcher import run_processes
from akk.qualify.model_server import ModelServer
from akk.qualify.run_files import RunFiles, prepare
from akk.qualify.scenarios import SCENARIOS, SLOW_TASK
from akk.screen.fingerprint import IdMinter
from tools.lab import clients
from tools.lab.clients import FIXTURES, Client

TARGET = FIXTURES / "claude_headless"
VERSIONS = ("2.1.263", "2.1.332")
"""The oldest and newest pinned Claude."""
DROPPED = frozenset({"api-request", "api-request-shape", "api-request-blob"})
FREE_TEXT = "Magenta, please"
_IDS = IdMinter(b"headless-transcripts-capture-key!")

Answer = Callable[[prompts.HeadlessPrompt], Mapping[str, Any]]


def _approve(prompt: prompts.HeadlessPrompt) -> Mapping[str, Any]:
    return prompts.decision_response(prompt, "approve_once")


def _reject(prompt: prompts.HeadlessPrompt) -> Mapping[str, Any]:
    return prompts.decision_response(prompt, "reject")


def _labels(prompt: prompts.HeadlessPrompt, free: bool = False) -> Mapping[str, Any]:
    """Option 2 of each single-select question, options 1 and 3 of a multi-select one."""
    answers = []
    for shown in prompt.projection["questions"]:
        ids = [o["option_id"] for o in shown["options"]]
        answer: dict[str, Any]
        if free:
            answer = {"response_kind": "free_text", "text": FREE_TEXT}
        elif shown["response_kind"] == "multi_select":
            answer = {"response_kind": "multi_select", "selected_option_ids": [ids[2], ids[0]]}
        else:
            answer = {"response_kind": "single_select", "selected_option_ids": [ids[1]]}
        answers.append({"question_id": shown["question_id"], **answer})
    return prompts.answers_response(prompt, answers, _IDS)


@attrs.frozen
class Case:
    """One capture: a scenario, the texts sent (one round each), how requests are answered."""

    scenario: str
    texts: tuple[str, ...]
    answer: Answer | None = None
    cwd: str | None = None
    """A working directory below the run's root instead of its git work tree."""
    interrupt: bool = False
    resume: bool = False
    """Each round after the first in a new process, `--resume`d."""


CASES: Mapping[str, Case] = {
    "echo": Case("echo", ("lab: say hello",)),
    "failed": Case("api_error_once", ("lab: trigger an error",)),
    "bash_allow": Case("claude_bash", ("lab: run the command",), _approve),
    "bash_deny": Case("claude_bash", ("lab: run the command",), _reject),
    "ask_multi": Case("questionnaire_multi", ("lab: ask me a question",), _labels),
    "ask_free": Case(
        "questionnaire_single3", ("lab: ask me a question",), lambda p: _labels(p, free=True)
    ),
    "ask_three": Case("questionnaire_multi_question", ("lab: ask me a question",), _labels),
    "interrupt": Case("slow", (SLOW_TASK,), interrupt=True),
    "resume": Case("echo", ("lab: say hello", "lab: say hello"), resume=True),
    "weird_cwd": Case("echo", ("lab: say hello",), cwd="wé ird.dir_x+y~z/long-" + "a" * 230),
    "emoji_cwd": Case("echo", ("lab: say hello",), cwd="emoji-\U0001f600-dir"),
    "symlink_cwd": Case("echo", ("lab: say hello",), cwd="link"),
}


async def _round(
    claude: ClaudeProcess, server: ModelServer, case: Case, text: str, log: dict[str, list[Any]]
) -> str:
    """Send `text` under a new message uuid, answer what it asks, until its result."""
    message_uuid = str(uuid.uuid4())
    await claude.send(wire.user_message(text, uuid=message_uuid))
    if case.interrupt:
        await server.wait_for_request(
            lambda r: not r.auxiliary and text in r.newest_input, timeout=30
        )
        await claude.send(wire.interrupt("capture-interrupt"))
    async for message in claude.messages:
        if isinstance(message, wire.ControlRequest) and message.subtype == "can_use_tool":
            assert case.answer is not None, f"unexpected control request {message}"
            prompt = prompts.prompt_of(
                message.request_id, dict(message.request), generation=1, ids=_IDS, turn_id=None
            )
            response = case.answer(prompt)
            await claude.send(wire.control_success(message.request_id, response))
            log["control_requests"].append(
                {"request_id": message.request_id, "request": message.request}
            )
            log["responses_sent"].append(response)
        if isinstance(message, wire.Result):
            break
    return message_uuid


async def capture(client: Client, name: str) -> None:
    """Run case `name` on `client` and write its fixture files."""
    case = CASES[name]
    server = ModelServer(SCENARIOS[case.scenario])
    root = Path(tempfile.mkdtemp(prefix="akk-lab-"))
    try:
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)
                files = prepare(client, root, server.port)
                cwd = _cwd(files, root, case)
                config = files.home / ".claude"
                session = str(uuid.uuid4())
                log: dict[str, list[Any]] = {"control_requests": [], "responses_sent": []}
                rounds = []
                for number, text in enumerate(case.texts):
                    start = Resume(session) if number else NewSession(session)
                    async with open_claude(
                        client.binary(), start, cwd=cwd, config_dir=config, env=files.env
                    ) as claude:
                        rounds.append(
                            {
                                "message_uuid": await _round(claude, server, case, text, log),
                                "request_text": text,
                            }
                        )
                nursery.cancel_scope.cancel()
        left = run_processes(root)
        assert left == [], f"processes left behind: {left}"
        (found,) = (config / "projects").glob(f"*/{session}.jsonl")
        _write(client, name, case, cwd, found, session, rounds, log, server)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cwd(files: RunFiles, root: Path, case: Case) -> Path:
    if case.cwd is None:
        return files.workdir
    if case.cwd == "link":
        (root / "real").mkdir()
        (root / "link").symlink_to(root / "real")
        return root / "link"
    cwd = root / case.cwd
    cwd.mkdir(parents=True)
    return cwd


def _write(
    client: Client,
    name: str,
    case: Case,
    cwd: Path,
    found: Path,
    session: str,
    rounds: list[dict[str, str]],
    log: dict[str, list[Any]],
    server: ModelServer,
) -> None:
    folder = TARGET / client.version
    folder.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "agent": "claude",
        "version": client.version,
        "case": name,
        "scenario": case.scenario,
        "cwd": str(cwd),
        "project_dir": found.parent.name,
        "session_id": session,
    }
    if case.cwd is None:
        kept = [
            line
            for line in found.read_text().splitlines(keepends=True)
            if json.loads(line).get("type") not in DROPPED
        ]
        (folder / f"{name}.jsonl").write_text("".join(kept))
        meta |= {
            "rounds": rounds,
            **log,
            "model_requests": [
                {
                    "newest_input": r.newest_input,
                    "reply": repr(r.reply),
                    "messages": len(_list(r.body, "messages")),
                    "usage": attrs.asdict(r.usage),
                    "outcome": server.outcomes.get(r.index),
                }
                for r in server.main_requests()
            ],
        }
    text = json.dumps(meta, indent=1, ensure_ascii=False) + "\n"
    (folder / f"{name}.json").write_text(text)
    print(f"{client.name} {name}: {found.parent.name[:60]}")


def _list(body: Mapping[str, object] | None, key: str) -> list[object]:
    value = None if body is None else body.get(key)
    return value if isinstance(value, list) else []


def main(argv: list[str] | None = None) -> None:
    """Command line: capture every case on the oldest and newest pinned Claude (or those named)."""
    parser = argparse.ArgumentParser(prog="python -m tools.lab.headless_transcripts")
    parser.add_argument("--version", action="append", choices=VERSIONS)
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    args = parser.parse_args(argv)
    pinned = {c.version: c for c in clients.PINNED if c.agent == "claude"}
    for version in args.version or VERSIONS:
        for name in args.case or sorted(CASES):
            trio.run(capture, pinned[version], name)


if __name__ == "__main__":
    main()
