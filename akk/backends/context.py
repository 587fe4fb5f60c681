"""`BackendContext`: the wiring every backend takes from the service, built once.

Each backend's constructor takes it plus its own extras (the terminal's board,
the app-server's process desk), so registering a backend is one line.
"""

from __future__ import annotations

import attrs

from akk.actors.destination import DestinationDesk
from akk.actors.turn_desk import TurnDesk
from akk.runtime.actor import ActorRef
from akk.screen.fingerprint import IdMinter
from akk.store.reader import StoreReader


@attrs.frozen(eq=False)
class BackendContext:
    """The store, its reader, the id minter, the turns' and destinations' desks, the offers' life.

    ``offer_minutes``: how long an offered interaction may be answered.
    """

    store: ActorRef
    reader: StoreReader
    ids: IdMinter
    desk: TurnDesk
    destinations: DestinationDesk
    offer_minutes: float
