"""A qualification runs exactly the binary it hashed: a private copy, never the path.

Stand-ins (shell scripts, a pure-JS package run by the system's node, an npm
wrapper's layout) record every path they are started from; the file at the
path is swapped or removed under the qualification, as an upgrade or someone
else would, and only the copy it hashed ever runs.
"""

from __future__ import annotations

import os
import platform
import pwd
import shutil
import stat
import types
from pathlib import Path

import pytest
import trio

from akk.discovery.identity import TerminalIdentity
from akk.discovery.process import VersionCache, sha256_file
from akk.profiles.registry import PINNED
from akk.qualify import qualification
from akk.qualify.auto import AutoQualifier
from akk.qualify.qualification import QualifyError


def recorder(path: Path, line: str, log: Path) -> Path:
    """An executable that appends the path it runs from to `log`, then prints `line` for
    --version (and exits 1 for anything else)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'#!/bin/sh\necho "$0" >> {log}\n[ "$1" = --version ] && echo "{line}" && exit 0\nexit 1\n'
    )
    path.chmod(0o755)
    return path


def ran(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def test_the_probe_hashes_copies_and_runs_only_the_copy(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    path = recorder(tmp_path / "bin" / "claude", "2.1.999 (Claude Code)", log)
    sha = sha256_file(path)
    with trio.fail_after(20):
        async with qualification.pinned("claude", path) as found:
            assert (found.version, found.path, found.sha256) == ("2.1.999", path, sha)
            copy = found.copy
            assert copy is not None and copy != path and str(copy).endswith(str(path))
            assert sha256_file(copy) == sha
            assert stat.S_IMODE(copy.stat().st_mode) & 0o022 == 0
            assert ran(log) == [str(copy)]  # --version ran the copy, never the path
            # Whatever lands at the path now, the copy is what the qualification runs.
            recorder(path, "6.6.6 (Claude Code)", tmp_path / "evil.log")
            assert await VersionCache().version_of_program("claude", [str(copy)]) == "2.1.999"
    assert not copy.exists()
    assert not (tmp_path / "evil.log").exists()


async def test_auto_qualify_compares_the_hash_before_anything_runs(tmp_path: Path) -> None:
    """The pane's process ran the good binary; another landed at its path since."""
    good = recorder(tmp_path / "bin" / "claude", "2.1.999 (Claude Code)", tmp_path / "good.log")
    sha = sha256_file(good)
    recorder(good, "2.1.999 (Claude Code)", tmp_path / "evil.log")
    identity = TerminalIdentity(
        "term_x", "/s", "%1", 1, "claude", 2, 3, str(good), "2.1.999", None, None,
        "unpinned_version: claude 2.1.999 has no profile", binary=str(good), binary_sha256=sha,
    )  # fmt: skip
    qualifier = AutoQualifier(
        board=[],  # type: ignore[arg-type]
        store=None,  # type: ignore[arg-type]
        qualified=types.SimpleNamespace(registry=PINNED),  # type: ignore[arg-type]
    )
    with trio.fail_after(20):
        await qualifier.qualify(identity)
    outcome = qualifier.tried[sha]
    assert outcome.startswith("error: ") and "not the binary the pane runs" in outcome, outcome
    assert not ran(tmp_path / "evil.log") and not ran(tmp_path / "good.log")


