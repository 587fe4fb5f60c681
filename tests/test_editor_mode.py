"""Claude's vim editor mode: read from the agent's own settings, and marked on its screen."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from akk.evidence.claude_editor import editor_mode
from akk.evidence.model import EvidenceReason, EvidenceUnavailable
from akk.profiles.observation import State
from tests import corpus

PID = 4242


def _process(tmp_path: Path, env: dict[str, str], argv: tuple[str, ...] = ("claude",)) -> Path:
    """A /proc holding one process with this environment and command line."""
    proc = tmp_path / "proc"
    (proc / str(PID)).mkdir(parents=True)
    (proc / str(PID) / "environ").write_bytes(
        b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0"
    )
    (proc / str(PID) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    fields = ["S", "1", str(PID), *["0"] * 16, "12345", *["0"] * 30]  # field 22: start ticks
    (proc / str(PID) / "stat").write_text(f"{PID} (claude) {' '.join(fields)}\n")
    os.symlink(tmp_path, proc / str(PID) / "cwd")
    return proc


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_the_global_config_sets_it_and_the_default_is_normal(tmp_path: Path, home: Path) -> None:
    proc = _process(tmp_path, {"HOME": str(home)})
    managed = tmp_path / "managed.json"
    assert editor_mode(PID, None, proc, managed) == "normal"
    _write(home / ".claude.json", {"theme": "dark", "editorMode": "vim"})
    assert editor_mode(PID, None, proc, managed) == "vim"
    # With CLAUDE_CONFIG_DIR the global config is inside it, and $HOME's is not read.
    config = tmp_path / "config"
    proc = _process(tmp_path / "other", {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)})
    assert editor_mode(PID, None, proc, managed) == "normal"
    _write(config / ".claude.json", {"editorMode": "vim"})
    assert editor_mode(PID, None, proc, managed) == "vim"


def test_settings_come_before_the_global_config_in_claude_s_order(
    tmp_path: Path, home: Path
) -> None:
    proc = _process(tmp_path, {"HOME": str(home)})
    managed = tmp_path / "managed.json"
    work = tmp_path / "work"
    _write(home / ".claude.json", {"editorMode": "vim"})
    _write(home / ".claude" / "settings.json", {"editorMode": "normal"})
    assert editor_mode(PID, str(work), proc, managed) == "normal"
    _write(work / ".claude" / "settings.json", {"editorMode": "vim"})
    assert editor_mode(PID, str(work), proc, managed) == "vim"
    _write(work / ".claude" / "settings.local.json", {"editorMode": "normal"})
    assert editor_mode(PID, str(work), proc, managed) == "normal"
    _write(managed, {"editorMode": "vim"})
    assert editor_mode(PID, str(work), proc, managed) == "vim"
    # A broken file or a value that is not a string sets nothing.
    managed.write_text("{not json")
    _write(work / ".claude" / "settings.local.json", {"editorMode": 1})
    assert editor_mode(PID, str(work), proc, managed) == "vim"


@pytest.mark.parametrize(
    ("argv", "env", "reason", "says"),
    [
        (None, {}, EvidenceReason.PROCESS_GONE, "is gone"),
        (("claude",), {}, EvidenceReason.PROCESS_UNREADABLE, "neither CLAUDE_CONFIG_DIR nor HOME"),
        (
            ("claude", "--settings", "missing.json"),
            None,
            EvidenceReason.PROCESS_UNREADABLE,
            "--settings file 'missing.json' the agent was started with cannot be read",
        ),
        (
            ("claude", "--settings", "{not json"),
            None,
            EvidenceReason.PROCESS_UNREADABLE,
            "are not JSON",
        ),
    ],
    ids=["gone", "no-home", "missing-settings-file", "broken-settings-json"],
)
def test_what_cannot_be_read_is_unknown_and_says_why(
    tmp_path: Path,
    home: Path,
    argv: tuple[str, ...] | None,
    env: dict[str, str] | None,
    reason: EvidenceReason,
    says: str,
) -> None:
    proc = tmp_path / "no-proc"
    if argv is not None:
        proc = _process(tmp_path, {"HOME": str(home)} if env is None else env, argv)
    with pytest.raises(EvidenceUnavailable, match=re.escape(says)) as unknown:
        editor_mode(PID, None, proc, tmp_path / "managed.json")
    assert unknown.value.reason is reason


@pytest.mark.parametrize(
    "argv",
    [
        ("claude", "--settings", '{"editorMode": "vim"}'),
        ("claude", '--settings={"editorMode":"vim"}'),
        ("claude", "--settings", "given.json"),  # relative to the agent's working directory
        ("claude", "--settings", '{"editorMode": "normal"}', "--settings", "given.json"),
    ],
    ids=["json", "json-equals", "file", "last-wins"],
)
def test_settings_the_command_line_gives_come_after_managed_and_before_the_files(
    tmp_path: Path, home: Path, argv: tuple[str, ...]
) -> None:
    proc = _process(tmp_path, {"HOME": str(home)}, argv)
    managed = tmp_path / "managed.json"
    _write(tmp_path / "given.json", {"editorMode": "vim"})
    work = tmp_path / "work"
    _write(work / ".claude" / "settings.local.json", {"editorMode": "normal"})
    _write(home / ".claude" / "settings.json", {"editorMode": "normal"})
    assert editor_mode(PID, str(work), proc, managed) == "vim"
    _write(managed, {"editorMode": "normal"})
    assert editor_mode(PID, str(work), proc, managed) == "normal"


def test_command_line_settings_without_a_mode_leave_it_to_the_files(
    tmp_path: Path, home: Path
) -> None:
    proc = _process(tmp_path, {"HOME": str(home)}, ("claude", "--settings", '{"model": "x"}'))
    _write(home / ".claude" / "settings.json", {"editorMode": "vim"})
    assert editor_mode(PID, None, proc, tmp_path / "managed.json") == "vim"


@pytest.mark.parametrize("label", sorted(corpus.ROOT.glob("claude/*/*idle.json")), ids=corpus.name)
def test_only_vim_s_insert_mode_marks_the_composer(label: Path) -> None:
    _, observation = corpus.observed(label)
    assert observation.state is State.IDLE
    vim = corpus.label(label)["plan"].startswith("vim_")
    assert observation.composer_mode == ("insert" if vim else None)
