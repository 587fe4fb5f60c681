"""Fixtures for lab tests: a real pinned client in a private tmux pane, per test.

Use the `lab` fixture with indirect parametrization::

    @pytest.mark.parametrize("lab", lab_params("echo"), indirect=True)
    async def test_x(lab: LabSession) -> None: ...

Every run has its own temp dir, tmux socket and model-server port (port 0), so
tests run in parallel under pytest-xdist. Start-up times are recorded in each
test's `user_properties` (they travel from xdist workers to the controller) and
summed up in a table at the end of the run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import attrs
import pytest
import trio

from akk.qualify.client import AGENTS
from akk.qualify.launcher import LabSession, launch
from akk.qualify.run_files import Preseed
from akk.qualify.scenarios import SCENARIOS
from tools.lab import clients
from tools.lab.clients import Client
from tools.lab.installer import InstallError, install

START_PROPERTY = "lab_start_seconds"
CLIENT_PROPERTY = "lab_client"


@attrs.frozen
class LabSpec:
    """What the `lab` fixture launches."""

    client: Client
    scenario: str
    cols: int = 120
    rows: int = 40
    plan_mode: bool = False
    preseed: Preseed = attrs.field(factory=Preseed)

    @property
    def id(self) -> str:
        """Test id, e.g. ``claude-2.1.263-echo-120x40``."""
        return f"{self.client.name}-{self.scenario}-{self.cols}x{self.rows}"


def lab_params(scenario: str, *, agents: Iterable[str] = AGENTS, **options: object) -> list[object]:
    """One `lab` fixture parameter per pinned client of `agents`, marked `lab`."""
    wanted = set(agents) & SCENARIOS[scenario].agents
    return [
        pytest.param(
            LabSpec(client, scenario, **options),  # type: ignore[arg-type]
            id=LabSpec(client, scenario, **options).id,  # type: ignore[arg-type]
            marks=pytest.mark.lab,
        )
        for client in clients.PINNED
        if client.agent in wanted
    ]


def newest_of_each(scenario: str, **options: object) -> list[object]:
    """`lab_params` of the newest pinned client of each agent `scenario` runs on."""
    return [
        param for agent in AGENTS for param in lab_params(scenario, agents=(agent,), **options)[-1:]
    ]


_verified: set[Client] = set()


async def ensure_installed(client: Client) -> None:
    """Verify (or install) a pinned client once per worker; fail the test if impossible."""
    # Normally `make test` installed everything already and this only verifies;
    # a missing client is installed (or the test fails), never skipped.
    if client in _verified:
        return
    try:
        await trio.to_thread.run_sync(install, client)
    except InstallError as exc:
        pytest.fail(f"lab client {client.name} is not available: {exc}")
    _verified.add(client)


@pytest.fixture
async def lab(request: pytest.FixtureRequest) -> AsyncIterator[LabSession]:
    """A started client at its idle composer (parametrize indirectly with a LabSpec)."""
    spec = request.param
    assert isinstance(spec, LabSpec), "parametrize `lab` indirectly with lab_params(...)"
    await ensure_installed(spec.client)
    async with launch(
        spec.client,
        SCENARIOS[spec.scenario],
        cols=spec.cols,
        rows=spec.rows,
        plan_mode=spec.plan_mode,
        preseed=spec.preseed,
    ) as session:
        request.node.user_properties.append((CLIENT_PROPERTY, spec.client.name))
        request.node.user_properties.append((START_PROPERTY, session.ready_after))
        # Shown by `-rA` even where the summary hook is not loaded (xdist controller).
        print(f"lab start {spec.client.name}: {session.ready_after:.2f} s to idle composer")
        yield session
