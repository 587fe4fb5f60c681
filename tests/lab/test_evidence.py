"""Lab: a Turn's evidence from the real clients' own files, end to end; also the fixture capture.

Each case sends its requests as AKK will (a tmux bracketed paste, then one
Enter), takes an evidence `snapshot` before every send, `bind`s after it and
`read`s until the Turn settles. The far end decides what is right: the model
server recorded which replies the client got and what usage it reported, and
the client's own session record (Claude) or rollout name (Codex) names the
session.

    python -m tests.lab.test_evidence [--agent A] [--version V] [--case C]

re-captures fixtures/evidence/ with the same steps (see its README.md).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import trio
from _pytest.mark import ParameterSet

from akk import evidence
from akk.discovery.process import start_ticks
from akk.evidence import Binding, Progress, Snapshot, Tokens, UsageStatus
from akk.qualify import run_files
from akk.qualify.capture import PRESS_QUIET_SECONDS
from akk.qualify.client import AGENTS
from akk.qualify.launcher import LabSession, ScreenTimeout, launch
from akk.qualify.model_server import RecordedRequest
from akk.qualify.scenarios import (
    BASH_MARKER,
    COMPACT_REPLY,
    COMPACT_TASK,
    DEFAULT_REPLY,
    ECHO_REPLY,
    ECHO_TASK,
    ERROR_TASK,
    RUN_TASK,
    SCENARIOS,
    SLOW_SIGNAL,
    SLOW_TASK,
    STEER_REPLY,
    STEER_TASK,
    ApiError,
)
from tests.lab.conftest import LabSpec, ensure_installed
from tests.lab.test_send import HELD_MESSAGE, PERSON_TASK
from tools.lab import clients

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "evidence"

PASTE_SETTLE_SECONDS = 0.2
"""Quiet time between the paste showing and Enter.

Bracketed paste arrives as one event, and in the lab Enter right after it
(0, 30 and 100 ms) submitted the exact text on every pinned version; this
keeps the 150 ms margin the typing guard uses.
"""

POLL_SECONDS = 0.05
BIND_TIMEOUT = 15.0
SETTLE_TIMEOUT = 30.0

MULTILINE_TASK = (
    "lab: multi-line task\nsecond line  with two spaces\n\n    indented fourth line\nlast line"
)


def _long_task() -> str:
    words = " ".join(f"w{i:04d}" for i in range(1000))
    head = f"lab: long task\n{words}"[:4990].rstrip()
    return head + "." * (4995 - len(head)) + "\nend."


LONG_TASK = _long_task()
"""5,000 characters on three lines; the TUIs show it as a collapsed paste."""

Kind = Literal["done", "interrupt", "error", "approve", "reject", "compact", "steer"]


@attrs.frozen
class Step:
    """One request of a case: its text, how the Turn is driven, and the reply it ends with."""

    text: str
    kind: Kind
    reply: str | None = None


@attrs.frozen
class Case:
    """Requests sent in order to one client session, with the scenario each family plays."""

    scenarios: Mapping[str, str]
    steps: tuple[Step, ...]


_ECHO = {"claude": "echo", "codex": "echo"}
_BASH = {"claude": "claude_bash", "codex": "codex_exec"}

CASES: Mapping[str, Case] = {
    "echo": Case(
        _ECHO,
        (
            Step(ECHO_TASK, "done", ECHO_REPLY),
            Step("lab: a second task", "done", DEFAULT_REPLY.text),
        ),
    ),
    "multiline": Case(_ECHO, (Step(MULTILINE_TASK, "done", DEFAULT_REPLY.text),)),
    "long": Case(_ECHO, (Step(LONG_TASK, "done", DEFAULT_REPLY.text),)),
    "interrupt": Case(
        {"claude": "slow", "codex": "slow"},
        (
            Step(SLOW_TASK, "interrupt"),
            Step("lab: after the interrupt", "done", DEFAULT_REPLY.text),
        ),
    ),
    # Claude retries a 400 up to six times; its 403 is sent once (NOTES.md).
    "api_error": Case(
        {"claude": "api_error_once", "codex": "api_error"}, (Step(ERROR_TASK, "error"),)
    ),
    "permission": Case(_BASH, (Step(RUN_TASK, "approve", "The command ran."),)),
    "permission_esc": Case(_BASH, (Step(RUN_TASK, "reject"),)),
    # Claude only, and only the versions that compact mid-Turn (2.1.328 on):
    # python -m tests.lab.test_evidence --case compact --version 2.1.332
    "compact": Case({"claude": "claude_compact"}, (Step(COMPACT_TASK, "compact", COMPACT_REPLY),)),
    # A person sends a message at the pane while the Turn works: it joins the Turn.
    "steered": Case(
        {"claude": "claude_steered", "codex": "codex_steered"},
        (
            Step(STEER_TASK, "steer", STEER_REPLY),
            Step("lab: after the steered task", "done", STEER_REPLY),
        ),
    ),
}

_OUTCOME: Mapping[Kind, str] = {
    "done": "done",
    "approve": "done",
    "error": "failed",
    "interrupt": "cancelled",
    "compact": "done",
    "reject": "cancelled",
    "steer": "done",
}
_PARTIAL_USAGE: frozenset[Kind] = frozenset({"interrupt", "reject", "compact"})
"""Turns whose file records less usage than the model server sent: a reply cut by Esc, and
a compaction's summary request (no record of its own)."""


