"""Who may open the operator console: one-time login codes and the sessions they buy.

`akk ui` asks the running server (the operator-only `ui_login` method) for a
code; the link it prints carries that code once. The server trades a code,
once and within ``CODE_SECONDS``, for a session: a random value the browser
keeps in an ``HttpOnly; SameSite=Strict`` cookie and the server keeps only as
a digest, in memory. A restart therefore ends every session, and logging out
ends one. Codes and sessions are bounded in number (the oldest goes first), so
no caller can make the server hold more.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

import attrs

CODE_SECONDS = 60.0
"""How long a login code may be traded for a session."""
SESSION_SECONDS = 12 * 3600.0
"""How long a console session lasts without a new login (a restart or logout ends it sooner)."""
MAX_CODES = 16
MAX_SESSIONS = 32
COOKIE = "akk_console"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@attrs.define
class LoginBook:
    """The console's login codes and sessions, both held as digests with their deadlines."""

    clock: Callable[[], float] = time.monotonic
    _codes: dict[str, float] = attrs.field(factory=dict)  # digest -> deadline, oldest first
    _sessions: dict[str, float] = attrs.field(factory=dict)
    _ended: list[Callable[[str], None]] = attrs.field(factory=list)

    def new_code(self) -> str:
        """A fresh one-time code, valid for CODE_SECONDS."""
        self._expire()
        while len(self._codes) >= MAX_CODES:
            del self._codes[next(iter(self._codes))]
        code = secrets.token_urlsafe(24)
        self._codes[_digest(code)] = self.clock() + CODE_SECONDS
        return code

    def trade(self, code: str) -> str | None:
        """A new session for ``code`` if it is live (it is spent either way), else None."""
        self._expire()
        if self._codes.pop(_digest(code), None) is None:
            return None
        while len(self._sessions) >= MAX_SESSIONS:
            self._end(next(iter(self._sessions)))
        session = secrets.token_urlsafe(32)
        self._sessions[_digest(session)] = self.clock() + SESSION_SECONDS
        return session

    def session_key(self, session: str) -> str | None:
        """The stable key of a live ``session`` (to close its connections at logout), or None."""
        self._expire()
        digest = _digest(session)
        for known in self._sessions:
            if hmac.compare_digest(known, digest):
                return known
        return None

    def log_out(self, session: str) -> bool:
        """End ``session``; whether it was live."""
        key = self.session_key(session)
        if key is None:
            return False
        self._end(key)
        return True

    def on_end(self, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with a session's key when it ends (logout, expiry, eviction)."""
        self._ended.append(listener)

    def _end(self, key: str) -> None:
        del self._sessions[key]
        for listener in self._ended:
            listener(key)

    def _expire(self) -> None:
        now = self.clock()
        for digest in [d for d, deadline in self._codes.items() if deadline <= now]:
            del self._codes[digest]
        for key in [k for k, deadline in self._sessions.items() if deadline <= now]:
            self._end(key)
