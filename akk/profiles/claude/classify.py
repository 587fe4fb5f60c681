"""The Claude Code classifier's skeleton: which shape the bottom of the screen shows, per theme.

A screen is read bottom-up from its last non-blank row: the composer
(`composer`), else a prompt known by its footer (`permission`,
`questionnaire`) or, with no footer, by its menu (`review`), else a first-run
screen known by its anchors (a `Blocker`). A start-up banner of another version
is refused first. Each of the row's themes is tried with its exact colours;
themes that read different known shapes are refused.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

import attrs

from akk.profiles.claude import composer, permission, questionnaire, review
from akk.profiles.claude.menu import menu_row
from akk.profiles.claude.reader import Reader
from akk.profiles.composer import DraftView
from akk.profiles.observation import Observation, State, Unproven
from akk.screen.grid import Grid

if TYPE_CHECKING:
    from akk.profiles.claude.profile import ClaudeProfile

_VERSION = re.compile(r"\d+(?:\.\d+)+")


@attrs.frozen
class Reading:
    """What one screen shows under a profile: its Observation and any open editor."""

    observation: Observation
    editor: DraftView | None = None  # the questionnaire's open free-text editor


def read(profile: ClaudeProfile, grid: Grid) -> Reading:
    """The reading of the one theme under which the screen shows a known shape.

    Each theme is tried with its exact colours. None: the first theme's reading
    (its reason). Several that disagree: refused, as a screen AKK cannot place.
    """
    readers = [Reader(variant, grid) for variant in _variants(profile)]
    observations = [_observe(reader) for reader in readers]
    known = [i for i, o in enumerate(observations) if o.state is not State.UNKNOWN]
    if not known:
        return Reading(observations[0], readers[0].editor)
    if any(observations[i] != observations[known[0]] for i in known[1:]):
        themes = ", ".join(readers[i].p.themes[0].name for i in known)
        reason = f"the screen reads differently in the themes {themes}"
        return Reading(Observation(State.UNKNOWN, profile.id, reason=reason))
    return Reading(observations[known[0]], readers[known[0]].editor)


@functools.cache
def _variants(profile: ClaudeProfile) -> tuple[ClaudeProfile, ...]:
    """`profile` once per theme, themes drawing the same colours read once."""
    variants: dict[ClaudeProfile, ClaudeProfile] = {}
    for theme in profile.themes:
        variant = profile.themed(theme)
        variants.setdefault(attrs.evolve(variant, themes=()), variant)
    return tuple(variants.values())


def _observe(r: Reader) -> Observation:
    """The one Observation `r`'s screen shows under its profile's colours."""
    bottom = next((y for y in range(r.grid.rows - 1, -1, -1) if not r.blank(y)), None)
    if bottom is None:
        return r.unknown("blank screen")
    mismatch = _banner_mismatch(r)
    if mismatch is not None:
        return r.unknown(mismatch)
    try:
        observed = (
            composer.read(r, bottom)
            or _prompt(r, bottom)
            or composer.person_view(r, bottom)
            or composer.shell_mode(r, bottom)
        )
    except Unproven as unproven:
        return r.unknown(unproven.reason)
    if observed is not None:
        return observed
    for blocker in r.p.blockers:
        if all(any(anchor in text for text in r.texts) for anchor in blocker.anchors):
            return r.result(State.BLOCKED, reason=f"blocked: {blocker.name} screen needs a person")
    return r.unknown("no known Claude Code screen shape at the bottom of the pane")


def _banner_mismatch(r: Reader) -> str | None:
    """A start-up banner showing another version than this profile's, if any."""
    banner = r.p.banner
    for y, text in enumerate(r.texts):
        at = text.find(banner)
        if at < 0:
            continue
        found = _VERSION.match(text, at + len(banner))
        columns = r.grid.row_columns(y)
        cell = r.cells[y][columns[at]] if at < len(columns) else None
        # Only the banner itself counts (bold name, or the coloured welcome line),
        # not a transcript that mentions a version.
        banner_cell = cell is not None and (cell.bold or cell.fg != "default")
        if found and banner_cell and found.group() != r.p.version:
            return (
                f"version_mismatch: the screen shows Claude Code v{found.group()}, "
                f"profile is {r.p.version}"
            )
    return None


def _prompt(r: Reader, bottom: int) -> Observation | None:
    """A permission, questionnaire or review prompt ending at `bottom`; else None."""
    text = r.texts[bottom]
    shape = r.p.permission
    footer_at = shape.footer_col
    if text[footer_at:].rstrip() == shape.footer and r.blank_before(bottom, footer_at):
        return permission.read(r, bottom)
    if text.startswith(r.p.questionnaire.footer_prefix):
        return questionnaire.read(r, bottom)
    if bottom > 0 and r.texts[bottom - 1].startswith(r.p.questionnaire.footer_prefix):
        return questionnaire.read(r, bottom - 1, last=bottom)  # its footer wrapped
    if menu_row(r, bottom, r.p.questionnaire.menu, boxes=False) is not None:
        return review.read(r, bottom)
    return None
