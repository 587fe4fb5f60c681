"""Typing a task into a real idle composer exactly as AKK does, proving it, sending it once.

For every pinned client (120x40), each text class goes in the way the sender
puts it: `akk.tmux.keys` over a tmux control client, `send-keys -l` for one
line, a bracketed paste (`set-buffer` + `paste-buffer -p -r -d`) otherwise. The
pane is then captured and classified by the version's profile until
`draft_matches` holds (or a deadline passes), Enter goes after the client's
quiet gap, and the model server must receive exactly that text, once. A
person's extra keystroke after AKK's text must break the proof.
"""

from __future__ import annotations

import attrs
import pytest
import trio

from akk.profiles import claude, codex
from akk.profiles.claude import ClaudeProfile
from akk.profiles.codex import CodexProfile
from akk.profiles.composer import DraftView, TypingMethod
from akk.qualify.launcher import LabSession
from akk.qualify.plans.shared import TYPED_DRAFTS
from akk.screen.render import render
from akk.text_rule import screen_refusal
from akk.tmux import keys
from akk.tmux.control import ControlClient, open_control_client
from tests.lab.conftest import lab_params

PROOF_TIMEOUT = 10.0
POLL_SECONDS = 0.05

_PROFILES: dict[tuple[str, str], ClaudeProfile | CodexProfile] = {
    (profile.agent, profile.version): profile for profile in (*claude.PROFILES, *codex.PROFILES)
}


@attrs.frozen
class Case:
    """One text class: a fixed text, or one built from the version's own typing data."""

    name: str
    text: str = ""
    method: TypingMethod = TypingMethod.LITERAL

    def for_profile(
        self, profile: ClaudeProfile | CodexProfile, width: int
    ) -> tuple[str, TypingMethod]:
        """The text and method for this version at a composer `width` columns wide."""
        if self.name == "literal_max":  # the longest line the client keeps as typed keys
            limit = profile.typing.literal_max_length
            words = ("lab literal " + "alpha beta gamma delta " * 60)[:limit]
            return words.rstrip(" ").ljust(limit, "x"), TypingMethod.LITERAL
        if self.name == "full_row":  # a first line that fills its row exactly
            return "lab " + "f" * (width - 4) + "\nthe next line", TypingMethod.PASTE
        if screen_refusal(self.text, profile.typing.specials) is not None:
            # `$HOME` is a special on Codex (a skill of that name would open its popup), which
            # AKK refuses before any key; the braced form keeps every other metacharacter.
            text = self.text.replace("$HOME", "${HOME}")
            assert screen_refusal(text, profile.typing.specials) is None, text
            return text, self.method
        return self.text, self.method


_CLASSES = ("wrap", "multiline", "quotes", "semicolon", "unicode", "shell")
CASES = [
    *(
        Case(name, TYPED_DRAFTS[name].text, TypingMethod(TYPED_DRAFTS[name].method))
        for name in _CLASSES
    ),
    *(
        Case(name, TYPED_DRAFTS[name].text, TypingMethod.PASTE)
        for name in ("paste800", "paste1001", "paste5000")
    ),
    Case("literal_max"),
    Case("full_row"),
    # tmux expands a leading '~' even inside double quotes (quote_argument escapes it).
    Case("leading_tilde", "~/lab: a path first"),
]


def _profile(lab: LabSession) -> ClaudeProfile | CodexProfile:
    return _PROFILES[(lab.agent, lab.version)]


async def _put(client: ControlClient, lab: LabSession, text: str, how: TypingMethod) -> None:
    if how is TypingMethod.LITERAL:
        await keys.type_literal(client, lab.pane, text)
    else:
        await keys.paste(client, lab.pane, text)


async def _draft(lab: LabSession) -> DraftView | None:
    grid = render(await lab.capture(), lab.cols, lab.rows)
    return _profile(lab).classify(grid).draft


async def _prove(lab: LabSession, text: str, how: TypingMethod) -> DraftView | None:
    """The first draft that shows exactly `text`, or None when the deadline passes first."""
    with trio.move_on_after(PROOF_TIMEOUT):
        while True:
            draft = await _draft(lab)
            if draft is not None and _profile(lab).draft_matches(draft, text, how):
                return draft
            await trio.sleep(POLL_SECONDS)
    return None


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@pytest.mark.parametrize("lab", lab_params("echo"), indirect=True)
async def test_typed_text_is_proven_then_sent_exactly_once(lab: LabSession, case: Case) -> None:
    profile = _profile(lab)
    idle = await _draft(lab)
    assert idle is not None and idle.empty, idle
    text, how = case.for_profile(profile, idle.width)
    with trio.fail_after(60):
        # A fresh composer drops keys (Claude): the sender waits out the settle time.
        await lab.wait_stable(quiet=profile.typing.settle_seconds)
        async with open_control_client(lab.socket) as client:
            await _put(client, lab, text, how)
            typed_at = trio.current_time()
            draft = await _prove(lab, text, how)
            assert draft is not None, f"composer never showed the text: {await _draft(lab)}"
            await trio.sleep_until(typed_at + profile.enter_guard_seconds)
            await keys.press(client, lab.pane, "Enter")
        sent = profile.typing.delivered(text, how, lab.rows)
        request = await lab.server.wait_for_request(
            lambda request: not request.auxiliary and bool(sent.fullmatch(request.newest_input)),
            timeout=20,
        )
        await lab.wait_idle(20)

    assert [r.newest_input for r in lab.server.main_requests()] == [request.newest_input]
    assert lab.server.count_inputs_containing(text) == 1, lab.server.summary()


@pytest.mark.parametrize("lab", lab_params("echo"), indirect=True)
async def test_a_persons_extra_keystroke_breaks_the_proof(lab: LabSession) -> None:
    profile = _profile(lab)
    text = "lab: a task the person types after"
    with trio.fail_after(60):
        await lab.wait_stable(quiet=profile.typing.settle_seconds)
        async with open_control_client(lab.socket) as client:
            await keys.type_literal(client, lab.pane, text)
            assert await _prove(lab, text, TypingMethod.LITERAL) is not None
            # The person's key lands right after AKK's text, before any Enter.
            await lab.send_keys("!", literal=True)
            await lab.wait_for_screen(lambda screen: text + "!" in screen, 10, what="the key")
            draft = await _draft(lab)

    assert draft is not None
    assert not profile.draft_matches(draft, text, TypingMethod.LITERAL)
    assert profile.draft_matches(draft, text + "!", TypingMethod.LITERAL)
    assert lab.server.main_requests() == []
