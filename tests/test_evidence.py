"""Evidence on the real captured files (fixtures/evidence/), for every pinned version.

Each fixture is a transcript or rollout the real client wrote in the lab, with
a label the capture took from the far end (the model server's replies and
usage, the client's own session id). A Turn is replayed as it happened: the
file as it stood at the snapshot, then the bytes the client appended. The
agent process is simulated only where /proc would name its files
(`locate.owned_files`); the fake-/proc tests at the end check that part.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from _pytest.mark import ParameterSet
from hypothesis import given, settings
from hypothesis import strategies as st

from akk.backends.outcomes import file_outcome
from akk.evidence import (
    Binding,
    EvidenceAmbiguous,
    EvidenceLost,
    EvidenceReason,
    EvidenceTooLarge,
    EvidenceUnavailable,
    Progress,
    Snapshot,
    Tokens,
    UsageStatus,
    bind,
    bind_task,
    claude,
    codex,
    locate,
    read,
    request_digest,
    snapshot,
)
from akk.evidence.model import EvidenceFile, Record
from akk.qualify.scenarios import DEFAULT_REPLY, ECHO_REPLY, SLOW_TASK
from akk.store.turns import TurnState
from tools.lab import clients

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evidence"
PID = 4242
TICKS = 777


@attrs.frozen
class Turn:
    """One labelled Turn of a fixture file."""

    agent: str
    version: str
    case: str
    index: int
    body: bytes
    label: Mapping[str, Any]
    session_id: str

    @property
    def text(self) -> str:
        return str(self.label["request_text"])

    @property
    def digest(self) -> str:
        return request_digest(self.text)

    @property
    def offset(self) -> int:
        return int(self.label["offset"])


def _turns() -> Iterator[Turn]:
    for path in sorted(FIXTURES.glob("*/*/*.json")):
        label = json.loads(path.read_text())
        body = path.with_suffix(".jsonl").read_bytes()
        for index, turn in enumerate(label["turns"]):
            yield Turn(
                label["agent"],
                label["version"],
                label["case"],
                index,
                body,
                turn,
                label["session_id"],
            )


TURNS = list(_turns())


def _params(turns: list[Turn]) -> list[ParameterSet]:
    return [pytest.param(t, id=f"{t.agent}-{t.version}-{t.case}-t{t.index}") for t in turns]


class StandIn:
    """A stand-in for the agent process: the files /proc would show it owning."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        monkeypatch.setattr(locate, "owned_files", self._owned)

    def _owned(self, agent: str, pid: int, ticks: int, proc: object = None) -> tuple[str, ...]:
        if (pid, ticks) != (PID, TICKS):
            raise EvidenceUnavailable(EvidenceReason.PROCESS_GONE, "not the test agent")
        return tuple(self.paths)


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    return StandIn(monkeypatch)


def replay(turn: Turn, where: Path, agent: StandIn, *, written: int | None = None) -> Snapshot:
    """Write the file as it stood before the send, take a snapshot, then append `written` bytes.

    `written` defaults to the rest of the file. Returns the snapshot (with the
    capture's own time, which bounds records of a file new since then).
    """
    path = where / f"{turn.agent}-{turn.case}.jsonl"
    if turn.label["new_file"]:
        assert turn.offset == 0
        agent.paths = []
    else:
        path.write_bytes(turn.body[: turn.offset])
        agent.paths = [str(path)]
    taken = attrs.evolve(snapshot(turn.agent, PID, TICKS), taken_at_ms=turn.label["taken_at_ms"])
    end = len(turn.body) if written is None else turn.offset + written
    with path.open("ab") as handle:
        handle.write(turn.body[turn.offset : end])
    agent.paths = [str(path)]
    return taken


def settled(turn: Turn, where: Path, agent: StandIn) -> tuple[Binding, Progress]:
    binding = bind(replay(turn, where, agent), turn.digest)
    assert binding is not None, "the request was not found after the snapshot"
    return binding, read(binding, turn.digest)


