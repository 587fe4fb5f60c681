"""Input to one pane over a control client: literal text, bracketed paste, named keys.

Only the TerminalActor calls these, each time after it proved the screen and
reserved the step. Each function is one or two tmux commands; a failure raises
``TmuxCommandError`` or ``ControlClientClosed`` and the caller decides what the
partial step means (never a retry).

They add nothing to the text: the bytes that reach the pane are exactly its
UTF-8 (tests/test_key_bytes.py reads them back from a raw pty). A text UTF-8
cannot encode raises ``UnencodableCommand`` before any byte is written.
"""

from __future__ import annotations

import secrets

from akk.tmux.control import ControlClient


async def type_literal(client: ControlClient, pane_id: str, text: str) -> None:
    """Type ``text`` (one line) as keystrokes; tmux sends it verbatim (``send-keys -l``)."""
    await client.command("send-keys", "-t", pane_id, "-l", "--", text)


async def paste(client: ControlClient, pane_id: str, text: str) -> None:
    """Paste ``text`` as the terminal would (bracketed paste when the application asks).

    ``-r`` keeps line feeds as they are; ``-d`` deletes the private buffer.
    """
    buffer = "akk-" + secrets.token_hex(8)
    await client.command("set-buffer", "-b", buffer, "--", text)
    await client.command("paste-buffer", "-p", "-r", "-d", "-b", buffer, "-t", pane_id)


async def press(client: ControlClient, pane_id: str, key: str) -> None:
    """Press one named key (``Enter``, ``Escape``)."""
    await client.command("send-keys", "-t", pane_id, key)
