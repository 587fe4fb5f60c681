"""How a CLI command reaches AKK: the running server as the operator, else the store offline.

`operator_call` and `operator_session` speak to the server a state directory
proves is running (its endpoint file and proof, `akk.server.instance`), with the
operator credential; `offline_write` (one transaction) and `offline_store` reach
the store directly while holding the state directory, for the commands that also
work with no server.
`terminal_id` resolves a TERMINAL as a person names it (a terminal_id or pane).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import apsw
import trio

from akk.cli.errors import CliError
from akk.client import Controller, connect
from akk.server.instance import InstanceError, acquire, proven_endpoint
from akk.store.database import open_store
from akk.store.location import StateDir

T = TypeVar("T")


def offline_write(state: StateDir, work: Callable[[apsw.Connection, float], T]) -> T:
    """Run ``work`` in one transaction while holding the state directory (no server runs)."""

    def in_transaction(conn: apsw.Connection) -> T:
        with conn:
            result = work(conn, time.time())
        return result

    return offline_store(state, in_transaction)


def offline_store(state: StateDir, work: Callable[[apsw.Connection], T]) -> T:
    """Run ``work`` on the store, outside any transaction, while holding the state directory."""
    state.ensure()
    try:
        lock = acquire(state, wait=0)
    except InstanceError:
        raise CliError(
            f"`akk serve` started for {state.path} meanwhile; run the command again"
        ) from None
    with lock:
        conn = open_store(state.store_path)
        try:
            return work(conn)
        finally:
            conn.close()


def operator_call(
    state: StateDir, method: str, params: dict[str, Any], *, timeout: float = 10.0
) -> Any:
    """Call ``method`` on the proven running server with the operator credential."""
    return operator_session(state, lambda ctl: ctl.call(method, params), timeout=timeout)


def operator_session(
    state: StateDir, work: Callable[[Controller], Awaitable[T]], *, timeout: float = 10.0
) -> T:
    """Run ``work`` on one operator connection to the proven running server (``timeout``
    seconds in all). The connection takes no events: they keep going to the operator's
    `akk events` and `akk send --wait`."""
    token = state.token()

    async def run() -> T:
        with trio.fail_after(timeout):
            endpoint = await proven_endpoint(state)
            tls = endpoint.tls_context()
            async with connect(endpoint.url, token, ssl_context=tls, events=False) as ctl:
                return await work(ctl)

    return trio.run(run)


async def terminal_id(ctl: Controller, wanted: str) -> str:
    """The terminal_id of ``wanted``: a terminal_id, a pane (`%3`) or `SOCKET:PANE`."""
    rows = (await ctl.call("list"))["terminals"]
    matches = [
        row
        for row in rows
        if wanted in (row["terminal_id"], row["pane"], f"{row['tmux_socket']}:{row['pane']}")
    ]
    if not matches:
        raise CliError(f"no terminal {wanted!r}; `akk list` shows the panes AKK sees")
    if len(matches) > 1:  # one pane id on several tmux servers: never guess which
        choices = ", ".join(sorted(f"{row['tmux_socket']}:{row['pane']}" for row in matches))
        raise CliError(
            f"pane {wanted!r} is on {len(matches)} tmux servers; nothing was sent. Name one "
            f"as SOCKET:PANE ({choices}) or by its terminal_id"
        )
    return str(matches[0]["terminal_id"])
