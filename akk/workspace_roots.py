"""Workspace roots: the directories a controller may pick as an agent's working directory.

`akk serve --workspace-root DIR` (repeatable; default the serving user's home)
bounds every backend ``cwd``; a credential minted with `--workspace-root`
narrows it further, and also bounds the panes that credential may act on
(docs/security.md). Every comparison is between canonical paths
(``os.path.realpath``), so ``..``, doubled or trailing slashes and symlinks
that lead out of a root are all seen for what they are, and a root covers
a path only at a path-component boundary (``/home/a`` does not cover
``/home/ab``).

Never a root, even when given: ``/``, the system directories in
``SYSTEM_DIRS`` and everything under them, ``/root`` unless it is the
serving user's home, and the shared parents in ``SHARED_PARENTS`` themselves.
A home that lies under a system directory (a service account's
``/var/lib/NAME``) may still be a root.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

SYSTEM_DIRS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
    "/sbin", "/sys", "/usr", "/var",
)  # fmt: skip
"""Never a root, nor anything under them (except the serving user's home)."""

SHARED_PARENTS = ("/home", "/tmp", "/mnt", "/media", "/opt", "/srv")
"""Never a root themselves (they hold other users' or programs' files); a directory below may be."""

ROOT_HOME = "/root"


class RootError(ValueError):
    """A directory cannot be a workspace root; the message says why and what to do."""


def canonical(path: str, *, what: str = "path") -> str:
    """``path`` as an existing absolute directory's realpath; raise RootError otherwise.

    Refuses a relative path, NUL and lone surrogates (which no file name on
    this system can hold), and anything that is not an existing directory.
    """
    if not isinstance(path, str) or not path:
        raise RootError(f"{what} must be an absolute directory path")
    try:
        path.encode()
    except UnicodeEncodeError:
        raise RootError(f"{what} holds a character no file name can (a lone surrogate)") from None
    if "\x00" in path:
        raise RootError(f"{what} holds a NUL character, which no file name can")
    if not os.path.isabs(path):
        raise RootError(f"{what} {path[:200]!r} is not absolute; pass an absolute directory path")
    try:
        real = os.path.realpath(path, strict=True)
    except OSError:
        raise RootError(f"{what} {path[:200]!r} is not a directory; pass an existing one") from None
    if not os.path.isdir(real):
        raise RootError(f"{what} {path[:200]!r} is not a directory; pass an existing one")
    return real


def within(path: str, root: str) -> bool:
    """Whether canonical ``path`` is ``root`` or lies below it (whole components only)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def refusal(root: str, home: str) -> str | None:
    """Why canonical ``root`` may never be a workspace root (with canonical ``home``), or None."""
    if root == "/":
        return "/ is the whole machine"
    home_exempt = home not in ("/", *SYSTEM_DIRS, *SHARED_PARENTS)
    if home_exempt and within(root, home):
        return None
    for system in SYSTEM_DIRS:
        if within(root, system):
            return f"{system} is a system directory"
    if within(root, ROOT_HOME):
        return f"{ROOT_HOME} is the superuser's home, not this user's"
    if root in SHARED_PARENTS:
        return f"{root} holds other users' or programs' files"
    return None


def check_roots(paths: Iterable[str], *, home: str | None = None) -> tuple[str, ...]:
    """The canonical roots for ``paths`` (duplicates dropped); raise RootError for any refused."""
    home_real = os.path.realpath(home if home is not None else str(Path.home()))
    found: dict[str, None] = {}
    for path in paths:
        real = canonical(path, what=f"workspace root {path[:200]!r}")
        why = refusal(real, home_real)
        if why is not None:
            shown = path if real == path else f"{path} (really {real})"
            raise RootError(
                f"workspace root {shown} is refused: {why}; pass a project directory "
                "(or your home) with --workspace-root"
            )
        found[real] = None
    return tuple(found)


def default_roots() -> tuple[str, ...]:
    """The serving user's home as the one root; raise RootError if it may not be one."""
    return check_roots([str(Path.home())])


def covered(path: str, roots: Iterable[str]) -> bool:
    """Whether canonical ``path`` lies under one of the canonical ``roots``."""
    return any(within(path, root) for root in roots)


def allows(path: str, server: tuple[str, ...], narrowed: tuple[str, ...]) -> bool:
    """Whether canonical ``path`` lies under the server's roots and, if any, the credential's."""
    return covered(path, server) and (not narrowed or covered(path, narrowed))


def pane_allowed(cwd: str | None, narrowed: tuple[str, ...]) -> bool:
    """Whether a credential narrowed to ``narrowed`` may act on a pane whose agent runs in ``cwd``.

    An unnarrowed credential (no roots) may act on every pane; a narrowed one
    only where the agent's working directory (canonical, when it still exists)
    lies under one of its roots. An unreadable cwd is never under a root.
    """
    if not narrowed:
        return True
    if cwd is None:
        return False
    try:
        real = os.path.realpath(cwd)
    except (OSError, ValueError):
        return False
    return covered(real, narrowed)
