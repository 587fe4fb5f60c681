"""Screens: a tmux capture rendered into an exact grid of styled cells.

Profiles see only this surface: `render` a capture into a `Grid`, isolate a
`Region`, prove its frame with the region primitives, and `fingerprint` it;
`IdMinter` turns fingerprints into the opaque ids controllers see.
"""

from akk.screen.fingerprint import IdMinter, fingerprint
from akk.screen.grid import BLANK, Cell, Grid, Run, Style
from akk.screen.region import (
    BOTTOM_LEFT,
    BOTTOM_RIGHT,
    HORIZONTAL,
    LEFT_SIDE,
    RIGHT_SIDE,
    TOP_LEFT,
    TOP_RIGHT,
    VERTICAL,
    Region,
    box_above,
    is_blank_row,
    is_box_drawing,
    is_closed_box,
    is_frame_row,
)
from akk.screen.render import CaptureMismatch, render

__all__ = [
    "BLANK",
    "BOTTOM_LEFT",
    "BOTTOM_RIGHT",
    "HORIZONTAL",
    "LEFT_SIDE",
    "RIGHT_SIDE",
    "TOP_LEFT",
    "TOP_RIGHT",
    "VERTICAL",
    "CaptureMismatch",
    "Cell",
    "Grid",
    "IdMinter",
    "Region",
    "Run",
    "Style",
    "box_above",
    "fingerprint",
    "is_blank_row",
    "is_box_drawing",
    "is_closed_box",
    "is_frame_row",
    "render",
]
