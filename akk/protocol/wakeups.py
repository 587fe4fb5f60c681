"""Screens a person must handle: when one has appeared, and what its wake-up says.

A pane may show a screen that looks like a prompt but that AKK cannot act on: a
prompt cut off by the pane size, one no rule reads, a screen the profile marks
blocked (a trust or API-key question, a permission no profile answers), or any screen of
a version without an exact profile. AKK sends such a screen no keys; this
module decides when its owner is woken about it (docs/wakeups.md):

- a screen is *manual* when its Observation has no prompt and is ``blocked``,
  or ``unknown`` with a reason other than a blank or not yet observed screen
  (`manual_reason`);
- an *appearance* (`Manual`) is one run of consecutive manual observations: it
  begins at the first, keeps its id through every redraw, and ends at the
  first observation that is not manual (a readable prompt, idle or working);
- it is *settled* once its screen digest has been unchanged for
  SETTLE_SECONDS and then the pane's processes were seen at rest before a look
  that still showed it, or unchanged for SETTLE_CAP_SECONDS whatever they do
  (`Manual.settled`); it stays settled until its run ends. Only a settled
  appearance is projected and woken about, so an animation's passing frame,
  or a frame a starved client or tmux left half written, wakes nobody, and one
  appearance wakes its owner at most once however often it is redrawn.

A prompt the profile read but refuses to answer (a reason on a PromptView,
e.g. ``pending_call_mismatch``) is not handled here: it has its own
fingerprinted appearance and is projected ``manual_required`` as it is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

import attrs

from akk.profiles.observation import HIDDEN_PROMPT, PERSON_VIEW, Observation, State
from akk.protocol.redaction import asks_for_secret, redact
from akk.screen.fingerprint import Appearance

SETTLE_SECONDS = 0.5
"""How long a manual screen must stay unchanged, its pane's processes then at rest
(`akk.discovery.rest`), before its owner is woken."""

SETTLE_CAP_SECONDS = 5.0
"""How long a manual screen unchanged is settled however busy its processes: an agent
that keeps a thread busy while it waits for a person must wake them all the same. On a
2-core machine running eight lab clients at once (and three busy loops), a frame half
written stood still for 0.5 s in 3 runs of 8."""

PROMPT_CUT_OFF = "prompt_cut_off"
EDITOR_IN_USE = "editor_in_use"
"""A question whose editor a person is typing into (`Profile.editor_taken`): theirs until
they finish it or clear it."""
SECRET_INPUT = "secret_input"
UNREADABLE_PROMPT = "unreadable_prompt"
USER_VERIFICATION = "user_verification"
UNSUPPORTED_SHAPE = "unsupported_shape"
UNSUPPORTED_VERSION = "unsupported_version"

_NOT_A_PROMPT = ("blank screen", "not_observed_yet")
"""Unknown screens that are no prompt at all (an empty pane, one not captured yet)."""

PROMPT_HIDDEN = "prompt_hidden"
"""A prompt waits behind a view a person opened over the pane (`HIDDEN_PROMPT`)."""

_CUT_OFF = ("truncated", "cut off", "no top rule", "a row is missing")
"""Words the profiles use when a prompt's frame or rows are missing from the pane."""

_CLIPPED = re.compile(r"[↑↓] \d+ more lines?\b")
"""A menu the pane is too short for (Claude draws "↑ 3 more lines" in its place)."""

_OTHER_VERSION = ("version_mismatch",)
"""The profiles' reason for a banner of another version than theirs."""

PERMISSION_ANCHORS = {
    "claude": ("Do you want to proceed?",),
    "codex": ("Would you like to run the following command?", "Yes, proceed (y)"),
}
"""Rows only a permission prompt shows (its question, or its approve row when the
question is cut off), per agent, on every pinned version."""


def manual_reason(
    observation: Observation, *, profiled: bool, lines: Sequence[str] = ()
) -> str | None:
    """The reason code of a manual screen, or None when the screen is not one.

    ``profiled``: the pane has an exact profile (without one, every screen it
    shows is unreadable for ``unsupported_version``). ``lines``: the screen's
    text, where a clipped menu shows it is cut off.
    """
    if observation.prompt is not None or observation.state not in (State.UNKNOWN, State.BLOCKED):
        return None
    why = (observation.reason or "").lower()
    if why in _NOT_A_PROMPT or why.startswith(PERSON_VIEW):
        return None
    if asks_for_secret(lines):
        return SECRET_INPUT
    if not profiled or any(words in why for words in _OTHER_VERSION):
        return UNSUPPORTED_VERSION
    if observation.state is State.BLOCKED:
        return UNSUPPORTED_SHAPE if "permission" in why else USER_VERIFICATION
    if any(words in why for words in _CUT_OFF) or any(_CLIPPED.search(line) for line in lines):
        return PROMPT_CUT_OFF
    if HIDDEN_PROMPT in why:
        return PROMPT_HIDDEN
    return UNREADABLE_PROMPT


def asks_permission(agent: str, lines: Sequence[str]) -> bool:
    """Whether the screen shows a row only a permission prompt of ``agent`` shows."""
    anchors = PERMISSION_ANCHORS.get(agent, ())
    return any(anchor in line for line in lines for anchor in anchors)


