"""Binding an exact agent version to its profile — never to the closest one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import attrs

from akk.profiles import claude, codex
from akk.profiles.composer import DraftView, Typing, TypingMethod
from akk.profiles.keyplan import KeyPlans
from akk.profiles.observation import Observation, PromptView
from akk.screen.grid import Grid


class Profile(Protocol):
    """A version profile: data for one exact client version plus its classifier."""

    @property
    def id(self) -> str:
        """Stable id, e.g. ``claude-code@2.1.263``; part of every fingerprint."""
        ...

    @property
    def agent(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def key_plans(self) -> KeyPlans:
        """How each answer this version supports becomes keys (server-side data)."""
        ...

    @property
    def typing(self) -> Typing:
        """How this version takes typed and pasted text (composer data)."""
        ...

    @property
    def editor_typing(self) -> Typing:
        """How the prompts' free-text editor takes typed text (its specials, its limits)."""
        ...

    @property
    def permission_tool(self) -> str:
        """The tool (by its name in the agent's file) whose pending call a permission asks about."""
        ...

    @property
    def free_text_max_chars(self) -> int:
        """Longest free-text answer whose arrival in the editor this version can prove."""
        ...

    def classify(self, grid: Grid) -> Observation:
        """The one Observation this screen shows under this profile."""
        ...

    def draft_matches(self, draft: DraftView, text: str, how: TypingMethod) -> bool:
        """Whether ``draft`` shows exactly ``text``, put in ``how``, as this version renders it."""
        ...

    def next_turn_message(self, question: str, label: str) -> str | None:
        """The user message that answering async ``question`` with ``label`` at an idle
        composer starts the agent's next turn with (None: this version has none)."""
        ...

    def editor_matches(self, grid: Grid, prompt: PromptView, text: str) -> bool:
        """Whether ``prompt``'s open free-text editor shows exactly ``text``, as typed.

        The prompt's free-text editor (Claude's "Type something." row, Codex's
        notes) after ``text`` went in with ``send-keys -l``. False when no editor
        is open, it cannot be read whole, or it shows anything else; the
        dispatcher then presses no Enter.
        """
        ...


@attrs.frozen
class Binding:
    """The profile for a terminal, or None with the reason it has none."""

    profile: Profile | None
    reason: str | None


def bind(agent: str, version: str | None) -> Binding:
    """Look up the exact (agent, version); anything else is unsupported, with a reason."""
    if version is None:
        return Binding(None, "version_unknown")
    profile = PROFILES.get((agent, version))
    if profile is None:
        return Binding(None, f"unpinned_version: {agent} {version} has no profile")
    return Binding(profile, None)


_ALL: tuple[Profile, ...] = (*claude.PROFILES, *codex.PROFILES)

PROFILES: Mapping[tuple[str, str], Profile] = {
    (profile.agent, profile.version): profile for profile in _ALL
}
"""Every pinned version's profile, by (agent, version)."""
