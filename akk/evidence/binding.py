"""Bind a Turn to the file its agent process writes, and read what happened there.

Three steps, all synchronous (run them in a worker thread):

1. `snapshot` before the send: the files the process owns (`locate`), each
   with its device, inode and size (Codex: and the running token total).
2. `bind` after the send: the one owned file in which a user record holding
   exactly the request text appears after the snapshot's size. A file that was
   not a candidate (created or switched to after the snapshot) is read from 0,
   and only records stamped at or after the snapshot count there.
3. `read`, as often as needed: everything from the binding offset, checked to
   be the same file (device, inode, not shorter) with the accepted line intact.

Reads see complete lines only and stop after `files.READ_LIMIT` bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import attrs

from akk.evidence import claude, codex, files, locate
from akk.evidence.files import READ_LIMIT, Lines
from akk.evidence.model import (
    Agent,
    Anchor,
    Binding,
    Candidate,
    EvidenceAmbiguous,
    EvidenceFile,
    EvidenceLost,
    EvidenceReason,
    EvidenceTooLarge,
    EvidenceUnavailable,
    Progress,
    Record,
    Snapshot,
    Tokens,
    UsageStatus,
    agent_family,
    check_digest,
    request_digest,
)

SESSION_META_LIMIT = 1024 * 1024
"""Bytes read at most to find a rollout's first line (Codex's ``session_meta``)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def snapshot(agent: str, pid: int, ticks: int) -> Snapshot:
    """Everything needed before a send, proven from process `pid` started at `ticks`.

    Raises EvidenceUnavailable if the agent is not supported or the process's
    files cannot be determined (see `locate.owned_files`).
    """
    family = agent_family(agent)
    taken_at_ms = time.time_ns() // 1_000_000
    candidates = []
    for path in locate.owned_files(family, pid, ticks):
        found = files.identify(path)
        if found is None:
            continue
        file, size = found
        totals = _running_total(file, size) if family == "codex" else None
        candidates.append(Candidate(file, size, totals))
    return Snapshot(family, pid, ticks, taken_at_ms, tuple(candidates))


def bind(snapshot: Snapshot, request_sha256: str) -> Binding | None:
    """The file and offset where this Turn's records start; None if no file shows the request yet.

    `request_sha256` is `request_digest(request_text)`. Looks at the snapshot's
    candidates and, while the process still runs, the files it owns now.
    Raises EvidenceAmbiguous if more than one file, or one file more than once,
    shows the request; EvidenceLost if a candidate shrank; EvidenceTooLarge if
    the request is not within the read limit of a new file; ValueError if
    `request_sha256` is not a digest.
    """
    check_digest(request_sha256)
    bindings = []
    for file, candidate in _files_now(snapshot):
        binding = _bind_file(snapshot, file, candidate, request_sha256)
        if binding is not None:
            bindings.append(binding)
    if len(bindings) > 1:
        raise EvidenceAmbiguous(
            EvidenceReason.SEVERAL_FILES,
            f"the request appears in {len(bindings)} files "
            f"({', '.join(b.file.path for b in bindings)}); this Turn's evidence is unknown",
        )
    return bindings[0] if bindings else None


def bind_task(snapshot: Snapshot) -> tuple[Binding, str] | None:
    """For a Watch: the task a person started, as a binding and its request's digest.

    In each candidate file, the newest user request before the snapshot's size
    (the task the agent works on as the watch begins, within the read limit);
    else the first one written after it (a task submitted meanwhile). None if
    no file shows a request yet. Raises EvidenceAmbiguous if more than one file
    shows one, EvidenceLost if a candidate shrank.
    """
    found = []
    for file, candidate in _files_now(snapshot):
        task = _running_task(snapshot.agent, file, candidate) if candidate else None
        if task is None:
            task = _new_task(snapshot, file, candidate)
        if task is not None:
            found.append(task)
    if len(found) > 1:
        raise EvidenceAmbiguous(
            EvidenceReason.SEVERAL_FILES,
            f"{len(found)} files show a task ({', '.join(b.file.path for b, _ in found)}); "
            "this watch's evidence is unknown",
        )
    return found[0] if found else None


def _files_now(snapshot: Snapshot) -> list[tuple[EvidenceFile, Candidate | None]]:
    """The snapshot's candidates and, while the process still runs, the files it owns now,
    each with its candidate (None for a file that was not one)."""
    known = {(c.file.device, c.file.inode): c for c in snapshot.candidates}
    paths = {c.file.path for c in snapshot.candidates}
    # A process that exited meanwhile owns nothing now; its candidates still count.
    with contextlib.suppress(EvidenceUnavailable):
        paths.update(locate.owned_files(snapshot.agent, snapshot.pid, snapshot.start_ticks))
    found = []
    for path in sorted(paths):
        identified = files.identify(path)
        if identified is not None:
            file, _ = identified
            found.append((file, known.get((file.device, file.inode))))
    return found