@attrs.frozen
class TurnRun:
    """What one Step produced: the evidence and the model server's record of the Turn."""

    step: Step
    snapshot: Snapshot
    binding: Binding
    progress: Progress
    requests: tuple[RecordedRequest, ...]
    served: Tokens
    """The usage the model server reported for the Turn's requests, in evidence terms."""


# ---------------------------------------------------------------- driving a client


async def send_request(lab: LabSession, text: str) -> None:
    """Paste `text` as one bracketed paste, wait until it shows and settles, press Enter once."""
    before = await lab.text()
    draft = trio.Path(lab.root / "akk-request.txt")
    await draft.write_text(text)
    await lab.tmux("load-buffer", "-b", "akk", str(draft))
    await lab.tmux("paste-buffer", "-p", "-d", "-b", "akk", "-t", lab.pane)
    await lab.wait_for_screen(lambda screen: screen != before, 10, what="the pasted draft")
    await trio.sleep(PASTE_SETTLE_SECONDS)
    await lab.send_keys("Enter")


async def _drive(lab: LabSession, step: Step) -> None:
    """Do what the Step's kind needs once the request is accepted (interrupt, answer a prompt)."""
    if step.kind == "interrupt":
        await _interrupt(lab)
        await lab.wait_idle(SETTLE_TIMEOUT)
        # 2.1.328 and 0.153.4 leave the held stream open after Esc; end it.
        lab.server.signal(SLOW_SIGNAL)
    elif step.kind == "steer":
        await _steer(lab)
    elif step.kind in ("approve", "reject"):
        prompt = "Do you want to proceed?" if lab.agent == "claude" else "Would you like to run"
        await lab.wait_for_screen(lambda s: prompt in s, 15, what="the permission prompt")
        if step.kind == "reject":
            await lab.send_keys("Escape")
        elif lab.agent == "codex":
            await lab.send_keys("y")
        else:
            await _approve_claude(lab, prompt)


async def _steer(lab: LabSession) -> None:
    """The person sends a message of their own while the first reply is held; once it
    waits for the Turn (or, on Codex, went out at once), the reply goes on."""
    await lab.submit(PERSON_TASK)
    with trio.fail_after(SETTLE_TIMEOUT):
        while not lab.server.count_inputs_containing(PERSON_TASK):
            if HELD_MESSAGE[lab.agent] in await lab.text():
                break
            await trio.sleep(POLL_SECONDS)
    lab.server.signal(SLOW_SIGNAL)


INTERRUPTED = {
    "claude": "Interrupted · What should Claude do instead?",
    "codex": "■ Conversation interrupted",
}
"""The line each client draws under a turn that Escape interrupted."""

INTERRUPT_SHOW_SECONDS = 3.0
"""How long a taken Escape may take to draw its interruption (0.3 s on a quiet machine)."""


async def _interrupt(lab: LabSession) -> None:
    """Press Escape until the client draws its interruption; fail if it never does.

    The model server holds the reply, and the request reaching it is the signal to press:
    0.169.0 draws the streamed first word in place of "esc to interrupt", so the screen
    cannot say when the turn began. An Escape that lands as the turn starts is dropped
    (seen once in a loaded suite: the Turn then ran to `done`), so it is pressed again,
    but only while the interruption has not shown: a second Escape at Codex's idle
    composer would begin editing the previous message.
    """
    sign = INTERRUPTED[lab.agent]
    shown = (await lab.text()).count(sign)  # an earlier turn's interruption is not this one's
    for _attempt in range(3):
        await lab.send_keys("Escape")
        try:
            await lab.wait_for_screen(
                lambda s: s.count(sign) > shown, INTERRUPT_SHOW_SECONDS, what="the interruption"
            )
        except ScreenTimeout:
            continue
        return
    raise AssertionError(f"Escape never interrupted the turn: {lab.server.summary()}")


