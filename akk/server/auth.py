"""Who is calling: credentials bound to one controller_id, and what each may do.

A controller is who its credential says. ``akk token create NAME`` mints a
credential for ``controller_id = NAME``; the store keeps only its SHA-256
(a credential is 256 random bits, so a fast hash is enough and a lookup by
hash leaks nothing useful). The operator CLI has its own credential, the
``token`` file of the state directory, bound to ``akk-cli`` with the operator
scope; no controller can claim that id.

``CredentialBook`` is the server's in-memory view. While a server runs it is
the only writer of credentials (the state-directory lock keeps the CLI out),
so the book and the store never disagree.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import secrets

import attrs

OPERATOR_ID = "akk-cli"
CONTROLLER_TOKEN_PREFIX = "akkc_"
MAX_CREDENTIALS = 1000
"""Live controller credentials a store may hold; bounds the table and the book."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TOKEN_BODY = re.compile(r"^[A-Za-z0-9_-]{43}$")


class Scope(enum.StrEnum):
    """What a credential may do."""

    CONTROLLER = "controller"
    """Its own Turns, Watches and events."""
    OPERATOR = "operator"
    """Everything a controller may, for every controller, plus credentials and health."""


class CredentialError(Exception):
    """A credential request was refused; the message says why and what to do."""


@attrs.frozen
class Credential:
    """A verified caller."""

    controller_id: str
    scope: Scope
    roots: tuple[str, ...] = ()
    """The workspace roots it was narrowed to (canonical); empty: the server's roots only."""


def check_name(controller_id: str) -> str:
    """Return ``controller_id`` if it may name a controller credential; raise CredentialError."""
    if controller_id == OPERATOR_ID:
        raise CredentialError(
            f"{OPERATOR_ID!r} is the operator CLI's own id and cannot be given to a controller; "
            "pick another name"
        )
    if not _NAME.match(controller_id):
        raise CredentialError(
            f"{controller_id[:80]!r} is not a valid controller name: use 1-64 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit"
        )
    return controller_id


def mint_controller_token() -> str:
    """A new controller credential (shown once, never stored)."""
    return CONTROLLER_TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """What the store keeps of a credential."""
    return hashlib.sha256(token.encode()).hexdigest()


def looks_like_token(token: str) -> bool:
    """Whether ``token`` has the shape of a credential AKK mints (operator or controller)."""
    return bool(_TOKEN_BODY.match(token.removeprefix(CONTROLLER_TOKEN_PREFIX)))


class CredentialBook:
    """Verifies bearer tokens against the live credentials (in memory)."""

    def __init__(self, operator_token: str, controllers: dict[str, Credential]) -> None:
        """``controllers`` maps each live credential's digest to what it proves."""
        self._operator_digest = token_digest(operator_token)
        self._by_digest = dict(controllers)

    def verify(self, token: str) -> Credential | None:
        """The credential ``token`` proves, or None."""
        if not looks_like_token(token):
            return None
        digest = token_digest(token)
        if hmac.compare_digest(digest, self._operator_digest):
            return Credential(OPERATOR_ID, Scope.OPERATOR)
        return self._by_digest.get(digest)

    def add(self, credential: Credential, digest: str) -> None:
        self.remove(credential.controller_id)
        self._by_digest[digest] = credential

    def remove(self, controller_id: str) -> None:
        for digest in [d for d, c in self._by_digest.items() if c.controller_id == controller_id]:
            del self._by_digest[digest]

    def __len__(self) -> int:
        return len(self._by_digest)
