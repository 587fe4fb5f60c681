"""Where AKK keeps its state, and the checks that the place is safe to use.

The state directory holds the store, the controller token and the id secret.
It is resolved from, in order: an explicit ``--state-dir``, ``$AKK_STATE_DIR``,
``$XDG_STATE_HOME/akk``, ``~/.local/state/akk``.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

import attrs

STORE_FILE = "akk.sqlite3"
TOKEN_FILE = "token"
SECRET_FILE = "id-secret"
ENDPOINT_FILE = "endpoint.json"
ENDPOINT_TMP_FILE = "endpoint.json.tmp"

# Names an AKK state directory may hold; anything else marks a directory that
# belongs to someone else, which AKK refuses to take over.
_OWN_NAMES = frozenset(
    {
        STORE_FILE,
        f"{STORE_FILE}-wal",
        f"{STORE_FILE}-shm",
        f"{STORE_FILE}-journal",
        TOKEN_FILE,
        SECRET_FILE,
        ENDPOINT_FILE,
        ENDPOINT_TMP_FILE,
    }
)


class StateDirError(Exception):
    """The state directory cannot be used; the message says why and what to do."""


@attrs.frozen
class StateDir:
    """A resolved state directory (not necessarily created yet)."""

    path: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> StateDir:
        """Pick the state directory from the flag, the environment or the XDG default."""
        if explicit:
            return cls(Path(explicit).expanduser().absolute())
        env = os.environ.get("AKK_STATE_DIR")
        if env:
            return cls(Path(env).expanduser().absolute())
        xdg = os.environ.get("XDG_STATE_HOME")
        base = Path(xdg) if xdg else Path.home() / ".local" / "state"
        return cls((base / "akk").absolute())

    @property
    def store_path(self) -> Path:
        return self.path / STORE_FILE

    @property
    def token_path(self) -> Path:
        return self.path / TOKEN_FILE

    @property
    def secret_path(self) -> Path:
        return self.path / SECRET_FILE

    @property
    def endpoint_path(self) -> Path:
        return self.path / ENDPOINT_FILE

    def ensure(self) -> None:
        """Create the directory 0700, or check an existing one is AKK's and private.

        Raises StateDirError for a non-empty directory holding files AKK did
        not write, or a directory other users can read.
        """
        if not self.path.exists():
            self.path.mkdir(mode=0o700, parents=True)
            os.chmod(self.path, 0o700)
            return
        if not self.path.is_dir():
            raise StateDirError(
                f"{self.path} exists and is not a directory; "
                "pass --state-dir with a free path or remove it"
            )
        foreign = sorted(p.name for p in self.path.iterdir() if p.name not in _OWN_NAMES)
        if foreign:
            shown = ", ".join(foreign[:5])
            raise StateDirError(
                f"{self.path} is not empty and is not an AKK state directory "
                f"(it holds {shown}); pass --state-dir with an empty or AKK directory"
            )
        mode = stat.S_IMODE(self.path.stat().st_mode)
        if mode & 0o077:
            raise StateDirError(
                f"{self.path} has mode {mode:o}; other users may read it. "
                f"Run: chmod 700 {self.path}"
            )

    def token(self) -> str:
        """The controller bearer token, created 0600 on first use."""
        return self._private_value(self.token_path, lambda: secrets.token_urlsafe(32))

    def id_secret(self) -> bytes:
        """The server-held secret that opaque ids are derived from, created on first use."""
        return bytes.fromhex(self._private_value(self.secret_path, lambda: secrets.token_hex(32)))

    def _private_value(self, path: Path, make: Callable[[], str]) -> str:
        self.ensure()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return read_private_file(path)
        value = make()
        with os.fdopen(fd, "w") as f:
            f.write(value + "\n")
        return value


def read_private_file(path: Path) -> str:
    """Read a one-line secret file, refusing one that others can read."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise StateDirError(f"{path} has mode {mode:o}; run: chmod 600 {path}")
    return path.read_text().strip()