async def _approve_claude(lab: LabSession, prompt: str) -> None:
    """Press "1" on Claude's permission `prompt` until it leaves; then the tool result must
    reach the model.

    Keys within ~200 ms of a Claude prompt's first paint are dropped (NOTES.md), so
    the key goes to a prompt that has been still for a moment, and again only while
    the prompt still shows 2 s later: a key pressed again once it took would go into
    the composer the prompt leaves behind (a loaded machine takes its time).
    """
    await lab.wait_stable(quiet=PRESS_QUIET_SECONDS)
    for _attempt in range(5):
        await lab.send_keys("1")
        try:
            await lab.wait_for_screen(lambda s: prompt not in s, 2.0, what="the prompt gone")
        except ScreenTimeout:
            continue
        await lab.server.wait_for_request(
            lambda r: BASH_MARKER in r.newest_input, timeout=BIND_TIMEOUT
        )
        return
    raise AssertionError(f"the approval never took: {lab.server.summary()}")


async def _wait_bound(snapshot: Snapshot, digest: str) -> Binding:
    with trio.move_on_after(BIND_TIMEOUT):
        while (binding := await trio.to_thread.run_sync(evidence.bind, snapshot, digest)) is None:
            await trio.sleep(POLL_SECONDS)
        return binding
    raise AssertionError(f"no file showed the request within {BIND_TIMEOUT} s: {snapshot}")


async def _wait_settled(binding: Binding, digest: str) -> Progress:
    progress = None
    with trio.move_on_after(SETTLE_TIMEOUT):
        while (
            progress := await trio.to_thread.run_sync(evidence.read, binding, digest)
        ).outcome is None:
            await trio.sleep(POLL_SECONDS)
        return progress
    raise AssertionError(f"the Turn did not settle within {SETTLE_TIMEOUT} s: {progress}")


async def run_step(lab: LabSession, step: Step) -> TurnRun:
    """Snapshot, send, bind, drive and read one Step until its Turn settles."""
    ticks = start_ticks(lab.agent_pid)
    assert ticks is not None, "the lab's agent is gone"
    snapshot = await trio.to_thread.run_sync(evidence.snapshot, lab.agent, lab.agent_pid, ticks)
    first = len(lab.server.requests)
    await send_request(lab, step.text)

    def is_new(request: RecordedRequest) -> bool:
        return request.index >= first and not request.auxiliary

    await lab.server.wait_for_request(is_new, timeout=BIND_TIMEOUT)
    # The Turn stores both as JSON and may resume from them after a restart.
    stored = Snapshot.from_json(snapshot.to_json())
    binding = await _wait_bound(stored, evidence.request_digest(step.text))
    await _drive(lab, step)
    stored_binding = Binding.from_json(binding.to_json())
    progress = await _wait_settled(stored_binding, evidence.request_digest(step.text))
    if step.kind != "error":  # 2.1.328 leaves "Once fixed, resend" in its composer
        await lab.wait_idle(SETTLE_TIMEOUT)
    requests = tuple(r for r in lab.server.requests[first:] if not r.auxiliary)
    # A held reply the client gave up on before its first byte reached nobody: Codex 0.169.0
    # and later cut it to send the person's message on at once.
    whole = [r for r in requests if lab.server.outcomes.get(r.index) == "completed"]
    served = served_usage(lab.agent, whole if step.kind == "steer" else requests)
    return TurnRun(step, snapshot, binding, progress, requests, served)


# ---------------------------------------------------------------- what the far end says


def served_usage(agent: str, requests: Iterable[RecordedRequest]) -> Tokens:
    """The usage the model server reported for these requests, in evidence terms.

    An error reply reports none. The Responses API has no cache-creation
    count, so Codex's `cache_write` is 0 (NOTES.md "Usage numbers").
    """
    total = Tokens.zero()
    for request in requests:
        if isinstance(request.reply, ApiError):
            continue
        sent = request.usage
        written = sent.cache_creation_input_tokens if agent == "claude" else 0
        total += Tokens(
            sent.input_tokens, sent.output_tokens, sent.cache_read_input_tokens, written
        )
    return total


