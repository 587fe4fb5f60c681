"""Bounded reading of complete JSONL lines from one exact file (device and inode checked).

The agents append whole lines, but a reader can always meet a line still being
written: only lines ended by a newline count, and a partial last line is left
for the next read. (A start offset inside a line yields that line's tail first;
it is never a JSON object, and the parser skips it.) At most `limit` bytes are
read per call; `Lines.more` says that bytes were left unread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import attrs

from akk.evidence.model import EvidenceFile, EvidenceLost, EvidenceReason, Record

READ_LIMIT = 8 * 1024 * 1024
"""Bytes read per call at most (8 MiB)."""


@attrs.frozen
class Line:
    """One complete line: where it starts in the file and its bytes without the newline."""

    offset: int
    raw: bytes


@attrs.frozen
class Lines:
    """The complete lines read from a start offset.

    `end` is the offset just past the last complete line (the next read starts
    there); `more` is True when the limit left bytes unread.
    """

    lines: tuple[Line, ...]
    end: int
    more: bool


def identify(path: str) -> tuple[EvidenceFile, int] | None:
    """The file at `path` now, with its size; None if there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return EvidenceFile(path, st.st_dev, st.st_ino), st.st_size


def read_lines(
    file: EvidenceFile, start: int, *, stop: int | None = None, limit: int = READ_LIMIT
) -> Lines:
    """Complete lines from `start` (up to `stop`, default the file's end), `limit` bytes at most.

    Raises EvidenceLost if the path is gone, now names another inode, or the
    file is shorter than `start` (truncated).
    """
    try:
        handle = open(file.path, "rb")  # noqa: SIM115 - closed below; fstat needs the handle
    except FileNotFoundError as exc:
        raise EvidenceLost(
            EvidenceReason.FILE_MISSING,
            f"{file.path} is gone; this Turn's evidence is lost, check the pane",
        ) from exc
    with handle:
        st = os.fstat(handle.fileno())
        if (st.st_dev, st.st_ino) != (file.device, file.inode):
            raise EvidenceLost(
                EvidenceReason.FILE_REPLACED,
                f"{file.path} is another file now (inode {st.st_ino}, bound to {file.inode}); "
                "this Turn's evidence is lost, check the pane",
            )
        if st.st_size < start:
            raise EvidenceLost(
                EvidenceReason.FILE_TRUNCATED,
                f"{file.path} is {st.st_size} bytes, shorter than the bound offset {start}; "
                "this Turn's evidence is lost, check the pane",
            )
        end = st.st_size if stop is None else min(stop, st.st_size)
        handle.seek(start)
        data = handle.read(max(0, min(end - start, limit)))
    complete = data[: data.rfind(b"\n") + 1]
    return Lines(
        lines=tuple(_split(start, complete)),
        end=start + len(complete),
        more=start + len(data) < end,
    )


def records(lines: Lines) -> list[Record]:
    """The lines that are JSON objects; anything else (garbage, a line's tail) is skipped."""
    found = []
    for line in lines.lines:
        try:
            data = json.loads(line.raw)
        except ValueError:
            continue
        if isinstance(data, dict):
            found.append(Record(line.offset, data))
    return found


def _split(offset: int, data: bytes) -> Iterator[Line]:
    for raw in data.split(b"\n")[:-1]:
        yield Line(offset, raw)
        offset += len(raw) + 1
