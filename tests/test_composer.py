"""The composer proof: each client's wrapping as seen in the lab, and draft_matches.

The renderings pinned here were read off real panes (tools/lab, 120x40: Claude
2.1.263 wraps at 116 columns, Codex 0.169.0 and 0.153.4 at 117); the fixture
corpus (tests/test_fixtures.py) checks whole screens. The properties check the
one thing a sender relies on: a match never hides a different character.
"""

from __future__ import annotations

import unicodedata

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from akk.profiles import claude, codex
from akk.profiles.composer import (
    DraftView,
    Typing,
    TypingMethod,
    Wrapping,
    draft_matches,
    draft_refusal,
    render,
)
from akk.text_rule import screen_refusal

CLAUDE = claude.V2_1_263.typing
CODEX = codex.PROFILES[0].typing
LITERAL, PASTE = TypingMethod.LITERAL, TypingMethod.PASTE


def _rows(wrapping: Wrapping, text: str, width: int) -> tuple[str, ...]:
    rendered = render(wrapping, text, width)
    assert rendered is not None
    return rendered[0]


def _draft(wrapping: Wrapping, text: str, width: int = 116, **changes: object) -> DraftView:
    rendered = render(wrapping, text, width)
    assert rendered is not None
    rows, cursor = rendered
    return attrs.evolve(DraftView(rows, width, 40, cursor=cursor), **changes)


# ---------------------------------------------------------------- seen in the lab


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        # Spaces where a row breaks vanish, on the row below too.
        ("a" * 115 + " " * 7 + "bbbbb", ("a" * 115, "bbbbb")),
        ("a" * 116 + "   bbb", ("a" * 116, "bbb")),
        # Inside a row they stay; a word wider than a row breaks in place...
        ("a" * 117 + "  " + "b" * 20, ("a" * 116, "a  " + "b" * 20)),
        ("hi " + "H" * 128, ("hi " + "H" * 113, "H" * 15)),
        # ...and a wide character that does not fit moves down whole.
        ("x" * 115 + "漢", ("x" * 115, "漢")),
        ("x" * 112 + " 漢字 かな 文字", ("x" * 112, "漢字 かな 文字")),
        # A line's leading spaces are drawn; a full row takes no extra row.
        (" abc", (" abc",)),
        ("e" * 116, ("e" * 116,)),
    ],
)
def test_claude_wraps_like_bun_wrap_ansi(text: str, rows: tuple[str, ...]) -> None:
    assert _rows(Wrapping.WRAP_ANSI, text, 116) == rows


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        # A word wider than a row starts on a row of its own, then breaks.
        ("hi " + "H" * 127, ("hi", "H" * 117, "H" * 10)),
        ("a" * 114 + " " * 7 + "bbbbb", ("a" * 114, "bbbbb")),
        ("a" * 118 + " " + "b" * 20, ("a" * 117, "a " + "b" * 20)),
        # A line that fills its last row gets an empty row after it.
        ("e" * 117, ("e" * 117, "")),
        ("e" * 117 + "\nnext", ("e" * 117, "", "next")),
        # No break before ",.:;" even after spaces (UAX #14 LB13).
        ("a" * 110 + " word ,comma", ("a" * 110, "word ,comma")),
        # A hyphen between alphanumerics is a break opportunity.
        ("a" * 111 + " well-known", ("a" * 111 + " well-", "known")),
    ],
)
def test_codex_wraps_like_textwrap(text: str, rows: tuple[str, ...]) -> None:
    assert _rows(Wrapping.TEXTWRAP, text, 117) == rows


def test_codex_refuses_to_guess_unicode_line_breaking() -> None:
    # Codex breaks after CJK and emoji, and around `/`, `|`, `!`...: not reproduced.
    assert render(Wrapping.TEXTWRAP, "x" * 115 + "漢字かな", 117) is None
    assert render(Wrapping.TEXTWRAP, "a/" * 70, 117) is None
    # A line that fits needs no breaking at all.
    assert render(Wrapping.TEXTWRAP, "漢字 😀 a/b | c!", 117) is not None


