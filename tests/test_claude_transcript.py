"""The headless transcript reader on real transcripts (fixtures/claude_headless/).

Each fixture's sidecar holds what the run knew without parsing the transcript:
the cwd and the project folder Claude chose, the session id and message uuid AKK
chose, the text sent, and what the model server sent back (its usage per request).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from akk.backends.claude_headless import transcript
from akk.evidence import (
    EvidenceAmbiguous,
    EvidenceFile,
    EvidenceLost,
    EvidenceReason,
    EvidenceTooLarge,
    Tokens,
    UsageStatus,
    request_digest,
)
from akk.evidence.files import identify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_headless"
VERSIONS = sorted(p.parent.name for p in FIXTURES.glob("*/echo.json"))

# case -> (outcome, final message or, for a failure, a piece of the failure)
SETTLED: dict[str, tuple[str, str | None]] = {
    "echo": ("done", "Hello from the lab model."),
    "bash_allow": ("done", "The command ran."),
    "bash_deny": ("done", "ok"),
    "ask_multi": ("done", "Thanks, I noted your answers."),
    "ask_three": ("done", "Thanks, I noted your answers."),
    "ask_free": ("done", "ok"),
    "failed": ("failed", "api_error: 403"),
    "interrupt": ("cancelled", None),
}


def _sidecar(version: str, case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / version / f"{case}.json").read_text())
    return data


def _sent(meta: dict[str, Any]) -> tuple[str, str]:
    """The first round's message uuid and the digest of its text."""
    first = meta["rounds"][0]
    return first["message_uuid"], request_digest(first["request_text"])


def _as_session(tmp_path: Path, source: Path, session_id: str, lines: int | None = None) -> Path:
    """The fixture's lines (all, or the first `lines`) under its session's own file name."""
    target = tmp_path / f"{session_id}.jsonl"
    kept = source.read_text().splitlines(keepends=True)
    target.write_text("".join(kept if lines is None else kept[:lines]))
    return target


def _usage(requests: list[dict[str, Any]]) -> Tokens:
    total = Tokens.zero()
    for request in requests:
        counts = request["usage"]
        total += Tokens(
            counts["input_tokens"],
            counts["output_tokens"],
            counts["cache_read_input_tokens"],
            counts["cache_creation_input_tokens"],
        )
    return total


def _session_file(tmp_path: Path, version: str, case: str) -> tuple[EvidenceFile, dict[str, Any]]:
    meta = _sidecar(version, case)
    target = _as_session(tmp_path, FIXTURES / version / f"{case}.jsonl", meta["session_id"])
    found = identify(str(target))
    assert found is not None
    return found[0], meta


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(SETTLED))
def test_a_settled_round_reports_its_outcome_text_and_the_model_servers_usage(
    version: str, case: str, tmp_path: Path
) -> None:
    file, meta = _session_file(tmp_path, version, case)
    (sent,) = meta["rounds"]
    found = transcript.read_round(file, sent["message_uuid"], request_digest(sent["request_text"]))
    outcome, text = SETTLED[case]
    assert (found.accepted, found.outcome, found.verdict) == (True, outcome, outcome)
    if outcome == "done":
        assert found.final_message == text
        assert found.usage == _usage(meta["model_requests"])
        assert found.usage_status is UsageStatus.COMPLETE
    elif outcome == "failed":
        assert text is not None and found.failure is not None and text in found.failure
        assert found.usage == Tokens.zero()
    else:
        # Cut mid-stream: the first streamed counts, a lower bound.
        assert found.usage_status is UsageStatus.PARTIAL
        assert found.final_message is None


@pytest.mark.parametrize("version", VERSIONS)
def test_two_rounds_with_the_same_text_are_told_apart_by_their_message_uuid(
    version: str, tmp_path: Path
) -> None:
    file, meta = _session_file(tmp_path, version, "resume")
    first, second = meta["rounds"]
    assert first["request_text"] == second["request_text"]
    digest = request_digest(first["request_text"])
    rounds = [transcript.read_round(file, r["message_uuid"], digest) for r in (first, second)]
    assert [r.final_message for r in rounds] == ["Hello from the lab model.", "ok"]
    assert [r.usage for r in rounds] == [_usage([m]) for m in meta["model_requests"]]
    # The resumed request carried the first round (user, assistant) before its own message.
    assert [m["messages"] for m in meta["model_requests"]][1] > 2


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_not_in_the_transcript_is_uncertain(version: str, tmp_path: Path) -> None:
    file, meta = _session_file(tmp_path, version, "echo")
    found = transcript.read_round(
        file,
        "00000000-0000-4000-8000-000000000000",
        request_digest(meta["rounds"][0]["request_text"]),
    )
    assert (found.accepted, found.outcome, found.usage, found.verdict) == (
        False,
        None,
        None,
        "uncertain",
    )
    assert found.end_offset == os.stat(file.path).st_size


