"""Who is calling: the live book of credentials the endpoint verifies bearer tokens with.

What a credential is (its controller_id, scope and roots, the name and token
rules, the digest the store keeps) is `akk.store.credentials`'s: the store
holds them. ``CredentialBook`` is the server's in-memory view. While a server
runs it is the only writer of credentials (the state-directory lock keeps the
CLI out), so the book and the store never disagree.
"""

from __future__ import annotations

import hmac
import re

from akk.store.credentials import (
    CONTROLLER_TOKEN_PREFIX,
    OPERATOR_ID,
    Credential,
    Scope,
    token_digest,
)

_TOKEN_BODY = re.compile(r"^[A-Za-z0-9_-]{43}$")


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