def _others_group() -> int:
    """A group with a member other than this user and root (giving a file to it takes root)."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another group takes root")
    return next(u.pw_gid for u in pwd.getpwall() if u.pw_uid not in (0, os.getuid()))


@pytest.mark.parametrize(
    ("where", "mode", "others", "why"),
    [
        ("file", 0o757, False, "writable by others \\(every user"),
        ("file", 0o775, True, "writable by others \\(group "),
        ("file", 0o775, False, None),  # its group is root's: nobody else is in it
        ("dir", 0o777, False, "writable by others"),
        ("dir", 0o1777, False, None),  # sticky, as /tmp: nobody else can replace what is ours
    ],
)
async def test_a_binary_others_could_replace_is_refused_and_never_run(
    tmp_path: Path, where: str, mode: int, others: bool, why: str | None
) -> None:
    log = tmp_path / "ran.log"
    path = recorder(tmp_path / "bin" / "claude", "2.1.999 (Claude Code)", log)
    changed = path if where == "file" else path.parent
    if others:
        os.chown(changed, -1, _others_group())
    elif why is None and mode & 0o020 and os.geteuid() != 0:
        pytest.skip("who else is in this user's own group depends on the machine")
    changed.chmod(mode)
    with trio.fail_after(20):
        if why is None:
            async with qualification.pinned("claude", path) as found:
                assert found.version == "2.1.999"
            return
        with pytest.raises(QualifyError, match=why) as refused:
            async with qualification.pinned("claude", path):
                pass
    assert "chmod go-w" in str(refused.value)
    assert not ran(log)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")
async def test_a_binary_another_user_owns_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    path = recorder(tmp_path / "claude", "2.1.999 (Claude Code)", log)
    os.chown(path, 4242, 4242)
    with trio.fail_after(20), pytest.raises(QualifyError, match="owned by uid 4242"):
        async with qualification.pinned("claude", path):
            pass
    assert not ran(log)


def _codex_npm(root: Path, native: bool) -> Path:
    """An npm install of Codex: the node wrapper, and (or not) its platform package."""
    arch = {"x86_64": "x64", "aarch64": "arm64"}[platform.machine()]
    modules = root / "lib" / "node_modules" / "@openai"
    wrapper = modules / "codex" / "bin" / "codex.js"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text("#!/usr/bin/env node\nrequire('fs').writeFileSync('WRAPPER_RAN', '')\n")
    wrapper.chmod(0o755)
    if native:
        triple = f"{platform.machine()}-unknown-linux-musl"
        binary = modules / f"codex-linux-{arch}" / "vendor" / triple / "bin" / "codex"
        recorder(binary, "codex-cli 0.172.0", root / "ran.log")
    (root / "bin").mkdir()
    (root / "bin" / "codex").symlink_to(wrapper)
    return root / "bin" / "codex"


async def test_an_npm_wrapper_is_qualified_as_the_native_binary_it_starts(tmp_path: Path) -> None:
    on_path = _codex_npm(tmp_path, native=True)
    with trio.fail_after(20):
        async with qualification.pinned("codex", on_path) as found:
            assert found.version == "0.172.0"
            assert found.path.name == "codex" and "codex-linux-" in str(found.path)
            assert found.sha256 == sha256_file(found.path)
            assert ran(tmp_path / "ran.log") == [str(found.copy)]


async def test_an_npm_wrapper_without_its_native_binary_is_refused(tmp_path: Path) -> None:
    on_path = _codex_npm(tmp_path, native=False)
    with trio.fail_after(20), pytest.raises(QualifyError, match="npm wrapper") as refused:
        async with qualification.pinned("codex", on_path):
            pass
    assert "--binary" in str(refused.value)
    assert not (tmp_path / "WRAPPER_RAN").exists()


async def test_a_pure_js_client_runs_from_a_copy_of_its_whole_package(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("no node on PATH")
    package = tmp_path / "lib" / "node_modules" / "@anthropic-ai" / "claude-code"
    (package / "vendor").mkdir(parents=True)
    (package / "vendor" / "yoga.wasm").write_text("1.0.50")
    cli = package / "cli.js"
    cli.write_text(
        "#!/usr/bin/env node\nconst fs = require('fs');\n"
        "const v = fs.readFileSync(__dirname + '/vendor/yoga.wasm', 'utf8');\n"
        "if (process.argv.includes('--version')) console.log(v + ' (Claude Code)');\n"
    )
    cli.chmod(0o755)
    with trio.fail_after(20):
        async with qualification.pinned("claude", cli) as found:
            assert (found.version, found.path) == ("1.0.50", cli)
            assert found.sha256 == sha256_file(cli)  # the script, as discovery hashes it
            assert found.copy is not None
            shutil.rmtree(package)  # the install goes; the copy keeps the package it ran with
            again = await VersionCache().version_of_program("claude", [str(found.copy)])
            assert again == "1.0.50"
