"""The tmux control-mode client, pane listing/capture and the activity monitor, on real tmux."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from types import SimpleNamespace

import attrs
import pytest
import trio
import trio.testing

from akk.tmux import (
    ActivityMonitor,
    ControlClientClosed,
    PaneInfo,
    TmuxCommandError,
    capture,
    list_panes,
    open_control_client,
)
from akk.tmux.activity import Probe, changed_since, parse_probe
from akk.tmux.control import ControlClient, ControlEvent, command_line


@attrs.frozen
class TmuxServer:
    """A private tmux server for one test (killed in the fixture's finally)."""

    socket: str

    def tmux(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, check=True
        )
        return result.stdout

    def new_session(self, name: str, command: str = "sleep 600", size: str = "80x24") -> str:
        """Start a detached session; return its first pane id."""
        x, y = size.split("x")
        return self.tmux(
            "new-session", "-d", "-s", name, "-x", x, "-y", y, "-P", "-F", "#{pane_id}", command
        ).strip()

    def answers(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(self.socket)
            except OSError:
                return False
        return True


@contextlib.contextmanager
def running_tmux(prefix: str) -> Iterator[TmuxServer]:
    """A private tmux server with one 80x24 session, killed (its directory removed) however
    the block ends. Short path: unix socket paths are limited to ~107 bytes."""
    root = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    srv = TmuxServer(os.path.join(root, "s.sock"))
    subprocess.run(
        ["tmux", "-S", srv.socket, "-f", "/dev/null", "new-session", "-d", "-s", "main",
         "-x", "80", "-y", "24", "sleep 600"],
        check=True,
    )  # fmt: skip
    try:
        yield srv
    finally:
        subprocess.run(["tmux", "-S", srv.socket, "kill-server"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[TmuxServer]:
    with running_tmux("akk-tmux-") as srv:
        yield srv


async def wait_until_gone(srv: TmuxServer) -> None:
    while srv.answers():  # a unix socket has no close notification
        await trio.sleep(0.02)


def test_command_line_quoting() -> None:
    assert command_line(["list-panes", "-a", "-t", "%3"]) == "list-panes -a -t %3"
    assert command_line(["x", 'a "b" $c\\d']) == 'x "a \\"b\\" \\$c\\\\d"'
    assert command_line(["x", "a\nb\x01"]) == 'x "a\\nb\\001"'
    # tmux reads a bare word that starts with `%` as a directive unless it is `%` and digits.
    assert command_line(["refresh-client", "-A", "%3:pause"]) == 'refresh-client -A "%3:pause"'
    assert command_line(["x", "%if", "%hidden", "%%"]) == 'x "%if" "%hidden" %%'
    with pytest.raises(ValueError, match="detach"):
        command_line([])


def test_notification_parsing_keeps_free_text_whole_and_drops_pane_bytes() -> None:
    # Pane output is only a signal: the bytes never reach a ControlEvent.
    assert ControlEvent.parse("%output %12 hello world\\015\\012").args == ("%12",)
    extended = ControlEvent.parse("%extended-output %3 12 : secret\\012")
    assert (extended.name, extended.pane_id, extended.args) == ("extended-output", "%3", ("%3",))
    assert ControlEvent.parse("%session-changed $1 my session").args == ("$1", "my session")
    assert ControlEvent.parse("%exit").args == ()
    assert ControlEvent.parse("%layout-change @1 a,b c,d *").args == ("@1", "a,b", "c,d", "*")


async def test_commands_answered_in_order_under_concurrency(server: TmuxServer) -> None:
    payloads = [f'n{i} "q" $HOME ; {{x}} ~ # 漢字 \t\'' for i in range(60)]
    answers: dict[int, list[str]] = {}
    with trio.fail_after(20):
        async with open_control_client(server.socket) as client:

            async def ask(i: int) -> None:
                # `##` is tmux's format escape for `#`; everything else must arrive as sent.
                answers[i] = await client.command(
                    "display-message", "-p", payloads[i].replace("#", "##")
                )

            async with trio.open_nursery() as nursery:
                for i in range(len(payloads)):
                    nursery.start_soon(ask, i)
    assert answers == {i: [p] for i, p in enumerate(payloads)}


async def test_error_block_raises_and_the_channel_stays_in_step(server: TmuxServer) -> None:
    with trio.fail_after(10):
        async with open_control_client(server.socket) as client:
            with pytest.raises(TmuxCommandError, match="can't find pane") as info:
                await client.command("capture-pane", "-p", "-t", "%999")
            assert info.value.argv == ("capture-pane", "-p", "-t", "%999")
            with pytest.raises(TmuxCommandError, match="unknown command"):
                await client.command("no-such-command")
            assert await client.command("display-message", "-p", "still here") == ["still here"]
            # `$1` is a session id, not an environment variable, when it reaches tmux.
            assert await client.command(
                "display-message", "-p", "-t", client.session_id, "#{session_id}"
            ) == [client.session_id]


async def test_a_rejected_command_never_tells_its_arguments(server: TmuxServer) -> None:
    """An answer typed at a pane that closed a moment ago: tmux refuses the send-keys, and
    nothing said of it (message, `said`) holds the answer's text."""
    answer = "use the deploy key Zx8Qw2Er5Ty7Ui9OpAs3Df6Gh for prod"
    with trio.fail_after(10):
        async with open_control_client(server.socket) as client:
            with pytest.raises(TmuxCommandError) as info:
                await client.command("send-keys", "-t", "%999", "-l", "--", answer)
    refused = info.value
    assert refused.argv[-1] == answer  # the caller still has it
    assert "Zx8Qw2" not in str(refused) and "Zx8Qw2" not in refused.said
    assert refused.said.startswith("send-keys: can't find pane")


async def test_cancelled_waiter_does_not_shift_answers(server: TmuxServer) -> None:
    with trio.fail_after(10):
        async with open_control_client(server.socket) as client:
            async with trio.open_nursery() as nursery:
                slow = trio.CancelScope()

                async def slow_command() -> None:
                    with slow:
                        await client.command("run-shell", "sleep 0.3; echo slow")

                nursery.start_soon(slow_command)
                await trio.testing.wait_all_tasks_blocked()
                slow.cancel()
            assert await client.command("display-message", "-p", "fast") == ["fast"]


async def test_capture_is_byte_identical_to_subprocess(server: TmuxServer) -> None:
    art = (
        "printf '\\033[1;31mbold red\\033[0m \\033[38;5;208m256\\033[0m "
        "\\033[38;2;10;200;30;48;2;0;0;90mtrue\\033[0m\\n"
        "漢字かな 😀 e\\314\\201 \\033[4munder\\033[24m   \\n"
        "\\033[7mreverse\\033[0m trailing   \\n\\n\\n'; sleep 600"
    )
    pane = server.new_session("art", art, size="60x12")
    with trio.fail_after(10):
        async with open_control_client(server.socket) as client:
            while "reverse" not in await capture(client, pane):  # no output stream to wait on
                await trio.sleep(0.02)
            ours = await capture(client, pane)
            info = {p.pane_id: p for p in await list_panes(client)}[pane]
    subprocess_capture = await trio.run_process(
        ["tmux", "-S", server.socket, "capture-pane", "-p", "-e", "-t", pane], capture_stdout=True
    )
    theirs = subprocess_capture.stdout
    assert ours.encode("utf-8", "surrogateescape") == theirs
    assert "\x1b[1m" in ours and "漢字かな" in ours
    assert ours.count("\n") == info.height == 12
    assert ours.endswith("\n\n\n")  # trailing blank rows are kept


async def test_list_panes(server: TmuxServer) -> None:
    pane = server.new_session("we\tird name", size="100x30")
    with trio.fail_after(10):
        async with open_control_client(server.socket) as client:
            # The pane's shell execs its command: under load tmux can list the shell first.
            while True:
                panes = {p.pane_id: p for p in await list_panes(client)}
                if panes[pane].current_command != "bash":
                    break
                await trio.sleep(0.05)
    info = panes[pane]
    assert isinstance(info, PaneInfo)
    assert (info.width, info.height, info.current_command) == (100, 30, "sleep")
    assert info.session_name == "we\\tird name"  # tmux escapes control characters
    assert info.pane_pid > 0 and not info.dead and not info.in_mode
    assert len(panes) == 2


async def test_monitor_sees_changes_in_any_session(server: TmuxServer) -> None:
    # `busy` keeps every poll yielding, so the test can wait for `quiet` to settle.
    server.new_session("busy", "while :; do date +%N; sleep 0.05; done")
    quiet = server.new_session("quiet", 'read x; echo "got $x"; sleep 600')
    with trio.fail_after(15):
        async with open_control_client(server.socket, session="main") as client:
            assert client.session_id != server.tmux("display", "-p", "-t", quiet, "#{session_id}")
            updates = ActivityMonitor(client, interval=0.05).updates()
            first = await anext(updates)
            assert quiet in first.added and quiet in first.changed
            async for update in updates:
                if quiet not in update.changed:
                    break
            server.tmux("send-keys", "-t", quiet, "ping", "Enter")
            async for update in updates:
                if quiet in update.changed and "got ping" in await capture(client, quiet):
                    break
            await updates.aclose()


async def test_monitor_reports_topology_changes(server: TmuxServer) -> None:
    other = server.new_session("other")
    with trio.fail_after(15):
        async with open_control_client(server.socket, session="main") as client:
            updates = ActivityMonitor(client, interval=0.05).updates()
            first = await anext(updates)
            assert set(first.panes) == set(first.added) and other in first.panes
            new = server.tmux("split-window", "-t", other, "-P", "-F", "#{pane_id}", "sleep 600")
            new = new.strip()
            async for update in updates:
                if update.added:
                    assert update.added == {new} and new in update.changed
                    assert update.topology_changed
                    break
            server.tmux("kill-pane", "-t", new)
            async for update in updates:
                if update.removed:
                    assert update.removed == {new} and new not in update.panes
                    break
            await updates.aclose()


def test_changed_since_uses_activity_floor_and_shape() -> None:
    shape = ("1", "80", "24", "0", "0", "0", "0", "0", "0")
    moved = ("1", "80", "24", "5", "0", "0", "0", "0", "0")
    before = {"%1": Probe(100, shape), "%2": Probe(100, shape), "%3": Probe(50, shape)}
    after = {"%1": Probe(100, shape), "%2": Probe(90, moved), "%4": Probe(1, shape)}
    # %1's activity second (100) overlaps the previous probe (100.7): it may have changed.
    assert changed_since(before, after, since=100.7) == {"%1", "%2", "%4"}
    assert changed_since(after, after, since=101.0) == set()
    assert changed_since({}, after, since=None) == set(after)


def test_parse_probe() -> None:
    line = "\x1f".join(["%7", "1700000000", "42", "80", "24", "1", "2", "0", "0", "1", "10"])
    assert parse_probe([line]) == {
        "%7": Probe(1700000000, ("42", "80", "24", "1", "2", "0", "0", "1", "10"))
    }
    with pytest.raises(ValueError, match="fields"):
        parse_probe(["%7\x1f1"])


async def test_server_exit_is_a_clear_error(server: TmuxServer) -> None:
    with trio.fail_after(10):
        async with open_control_client(server.socket) as client:
            updates = ActivityMonitor(client, interval=0.05).updates()
            await anext(updates)
            server.tmux("kill-server")
            with pytest.raises(ControlClientClosed, match="server exited") as info:
                async for _ in updates:
                    pass
            assert info.value.socket_path == server.socket
            with pytest.raises(ControlClientClosed):
                await client.command("list-sessions")
            assert client.closed is not None


async def test_close_detaches_and_leaves_the_server_running(server: TmuxServer) -> None:
    with trio.fail_after(10):
        async with open_control_client(server.socket) as client:
            clients = server.tmux("list-clients", "-F", "#{client_flags}")
            assert "control-mode" in clients and "read-only" in clients
            assert "no-output" in clients and "ignore-size" in clients
            process = client._process
    assert process.returncode is not None  # reaped
    assert server.tmux("list-clients") == ""
    assert server.tmux("list-sessions", "-F", "#{session_name}").split() == ["main"]


async def test_an_output_client_relays_pane_ids_never_pane_bytes(server: TmuxServer) -> None:
    # One 300 kB line: tmux sends it as many long %extended-output lines.
    pane = server.new_session("out", "read x; head -c 300000 /dev/zero | tr '\\0' x; sleep 600")
    with trio.fail_after(15):
        async with (
            open_control_client(server.socket, session="main"),
            open_control_client(server.socket, session="out", output=True) as client,
        ):
            flags = server.tmux("list-clients", "-t", "out", "-F", "#{client_flags}")
            assert "pause-after=1" in flags and "no-output" not in flags
            with client.subscribe(limit=100000) as notes:
                server.tmux("send-keys", "-t", pane, "Enter")
                seen = 0
                async for note in notes:
                    assert (note.name, note.args) == ("extended-output", (pane,))
                    seen += 1
                    if seen == 5:
                        break
            assert await client.command("display-message", "-p", "in step") == ["in step"]


async def test_reader_keeps_only_the_head_of_an_output_line_still_arriving() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    client = ControlClient("test.sock", "$0", SimpleNamespace(stdout=receive))  # type: ignore[arg-type]
    stream = b"%output %3 " + b"\\033x" * 50000 + b"\n%window-add @7\n%output %4 ok\n"
    with trio.fail_after(10), client.subscribe() as notes:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read_loop)
            for start in range(0, len(stream), 1000):
                await send.send_all(stream[start : start + 1000])
                await trio.testing.wait_all_tasks_blocked()  # read chunk by chunk
            await send.aclose()
        assert notes.pending() == [
            ControlEvent("output", ("%3",)),
            ControlEvent("window-add", ("@7",)),
            ControlEvent("output", ("%4",)),
        ]


async def test_a_pane_row_spelling_another_commands_end_stays_in_the_answer() -> None:
    """tmux ends a block with its %begin's time, number and flags. A captured row that
    spells an %end of the same number but another time is pane text: it once ended the
    block early, and the rest of the capture then closed the client as out of step."""
    to_tmux, written = trio.testing.memory_stream_one_way_pair()
    from_tmux, receive = trio.testing.memory_stream_one_way_pair()
    process = SimpleNamespace(stdin=to_tmux, stdout=receive)
    client = ControlClient("test.sock", "$0", process)  # type: ignore[arg-type]
    rows = ["row one", "%end 1733300000 7 1", "%error 1733300001 7 1", "row four"]
    answer = "\n".join(["%begin 1733300042 7 1", *rows, "%end 1733300042 7 1", ""])
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read_loop)
            nursery.start_soon(written.receive_some)  # the command line, read and dropped
            answered: list[list[str]] = []

            async def ask() -> None:
                answered.append(await client.command("capture-pane", "-p", "-t", "%1"))

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            await from_tmux.send_all(answer.encode())
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert answered == [rows]
    assert client.closed is None


async def test_client_does_not_keep_an_empty_server_alive(server: TmuxServer) -> None:
    with trio.fail_after(10):
        async with open_control_client(server.socket) as client:
            server.tmux("kill-session", "-t", "main")
            with pytest.raises(ControlClientClosed):
                await client.command("list-sessions")
            await wait_until_gone(server)


async def test_prefers_a_session_someone_has_attached(server: TmuxServer) -> None:
    server.new_session("zzz")
    with trio.fail_after(10):
        async with (
            open_control_client(server.socket, session="zzz") as person,
            open_control_client(server.socket) as client,
        ):
            assert client.session_id == person.session_id


async def test_no_server_means_no_client_and_no_server_started() -> None:
    root = tempfile.mkdtemp(prefix="akk-tmux-", dir="/tmp")
    missing = os.path.join(root, "none.sock")
    try:
        with trio.fail_after(10), pytest.raises(ControlClientClosed, match="no tmux server"):
            async with open_control_client(missing):
                pass
        assert not await trio.Path(missing).exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)