def _usage(label: Mapping[str, Any]) -> Tokens:
    return Tokens(**label["usage"])


# ---------------------------------------------------------------- every fixture Turn


def test_corpus_covers_every_version_and_case() -> None:
    found = {(t.agent, t.version, t.case) for t in TURNS}
    versions = {
        "claude": ("2.1.263", "2.1.266", "2.1.267", "2.1.328"),
        "codex": ("0.153.4", "0.154.0", "0.155.1", "0.169.0"),
    }
    cases = ("echo", "multiline", "long", "interrupt", "api_error", "permission", "permission_esc")
    wanted = {
        (agent, version, case)
        for agent, pinned in versions.items()
        for version in pinned
        for case in cases
    }
    wanted |= {(c.agent, c.version, "steered") for c in clients.PINNED}
    missing = wanted - found
    assert not missing, f"capture them: python -m tests.lab.test_evidence ({sorted(missing)})"


@pytest.mark.parametrize("turn", _params([t for t in TURNS if t.case == "steered"]))
def test_a_message_a_person_steered_in_is_named_in_the_outcome(
    turn: Turn, tmp_path: Path, agent: StandIn
) -> None:
    """The steered Turn (a person sent one message into it) says so in its outcome; the
    next Turn, sent after it, counts none."""
    _, progress = settled(turn, tmp_path, agent)
    found = file_outcome(progress)
    assert found is not None and found.state is TurnState.DONE
    added = 1 if turn.index == 0 else 0
    assert found.changes["person_messages"] == added
    joined = " (a person at the pane added 1 message to this task)"
    assert found.summary == turn.label["final_message"] + (joined if added else "")


@pytest.mark.parametrize("turn", _params(TURNS))
def test_turn_settles_as_the_far_end_saw_it(turn: Turn, tmp_path: Path, agent: StandIn) -> None:
    binding, progress = settled(turn, tmp_path, agent)
    label = turn.label

    assert progress.accepted
    assert progress.session_id == turn.session_id
    assert progress.outcome == label["outcome"]
    assert progress.final_message == label["final_message"]
    # Captured before the count was labelled: no person sent a message into those Turns.
    assert progress.person_messages == label.get("person_messages", 0)
    assert progress.usage is not None
    if label["usage_exact"]:
        assert progress.usage == _usage(label)
        assert progress.usage_status is UsageStatus.COMPLETE
    else:
        assert not (_usage(label) - progress.usage).negative
        assert progress.usage_status is UsageStatus.PARTIAL
    if label["failure_contains"] is None:
        assert progress.failure is None
    else:
        assert progress.failure is not None
        assert progress.failure.startswith("api_error: ")
        assert label["failure_contains"] in progress.failure
    assert Binding.from_json(binding.to_json()) == binding


@pytest.mark.parametrize("turn", _params([t for t in TURNS if t.index == 0]))
def test_only_the_exact_text_is_accepted(turn: Turn, tmp_path: Path, agent: StandIn) -> None:
    others = [turn.text[:-1], turn.text + "x", " " + turn.text, "lab: other"]
    for index, text in enumerate(others):
        where = tmp_path / str(index)
        where.mkdir()
        assert bind(replay(turn, where, agent), request_digest(text)) is None, repr(text[-20:])


@pytest.mark.parametrize("turn", _params([t for t in TURNS if t.label["new_file"]]))
def test_a_new_file_counts_only_records_after_the_snapshot(
    turn: Turn, tmp_path: Path, agent: StandIn
) -> None:
    late = attrs.evolve(
        replay(turn, tmp_path, agent), taken_at_ms=turn.label["taken_at_ms"] + 60_000
    )

    assert bind(late, turn.digest) is None


# ---------------------------------------------------------------- growing and damaged files


