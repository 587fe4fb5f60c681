"""Qualified versions: the profile they read as, their rows in the store, and how panes bind.

Real parts throughout: the store is apsw on disk (closed and opened again for
a restart), the hashed binaries are real executables run as real processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest
import trio

from akk.discovery.process import (
    CHANGE_SLACK_NS,
    AgentProcess,
    DigestCache,
    binary_of,
    find_agent,
)
from akk.profiles.observation import State
from akk.profiles.qualified import as_version
from akk.profiles.registry import PINNED, PROFILES
from akk.screen.fingerprint import fingerprint
from akk.screen.render import render
from akk.store import qualifications
from akk.store.database import open_store
from akk.store.qualifications import Malformed, Qualification, QualificationError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SHA = "ab" * 32
OTHER_SHA = "cd" * 32
PLAN = "ef" * 32


def fixture(agent: str, version: str, name: str) -> tuple[str, dict[str, Any]]:
    folder = FIXTURES / agent / version
    return (folder / f"{name}.ansi").read_text(), json.loads((folder / f"{name}.json").read_text())


def row(**changes: Any) -> Qualification:
    base = Qualification(
        agent="claude",
        version="2.1.333",
        binary_sha256=SHA,
        base_profile="claude-code@2.1.332",
        plan_digest=PLAN,
        qualified_at=1_700_000_000.0,
        report={"verdict": "qualified", "screens": 3},
    )
    return attrs.evolve(base, **changes)


# ---------------------------------------------------------------- the qualified profile


@pytest.mark.parametrize(
    ("agent", "pinned", "new", "name"),
    [("claude", "2.1.328", "2.1.332", "echo-idle"), ("codex", "0.169.0", "0.171.0", "echo-idle")],
)
def test_as_version_reads_the_new_version_banner_as_the_pinned_one(
    agent: str, pinned: str, new: str, name: str
) -> None:
    screen, label = fixture(agent, pinned, name)
    renamed = render(screen.replace(pinned, new), label["cols"], label["rows"])
    profile = PROFILES[(agent, pinned)]
    # The pinned profile refuses another version's banner (Claude) or cannot prove
    # the idle session without its own banner (Codex).
    assert profile.classify(renamed).state is State.UNKNOWN
    as_new = as_version(profile, new)
    assert as_new.version == new and as_new.classify(renamed).state is State.IDLE
    assert profile.version == pinned  # the pinned row itself is untouched


def test_a_qualified_profile_id_names_its_base_and_keys_its_own_fingerprints() -> None:
    claude = as_version(PROFILES[("claude", "2.1.332")], "2.1.333")
    codex = as_version(PROFILES[("codex", "0.171.0")], "0.172.0")
    assert claude.id == "claude-code@2.1.333 (qualified from 2.1.332)"
    assert codex.id == "codex@0.172.0 (qualified from 0.171.0)"
    # The same prompt under the pinned and the qualified reading: both actionable, and
    # their fingerprints differ (an offer made under one never matches the other).
    screen, label = fixture("claude", "2.1.332", "claude_bash-permission")
    grid = render(screen, label["cols"], label["rows"])
    pinned = PROFILES[("claude", "2.1.332")]
    same_version = as_version(pinned, "2.1.332")
    seen = [p.classify(grid) for p in (pinned, same_version)]
    assert all(o.actionable and o.prompt is not None for o in seen)
    prints = {
        fingerprint(grid, o.prompt.region, profile_id=p.id, terminal_identity="t")  # type: ignore[union-attr]
        for o, p in zip(seen, (pinned, same_version), strict=True)
    }
    assert len(prints) == 2


# ---------------------------------------------------------------- binding


def test_binding_takes_a_pinned_version_a_qualified_binary_and_nothing_else() -> None:
    qualified = {("claude", "2.1.333"): row()}
    assert PINNED.bind("claude", "2.1.332").profile is PROFILES[("claude", "2.1.332")]
    assert PINNED.bind("claude", None).reason == "version_unknown"
    bound = PINNED.bind("claude", "2.1.333", binary_sha256=SHA, qualified=qualified)
    assert bound.reason is None and bound.profile is not None
    assert bound.profile.id == "claude-code@2.1.333 (qualified from 2.1.332)"
    unpinned = PINNED.bind("claude", "2.1.334", binary="/opt/my claude", qualified=qualified)
    assert unpinned.profile is None
    assert unpinned.reason == (
        "unpinned_version: claude 2.1.334 has no profile; qualify it with "
        "`akk qualify claude --binary '/opt/my claude'`"
    )
    # Another binary of the qualified version number, or one AKK could not read.
    for sha in (OTHER_SHA, None):
        other = PINNED.bind(
            "claude", "2.1.333", binary="/b/claude", binary_sha256=sha, qualified=qualified
        )
        assert other.profile is None and other.reason is not None
        assert other.reason.startswith("qualified_binary_differs: claude 2.1.333 ")
        assert other.reason.endswith(
            "qualify this binary with `akk qualify claude --binary /b/claude`"
        )
    # The agent is part of the key: a Claude row binds no Codex.
    assert PINNED.bind("codex", "2.1.333", binary_sha256=SHA, qualified=qualified).profile is None


def test_a_registry_without_a_pinned_row_binds_that_version_only_when_qualified() -> None:
    registry = PINNED.without("claude", "2.1.332")
    assert registry.bind("claude", "2.1.332").reason is not None
    assert "claude-code@2.1.332" not in registry.base_agents
    qualified = {("claude", "2.1.332"): row(version="2.1.332", base_profile="claude-code@2.1.328")}
    bound = registry.bind("claude", "2.1.332", binary_sha256=SHA, qualified=qualified)
    assert bound.profile is not None
    assert bound.profile.id == "claude-code@2.1.332 (qualified from 2.1.328)"
    assert PINNED.bind("claude", "2.1.332").profile is PROFILES[("claude", "2.1.332")]


# ---------------------------------------------------------------- the store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "akk.db"
    open_store(path).close()
    yield path


def _write(path: Path, work: Any) -> Any:
    conn = open_store(path)
    try:
        with conn:
            return work(conn)
    finally:
        conn.close()


def _load(path: Path) -> list[qualifications.Entry]:
    return list(_write(path, lambda conn: qualifications.load(conn, PINNED.base_agents)))


def test_rows_survive_a_reopen_and_a_new_qualification_replaces_the_old(store: Path) -> None:
    pinned = PINNED.base_agents
    generations = [_write(store, qualifications.generation)]
    _write(store, lambda conn: qualifications.record(conn, row(), pinned, actor="t"))
    generations.append(_write(store, qualifications.generation))
    assert _load(store) == [row()]  # a fresh connection: what a restarted server reads
    newer = row(binary_sha256=OTHER_SHA, qualified_at=1_700_000_100.0, report={"run": 2})
    _write(store, lambda conn: qualifications.record(conn, newer, pinned, actor="t"))
    generations.append(_write(store, qualifications.generation))
    assert _load(store) == [newer]
    revoke = lambda conn: qualifications.revoke(conn, "claude", "2.1.333", 1.0, actor="t")  # noqa: E731
    assert _write(store, revoke) is True
    assert _write(store, revoke) is False
    generations.append(_write(store, qualifications.generation))
    assert _load(store) == [] and generations == [0, 1, 2, 3]
    actions = _write(
        store,
        lambda conn: [r[0] for r in conn.execute("SELECT action FROM audit ORDER BY audit_id")],
    )
    assert actions == ["qualification_record", "qualification_record", "qualification_revoke"]


_MALFORMED = [
    ("agent", "'gemini'", "agent 'gemini' is neither claude nor codex"),
    ("version", "'2.1'", "version '2.1' is not a dotted version"),
    ("binary_sha256", "upper('" + SHA + "')", "binary_sha256 is not 64 lowercase hex digits"),
    ("binary_sha256", "'abc'", "binary_sha256 is not 64 lowercase hex digits"),
    ("base_profile", "'claude-code@2.1.999'", "base profile 'claude-code@2.1.999' is not a pinned"),
    ("base_profile", "'codex@0.171.0'", "base profile codex@0.171.0 is not a claude profile"),
    ("plan_digest", "'plan-1'", "plan_digest is not 64 lowercase hex digits"),
    ("qualified_at", "'yesterday'", "qualified_at 'yesterday' is not a time"),
    ("qualified_at", "-1.0", "qualified_at -1.0 is not a time"),
    ("report", "'[1, 2]'", "report is not a JSON object"),
    ("report", "'{\"cut'", "report is not a JSON object"),
]


@pytest.mark.parametrize(("column", "value", "problem"), _MALFORMED)
def test_a_malformed_row_is_listed_with_its_reason_and_never_bound(
    store: Path, column: str, value: str, problem: str
) -> None:
    good = row()
    _write(store, lambda c: qualifications.record(c, good, PINNED.base_agents, actor="t"))
    # What a hand, a bad copy or an older writer may leave: the store takes it as it is.
    _write(store, lambda c: c.execute(f"UPDATE qualifications SET {column} = {value}"))
    (entry,) = _load(store)
    assert isinstance(entry, Malformed)
    assert entry.reason.startswith(f"qualification_malformed: {problem}")
    assert entry.to_json()["state"] == "malformed"
    binding = PINNED.bind(
        entry.agent,
        entry.version,
        binary_sha256=SHA,
        qualified={(entry.agent, entry.version): entry},
    )
    assert binding.profile is None and binding.reason is not None
    if column != "agent" and column != "version":
        assert binding.reason.startswith("qualification_malformed: ")
        assert "`akk qualify --revoke claude 2.1.333`" in binding.reason


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"binary_sha256": "x" * 64}, "binary_sha256"),
        ({"base_profile": "claude-code@2.1.333"}, "not a pinned profile"),
        ({"report": {"bad": float("nan")}}, "report is not a JSON object"),
        ({"qualified_at": float("inf")}, "is not a time"),
    ],
)
def test_record_refuses_what_load_would_and_writes_nothing(
    store: Path, changes: dict[str, Any], problem: str
) -> None:
    bad = row(**changes)
    with pytest.raises(QualificationError, match=problem):
        _write(store, lambda c: qualifications.record(c, bad, PINNED.base_agents, actor="t"))
    assert _load(store) == [] and _write(store, qualifications.generation) == 0


def test_a_store_without_v8_is_migrated_with_an_empty_table(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "akk.db")
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(terminals)")}
        assert "binary_sha256" in columns
        assert conn.execute("SELECT count(*) FROM qualifications").fetchone() == (0,)
    finally:
        conn.close()
    with pytest.raises(apsw.ConstraintError):
        _write(
            tmp_path / "akk.db",
            lambda c: c.execute(
                "INSERT INTO qualifications VALUES ('claude', '1.0.0', ?, ?, ?, 1.0, '{}'), "
                "('claude', '1.0.0', ?, ?, ?, 2.0, '{}')",
                (SHA, "claude-code@2.1.332", PLAN) * 2,
            ),
        )


# ---------------------------------------------------------------- the binary's hash


def _binary(path: Path, tail: bytes = b"") -> str:
    """A runnable `claude`: a copy of sleep(1), ``tail`` appended (an ELF ignores it)."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    data = Path(sleep).read_bytes() + tail
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".new")
    temporary.write_bytes(data)
    temporary.chmod(0o755)
    os.replace(temporary, path)  # a new file in place, as an upgrade does
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def _agent(binary: Path, started: list[subprocess.Popen[bytes]]) -> AgentProcess:
    proc = subprocess.Popen([str(binary), "1000"])
    started.append(proc)
    deadline = time.monotonic() + 10
    while (agent := find_agent(proc.pid)) is None:
        assert time.monotonic() < deadline, "the stand-in never showed as an agent"
        time.sleep(0.01)
    return agent


