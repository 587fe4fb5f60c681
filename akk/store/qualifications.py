"""Qualified versions: one row per (agent, version) `akk qualify` proved (run inside a transaction).

A row says that this exact binary (by SHA-256) of an unpinned version reads
exactly as a pinned profile reads its own screens, under one capture plan.
Qualifying the same version again replaces its row. ``load`` is the one judge
of a row: what it finds malformed is listed with its reason and never bound
(docs/qualify.md). Every write bumps a generation number in ``meta``, so a
running server notices another process's write with one cheap read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import apsw
import attrs

from akk.discovery.process import VERSION
from akk.store import audit

AGENTS = ("claude", "codex")
SHA256 = re.compile(r"[0-9a-f]{64}")
"""A SHA-256 as rows keep it: 64 lowercase hex digits (the binary's, the plan's)."""
_VERSION = re.compile(VERSION)
_GENERATION = "qualifications_generation"

BaseAgents = Mapping[str, str]
"""Each pinned profile id a row may name as its base, with that profile's agent."""


class QualificationError(Exception):
    """A row that may not be recorded; the message says what is wrong with it."""


@attrs.frozen
class Qualification:
    """One qualified version: its binary, the pinned profile it reads as, and the proof."""

    agent: str
    version: str
    binary_sha256: str
    base_profile: str
    plan_digest: str
    qualified_at: float
    report: Mapping[str, Any]
    """The qualification's report (a JSON object; docs/qualify.md)."""

    def to_json(self) -> dict[str, Any]:
        """The row as `qualification_list` and `akk qualify --list --json` show it."""
        return {**attrs.asdict(self), "report": dict(self.report), "state": "qualified"}


@attrs.frozen
class Malformed:
    """A stored row ``load`` refuses: it binds nothing, and ``reason`` says why."""

    agent: str
    version: str
    reason: str
    """``qualification_malformed: <what>``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "version": self.version,
            "state": "malformed",
            "reason": self.reason,
        }


Entry = Qualification | Malformed


def record(conn: apsw.Connection, row: Qualification, pinned: BaseAgents, *, actor: str) -> None:
    """Store ``row``, replacing any row of the same (agent, version).

    Raises QualificationError (nothing written) when ``load`` would refuse it.
    """
    try:
        report = json.dumps(dict(row.report), allow_nan=False)
    except (TypeError, ValueError) as exc:
        problem: str | None = f"report is not a JSON object ({exc})"
    else:
        problem = _problem(
            row.agent, row.version, row.binary_sha256, row.base_profile, row.plan_digest,
            row.qualified_at, report, pinned,
        )  # fmt: skip
    if problem is not None:
        raise QualificationError(f"{row.agent} {row.version} cannot be recorded: {problem}")
    conn.execute(
        "INSERT INTO qualifications (agent, version, binary_sha256, base_profile, plan_digest, "
        "qualified_at, report) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (agent, version) DO UPDATE SET binary_sha256 = excluded.binary_sha256, "
        "base_profile = excluded.base_profile, plan_digest = excluded.plan_digest, "
        "qualified_at = excluded.qualified_at, report = excluded.report",
        (
            row.agent, row.version, row.binary_sha256, row.base_profile, row.plan_digest,
            row.qualified_at, report,
        ),
    )  # fmt: skip
    _changed(conn, row.qualified_at, actor, "qualification_record", row.agent, row.version)


def revoke(conn: apsw.Connection, agent: str, version: str, now: float, *, actor: str) -> bool:
    """Delete the row of (agent, version); False if there was none."""
    conn.execute("DELETE FROM qualifications WHERE agent = ? AND version = ?", (agent, version))
    if conn.changes() == 0:
        return False
    _changed(conn, now, actor, "qualification_revoke", agent, version)
    return True


def load(conn: apsw.Connection, pinned: BaseAgents) -> list[Entry]:
    """Every stored row, judged: a Qualification, or Malformed with its reason; by agent, version.

    ``pinned``: the profiles a row may read as (a base of another agent, or one
    not pinned, is malformed).
    """
    rows = conn.execute(
        "SELECT agent, version, binary_sha256, base_profile, plan_digest, qualified_at, report "
        "FROM qualifications ORDER BY agent, version"
    )
    return [_judge(tuple(row), pinned) for row in rows]


def generation(conn: apsw.Connection) -> int:
    """How many writes the table has had (0: none yet): a change means ``load`` again."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_GENERATION,)).fetchone()
    return 0 if row is None else int(row[0])


def _judge(row: tuple[Any, ...], pinned: BaseAgents) -> Entry:
    agent, version, sha, base, plan, at, report = row
    problem = _problem(agent, version, sha, base, plan, at, report, pinned)
    if problem is not None:
        return Malformed(str(agent), str(version), f"qualification_malformed: {problem}")
    return Qualification(agent, version, sha, base, plan, float(at), json.loads(report))


def _problem(
    agent: object,
    version: object,
    sha: object,
    base: object,
    plan: object,
    at: object,
    report: object,
    pinned: BaseAgents,
) -> str | None:
    """What makes a row unfit to bind, or None."""
    if agent not in AGENTS:
        return f"agent {agent!r} is neither claude nor codex"
    if not (isinstance(version, str) and _VERSION.fullmatch(version)):
        return f"version {version!r} is not a dotted version"
    if not (isinstance(sha, str) and SHA256.fullmatch(sha)):
        return "binary_sha256 is not 64 lowercase hex digits"
    if not isinstance(base, str) or base not in pinned:
        return f"base profile {base!r} is not a pinned profile"
    if pinned[base] != agent:
        return f"base profile {base} is not a {agent} profile"
    if not (isinstance(plan, str) and SHA256.fullmatch(plan)):
        return "plan_digest is not 64 lowercase hex digits"
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at) or at <= 0:
        return f"qualified_at {at!r} is not a time"
    try:
        parsed = json.loads(report) if isinstance(report, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return "report is not a JSON object"
    return None


def _changed(
    conn: apsw.Connection, now: float, actor: str, action: str, agent: str, version: str
) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, '1') "
        "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        (_GENERATION,),
    )
    audit.record(
        conn, at=now, actor=actor, action=action, outcome="ok",
        detail={"agent": agent, "version": version},
    )  # fmt: skip