@settings(max_examples=120)
@given(turn=st.sampled_from(TURNS), cut=st.floats(0, 1))
def test_every_prefix_agrees_with_the_whole_file(turn: Turn, cut: float) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        agent = StandIn(patch)
        whole, final = settled(turn, Path(tmp) / _mkdir(tmp, "whole"), agent)
        written = round(cut * (len(turn.body) - turn.offset))
        early = replay(turn, Path(tmp) / _mkdir(tmp, "part"), agent, written=written)
        binding = bind(early, turn.digest)
        anchor_end = turn.body.index(b"\n", whole.anchor.offset) + 1
        if turn.offset + written < anchor_end:
            assert binding is None
            return
        assert binding is not None
        assert attrs.evolve(binding, file=whole.file) == whole
        progress = read(binding, turn.digest)
        assert progress.accepted
        assert progress.outcome in (None, final.outcome)
        assert progress.end_offset == turn.body.rindex(b"\n", 0, turn.offset + written) + 1
        if progress.outcome is not None:
            assert attrs.evolve(progress, end_offset=final.end_offset) == final
        if progress.usage is not None and final.usage is not None:
            assert not (final.usage - progress.usage).negative


def _mkdir(parent: str, name: str) -> str:
    os.mkdir(os.path.join(parent, name))
    return name


