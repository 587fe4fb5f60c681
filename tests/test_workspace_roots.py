"""Workspace roots: canonical comparison, refused roots, narrowing, and the credential store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from akk.store import credentials
from akk.store.credentials import Credential, Scope
from akk.store.database import open_store
from akk.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from akk.workspace_roots import (
    RootError,
    allows,
    canonical,
    check_roots,
    pane_allowed,
    refusal,
    within,
)


def test_a_root_covers_whole_path_components_only() -> None:
    assert within("/home/a", "/home/a")
    assert within("/home/a/b/c", "/home/a")
    assert not within("/home/ab", "/home/a")
    assert not within("/home/a-b/c", "/home/a")
    assert not within("/home", "/home/a")


def test_canonical_sees_dots_slashes_and_symlinks_for_what_they_are(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "escape").symlink_to("/etc")
    (work / "inside").symlink_to(work / "sub")
    assert canonical(f"{work}/sub/") == str(work / "sub")
    assert canonical(f"{work}//sub/../sub/.") == str(work / "sub")
    assert canonical(f"{work}/sub/../..") == str(tmp_path)
    assert canonical(str(work / "escape")) == "/etc"
    assert canonical(str(work / "inside")) == str(work / "sub")
    assert canonical(f"{work}/escape/..") == "/"  # the symlink is followed before ".."


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("relative/dir", "not absolute"),
        ("/no/such/dir/anywhere", "not a directory"),
        ("/etc/hostname", "not a directory"),
        ("/tmp/a\x00b", "NUL"),
        ("/tmp/x\udcc2", "surrogate"),
        ("", "absolute directory"),
    ],
)
def test_canonical_refuses_what_cannot_be_a_directory(path: str, why: str) -> None:
    with pytest.raises(RootError, match=why):
        canonical(path, what="cwd")


@pytest.mark.parametrize(
    ("root", "home", "refused"),
    [
        ("/", "/home/u", "whole machine"),
        ("/etc", "/home/u", "/etc is a system directory"),
        ("/usr/local/src", "/home/u", "/usr is a system directory"),
        ("/var/tmp/x", "/home/u", "/var is a system directory"),
        ("/proc/self", "/home/u", "/proc"),
        ("/lib64", "/home/u", "/lib64"),
        ("/root", "/home/u", "superuser's home"),
        ("/root/project", "/home/u", "superuser's home"),
        ("/home", "/home/u", "other users'"),
        ("/tmp", "/home/u", "other users'"),
        ("/var/lib", "/var/lib/svc", "/var is a system directory"),
        ("/etc", "/", "/etc is a system directory"),
        ("/usr/x", "/usr", "/usr is a system directory"),
    ],
)
def test_the_machine_and_system_directories_are_never_roots(
    root: str, home: str, refused: str
) -> None:
    why = refusal(root, home)
    assert why is not None and refused in why


@pytest.mark.parametrize(
    ("root", "home"),
    [
        ("/home/u", "/home/u"),
        ("/home/u/project", "/home/u"),
        ("/home/other/shared", "/home/u"),
        ("/tmp/build", "/home/u"),
        ("/root", "/root"),  # root's own home, when root serves
        ("/root/project", "/root"),
        ("/var/lib/svc", "/var/lib/svc"),  # a service account's home
        ("/var/lib/svc/work", "/var/lib/svc"),
        ("/srv/projects", "/home/u"),
    ],
)
def test_homes_and_project_directories_may_be_roots(root: str, home: str) -> None:
    assert refusal(root, home) is None


def test_check_roots_refuses_a_symlink_into_a_system_directory(tmp_path: Path) -> None:
    (tmp_path / "etc-link").symlink_to("/etc")
    with pytest.raises(RootError, match=r"etc-link \(really /etc\) is refused: /etc is a system"):
        check_roots([str(tmp_path / "etc-link")], home="/home/u")
    with pytest.raises(RootError, match="/ is the whole machine"):
        check_roots([f"{tmp_path}/../../../../../.."], home="/home/u")
    (tmp_path / "a").mkdir()
    assert check_roots([f"{tmp_path}/a/", str(tmp_path / "a")], home="/home/u") == (
        str(tmp_path / "a"),
    )


def test_the_default_root_is_the_serving_user_s_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from akk.workspace_roots import default_roots

    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_roots() == (str(tmp_path),)
    monkeypatch.setenv("HOME", "/")
    with pytest.raises(RootError, match="whole machine"):
        default_roots()


def test_a_credential_s_roots_narrow_the_server_s(tmp_path: Path) -> None:
    server = ("/home/u",)
    assert allows("/home/u/p", server, ())
    assert not allows("/home/ux", server, ())
    assert allows("/home/u/p/q", server, ("/home/u/p",))
    assert not allows("/home/u/other", server, ("/home/u/p",))
    assert not allows("/srv/x", server, ("/srv",))  # outside the server's, whatever it holds
    # Panes: only a narrowed credential is bounded, by its own roots (after realpath).
    (tmp_path / "p").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "p")
    assert pane_allowed("/anywhere", ())
    assert pane_allowed(str(tmp_path / "link"), (str(tmp_path / "p"),))
    assert not pane_allowed(str(tmp_path), (str(tmp_path / "p"),))
    assert not pane_allowed(None, (str(tmp_path / "p"),))


# The store: credentials keep their roots (schema v6)


def _v5_store(path: Path) -> apsw.Connection:
    """A store at schema v5, as an older akk left it (owner-only, like open_store makes it)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = ON")
    with conn:
        for version, sql in enumerate(MIGRATIONS[:5], start=1):
            conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    return conn


