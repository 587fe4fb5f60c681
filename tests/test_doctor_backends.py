"""`akk doctor`'s session backends, as the running server reports them.

The server's `doctor` call reports each session backend (`backend_health`): the
binary and version it found at its start, or why none; its config dir as the
server sees it. `backend_checks` prints one row per backend, by one code path for
Claude headless and the Codex app-server. Live: a real `akk serve` with an absent
`--claude-bin` (unavailable, with the option that fixes it), and, in the lab, the
newest pinned Claude (available; a config dir that is a file fails).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from akk.backends.claude_headless.setup import ClaudeSetup
from akk.backends.claude_headless.setup import pinned as claude_pinned
from akk.backends.codex_app_server import schema
from akk.backends.codex_app_server.actor import CodexSetup
from akk.cli.doctor import Check, backend_checks
from akk.cli.server_calls import operator_call
from akk.methods.operator import backend_health, home_state, session_backends
from akk.store.location import StateDir
from tests.test_cli import AKK, _env, serving
from tools.lab import clients
from tools.lab.installer import install

NEWEST_CLAUDE = max(
    (client for client in clients.PINNED if client.agent == "claude"),
    key=lambda client: tuple(int(part) for part in client.version.split(".")),
)
PINNED_CLAUDE = ", ".join(claude_pinned())


def test_home_state_says_what_a_config_dir_is_to_this_process(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a dir")
    assert home_state(str(tmp_path)) == "writable"
    assert home_state(str(tmp_path / "a" / "b")) == "absent"
    assert home_state(str(tmp_path / "file")) == "not_a_directory"
    assert home_state(str(tmp_path / "file" / "below")) == "uncreatable"
    # procfs refuses writes even to root, so these hold for any user running the tests.
    assert home_state("/proc/1") == "not_writable"
    assert home_state("/proc/1/absent/below") == "uncreatable"


def test_backend_health_reports_the_setup_or_the_reason(tmp_path: Path) -> None:
    home = str(tmp_path)
    found = ClaudeSetup(binary="/opt/claude", config_dir=home, version="2.1.332")
    assert backend_health("claude_headless", found, home, ("2.1.263", "2.1.332")) == {
        "backend": "claude_headless", "available": True, "reason": None,
        "binary": "/opt/claude", "version": "2.1.332", "pinned": True,
        "pinned_versions": ["2.1.263", "2.1.332"], "home": home, "home_state": "writable",
    }  # fmt: skip
    unpinned = backend_health("claude_headless", found, home, ("2.1.263",))
    assert (unpinned["available"], unpinned["pinned"]) == (True, False)
    why = "no claude on PATH (pass --claude-bin)"
    absent = str(tmp_path / "absent")
    assert backend_health("claude_headless", why, absent, ("2.1.263",)) == {
        "backend": "claude_headless", "available": False, "reason": why, "binary": None,
        "version": None, "pinned": False, "pinned_versions": ["2.1.263"], "home": absent,
        "home_state": "absent",
    }  # fmt: skip
    codex = CodexSetup(binary="/opt/codex", home=home, version=schema.versions()[-1])
    both = session_backends(why, absent, codex, home)
    assert [(b["backend"], b["available"], b["pinned"]) for b in both] == [
        ("claude_headless", False, False),
        ("codex_app_server", True, True),
    ]
    assert both[1]["pinned_versions"] == list(schema.versions())


def _entry(backend: str, state: str, **found: Any) -> dict[str, Any]:
    base = {
        "backend": backend, "available": True, "reason": None, "binary": "/opt/bin",
        "version": "9.9.9", "pinned": True, "pinned_versions": ["1.0.0", "9.9.9"],
        "home": "/home/u/cfg", "home_state": state,
    }  # fmt: skip
    return base | found


def test_backend_checks_one_row_per_backend_by_one_code_path() -> None:
    claude, codex = backend_checks(
        [_entry("claude_headless", "writable"), _entry("codex_app_server", "writable")]
    )
    assert claude == Check(
        "backend claude_headless",
        True,
        "Claude Code 9.9.9 at /opt/bin (pinned); CLAUDE_CONFIG_DIR /home/u/cfg (writable)",
    )
    assert codex == Check(
        "backend codex_app_server",
        True,
        "codex-cli 9.9.9 at /opt/bin (pinned); CODEX_HOME /home/u/cfg (writable)",
    )


def test_an_unavailable_backend_is_reported_with_the_option_that_fixes_it() -> None:
    why = "/x/claude is not an executable file"
    entry = _entry("claude_headless", "absent", available=False, reason=why, binary=None)
    (check,) = backend_checks([entry])
    assert check.ok, "a server may run only the other backend"
    assert check.detail == f"unavailable: {why}; CLAUDE_CONFIG_DIR /home/u/cfg (absent)"
    assert check.next_step == (
        "start akk serve with --claude-bin PATH naming a pinned Claude Code (1.0.0, 9.9.9)"
    )
    codex = _entry("codex_app_server", "writable", available=False, reason="no codex on PATH")
    (check,) = backend_checks([codex])
    assert check.ok and check.detail.startswith("unavailable: no codex on PATH; CODEX_HOME")
    assert check.next_step == (
        "start akk serve with --codex-bin PATH naming a pinned Codex (1.0.0, 9.9.9)"
    )


def test_a_config_dir_the_client_cannot_use_fails() -> None:
    # Claude creates an absent config dir; Codex refuses an absent CODEX_HOME.
    claude_absent, codex_absent = backend_checks(
        [_entry("claude_headless", "absent"), _entry("codex_app_server", "absent")]
    )
    assert claude_absent.ok and claude_absent.next_step == ""
    assert not codex_absent.ok
    assert codex_absent.next_step == "create it, or start akk serve with --codex-home DIR"
    for state in ("not_writable", "not_a_directory", "uncreatable"):
        (check,) = backend_checks([_entry("claude_headless", state)])
        assert not check.ok, state
        assert check.next_step == (
            "make it a directory akk serve's user may write, or start akk serve with "
            "--claude-config-dir DIR"
        )
    (unpinned,) = backend_checks([_entry("claude_headless", "writable", pinned=False)])
    assert unpinned.ok and "(not pinned: runs only once qualified)" in unpinned.detail


def _doctor(
    state: Path, absent_codex: Path
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """The server's `doctor` report of Claude headless, and `akk doctor` as a person runs it."""
    (report,) = [
        b
        for b in operator_call(StateDir(state), "doctor", {})["backends"]
        if b["backend"] == "claude_headless"
    ]
    printed = subprocess.run(
        [*AKK, "doctor", "--port", "0", "--codex-bin", str(absent_codex)],
        env=_env(state) | {"COLUMNS": "1000"},  # one line per row, however long its paths
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return report, printed


def _row(printed: subprocess.CompletedProcess[str]) -> str:
    (row,) = [line for line in printed.stdout.splitlines() if "backend claude_headless" in line]
    return " ".join(row.split())


def test_live_doctor_reports_an_unavailable_claude(tmp_path: Path) -> None:
    state, absent = tmp_path / "akk", tmp_path / "absent" / "claude"
    config = tmp_path / "claude-config"
    args = ("--claude-bin", str(absent), "--claude-config-dir", str(config))
    with serving(state, *args, "--codex-bin", str(tmp_path / "no-codex")):
        report, printed = _doctor(state, tmp_path / "no-codex")
    # The reason begins with executable()'s words (find_claude may add what it tried next).
    assert report.pop("reason").startswith(f"{absent} is not an executable file")
    assert report == {
        "backend": "claude_headless", "available": False, "binary": None, "version": None,
        "pinned": False, "pinned_versions": list(claude_pinned()), "home": str(config),
        "home_state": "absent",
    }  # fmt: skip
    assert printed.returncode == 0, printed.stdout
    row = _row(printed)
    assert row.startswith(
        f"backend claude_headless ok unavailable: {absent} is not an executable file"
    ), row
    assert row.endswith(
        f"; CLAUDE_CONFIG_DIR {config} (absent) start akk serve with --claude-bin PATH naming a "
        f"pinned Claude Code ({PINNED_CLAUDE})"
    ), row


@pytest.mark.lab
def test_live_doctor_reports_the_lab_claude(tmp_path: Path) -> None:
    install(NEWEST_CLAUDE)
    binary = os.path.realpath(NEWEST_CLAUDE.binary())
    state, config = tmp_path / "akk", tmp_path / "claude-config"
    config.mkdir()
    no_codex = tmp_path / "no-codex"
    args = ("--claude-bin", str(NEWEST_CLAUDE.binary()), "--codex-bin", str(no_codex))
    with serving(state, *args, "--claude-config-dir", str(config)):
        report, printed = _doctor(state, no_codex)
    assert report == {
        "backend": "claude_headless", "available": True, "reason": None, "binary": binary,
        "version": NEWEST_CLAUDE.version, "pinned": True,
        "pinned_versions": list(claude_pinned()), "home": str(config), "home_state": "writable",
    }  # fmt: skip
    assert printed.returncode == 0, printed.stdout
    assert _row(printed) == (
        f"backend claude_headless ok Claude Code {NEWEST_CLAUDE.version} at {binary} (pinned); "
        f"CLAUDE_CONFIG_DIR {config} (writable)"
    )
    # The same Claude with a config dir that is a file: its runs could not start.
    (tmp_path / "a-file").write_text("")
    with serving(state, *args, "--claude-config-dir", str(tmp_path / "a-file")):
        report, printed = _doctor(state, no_codex)
    assert (report["available"], report["home_state"]) == (True, "not_a_directory")
    assert printed.returncode == 1, printed.stdout
    assert _row(printed).startswith("backend claude_headless FAIL Claude Code")
    assert _row(printed).endswith(
        "(not a directory) make it a directory akk serve's user may write, or start akk serve "
        "with --claude-config-dir DIR"
    )