def newest_task(agent: str, path: str) -> tuple[Binding, str] | None:
    """For a Watch by the agent's own file: the newest request in the file at ``path`` now.

    Bound as `bind_task` binds a running task, from the start of the read window
    (the file's last `READ_LIMIT` bytes), with the digest of the request's text.
    None if the window shows no request. Whether its turn already ended is
    `read`'s to say. Raises EvidenceUnavailable for an agent without a reader,
    EvidenceLost if there is no file at ``path``.
    """
    family = agent_family(agent)
    found = files.identify(path)
    if found is None:
        raise EvidenceLost(EvidenceReason.FILE_MISSING, f"{path} is gone")
    file, size = found
    newest = _newest(family, file, size)
    return None if newest is None else newest[:2]


def _newest(
    agent: Agent, file: EvidenceFile, size: int
) -> tuple[Binding, str, list[Record], int] | None:
    """The newest request before ``size`` (within the read limit): its binding and digest,
    with the records read and its index among them."""
    window = max(0, size - READ_LIMIT)
    lines = files.read_lines(file, window, stop=size)
    records = files.records(lines)
    index = next(
        (i for i in range(len(records) - 1, -1, -1) if _prompt(agent, records[i]) is not None),
        None,
    )
    if index is None:
        return None
    # Codex counts tokens as a running total: the one before the request is its baseline.
    baseline = None
    if agent == "codex":
        baseline = (
            _total_before(records, index) if window == 0 else codex.last_total(records[:index])
        )
    binding, digest = _task_binding(
        agent, file, records, index, lines, offset=window, baseline=baseline
    )
    return binding, digest, records, index


def _running_task(
    agent: Agent, file: EvidenceFile, candidate: Candidate
) -> tuple[Binding, str] | None:
    """The newest request before the candidate's size, if its turn had not ended there.

    A request whose turn already ended is an earlier task: the running one is
    not written yet (Claude may write a prompt after its first replies).
    """
    newest = _newest(agent, file, candidate.size)
    if newest is None:
        return None
    binding, digest, records, index = newest
    ended = (
        claude.progress(records, index)
        if agent == "claude"
        else codex.progress(records, index, binding.baseline)
    )
    return None if ended.outcome is not None else (binding, digest)


def _new_task(
    snapshot: Snapshot, file: EvidenceFile, candidate: Candidate | None
) -> tuple[Binding, str] | None:
    """The task in a file the snapshot did not show growing: the first request after its size.

    A file that was no candidate (the agent had not written it yet) is read
    whole: the newest request stamped before the snapshot is the running task;
    without one, the first stamped at or after it.
    """
    start = candidate.size if candidate is not None else 0
    lines = files.read_lines(file, start)
    records = files.records(lines)
    requests = [i for i, record in enumerate(records) if _prompt(snapshot.agent, record)]
    if candidate is None:
        earlier = [i for i in requests if _stamped_ms(records[i]) < snapshot.taken_at_ms]
        requests = earlier[-1:] or requests
    if not requests:
        return None
    index = requests[0]
    baseline = None
    if snapshot.agent == "codex":
        baseline = candidate.totals if candidate is not None else _total_before(records, index)
    return _task_binding(
        snapshot.agent, file, records, index, lines, offset=start, baseline=baseline
    )


def _task_binding(
    agent: Agent,
    file: EvidenceFile,
    records: Sequence[Record],
    index: int,
    lines: Lines,
    *,
    offset: int,
    baseline: Tokens | None,
) -> tuple[Binding, str]:
    """The binding of ``records[index]``, read from ``offset`` (where ``records`` start).

    Reading starts before the request, as a send's binding does: Claude may
    write a turn's records ahead of its prompt.
    """
    hit = records[index]
    raw = next(line.raw for line in lines.lines if line.offset == hit.offset)
    text = _prompt(agent, hit)
    assert text is not None
    if agent == "claude":
        session_id = claude.session_id(hit.data)
    else:
        session_id = _thread_id(file, records if offset == 0 else ())
    binding = Binding(
        agent=agent,
        file=file,
        offset=offset,
        anchor=Anchor(hit.offset, _digest(raw)),
        session_id=session_id,
        baseline=baseline,
    )
    return binding, request_digest(text)


