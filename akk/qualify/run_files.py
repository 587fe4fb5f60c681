"""What a lab run writes before its client starts: an isolated HOME, config and environment.

`prepare` writes, under the run's own directory, the client's HOME (and
CODEX_HOME) with the first-run answers a `Preseed` asks for, a git working
directory, and the environment the client runs in, pointed at the scripted
model server. `launcher.launch` starts a pane on it; tests that run a client
without a pane (`codex app-server`) use it alone.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import attrs

from akk.qualify import openai_api
from akk.qualify.client import Client

CODEX_MODEL = "lab-model"
"""The model name in the Codex config.

A model catalog (`openai_api.model_catalog`) describes it to Codex: without it
the first turn shows a "Model metadata ... not found" warning, and with it Codex
also offers `request_user_input_async`. (A known name such as gpt-5.5 instead
makes 0.169.0 open a model-upgrade dialog before the composer.)
"""

LAB_API_KEY = "sk-ant-lab-0000-offline-key-abcdefghij0123456789"
MARKER_VAR = "AKK_LAB_RUN"
"""The environment variable that names the run each of its processes belongs to."""


@attrs.frozen
class Preseed:
    """Which first-run answers `prepare` writes into the client's config.

    All True gives an idle composer. Turning one off leaves the matching
    first-run screen up (Claude: onboarding, custom API key, folder trust;
    Codex: folder trust), for capturing blocked screens.
    """

    onboarded: bool = True
    api_key_approved: bool = True
    trusted: bool = True
    theme: str = "dark"
    """Claude's `theme` setting (dark, light, dark-daltonized, light-ansi, ...)."""
    claude_status_line: str | None = None
    """Claude's user `statusLine` command (`~/.claude/settings.json`); None: no status line."""
    claude_editor_mode: str | None = None
    """Claude's `editorMode` (`vim`); None: the client's default (normal)."""
    claude_settings_argument: str | None = None
    """What Claude is started with as `--settings` (a JSON text or a file); None: no flag."""
    claude_settings_in_file: bool = False
    """True writes `claude_settings_argument` (a JSON text) to `SETTINGS_FLAG_FILE` in the
    working directory, and Claude is given that file's name (relative) instead."""
    claude_ask_rules: tuple[str, ...] = ()
    """Claude's user `permissions.ask` rules (`Bash(touch:*)`): a matching call always asks,
    and its prompt says which rule asked."""
    claude_model: str | None = None
    """Claude's user `model` setting; None: the account's default (Opus, which offers auto
    mode). A model without auto mode (claude-sonnet-4-5) draws no auto-mode tip or row."""
    codex_model: str = CODEX_MODEL
    """Codex's `model`; another name is not in the lab's model catalog (a warning shows)."""
    codex_status_line: tuple[str, ...] | None = None
    """Codex's `[tui] status_line` items (None: the client's default; (): no status line)."""
    codex_features: tuple[str, ...] = ()
    """Codex `[features]` turned on, e.g. default_mode_request_user_input (questions outside
    Plan mode, which is how the app-server gets them)."""
    codex_temp_writable: bool = True
    """False takes /tmp and $TMPDIR out of `workspace-write`'s writable roots: the lab's runs
    live there, so a patch beside the working directory asks first only then."""
    codex_alt_screen: bool = True
    """False starts Codex with `--no-alt-screen`: its TUI draws inline, in the normal screen,
    and what scrolls off goes to the pane's scrollback (every pinned version offers the flag)."""

    @property
    def ready(self) -> bool:
        """True when the client should start straight into its idle composer."""
        return self.onboarded and self.api_key_approved and self.trusted


SETTINGS_FLAG_FILE = "lab-settings.json"
"""The file `Preseed.claude_settings_in_file` writes in the working directory."""

READY = Preseed()
"""Every first-run answer given: the client starts at its idle composer (the default)."""

PATCH_ASKS = Preseed(codex_temp_writable=False)
"""READY, with a patch beside the working directory outside Codex's writable roots, so
Codex asks before it (the `codex_patch` plans, and the tests of a patch's approval)."""


def _git_init(workdir: Path) -> None:
    workdir.mkdir()
    subprocess.run(
        ["git", "init", "-q", "-b", "main", str(workdir)],
        check=True,
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull},
    )


