"""Input to one pane over a control client: literal text, bracketed paste, named keys.

Only the TerminalActor calls these, each time after it proved the screen,
reserved the step and asked `detour` whether tmux gives the pane's application the
keys. Each function is one or two tmux commands; a failure raises
``TmuxCommandError`` or ``ControlClientClosed`` and the caller decides what the
partial step means (never a retry).

They add nothing to the text: the bytes that reach the pane are exactly its
UTF-8 (tests/test_key_bytes.py reads them back from a raw pty). A text UTF-8
cannot encode raises ``UnencodableCommand`` before any byte is written; a paste
whose text could not be staged raises ``NothingPasted`` (no key reached the pane).
"""

from __future__ import annotations

import secrets
from contextlib import suppress

import attrs
import trio

from akk.tmux.control import (
    ControlClient,
    ControlClientClosed,
    TmuxCommandError,
    UnencodableCommand,
)

DROP_SECONDS = 2.0
"""How long the best-effort removal of a paste's private buffer may take."""


class NothingPasted(TmuxCommandError):
    """The paste's private buffer could not be set, so paste-buffer was never sent: no key
    reached the pane. Its text is not in the message (the command's name only)."""

    def __init__(self, cause: TmuxCommandError | ControlClientClosed) -> None:
        lines = cause.lines if isinstance(cause, TmuxCommandError) else [str(cause)]
        super().__init__(("set-buffer",), lines)


_WAY_FORMAT = "#{pane_in_mode}|#{pane_mode}|#{pane_synchronized}|#{pane_input_off}"


@attrs.frozen
class Detour:
    """Why keys sent to a pane now would not reach its application as they are spelled."""

    why: str
    next_step: str
    lasting: bool
    """True for a setting that stays until a person changes it (synchronized panes, input
    off); False for a mode a person is in for a moment (copy-mode, a chooser)."""


async def detour(client: ControlClient, pane_id: str) -> Detour | None:
    """What tmux would do with keys sent to ``pane_id`` instead of giving them to its
    application, or None when it gives them as they are.

    Asked right before a step's keys (the screen cannot tell: `capture-pane` shows the
    application's screen under a mode):

    - a mode (copy-mode, choose-buffer, choose-tree, ...) takes the keys: digits choose
      a person's paste buffer, Enter pastes it, ``d`` deletes it;
    - ``synchronize-panes`` copies them to every other pane of the window (a shell,
      another agent's permission prompt);
    - input turned off (``select-pane -d``) drops them.

    A pane tmux cannot be asked about (gone, or the client closed) is a detour too.
    """
    try:
        lines = await client.command("display-message", "-p", "-t", pane_id, _WAY_FORMAT)
    except (TmuxCommandError, ControlClientClosed) as exc:
        return Detour(
            f"tmux could not be asked whether pane {pane_id} takes keys ({str(exc)[:120]})",
            "Call status and try again",
            False,
        )
    fields = (lines[0] if lines else "").split("|")
    if len(fields) != 4 or any(fields[at] not in ("0", "1") for at in (0, 2, 3)):
        return Detour(
            f"tmux did not say whether pane {pane_id} takes keys ({(lines or [''])[0][:80]!r})",
            "Call status and try again",
            False,
        )
    in_mode, mode, synchronized, input_off = fields
    if synchronized == "1":
        return Detour(
            "its window has synchronize-panes on, so tmux would copy every key to the "
            "window's other panes",
            "A person turns it off (tmux set-window-option synchronize-panes off), then try again",
            True,
        )
    if input_off == "1":
        return Detour(
            "its input is off (select-pane -d), so tmux would drop the keys",
            "A person turns it on (tmux select-pane -e), then try again",
            True,
        )
    if in_mode == "1":
        return Detour(
            f"it is in tmux's {mode or 'a'} mode (a person scrolling or choosing), which "
            "would take the keys instead of the agent",
            "A person leaves the mode at the pane (q), then try again",
            False,
        )
    return None


async def type_literal(client: ControlClient, pane_id: str, text: str) -> None:
    """Type ``text`` (one line) as keystrokes; tmux sends it verbatim (``send-keys -l``)."""
    await client.command("send-keys", "-t", pane_id, "-l", "--", text)


async def paste(client: ControlClient, pane_id: str, text: str) -> None:
    """Paste ``text`` as the terminal would (bracketed paste when the application asks).

    ``-r`` keeps line feeds as they are; ``-d`` deletes the private buffer.
    """
    buffer = "akk-" + secrets.token_hex(8)
    try:
        await client.command("set-buffer", "-b", buffer, "--", text)
    except (TmuxCommandError, ControlClientClosed) as exc:
        if not isinstance(exc, UnencodableCommand):  # else nothing was written at all
            await _drop_buffer(client, buffer)  # a lost answer may hide a set buffer
        raise NothingPasted(exc) from exc
    try:
        await client.command("paste-buffer", "-p", "-r", "-d", "-b", buffer, "-t", pane_id)
    except BaseException:
        await _drop_buffer(client, buffer)  # `-d` deletes it only after a paste
        raise


async def _drop_buffer(client: ControlClient, buffer: str) -> None:
    """Delete the private buffer, best effort: the text must not stay on the tmux server.
    Shielded and bounded (it runs on the way out of a failure or a cancellation)."""
    with (
        trio.CancelScope(shield=True),
        trio.move_on_after(DROP_SECONDS),
        suppress(TmuxCommandError, ControlClientClosed),
    ):
        await client.command("delete-buffer", "-b", buffer)


async def press(client: ControlClient, pane_id: str, key: str) -> None:
    """Press one named key (``Enter``, ``Escape``)."""
    await client.command("send-keys", "-t", pane_id, key)
