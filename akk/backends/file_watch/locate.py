"""Find a person's task by its agent's native id: the one file that is its, and the task in it.

Pure reads, run in a worker thread; nothing is written. A Codex thread's rollout
is ``<CODEX_HOME>/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``, its
first record the ``session_meta`` naming that thread and its cwd. A Claude
session's transcript is ``<config dir>/projects/<project>/<session id>.jsonl``,
each record naming its ``sessionId`` and ``cwd``. The id is a UUID, so it can
never widen the search; exactly one file must match, be a regular file (not a
link) owned by AKK's own user, and name the same id inside, or the watch is
refused: it is never bound to another thread.

The task is the newest request in that file (`akk.evidence.newest_task`); one
whose turn already ended is no running task, and is refused too.
"""

from __future__ import annotations

import glob
import os
import re
import stat

import attrs

from akk import evidence
from akk.evidence import files
from akk.evidence.model import Agent
from akk.protocol.errors import Reason, RpcError
from akk.protocol.schema import NATIVE_ID_PATTERN
from akk.store.turns import Turn

_NATIVE_ID = re.compile(NATIVE_ID_PATTERN)

RECORD_LIMIT = 1024 * 1024
"""Bytes read at most to find one record (the rollout's first, the task's own line)."""

_HOME = {"codex": "codex_home", "claude": "claude_config_dir"}
_ID = {"codex": "thread_id", "claude": "claude_session_id"}
_KIND = {"codex": "Codex thread", "claude": "Claude session"}
_FILE = {
    "codex": ("sessions", "*", "*", "*", "rollout-*-{id}.jsonl"),
    "claude": ("projects", "*", "{id}.jsonl"),
}
"""Where each agent keeps a session's or thread's file under its home, by its id."""


@attrs.frozen
class Found:
    """A person's running task: its binding and request digest, and the cwd it runs in."""

    binding: evidence.Binding
    request_sha256: str
    cwd: str | None
    """The task's working directory as its file records it (None: not recorded)."""


def ends_at_final_reply(agent: Agent) -> bool:
    """Whether ``agent``'s round ends at its final reply (`evidence.read`'s ``headless``).

    A Claude session may be a ``claude -p`` run, which writes no ``turn_duration``.
    """
    return agent == "claude"


def find_task(agent: Agent, home: str, native_id: str) -> Found:
    """The task running now in ``agent``'s session or thread ``native_id`` under ``home``.

    Raises RpcError: invalid_params for a malformed id or home, not_found when no
    single file of that id is there or no task runs in it (with the next step).
    """
    kind, headless = _KIND[agent], ends_at_final_reply(agent)
    path = task_file(agent, home, native_id)
    try:
        task = evidence.newest_task(agent, path)
        if task is None:
            raise RpcError(
                Reason.NOT_FOUND,
                f"no task runs in {kind} {native_id}: its file holds no accepted request yet; "
                "watch it once the agent took the person's task (a moment after it was sent)",
            )
        binding, digest = task
        if binding.session_id != native_id:
            raise RpcError(
                Reason.NOT_FOUND,
                f"{path} does not name {kind} {native_id} inside (it names "
                f"{binding.session_id!r}); a watch is never bound to another thread",
            )
        progress = evidence.read(binding, digest, headless=headless)
        cwd = _cwd(agent, binding)
    except evidence.EvidenceError as exc:
        raise RpcError(
            Reason.NOT_FOUND,
            f"the task of {kind} {native_id} cannot be read ({exc}); check the agent, then "
            "watch it again",
        ) from exc
    if progress.outcome is not None:
        raise RpcError(
            Reason.NOT_FOUND,
            f"no task runs in {kind} {native_id}: its last task ended ({progress.outcome}); "
            "watch it once a person started another",
        )
    return Found(binding, digest, cwd)


def task_progress(agent: Agent, watch: Turn) -> evidence.Progress:
    """What the file a watch of ``agent``'s task was bound to proves now.

    Raises EvidenceError when the file cannot say (gone, replaced, rewritten,
    too large), ValueError for a watch whose stored binding is not one.
    """
    binding = evidence.Binding.from_json(watch.evidence or "")
    return evidence.read(binding, watch.request_sha256, headless=ends_at_final_reply(agent))


def task_file(agent: Agent, home: str, native_id: str) -> str:
    """The one file of session or thread ``native_id`` under ``home`` (see the module docstring)."""
    kind, id_field, home_field = _KIND[agent], _ID[agent], _HOME[agent]
    if not _NATIVE_ID.fullmatch(native_id):
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"{id_field} must be the {kind}'s id, a lowercase UUID; pass it as the agent shows it",
        )
    if not os.path.isabs(home):
        raise RpcError(
            Reason.INVALID_PARAMS,
            f"{home_field} must be an absolute path; pass the directory the agent ran with",
        )
    real = os.path.realpath(home)
    try:
        info = os.stat(real)
    except OSError as exc:
        raise RpcError(
            Reason.NOT_FOUND,
            f"{home_field} {home!r} cannot be read ({exc.strerror}); pass the directory the "
            "agent ran with",
        ) from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise RpcError(
            Reason.NOT_FOUND,
            f"{home_field} {home!r} is not a directory of AKK's own user; pass the directory "
            "the agent ran with (AKK reads only its own user's agent files)",
        )
    *folders, name = _FILE[agent]
    pattern = os.path.join(glob.escape(real), *folders, name.format(id=native_id))
    matches = sorted(glob.glob(pattern))
    if len(matches) != 1:
        found = "no file" if not matches else f"{len(matches)} files"
        raise RpcError(
            Reason.NOT_FOUND,
            f"{found} of {kind} {native_id} under {home!r}; check the id and the "
            f"{home_field}, a watch is never bound to another thread",
        )
    path = matches[0]
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        raise RpcError(
            Reason.NOT_FOUND,
            f"the file of {kind} {native_id} is not a regular file of AKK's own user; AKK "
            "does not follow it",
        )
    return path


def _cwd(agent: Agent, binding: evidence.Binding) -> str | None:
    """Where the task runs, as its file says: the rollout's first record, the request's own."""
    offset = 0 if agent == "codex" else binding.anchor.offset
    records = files.records(files.read_lines(binding.file, offset, limit=RECORD_LIMIT))
    if not records:
        return None
    data = records[0].data
    if agent == "codex":
        payload = data.get("payload")
        data = payload if isinstance(payload, dict) else {}
    cwd = data.get("cwd")
    return cwd if isinstance(cwd, str) else None
