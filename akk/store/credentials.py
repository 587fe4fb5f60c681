"""Controller credentials and the controllers they name (run inside a write transaction).

A controller is who its credential says. ``akk token create NAME`` mints a
credential for ``controller_id = NAME``; the store keeps only its SHA-256
(a credential is 256 random bits, so a fast hash is enough and a lookup by
hash leaks nothing useful). The operator CLI has its own credential, the
``token`` file of the state directory, bound to ``akk-cli`` with the operator
scope; no controller can claim that id. Creating, revoking and pruning leave
an audit row without any secret; the server verifies callers with
`akk.server.auth.CredentialBook`.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import secrets
from typing import Any

import apsw
import attrs

from akk.store import audit

OPERATOR_ID = "akk-cli"
CONSOLE_ID = "akk-console"
"""The operator console's connections (`akk.console`): operator scope, proven by a session."""
OPERATORS = frozenset({OPERATOR_ID, CONSOLE_ID})
"""The ids that act with the operator scope; no controller can be given one."""
CONTROLLER_TOKEN_PREFIX = "akkc_"
MAX_CREDENTIALS = 1000
"""Live controller credentials a store may hold; bounds the table and the book."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


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
    if controller_id in OPERATORS:
        raise CredentialError(
            f"{controller_id!r} is the operator's own id and cannot be given to a controller; "
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


@attrs.frozen
class Minted:
    """A new credential: the token is shown once and never stored."""

    controller_id: str
    token: str


def create(
    conn: apsw.Connection,
    controller_id: str,
    now: float,
    *,
    actor: str,
    roots: tuple[str, ...] = (),
) -> Minted:
    """Mint a credential for ``controller_id``, narrowed to ``roots`` if any.

    ``roots`` are canonical directories already checked (``akk.workspace_roots.check_roots``).
    Raises CredentialError if it already has one, or the store is at the cap.
    """
    check_name(controller_id)
    if _exists(conn, controller_id):
        raise CredentialError(
            f"controller {controller_id!r} already has a credential; "
            f"`akk token revoke {controller_id}` first to replace it"
        )
    live = _count(conn)
    if live >= MAX_CREDENTIALS:
        raise CredentialError(
            f"the store already holds {live} controller credentials (the limit); "
            "revoke unused ones (`akk token list` shows when each was last used)"
        )
    token = mint_controller_token()
    conn.execute(
        "INSERT INTO credentials (controller_id, token_sha256, created_at, workspace_roots) "
        "VALUES (?, ?, ?, ?)",
        (controller_id, token_digest(token), now, json.dumps(list(roots))),
    )
    _audit(conn, now, actor, "credential_create", controller_id)
    return Minted(controller_id, token)


def revoke(conn: apsw.Connection, controller_id: str, now: float, *, actor: str) -> bool:
    """Delete ``controller_id``'s credential; False if it had none. Prunes its controller row."""
    conn.execute("DELETE FROM credentials WHERE controller_id = ?", (controller_id,))
    if conn.changes() == 0:
        return False
    _audit(conn, now, actor, "credential_revoke", controller_id)
    prune(conn)
    return True


def live_digests(conn: apsw.Connection) -> dict[str, Credential]:
    """Digest → the credential it proves, for every live one (what the server verifies against)."""
    rows = conn.execute("SELECT token_sha256, controller_id, workspace_roots FROM credentials")
    return {
        str(digest): Credential(str(controller_id), Scope.CONTROLLER, _roots(roots))
        for digest, controller_id, roots in rows
    }


def listing(conn: apsw.Connection) -> list[dict[str, Any]]:
    """Every live credential, without secrets, oldest first (``workspace_roots`` [] if none)."""
    rows = conn.execute(
        "SELECT controller_id, created_at, last_used_at, workspace_roots FROM credentials "
        "ORDER BY created_at"
    )
    return [
        {
            "controller_id": controller_id,
            "created_at": created,
            "last_used_at": used,
            "workspace_roots": list(_roots(roots)),
        }
        for controller_id, created, used, roots in rows
    ]


def _roots(stored: object) -> tuple[str, ...]:
    return tuple(str(root) for root in json.loads(str(stored)))


def record_use(conn: apsw.Connection, controller_id: str, name: str, now: float) -> None:
    """A controller said hello: refresh its credential's last use and its destination row."""
    conn.execute(
        "UPDATE credentials SET last_used_at = ? WHERE controller_id = ?", (now, controller_id)
    )
    conn.execute(
        "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
        "VALUES (?, ?, ?, ?) "
        "ON CONFLICT (controller_id) DO UPDATE SET name = excluded.name, "
        "last_seen_at = excluded.last_seen_at",
        (controller_id, name, now, now),
    )


_REFERENCES = (
    ("sessions", "controller_id"),
    ("turns", "controller_id"),
    ("watches", "controller_id"),
    ("offers", "controller_id"),
    ("notifications", "controller_id"),
)


def prune(conn: apsw.Connection) -> int:
    """Delete controller rows with no live credential that nothing references; return how many.

    The operator's own row stays while it is referenced, like any other.
    """
    unreferenced = " AND ".join(
        f"NOT EXISTS (SELECT 1 FROM {table} t WHERE t.{column} = c.controller_id)"
        for table, column in _REFERENCES
    )
    conn.execute(
        "DELETE FROM controllers AS c WHERE NOT EXISTS "
        "(SELECT 1 FROM credentials k WHERE k.controller_id = c.controller_id) "
        f"AND {unreferenced}"
    )
    return conn.changes()


def _exists(conn: apsw.Connection, controller_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM credentials WHERE controller_id = ?", (controller_id,)
    ).fetchone()
    return row is not None


def _count(conn: apsw.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM credentials").fetchone()
    assert row is not None
    return int(row[0])


def _audit(conn: apsw.Connection, now: float, actor: str, action: str, controller_id: str) -> None:
    audit.record(
        conn, at=now, actor=actor, action=action, outcome="ok", controller_id=controller_id
    )
