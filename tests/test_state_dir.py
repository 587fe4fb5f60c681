"""The state directory: where it is, that it is private and writable, and its secret files.

The last tests run `akk serve` on a spoiled state directory and check that it
stops at once with one `akk: …` line and exit code 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from akk.store.database import open_store
from akk.store.location import PROBE_FILE, StateDir, StateDirError

AKK = Path(sys.executable).with_name("akk")


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """Make ``path`` unwritable even for root (``chattr +i``), or skip the test."""
    try:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, timeout=10)
    except FileNotFoundError:
        pytest.skip("chattr is not installed")
    if done.returncode != 0:
        pytest.skip(f"chattr +i does not work here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True, timeout=10)


def test_token_is_stable_and_secret_is_separate(state_dir: StateDir) -> None:
    token = state_dir.token()
    assert token == state_dir.token()
    assert len(token) == 43
    assert len(state_dir.id_secret()) == 32
    assert state_dir.id_secret() == state_dir.id_secret()


def test_refuses_a_directory_that_is_not_akks_without_writing_into_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    os.chmod(tmp_path, 0o700)
    with pytest.raises(StateDirError, match="not an AKK state directory"):
        StateDir(tmp_path).ensure()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_refuses_a_directory_others_can_read(tmp_path: Path) -> None:
    path = tmp_path / "akk"
    path.mkdir(mode=0o755)
    os.chmod(path, 0o755)
    with pytest.raises(StateDirError, match="chmod 700"):
        StateDir(path).ensure()


def test_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AKK_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert StateDir.resolve().path == tmp_path / "xdg" / "akk"
    monkeypatch.setenv("AKK_STATE_DIR", str(tmp_path / "env"))
    assert StateDir.resolve().path == tmp_path / "env"
    assert StateDir.resolve(tmp_path / "flag").path == tmp_path / "flag"
    monkeypatch.delenv("AKK_STATE_DIR")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert StateDir.resolve().path == tmp_path / "home" / ".local" / "state" / "akk"


def test_the_write_probe_leaves_nothing_behind(state_dir: StateDir) -> None:
    state_dir.ensure()
    state_dir.ensure()
    assert list(state_dir.path.iterdir()) == []


def test_refuses_a_directory_where_the_write_probe_fails(state_dir: StateDir) -> None:
    # Root passes os.access whatever the mode, so the probe is what catches a
    # directory root cannot write; a directory in the probe's place makes it fail.
    state_dir.ensure()
    (state_dir.path / PROBE_FILE).mkdir()
    with pytest.raises(StateDirError) as refused:
        state_dir.ensure()
    message = str(refused.value)
    assert f"cannot write the state directory {state_dir.path}" in message
    assert f"chmod u+rwx {state_dir.path}" in message and "--state-dir" in message


def test_refuses_a_read_only_directory_before_trying_to_write(state_dir: StateDir) -> None:
    state_dir.ensure()
    with immutable(state_dir.path), pytest.raises(StateDirError) as refused:
        state_dir.ensure()
    message = str(refused.value)
    assert f"cannot write the state directory {state_dir.path}" in message
    assert "(it is not readable, writable and searchable by this user)" in message


def test_refuses_a_state_directory_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StateDirError, match=r"cannot use the state directory .*--state-dir"):
        StateDir(tmp_path / "file" / "akk").ensure()


_BAD_TOKENS = {
    "one character": "x\n",
    "empty": "",
    "two lines": f"{'a' * 43}\n{'b' * 43}\n",
    "too short": "s3cr3t-but-too-short\n",
    "too long": "L" * 44 + "\n",
    "outside the alphabet": "!" * 43 + "\n",
    "not ASCII": "\u00e9" * 43,
}
_BAD_SECRETS = {
    "one character": "x\n",
    "empty": "",
    "two lines": f"{'a' * 64}\n{'b' * 64}\n",
    "too short": "ab" * 31 + "\n",
    "outside the alphabet": "g" * 64 + "\n",
}


def _write_secret(path: Path, value: str) -> None:
    path.write_text(value)
    os.chmod(path, 0o600)


@pytest.mark.parametrize("value", _BAD_TOKENS.values(), ids=_BAD_TOKENS.keys())
def test_refuses_a_token_file_that_holds_no_token(state_dir: StateDir, value: str) -> None:
    state_dir.ensure()
    _write_secret(state_dir.token_path, value)
    with pytest.raises(StateDirError) as refused:
        state_dir.token()
    message = str(refused.value)
    assert message.startswith(f"{state_dir.token_path} ")
    assert f"remove {state_dir.token_path} and run `akk token`" in message
    assert "`akk token create`" in message
    assert "\n" not in message and "s3cr3t" not in message


@pytest.mark.parametrize("value", _BAD_SECRETS.values(), ids=_BAD_SECRETS.keys())
def test_refuses_an_id_secret_file_that_holds_no_secret(state_dir: StateDir, value: str) -> None:
    state_dir.ensure()
    _write_secret(state_dir.secret_path, value)
    with pytest.raises(StateDirError) as refused:
        state_dir.id_secret()
    message = str(refused.value)
    assert f"remove {state_dir.secret_path}" in message
    assert "invalidates every outstanding interaction id" in message
    assert "\n" not in message


def test_accepts_secret_files_written_without_a_final_newline(state_dir: StateDir) -> None:
    state_dir.ensure()
    token, secret = secrets.token_urlsafe(32), secrets.token_hex(32)
    _write_secret(state_dir.token_path, token)
    _write_secret(state_dir.secret_path, secret)
    assert state_dir.token() == token
    assert state_dir.id_secret() == bytes.fromhex(secret)


def test_refuses_secret_files_others_can_read(state_dir: StateDir) -> None:
    state_dir.token()
    os.chmod(state_dir.token_path, 0o644)
    with pytest.raises(StateDirError, match=f"chmod 600 {state_dir.token_path}"):
        state_dir.token()


def _ready_state(path: Path) -> StateDir:
    """A state directory `akk serve` would accept: store, token and id secret in place."""
    state = StateDir(path)
    state.ensure()
    open_store(state.store_path).close()
    state.token()
    state.id_secret()
    return state


def _serve_refuses(state: StateDir) -> str:
    """Run `akk serve` on ``state``; assert it exits 2 with one `akk:` line, return that line."""
    proc = subprocess.Popen(
        [str(AKK), "serve", "--state-dir", str(state.path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # rich wraps at 80 columns when stderr is not a terminal; the check is on the message.
        env={**os.environ, "COLUMNS": "1000"},
    )
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    assert "Traceback" not in err, err
    assert proc.returncode == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("akk: "), err
    return lines[0]


def _truncate_store(state: StateDir) -> None:
    os.truncate(state.store_path, state.store_path.stat().st_size // 2 + 123)


def _loosen_store(state: StateDir) -> None:
    os.chmod(state.store_path, 0o644)


def _spoil_token(state: StateDir) -> None:
    _write_secret(state.token_path, "x\n")


_SPOILED: dict[str, tuple[Callable[[StateDir], None], str]] = {
    "truncated store": (_truncate_store, "is corrupt (the file is"),
    "store others can read": (_loosen_store, "has mode 644, so other users may read the store"),
    "token holding x": (_spoil_token, "holds 1 character, but the operator token"),
}


@pytest.mark.parametrize("spoil, expected", _SPOILED.values(), ids=_SPOILED.keys())
def test_serve_stops_with_one_line_on_a_spoiled_state_dir(
    tmp_path: Path, spoil: Callable[[StateDir], None], expected: str
) -> None:
    state = _ready_state(tmp_path / "akk")
    spoil(state)
    assert expected in _serve_refuses(state)


def test_serve_stops_with_one_line_on_a_read_only_state_dir(tmp_path: Path) -> None:
    state = _ready_state(tmp_path / "akk")
    with immutable(state.path):
        line = _serve_refuses(state)
    assert f"cannot write the state directory {state.path}" in line
