"""Prompt fingerprints and the opaque ids derived from them.

A fingerprint binds a prompt region's exact cells (characters, widths and every
style attribute, unredacted) to the profile that read it and the terminal
process it was seen on. The encoding is unambiguous: every variable field is
length-prefixed and every count is explicit, so two different inputs can never
serialise to the same bytes. Where the region sits on the screen is deliberately
not hashed: the same prompt redrawn one row lower is the same prompt, while its
size (rows, and cells per row) is.

Opaque ids are HMAC-SHA256 of a fingerprint under a server-held secret, so they
change whenever the fingerprint does and cannot be guessed or linked to the
screen without the secret.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import struct

from akk.screen.grid import Cell, Grid
from akk.screen.region import Region

_FINGERPRINT_DOMAIN = b"akk.fingerprint.v1"
_MIN_SECRET_BYTES = 32
_ID_BYTES = 16


def _field(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


@functools.lru_cache(maxsize=65536)
def _encode_cell(cell: Cell) -> bytes:
    flags = (
        cell.bold,
        cell.dim,
        cell.italic,
        cell.underline,
        cell.blink,
        cell.reverse,
        cell.hidden,
        cell.strikethrough,
    )
    bits = sum(1 << bit for bit, on in enumerate(flags) if on)
    return b"".join(
        (
            _field(cell.char.encode()),
            _field(cell.fg.encode()),
            _field(cell.bg.encode()),
            struct.pack(">BB", cell.width, bits),
        )
    )


def fingerprint(grid: Grid, region: Region, *, profile_id: str, terminal_identity: str) -> bytes:
    """SHA-256 over `region`'s exact cells, `profile_id` and `terminal_identity` (32 bytes).

    Cells outside `region` never affect it; any change to a cell inside it (its
    character or any style attribute) does, as does a different profile id or
    terminal identity. Raises ValueError if `region` leaves the grid.
    """
    cells = grid.region_cells(region)
    digest = hashlib.sha256()
    digest.update(_field(_FINGERPRINT_DOMAIN))
    digest.update(_field(profile_id.encode()))
    digest.update(_field(terminal_identity.encode()))
    digest.update(struct.pack(">II", region.height, region.width))
    for row in cells:
        digest.update(b"".join(map(_encode_cell, row)))
    return digest.digest()


class IdMinter:
    """Derives opaque, unguessable ids from fingerprints with a server-held secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < _MIN_SECRET_BYTES:
            raise ValueError(
                f"id secret has {len(secret)} bytes, needs at least {_MIN_SECRET_BYTES}; "
                "generate one with secrets.token_bytes(32)"
            )
        self._secret = bytes(secret)

    def __repr__(self) -> str:
        return "IdMinter(<secret>)"

    def _mint(self, prefix: str, kind: bytes, fp: bytes, *indexes: int) -> str:
        if any(index < 0 for index in indexes):
            raise ValueError(f"indexes must be >= 0, got {indexes}")
        message = _field(kind) + _field(fp) + b"".join(struct.pack(">Q", i) for i in indexes)
        mac = hmac.new(self._secret, message, hashlib.sha256).digest()[:_ID_BYTES]
        return prefix + base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def interaction_id(self, fp: bytes) -> str:
        """The id of the interaction whose prompt has fingerprint `fp` ("int_...")."""
        return self._mint("int_", b"interaction", fp)

    def question_id(self, fp: bytes, index: int) -> str:
        """The id of question `index` (zero-based) of that prompt ("q_...")."""
        return self._mint("q_", b"question", fp, index)

    def option_id(self, fp: bytes, question_index: int, option_index: int) -> str:
        """The id of option `option_index` of question `question_index` ("opt_...")."""
        return self._mint("opt_", b"option", fp, question_index, option_index)
