"""End to end on real tmux: what reaches a pane's pty is exactly the UTF-8 of an accepted text.

The pane runs a raw byte sink (``stty raw -echo; cat``): the terminal driver
changes nothing, so the file holds every byte tmux wrote for the keys. Texts
are drawn from every code point (surrogates included); those the send rule
accepts (for a Claude and a Codex profile) are typed or pasted exactly as the
TerminalActor does it, and the bytes that arrived must equal ``text.encode()``.
Fewer examples than the key-layer properties in test_text_rule.py: each one is
a real round trip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from akk.profiles import claude, codex
from akk.profiles.composer import TypingMethod
from akk.profiles.registry import Profile
from akk.protocol.errors import RpcError
from akk.protocol.text_check import check_text
from akk.tmux import keys, open_control_client
from tests.tier import examples

ARRIVAL_SECONDS = 5.0


@attrs.frozen
class Sink:
    socket: str
    pane: str
    path: Path


@pytest.fixture(scope="module")
def sink() -> Iterator[Sink]:
    root = tempfile.mkdtemp(prefix="akk-bytes-", dir="/tmp")
    socket, path = os.path.join(root, "s.sock"), Path(root, "bytes")
    path.touch()
    command = f"stty raw -echo; exec cat > {path}"
    pane = subprocess.run(
        ["tmux", "-S", socket, "-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50",
         "-P", "-F", "#{pane_id}", command],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    try:
        yield Sink(socket, pane, path)
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _accepted(profile: Profile, text: str) -> bool:
    try:
        check_text(text, "request", specials=profile.typing.specials)
    except RpcError:
        return False
    return True


async def _arrived(sink: Sink, profile: Profile, text: str) -> bytes:
    """Type or paste ``text`` into the sink as the TerminalActor would; the bytes that came."""
    start = sink.path.stat().st_size
    wanted = len(text.encode("utf-8"))
    async with open_control_client(sink.socket) as client:
        if profile.typing.method_for(text) is TypingMethod.LITERAL:
            await keys.type_literal(client, sink.pane, text)
        else:
            await keys.paste(client, sink.pane, text)
    with trio.move_on_after(ARRIVAL_SECONDS):
        while sink.path.stat().st_size < start + wanted:
            await trio.sleep(0.01)
    with trio.move_on_after(0.05):  # anything beyond the text would show here
        while sink.path.stat().st_size == start + wanted:
            await trio.sleep(0.01)
    with sink.path.open("rb") as f:
        f.seek(start)
        return f.read()


_CHARS = st.characters(exclude_categories=()) | st.characters(categories=["Cs"])
_PRINTABLE = st.characters(categories=["L", "N", "P", "S"]) | st.sampled_from("\n  ")
_TEXT = st.text(_CHARS | st.sampled_from("\n ab"), min_size=1, max_size=40) | st.text(
    _PRINTABLE, min_size=1, max_size=60
)
"""Every code point, and (to reach the pty often) printable text with spaces and line breaks."""


@settings(
    max_examples=examples(120),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)
@given(text=_TEXT, profile=st.sampled_from([claude.V2_1_332, codex.PROFILES[-1]]))
def test_the_pty_receives_exactly_the_utf8_of_every_accepted_text(
    sink: Sink, text: str, profile: Profile
) -> None:
    if not _accepted(profile, text):
        event("refused (no key)")
        return
    event(f"typed ({profile.typing.method_for(text).value})")
    assert trio.run(_arrived, sink, profile, text) == text.encode("utf-8")


@pytest.mark.parametrize(
    "text",
    [
        "lab: 漢字 かな 한국어 🎉 café — naïve",
        "first\nsecond line",
        'quote " and \\ and $x ~y',
        "x" * 900,
    ],
)
def test_known_texts_arrive_exactly(sink: Sink, text: str) -> None:
    profile = claude.V2_1_332
    assert _accepted(profile, text)
    assert trio.run(_arrived, sink, profile, text) == text.encode("utf-8")