def test_a_v5_store_migrates_to_v6_keeping_its_credentials_unnarrowed(tmp_path: Path) -> None:
    path = tmp_path / "akk.sqlite3"
    old = _v5_store(path)
    with old:
        old.execute(
            "INSERT INTO credentials (controller_id, token_sha256, created_at) VALUES (?, ?, 0)",
            ("ctl", "a" * 64),
        )
    old.close()
    conn = open_store(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert credentials.live_digests(conn) == {"a" * 64: Credential("ctl", Scope.CONTROLLER, ())}
    assert [row["workspace_roots"] for row in credentials.listing(conn)] == [[]]
    # Roots minted on the migrated store come back as given; a malformed value is refused.
    with conn:
        minted = credentials.create(conn, "narrow", 1.0, actor="test", roots=("/w/a", "/w/b"))
    listed = {row["controller_id"]: row["workspace_roots"] for row in credentials.listing(conn)}
    assert listed == {"ctl": [], "narrow": ["/w/a", "/w/b"]}
    proven = credentials.live_digests(conn)
    assert Credential("narrow", Scope.CONTROLLER, ("/w/a", "/w/b")) in proven.values()
    assert minted.token not in json.dumps(listed)
    with pytest.raises(apsw.ConstraintError), conn:
        conn.execute("UPDATE credentials SET workspace_roots = '\"/w\"'")
    conn.close()


# The operator CLI: serve, token and doctor


def _akk(state: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AKK_STATE_DIR": str(state), "COLUMNS": "1000",
           "TMUX_TMPDIR": str(state.parent)}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "akk", *args], env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def test_the_cli_sets_shows_and_refuses_roots(tmp_path: Path) -> None:
    state = tmp_path / "akk"
    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    created = _akk(state, "token", "create", "offline", "--workspace-root", f"{project}/", "--json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["workspace_roots"] == [str(project)]
    for bad, why in (("/etc", "/etc is a system directory"), (str(tmp_path / "no"), "not a dir")):
        refused = _akk(state, "token", "create", "wide", "--workspace-root", bad)
        assert (
            refused.returncode == 2 and why in refused.stderr and "Traceback" not in refused.stderr
        )
    started = _akk(state, "serve", "--port", "0", "--workspace-root", "/usr/share", timeout=30)
    assert started.returncode == 2, started.stderr
    assert started.stderr.startswith("akk: workspace root /usr/share is refused: /usr is a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "akk", "serve", "--port", "0", "--state-dir", str(state),
         "--tmux-socket", str(tmp_path / "no-tmux"), "--workspace-root", str(project),
         "--workspace-root", str(other)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and "listening on" in proc.stdout.readline()
        online = _akk(state, "token", "create", "online", "--workspace-root", str(other), "--json")
        assert online.returncode == 0, online.stderr
        assert json.loads(online.stdout)["workspace_roots"] == [str(other)]
        refused = _akk(state, "token", "create", "root", "--workspace-root", "/")
        assert refused.returncode == 2 and "/ is the whole machine" in refused.stderr
        listed = _akk(state, "token", "list")
        assert listed.returncode == 0, listed.stderr
        rows = {line.split("│")[1].strip(): line for line in listed.stdout.splitlines()
                if line.count("│") > 2}  # fmt: skip
        assert str(project) in rows["offline"] and str(other) in rows["online"]
        doctor = _akk(state, "doctor", "--port", "0")
        (line,) = [line for line in doctor.stdout.splitlines() if "workspace roots" in line]
        assert f"{project}, {other}" in line
        assert "ws:// (plaintext)" in doctor.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
