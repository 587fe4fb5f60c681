"""Prompt fingerprints and the opaque ids derived from them.

A fingerprint binds a prompt region's exact cells (characters, widths and every
style attribute, unredacted) to the profile that read it, the terminal
process it was seen on and, for a permission, the pending tool call the agent's
own file records for it (its id and input digest): an approval offered for
one call can never land on a prompt for another that looks the same. The
encoding is unambiguous: every variable field is length-prefixed and every
count is explicit, so two different inputs can never serialise to the same
bytes. Where the region sits on the screen is deliberately
not hashed: the same prompt redrawn one row lower is the same prompt, while its
size (rows, and cells per row) is.

A prompt that is a person's to answer (a secret question, one AKK cannot
read whole, one whose editor a person is typing into) is fingerprinted by what
it asks instead (`asked_fingerprint`): the person moving its cursor and typing
redraws its cells, yet it is the one prompt it began as, and nothing is ever
sent for it, so no fence rests on its cells.

Opaque ids are HMAC-SHA256 of one appearance of a prompt (its fingerprint and
the appearance number the TerminalActor gave it when it came on screen) under a
server-held secret. So they change whenever the fingerprint does, differ when
the identical prompt is asked again after it left the screen, and cannot be
guessed or linked to the screen without the secret.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import struct

import attrs

from akk.screen.grid import Cell, Grid
from akk.screen.region import Region

_FINGERPRINT_DOMAIN = b"akk.fingerprint.v1"
_PENDING_DOMAIN = b"akk.fingerprint.pending.v1"  # a prompt bound to a pending tool call
_ASKED_DOMAIN = b"akk.fingerprint.asked.v1"  # a person's prompt: what it asks, not its cells
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


def fingerprint(
    grid: Grid, region: Region, *, profile_id: str, terminal_identity: str, pending: str = ""
) -> bytes:
    """SHA-256 over `region`'s exact cells, `profile_id`, `terminal_identity` and `pending`.

    `pending` is the identity of the tool call a permission asks about
    (`PendingCall.identity`; empty for other prompts). Cells outside `region`
    never affect it; any change to a cell inside it (its character or any
    style attribute) does, as does a different profile id, terminal identity
    or pending call. Raises ValueError if `region` leaves the grid.
    """
    cells = grid.region_cells(region)
    digest = hashlib.sha256()
    # Without a pending call the encoding is the one stored fingerprints were made with.
    digest.update(_field(_PENDING_DOMAIN if pending else _FINGERPRINT_DOMAIN))
    if pending:
        digest.update(_field(pending.encode()))
    digest.update(_field(profile_id.encode()))
    digest.update(_field(terminal_identity.encode()))
    digest.update(struct.pack(">II", region.height, region.width))
    for row in cells:
        digest.update(b"".join(map(_encode_cell, row)))
    return digest.digest()


def asked_fingerprint(
    asked: str, *, profile_id: str, terminal_identity: str, pending: str = ""
) -> bytes:
    """SHA-256 over what a person's prompt asks (``asked``: its reason, kind, step and
    questions' words, as one canonical text), `profile_id`, `terminal_identity` and
    `pending`, in its own domain: never equal to a `fingerprint` of cells."""
    digest = hashlib.sha256(_field(_ASKED_DOMAIN))
    for text in (pending, profile_id, terminal_identity, asked):
        digest.update(_field(text.encode("utf-8", "surrogatepass")))
    return digest.digest()


@attrs.frozen
class Appearance:
    """One appearance of a prompt on one terminal: from its first paint until it leaves.

    ``number`` is unique per terminal (the TerminalActor's clock in ns when the
    prompt came on screen, strictly increasing); the identical prompt asked again
    later is a new appearance with a new number, so a fence on the old one
    never blocks, and an answer to the old one never reaches, the new one.
    """

    fingerprint: bytes
    number: int


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

    def _mint(self, prefix: str, kind: bytes, seen: Appearance, *indexes: int) -> str:
        if any(index < 0 for index in (seen.number, *indexes)):
            raise ValueError(f"numbers and indexes must be >= 0, got {seen.number}, {indexes}")
        message = (
            _field(kind)
            + _field(seen.fingerprint)
            + b"".join(struct.pack(">Q", i) for i in (seen.number, *indexes))
        )
        mac = hmac.new(self._secret, message, hashlib.sha256).digest()[:_ID_BYTES]
        return prefix + base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def interaction_id(self, seen: Appearance) -> str:
        """The id of the interaction that is this appearance of a prompt ("int_...")."""
        return self._mint("int_", b"interaction", seen)

    def question_id(self, seen: Appearance, index: int) -> str:
        """The id of question `index` (zero-based) of that prompt ("q_...")."""
        return self._mint("q_", b"question", seen, index)

    def option_id(self, seen: Appearance, question_index: int, option_index: int) -> str:
        """The id of option `option_index` of question `question_index` ("opt_...")."""
        return self._mint("opt_", b"option", seen, question_index, option_index)
