"""A small tmpfs the test mounts (and always unmounts), and a filler file that fills it.

Mounting needs root (the lab and CI run as root); without it the test fails
and says so, rather than skip a full-disk check silently.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

FILLER = "filler"


@contextmanager
def small_filesystem(where: Path, size: str = "4m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``where`` (created, mode 0700) for the block; unmount after.

    The unmount is lazy: whatever still holds a file open there (a client, a
    leaked descriptor) cannot keep the mount alive past the test.
    """
    where.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True, capture_output=True)


def fill(filesystem: Path) -> Path:
    """Write a filler file at the root of ``filesystem`` until no page is left; return its path."""
    path = filesystem / FILLER
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for block in (b"\0" * (1 << 20), b"\0" * 4096):  # big blocks, then the last pages
            with suppress(OSError):
                while True:
                    os.write(fd, block)
    finally:
        os.close(fd)
    return path