def _claude_config(workdir: Path, preseed: Preseed) -> dict[str, object]:
    config: dict[str, object] = {"theme": preseed.theme, "autoUpdates": False}
    if preseed.claude_editor_mode is not None:
        config["editorMode"] = preseed.claude_editor_mode
    if preseed.onboarded:
        config["hasCompletedOnboarding"] = True
    if preseed.api_key_approved:
        config["customApiKeyResponses"] = {"approved": [LAB_API_KEY[-20:]], "rejected": []}
    if preseed.trusted:
        config["projects"] = {str(workdir): {"hasTrustDialogAccepted": True, "allowedTools": []}}
    return config


def _claude_settings(preseed: Preseed) -> dict[str, object]:
    """The user settings file (`~/.claude/settings.json`); empty: none is written."""
    settings: dict[str, object] = {}
    if preseed.claude_status_line is not None:
        settings["statusLine"] = {"type": "command", "command": preseed.claude_status_line}
    if preseed.claude_model is not None:
        settings["model"] = preseed.claude_model
    if preseed.claude_ask_rules:
        settings["permissions"] = {"ask": list(preseed.claude_ask_rules)}
    return settings


def _codex_config(workdir: Path, port: int, preseed: Preseed, catalog: Path) -> str:
    lines = [
        f"model = {json.dumps(preseed.codex_model)}",
        f"model_catalog_json = {json.dumps(str(catalog))}",
        'model_provider = "lab"',
        'approval_policy = "on-request"',
        'sandbox_mode = "workspace-write"',
        "check_for_update_on_startup = false",
        "",
        "[model_providers.lab]",
        'name = "lab"',
        f'base_url = "http://127.0.0.1:{port}/v1"',
        'wire_api = "responses"',
        'env_key = "LAB_KEY"',
        "",
        # 0.169.0 otherwise starts an app-server daemon that outlives the TUI.
        "[features]",
        "daemon_auto_start = false",
        *(f"{feature} = true" for feature in preseed.codex_features),
    ]
    if not preseed.codex_temp_writable:
        lines += [
            "",
            "[sandbox_workspace_write]",
            "exclude_slash_tmp = true",
            "exclude_tmpdir_env_var = true",
        ]
    if preseed.codex_status_line is not None:
        lines += ["", "[tui]", f"status_line = {json.dumps(list(preseed.codex_status_line))}"]
    if preseed.trusted:
        lines += ["", f"[projects.{json.dumps(str(workdir))}]", 'trust_level = "trusted"']
    return "\n".join(lines) + "\n"


def _environment(
    client: Client, root: Path, home: Path, codex_home: Path | None, port: int
) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        # Codex refuses to put helper binaries under the system temp dir.
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        "SHELL": "/bin/bash",
        "USER": os.environ.get("USER", "lab"),
        MARKER_VAR: root.name,
    }
    if client.agent == "claude":
        env |= {
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
            "ANTHROPIC_API_KEY": LAB_API_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
    else:
        assert codex_home is not None
        env |= {"CODEX_HOME": str(codex_home), "LAB_KEY": "lab-offline-key"}
    return env


@attrs.frozen
class RunFiles:
    """What `prepare` wrote for one run, and the environment the client runs in."""

    home: Path
    codex_home: Path | None
    """None for Claude."""
    workdir: Path
    env: dict[str, str]


def prepare(client: Client, root: Path, port: int, preseed: Preseed = READY) -> RunFiles:
    """Write a run's HOME (and CODEX_HOME), its git working directory and its environment.

    Everything goes under `root` and talks to the model server on `port`. The
    environment carries the run's marker, so `run_processes(root)` finds what
    the client starts. Used by `launch`, and by tests that run a client without
    a pane (`codex app-server`).
    """
    home = root / "home"
    home.mkdir()
    (root / "tmp").mkdir()
    workdir = root / "work"
    _git_init(workdir)
    if preseed.claude_settings_in_file and preseed.claude_settings_argument is not None:
        (workdir / SETTINGS_FLAG_FILE).write_text(preseed.claude_settings_argument)
    codex_home: Path | None = None
    if client.agent == "claude":
        config = _claude_config(workdir, preseed)
        (home / ".claude.json").write_text(json.dumps(config, indent=2))
        settings = _claude_settings(preseed)
        if settings:
            (home / ".claude").mkdir()
            (home / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))
    else:
        codex_home = root / "codex-home"
        codex_home.mkdir()
        catalog = codex_home / "lab-model-catalog.json"
        catalog.write_text(json.dumps(openai_api.model_catalog(CODEX_MODEL), indent=2))
        toml = _codex_config(workdir, port, preseed, catalog)
        (codex_home / "config.toml").write_text(toml)
    env = _environment(client, root, home, codex_home, port)
    return RunFiles(home, codex_home, workdir, env)
