"""`Backends`: the record's backend name picks the implementation that runs its Turns."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from akk.backends.contract import TurnBackend, WatchWitness
from akk.store.turns import Turn


@attrs.frozen
class Backends:
    """One implementation per ``turns.backend`` name, registered by the service.

    ``watches``: the witness of the backend whose panes a person types in.
    """

    by_name: Mapping[str, TurnBackend]
    watches: WatchWitness

    def of(self, turn: Turn) -> TurnBackend:
        """The backend ``turn`` runs on (every stored name is registered)."""
        return self.by_name[turn.backend]

    def named(self, name: str) -> TurnBackend:
        """The backend registered as ``name`` (a send names the one its new Turn runs on)."""
        return self.by_name[name]
