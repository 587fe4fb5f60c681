"""Which transcript or rollout files an agent process owns, proven from the process itself.

Never "the newest file in the folder": every path here is named by the process
(its own session record, checked against its start time) or held open by it.
Verified in the lab (tools/lab) on Claude Code 2.1.263, 2.1.266, 2.1.267 and
2.1.328 and Codex 0.153.4, 0.154.0, 0.155.1 and 0.169.0:

Claude Code never holds its transcript open (it opens, appends and closes), so
the proof is its session record. At start-up, before any prompt, it writes
``<config>/sessions/<pid>.json`` with ``pid``, ``procStart`` (equal to field 22
of /proc/PID/stat, so a recycled pid cannot pass) and ``sessionId``; `/clear`
rewrites ``sessionId`` at once. ``<config>`` is ``$CLAUDE_CONFIG_DIR`` or
``$HOME/.claude`` from /proc/PID/environ. The transcript is
``<config>/projects/<project>/<sessionId>.jsonl``; it does not exist before the
first prompt (created lazily, also by `/clear`). The project directory is
usually the cwd with every non-alphanumeric character turned into ``-``, but
the binary can override that name, so the file is found by its session id
under ``projects/*/`` instead.

Codex creates its rollout lazily too (no file before the first message) and
then holds it open for the life of the thread, between turns as well. Before
the first message the process holds ``$CODEX_HOME/thread-writer-locks/<thread
id>.lock``. Codex 0.169.0 with its default ``daemon_auto_start`` runs threads
in a managed app-server daemon instead (``codex app-server --listen unix://
--managed-daemon``, pid and start ticks in
``$CODEX_HOME/app-server-daemon/daemon.pid``): then the TUI holds no thread
lock and no rollout, and the daemon holds the rollouts of every TUI it serves,
so the request text decides among them (`bind`). ``$CODEX_HOME`` defaults to
``$HOME/.codex``; rollouts are ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from akk.discovery.process import alive
from akk.evidence.model import Agent, EvidenceReason, EvidenceUnavailable

PROC = Path("/proc")

_SESSION_ID = re.compile(r"^[0-9a-fA-F-]{8,64}$")
_ROLLOUT = re.compile(r"^rollout-.*\.jsonl$")


def owned_files(agent: Agent, pid: int, ticks: int, proc: Path = PROC) -> tuple[str, ...]:
    """The transcript (Claude) or rollout (Codex) files that process `pid`, started at
    `ticks` (field 22 of /proc/PID/stat), owns now.

    The process is checked before its files are read and again after, so a pid
    the agent left and another process took meanwhile never lends this agent its
    files. An empty result is normal before the first message. Raises
    EvidenceUnavailable if the process is gone or its environment, session
    record or open files cannot be read.
    """
    _still_running(pid, ticks, proc)
    environ = environ_of(pid, proc)
    if agent == "claude":
        paths = _claude_paths(pid, ticks, environ, proc)
    else:
        paths = _codex_paths(pid, environ, proc)
    _still_running(pid, ticks, proc)
    return paths


def _still_running(pid: int, ticks: int, proc: Path) -> None:
    if not alive(pid, ticks, proc):
        raise EvidenceUnavailable(
            EvidenceReason.PROCESS_GONE,
            f"process {pid} started at {ticks} is gone; find the pane's agent again",
        )


def _claude_paths(pid: int, ticks: int, environ: dict[str, str], proc: Path) -> tuple[str, ...]:
    config = config_directory(pid, environ, proc, "CLAUDE_CONFIG_DIR", ".claude")
    record_path = config / "sessions" / f"{pid}.json"
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError) as exc:
        raise EvidenceUnavailable(
            EvidenceReason.NO_SESSION_RECORD,
            f"cannot read Claude's session record {record_path} ({exc}); "
            "this Claude Code version may not write one, evidence is unavailable",
        ) from exc
    session_id = record.get("sessionId") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or record.get("pid") != pid
        or str(record.get("procStart")) != str(ticks)
        or not isinstance(session_id, str)
        or not _SESSION_ID.match(session_id)
    ):
        raise EvidenceUnavailable(
            EvidenceReason.NO_SESSION_RECORD,
            f"{record_path} does not describe process {pid} started at {ticks}; "
            "it is stale or foreign, evidence is unavailable",
        )
    return tuple(sorted(str(p) for p in (config / "projects").glob(f"*/{session_id}.jsonl")))


def _codex_paths(pid: int, environ: dict[str, str], proc: Path) -> tuple[str, ...]:
    home = Path(os.path.realpath(config_directory(pid, environ, proc, "CODEX_HOME", ".codex")))
    targets = _open_files(pid, proc)
    owners = [targets]
    if not any(Path(t).parent == home / "thread-writer-locks" for t in targets):
        # No thread of its own: a client of the managed app-server daemon.
        daemon = _codex_daemon(home, proc)
        if daemon is not None:
            owners.append(_open_files(daemon, proc))
    sessions = home / "sessions"
    return tuple(
        sorted(
            {
                target
                for held in owners
                for target in held
                if Path(target).is_relative_to(sessions) and _ROLLOUT.match(Path(target).name)
            }
        )
    )


def _codex_daemon(home: Path, proc: Path) -> int | None:
    """The managed daemon's pid, if its pid file names a process that still runs."""
    try:
        record = json.loads((home / "app-server-daemon" / "daemon.pid").read_text())
        pid = record["pid"]
        ticks = record["processIdentity"]["startTicks"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(pid, int) or not isinstance(ticks, int) or not alive(pid, ticks, proc):
        return None
    return pid


def environ_of(pid: int, proc: Path) -> dict[str, str]:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError as exc:
        raise EvidenceUnavailable(
            EvidenceReason.PROCESS_UNREADABLE,
            f"cannot read the environment of process {pid} ({exc.strerror}); "
            "run AKK as the agent's user",
        ) from exc
    pairs = (item.split("=", 1) for item in raw.decode("utf-8", "surrogateescape").split("\0"))
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def config_directory(
    pid: int, environ: dict[str, str], proc: Path, variable: str, below: str
) -> Path:
    """`$variable`, else `$HOME/below`; a relative path is taken from the process's cwd."""
    if environ.get(variable):
        chosen, source = Path(environ[variable]), variable
    elif environ.get("HOME"):
        chosen, source = Path(environ["HOME"]) / below, "HOME"
    else:
        raise EvidenceUnavailable(
            EvidenceReason.PROCESS_UNREADABLE,
            f"process {pid} has neither {variable} nor HOME; its files cannot be located",
        )
    if chosen.is_absolute():
        return chosen
    try:
        cwd = os.readlink(proc / str(pid) / "cwd")
    except OSError as exc:
        raise EvidenceUnavailable(
            EvidenceReason.PROCESS_UNREADABLE,
            f"{source} of process {pid} is relative and its cwd is unreadable ({exc.strerror}); "
            "run AKK as the agent's user",
        ) from exc
    return Path(cwd) / chosen


def _open_files(pid: int, proc: Path) -> list[str]:
    fd_dir = proc / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError as exc:
        raise EvidenceUnavailable(
            EvidenceReason.PROCESS_UNREADABLE,
            f"cannot list the open files of process {pid} ({exc.strerror}); "
            "run AKK as the agent's user",
        ) from exc
    targets = []
    for name in names:
        try:
            targets.append(os.readlink(fd_dir / name))
        except OSError:
            continue  # closed meanwhile
    return targets
