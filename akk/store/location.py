"""Where AKK keeps its state, and the checks that the place is safe to use.

The state directory holds the store, the controller token and the id secret.
It is resolved from, in order: an explicit ``--state-dir``, ``$AKK_STATE_DIR``,
``$XDG_STATE_HOME/akk``, ``~/.local/state/akk``.
"""

from __future__ import annotations

import os
import re
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
PROBE_FILE = ".akk-probe"

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
        PROBE_FILE,
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
        """Create the directory 0700, or check an existing one is AKK's, private and writable.

        Raises StateDirError for a path that cannot be created or inspected, a
        non-empty directory holding files AKK did not write, a directory other
        users can read, or one this process cannot write.
        """
        try:
            self._create_or_inspect()
        except OSError as exc:
            raise StateDirError(
                f"cannot use the state directory {self.path} ({exc}); "
                "check its permissions and its parents', or pass --state-dir with a path "
                "you can write"
            ) from exc

    def _create_or_inspect(self) -> None:
        if not self.path.exists():
            self.path.mkdir(mode=0o700, parents=True)
            os.chmod(self.path, 0o700)
        if not self.path.is_dir():
            raise StateDirError(
                f"{self.path} exists and is not a directory; "
                "pass --state-dir with a free path or remove it"
            )
        if not os.access(self.path, os.R_OK | os.W_OK | os.X_OK):
            raise self._not_writable("it is not readable, writable and searchable by this user")
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
        self._probe_write()

    def _probe_write(self) -> None:
        """Create and remove a file: os.access says yes to root whatever the mode,
        and a file system (read-only mount, root-squashed NFS) may refuse anyone.

        Runs after the foreign-file check so it never writes into someone
        else's directory. Neither step is exclusive: two processes may probe at once.
        """
        probe = self.path / PROBE_FILE
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600))
            probe.unlink(missing_ok=True)
        except OSError as exc:
            raise self._not_writable(exc.strerror or str(exc)) from exc

    def _not_writable(self, why: str) -> StateDirError:
        return StateDirError(
            f"this process (uid {os.geteuid()}) cannot write the state directory "
            f"{self.path} ({why}); run: chmod u+rwx {self.path} as its owner, "
            "or pass --state-dir with a directory you can write"
        )

    def token(self) -> str:
        """The operator's controller token, created 0600 on first use.

        Raises StateDirError when the file exists but does not hold a token.
        """
        return self._private_value(_TOKEN)

    def id_secret(self) -> bytes:
        """The server-held secret that opaque ids are derived from, created on first use.

        Raises StateDirError when the file exists but does not hold a secret.
        """
        return bytes.fromhex(self._private_value(_ID_SECRET))

    def _private_value(self, kind: _SecretFile) -> str:
        self.ensure()
        path = self.path / kind.name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return kind.check(path, read_private_file(path))
        except OSError as exc:
            raise _cannot_write(path, exc) from exc
        value = kind.make()
        try:
            with os.fdopen(fd, "w") as f:
                f.write(value + "\n")
        except OSError as exc:
            raise _cannot_write(path, exc) from exc
        return value


def _cannot_write(path: Path, exc: OSError) -> StateDirError:
    return StateDirError(
        f"cannot write {path} ({exc.strerror}); fix the cause (disk space, permissions), "
        f"remove {path} if it was left empty, and try again"
    )


@attrs.frozen
class _SecretFile:
    """A one-line secret the state directory holds: its shape, and what to do when it is bad."""

    name: str
    what: str
    length: int
    alphabet: str
    """A regular-expression character class, also shown to people."""
    remedy: str
    make: Callable[[], str]

    def check(self, path: Path, value: str) -> str:
        """Return ``value`` if it has the shape; else raise StateDirError (never quoting it)."""
        if re.fullmatch(f"[{self.alphabet}]{{{self.length}}}", value):
            return value
        lines = len(value.splitlines())
        if not value:
            found = "is empty"
        elif lines > 1:
            found = f"holds {lines} lines"
        elif len(value) != self.length:
            found = f"holds {len(value)} character{'s' if len(value) > 1 else ''}"
        else:
            found = f"holds characters outside {self.alphabet}"
        raise StateDirError(
            f"{path} {found}, but {self.what} is one line of {self.length} characters "
            f"from {self.alphabet}; {self.remedy.format(path=path)}"
        )


_TOKEN = _SecretFile(
    name=TOKEN_FILE,
    what="the operator token",
    length=43,
    alphabet="A-Za-z0-9_-",
    remedy=(
        "remove {path} and run `akk token` to mint a new one; "
        "controllers use their own credentials from `akk token create`"
    ),
    make=lambda: secrets.token_urlsafe(32),
)
_ID_SECRET = _SecretFile(
    name=SECRET_FILE,
    what="the id secret",
    length=64,
    alphabet="0-9a-f",
    remedy=(
        "remove {path} and start `akk serve` to mint a new one "
        "(this invalidates every outstanding interaction id)"
    ),
    make=lambda: secrets.token_hex(32),
)


def read_private_file(path: Path) -> str:
    """Read a one-line secret file, refusing one that others can read.

    Raises StateDirError for a loose mode or a file that cannot be read; the
    caller checks the value's shape.
    """
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise StateDirError(f"{path} is not a regular file; move it away and try again")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise StateDirError(f"{path} has mode {mode:o}; run: chmod 600 {path}")
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError as exc:
        raise StateDirError(
            f"cannot read {path} ({exc.strerror}); check that it is a file this user owns"
        ) from exc
