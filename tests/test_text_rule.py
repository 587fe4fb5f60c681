"""The text rule (akk.text_rule, akk.protocol.text_check) and the key layer's strict encoding.

Unit tests name each refused category and each version's specials; the
Hypothesis properties draw from every code point, surrogates included, and
check that a text is either refused before any key, or that the key layer
writes exactly its UTF-8 (a recording stand-in of the control client, which
encodes each line as the real one does).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Coroutine
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from akk.backends.terminal.resolve import Answer
from akk.profiles import claude, codex
from akk.profiles.composer import TypingMethod
from akk.profiles.keyplan import Intent, KeyPlanError, LiteralText, PlanRefusal, expand_checked
from akk.profiles.observation import InteractionKind, OptionRole, OptionView, StepKind
from akk.profiles.registry import PROFILES, Profile
from akk.protocol.errors import Reason, RpcError
from akk.protocol.text_check import check_text
from akk.text_rule import character_refusal, screen_refusal
from akk.tmux import keys
from akk.tmux.control import UnencodableCommand, command_line, encode_command

# ------------------------------------------------------------------ the character rule


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("x\ud800y", "U+D800"),  # a lone high surrogate
        ("q\udcc2\udc9bw", "U+DCC2"),  # surrogateescape's C1 smuggling
        ("a\x1bb", "U+001B"),  # C0
        ("a\x7fb", "U+007F"),  # DEL
        ("a\x9bb", "U+009B"),  # C1 (CSI)
        ("a\x85b", "U+0085"),  # C1 (NEL)
        ("a\tb", "U+0009"),  # a tab is C0 too
        ("soft\u00adhyphen", "U+00AD"),  # Cf
        ("\u202eevil", "U+202E"),  # bidi override
        ("a\u200db", "U+200D"),  # ZWJ
        ("a\u200bb", "U+200B"),  # zero-width space
        ("a\ufeffb", "U+FEFF"),  # BOM
        ("a\u0378b", "U+0378"),  # unassigned
        ("a\ue000b", "U+E000"),  # private use
        ("a\U000f0000b", "U+F0000"),  # supplementary private use
        ("a\u2028b", "U+2028"),  # line separator
        ("a\u2029b", "U+2029"),  # paragraph separator
        ("cafe\u0301", "U+0065"),  # not NFC: e + combining acute composes to é
    ],
)
def test_every_refused_category_names_its_character(text: str, named: str) -> None:
    for lines in (True, False):
        refused = character_refusal(text, lines=lines)
        assert refused is not None and named in refused.reason, refused
    with pytest.raises(RpcError) as raised:
        check_text(text, "request")
    assert raised.value.reason is Reason.INVALID_PARAMS
    assert named in str(raised.value) and "Nothing was sent" in str(raised.value)


def test_line_breaks_only_where_lines_are_allowed() -> None:
    assert character_refusal("one\ntwo", lines=True) is None
    refused = character_refusal("one\ntwo", lines=False)
    assert refused is not None and "U+000A" in refused.reason


@pytest.mark.parametrize("text", ["café", "日本語 🙂", "Ω", "x = $HOME", "one\ntwo"])
def test_plain_nfc_text_passes(text: str) -> None:
    assert character_refusal(text, lines="\n" in text) is None
    assert screen_refusal(text) is None


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_text_is_refused(text: str) -> None:
    assert character_refusal(text, lines=True) is not None


def test_the_screen_rule_adds_what_no_screen_shows() -> None:
    # Whitespace the clients trim, a no-break space, a combining mark with nothing to compose.
    for text in (" lead", "trail ", "a  \nb", "a\u00a0b", "x\u0301"):
        assert character_refusal(text, lines=True) is None, text
        assert screen_refusal(text) is not None, text


# ------------------------------------------------------------------ each version's specials

CLAUDE_SPECIALS = ["!ls", "/help", "@README", "see @README", "?", "?x", "ends with \\"]
CODEX_SPECIALS = ["!ls", "/help", "@README", "see @README", "?", "?x", "$skill", "use $skill"]
PLAIN = ["# heading", "&bg", "%x", "*x", ">x", "\\x", "a/b", "mail a@b.c", "costs 5$", "~x"]
PLAIN += ["echo ${HOME} $(id) $5"]


@pytest.mark.parametrize("profile", claude.PROFILES, ids=lambda p: p.id)
def test_claude_specials_per_version(profile: claude.ClaudeProfile) -> None:
    for text in CLAUDE_SPECIALS:
        refused = screen_refusal(text, profile.typing.specials)
        assert refused is not None and "instead of typing it" in refused.reason, text
    for text in PLAIN:
        assert screen_refusal(text, profile.typing.specials) is None, text
    # The questionnaire editor takes a leading '/' or '!' as text (its evidence), but a
    # trailing backslash makes its Enter a newline there too.
    for text in ("/Teal", "!Teal", "@README", "?", "Teal \\ blue"):
        assert screen_refusal(text, profile.editor_typing.specials) is None, text
    refused = screen_refusal("Teal \\", profile.editor_typing.specials)
    assert refused is not None and "newline" in refused.reason


@pytest.mark.parametrize("profile", codex.PROFILES, ids=lambda p: p.id)
def test_codex_specials_per_version(profile: codex.CodexProfile) -> None:
    for text in CODEX_SPECIALS:
        assert screen_refusal(text, profile.typing.specials) is not None, text
    for text in [*PLAIN, "ends with \\"]:
        assert screen_refusal(text, profile.typing.specials) is None, text
    # The notes open no popup and take a leading '/'; a leading '!' or '?' is refused there.
    for text in ("$HOME", "$skill", "see @README", "/x"):
        assert screen_refusal(text, profile.editor_typing.specials) is None, text
    for text in ("!ls", "?x"):
        assert screen_refusal(text, profile.editor_typing.specials) is not None, text


def test_every_pinned_version_refuses_shell_mode_and_commands_with_evidence() -> None:
    for profile in PROFILES.values():
        for text in ("!touch x", "/help"):
            assert screen_refusal(text, profile.typing.specials) is not None
        assert "docs/input.md" in profile.typing.evidence or "test_hostile_input" in (
            profile.typing.evidence
        )


# ------------------------------------------------------------------ the key layer


class RecordingClient:
    """A control-client stand-in: records the bytes each command line would write."""

    socket_path = "recording"

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.argv: list[tuple[str, ...]] = []

    async def command(self, *argv: str) -> list[str]:
        self.written.append(encode_command(argv))  # raises before recording, as the real one
        self.argv.append(argv)
        return []


def _type(profile: Profile, text: str, method: TypingMethod | None = None) -> RecordingClient:
    """What the TerminalActor would write for ``text`` (typed, or pasted when long)."""
    client = RecordingClient()
    how = method or profile.typing.method_for(text)

    fake: Any = client
    if how is TypingMethod.LITERAL:
        _drive(keys.type_literal(fake, "%0", text))
    else:
        _drive(keys.paste(fake, "%0", text))
    return client


def _drive(step: Coroutine[Any, Any, None]) -> None:
    """Run a key function against the stand-in, which never suspends (no event loop needed)."""
    with pytest.raises(StopIteration):
        step.send(None)


def _text_argument(client: RecordingClient) -> str:
    (argv,) = [a for a in client.argv if a[0] in ("send-keys", "set-buffer")]
    return argv[-1]


def _accepted_for_send(profile: Profile, text: str) -> bool:
    """The send path's rule: any-profile rule, then the pane's own specials."""
    try:
        check_text(text, "request", specials=())
        check_text(text, "request", specials=profile.typing.specials)
    except RpcError as exc:
        assert exc.reason is Reason.INVALID_PARAMS
        return False
    return True


ANY_TEXT = st.text(
    st.characters(exclude_categories=()) | st.characters(categories=["Cs"]), min_size=1
)
"""Every code point, lone surrogates included (no category left out)."""


@settings(max_examples=1000)
@given(text=ANY_TEXT | st.builds(lambda a, b: a + b, ANY_TEXT, st.text(max_size=8)))
@pytest.mark.parametrize("profile", [claude.V2_1_332, codex.PROFILES[-1]], ids=lambda p: p.id)
def test_a_send_is_refused_or_written_as_exactly_its_utf8(profile: Profile, text: str) -> None:
    if not _accepted_for_send(profile, text):
        event("send: refused")
        return  # refused in the connection's task: the actor is never asked, no key
    event("send: typed")
    client = _type(profile, text)
    assert _text_argument(client) == text
    # What is written is the command line in strict UTF-8 (tmux unquotes it to the text:
    # tests/test_key_bytes.py checks the bytes at the pane's pty).
    assert client.written == [(command_line(argv) + "\n").encode("utf-8") for argv in client.argv]


_EDITOR_PLAN = claude.V2_1_332.key_plans.plan_for(
    InteractionKind.QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.FREE_TEXT
)
_OPTIONS = (
    OptionView("Red", OptionRole.CHOICE, number=1, current=True),
    OptionView("Type something.", OptionRole.FREE_TEXT, number=2),
)


@settings(max_examples=1000)
@given(text=ANY_TEXT)
def test_free_text_is_refused_or_typed_as_exactly_its_utf8(text: str) -> None:
    try:
        check_text(text, "the free text", specials=(), lines=False)
    except RpcError:
        event("free text: refused")
        # The key plan, pure, refuses the same text too (defence in the actor).
        with pytest.raises(KeyPlanError) as raised:
            expand_checked(_EDITOR_PLAN, _OPTIONS, text=text)
        assert raised.value.reason in (PlanRefusal.UNSAFE_TEXT, PlanRefusal.NO_TEXT)
        return
    event("free text: typed")
    answer = Answer(Intent.FREE_TEXT, text=text)
    expanded = expand_checked(_EDITOR_PLAN, _OPTIONS, text=answer.text)
    (literal,) = [k for k in expanded.keys if isinstance(k, LiteralText)]
    client = _type(claude.V2_1_332, literal.text, TypingMethod.LITERAL)
    assert _text_argument(client) == text
    assert client.written == [(command_line(argv) + "\n").encode("utf-8") for argv in client.argv]


@settings(max_examples=1000)
@given(text=ANY_TEXT)
def test_the_key_layer_never_writes_bytes_a_text_does_not_spell(text: str) -> None:
    """Past every rule, strict encoding alone: an unencodable text raises, nothing written."""
    client = RecordingClient()
    fake: Any = client
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(UnencodableCommand):
            _drive(keys.type_literal(fake, "%0", text))
        assert client.written == []
        return
    _drive(keys.type_literal(fake, "%0", text))
    assert client.argv == [("send-keys", "-t", "%0", "-l", "--", text)]


def test_surrogateescape_no_longer_smuggles_c1() -> None:
    argv = ("send-keys", "-t", "%0", "-l", "--", "q\udcc2\udc9bx")
    with pytest.raises(UnencodableCommand) as raised:
        encode_command(argv)
    assert "U+DCC2" in str(raised.value)
    assert unicodedata.category("\udcc2") == "Cs"
