"""A pinned profile read as another version: what a qualified version binds to.

`akk qualify` proves that a version's screens read exactly as a pinned
profile reads its own (docs/qualify.md); the qualified version then gets that
profile's data with its version strings set to the new version, and an id that
says where it came from: ``claude-code@2.1.333 (qualified from 2.1.332)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from akk.profiles.claude import ClaudeProfile
from akk.profiles.codex import CodexProfile

if TYPE_CHECKING:
    from akk.profiles.registry import Profile


def as_version(profile: Profile, version: str) -> Profile:
    """``profile`` read as ``version``: the same data with its version strings set to ``version``.

    Claude refuses a banner of another version and Codex reads its banner as
    "no turn yet"; both would only say the version is new. The id names the
    pinned version the data comes from. ``profile`` is a pinned row; raises
    TypeError for a profile of no known family.
    """
    note = f" (qualified from {profile.version})"
    if isinstance(profile, ClaudeProfile):
        return attrs.evolve(profile, version=version, id_note=note)
    if isinstance(profile, CodexProfile):
        banner = profile.banner.replace(f"(v{profile.version})", f"(v{version})")
        return attrs.evolve(profile, version=version, banner=banner, id_note=note)
    raise TypeError(f"no way to read {type(profile).__name__} as another version")
