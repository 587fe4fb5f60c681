"""Fixtures shared across the test suite."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio

from akk.service import Endpoint, ServiceConfig, run_service
from akk.store.location import StateDir


@attrs.frozen
class LiveServer:
    """An `akk serve` running in a background thread on a free port."""

    endpoint: Endpoint
    token: str
    state: StateDir

    @property
    def url(self) -> str:
        return self.endpoint.url


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real server (store, supervisor, WebSocket) shared by a module's tests."""
    state = StateDir(tmp_path_factory.mktemp("state") / "akk")
    config = ServiceConfig(state=state, port=0, max_frame_bytes=64 * 1024, tmux_sockets=())
    started = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        box["token"] = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            box["scope"] = nursery.cancel_scope
            box["endpoint"] = await nursery.start(
                lambda task_status: run_service(config, task_status=task_status)
            )
            started.set()

    def thread_main() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # reported to the test thread below
            box["error"] = exc
        finally:
            started.set()

    thread = threading.Thread(target=thread_main, name="akk-serve", daemon=True)
    thread.start()
    started.wait(30)
    if "error" in box:
        raise RuntimeError("the live server failed to start") from box["error"]  # type: ignore[arg-type]
    endpoint = box["endpoint"]
    assert isinstance(endpoint, Endpoint)
    yield LiveServer(endpoint=endpoint, token=state.token(), state=state)
    trio.from_thread.run_sync(
        box["scope"].cancel,  # type: ignore[attr-defined]
        trio_token=box["token"],  # type: ignore[arg-type]
    )
    thread.join(30)
    assert not thread.is_alive(), "the live server did not shut down"
    assert "error" not in box, f"the live server failed: {box.get('error')!r}"


@pytest.fixture
def state_dir(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "akk")