# ---------------------------------------------------------------- the typing rows


def test_paste_thresholds_per_client() -> None:
    assert not CLAUDE.collapses("x" * 800, 40) and CLAUDE.collapses("x" * 801, 40)
    assert not CLAUDE.collapses("a\nb\nc", 40) and CLAUDE.collapses("a\nb\nc\nd", 40)
    assert CLAUDE.collapses("a\nb\nc", 11) and CLAUDE.collapses("a\nb", 10)  # small panes
    assert CLAUDE.collapses("😀" * 401, 40)  # JavaScript counts an emoji twice
    assert not CODEX.collapses("x" * 1000, 40) and CODEX.collapses("x" * 1001, 40)
    assert not CODEX.collapses("\n".join(["x"] * 50), 40)


def test_placeholders_per_client() -> None:
    assert CLAUDE.placeholder("x" * 900).fullmatch("[Pasted text #3]")
    assert CLAUDE.placeholder("a\nb\nc\nd").fullmatch("[Pasted text #1 +3 lines]")
    assert not CLAUDE.placeholder("a\nb\nc\nd").fullmatch("[Pasted text #1 +4 lines]")
    assert not CLAUDE.placeholder("x" * 900).fullmatch("[Pasted text #0]")
    assert CODEX.placeholder("x" * 1200).fullmatch("[Pasted Content 1200 chars]")
    assert not CODEX.placeholder("x" * 1200).fullmatch("[Pasted Content 1200 chars] #2")


def test_method_for_follows_the_literal_limit() -> None:
    assert CLAUDE.method_for("x" * 800) is LITERAL
    assert CLAUDE.method_for("x" * 801) is PASTE
    assert CODEX.method_for("x" * 1000) is LITERAL
    assert CODEX.method_for("one\ntwo") is PASTE


def test_claude_pastes_a_line_of_more_bytes_than_one_read_takes() -> None:
    assert CLAUDE.method_for("日" * 341) is LITERAL  # 1,023 bytes
    assert CLAUDE.method_for("日" * 342) is PASTE  # 1,026 bytes, 342 characters
    assert CLAUDE.method_for("🎉" * 256) is LITERAL  # 1,024 bytes, 512 UTF-16 units
    assert CODEX.method_for("日" * 1000) is LITERAL


def test_what_the_model_receives_for_a_collapsed_paste() -> None:
    text = "x" * 900
    wrapped = claude.V2_1_328.typing.delivered(text, PASTE, 40)
    assert wrapped.fullmatch(f'<pasted_content id="9ec1">\n{text}\n</pasted_content id="9ec1">')
    assert not wrapped.fullmatch(text)
    assert CLAUDE.delivered(text, PASTE, 40).fullmatch(text)
    assert claude.V2_1_328.typing.delivered("short", PASTE, 40).fullmatch("short")


def test_visible_rows_of_claudes_fullscreen_composer() -> None:
    assert CLAUDE.visible_rows(24) == 7 and CLAUDE.visible_rows(40) == 15
    assert CLAUDE.visible_rows(10) == 3 and CODEX.visible_rows(24) is None


# ---------------------------------------------------------------- draft_matches


def test_exact_text_matches_and_near_misses_do_not() -> None:
    text = "lab: " + " ".join(["alpha beta gamma"] * 12)
    draft = _draft(Wrapping.WRAP_ANSI, text)
    assert len(draft.rows) > 1 and draft_matches(CLAUDE, draft, text, LITERAL)
    for other in (text + "x", text + " ", text.replace("beta", "bete", 1), text[:-1]):
        assert not draft_matches(CLAUDE, draft, other, LITERAL)


def test_the_cursor_when_captured_must_sit_after_the_text() -> None:
    draft = _draft(Wrapping.WRAP_ANSI, "abc")
    assert draft_matches(CLAUDE, attrs.evolve(draft, cursor=None), "abc", LITERAL)
    assert not draft_matches(CLAUDE, attrs.evolve(draft, cursor=(0, 4)), "abc", LITERAL)


