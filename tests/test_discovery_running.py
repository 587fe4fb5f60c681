"""A version and a hash are what the process runs, never what its path holds now.

A stand-in native agent (a small C program) and a pure-JS Claude (`node cli.js`)
run as real processes; their files are upgraded on disk while they run, as npm
and the native auto-updater do (a new file renamed over the path), at the
moments that once fooled discovery: before `--version` is asked, before the
hash is taken. The running code is still the old one, so discovery must say
the old version and hash, or nothing with its reason; never the new file's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from akk.discovery import process
from akk.discovery.process import (
    CHANGE_SLACK_NS,
    AgentProcess,
    DigestCache,
    VersionCache,
    find_agent,
    sha256_file,
)

_NATIVE = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) { puts(VERSION " (Claude Code)"); return 0; }
    pause();
    return 0;
}
"""


def _compile(tmp_path: Path, version: str) -> Path:
    source = tmp_path / "agent.c"
    source.write_text(_NATIVE)
    binary = tmp_path / f"claude-{version}"
    subprocess.run(["cc", "-O", f'-DVERSION="{version}"', "-o", str(binary), str(source)],
                   check=True)  # fmt: skip
    return binary


def _install(new: Path, at: Path) -> None:
    """As an upgrade does: a new file, renamed over the path."""
    staged = at.with_name(at.name + ".new")
    shutil.copy(new, staged)
    os.replace(staged, at)


@pytest.fixture
async def started() -> AsyncIterator[list[trio.Process]]:
    """Processes a test starts; killed and reaped after it."""
    children: list[trio.Process] = []
    yield children
    for child in children:
        child.kill()
        await child.wait()


async def _found(pid: int) -> AgentProcess:
    with trio.fail_after(10):
        while (agent := find_agent(pid)) is None:
            await trio.sleep(0.02)
    return agent


async def test_a_native_binary_upgraded_before_its_version_is_asked_is_read_from_its_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[trio.Process]
) -> None:
    old, new = _compile(tmp_path, "2.1.998"), _compile(tmp_path, "2.1.999")
    (tmp_path / "bin").mkdir()
    path = tmp_path / "bin" / "claude"
    _install(old, path)
    started.append(await trio.lowlevel.open_process([str(path)]))
    agent = await _found(started[0].pid)
    real_home = process._probe_home

    def upgrade_then_home() -> str:  # the upgrade lands after the look, before the question
        _install(new, path)
        return real_home()

    monkeypatch.setattr(process, "_probe_home", upgrade_then_home)
    versions, digests = VersionCache(), DigestCache()
    with trio.fail_after(20):
        assert await versions.version_of(agent) == "2.1.998"
        assert await digests.digest_of(agent) == sha256_file(old)
        # Asked again (the unlinked image has a new ctime: asked once more), the same.
        assert await versions.version_of(agent) == "2.1.998"
        assert await versions.version_of(agent) == "2.1.998"
        assert versions.spawns == 2
        assert await versions.version_of_program("claude", [str(path)]) == "2.1.999"


async def test_a_native_binary_upgraded_before_its_hash_is_hashed_from_its_image(
    tmp_path: Path, started: list[trio.Process]
) -> None:
    old, new = _compile(tmp_path, "2.1.998"), _compile(tmp_path, "2.1.999")
    path = tmp_path / "claude"
    _install(old, path)
    started.append(await trio.lowlevel.open_process([str(path)]))
    agent = await _found(started[0].pid)
    _install(new, path)
    with trio.fail_after(20):
        assert await DigestCache().digest_of(agent) == sha256_file(old)
        assert await VersionCache().version_of(agent) == "2.1.998"


def _write_cli(package: Path, version: str) -> Path:
    """A pure-JS Claude's cli.js, written as npm writes it (a new file over the path)."""
    package.mkdir(parents=True, exist_ok=True)
    cli = package / "cli.js"
    staged = package / "cli.js.new"
    staged.write_text(
        f"if (process.argv.includes('--version')) {{ console.log('{version} (Claude Code)'); "
        "process.exit(0); }\nsetInterval(() => {}, 1000);\n"
    )
    os.replace(staged, cli)
    return cli


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on PATH")
    return node


async def test_a_pure_js_client_whose_script_is_older_than_it_is_identified(
    tmp_path: Path, started: list[trio.Process]
) -> None:
    cli = _write_cli(tmp_path / "lib/node_modules/@anthropic-ai/claude-code", "1.0.50")
    await trio.sleep(2 * CHANGE_SLACK_NS / 1e9)  # the process starts after the file was written
    started.append(await trio.lowlevel.open_process([_node(), str(cli)], stdout=subprocess.DEVNULL))
    agent = await _found(started[0].pid)
    assert agent.program[-1] == str(cli)
    versions = VersionCache()
    with trio.fail_after(20):
        assert await versions.version_of(agent) == "1.0.50"
        assert await DigestCache().digest_of(agent) == sha256_file(cli)
    assert versions.why_unknown(agent) is None


async def test_a_pure_js_client_whose_script_was_upgraded_under_it_is_unknown_with_its_reason(
    tmp_path: Path, started: list[trio.Process]
) -> None:
    package = tmp_path / "lib/node_modules/@anthropic-ai/claude-code"
    cli = _write_cli(package, "1.0.50")
    await trio.sleep(2 * CHANGE_SLACK_NS / 1e9)
    started.append(await trio.lowlevel.open_process([_node(), str(cli)], stdout=subprocess.DEVNULL))
    agent = await _found(started[0].pid)
    await trio.sleep(2 * CHANGE_SLACK_NS / 1e9)
    _write_cli(package, "1.0.51")  # `npm i -g`: the process keeps 1.0.50's code
    versions, digests = VersionCache(), DigestCache()
    with trio.fail_after(20):
        assert await versions.version_of(agent) is None
        assert await digests.digest_of(agent) is None
    assert versions.spawns == digests.hashes == 0  # nothing ran, nothing was read
    why = versions.why_unknown(agent)
    assert why is not None and f"{cli} changed after the process started" in why, why
    assert "restart" in why


async def test_a_script_changed_while_its_version_is_asked_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[trio.Process]
) -> None:
    package = tmp_path / "lib/node_modules/@anthropic-ai/claude-code"
    cli = _write_cli(package, "1.0.50")
    await trio.sleep(2 * CHANGE_SLACK_NS / 1e9)
    started.append(await trio.lowlevel.open_process([_node(), str(cli)], stdout=subprocess.DEVNULL))
    agent = await _found(started[0].pid)
    real_home = process._probe_home

    def upgrade_then_home() -> str:
        _write_cli(package, "1.0.51")
        return real_home()

    monkeypatch.setattr(process, "_probe_home", upgrade_then_home)
    versions = VersionCache()
    with trio.fail_after(20):
        assert await versions.version_of(agent) is None
    why = versions.why_unknown(agent)
    assert why is not None and "changed" in why, why
