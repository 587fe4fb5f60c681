"""`Backends`: the record's backend name picks the implementation that runs its Turns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial

from akk.backends.contract import TurnBackend, WatchWitness
from akk.backends.names import SESSION_BACKENDS
from akk.store.turns import Turn

Resumer = Callable[[str], Awaitable[None]]
"""How an unresolved Turn of one backend is followed again after a start."""


class Backends:
    """One implementation per backend name, each registered once by the service.

    A backend that keeps sessions registers under a `names.SESSION_BACKENDS` name (the
    CLI offers that list); a Watch is observed through its own backend's witness.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, TurnBackend] = {}

    def register(self, backend: TurnBackend) -> None:
        """Add ``backend`` under its own name; ValueError for a name taken or not listed."""
        name = backend.name
        if not name or name in self._by_name:
            raise ValueError(f"backend name {name!r} is empty or registered already")
        if backend.keeps_sessions and name not in SESSION_BACKENDS:
            raise ValueError(f"session backend {name!r} is missing from names.SESSION_BACKENDS")
        self._by_name[name] = backend

    def witness(self, record: Turn) -> WatchWitness:
        """What the watch methods read of ``record``'s task: its backend's witness.

        LookupError for a record whose backend observes no person's task.
        """
        found = self.of(record).witness
        if found is None:
            raise LookupError(f"backend {record.backend!r} observes no person's task")
        return found

    def of(self, turn: Turn) -> TurnBackend:
        """The backend ``turn`` runs on (every stored name is registered)."""
        return self._by_name[turn.backend]

    def named(self, name: str) -> TurnBackend:
        """The backend registered as ``name`` (a send names the one its new Turn runs on)."""
        return self._by_name[name]

    def sessions(self) -> list[str]:
        """The names of the registered backends that keep sessions, in registration order."""
        return [name for name, backend in self._by_name.items() if backend.keeps_sessions]

    def resumers(self) -> Mapping[str, Resumer]:
        """Per backend name: how its unresolved Turns are followed again after a start."""
        return {
            name: partial(backend.follow_again, restarted=True)
            for name, backend in self._by_name.items()
        }
