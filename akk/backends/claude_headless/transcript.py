"""A headless Claude session's own transcript: where it is, and what it proves about one round.

Pure functions over the file (reads are bounded, nothing is written); the record
reading is the terminal route's (`akk.evidence.files`, `akk.evidence.claude`).
Proven on every pinned Claude, 2.1.263 to 2.1.332 (fixtures of the oldest and newest in
fixtures/claude_headless/; docs/claude_headless.md):

- The transcript is ``<config>/projects/<project>/<session_id>.jsonl`` (`path`).
  ``<project>`` is the cwd's real path (a symlink resolved) with every UTF-16
  code unit that is not an ASCII letter or digit turned into ``-`` (so ``é`` is
  one ``-``, an emoji two); a name over 200 characters is cut to 200 and followed
  by ``-`` and the base-36 absolute value of the path's 32-bit string hash
  (Java's ``hashCode``). The file appears with the first round; ``--resume``
  appends to the same file.
- A round is named by the ``uuid`` AKK gives its user message: every pinned
  version stores it as that user record's ``uuid``, so two rounds with the same
  text are never confused. The record's text must also have the request's digest.
- A round ends with a final reply (no ``turn_duration`` record is written), an
  API-error reply, or ``[Request interrupted by user]`` (`claude.progress`).

After a restart AKK reconciles from here, read-only: a settled round records its
real outcome; one that may have been sent but is not in the transcript is
``uncertain`` (`Round.verdict`). Nothing is ever sent again.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import attrs

from akk.evidence import claude, files
from akk.evidence.files import READ_LIMIT
from akk.evidence.model import (
    EvidenceAmbiguous,
    EvidenceFile,
    EvidenceLost,
    EvidenceReason,
    EvidenceTooLarge,
    Outcome,
    Tokens,
    UsageStatus,
    check_digest,
)

PROJECT_NAME_MAX = 200
"""Longest project folder name before Claude cuts it and appends the path's hash."""

_UNSAFE = re.compile(r"[^a-zA-Z0-9]")

Verdict = Literal["done", "failed", "cancelled", "running", "uncertain"]


@attrs.frozen
class Round:
    """What the transcript proves about one round (one user message and what it caused).

    `accepted`: the user record with the round's uuid and text is there. `outcome`
    is None while the round runs (or was never accepted). `final_message` is the
    last reply's text, raw (the caller bounds and redacts it); `failure` a short
    reason such as ``api_error: 403 ...``; `usage` the round's own counts (None
    if not accepted). `end_offset` is where the complete lines read end: it grows
    while Claude writes.
    """

    accepted: bool
    outcome: Outcome | None
    final_message: str | None
    failure: str | None
    usage: Tokens | None
    usage_status: UsageStatus
    end_offset: int

    @property
    def verdict(self) -> Verdict:
        """What reconciliation records: the real outcome, ``running``, or ``uncertain``.

        ``uncertain`` is a round whose message is not in the transcript: it may
        have been written to a process that died before storing it. ``running``
        settles only while a process still writes the session; once none does,
        the caller records what its process facts prove.
        """
        if not self.accepted:
            return "uncertain"
        return "running" if self.outcome is None else self.outcome


def project_name(cwd: str | os.PathLike[str]) -> str:
    """The folder under ``<config>/projects`` that holds the transcripts of sessions run in `cwd`.

    `cwd` is taken as Claude takes it: its real path.
    """
    real = os.path.realpath(cwd)
    units = real.encode("utf-16-le")
    # JavaScript replaces per UTF-16 code unit: an astral character becomes two dashes.
    name = "".join(
        "-" if _UNSAFE.match(chr(unit)) else chr(unit)
        for unit in (int.from_bytes(units[i : i + 2], "little") for i in range(0, len(units), 2))
    )
    if len(name) <= PROJECT_NAME_MAX:
        return name
    return f"{name[:PROJECT_NAME_MAX]}-{_base36(abs(_string_hash(real)))}"


def path(config_dir: str | os.PathLike[str], cwd: str | os.PathLike[str], session_id: str) -> Path:
    """Where the transcript of `session_id`, run in `cwd` under `config_dir`, is written."""
    return Path(config_dir) / "projects" / project_name(cwd) / f"{session_id}.jsonl"


def locate(
    config_dir: str | os.PathLike[str], cwd: str | os.PathLike[str], session_id: str
) -> EvidenceFile | None:
    """The transcript file (by device and inode, as read next) now; None before it exists."""
    found = files.identify(str(path(config_dir, cwd, session_id)))
    return None if found is None else found[0]


def read_round(
    file: EvidenceFile,
    message_uuid: str,
    request_sha256: str,
    *,
    start: int = 0,
    limit: int = READ_LIMIT,
) -> Round:
    """What `file`, from `start` on, proves about the round whose user message is `message_uuid`.

    `request_sha256` is `request_digest` of the exact text sent; `start` is an
    offset at or before the round's first record (e.g. the file's size before the
    send). Raises EvidenceAmbiguous if two records carry the uuid; EvidenceLost if
    the file is gone or replaced, or the uuid names a record that is not this
    request in this session; EvidenceTooLarge if the round's records run past
    `limit` bytes before they settle it; ValueError if `request_sha256` is not a
    digest.
    """
    check_digest(request_sha256)
    lines = files.read_lines(file, start, limit=limit)
    records = files.records(lines)
    hits = [i for i, record in enumerate(records) if record.data.get("uuid") == message_uuid]
    if len(hits) > 1:
        raise EvidenceAmbiguous(
            EvidenceReason.REPEATED_REQUEST,
            f"{len(hits)} records of {file.path} carry message uuid {message_uuid}; "
            "this round's evidence is unknown",
        )
    if not hits:
        if lines.more:
            raise _too_large(file, limit)
        return Round(False, None, None, None, None, UsageStatus.UNKNOWN, lines.end)
    hit = records[hits[0]]
    if (
        not claude.is_request(hit.data, request_sha256)
        or claude.session_id(hit.data) != Path(file.path).stem
    ):
        raise EvidenceLost(
            EvidenceReason.REQUEST_MISMATCH,
            f"the record with message uuid {message_uuid} in {file.path} is not this request "
            "of this session; this round's evidence is lost, check the session",
        )
    progress = claude.progress(records, hits[0], headless=True)
    if progress.outcome is None and lines.more:
        raise _too_large(file, limit)
    return Round(
        accepted=True,
        outcome=progress.outcome,
        final_message=progress.final_message,
        failure=progress.failure,
        usage=progress.usage,
        usage_status=progress.usage_status,
        end_offset=lines.end,
    )


def _too_large(file: EvidenceFile, limit: int) -> EvidenceTooLarge:
    return EvidenceTooLarge(
        EvidenceReason.READ_LIMIT,
        f"this round's records in {file.path} run past {limit} bytes before they settle it; "
        "read it from a later start offset, or check the session",
    )


def _string_hash(text: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, as a signed 32-bit integer."""
    units = text.encode("utf-16-le")
    value = 0
    for i in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[i : i + 2], "little")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if number == 0:
            return text
