"""The tool calls an agent's own file records as pending: what a permission prompt may ask about.

A permission prompt on screen can hide the end of its command (a Claude Bash
prompt without its last gutter row reads exactly like one for a shorter
command). The agent's transcript or rollout records every tool call with its
whole input, and its result once it has one: a call without a result is
pending. Which file: the one a Turn bound before its send (`Binding`), from its
binding offset; without one (a Watch not yet bound, evidence unknown) the one
file the process owns now, proven from the process as `locate` does. Only the
last `PENDING_WINDOW` bytes are read.
"""

from __future__ import annotations

import functools
import os

from akk.evidence import claude, codex, files, locate
from akk.evidence.model import (
    EvidenceAmbiguous,
    EvidenceFile,
    EvidenceLost,
    EvidenceReason,
    EvidenceUnavailable,
    PendingCall,
    agent_family,
)

PENDING_WINDOW = 1024 * 1024
"""Bytes read at most, back from the end of the file (1 MiB)."""


def open_calls(agent: str, file: EvidenceFile, start: int = 0) -> list[PendingCall]:
    """The calls recorded in `file` from `start` on that no result answers yet, in file order.

    Reads at most the last `PENDING_WINDOW` bytes (a call older than that is
    not seen). Raises EvidenceLost if the file is gone, replaced or shorter
    than `start`; EvidenceUnavailable for an agent without a reader.

    A prompt on screen is looked at every 30 ms while an answer's keys are proven,
    and parsing a whole window takes ~100 ms: a file unchanged since it was last
    read (the same inode, size and modification time) gives the calls read then.
    """
    family = agent_family(agent)
    try:
        st = os.stat(file.path)
    except FileNotFoundError as exc:
        raise EvidenceLost(EvidenceReason.FILE_MISSING, f"{file.path} is gone") from exc
    return list(_calls(family, file, start, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)))


@functools.lru_cache(maxsize=64)
def _calls(
    family: str, file: EvidenceFile, start: int, stat: tuple[int, int, int, int]
) -> tuple[PendingCall, ...]:
    """`open_calls` of `file` as `stat` (device, inode, size, modification time) found it.

    `read_lines` raises if the path names another inode than `file`'s by now (an
    exception is never cached), so a key only ever holds what `file` itself showed.
    """
    size = stat[2]
    lines = files.read_lines(file, max(start, size - PENDING_WINDOW), stop=size)
    records = files.records(lines)
    found = claude.open_calls(records) if family == "claude" else codex.open_calls(records)
    return tuple(found)


def owned_file(agent: str, pid: int, ticks: int) -> EvidenceFile:
    """The one transcript or rollout file process `pid`, started at `ticks`, owns now.

    Raises EvidenceUnavailable if its files cannot be determined or it owns
    none yet or is no supported agent, EvidenceAmbiguous if it owns several (e.g. Codex's managed
    daemon, which holds every thread it serves).
    """
    paths = locate.owned_files(agent_family(agent), pid, ticks)
    found = [identified[0] for path in paths if (identified := files.identify(path))]
    if not found:
        raise EvidenceUnavailable(
            EvidenceReason.NO_SESSION_RECORD, f"process {pid} owns no transcript or rollout yet"
        )
    if len(found) > 1:
        raise EvidenceAmbiguous(
            EvidenceReason.SEVERAL_FILES,
            f"process {pid} owns {len(found)} files; its pending call is unknown",
        )
    return found[0]