@pytest.mark.parametrize(
    "text",
    [
        " lead",
        "trail ",
        "tab\there",
        "line end \nnext",
        "e\u0301",  # not NFC
        "zero\u200bwidth",
        "nbsp\u00a0here",
        "/help",
        "!ls",
        "has [Pasted text #1] in it",
    ],
)
def test_unprovable_or_command_texts_never_match(text: str) -> None:
    draft = DraftView((text,), 116, 40)
    assert not draft_matches(CLAUDE, draft, text, PASTE)


def test_literal_refuses_what_the_client_takes_for_a_paste() -> None:
    assert not draft_matches(CLAUDE, DraftView(("x",), 116, 40), "x\ny", LITERAL)
    long = "x" * 801
    assert not draft_matches(CLAUDE, _draft(Wrapping.WRAP_ANSI, long), long, LITERAL)


def test_a_placeholder_is_proven_alone_and_by_its_size() -> None:
    text = "\n".join(["line"] * 10)
    token = "[Pasted text #2 +9 lines]"
    shown = DraftView((token,), 116, 40, placeholders=(token,))
    assert draft_matches(CLAUDE, shown, text, PASTE)
    assert not draft_matches(CLAUDE, shown, text + "\nline", PASTE)
    assert not draft_matches(CLAUDE, attrs.evolve(shown, placeholders=()), text, PASTE)
    assert not draft_matches(CLAUDE, DraftView((token + " x",), 116, 40, (token,)), text, PASTE)
    codex_text = "y" * 1500
    element = "[Pasted Content 1500 chars]"
    pasted = DraftView((element,), 117, 40, placeholders=(element,))
    assert draft_matches(CODEX, pasted, codex_text, PASTE)
    assert not draft_matches(CODEX, pasted, codex_text + "y", PASTE)
    # Typed text that merely reads like a placeholder is no paste.
    assert not draft_matches(CODEX, attrs.evolve(pasted, placeholders=()), codex_text, PASTE)


def test_a_draft_that_may_be_scrolled_or_unread_never_matches() -> None:
    text = " ".join(["word"] * 400)  # 15 rows or more at 116 columns
    draft = _draft(Wrapping.WRAP_ANSI, text)
    assert len(draft.rows) >= 15 and not draft_matches(CLAUDE, draft, text, PASTE)
    short = _draft(Wrapping.TEXTWRAP, "short", width=117)
    assert not draft_matches(CODEX, attrs.evolve(short, complete=False), "short", LITERAL)


# ---------------------------------------------------------------- properties

_ALPHABET = "ab -,.:" + "é漢😀"
_PLAIN = "ab -,.:"


def _texts(alphabet: str) -> st.SearchStrategy[str]:
    line = st.text(alphabet, min_size=1, max_size=40).map(lambda s: s.strip(" "))
    return (
        st.lists(line.filter(bool), min_size=1, max_size=3)
        .map("\n".join)
        .filter(lambda text: text == text.strip())
    )


def _visible(text: str) -> str:
    """`text` without its layout (spaces and line breaks): what a wrap may not hide."""
    return text.replace(" ", "").replace("\n", "")


def _row_ends(text: str, rows: tuple[str, ...]) -> list[int]:
    """Where in `text` each drawn row's last visible character is (rows keep their order)."""
    places = [index for index, ch in enumerate(text) if ch not in " \n"]
    ends, count = [], 0
    for row in rows:
        count += len(_visible(row))
        if 0 < count <= len(places):
            ends.append(places[count - 1])
    return ends


