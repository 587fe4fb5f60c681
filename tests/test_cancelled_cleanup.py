"""A step cancelled half-way removes the temporary directory it made.

`akk serve --auto-qualify` cancels a qualification when the server stops, and
a person may stop `akk qualify` or `akk doctor` at any moment. Each of these
makes a directory under the temporary directory first (captured screens, a
headless proof's HOME, an app-server's working directory) and removes it when
it ends, however it ends. Each test stops the step while it holds its
directory, and finds nothing of it left.
"""

from __future__ import annotations

import tempfile
import types
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from akk.cli import doctor
from akk.profiles.registry import PINNED
from akk.qualify import evidence, headless, qualification, trial
from akk.qualify.launcher import Confinement


def _names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


async def _cancelled_while_held(
    step: Callable[[], Awaitable[object]], held: trio.Event, tmp_path: Path
) -> list[str]:
    """Run `step`, cancel it once `held` is set, and list what it left in `tmp_path`."""
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                await step()

            nursery.start_soon(run)
            await held.wait()
            assert _names(tmp_path), "the step made no directory"
            nursery.cancel_scope.cancel()
    return _names(tmp_path)


def _held(event: trio.Event) -> Callable[..., Awaitable[Any]]:
    async def hold(*args: object, **kwargs: object) -> Any:
        event.set()
        await trio.sleep_forever()

    return hold


async def test_a_qualification_cancelled_while_it_captures_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    copy = tmp_path.parent / "codex-copy"
    found = qualification.Probe("codex", "0.999.0", copy, "0" * 64, copy=copy)

    async def ran(client: object, *, confine: Confinement) -> object:
        return types.SimpleNamespace(ran=True, describe=lambda: "")

    held = trio.Event()
    monkeypatch.setattr(evidence, "check", ran)
    monkeypatch.setattr(trial, "capture_jobs", _held(held))
    step = lambda: qualification.qualify(found, PINNED.pinned, sandbox=False)  # noqa: E731
    assert await _cancelled_while_held(step, held, tmp_path) == []


async def test_a_headless_proof_cancelled_while_it_runs_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    held = trio.Event()
    monkeypatch.setattr(headless, "prepare", lambda *args: types.SimpleNamespace(
        home=tmp_path, workdir=tmp_path, env={}))  # fmt: skip
    monkeypatch.setattr(headless._Proof, "run", _held(held))
    confine = Confinement(sandbox=False, niceness=0)
    step = lambda: headless.prove(tmp_path / "claude", "2.1.999", confine=confine)  # noqa: E731
    assert await _cancelled_while_held(step, held, tmp_path) == []


async def test_a_doctor_cancelled_while_it_starts_an_app_server_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    held = trio.Event()

    @asynccontextmanager
    async def starting(*args: object, **kwargs: object) -> AsyncIterator[None]:
        held.set()
        await trio.sleep_forever()
        yield

    monkeypatch.setattr(doctor.rpc, "open_app_server", starting)
    step = lambda: doctor._app_server("codex", tmp_path / "home")  # noqa: E731
    assert await _cancelled_while_held(step, held, tmp_path / "tmp") == []
