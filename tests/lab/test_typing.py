"""Typing a task into a real idle composer exactly as AKK does, proving it, sending it once.

For every pinned client (120x40), one pane takes each text class in turn, the
way the sender puts it: `akk.tmux.keys` over a tmux control client, `send-keys -l` for one
line, a bracketed paste (`set-buffer` + `paste-buffer -p -r -d`) otherwise. The
pane is then captured and classified by the version's profile until
`draft_matches` holds (or a deadline passes), Enter goes after the client's
guard, and the model server must receive exactly that text, once, as one agent
turn. Last, a person's extra keystroke after AKK's text must break the proof.
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
    agents: tuple[str, ...] = ("claude", "codex")

    def for_profile(
        self, profile: ClaudeProfile | CodexProfile, width: int
    ) -> tuple[str, TypingMethod]:
        """The text and method for this version at a composer `width` columns wide."""
        if self.name == "literal_max":  # the longest line the client keeps as typed keys
            limit = profile.typing.literal_max_length
            words = ("lab literal " + "alpha beta gamma delta " * 60)[:limit]
            return words.rstrip(" ").ljust(limit, "x"), TypingMethod.LITERAL
        if self.name == "wide_line":  # short enough to type, more bytes than one read takes
            text = "lab " + "日本語の文" * 90
            return text, profile.typing.method_for(text)
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
    # Claude pastes it; Codex proves no wrapped line of CJK (its breaks are not modelled).
    Case("wide_line", agents=("claude",)),
    Case("full_row"),
    # tmux expands a leading '~' even inside double quotes (quote_argument escapes it).
    Case("leading_tilde", "~/lab: a path first"),
    # Claude's backslash-Enter line break: a pasted line may end in one (only the text's
    # own end is refused, docs/input.md).
    Case("line_backslash", "lab: a line ends in a backslash \\\nthe next", TypingMethod.PASTE),
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


async def _empty_composer(lab: LabSession) -> DraftView:
    """The empty draft, once the screen shows one (the last turn may still be painting)."""
    with trio.move_on_after(PROOF_TIMEOUT):
        while True:
            draft = await _draft(lab)
            if draft is not None and draft.empty:
                return draft
            await trio.sleep(POLL_SECONDS)
    raise AssertionError(f"no empty composer within {PROOF_TIMEOUT} s: {await _draft(lab)}")


async def _prove(lab: LabSession, text: str, how: TypingMethod) -> DraftView | None:
    """The first draft that shows exactly `text`, or None when the deadline passes first."""
    with trio.move_on_after(PROOF_TIMEOUT):
        while True:
            draft = await _draft(lab)
            if draft is not None and _profile(lab).draft_matches(draft, text, how):
                return draft
            await trio.sleep(POLL_SECONDS)
    return None


async def _type_prove_send(lab: LabSession, case: Case) -> None:
    """One text class into the idle composer: proven, Enter, the model gets it as one turn."""
    profile = _profile(lab)
    idle = await _empty_composer(lab)
    text, how = case.for_profile(profile, idle.width)
    first = len(lab.server.requests)
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
            lambda request: (
                request.index >= first
                and not request.auxiliary
                and bool(sent.fullmatch(request.newest_input))
            ),
            timeout=20,
        )
        await lab.wait_idle(20)

    turns = [r.newest_input for r in lab.server.main_requests() if r.index >= first]
    assert turns == [request.newest_input], lab.server.summary()
    assert sum(text in turn for turn in turns) == 1, lab.server.summary()


async def _a_persons_key_breaks_the_proof(lab: LabSession) -> None:
    """AKK's text proven, then a person's key lands before any Enter: the proof no longer holds."""
    profile = _profile(lab)
    text = "lab: a task the person types after"
    first = len(lab.server.requests)
    with trio.fail_after(60):
        await lab.wait_stable(quiet=profile.typing.settle_seconds)
        async with open_control_client(lab.socket) as client:
            await keys.type_literal(client, lab.pane, text)
            assert await _prove(lab, text, TypingMethod.LITERAL) is not None
            await lab.send_keys("!", literal=True)
            await lab.wait_for_screen(lambda screen: text + "!" in screen, 10, what="the key")
            draft = await _draft(lab)

    assert draft is not None
    assert not profile.draft_matches(draft, text, TypingMethod.LITERAL)
    assert profile.draft_matches(draft, text + "!", TypingMethod.LITERAL)
    assert [r for r in lab.server.main_requests() if r.index >= first] == []


@pytest.mark.parametrize("lab", lab_params("echo"), indirect=True)
async def test_every_text_class_is_proven_then_sent_exactly_once(lab: LabSession) -> None:
    # One pane per client takes every class in turn (each at an idle, empty composer after
    # the last one's turn, as back-to-back sends find it); a person's key comes last.
    for case in [case for case in CASES if lab.agent in case.agents]:
        try:
            await _type_prove_send(lab, case)
        except BaseException as exc:
            exc.add_note(f"text class {case.name!r} on {lab.agent} {lab.version}")
            raise
    await _a_persons_key_breaks_the_proof(lab)
