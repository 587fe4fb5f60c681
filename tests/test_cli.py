"""The operator CLI as a person runs it: real `akk` processes."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.cli import app, listing, records, turns
from akk.cli.errors import CliError
from akk.cli.qualify import record_qualification
from akk.cli.server_calls import terminal_id
from akk.client import ConnectError, connect
from akk.store.database import open_store
from akk.store.location import StateDir
from akk.store.qualifications import Qualification
from akk.store.schema import SCHEMA_VERSION

AKK = [sys.executable, "-m", "akk"]


def _env(state: Path) -> dict[str, str]:
    # A private TMUX_TMPDIR: the server watches no tmux server of the person running the tests.
    return {
        **os.environ,
        "AKK_STATE_DIR": str(state),
        "COLUMNS": "250",
        "TMUX_TMPDIR": str(state.parent),
    }


def akk(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AKK, *args], env=_env(state), capture_output=True, text=True, timeout=60, check=False
    )


@contextlib.contextmanager
def serving(state: Path, *args: str) -> Iterator[str]:
    """A real `akk serve --port 0 ARGS`; yields its listening line. Stopped with SIGINT on
    the way out, it must exit 0."""
    proc = _start_serve(state, *args)
    try:
        yield _listening_line(proc)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, float]]:
    """A real `akk serve --port 0`; yields (state dir, url, seconds until it listened)."""
    state = tmp_path / "akk"
    began = time.monotonic()
    with serving(state) as line:
        yield state, line.split()[4], time.monotonic() - began
    assert not (state / "endpoint.json").exists()


def _start_serve(state: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*AKK, "serve", "--port", "0", *args],
        env=_env(state),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _listening_line(proc: subprocess.Popen[str]) -> str:
    """The server's first line, read with a deadline (a hung server fails, never hangs)."""
    assert proc.stdout is not None and proc.stderr is not None
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(30)
    if not line or "listening on ws://127.0.0.1:" not in line[0]:
        proc.kill()
        raise AssertionError(f"akk serve did not start: {line} {proc.stderr.read()}")
    return line[0]


def test_serve_starts_and_list_prints_an_empty_table(served: tuple[Path, str, float]) -> None:
    state, url, elapsed = served
    print(f"akk serve listened after {elapsed:.2f} s")
    listed = akk(state, "list")
    assert listed.returncode == 0, listed.stderr
    assert "terminals" in listed.stdout and "agent" in listed.stdout
    as_json = akk(state, "list", "--json")
    assert json.loads(as_json.stdout) == {
        "terminals": [],
        "turns": [],
        "watches": [],
        "sessions": [],
        "omitted": {"turns": 0, "watches": 0, "sessions": 0, "terminals": 0},
    }
    endpoint = json.loads((state / "endpoint.json").read_text())
    assert url == f"ws://127.0.0.1:{endpoint['port']}/v1"


def test_second_serve_on_a_taken_port_says_what_to_do(
    served: tuple[Path, str, float], tmp_path: Path
) -> None:
    _, url, _ = served
    port = url.rsplit(":", 1)[1].split("/")[0]
    second = akk(tmp_path / "other", "serve", "--port", port)
    assert second.returncode == 2
    assert "--port" in second.stderr and "akk doctor" in second.stderr
    assert "Traceback" not in second.stderr


def test_second_serve_on_the_same_state_dir_names_the_first(
    served: tuple[Path, str, float],
) -> None:
    state, url, _ = served
    pid = json.loads((state / "endpoint.json").read_text())["pid"]
    second = akk(state, "serve", "--port", "0")
    assert second.returncode == 2
    assert f"PID {pid}" in second.stderr and url in second.stderr
    assert "Traceback" not in second.stderr
    # The first one still serves, and its endpoint file is intact.
    assert akk(state, "list").returncode == 0


