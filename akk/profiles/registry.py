"""Binding an exact agent version to its profile — never to the closest one.

A version no profile pins binds only when `akk qualify` proved that exact binary
(docs/qualify.md).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Protocol

import attrs

from akk.profiles import claude, codex
from akk.profiles.composer import DraftView, Typing, TypingMethod
from akk.profiles.keyplan import KeyPlans
from akk.profiles.observation import Observation, PromptView
from akk.profiles.qualified import as_version
from akk.screen.grid import Grid
from akk.store.qualifications import Entry, Malformed
from akk.text_rule import TextRefusal


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
    def question_tool(self) -> str:
        """The tool whose pending call a questionnaire asks (its input holds the questions)."""
        ...

    @property
    def reviews_answers(self) -> bool:
        """Whether a call of several questions, or of a multi-select one, ends on a review
        step (Claude's Submit tab), which its steps count."""
        ...

    @property
    def free_text_max_chars(self) -> int:
        """Longest free-text answer whose arrival in the editor this version can prove."""
        ...

    def editor_refusal(self, text: str, grid: Grid, prompt: PromptView) -> TextRefusal | None:
        """Why ``text``, typed into ``prompt``'s free-text editor on the screen ``grid``,
        could never be proven there (None: the editor's proof decides per screen)."""
        ...

    def editor_taken(self, grid: Grid, prompt: PromptView) -> str | None:
        """Why ``prompt``'s free-text editor on the screen ``grid`` cannot take an answer now
        (it holds text, so typing would add to it; or it belongs to another option): the
        question is then a person's (``editor_in_use``). None when it can."""
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
class ProfileMatch:
    """The profile for a terminal, or None with the reason it has none."""

    profile: Profile | None
    reason: str | None


def qualify_command(agent: str, binary: str | None) -> str:
    """The command that qualifies ``agent``'s version, naming ``binary`` when it is known."""
    named = "" if binary is None else f" --binary {shlex.quote(binary)}"
    return f"akk qualify {agent}{named}"


@attrs.frozen
class Registry:
    """The pinned profiles a server binds, and the rule that binds what they lack.

    A pinned exact version binds its profile. Any other version binds only
    through a valid qualification row of that (agent, version) whose binary
    SHA-256 is the pane's: it reads as the row's base profile
    (`akk.profiles.qualified.as_version`). Everything else is unsupported,
    with a reason naming the next step. Tests bind with a registry that lacks
    a pinned row (``without``) to treat a pinned version as new.
    """

    pinned: Mapping[tuple[str, str], Profile]

    def without(self, agent: str, version: str) -> Registry:
        """This registry less the pinned row of (agent, version) (KeyError if it has none)."""
        rows = dict(self.pinned)
        del rows[(agent, version)]
        return Registry(rows)

    @property
    def base_agents(self) -> dict[str, str]:
        """Each pinned profile id with its agent: the bases a qualification may name."""
        return {profile.id: profile.agent for profile in self.pinned.values()}

    def bind(
        self,
        agent: str,
        version: str | None,
        *,
        binary: str | None = None,
        binary_sha256: str | None = None,
        qualified: Mapping[tuple[str, str], Entry] = {},
    ) -> ProfileMatch:
        """The profile of (agent, version) for a pane running ``binary`` (with that SHA-256).

        ``qualified``: the store's judged rows by (agent, version)
        (`akk.store.qualifications.load`). ``binary`` only goes into the
        next step a reason names.
        """
        if version is None:
            return ProfileMatch(None, "version_unknown")
        profile = self.pinned.get((agent, version))
        if profile is not None:
            return ProfileMatch(profile, None)
        command = qualify_command(agent, binary)
        entry = qualified.get((agent, version))
        if entry is None:
            return ProfileMatch(
                None,
                f"unpinned_version: {agent} {version} has no profile; qualify it with `{command}`",
            )
        if isinstance(entry, Malformed):
            return ProfileMatch(
                None,
                f"{entry.reason}; revoke it with `akk qualify --revoke {agent} {version}` "
                f"and qualify again with `{command}`",
            )
        if binary_sha256 != entry.binary_sha256:
            runs = "a binary AKK could not read" if binary_sha256 is None else binary_sha256[:16]
            return ProfileMatch(
                None,
                f"qualified_binary_differs: {agent} {version} is qualified for the binary with "
                f"SHA-256 {entry.binary_sha256[:16]}…, this pane runs {runs}; qualify this "
                f"binary with `{command}`",
            )
        base = next(p for p in self.pinned.values() if p.id == entry.base_profile)
        return ProfileMatch(as_version(base, version), None)


_ALL: tuple[Profile, ...] = (*claude.PROFILES, *codex.PROFILES)

PROFILES: Mapping[tuple[str, str], Profile] = {
    (profile.agent, profile.version): profile for profile in _ALL
}
"""Every pinned version's profile, by (agent, version)."""

PINNED = Registry(PROFILES)
"""The registry of the pinned versions: what `akk serve` binds by default."""