def _relayouts(text: str, rows: tuple[str, ...]) -> list[str]:
    """`text` with its layout changed where a row ends: what may draw alike, and only so."""
    variants = ["\n".join(rows)]  # a person's line break at every wrap
    for end in _row_ends(text, rows):
        gap = len(text[end + 1 :]) - len(text[end + 1 :].lstrip(" \n"))
        for layout in ("", " ", "  ", "\n", "\n\n", " \n"):
            variants.append(text[: end + 1] + layout + text[end + 1 + gap :])
    return variants


def _edits(text: str, rows: tuple[str, ...], alphabet: str) -> list[str]:
    """`text` with one visible character dropped, changed or added where a row ends or begins."""
    variants = []
    visible = [ch for ch in alphabet if ch != " "]
    for end in _row_ends(text, rows):
        after = end + 1 + len(text[end + 1 :]) - len(text[end + 1 :].lstrip(" \n"))
        for at in (end, after):
            if at < len(text):
                other = visible[(visible.index(text[at]) + 1) % len(visible)]
                variants += [text[:at] + text[at + 1 :], text[:at] + other + text[at + 1 :]]
            variants.append(text[:at] + visible[0] + text[at:])
    return variants


def _lookalikes(text: str) -> list[str]:
    """`text` as a terminal draws it too, each with what the rule says a screen cannot prove."""
    variants = [
        text + " ",  # trailing whitespace: a blank cell, stripped from the row
        text[:1] + "\u200b" + text[1:],  # zero-width space: no cell at all
        text[:-1] + "\u200d" + text[-1:],  # zero-width joiner
    ]
    if "\n" in text:
        variants.append(text.replace("\n", " \n", 1))  # a space before a line break
    if " " in text:
        variants.append(text.replace(" ", "\u00a0", 1))  # a no-break space: a blank cell
    if unicodedata.normalize("NFD", text) != text:
        variants.append(unicodedata.normalize("NFD", text))  # é drawn from e and U+0301
    return variants


def test_equal_rows_never_hide_a_different_character() -> None:
    """Texts drawn alike differ at most in layout (the wrap ambiguity); all else is refused.

    Each example draws one text and builds the texts that could share its rows:
    its layout changed where rows end (a space, none, two, line breaks: the wrap
    ambiguity, which a draft may prove either way), a visible character dropped,
    changed or added there (which must never share its rows), and lookalikes a
    terminal draws the same cells for (which `draft_matches` must refuse, and
    the screen rule name). The counts at the end prove the collisions happen: about
    six thousand distinct pairs with the same rows per thousand examples.
    """
    same_rows: set[tuple[Wrapping, int, str, str]] = set()
    accepted: set[tuple[Wrapping, int, str, str]] = set()  # of those, the ones a draft proves
    lookalikes: set[tuple[Wrapping, int, str, str]] = set()

    @settings(max_examples=400)
    @given(
        st.sampled_from(
            [(CLAUDE, Wrapping.WRAP_ANSI, _ALPHABET), (CODEX, Wrapping.TEXTWRAP, _PLAIN)]
        ),
        st.integers(min_value=4, max_value=12),
        st.data(),
    )
    def check(kind: tuple[Typing, Wrapping, str], width: int, data: st.DataObject) -> None:
        typing, wrapping, alphabet = kind
        text = data.draw(_texts(alphabet))
        rendered = render(wrapping, text, width)
        if rendered is None:
            event("not reproduced: unicode line breaking")
            return
        rows, cursor = rendered
        drafts = [DraftView(rows, width, 200, cursor=seen) for seen in (cursor, None)]

        def shown_as(other: str) -> bool:
            how = typing.method_for(other)
            return any(draft_matches(typing, draft, other, how) for draft in drafts)

        assert shown_as(text)
        for other in {*_relayouts(text, rows), *_edits(text, rows, alphabet)} - {text}:
            drawn = render(wrapping, other, width) if other.strip() else None
            alike, proven = drawn is not None and drawn[0] == rows, shown_as(other)
            if alike:
                same_rows.add((wrapping, width, text, other))
                event("same rows, " + ("proven" if proven else "refused"))
            if proven:
                accepted.add((wrapping, width, text, other))
            if alike or proven:
                assert _visible(other) == _visible(text), (text, other, rows)
        for other in _lookalikes(text):
            lookalikes.add((wrapping, width, text, other))
            assert screen_refusal(other) is not None, other
            assert not shown_as(other), (text, other)

    check()
    # Before, two independently drawn texts gave 0 such pairs in 2,000 examples.
    counts = len(same_rows), len(accepted), len(lookalikes)
    assert counts[0] >= 1000 and counts[1] >= 200 and counts[2] >= 1000, counts