def test_a_binary_replaced_after_qualification_is_unsupported_and_the_old_process_stays_bound(
    tmp_path: Path, running: list[subprocess.Popen[bytes]]
) -> None:
    binary = tmp_path / "bin" / "claude"
    first = _binary(binary)
    old = _agent(binary, running)
    digests = DigestCache()
    assert trio.run(digests.digest_of, old) == first
    assert trio.run(digests.digest_of, old) == first and digests.hashes == 1  # cached
    qualified = {("claude", "2.1.333"): row(binary_sha256=first)}

    def bind(agent: AgentProcess) -> Any:
        sha = trio.run(digests.digest_of, agent)
        return PINNED.bind("claude", "2.1.333", binary=str(binary), binary_sha256=sha,
                           qualified=qualified)  # fmt: skip

    assert bind(old).profile is not None
    # An update replaces the file: a process started from it runs another binary.
    second = _binary(binary, tail=b"\0update")
    assert second != first
    new = _agent(binary, running)
    refused = bind(new)
    assert refused.profile is None and refused.reason is not None
    assert refused.reason.startswith("qualified_binary_differs: ")
    assert f"SHA-256 {first[:16]}…, this pane runs {second[:16]}" in refused.reason
    # The process that still runs the qualified image is hashed from it, not from the path.
    assert trio.run(digests.digest_of, old) == first and bind(old).profile is not None
    assert digests.hashes == 3


def test_a_pure_js_claude_is_hashed_by_its_script(
    tmp_path: Path, running: list[subprocess.Popen[bytes]]
) -> None:
    node = shutil.which("node")
    assert node is not None, "node is a bootstrap dependency (the lab's clients need it)"
    script = tmp_path / "node_modules" / "@anthropic-ai" / "claude-code" / "cli.js"
    script.parent.mkdir(parents=True)
    script.write_text("setTimeout(() => {}, 1e9);\n")
    # Older than the process, or it is not provably the code node loaded (CHANGE_SLACK_NS).
    time.sleep(2 * CHANGE_SLACK_NS / 1e9)
    proc = subprocess.Popen([node, str(script)])
    running.append(proc)
    deadline = time.monotonic() + 10
    while (agent := find_agent(proc.pid)) is None:
        assert time.monotonic() < deadline, "node never showed as a pure-JS Claude"
        time.sleep(0.01)
    assert binary_of(agent) == str(script)
    expected = hashlib.sha256(script.read_bytes()).hexdigest()
    assert trio.run(DigestCache().digest_of, agent) == expected