def digest(lines: Sequence[str]) -> bytes:
    """What tells one drawing of a screen from another (its text, row by row)."""
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).digest()


@attrs.frozen
class Manual:
    """One appearance of a manual screen on one terminal.

    ``seen`` names it (its interaction id is minted from it); ``screen`` is the
    digest of its latest drawing and ``stable_since`` (trio clock) when that
    drawing began; ``detail`` is the profile's own words for it.
    """

    seen: Appearance
    reason: str
    detail: str
    permission: bool
    screen: bytes
    stable_since: float
    held: bool = False
    """An earlier drawing of it settled: it stays settled for the rest of its run."""
    rested: bool = False
    """A look found this drawing still drawn whole (`stood_still`): nothing was left to
    draw, or it stood for SETTLE_CAP_SECONDS."""
    began: float = 0.0
    """Trio clock of its first drawing."""

    def passing(self, now: float) -> bool:
        """Whether it may still be a frame caught between two drawings of one prompt: it
        began less than SETTLE_SECONDS before trio time ``now`` and has not settled."""
        return now - self.began < SETTLE_SECONDS and not self.settled(now)

    def settled(self, now: float) -> bool:
        """Whether it settled by trio time ``now``: one of its drawings stood still for
        SETTLE_SECONDS with nothing left to draw (``rested``), or for SETTLE_CAP_SECONDS
        (once settled, a redraw does not take it off the screen)."""
        return self.held or self.rested or stood_still(now - self.stable_since, resting=False)


def stood_still(still: float, *, resting: bool) -> bool:
    """Whether a drawing unchanged for ``still`` seconds is taken as drawn whole:
    SETTLE_SECONDS with the pane's processes ``resting`` right before the capture that still
    showed it (`akk.discovery.rest`), or SETTLE_CAP_SECONDS whatever they do."""
    return still >= SETTLE_CAP_SECONDS or (resting and still >= SETTLE_SECONDS)


def follow(
    current: Manual | None,
    observation: Observation,
    *,
    profiled: bool,
    agent: str,
    lines: Sequence[str],
    now: float,
    mint: Callable[[bytes], Appearance],
    secrets: Collection[str] = (),
    resting: bool = False,
) -> Manual | None:
    """The manual appearance after one more observation (None: the screen is not manual).

    ``resting``: the pane's processes were at rest right before this observation's
    capture (`akk.discovery.rest`); a drawing that `stood_still` by then is ``rested``.
    Without it only SETTLE_CAP_SECONDS settles a drawing.

    A manual screen continues ``current`` (its id kept; its settle clock
    restarted when the drawing changed) or, with no ``current``, begins a new
    appearance named by ``mint(digest)``. Until it settles, nobody was shown it, so a
    new drawing names it afresh: it is named by the drawing it settles on, the one its
    owner is woken for, never by a frame caught half done before it (a restarted
    Observer continues it by that drawing, `Observer._manual_appearance`). Its
    ``detail``, the profile's reason, is masked as the screen is (``secrets``:
    `RedactedScreen.secrets` of ``lines``): it may quote a row.
    """
    reason = manual_reason(observation, profiled=profiled, lines=lines)
    if reason is None:
        return None
    drawn = digest(lines)
    detail = redact(observation.reason or "", secrets)[:300]
    permission = asks_permission(agent, lines)
    if current is None:
        return Manual(mint(drawn), reason, detail, permission, drawn, now, began=now)
    if current.screen == drawn:
        rested = current.rested or stood_still(now - current.stable_since, resting=resting)
        return attrs.evolve(current, reason=reason, detail=detail, rested=rested)
    if not current.settled(now):
        permission = current.permission or permission
        return Manual(mint(drawn), reason, detail, permission, drawn, now, began=current.began)
    return attrs.evolve(
        current,
        reason=reason,
        detail=detail,
        permission=current.permission or permission,
        screen=drawn,
        stable_since=now,
        held=current.settled(now),
        rested=False,
    )


def project(
    manual: Manual,
    *,
    interaction_id: str,
    agent: str,
    turn_id: str | None,
    terminal_id: str,
    pane: str,
) -> dict[str, Any]:
    """The projection of a manual appearance: who must look where, and why; nothing to answer.

    It carries no question, option or decision: there is nothing a controller
    could answer (PROTOCOL.md "The interaction projection"). Its ``kind`` is
    ``permission`` when the screen shows a permission's anchor, else
    ``confirmation``: the screen waits for the person to confirm or enter something
    AKK could not read, and no PROTOCOL kind claims less (docs/wakeups.md).
    """
    return {
        "schema": "agent-knock-knock/terminal-interaction",
        "version": 1,
        "interaction_id": interaction_id,
        "turn_id": turn_id,
        "agent": agent,
        "kind": "permission" if manual.permission else "confirmation",
        "state": "manual_required",
        "reason": manual.reason,
        "manual_reason": manual.reason,
        "detail": manual.detail,
        "terminal_id": terminal_id,
        "pane": pane,
        "step": None,
        "questions": [],
        "capabilities": {"batch_response": False, "free_text": False, "multi_select": False},
    }