@settings(max_examples=300)
@given(_texts(_PLAIN), st.integers(min_value=6, max_value=40))
def test_every_rendering_matches_its_own_text(text: str, width: int) -> None:
    for typing, wrapping in ((CLAUDE, Wrapping.WRAP_ANSI), (CODEX, Wrapping.TEXTWRAP)):
        draft = attrs.evolve(_draft(wrapping, text, width), pane_rows=200)
        assert draft_matches(typing, draft, text, PASTE)
        assert not draft_matches(typing, draft, text + "a", PASTE)


# ---------------------------------------------------------------- refused before a key


def test_codex_refuses_a_line_of_cjk_it_would_wrap_and_takes_it_where_it_fits() -> None:
    refused = draft_refusal(CODEX, "漢" * 60, 117, 40)  # 120 columns
    assert refused is not None and "117 columns" in refused.message("the text")
    assert draft_refusal(CODEX, "漢" * 58, 117, 40) is None  # 116 columns: one row
    assert draft_refusal(CODEX, "漢" * 60, 200, 40) is None
    assert draft_refusal(CODEX, "漢" * 1001, 117, 40) is None  # pasted: one placeholder
    assert draft_refusal(CLAUDE, "漢" * 60, 116, 40) is None  # Claude's wrap is modelled


@pytest.mark.parametrize(
    ("typing", "token"),
    [(CODEX, "[Pasted Content 12 chars]"), (CLAUDE, "[Pasted text #1 +2 lines]")],
    ids=["codex", "claude"],
)
def test_a_text_holding_a_paste_placeholder_is_refused(typing: Typing, token: str) -> None:
    refused = draft_refusal(typing, f"see {token} here", 116, 40)
    assert refused is not None and token in refused.reason


def test_claude_refuses_a_draft_taller_than_its_composer_shows() -> None:
    text = " ".join(["word"] * 160)  # 799 characters: typed, about 20 rows at 40 columns
    refused = draft_refusal(CLAUDE, text, 40, 20)  # shows max(3, 20 // 2 - 5) = 5 rows
    assert refused is not None and "at most 5" in refused.reason
    assert draft_refusal(CLAUDE, text, 40, 60) is None  # 25 rows shown


@given(
    st.text(st.sampled_from("ab 漢字,.-🎉"), min_size=1, max_size=300).map(str.strip),
    st.integers(min_value=10, max_value=120),
    st.integers(min_value=8, max_value=60),
    st.sampled_from([CLAUDE, CODEX]),
)
def test_a_text_is_refused_before_typing_exactly_when_no_draft_could_prove_it(
    text: str, width: int, pane_rows: int, typing: Typing
) -> None:
    """What `draft_refusal` lets through, its own rendering proves; what it refuses, none."""
    if not text or screen_refusal(text, typing.specials) is not None:
        return
    how = typing.method_for(text)
    refused = draft_refusal(typing, text, width, pane_rows)
    rendered = render(typing.wrapping, text, width)
    if how is PASTE and typing.collapses(text, pane_rows):
        assert refused is None
        return
    event("refused" if refused else "provable")
    if refused is None:
        assert rendered is not None
        rows, cursor = rendered
        assert draft_matches(typing, DraftView(rows, width, pane_rows, cursor=cursor), text, how)
    elif rendered is not None:
        rows, cursor = rendered
        assert not draft_matches(
            typing, DraftView(rows, width, pane_rows, cursor=cursor), text, how
        )
