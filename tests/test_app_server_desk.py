"""An app-server that crashes at once, over and over, never disables the Codex backend.

The peer is a real process: it answers `initialize`, then exits (until a flag file makes
it the well-behaved fake app-server). The supervisors, the desk, the host and the store
are the real ones; times are scaled down.

- The host starts a process again at once after one that ended soon after its start,
  but waits after the second such in a row, so the crash loop stays under the backends
  supervisor's restart limit; meanwhile a send is refused at once, saying why.
- If that supervisor gives up all the same (here: a limit of two restarts), it drops the
  host; the desk notices on the next use and starts it again (no sooner than
  RESTART_SECONDS after its last start), and a send meanwhile is refused at once, not
  after the 60 s wait for a process that would never come.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from akk.backends.codex_app_server import host as hosts
from akk.backends.codex_app_server.actor import CodexSetup
from akk.backends.codex_app_server.host import BackendDesk
from akk.backends.codex_app_server.rounds import AppServerRounds
from akk.protocol.errors import Reason, RpcError
from akk.runtime.supervisor import ChildSpec, Supervisor
from akk.store.reader import StoreReader
from tests.test_app_server_rpc import FAKE
from tests.test_full_disk_sessions import _store

CRASHING = """\
import json, os, runpy, sys
if os.path.exists({flag!r}):
    sys.argv = [{fake!r}, *sys.argv[1:]]
    runpy.run_path({fake!r}, run_name="__main__")
    sys.exit(0)
request = json.loads(sys.stdin.readline())
print(json.dumps({{"id": request["id"], "result": {{"userAgent": "x", "codexHome": "h"}}}}),
      flush=True)
sys.stdin.readline()  # `initialized`, then gone
"""


def _codex(tmp_path: Path) -> tuple[CodexSetup, Path]:
    """A codex that crashes right after `initialize` until the returned flag file exists."""
    flag, script = tmp_path / "healthy", tmp_path / "codex"
    script.write_text(f"#!{sys.executable}\n" + CRASHING.format(flag=str(flag), fake=str(FAKE)))
    script.chmod(0o755)
    (tmp_path / "home").mkdir()
    return CodexSetup(str(script), str(tmp_path / "home"), "0.171.0"), flag


def _rounds(desk: BackendDesk) -> AppServerRounds:
    ctx = type("Ctx", (), {"store": None})()
    return AppServerRounds(ctx, hosts=desk)  # type: ignore[arg-type]


async def _refused_at_once(desk: BackendDesk) -> RpcError:
    """A send's first step (`history`), which must be refused within a second."""
    with trio.fail_after(1), pytest.raises(RpcError) as refused:
        await _rounds(desk).history("/w")
    assert refused.value.reason is Reason.INTERNAL
    assert "nothing was sent" in refused.value.message
    return refused.value


async def test_a_crash_loop_waits_between_starts_and_never_escalates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosts, "START_RETRY_SECONDS", 0.8)
    setup, _ = _codex(tmp_path)
    db = tmp_path / "akk.sqlite3"
    backends = Supervisor("backends", max_restarts=3, period=2.0)
    with trio.fail_after(30):
        async with _store(db) as root:
            await root.start_child(ChildSpec("backends", backends.run))
            await trio.testing.wait_all_tasks_blocked()  # it runs
            reader = StoreReader(db)
            desk = BackendDesk(
                backends, setup=setup, store=root.ref("store"), reader=reader.run,
                cwd=str(tmp_path),
            )  # fmt: skip
            host = await desk.host()
            while host.board.start_error is None:
                await trio.sleep(0.02)
            refused = await _refused_at_once(desk)
            assert "after it started" in refused.message and "times in a row" in refused.message
            await trio.sleep(3.0)
            reader.close()
    assert backends.stats.escalations == 0
    assert backends.stats.crashes.get(setup.key, 0) >= 2


async def test_a_host_its_supervisor_dropped_is_started_again_by_the_desk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosts, "STEADY_SECONDS", 0.0)  # each crash restarts at once
    setup, healthy = _codex(tmp_path)
    db = tmp_path / "akk.sqlite3"
    backends = Supervisor("backends", max_restarts=2, period=30.0)
    with trio.fail_after(30):
        async with _store(db) as root:
            await root.start_child(ChildSpec("backends", backends.run))
            await trio.testing.wait_all_tasks_blocked()  # it runs
            reader = StoreReader(db)
            desk = BackendDesk(
                backends, setup=setup, store=root.ref("store"), reader=reader.run,
                cwd=str(tmp_path),
            )  # fmt: skip
            host = await desk.host()
            while not backends.stats.escalations or setup.key in backends.child_keys():
                await trio.sleep(0.02)
            while not root.stats.restarts.get("backends"):  # the root runs it again, childless
                await trio.sleep(0.02)
            assert root.stats.restarts.get("backends") == 1 and "backends" in root.child_keys()

            # Within RESTART_SECONDS of its last start: refused at once, saying why.
            refused = await _refused_at_once(desk)
            assert "stopped the app-server" in refused.message
            assert "starts it again in" in refused.message
            assert setup.key not in backends.child_keys()

            # Later, the next use starts it again (the same host: its board and mailbox).
            healthy.touch()
            monkeypatch.setattr(hosts, "RESTART_SECONDS", 0.0)
            generation = host.board.generation
            assert await desk.host() is host
            await host.board.settled(10)
            assert host.board.alive and host.board.generation > generation
            assert setup.key in backends.child_keys()
            reader.close()