def read(
    binding: Binding, request_sha256: str, *, limit: int = READ_LIMIT, headless: bool = False
) -> Progress:
    """What the records from the binding offset prove about this Turn now.

    `request_sha256` is `request_digest(request_text)`. ``headless``: a Claude
    round also ends at its final reply, as a ``claude -p`` run writes no
    ``turn_duration`` (`claude.progress`). Raises EvidenceLost if the file was
    replaced, truncated, removed or rewritten at the accepted line;
    EvidenceTooLarge if the Turn's records run past `limit` bytes before they
    settle it; ValueError if `request_sha256` is not a digest.
    """
    check_digest(request_sha256)
    lines = files.read_lines(binding.file, binding.offset, limit=limit)
    anchor_line = next((line for line in lines.lines if line.offset == binding.anchor.offset), None)
    if anchor_line is None and lines.more:
        raise _too_large(binding.file, limit)
    if anchor_line is None or _digest(anchor_line.raw) != binding.anchor.digest:
        raise EvidenceLost(
            EvidenceReason.FILE_REWRITTEN,
            f"{binding.file.path} no longer holds the accepted record at offset "
            f"{binding.anchor.offset}; this Turn's evidence is lost, check the pane",
        )
    records = files.records(lines)
    anchor = next(i for i, r in enumerate(records) if r.offset == binding.anchor.offset)
    if not _is_request(binding.agent, records[anchor], request_sha256):
        return Progress(
            accepted=False,
            session_id=binding.session_id,
            outcome=None,
            final_message=None,
            failure=None,
            usage=None,
            usage_status=UsageStatus.UNKNOWN,
            end_offset=lines.end,
        )
    if binding.agent == "claude":
        progress = claude.progress(records, anchor, headless=headless)
    else:
        progress = codex.progress(records, anchor, binding.baseline)
    if progress.outcome is None and lines.more:
        raise _too_large(binding.file, limit)
    return attrs.evolve(progress, session_id=binding.session_id, end_offset=lines.end)


def _bind_file(
    snapshot: Snapshot, file: EvidenceFile, candidate: Candidate | None, request_sha256: str
) -> Binding | None:
    start = candidate.size if candidate is not None else 0
    lines = files.read_lines(file, start)
    records = files.records(lines)
    hits = [
        index
        for index, record in enumerate(records)
        if _is_request(snapshot.agent, record, request_sha256)
        and (candidate is not None or _stamped_ms(record) >= snapshot.taken_at_ms)
    ]
    if not hits:
        if lines.more:
            raise _too_large(file, READ_LIMIT)
        return None
    if len(hits) > 1:
        raise EvidenceAmbiguous(
            EvidenceReason.REPEATED_REQUEST,
            f"the request appears {len(hits)} times in {file.path} after the snapshot; "
            "this Turn's evidence is unknown",
        )
    hit = records[hits[0]]
    raw = next(line.raw for line in lines.lines if line.offset == hit.offset)
    if snapshot.agent == "claude":
        session_id = claude.session_id(hit.data)
        baseline = None
    else:
        session_id = _thread_id(file, records if start == 0 else ())
        baseline = candidate.totals if candidate is not None else _total_before(records, hits[0])
    return Binding(
        agent=snapshot.agent,
        file=file,
        offset=start,
        anchor=Anchor(hit.offset, _digest(raw)),
        session_id=session_id,
        baseline=baseline,
    )


def _running_total(file: EvidenceFile, size: int) -> Tokens | None:
    """Codex's running total at `size`: zero before the first count, None beyond the limit."""
    window = max(0, size - READ_LIMIT)
    records = files.records(files.read_lines(file, window, stop=size))
    total = codex.last_total(records)
    if total is None and window == 0:
        return Tokens.zero()
    return total


def _total_before(records: Sequence[Record], index: int) -> Tokens:
    total = codex.last_total(records[:index])
    return Tokens.zero() if total is None else total


def _thread_id(file: EvidenceFile, records: Sequence[Record]) -> str | None:
    if not records:
        records = files.records(files.read_lines(file, 0, limit=SESSION_META_LIMIT))
    return codex.session_id(records[0].data) if records else None


def _prompt(agent: Agent, record: Record) -> str | None:
    """The text of a user request record as stored; None for any other record."""
    return claude.prompt_text(record.data) if agent == "claude" else codex.prompt_text(record.data)


def _is_request(agent: Agent, record: Record, request_sha256: str) -> bool:
    if agent == "claude":
        return claude.is_request(record.data, request_sha256)
    return codex.is_request(record.data, request_sha256)


def _stamped_ms(record: Record) -> int:
    """The record's ISO ``timestamp`` in Unix milliseconds; -1 if it has none."""
    stamp = record.data.get("timestamp")
    if not isinstance(stamp, str):
        return -1
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return -1
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _too_large(file: EvidenceFile, limit: int) -> EvidenceTooLarge:
    return EvidenceTooLarge(
        EvidenceReason.READ_LIMIT,
        f"this Turn's records in {file.path} run past {limit} bytes before they settle it; "
        "its outcome and usage are unknown, check the pane",
    )