@settings(max_examples=80)
@given(
    turn=st.sampled_from([t for t in TURNS if t.index == 0]),
    garbage=st.lists(st.binary(max_size=200), max_size=5),
    unfinished=st.booleans(),
)
def test_garbage_and_unfinished_lines_never_accept(
    turn: Turn, garbage: list[bytes], unfinished: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        agent = StandIn(patch)
        whole, _ = settled(turn, Path(tmp) / _mkdir(tmp, "whole"), agent)
        request_line = turn.body[whole.anchor.offset :].split(b"\n", 1)[0]
        taken = replay(turn, Path(tmp) / _mkdir(tmp, "part"), agent, written=0)
        noise = b"\n".join(line.replace(b"\n", b" ") for line in garbage)
        with open(agent.paths[0], "ab") as handle:
            handle.write(noise + (b"\n" + request_line if unfinished else b""))

        assert bind(taken, turn.digest) is None


@settings(max_examples=40)
@given(turn=st.sampled_from(TURNS), tail=st.binary(max_size=300))
def test_an_unfinished_last_line_changes_nothing(turn: Turn, tail: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        agent = StandIn(patch)
        binding, final = settled(turn, Path(tmp), agent)
        with open(binding.file.path, "ab") as handle:
            handle.write(tail.replace(b"\n", b" "))

        assert read(binding, turn.digest) == final


ECHO = [t for t in TURNS if t.case == "echo" and t.index == 1]


@pytest.mark.parametrize("turn", _params(ECHO))
def test_a_snapshot_inside_a_line_binds_after_it(
    turn: Turn, tmp_path: Path, agent: StandIn
) -> None:
    _, final = settled(turn, tmp_path / _mkdir(str(tmp_path), "whole"), agent)
    early = attrs.evolve(turn, label={**turn.label, "offset": turn.offset - 5})

    binding, progress = settled(early, tmp_path, agent)

    assert binding.offset == turn.offset - 5
    assert progress == final


@pytest.mark.parametrize("turn", _params(ECHO))
def test_a_truncated_file_is_lost(turn: Turn, tmp_path: Path, agent: StandIn) -> None:
    binding, _ = settled(turn, tmp_path, agent)
    os.truncate(binding.file.path, binding.offset - 1)

    with pytest.raises(EvidenceLost) as lost:
        read(binding, turn.digest)
    assert lost.value.reason is EvidenceReason.FILE_TRUNCATED


@pytest.mark.parametrize("turn", _params(ECHO))
def test_a_replaced_file_is_lost(turn: Turn, tmp_path: Path, agent: StandIn) -> None:
    binding, _ = settled(turn, tmp_path, agent)
    shutil.copy(binding.file.path, tmp_path / "copy")
    os.replace(tmp_path / "copy", binding.file.path)

    with pytest.raises(EvidenceLost) as lost:
        read(binding, turn.digest)
    assert lost.value.reason is EvidenceReason.FILE_REPLACED


@pytest.mark.parametrize("turn", _params(ECHO))
def test_a_file_rewritten_in_place_is_lost(turn: Turn, tmp_path: Path, agent: StandIn) -> None:
    binding, _ = settled(turn, tmp_path, agent)
    with open(binding.file.path, "r+b") as handle:  # same inode, one byte of the request changed
        at = turn.body.index(turn.text.encode(), binding.anchor.offset)
        handle.seek(at)
        handle.write(b"L")

    with pytest.raises(EvidenceLost) as lost:
        read(binding, turn.digest)
    assert lost.value.reason is EvidenceReason.FILE_REWRITTEN


@pytest.mark.parametrize("turn", _params(ECHO))
def test_a_removed_file_is_lost(turn: Turn, tmp_path: Path, agent: StandIn) -> None:
    binding, _ = settled(turn, tmp_path, agent)
    os.remove(binding.file.path)

    with pytest.raises(EvidenceLost) as lost:
        read(binding, turn.digest)
    assert lost.value.reason is EvidenceReason.FILE_MISSING


@pytest.mark.parametrize("turn", _params(ECHO))
def test_the_text_in_two_files_is_ambiguous(turn: Turn, tmp_path: Path, agent: StandIn) -> None:
    taken = replay(turn, tmp_path, agent)
    twin = tmp_path / "twin.jsonl"
    twin.write_bytes(turn.body)  # a file new since the snapshot, stamped after it
    agent.paths.append(str(twin))

    with pytest.raises(EvidenceAmbiguous) as ambiguous:
        bind(taken, turn.digest)
    assert ambiguous.value.reason is EvidenceReason.SEVERAL_FILES


@pytest.mark.parametrize("turn", _params(ECHO))
def test_the_text_twice_after_the_snapshot_is_ambiguous(
    turn: Turn, tmp_path: Path, agent: StandIn
) -> None:
    binding, _ = settled(turn, tmp_path, agent)
    again = turn.body[binding.anchor.offset :].split(b"\n", 1)[0] + b"\n"
    taken = replay(turn, tmp_path / _mkdir(str(tmp_path), "again"), agent)
    with open(agent.paths[0], "ab") as handle:
        handle.write(again)

    with pytest.raises(EvidenceAmbiguous) as ambiguous:
        bind(taken, turn.digest)
    assert ambiguous.value.reason is EvidenceReason.REPEATED_REQUEST


@pytest.mark.parametrize("turn", _params(ECHO))
def test_a_turn_past_the_read_limit_is_too_large(
    turn: Turn, tmp_path: Path, agent: StandIn
) -> None:
    binding, final = settled(turn, tmp_path, agent)
    anchor_end = turn.body.index(b"\n", binding.anchor.offset) + 1

    with pytest.raises(EvidenceTooLarge) as large:
        read(binding, turn.digest, limit=anchor_end - binding.offset)
    assert large.value.reason is EvidenceReason.READ_LIMIT
    assert read(binding, turn.digest, limit=len(turn.body)) == final


@pytest.mark.parametrize("turn", _params([t for t in ECHO if t.agent == "codex"]))
def test_codex_usage_without_a_baseline_is_unknown(
    turn: Turn, tmp_path: Path, agent: StandIn
) -> None:
    binding, _ = settled(turn, tmp_path, agent)
    progress = read(attrs.evolve(binding, baseline=None), turn.digest)

    assert progress.outcome == "done"
    assert progress.usage is None
    assert progress.usage_status is UsageStatus.UNKNOWN


# ---------------------------------------------------------------- values and records


def test_snapshot_and_binding_survive_json(tmp_path: Path, agent: StandIn) -> None:
    turn = next(t for t in TURNS if t.agent == "codex" and t.case == "echo" and t.index == 1)
    taken = replay(turn, tmp_path, agent)
    binding = bind(taken, turn.digest)
    assert binding is not None and taken.candidates[0].totals is not None

    assert Snapshot.from_json(taken.to_json()) == taken
    assert Binding.from_json(binding.to_json()) == binding
    for broken in ('{"format": 2}', "[]", taken.to_json().replace('"codex"', '"gemini"')):
        with pytest.raises(ValueError):
            Snapshot.from_json(broken)


def _prompt(content: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": content}}


def test_claude_paste_envelope_is_matched_exactly() -> None:
    text = "line one\nline two"
    wrapped = f'\n\n<pasted_content id="1a2b">\n{text}\n</pasted_content id="1a2b">\n'
    other_id = wrapped.replace('<pasted_content id="1a2b"', '<pasted_content id="ffff"', 1)

    def accepts(stored: str, request: str) -> bool:
        return claude.is_request(_prompt(stored), request_digest(request))

    assert accepts(wrapped, text)
    assert accepts(wrapped, text + "\n")  # the client adds that newline only when missing
    assert not accepts(wrapped, text + "\n\n")
    assert not accepts(other_id, text)
    assert not accepts(wrapped, "line one")
    assert not accepts(wrapped[2:], text)


def test_requests_are_named_by_digest_not_text(tmp_path: Path, agent: StandIn) -> None:
    turn = ECHO[0]
    taken = replay(turn, tmp_path, agent)

    with pytest.raises(ValueError):
        bind(taken, turn.text)
    binding = bind(taken, turn.digest)
    assert binding is not None
    with pytest.raises(ValueError):
        read(binding, turn.text)


def test_claude_counts_a_response_split_into_records_once() -> None:
    def reply(uuid: str, parent: str, text: str, stop: str | None, output: int) -> Record:
        usage = {"input_tokens": 3, "output_tokens": output}
        message: dict[str, object] = {"id": "msg_1", "stop_reason": stop, "usage": usage}
        message["content"] = [{"type": "text", "text": text}]
        data = {"type": "assistant", "uuid": uuid, "parentUuid": parent, "message": message}
        return Record(0, data)

    records = [
        Record(0, {**_prompt("go"), "uuid": "u"}),
        reply("a1", "u", "first", None, 1),
        reply("a2", "a1", "second", "end_turn", 7),
        Record(0, {"type": "system", "subtype": "turn_duration", "uuid": "d", "parentUuid": "a2"}),
    ]

    progress = claude.progress(records, 0)

    assert progress.outcome == "done"
    assert progress.final_message == "first\nsecond"
    assert progress.usage == Tokens(input=3, output=7, cache_read=0, cache_write=0)
    assert progress.usage_status is UsageStatus.COMPLETE


def test_claude_a_prompt_with_only_its_attachments_below_it_is_unanswered() -> None:
    """2.1.332's interrupt case as captured, and the same prompt with only the client's own
    `attachment` records below it, as Claude leaves a prompt it took back into its composer
    (Esc before the first reply): nothing the agent wrote stands there."""
    lines = (FIXTURES / "claude" / "2.1.332" / "interrupt.jsonl").read_text().splitlines()
    records = [Record(0, json.loads(line)) for line in lines if line.strip()]
    anchor = next(i for i, r in enumerate(records) if claude.prompt_text(r.data) == SLOW_TASK)
    interrupted = claude.progress(records, anchor)
    assert (interrupted.outcome, interrupted.unanswered) == ("cancelled", False)
    kept = _taken_back(records, anchor)
    assert len(kept) < len(records)
    taken_back = claude.progress(kept, kept.index(records[anchor]))
    assert (taken_back.outcome, taken_back.unanswered) == (None, True)


def test_claude_a_prompt_another_branch_goes_on_without_is_replaced() -> None:
    """A prompt Claude took back into its composer, and a prompt sent after it that goes on
    from the same parent (another branch, as every pinned version writes it), is `replaced`:
    the agent will never answer it, and the Turn settles `withdrawn`. A later prompt still
    below it, or an answered prompt, is not: the one below it was sent into the Turn, which
    goes on with it (a person's message, as Claude's "send now" writes it)."""
    lines = (FIXTURES / "claude" / "2.1.332" / "echo.jsonl").read_text().splitlines()
    records = [Record(0, json.loads(line)) for line in lines if line.strip()]
    first, second = (i for i, r in enumerate(records) if claude.prompt_text(r.data) is not None)
    prompt = records[first].data
    kept = _taken_back(records[:second], first)

    def sent_after(parent: object, before: list[Record]) -> Progress:
        later = Record(0, {**records[second].data, "parentUuid": parent})
        return claude.progress([*before, later], before.index(records[first]))

    replaced = sent_after(prompt["parentUuid"], kept)
    assert (replaced.outcome, replaced.unanswered, replaced.replaced) == (None, True, True)
    found = file_outcome(replaced)
    assert found is not None
    assert (found.state, found.reason) == (TurnState.CANCELLED, "withdrawn")
    attachments = [r.data["uuid"] for r in kept if r.data.get("type") == "attachment"]
    still_below = sent_after(attachments[-1], kept)
    assert (still_below.unanswered, still_below.replaced) == (False, False)
    assert (still_below.outcome, still_below.person_messages) == (None, 1)
    answered = sent_after(prompt["parentUuid"], records[:second])
    assert (answered.outcome, answered.replaced) == ("done", False)


@pytest.mark.parametrize("version", ["2.1.263", "2.1.332"])
def test_claude_a_prompt_sent_into_a_running_turn_goes_on_in_it(version: str) -> None:
    """A prompt written below a Turn that nothing ended yet (Claude's "send now" cuts the
    reply and writes no interruption) is a person's message in it: the Turn ends with the
    reply to it. Below the Turn's end, an interruption or an API error, a prompt is the next
    Turn's, as every captured next task is."""
    lines = (FIXTURES / "claude" / version / "echo.jsonl").read_text().splitlines()
    records = [Record(0, json.loads(line)) for line in lines if line.strip()]
    first, second = (i for i, r in enumerate(records) if claude.prompt_text(r.data) is not None)
    below_end = claude.progress(records, first)
    assert (below_end.outcome, below_end.person_messages) == ("done", 0)
    assert below_end.final_message == ECHO_REPLY
    by_uuid = {r.data.get("uuid"): r.data for r in records}
    end = by_uuid[records[second].data["parentUuid"]]
    reply = by_uuid[end["parentUuid"]]
    while reply.get("type") != "assistant":
        reply = by_uuid[reply["parentUuid"]]
    cut = {**reply, "message": {**reply["message"], "stop_reason": None}}
    # The first Turn as "send now" leaves it: its reply cut, no end; the second prompt and
    # everything of its own Turn below that reply.
    mine = [r for i, r in enumerate(records[:second]) if r.data is not end]
    mine = [Record(0, cut) if r.data is reply else r for r in mine]
    theirs = [Record(0, {**records[second].data, "parentUuid": reply["uuid"]})]
    sent = claude.progress([*mine, *theirs, *records[second + 1 :]], first)
    assert (sent.outcome, sent.person_messages) == ("done", 1)
    assert sent.final_message == DEFAULT_REPLY.text and sent.usage_status is UsageStatus.PARTIAL
    for ended in ({**end}, _interrupt_below(reply)):
        below = [
            *mine,
            Record(0, ended),
            Record(0, {**theirs[0].data, "parentUuid": ended["uuid"]}),
        ]
        assert claude.progress([*below, *records[second + 1 :]], first).person_messages == 0


def _interrupt_below(parent: dict[str, Any]) -> dict[str, Any]:
    """An interruption record as Claude writes one under ``parent`` (Esc)."""
    return {
        "type": "user",
        "uuid": "interrupt-0000",
        "parentUuid": parent["uuid"],
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": "[Request interrupted by user]"}],
        },
    }


def _taken_back(records: list[Record], anchor: int) -> list[Record]:
    """``records`` with the prompt at ``anchor`` left as Claude leaves one it took back into
    its composer: below it, only the chain of the client's own attachment records."""
    below, attached, kept = {records[anchor].data["uuid"]}, {records[anchor].data["uuid"]}, []
    for record in records:
        parent = record.data.get("parentUuid")
        if parent in below:
            below.add(record.data["uuid"])
            if record.data["type"] != "attachment" or parent not in attached:
                continue
            attached.add(record.data["uuid"])
        kept.append(record)
    return kept


# ---------------------------------------------------------------- locating files from /proc


def _process(proc: Path, pid: int, ticks: int, environ: Mapping[str, str]) -> Path:
    base = proc / str(pid)
    (base / "fd").mkdir(parents=True)
    fields = ["S", *["0"] * 18, str(ticks), "0"]
    (base / "stat").write_text(f"{pid} (agent) {' '.join(fields)}\n")
    (base / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in environ.items()))
    return base


def _hold(base: Path, fd: int, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.touch()
    (base / "fd" / str(fd)).symlink_to(target)


def test_claude_files_come_from_its_session_record(tmp_path: Path) -> None:
    proc, config = tmp_path / "proc", tmp_path / "config"
    _process(proc, 10, 500, {"HOME": "/nowhere", "CLAUDE_CONFIG_DIR": str(config)})
    session = "0b851604-a0b6-4328-ad34-eed8e84eac85"
    (config / "sessions").mkdir(parents=True)
    transcript = config / "projects" / "-work" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.touch()
    (config / "projects" / "-work" / "other.jsonl").touch()
    record = {"pid": 10, "procStart": "500", "sessionId": session}
    (config / "sessions" / "10.json").write_text(json.dumps(record))

    assert locate.owned_files("claude", 10, 500, proc) == (str(transcript),)

    (config / "sessions" / "10.json").write_text(json.dumps(record | {"procStart": "499"}))
    with pytest.raises(EvidenceUnavailable) as stale:
        locate.owned_files("claude", 10, 500, proc)
    assert stale.value.reason is EvidenceReason.NO_SESSION_RECORD


def test_codex_files_are_the_rollouts_it_holds(tmp_path: Path) -> None:
    proc, home = tmp_path / "proc", tmp_path / "codex"
    tui = _process(proc, 20, 600, {"HOME": "/nowhere", "CODEX_HOME": str(home)})
    rollout = home / "sessions" / "2026" / "11" / "30" / "rollout-x-01a2.jsonl"
    _hold(tui, 3, home / "thread-writer-locks" / "01a2.lock")
    _hold(tui, 4, rollout)
    _hold(tui, 5, home / "history.jsonl")

    assert locate.owned_files("codex", 20, 600, proc) == (str(rollout),)


def test_a_codex_daemon_client_owns_the_daemons_rollouts(tmp_path: Path) -> None:
    proc, home = tmp_path / "proc", tmp_path / ".codex"
    _process(proc, 30, 700, {"HOME": str(tmp_path)})
    daemon = _process(proc, 31, 701, {"HOME": str(tmp_path)})
    first = home / "sessions" / "2026" / "11" / "30" / "rollout-a.jsonl"
    second = home / "sessions" / "2026" / "12" / "01" / "rollout-b.jsonl"
    _hold(daemon, 7, first)
    _hold(daemon, 8, second)
    pid_file = home / "app-server-daemon" / "daemon.pid"
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text(json.dumps({"pid": 31, "processIdentity": {"startTicks": 701}}))

    assert locate.owned_files("codex", 30, 700, proc) == (str(first), str(second))

    pid_file.write_text(json.dumps({"pid": 31, "processIdentity": {"startTicks": 9}}))
    assert locate.owned_files("codex", 30, 700, proc) == ()


def test_a_pid_another_process_took_lends_the_agent_none_of_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent was process 20 started at 600. Another Codex holding a rollout now has pid
    20 (started at 650), or takes it while the files are read: no files, PROCESS_GONE."""
    proc, home = tmp_path / "proc", tmp_path / "codex"
    other = _process(proc, 20, 650, {"HOME": "/nowhere", "CODEX_HOME": str(home)})
    _hold(other, 4, home / "sessions" / "2026" / "12" / "04" / "rollout-other.jsonl")
    assert locate.owned_files("codex", 20, 650, proc) != ()  # the other process's own files
    with pytest.raises(EvidenceUnavailable) as before:
        locate.owned_files("codex", 20, 600, proc)
    assert before.value.reason is EvidenceReason.PROCESS_GONE
    ticks = iter([650, 651])  # the same at the first look, another process at the last
    monkeypatch.setattr(locate, "alive", lambda pid, started, proc: next(ticks) == started)
    with pytest.raises(EvidenceUnavailable) as during:
        locate.owned_files("codex", 20, 650, proc)
    assert during.value.reason is EvidenceReason.PROCESS_GONE


def test_a_gone_or_unknown_agent_has_no_evidence(tmp_path: Path) -> None:
    with pytest.raises(EvidenceUnavailable) as gone:
        locate.owned_files("codex", 99, 1, tmp_path)
    assert gone.value.reason is EvidenceReason.PROCESS_GONE
    with pytest.raises(EvidenceUnavailable) as unknown:
        snapshot("gemini", os.getpid(), 1)
    assert unknown.value.reason is EvidenceReason.UNSUPPORTED_AGENT


# ---------------------------------------------------------------- a Watch: a person's task


def _is_request(turn: Turn, data: object) -> bool:
    if not isinstance(data, dict):
        return False
    family = claude if turn.agent == "claude" else codex
    return family.is_request(data, turn.digest)


def _request_end(turn: Turn) -> int:
    """Where the line holding the Turn's request ends in its file."""
    start = turn.offset
    while True:
        end = turn.body.index(b"\n", start) + 1
        try:
            data = json.loads(turn.body[start:end])
        except ValueError:
            data = None
        if _is_request(turn, data):
            return end
        start = end


@pytest.mark.parametrize("turn", _params(TURNS))
def test_a_watch_binds_a_task_submitted_as_it_began(
    turn: Turn, tmp_path: Path, agent: StandIn
) -> None:
    """Snapshot before the person's message: the first request after it is the task."""
    _, final = settled(turn, tmp_path / _mkdir(str(tmp_path), "send"), agent)
    found = bind_task(replay(turn, tmp_path / _mkdir(str(tmp_path), "watch"), agent))
    assert found is not None
    binding, digest = found
    assert binding.offset == turn.offset  # read from the snapshot on, as a send is
    progress = read(binding, digest)
    assert attrs.evolve(progress, end_offset=final.end_offset) == final


@pytest.mark.parametrize("turn", _params(TURNS))
def test_a_watch_begun_while_the_task_runs_binds_that_task_not_an_earlier_one(
    turn: Turn, tmp_path: Path, agent: StandIn
) -> None:
    """Snapshot right after the person's message: the newest request is the task, unless
    its turn had already ended there (Claude may write a prompt after its replies)."""
    whole, final = settled(turn, tmp_path / _mkdir(str(tmp_path), "send"), agent)
    cut = _request_end(turn)
    path = tmp_path / "watched.jsonl"
    path.write_bytes(turn.body[:cut])
    ended_at_cut = read(attrs.evolve(whole, file=_identify(path)), turn.digest).outcome
    agent.paths = [str(path)]
    taken = snapshot(turn.agent, PID, TICKS)
    with path.open("ab") as handle:
        handle.write(turn.body[cut:])
    found = bind_task(taken)
    if ended_at_cut is not None:
        # An ended task is never the one a watch begins on: a later request, or none yet.
        assert found is None or found[1] != turn.digest
        return
    assert found is not None
    binding, digest = found
    assert read(binding, digest).outcome == final.outcome
    assert read(binding, digest).final_message == final.final_message


def _identify(path: Path) -> EvidenceFile:
    stat = path.stat()
    return EvidenceFile(str(path), stat.st_dev, stat.st_ino)