def test_a_stale_endpoint_never_gets_the_token(tmp_path: Path) -> None:
    """After SIGKILL, whatever listens on the old port receives no credential."""
    state = tmp_path / "akk"
    proc = _start_serve(state)
    _listening_line(proc)
    endpoint = json.loads((state / "endpoint.json").read_text())
    proc.kill()
    proc.wait(10)
    token = akk(state, "token").stdout.strip()
    received: list[bytes] = []
    with socket.socket() as stand_in:
        stand_in.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        stand_in.bind(("127.0.0.1", endpoint["port"]))
        stand_in.listen()
        stand_in.settimeout(0.2)
        finished = threading.Event()

        def accept_all() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    peer, _ = stand_in.accept()
                except TimeoutError:
                    if finished.is_set():
                        return  # the CLI has exited: its connections were all taken
                    continue
                with peer:
                    peer.settimeout(2)
                    with contextlib.suppress(TimeoutError):
                        received.append(peer.recv(65536))

        listener = threading.Thread(target=accept_all, daemon=True)
        listener.start()
        listed = akk(state, "list")
        assert listed.returncode == 2
        assert f"stale endpoint from PID {endpoint['pid']}" in listed.stderr
        # Even a live PID with a wrong listener (the PID reused) gets nothing but a challenge.
        fake = {**endpoint, "pid": os.getpid()}
        (state / "endpoint.json").write_text(json.dumps(fake))
        held = os.open(state, os.O_RDONLY)
        fcntl.flock(held, fcntl.LOCK_EX)  # as if a server held the directory
        try:
            listed = akk(state, "list")
        finally:
            os.close(held)
            finished.set()
        listener.join(30)
    assert listed.returncode == 2
    assert "did not prove" in listed.stderr and "no credential was sent" in listed.stderr
    assert received, "the CLI never tried the stand-in"
    assert all(token.encode() not in data for data in received)
    assert all(b"authorization" not in data.lower() for data in received)


def test_tokens_are_minted_listed_and_revoked_with_or_without_a_server(
    served: tuple[Path, str, float], tmp_path: Path
) -> None:
    # Offline: straight into the store, under the state directory's lock.
    offline = tmp_path / "offline"
    made = akk(offline, "token", "create", "ci-bot")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().startswith("akkc_") and "shown only now" in made.stderr
    listed = json.loads(akk(offline, "token", "list", "--json").stdout)
    assert [c["controller_id"] for c in listed["credentials"]] == ["ci-bot"]
    again = akk(offline, "token", "create", "ci-bot")
    assert again.returncode == 2 and "revoke" in again.stderr
    assert akk(offline, "token", "revoke", "ci-bot").returncode == 0
    assert json.loads(akk(offline, "token", "list", "--json").stdout)["credentials"] == []
    # Online: through the running server, which takes the change at once.
    state, url, _ = served
    token = akk(state, "token", "create", "live-bot", "--json")
    assert token.returncode == 0, token.stderr
    minted = json.loads(token.stdout)
    assert minted["controller_id"] == "live-bot"

    async def hello() -> str:
        with trio.fail_after(10):
            async with connect(url, minted["token"]) as ctl:
                return str(ctl.server["controller_id"])

    assert trio.run(hello) == "live-bot"
    table = akk(state, "token", "list")
    assert "live-bot" in table.stdout and minted["token"] not in table.stdout
    assert akk(state, "token", "revoke", "live-bot").returncode == 0
    with pytest.raises(ConnectError, match="401"):
        trio.run(hello)
    bad = akk(state, "token", "create", "akk-cli")
    assert bad.returncode == 2 and "operator" in bad.stderr


def test_list_without_a_server_says_how_to_start_one(tmp_path: Path) -> None:
    result = akk(tmp_path / "akk", "list")
    assert result.returncode == 2
    assert "akk serve" in result.stderr


def test_token_is_printed_and_stable(tmp_path: Path) -> None:
    first = akk(tmp_path / "akk", "token")
    assert first.returncode == 0
    assert first.stdout.strip() == akk(tmp_path / "akk", "token").stdout.strip()
    assert (tmp_path / "akk" / "token").stat().st_mode & 0o777 == 0o600


def test_doctor_reports_each_check(served: tuple[Path, str, float]) -> None:
    state, _, _ = served
    result = akk(state, "doctor", "--port", "0")
    assert result.returncode == 0, result.stdout
    for name in ("tmux", "state dir", "store", "port"):
        assert name in result.stdout
    assert f"schema v{SCHEMA_VERSION}" in result.stdout
    assert "server" in result.stdout and "watcher" in result.stdout


def test_doctor_fails_on_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    os.chmod(tmp_path, 0o700)
    result = akk(tmp_path, "doctor")
    assert result.returncode == 1
    assert "FAIL" in result.stdout and "not an AKK state directory" in result.stdout


