"""Send a key plan's expanded keystrokes to a lab pane, exactly as expanded.

The lab tests that verify a profile's key plans drive the real client with the
keys `akk.profiles.keyplan.expand` produced, so what is verified is the plan,
not a hand-written copy of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from akk.profiles.keyplan import Keystroke, LiteralText, TmuxKey
from akk.qualify.launcher import LabSession


async def send_keystrokes(lab: LabSession, keystrokes: Sequence[Keystroke]) -> None:
    """One tmux command per keystroke."""
    for stroke in keystrokes:
        match stroke:
            case TmuxKey(name=name):
                await lab.send_keys(name)
            case LiteralText(text=text):
                await lab.send_keys(text, literal=True)
