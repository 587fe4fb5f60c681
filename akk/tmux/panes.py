"""Pane listing and capture over a control client: one tmux command each, no process spawned."""

from __future__ import annotations

import attrs

from akk.tmux.control import ControlClient, ControlProtocolError

SEPARATOR = "\x1f"
"""Field separator in listings (ASCII unit separator).

tmux escapes control characters in session names, and the only free-text
field that could carry one, the pane's command name, is filtered to printable
ASCII by the format itself and placed last.
"""

_FIELDS = (
    "pane_id",
    "pane_pid",
    "session_id",
    "session_name",
    "window_id",
    "window_index",
    "pane_index",
    "pane_width",
    "pane_height",
    "cursor_x",
    "cursor_y",
    "pane_dead",
    "pane_in_mode",
    "alternate_on",
    "history_size",
    "window_activity",
    "pane_tty",
)
# Last, and reduced to printable ASCII: a process may name itself anything.
_COMMAND_FIELD = "#{s/[^!-~]/?/:pane_current_command}"
LIST_FORMAT = SEPARATOR.join([*(f"#{{{name}}}" for name in _FIELDS), _COMMAND_FIELD])
"""The `-F` format of `list_panes`."""


@attrs.frozen
class PaneInfo:
    """One pane as tmux lists it.

    `activity` is the window's last output time in whole seconds (tmux keeps
    activity per window, not per pane).
    """

    pane_id: str
    pane_pid: int
    session_id: str
    session_name: str
    window_id: str
    window_index: int
    pane_index: int
    width: int
    height: int
    cursor_x: int
    cursor_y: int
    dead: bool
    in_mode: bool
    alternate_on: bool
    history_size: int
    activity: int
    tty: str
    current_command: str

    @classmethod
    def parse(cls, line: str) -> PaneInfo:
        """Parse one line printed with `LIST_FORMAT`."""
        fields = line.split(SEPARATOR)
        if len(fields) != len(_FIELDS) + 1:
            raise ValueError(f"expected {len(_FIELDS) + 1} fields, got {len(fields)}")
        (pane_id, pid, session_id, session_name, window_id, window_index, pane_index,
         width, height, cx, cy, dead, in_mode, alternate, history, activity, tty,
         command) = fields  # fmt: skip
        return cls(
            pane_id=pane_id,
            pane_pid=int(pid or 0),  # a dead pane's pid may be empty
            session_id=session_id,
            session_name=session_name,
            window_id=window_id,
            window_index=int(window_index),
            pane_index=int(pane_index),
            width=int(width),
            height=int(height),
            cursor_x=int(cx),
            cursor_y=int(cy),
            dead=dead == "1",
            in_mode=in_mode == "1",
            alternate_on=alternate == "1",
            history_size=int(history),
            activity=int(activity or 0),
            tty=tty,
            current_command=command,
        )


async def list_panes(client: ControlClient) -> list[PaneInfo]:
    """Every pane of every session on the client's server (`list-panes -a`).

    A pane linked into several sessions (grouped sessions, linked windows) is
    listed once, under the first session tmux reports. Raises
    `ControlProtocolError` if a line does not parse: the answer cannot be
    trusted and the caller should reopen the client.
    """
    lines = await client.command("list-panes", "-a", "-F", LIST_FORMAT)
    panes: dict[str, PaneInfo] = {}
    for line in lines:
        try:
            pane = PaneInfo.parse(line)
        except ValueError as exc:
            raise ControlProtocolError(
                client.socket_path, f"unparseable list-panes line {line[:80]!r}: {exc}"
            ) from exc
        panes.setdefault(pane.pane_id, pane)
    return list(panes.values())


async def capture(client: ControlClient, pane_id: str) -> str:
    """The pane's visible screen exactly as `tmux capture-pane -p -e -t PANE` prints it.

    One line per row (trailing blank rows included, trailing spaces trimmed
    by tmux), SGR escapes kept, each row ending in a newline. Raises
    `TmuxCommandError` if the pane is gone.
    """
    lines = await client.command("capture-pane", "-p", "-e", "-t", pane_id)
    return "".join(line + "\n" for line in lines)


async def pane_size(client: ControlClient, pane_id: str) -> tuple[int, int] | None:
    """The pane's (columns, rows) now, or None if tmux names no such size.

    Raises `TmuxCommandError` if the pane is gone.
    """
    lines = await client.command(
        "display-message", "-p", "-t", pane_id, "#{pane_width} #{pane_height}"
    )
    cols, _, rows = (lines[0] if lines else "").partition(" ")
    if not (cols.isdigit() and rows.isdigit()):
        return None
    return int(cols), int(rows)
