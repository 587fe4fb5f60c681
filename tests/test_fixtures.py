"""Every captured screen classifies to the label the capture tool wrote for it.

The labels come from the lab scenarios' own data, never from parsing screens,
so this is the ground truth for every pinned version at both sizes. Every draft
screen's composer must match exactly the text its label says was typed or
pasted, and not a near miss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from akk.profiles import claude, codex
from akk.profiles.claude import ClaudeProfile
from akk.profiles.codex import CodexProfile
from akk.profiles.composer import TypingMethod
from akk.profiles.observation import OptionRole, ResponseKind, StepKind
from akk.profiles.registry import PROFILES
from akk.text_rule import screen_refusal
from tests import corpus

# Screens only: fixtures/<agent>/<version>/[<size>/] (other corpora live beside them).
SIZE_FOLDERS = ("80x24", "60x40", "100x30", "132x43", "200x50")
LABELS = corpus.labels("", *SIZE_FOLDERS)
QUIET_STATES = {"idle", "idle_draft", "working"}
CONFIRM_ROLES = (OptionRole.SUBMIT, OptionRole.CANCEL, OptionRole.PROCEED, OptionRole.GO_BACK)


def test_every_pinned_version_has_a_corpus_at_both_sizes() -> None:
    for agent, version in PROFILES:
        wide = list((corpus.ROOT / agent / version).glob("*.json"))
        narrow = list((corpus.ROOT / agent / version / "80x24").glob("*.json"))
        assert len(wide) >= 15 and len(narrow) >= 15, (agent, version, len(wide), len(narrow))
    versions = {
        (p.parent.parent.name if p.parent.name in SIZE_FOLDERS else p.parent.name) for p in LABELS
    }
    assert versions == {v for _, v in PROFILES}


def classifies_to_its_label(label_path: Path) -> None:
    """The screen's observation is the one its label expects."""
    label = corpus.label(label_path)
    _, observation = corpus.observed(label_path)
    expected = label["expected"]
    state = "blocked" if expected["manual_only"] else expected["state"]
    assert observation.state.value == state, observation.reason
    if state in QUIET_STATES:
        assert observation.prompt is None and observation.reason is None
        return
    if state in ("blocked", "unknown"):
        assert not observation.actionable and observation.reason
        return
    assert observation.actionable, observation.reason
    prompt = observation.prompt
    assert prompt is not None
    assert prompt.kind.value == expected["kind"]
    if not expected["questions"] and not expected["decisions"]:
        # Codex's queued async question: nothing shows yet but the way to open it.
        assert (prompt.step, prompt.questions) == (StepKind.QUEUED, ())
        return
    if expected["step"] is not None:
        assert (prompt.step_index, prompt.step_total) == (
            expected["step"]["index"],
            expected["step"]["total"],
        )
    if expected["decisions"]:
        assert prompt.kind.value == "permission"
        (question,) = prompt.questions
        assert question.response_kind is ResponseKind.CONFIRM
        assert expected["command"] in question.detail
        roles = [o.role for o in question.options]
        assert roles.count(OptionRole.APPROVE_ONCE) == 1 and roles.count(OptionRole.REJECT) == 1
        return
    assert len(prompt.questions) == len(expected["questions"])
    for question, wanted in zip(prompt.questions, expected["questions"], strict=True):
        assert question.prompt == wanted["prompt"]
        assert question.header == wanted["header"]
        assert question.response_kind.value == wanted["response_kind"]
        # A review or confirm step's own rows are its options; elsewhere a Submit
        # row is how the widget moves on, not an answer.
        confirming = prompt.step in (StepKind.REVIEW, StepKind.CONFIRM)
        choices = [
            o.label
            for o in question.options
            if o.role is OptionRole.CHOICE or (confirming and o.role in CONFIRM_ROLES)
        ]
        extras = [o.label for o in question.options if o.label not in choices]
        assert choices == wanted["options"]
        assert extras == wanted["extra_rows"]
        current = [o.label for o in question.options if o.current]
        assert current == [wanted["current_row"]]
        assert [o.label for o in question.options if o.checked] == wanted["checked"]


test_fixture_classifies_to_its_label = corpus.each(LABELS)(classifies_to_its_label)


def test_states_cover_every_kind_of_screen() -> None:
    states = {corpus.label(p)["expected"]["state"] for p in LABELS}
    assert states >= {"idle", "idle_draft", "working", "permission", "questionnaire", "blocked"}


# ---------------------------------------------------------------- drafts

_PROFILES: dict[tuple[str, str], ClaudeProfile | CodexProfile] = {
    (profile.agent, profile.version): profile for profile in (*claude.PROFILES, *codex.PROFILES)
}
DRAFTS = [p for p in LABELS if corpus.label(p)["expected"]["state"] == "idle_draft"]


def _typed(expected: dict[str, Any]) -> tuple[str, TypingMethod]:
    """The draft's text and method; the first draft plan typed its text with send-keys -l."""
    typed = expected.get("typed")
    if typed is None:
        return expected["draft"], TypingMethod.LITERAL
    return typed["text"], TypingMethod(typed["method"])


def _near_misses(text: str) -> dict[str, str]:
    """What a screen of `text` must refuse: a character off, a trailing space, a line less."""
    middle = next(i for i in range(len(text) // 2, len(text)) if text[i] != " ")
    changed = text[:middle] + ("b" if text[middle] == "a" else "a") + text[middle + 1 :]
    shorter = text.rsplit("\n", 1)[0] if "\n" in text else text.rsplit(" ", 1)[0]
    return {"one character": changed, "trailing space": text + " ", "missing line": shorter}


@corpus.each(DRAFTS)
def test_draft_fixture_matches_exactly_its_text(label_path: Path) -> None:
    label = corpus.label(label_path)
    _, observation = corpus.observed(label_path)
    profile = _PROFILES[(label["agent"], label["version"])]
    text, how = _typed(label["expected"])
    draft = observation.draft
    assert draft is not None and not draft.empty
    limit = profile.typing.visible_rows(draft.pane_rows)
    if not draft.complete or (limit is not None and len(draft.rows) >= limit):
        # Claude's fullscreen composer shows its last rows only (2.1.328 says how
        # many are hidden, earlier versions do not): never provable.
        assert label["agent"] == "claude" and label["rows"] == 24
        assert not profile.draft_matches(draft, text, how)
        return
    if screen_refusal(text, profile.typing.specials) is not None:
        # Drawn as typed here, but a '$name' opens Codex's skills popup whenever the name
        # matches an installed skill: AKK refuses such text, so no screen proves it.
        assert label["agent"] == "codex" and "$" in text
        assert not profile.draft_matches(draft, text, how)
        return
    assert profile.draft_matches(draft, text, how)
    misses = _near_misses(text)
    if draft.placeholders:
        # Behind a placeholder only its size (characters or line breaks) is proven.
        assert draft.placeholders == draft.rows
        misses = {"trailing space": text + " ", "short enough to show": text[:100]}
        if "\n" in text:
            misses["missing line"] = text.rsplit("\n", 1)[0]
    for what, other in misses.items():
        assert not profile.draft_matches(draft, other, how), what


def test_every_pinned_version_has_every_typed_draft() -> None:
    typed = {
        (label["agent"], label["version"], label["cols"])
        for label in map(corpus.label, DRAFTS)
        if "typed" in label["expected"]
    }
    assert {(agent, version, cols) for agent, version in _PROFILES for cols in (80, 120)} <= typed
