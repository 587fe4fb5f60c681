"""AppServer against a fake app-server process (tests/fake_app_server.py): framing, ids,
errors, bounds, and that every way of ending reaps the process."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from akk import cli
from akk.backends.codex_app_server import prompts, schema
from akk.backends.codex_app_server.rpc import (
    AppServer,
    ConnectionClosed,
    ErrorReply,
    RequestTimeout,
    StartError,
    WireLimits,
    open_app_server,
)
from akk.cli import doctor
from akk.discovery.process import start_ticks
from akk.screen.fingerprint import IdMinter

T = TypeVar("T")
IDS = IdMinter(b"k" * 32)

FAKE = Path(__file__).with_name("fake_app_server.py")
QUICK = WireLimits(close_seconds=0.5, term_seconds=0.5, kill_seconds=5.0)


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """An executable that runs the fake app-server with this interpreter."""
    script = tmp_path / "codex"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(0o755)
    return script


@asynccontextmanager
async def fake(
    fake_bin: Path, tmp_path: Path, limits: WireLimits = QUICK, **options: Any
) -> AsyncIterator[AppServer]:
    async with open_app_server(
        fake_bin, codex_home=tmp_path / "home", cwd=tmp_path, limits=limits, **options
    ) as server:
        yield server


def gone(pid: int) -> bool:
    return start_ticks(pid) is None


async def test_initialize_then_requests_match_their_answers(fake_bin: Path, tmp_path: Path) -> None:
    seen: list[schema.Message] = []
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path, tap=seen.append) as server:
            assert server.initialize_result["codexHome"] == str(tmp_path / "home")
            assert server.initialize_seconds is not None and server.initialize_seconds > 0
            # Answers come back out of order; each reaches its own caller.
            results: dict[str, Any] = {}

            async def ask(name: str, delay: float) -> None:
                if delay:
                    results[name] = await server.request("fake/late", {"delay": delay}, timeout=5)
                else:
                    results[name] = await server.request("fake/echo", {"n": name}, timeout=5)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, "slow", 0.3)
                nursery.start_soon(ask, "fast", 0)
            assert results == {"slow": {"late": True}, "fast": {"n": "fast"}}
            pid = server.pid
        assert server.closed_reason == "closed by akk"
    exit_ = await server.aclose()
    assert (exit_.how, exit_.returncode, exit_.reaped) == ("exited", 0, True)
    assert gone(pid)
    kinds = [(m.sender, m.kind, m.method) for m in seen]
    assert kinds[:3] == [
        ("client", "request", "initialize"),
        ("server", "result", "initialize"),
        ("client", "notification", "initialized"),
    ]
    ids = [m.body["id"] for m in seen if m.kind == "request"]
    assert len(ids) == len(set(ids)) == 3


async def test_a_json_rpc_error_is_raised_typed(fake_bin: Path, tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path) as server:
            with pytest.raises(ErrorReply) as caught:
                await server.request("fake/error", {"code": -32602, "message": "bad"}, timeout=5)
            assert (caught.value.code, caught.value.message) == (-32602, "bad")
            assert caught.value.method == "fake/error"
            # The connection stays usable.
            assert await server.request("fake/echo", {"ok": 1}, timeout=5) == {"ok": 1}


async def test_a_timed_out_request_is_not_retried_and_its_late_answer_dropped(
    fake_bin: Path, tmp_path: Path
) -> None:
    seen: list[schema.Message] = []
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path, tap=seen.append) as server:
            with pytest.raises(RequestTimeout):
                await server.request("fake/late", {"delay": 0.5}, timeout=0.1)
            await trio.sleep(0.8)
            # The late answer arrived, was recognised and dropped; the connection is fine.
            assert server.closed_reason is None
            assert await server.request("fake/echo", {}, timeout=5) == {}
    sent = [m for m in seen if m.sender == "client" and m.method == "fake/late"]
    late = [m for m in seen if m.sender == "server" and m.method == "fake/late"]
    assert len(sent) == 1 and len(late) == 1


async def test_notifications_and_server_requests_arrive_on_their_channels(
    fake_bin: Path, tmp_path: Path
) -> None:
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path) as server:
            assert await server.request("fake/notify", {"count": 3}, timeout=5) == {"sent": 3}
            ticks = [await server.notifications.receive() for _ in range(3)]
            assert [t.params["n"] for t in ticks] == [0, 1, 2]
            await server.request(
                "fake/ask", {"method": "item/tool/requestUserInput", "params": {"q": 1}}, timeout=5
            )
            asked = await server.server_requests.receive()
            assert (asked.method, asked.params) == ("item/tool/requestUserInput", {"q": 1})
            await server.respond(asked, {"answers": {}})
            answered = await server.notifications.receive()
            assert answered.params == {"id": asked.id, "answer": {"answers": {}}}
            with pytest.raises(Exception, match="not awaiting an answer"):
                await server.respond(asked, {"answers": {}})


async def test_an_undrained_notification_buffer_closes_the_connection(
    fake_bin: Path, tmp_path: Path
) -> None:
    limits = WireLimits(notifications=5, close_seconds=0.5, term_seconds=0.5)
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path, limits) as server:
            with pytest.raises(ConnectionClosed, match="not taken fast enough"):
                await server.request("fake/notify", {"count": 50}, timeout=5)
            # What was buffered is still delivered, then the channel ends.
            received = [n async for n in server.notifications]
            assert len(received) == 5
    assert (await server.aclose()).reaped


@pytest.mark.parametrize(
    ("method", "params", "reason"),
    [
        ("fake/longLine", {"bytes": 300_000}, "longer than 100000 bytes"),
        ("fake/raw", {"text": "x" * 200_000 + "\n"}, "longer than 100000 bytes"),
        ("fake/raw", {"text": "not json\n"}, "not JSON"),
        ("fake/raw", {"text": "[1, 2]\n"}, "not an object"),
        ("fake/raw", {"text": '{"id": 999, "result": {}}\n'}, "no request of ours"),
        # Deeper than Python's parser goes (a RecursionError, which crashed the host).
        ("fake/raw", {"text": "[" * 90_000 + "\n"}, "nested too deeply"),
        ("fake/raw", {"text": '{"a": ' + "[" * 5_000 + "]" * 5_000 + "}\n"}, "nested too deep"),
        # Python reads it, but later walks of it (fingerprints) could not: over the bound.
        (
            "fake/raw",
            {"text": '{"id": "s", "method": "m", "params": ' + "[" * 900 + "]" * 900 + "}\n"},
            "nested deeper than 200",
        ),
        (
            "fake/raw",
            {"text": '{"id": true, "method": "m", "params": {}}\n'},
            "invalid or repeated",
        ),
        ("fake/raw", {"text": '{"id": true, "result": {}}\n'}, "an answer with an invalid id"),
    ],
)
async def test_a_misbehaving_peer_is_refused_and_reaped(
    fake_bin: Path, tmp_path: Path, method: str, params: Any, reason: str
) -> None:
    limits = WireLimits(max_line_bytes=100_000, close_seconds=0.5, term_seconds=0.5)
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path, limits) as server:
            with pytest.raises(ConnectionClosed, match=reason):
                await server.request(method, params, timeout=5)
            with pytest.raises(ConnectionClosed):
                await server.request("fake/echo", {}, timeout=5)
            pid = server.pid
    exit_ = await server.aclose()
    assert reason in exit_.reason and exit_.reaped and gone(pid)


async def test_a_server_that_ignores_eof_and_sigterm_is_killed_and_reaped(
    fake_bin: Path, tmp_path: Path
) -> None:
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path) as server:
            await server.request("fake/stubborn", timeout=5)
            pid = server.pid
        exit_ = await server.aclose()
    assert (exit_.how, exit_.reaped) == ("killed", True)
    assert exit_.returncode == -9
    assert gone(pid)


async def test_a_child_left_in_the_group_is_killed(fake_bin: Path, tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path) as server:
            child = (await server.request("fake/child", timeout=5))["pid"]
        exit_ = await server.aclose()
    assert exit_.stragglers == (child,)
    assert gone(child) or _zombie(child)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] == b"Z"


async def test_a_crash_fails_pending_requests_and_ends_the_channels(
    fake_bin: Path, tmp_path: Path
) -> None:
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path) as server:
            with pytest.raises(ConnectionClosed, match="closed its output"):
                await server.request("fake/exit", {"code": 3}, timeout=5)
            assert [n async for n in server.notifications] == []
        exit_ = await server.aclose()
    assert (exit_.how, exit_.returncode, exit_.reaped) == ("exited", 3, True)


async def test_cancelling_the_block_still_reaps(fake_bin: Path, tmp_path: Path) -> None:
    pid = 0
    with trio.move_on_after(1.0):
        async with fake(fake_bin, tmp_path) as server:
            pid = server.pid
            await server.request("fake/stubborn", timeout=5)
            await trio.sleep_forever()
    assert pid and gone(pid)
    assert (await server.aclose()).how == "killed"


async def test_stderr_is_kept_as_a_bounded_tail(fake_bin: Path, tmp_path: Path) -> None:
    limits = WireLimits(stderr_tail_bytes=1000, close_seconds=0.5, term_seconds=0.5)
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path, limits) as server:
            await server.request("fake/stderr", {"bytes": 50_000}, timeout=5)
    assert (await server.aclose()).stderr_tail == "e" * 1000


async def test_a_binary_that_cannot_start_or_initialize_is_a_start_error(
    fake_bin: Path, tmp_path: Path
) -> None:
    with pytest.raises(StartError, match="cannot start"):
        async with fake(tmp_path / "missing", tmp_path):
            pass
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexec sleep 30\n")
    silent.chmod(0o755)
    with trio.fail_after(20), pytest.raises(StartError, match="did not initialize"):
        async with fake(silent, tmp_path, initialize_timeout=0.3):
            pass
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _runs(int(p), str(silent))]


async def test_a_start_error_never_carries_a_key_the_client_printed(
    fake_bin: Path, tmp_path: Path
) -> None:
    """A client that prints its environment and never initializes: the start error (logged,
    kept on the board, told to a `send`) shows its stderr redacted."""
    key = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"
    loud = tmp_path / "loud"
    loud.write_text(f"#!/bin/sh\necho 'auth failed: OPENAI_API_KEY={key}' >&2\nexec sleep 30\n")
    loud.chmod(0o755)
    with trio.fail_after(20), pytest.raises(StartError, match="did not initialize") as failed:
        async with fake(loud, tmp_path, initialize_timeout=0.5):
            pass
    assert "auth failed: OPENAI_API_KEY=[redacted]" in str(failed.value)
    assert "Abc123Def456" not in str(failed.value)


def _runs(pid: int, needle: str) -> bool:
    try:
        return needle.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_schema_checks_messages_by_role() -> None:
    checked = schema.load("0.169.0")
    message = schema.Message
    start = {"id": 2, "method": "thread/start", "params": {"cwd": "/w"}}
    checked.check(message("client", "request", "thread/start", start))
    checked.check(message("client", "notification", "initialized", {"method": "initialized"}))
    with pytest.raises(schema.MessageInvalid, match="is a required property"):
        checked.check(message("server", "result", "initialize", {"id": 1, "result": {}}))
    with pytest.raises(schema.MessageInvalid, match="not in this version"):
        checked.check(message("server", "notification", "fake/tick", {"method": "fake/tick"}))
    with pytest.raises(schema.MessageInvalid, match="code"):
        checked.check(message("server", "error", "x", {"id": 1, "error": {"message": "m"}}))
    assert checked.response_definition("thread/start") == "v2/ThreadStartResponse"
    assert checked.response_definition("initialize") == "InitializeResponse"
    with pytest.raises(schema.UnknownProtocolVersion, match=r"0\.1\.0.*committed: 0\.153\.4"):
        schema.load("0.1.0")


@pytest.mark.parametrize("version", schema.versions())
def test_every_committed_schema_resolves_the_backend_methods(version: str) -> None:
    checked = schema.load(version)
    for method in ("initialize", "thread/start", "thread/resume", "thread/read",
                   "thread/turns/list", "turn/start", "turn/interrupt", "turn/steer"):  # fmt: skip
        checked.response_definition(method)
    assert {"item/commandExecution/requestApproval", "item/tool/requestUserInput"} <= (
        checked.methods("server", "request")
    )


def _codex_at(tmp_path: Path, version: str) -> Path:
    """A `codex` that prints `version` for --version and runs the fake app-server."""
    script = tmp_path / "bin" / "codex"
    script.parent.mkdir()
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then echo "codex-cli {version}"; exit 0; fi\n'
        f'exec "{sys.executable}" "{FAKE}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_doctor_initializes_a_pinned_codex(tmp_path: Path) -> None:
    binary = _codex_at(tmp_path, "0.169.0")
    checks = doctor.codex_checks(doctor.CodexOptions(binary=str(binary), home=tmp_path / "ch"))
    assert [(c.name, c.ok) for c in checks] == [("codex", True), ("codex app-server", True)]
    assert checks[0].detail == f"codex-cli 0.169.0 at {binary} (pinned)"
    assert re.fullmatch(
        rf"answers initialize in \d+ ms \(CODEX_HOME {tmp_path}/ch; pid \d+ exited after close\)",
        checks[1].detail,
    )


def test_doctor_reports_an_unpinned_or_missing_codex_without_failing(tmp_path: Path) -> None:
    binary = _codex_at(tmp_path, "0.1.0")
    (unpinned,) = doctor.codex_checks(doctor.CodexOptions(binary=str(binary)))
    assert unpinned.ok and "codex-cli 0.1.0" in unpinned.detail and "not pinned" in unpinned.detail
    (missing,) = doctor.codex_checks(doctor.CodexOptions(binary=str(tmp_path / "nope")))
    assert missing.ok and "not an executable file" in missing.detail


def test_doctor_fails_a_pinned_codex_whose_app_server_does_not_answer(tmp_path: Path) -> None:
    binary = _codex_at(tmp_path, "0.153.4")
    # The fake's --version answers; its app-server is replaced by one that exits at once.
    binary.write_text(binary.read_text().replace(f'exec "{sys.executable}"', "exit 7 #"))
    checks = doctor.codex_checks(doctor.CodexOptions(binary=str(binary), home=tmp_path))
    assert [(c.name, c.ok) for c in checks] == [("codex", True), ("codex app-server", False)]
    assert "did not initialize" in checks[1].detail


def test_akk_doctor_takes_codex_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    binary = _codex_at(tmp_path, "0.155.1")
    state = tmp_path / "state"
    argv = ["doctor", "--state-dir", str(state), "--port", "0"]
    status = cli.main([*argv, "--codex-bin", str(binary), "--codex-home", str(tmp_path / "ch")])
    out = capsys.readouterr().out
    assert "codex-cli 0.155.1" in out and "(pinned)" in out
    assert "answers initialize in" in out
    assert status == 0, out


async def test_an_answer_with_id_true_does_not_answer_request_1(tmp_path: Path) -> None:
    """`initialize` is request 1, and JSON `true` is not 1 (though Python's `True == 1`): a
    server answering it with id true is refused, so the start fails."""
    liar = tmp_path / "liar"
    liar.write_text(
        f"#!{sys.executable}\nimport json, sys\nsys.stdin.readline()\n"
        'print(json.dumps({"id": True, "result": {"userAgent": "x"}}), flush=True)\n'
        "sys.stdin.readline()\n"
    )  # fmt: skip
    liar.chmod(0o755)
    with trio.fail_after(20), pytest.raises(StartError, match="an answer with an invalid id"):
        async with fake(liar, tmp_path, initialize_timeout=5):
            pass


def _nested(levels: int) -> Any:
    return [_nested(levels - 1)] if levels else []


def _deep_in_a_stack(frames: int, work: Callable[[], T]) -> T:
    return work() if frames == 0 else _deep_in_a_stack(frames - 1, work)


async def test_a_request_nested_to_the_bound_is_fingerprinted_deep_in_a_stack(
    fake_bin: Path, tmp_path: Path
) -> None:
    """A request nested exactly `max_depth` deep is delivered; fingerprinting and projecting
    it from far down a stack (500 frames more than here) cannot reach Python's recursion
    limit. One level more is refused at the wire."""
    method = "item/commandExecution/requestApproval"
    levels = QUICK.max_depth - 3  # the body, its params, and the list nested in them
    with trio.fail_after(20):
        async with fake(fake_bin, tmp_path) as server:
            params = {"threadId": "thr", "turnId": "t", "command": "ls", "x": _nested(levels)}
            await server.request("fake/ask", {"method": method, "params": params}, timeout=5)
            asked = await server.server_requests.receive()

            def project() -> dict[str, Any]:
                prompt = prompts.prompt_of(asked, generation=1, ids=IDS, turn_id="t")
                assert prompt.seen.fingerprint == prompts.fingerprint(asked, 1)
                return prompts.decision_result(prompt, "approve_once")

            assert _deep_in_a_stack(500, project) == {"decision": "accept"}
            params["x"] = _nested(levels + 1)
            with pytest.raises(ConnectionClosed, match="nested deeper than 200"):
                await server.request("fake/ask", {"method": method, "params": params}, timeout=5)