def session_id_of(lab: LabSession, binding: Binding) -> str:
    """The session id the client itself names: Claude's session record, Codex's rollout name."""
    if lab.agent == "claude":
        record = json.loads(
            (lab.home / ".claude" / "sessions" / f"{lab.agent_pid}.json").read_text()
        )
        assert Path(binding.file.path).stem == record["sessionId"]
        return str(record["sessionId"])
    return Path(binding.file.path).stem[-36:]


def check_turn(lab: LabSession, run: TurnRun) -> None:
    """Assert that the evidence matches what the model server and the client say."""
    progress, step, served = run.progress, run.step, run.served
    assert progress.accepted
    assert progress.end_offset > run.binding.anchor.offset
    assert progress.outcome == _OUTCOME[step.kind], progress
    assert progress.session_id == session_id_of(lab, run.binding)
    assert progress.final_message == step.reply
    assert progress.person_messages == _person_messages(step)
    assert progress.usage is not None
    if step.kind in _PARTIAL_USAGE:
        assert progress.usage_status is UsageStatus.PARTIAL
        assert not (served - progress.usage).negative, (progress.usage, served)
    else:
        assert progress.usage_status is UsageStatus.COMPLETE
        assert progress.usage == served
    if step.kind == "error":
        error = next(r.reply for r in run.requests if isinstance(r.reply, ApiError))
        assert progress.failure is not None
        assert progress.failure.startswith("api_error: ")
        assert error.message in progress.failure
    else:
        assert progress.failure is None


def _person_messages(step: Step) -> int:
    """How many messages the person sent into the Step's Turn at the pane."""
    return 1 if step.kind == "steer" else 0


async def run_case(lab: LabSession, case: str) -> list[TurnRun]:
    """Every Step of `case` on this session, in order."""
    return [await run_step(lab, step) for step in CASES[case].steps]


# ---------------------------------------------------------------- tests


def case_params(case: str, versions: Iterable[str]) -> list[ParameterSet]:
    """(`lab`, case) parameters for the pinned clients of `versions`."""
    wanted = set(versions)
    return [
        pytest.param(
            LabSpec(client, CASES[case].scenarios[client.agent]),
            case,
            id=f"{client.name}-{case}",
            marks=pytest.mark.lab,
        )
        for client in clients.PINNED
        if client.version in wanted
    ]


_LAB_CASES = [
    *case_params("echo", ("2.1.263", "2.1.328", "0.153.4", "0.169.0")),
    *case_params("long", ("2.1.328", "0.169.0")),
    *case_params("interrupt", ("2.1.263", "0.169.0")),
    *case_params("api_error", ("2.1.328", "0.153.4")),
    *case_params("permission", ("2.1.263", "0.169.0")),
]


@pytest.mark.parametrize(("lab", "case"), _LAB_CASES, indirect=["lab"])
async def test_turn_evidence_matches_the_far_end(lab: LabSession, case: str) -> None:
    with trio.fail_after(120):
        runs = await run_case(lab, case)
    for run in runs:
        check_turn(lab, run)
    # Every Turn of a case lands in the one file, each from where the last one ended.
    assert len({run.binding.file for run in runs}) == 1
    offsets = [run.binding.offset for run in runs]
    assert offsets == sorted(offsets)


