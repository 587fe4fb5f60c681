"""tmux I/O without spawning a process per call: a control-mode client per server.

`open_control_client` gives a `ControlClient` (one `tmux -C` per server, used
as a command channel); `list_panes` and `capture` run single commands
over it; `ActivityMonitor` learns which panes of all sessions changed.
"""

from akk.tmux.activity import ActivityMonitor, PaneUpdate
from akk.tmux.control import (
    ControlClient,
    ControlClientClosed,
    ControlEvent,
    ControlEventsLost,
    ControlProtocolError,
    Subscription,
    TmuxCommandError,
    open_control_client,
)
from akk.tmux.panes import PaneInfo, capture, list_panes

__all__ = [
    "ActivityMonitor",
    "ControlClient",
    "ControlClientClosed",
    "ControlEvent",
    "ControlEventsLost",
    "ControlProtocolError",
    "PaneInfo",
    "PaneUpdate",
    "Subscription",
    "TmuxCommandError",
    "capture",
    "list_panes",
    "open_control_client",
]