@pytest.mark.parametrize("version", VERSIONS)
def test_a_round_cut_before_its_tool_result_is_running(version: str, tmp_path: Path) -> None:
    meta = _sidecar(version, "bash_allow")
    source = FIXTURES / version / "bash_allow.jsonl"
    lines = source.read_text().splitlines()
    call = next(
        i
        for i, line in enumerate(lines)
        if json.loads(line).get("type") == "assistant" and '"tool_use"' in line
    )
    target = _as_session(tmp_path, source, meta["session_id"], call + 1)
    # A half-written next line is not read.
    with target.open("a") as handle:
        handle.write('{"type": "user", "message"')
    found = identify(str(target))
    assert found is not None
    read = transcript.read_round(
        found[0],
        *_sent(meta),
    )
    assert (read.accepted, read.outcome, read.verdict) == (True, None, "running")
    assert read.usage_status is UsageStatus.PARTIAL


@pytest.mark.parametrize("version", VERSIONS)
def test_the_uuid_of_another_text_or_session_is_lost_evidence(version: str, tmp_path: Path) -> None:
    file, meta = _session_file(tmp_path, version, "echo")
    with pytest.raises(EvidenceLost) as other_text:
        transcript.read_round(
            file, meta["rounds"][0]["message_uuid"], request_digest("lab: something else")
        )
    assert other_text.value.reason is EvidenceReason.REQUEST_MISMATCH
    # The same lines under another session's file name.
    foreign = identify(str(FIXTURES / version / "echo.jsonl"))
    assert foreign is not None
    with pytest.raises(EvidenceLost):
        transcript.read_round(
            foreign[0],
            *_sent(meta),
        )


def test_a_uuid_twice_is_ambiguous(tmp_path: Path) -> None:
    file, meta = _session_file(tmp_path, "2.1.332", "echo")
    text = Path(file.path).read_text()
    Path(file.path).write_text(text + text)
    again = identify(file.path)
    assert again is not None
    with pytest.raises(EvidenceAmbiguous):
        transcript.read_round(
            again[0],
            *_sent(meta),
        )


def test_a_round_past_the_read_limit_is_too_large(tmp_path: Path) -> None:
    file, meta = _session_file(tmp_path, "2.1.263", "echo")
    with pytest.raises(EvidenceTooLarge):
        transcript.read_round(
            file, "not-there", request_digest(meta["rounds"][0]["request_text"]), limit=64
        )


def test_a_bad_digest_is_refused(tmp_path: Path) -> None:
    file, meta = _session_file(tmp_path, "2.1.263", "echo")
    with pytest.raises(ValueError, match="digest"):
        transcript.read_round(
            file, meta["rounds"][0]["message_uuid"], meta["rounds"][0]["request_text"]
        )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", ["echo", "weird_cwd", "emoji_cwd", "failed"])
def test_the_project_folder_is_the_one_claude_chose(version: str, case: str) -> None:
    meta = _sidecar(version, case)
    assert transcript.project_name(meta["cwd"]) == meta["project_dir"]


def test_a_long_cwd_is_cut_and_hashed() -> None:
    meta = _sidecar("2.1.332", "weird_cwd")
    name = transcript.project_name(meta["cwd"])
    assert len(meta["cwd"]) > transcript.PROJECT_NAME_MAX
    assert (
        name[: transcript.PROJECT_NAME_MAX]
        == "".join(c if c.isascii() and c.isalnum() else "-" for c in meta["cwd"])[
            : transcript.PROJECT_NAME_MAX
        ]
    )
    assert name[transcript.PROJECT_NAME_MAX] == "-"


def test_a_symlinked_cwd_is_named_by_its_real_path(tmp_path: Path) -> None:
    for version in VERSIONS:
        assert _sidecar(version, "symlink_cwd")["project_dir"].endswith("-real")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert transcript.project_name(tmp_path / "link") == transcript.project_name(tmp_path / "real")
    assert transcript.project_name(tmp_path / "link").endswith("-real")


def test_locate_finds_the_session_file_and_only_it(tmp_path: Path) -> None:
    config, cwd = tmp_path / "config", tmp_path / "work"
    cwd.mkdir()
    session = "3f1c2b9e-6a8d-4c1e-9b7a-2d5e8f0a1b3c"
    assert transcript.locate(config, cwd, session) is None
    target = transcript.path(config, cwd, session)
    assert target.parent.name == transcript.project_name(cwd)
    target.parent.mkdir(parents=True)
    # Another session's file in the same folder is never taken for it.
    (target.parent / "0d4e6c1a-2b3f-4a5e-8c7d-9e0f1a2b3c4d.jsonl").write_text("{}\n")
    assert transcript.locate(config, cwd, session) is None
    target.write_text("{}\n")
    found = transcript.locate(config, cwd, session)
    assert found is not None and found.path == str(target)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_start_offset_bounds_what_is_read(version: str, tmp_path: Path) -> None:
    file, meta = _session_file(tmp_path, version, "resume")
    first, second = meta["rounds"]
    digest = request_digest(first["request_text"])
    data = Path(file.path).read_bytes()
    # The size before the second send: just past the first round's final reply.
    reply = data.index(b'"Hello from the lab model."')
    start = data.index(b"\n", reply) + 1
    later = transcript.read_round(file, second["message_uuid"], digest, start=start)
    assert (later.verdict, later.final_message) == ("done", "ok")
    assert later.usage == _usage(meta["model_requests"][1:])
    assert transcript.read_round(file, first["message_uuid"], digest, start=start).verdict == (
        "uncertain"
    )