@pytest.mark.lab
async def test_codex_daemon_threads_bind_by_request_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.169.0's default: the TUI's threads live in a managed app-server daemon."""
    client = clients.get("codex", "0.169.0")
    await ensure_installed(client)
    config = run_files._codex_config

    def with_daemon(*args: Any, **kwargs: Any) -> str:
        return config(*args, **kwargs).replace("daemon_auto_start = false", "")

    monkeypatch.setattr(run_files, "_codex_config", with_daemon)
    with trio.fail_after(120):
        async with launch(client, SCENARIOS["echo"]) as lab:
            runs = await run_case(lab, "echo")
            daemon = json.loads(
                (lab.root / "codex-home" / "app-server-daemon" / "daemon.pid").read_text()
            )
            holders = _holders(Path(runs[0].binding.file.path))
    for run in runs:
        check_turn(lab, run)
    assert holders == {daemon["pid"]}, "the rollout should be held by the daemon, not the TUI"


def _holders(path: Path) -> set[int]:
    found = set()
    for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue  # gone meanwhile, or not ours to read
        for fd in fds:
            try:
                if fd.readlink() == path:
                    found.add(pid)
            except OSError:
                continue
    return found


# ---------------------------------------------------------------- fixture capture

TRIM_CHARS = 200
"""Strings longer than this in records the reader never interprets are cut to this length."""

TRIM_CONTAINER_CHARS = 1000
"""Lists and objects two levels down such records that serialize longer than this become a note."""


def _interpreted(agent: str, data: Mapping[str, Any]) -> bool:
    """Records kept byte for byte in fixtures: the ones evidence (or a person checking it) reads."""
    if agent == "claude":
        return data.get("type") in ("user", "assistant", "system")
    payload = data.get("payload")
    role = payload.get("role") if isinstance(payload, dict) else None
    return data.get("type") == "event_msg" or role in ("user", "assistant")


def _trimmed(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str) and len(value) > TRIM_CHARS:
        return f"{value[:TRIM_CHARS]}...[{len(value) - TRIM_CHARS} chars trimmed]"
    if isinstance(value, dict | list) and depth >= 2:
        size = len(json.dumps(value, ensure_ascii=False))
        if size > TRIM_CONTAINER_CHARS:
            return f"[{type(value).__name__} of {size} chars trimmed]"
    if isinstance(value, dict):
        return {key: _trimmed(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_trimmed(item, depth + 1) for item in value]
    return value


def trim(agent: str, raw: bytes) -> tuple[bytes, dict[int, int]]:
    """The file with bulky records' long strings cut, and old -> new offsets of line starts."""
    out = bytearray()
    offsets: dict[int, int] = {}
    position = 0
    for line in raw.splitlines(keepends=True):
        offsets[position] = len(out)
        position += len(line)
        data = json.loads(line)
        if _interpreted(agent, data) or _trimmed(data) == data:
            out += line
        else:
            out += json.dumps(_trimmed(data), ensure_ascii=False, separators=(",", ":")).encode()
            out += b"\n"
    offsets[position] = len(out)
    return bytes(out), offsets


async def capture(client: clients.Client, case: str) -> None:
    """Run `case` on `client` and write fixtures/evidence/<agent>/<version>/<case>.jsonl/.json."""
    await ensure_installed(client)
    scenario = SCENARIOS[CASES[case].scenarios[client.agent]]
    async with launch(client, scenario) as lab:
        runs = await run_case(lab, case)
        for run in runs:
            check_turn(lab, run)
        files = {run.binding.file for run in runs}
        assert len(files) == 1, files
        raw = await trio.Path(runs[0].binding.file.path).read_bytes()
        session_id = session_id_of(lab, runs[0].binding)
    body, offsets = trim(client.agent, raw)
    label = {
        "agent": client.agent,
        "version": client.version,
        "case": case,
        "scenario": scenario.name,
        "path": runs[0].binding.file.path,
        "session_id": session_id,
        "turns": [_turn_label(run, offsets) for run in runs],
    }
    target = FIXTURES / client.agent / client.version
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{case}.jsonl").write_bytes(body)
    (target / f"{case}.json").write_text(json.dumps(label, indent=1, ensure_ascii=False) + "\n")
    print(f"captured {client.name} {case}: {len(raw)} -> {len(body)} bytes")


def _turn_label(run: TurnRun, offsets: Mapping[int, int]) -> dict[str, Any]:
    """What a fixture test needs to replay this Turn, and what it must find (from the far end)."""
    candidate = next((c for c in run.snapshot.candidates if c.file == run.binding.file), None)
    return {
        "request_text": run.step.text,
        "kind": run.step.kind,
        "new_file": candidate is None,
        "offset": offsets[run.binding.offset],
        "taken_at_ms": run.snapshot.taken_at_ms,
        "outcome": _OUTCOME[run.step.kind],
        "final_message": run.step.reply,
        "person_messages": _person_messages(run.step),
        "failure_contains": next(
            (r.reply.message for r in run.requests if isinstance(r.reply, ApiError)), None
        ),
        "usage": attrs.asdict(run.served),
        "usage_exact": run.step.kind not in _PARTIAL_USAGE,
        "requests": [
            {"reply": repr(r.reply), "usage": attrs.asdict(r.usage)} for r in run.requests
        ],
    }


def main(argv: list[str] | None = None) -> None:
    """Capture fixtures for the chosen clients and cases (default: all)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agent", choices=AGENTS)
    parser.add_argument("--version")
    parser.add_argument("--case", choices=sorted(CASES))
    args = parser.parse_args(argv)
    chosen = [
        (client, case)
        for client in clients.PINNED
        if args.agent in (None, client.agent) and args.version in (None, client.version)
        for case in CASES
        if args.case in (None, case) and client.agent in CASES[case].scenarios
    ]

    async def run_all() -> None:
        for client, case in chosen:
            await capture(client, case)

    trio.run(run_all)


if __name__ == "__main__":
    main()