def test_serve_refuses_a_foreign_directory_at_once(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    os.chmod(tmp_path, 0o700)
    result = akk(tmp_path, "serve", "--port", "0")
    assert result.returncode == 2
    assert "not an AKK state directory" in result.stderr


def test_schema_is_json_with_every_method() -> None:
    result = subprocess.run([*AKK, "schema"], capture_output=True, text=True, check=True)
    schema = json.loads(result.stdout)
    assert set(schema["methods"]) >= {
        "hello",
        "list",
        "send",
        "status",
        "respond_interaction",
        "approve",
        "respond",
        "cancel",
        "close",
        "watch",
        "unwatch",
        "renew",
        "recover",
        "retry_callback",
        "ack",
    }


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _classify(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    label = json.loads(path.with_suffix(".json").read_text())
    return subprocess.run(
        [*AKK, "screen", "classify", str(path), "--agent", label["agent"],
         "--version", label["version"], "--cols", str(label["cols"]),
         "--rows", str(label["rows"]), *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_screen_classify_prints_the_projection_of_a_fixture() -> None:
    done = _classify(FIXTURES / "claude/2.1.263/questionnaire_single3-q1.ansi", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"state", "profile", "projection", "reason"}
    assert (result["state"], result["profile"], result["reason"]) == (
        "questionnaire", "claude-code@2.1.263", None,
    )  # fmt: skip
    (question,) = result["projection"]["questions"]
    assert question["prompt"] == "Which color do you prefer?"
    assert [o["label"] for o in question["options"]] == ["Red", "Blue", "Green"]
    assert "fingerprint" not in done.stdout and "region" not in done.stdout


def test_screen_classify_shows_a_person_s_prompt_as_a_server_does(tmp_path: Path) -> None:
    typed = FIXTURES / "claude/2.1.332/questionnaire_single2-free_text_typed.ansi"
    secret = tmp_path / typed.name
    secret.write_text(
        typed.read_text().replace("Which color do you prefer?", "Enter your API key:")
    )
    shutil.copy(typed.with_suffix(".json"), secret.with_suffix(".json"))
    for path, reason in ((typed, "editor_in_use"), (secret, "secret_input")):
        result = json.loads(_classify(path, "--json").stdout)
        projection = result["projection"]
        assert (projection["state"], projection["manual_reason"]) == ("manual_required", reason)
        assert projection["questions"] == []
        assert "Teal, please" not in json.dumps(result)  # what the person typed
        text = _classify(path).stdout
        assert "step 1 of 1" in text and f"manual:  {reason}" in text, text
    # The same question, no text typed: answerable.
    empty = json.loads(_classify(typed.with_name("questionnaire_single2-q1.ansi"), "--json").stdout)
    assert empty["projection"]["state"] == "pending"


def test_screen_classify_private_adds_region_and_fingerprint() -> None:
    done = _classify(FIXTURES / "codex/0.169.0/codex_exec-permission.ansi", "--json", "--private")
    result = json.loads(done.stdout)
    assert result["state"] == "permission"
    assert result["projection"]["decisions"] == ["approve_once", "reject"]
    assert len(bytes.fromhex(result["private"]["fingerprint"])) == 32
    assert result["private"]["region"]["bottom"] > result["private"]["region"]["top"]


def test_screen_classify_refuses_an_unpinned_version_and_a_wrong_size() -> None:
    path = FIXTURES / "claude/2.1.263/claude_bash-permission.ansi"
    unpinned = subprocess.run(
        [*AKK, "screen", "classify", str(path), "--agent", "claude", "--version", "2.1.999",
         "--cols", "120", "--rows", "40", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(unpinned.stdout)
    assert (result["state"], result["profile"], result["projection"]) == ("unknown", None, None)
    assert result["reason"].startswith("unpinned_version")
    wrong = subprocess.run(
        [*AKK, "screen", "classify", str(path), "--agent", "claude", "--version", "2.1.263",
         "--cols", "80", "--rows", "24"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert wrong.returncode == 2 and "--cols" in wrong.stderr


def _record_params(*argv: str) -> dict[str, object]:
    """The params `akk NAME ARGS...` sends, parsed as the CLI parses them (no server)."""
    name, *rest = argv
    command = next(c for c in records.COMMANDS if c.name == name)
    parser = argparse.ArgumentParser()
    records.add_arguments(parser, command)
    args = parser.parse_args(rest)
    return records.params(command, args.target, vars(args))


def test_record_commands_name_the_record_by_its_kind() -> None:
    assert _record_params("watch", "term_1") == {"terminal_id": "term_1"}
    assert _record_params("unwatch", "watch_1") == {"watch_id": "watch_1"}
    # close and unwatch pass the id as given: the server says which one a record needs.
    assert _record_params("close", "watch_1") == {"turn_id": "watch_1"}
    assert _record_params("unwatch", "turn_1") == {"watch_id": "turn_1"}
    assert _record_params("renew", "watch_1", "--minutes", "5") == {
        "watch_id": "watch_1", "minutes": 5,
    }  # fmt: skip
    assert _record_params("renew", "turn_1") == {"turn_id": "turn_1"}
    assert _record_params("recover", "turn_1") == {"turn_id": "turn_1"}
    assert _record_params("retry-callback", "watch_1", "--notification", "ntf_1") == {
        "watch_id": "watch_1", "notification_id": "ntf_1",
    }  # fmt: skip
    assert records.record_ids("watch_9") == {"watch_id": "watch_9"}
    assert records.record_ids("turn_9") == {"turn_id": "turn_9"}


def test_watch_names_one_task_a_terminal_or_a_thread_or_a_session(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    thread, session = "01a22d2c-f249-7693-9f76-b873572d1b60", "fe073203-b653-4840-a846-a6841eab0343"
    assert _record_params("watch", "--codex-thread", thread, "--codex-home", "/h/codex") == {
        "thread_id": thread, "codex_home": "/h/codex",
    }  # fmt: skip
    # Without a directory: the agent's own default, from the environment AKK's CLI runs in.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    assert _record_params("watch", "--claude-session", session) == {
        "claude_session_id": session, "claude_config_dir": str(tmp_path / "claude"),
    }  # fmt: skip
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _record_params("watch", "--codex-thread", thread)["codex_home"] == str(
        tmp_path / ".codex"
    )
    for both in (("term_1", "--codex-thread", thread), ("--claude-session", session,
                 "--codex-thread", thread), ()):  # fmt: skip
        with pytest.raises(CliError, match="name one task"):
            _record_params("watch", *both)


def _summary(name: str, result: dict[str, object]) -> list[str]:
    command = next(c for c in records.COMMANDS if c.name == name)
    return records.summary(command, result)


_WATCH = {
    "turn_id": None, "watch_id": "watch_1", "task_kind": "watch", "state": "running",
    "observation_state": "observing", "management_state": "none",
    "deadline_at": 1_800_000_000.25, "controller_id": "akk-cli", "round": 1,
}  # fmt: skip


def test_recover_summary_aligns_the_fields_a_person_reads() -> None:
    result = _WATCH | {
        "supervised": True,
        "verification": {"terminal": "present", "evidence": "bound", "task": "verified"},
    }
    lines = _summary("recover", result)
    assert [line.split(":", 1)[0] for line in lines] == [
        "record", "kind", "state", "observation", "management", "deadline", "verification",
        "supervised",
    ]  # fmt: skip
    assert len({line.index(line.split()[1]) for line in lines}) == 1, lines  # one value column
    shown = dict(line.split(None, 1) for line in lines)
    assert shown["record:"] == "watch_1" and shown["supervised:"] == "yes"
    assert shown["verification:"] == "terminal present, evidence bound, task verified"
    assert datetime.datetime.fromisoformat(shown["deadline:"]).timestamp() == 1_800_000_000


def test_summaries_show_each_command_s_own_fields() -> None:
    unwatched = _summary("unwatch", _WATCH | {"observation_state": "stopped", "withdrawn": 0})
    assert "observation: stopped" in unwatched and "withdrawn:   0" in unwatched
    renewed = _summary("renew", _WATCH | {"renewed": False, "available_actions": []})
    assert renewed[-1] == "renewed:     no" and not any("actions" in x for x in renewed)
    # close answers with the record's id and states only: absent fields are left out.
    closed = {"turn_id": "turn_1", "management_state": "closed", "state": "done"}
    assert _summary("close", closed) == [
        "record:     turn_1", "state:      done", "management: closed",
    ]  # fmt: skip
    retried = {
        "notification_id": "ntf_1", "event_id": "evt_1", "kind": "done",
        "state": "pending", "attempts": 6, "retries": 1,
    }  # fmt: skip
    assert _summary("retry-callback", retried) == [
        "notification: ntf_1", "kind:         done", "delivery:     pending",
        "event_id:     evt_1", "attempts:     6", "retries:      1",
    ]  # fmt: skip


def test_record_commands_are_listed_with_their_options() -> None:
    helped = subprocess.run([*AKK, "--help"], capture_output=True, text=True, check=True)
    for name in ("watch", "unwatch", "cancel", "close", "renew", "recover", "retry-callback"):
        assert name in helped.stdout
    description = " ".join(helped.stdout.split("\n\n")[1].split())
    assert description.startswith("AKK's operator CLI") and description.endswith(".")
    assert "docs/cli.md" in helped.stdout
    renew = subprocess.run([*AKK, "renew", "--help"], capture_output=True, text=True, check=True)
    assert "--minutes N" in renew.stdout and "--json" in renew.stdout
    watch = subprocess.run([*AKK, "watch", "--help"], capture_output=True, text=True, check=True)
    assert "%3" in watch.stdout and "[TERMINAL]" in watch.stdout
    assert "[[TERMINAL]]" not in watch.stdout
    bad = subprocess.run([*AKK, "renew", "watch_1", "--minutes", "soon"], capture_output=True,
                         text=True, check=False)  # fmt: skip
    assert bad.returncode == 2 and "invalid int value" in bad.stderr


_HEAVY = ("trio", "apsw", "jsonschema", "pyte", "mcp", "akk.profiles.registry",
         "akk.evidence.model", "akk.qualify.qualification", "akk.server.instance")  # fmt: skip
"""What every `akk` run would pay for if the command line imported the commands."""

_PARSE_EVERY_HELP = """
import argparse, contextlib, io, sys
from akk.cli.app import parser

def helps(p, argv):
    yield [*argv, "--help"]
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from helps(sub, [*argv, name])

top = parser()
for argv in [*helps(top, []), ["send", "--scope", "t/r", "x"], ["gc", "--older-than", "1"]]:
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
        parser().parse_args(argv)
print(" ".join(name for name in sys.argv[1:] if name in sys.modules))
"""


def test_the_command_line_and_its_help_import_no_command() -> None:
    # The command line is built on every run: a heavy import here slows every command.
    loaded = subprocess.run(
        [sys.executable, "-c", _PARSE_EVERY_HELP, *_HEAVY], capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert loaded.stdout.split() == []


def test_record_commands_without_a_server_say_how_to_start_one(tmp_path: Path) -> None:
    for argv in (("unwatch", "watch_1"), ("status", "watch_1"), ("retry-callback", "turn_1")):
        result = akk(tmp_path / "akk", *argv)
        assert result.returncode == 2, argv
        assert result.stderr.startswith("akk: ") and "akk serve" in result.stderr
        assert "Traceback" not in result.stderr


def _send_target(*argv: str) -> dict[str, object]:
    """Where `akk send ARGS...` sends, parsed as the CLI parses it (no server)."""
    args = app.parser().parse_args(["send", *argv])
    return turns.send_target(args)


def test_send_into_a_terminal_is_parsed_as_before() -> None:
    args = app.parser().parse_args(["send", "%3", "fix it", "--wait", "--id", "r1"])
    assert (args.terminal, args.text, args.wait, args.client_request_id) == (
        "%3", "fix it", True, "r1",
    )  # fmt: skip
    assert _send_target("%3", "fix it") == {}


def test_send_with_scope_goes_through_a_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _send_target("--scope", "fix-login/coder", "fix it") == {
        "scope": {"task": "fix-login", "role": "coder"},
        "backend": "codex_app_server",
        "cwd": str(tmp_path),
    }
    assert _send_target(
        "fix it", "--scope", "t1/reviewer/api", "--backend", "codex_app_server",
        "--cwd", "sub", "--fresh-context", "So far: the login test fails.",
    ) == {
        "scope": {"task": "t1", "role": "reviewer", "unit": "api"},
        "backend": "codex_app_server",
        "cwd": str(tmp_path / "sub"),
        "handoff": "So far: the login test fails.",
    }  # fmt: skip


def test_send_refuses_a_terminal_and_a_scope_together_or_neither() -> None:
    refusals = {
        ("%3", "fix it", "--scope", "t1/coder"): "leave TERMINAL out",
        ("fix it",): "say where the task goes",
        ("%3", "fix it", "--cwd", "/tmp"): "--cwd only go with --scope",
        ("%3", "fix it", "--fresh-context", "h"): "--fresh-context only go with --scope",
        ("%3", "x", "--backend", "codex_app_server"): "--backend only go with --scope",
    }
    for argv, message in refusals.items():
        with pytest.raises(CliError, match=message):
            _send_target(*argv)


@pytest.mark.parametrize(
    "argv",
    [
        ("--scope", "t1", "x"),
        ("--scope", "t1/coder/u/extra", "x"),
        ("--scope", "t1//u", "x"),
        ("--scope", "t1/coder", "--backend", "terminal", "x"),
    ],
)
def test_send_refuses_a_malformed_scope_or_backend(argv: tuple[str, ...]) -> None:
    result = subprocess.run(
        [*AKK, "send", *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--scope" in result.stderr or "--backend" in result.stderr


def test_send_without_a_target_says_how_to_name_one(tmp_path: Path) -> None:
    result = akk(tmp_path / "akk", "send", "fix it")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("akk: say where the task goes")


def test_sessions_lists_owner_scope_thread_decision_and_state() -> None:
    from rich.console import Console

    current = {
        "session_id": "sess_1", "controller_id": "ctl", "backend": "claude_headless",
        "scope": {"task": "fix-login", "role": "coder", "unit": None}, "workspace": "/w",
        "generation": 2, "thread_id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
        "history": "persisted", "checkpoint": None,
        "decision": {"action": "rebuild", "reason": "context_limit"},
        "replaces": "sess_0", "retired_at": None, "retire_reason": None, "created_at": 1.0,
        "latest_invocation": {"dispatch": "accepted", "outcome": "pending"},
    }  # fmt: skip
    retired = current | {
        "session_id": "sess_0", "generation": 1, "thread_id": None, "history": "unknown",
        "decision": {"action": "create", "reason": "new_scope_or_role"}, "replaces": None,
        "retired_at": 2.0, "retire_reason": "context_limit", "latest_invocation": None,
    }  # fmt: skip
    console = Console(record=True, width=250)
    console.print(listing.sessions_table([current, retired]))
    text = console.export_text()
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in text.splitlines()
        if "fix-login" in line
    ]
    assert rows == [
        ["ctl", "claude_headless", "fix-login", "-", "coder", "0199a1b2-c3d…", "rebuild",
         "context_limit", "persisted, accepted pending", "2"],
        ["ctl", "claude_headless", "fix-login", "-", "coder", "-", "create",
         "new_scope_or_role", "unknown (retired: context_limit)", "1"],
    ]  # fmt: skip
    helped = subprocess.run([*AKK, "--help"], capture_output=True, text=True, check=True)
    assert "sessions" in helped.stdout


def test_sessions_and_a_scope_send_against_a_real_server(
    served: tuple[Path, str, float],
) -> None:
    state, _, _ = served
    listed = akk(state, "sessions")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("no sessions")
    assert json.loads(akk(state, "sessions", "--json").stdout) == {"sessions": []}
    # The server takes the params' shape and checks the workspace (before any Codex starts).
    missing = state.parent / "missing"
    sent = akk(state, "send", "--scope", "t1/coder", "--cwd", str(missing), "fix it")
    assert sent.returncode == 2 and "Traceback" not in sent.stderr, sent.stderr
    assert sent.stderr.startswith("akk: the server said invalid_params: cwd "), sent.stderr
    assert "not a directory" in sent.stderr


HOSTILE_NAME = "[/]\x1b]52;c;aGk=\x07[bold]\x9b31m\u202e"
"""Markup, an OSC 52 clipboard write, a C1 CSI and a bidi override."""

HOSTILE_SHOWN = r"[/]\x1b]52;c;aGk=\x07[bold]\x9b31m\u202e"


BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Unicode's Bidi_Control characters (written out here, independent of akk.cli.text)."""


def acted_on(printed: str) -> list[str]:
    """What in ``printed`` a terminal would act on or a reader see reordered: ESC and the other
    C0 controls but newline, DEL, C1 and bidi controls, as U+XXXX (empty when there is none)."""
    bad = {
        c for c in printed if c in BIDI or (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0
    }
    return [f"U+{ord(c):04X}" for c in sorted(bad)]


def _printed_safely(done: subprocess.CompletedProcess[str]) -> str:
    """stdout, once stdout and stderr are checked to carry nothing a terminal acts on."""
    assert not acted_on(done.stdout) and not acted_on(done.stderr), done
    return done.stdout


def test_token_list_and_doctor_show_hostile_names_escaped(tmp_path: Path) -> None:
    """A credential's name and a watched socket's path, shown on the operator's terminal."""
    from akk.store.database import open_store
    from akk.store.location import StateDir

    state = tmp_path / "akk"
    akk(state, "token", "create", "plain")  # makes the store
    # A name `token create` refuses (a store written by hand, or by an older akk).
    conn = open_store(StateDir(state).store_path)
    with conn:
        conn.execute(
            "INSERT INTO credentials (controller_id, token_sha256, created_at) VALUES (?, ?, 0)",
            (HOSTILE_NAME, "0" * 64),
        )
    conn.close()
    offline = akk(state, "token", "list")
    assert offline.returncode == 0, offline.stderr
    assert HOSTILE_SHOWN in _printed_safely(offline)
    # The socket lies in a short directory: doctor's table cuts a long path in its cell, and
    # the test's own directory grows with pytest's run count (pytest-of-root/pytest-113/...).
    short = Path(tempfile.mkdtemp(prefix="akk-", dir="/tmp"))
    proc = _start_serve(state, "--tmux-socket", str(short / HOSTILE_NAME), "--log-level", "DEBUG")
    logged: list[str] = []
    mentioned = threading.Event()

    def read_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            logged.append(line)
            if HOSTILE_SHOWN in line:
                mentioned.set()

    try:
        _listening_line(proc)
        log_reader = threading.Thread(target=read_log, daemon=True)
        log_reader.start()
        online = akk(state, "token", "list")
        assert online.returncode == 0, online.stderr
        assert HOSTILE_SHOWN in _printed_safely(online)
        doctor = akk(state, "doctor", "--port", "0")
        assert doctor.returncode == 0, (doctor.stdout, doctor.stderr)
        assert "watcher" in _printed_safely(doctor)
        assert r"[/]\x1b" in doctor.stdout, doctor.stdout
        listed = akk(state, "token", "list", "--json")
        names = [c["controller_id"] for c in json.loads(_printed_safely(listed))["credentials"]]
        assert HOSTILE_NAME in names
        # The server's log names the socket it cannot reach (DEBUG), escaped like the rest;
        # under load the watcher may try it only after the calls above.
        assert mentioned.wait(30), "".join(logged)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        shutil.rmtree(short, ignore_errors=True)
    log_reader.join(10)
    assert not acted_on("".join(logged)), logged


def test_qualify_lists_and_revokes_offline_before_any_server_ran(tmp_path: Path) -> None:
    state = tmp_path / "fresh" / "akk"
    listed = akk(state, "qualify", "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"qualifications": []}
    assert state.stat().st_mode & 0o777 == 0o700  # set up as `akk serve` would
    sha = "ab" * 32
    row = Qualification(
        agent="codex", version="0.172.0", binary_sha256=sha, base_profile="codex@0.171.0",
        plan_digest="cd" * 32, qualified_at=time.time(), report={"verdict": "qualified"},
    )  # fmt: skip
    assert record_qualification(StateDir(state), row)["state"] == "qualified"
    with pytest.raises(CliError, match="not a pinned profile"):
        record_qualification(StateDir(state), attrs.evolve(row, base_profile="codex@9.9.9"))
    table = akk(state, "qualify", "--list")
    assert "codex" in table.stdout and "0.172.0" in table.stdout
    assert "codex@0.171.0" in table.stdout and sha[:16] in table.stdout
    # A row left malformed in the store is listed as such, with what is wrong.
    conn = open_store(StateDir(state).store_path)
    with conn:
        conn.execute("UPDATE qualifications SET report = '[]'")
    conn.close()
    malformed = akk(state, "qualify", "--list")
    assert "MALFORMED" in malformed.stdout and "report is not a JSON object" in malformed.stdout
    assert akk(state, "qualify", "--revoke", "codex", "0.172.0").returncode == 0
    again = akk(state, "qualify", "--revoke", "codex", "0.172.0", "--json")
    assert again.returncode == 2 and "has no qualification" in again.stderr
    assert json.loads(akk(state, "qualify", "--list", "--json").stdout)["qualifications"] == []
    run = akk(state, "qualify", "claude", "--binary", "/opt/claude")
    assert run.returncode == 2 and "/opt/claude: no file at /opt/claude" in run.stderr
    both = akk(state, "qualify", "claude", "--list")
    assert both.returncode == 2 and "on their own" in both.stderr


def test_list_says_how_many_open_records_it_left_out(tmp_path: Path) -> None:
    """210 settled Turns never closed: `akk list` shows the newest 200 and names the rest,
    and the final messages it holds are cut to their heads (`status` has them whole); `akk
    status` of a Turn answered 105 times shows its newest 100 dispatches and names the rest."""
    from akk.store import credentials, turns
    from akk.store.location import StateDir
    from akk.store.turns import TurnState

    state = tmp_path / "akk"
    akk(state, "token", "create", "ctl")  # makes the store
    conn = open_store(StateDir(state).store_path)
    with conn:
        credentials.record_use(conn, "ctl", "ctl", time.time())
        for n in range(210):
            record = turns.insert(
                conn, client_request_id=f"r{n}", request_sha256="0" * 64, request_chars=1,
                controller_id="ctl", evidence_status="pending", evidence=None,
                evidence_limit=None, inactivity_seconds=60.0, lifetime_seconds=600.0,
                now=time.time() - 1_000 + n, terminal_id=None,
            )  # fmt: skip
            turns.settle(conn, record, TurnState.DONE, now=time.time(), summary="done",
                         final_message=f"message {n} " + "x" * 1_000)  # fmt: skip
        for n in range(105):  # the newest Turn answered 105 times
            conn.execute(
                "INSERT INTO dispatches (dispatch_id, controller_id, turn_id, kind, stage, "
                "created_at, updated_at) VALUES (?, 'ctl', ?, 'approval', 'accepted', ?, ?)",
                (f"dsp_{n:03d}", record.turn_id, n, n),
            )
    conn.close()
    with serving(state):
        listed = akk(state, "list")
        assert listed.returncode == 0, listed.stderr
        assert "not shown, older and still open: 10 turns" in listed.stdout, listed.stdout
        as_json = json.loads(akk(state, "list", "--json").stdout)
        status = akk(state, "status", record.turn_id)
        assert status.returncode == 0, status.stderr
        assert "5 older dispatches not shown" in status.stdout, status.stdout
        assert "dsp_005" in status.stdout and "dsp_004" not in status.stdout
    assert as_json["omitted"] == {"turns": 10, "watches": 0, "sessions": 0, "terminals": 0}
    assert len(as_json["turns"]) == 200
    assert as_json["turns"][-1]["final_message"] == (
        "message 209 " + "x" * 188 + "…[cut: 1,012 characters in all]"
    )


def test_list_says_how_many_panes_it_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reply holds the panes' rows that fit 224 KiB (about 420 panes); `akk list` names
    the rest. The reply is the server's, as `tests/test_list_view.py` builds it for 600."""
    row = {
        "terminal_id": "term_1", "agent": "claude", "version": "2.1.332",
        "profile": "claude-2.1.332", "profile_reason": None, "cwd": "/w", "pane": "%1",
        "tmux_socket": "/tmp/sock", "activity_state": "idle", "asks": None,
    }  # fmt: skip
    reply = {"terminals": [row], "turns": [], "watches": [], "sessions": [],
             "omitted": {"turns": 0, "watches": 0, "sessions": 0, "terminals": 599}}  # fmt: skip
    monkeypatch.setattr(listing, "operator_call", lambda *_: reply)
    assert listing.terminals(argparse.Namespace(state_dir=str(tmp_path), json=False)) == 0
    printed = capsys.readouterr().out
    assert "%1" in printed and "not shown: 599 more panes" in printed, printed


@attrs.define
class _Listing:
    """A connection whose `list` shows ``terminals``."""

    terminals: list[dict[str, str]]

    async def call(self, method: str, params: object = None) -> dict[str, object]:
        assert method == "list"
        return {"terminals": self.terminals}


def test_a_pane_id_on_several_tmux_servers_is_never_guessed() -> None:
    """`%0` on two sockets names no terminal: the CLI lists SOCKET:PANE and picks none
    (it typed into the first row before); a socket-qualified pane or an id picks one."""
    rows = [
        {"terminal_id": "term_a", "pane": "%0", "tmux_socket": "/tmp/a"},
        {"terminal_id": "term_b", "pane": "%0", "tmux_socket": "/tmp/b"},
        {"terminal_id": "term_c", "pane": "%1", "tmux_socket": "/tmp/b"},
    ]
    ctl: Any = _Listing(rows)
    with pytest.raises(CliError, match=r"2 tmux servers; nothing was sent.*/tmp/a:%0, /tmp/b:%0"):
        trio.run(terminal_id, ctl, "%0")
    assert trio.run(terminal_id, ctl, "/tmp/b:%0") == "term_b"
    assert trio.run(terminal_id, ctl, "%1") == "term_c"
    assert trio.run(terminal_id, ctl, "term_a") == "term_a"
    with pytest.raises(CliError, match="no terminal '%9'"):
        trio.run(terminal_id, ctl, "%9")
