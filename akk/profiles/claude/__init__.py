"""Claude Code version profiles: each pinned version is one row of data, read by one classifier.

How a family's profile is laid out (the same for `akk.profiles.codex`):

- `versions`: the pinned rows as data ("what does Claude Code 2.1.328 look
  like" opens this), with their key plans, typing, themes and advisories;
- `profile`: `ClaudeProfile`, the row type, and what it answers (classify,
  editor_matches, draft_matches), with its `Blocker`s and `Theme`s;
- `classify`: the classifier's skeleton, which decides which shape the bottom
  of the screen shows (and in which theme);
- one module per screen shape, each its shape's data and how it is read:
  `composer` (idle, draft, working), `permission`, `questionnaire` (and its
  open editor), `review`; the pieces they share: `reader` (the grid and its
  small checks), `menu` (numbered rows, wraps), `tabs` (the questionnaire's
  frame).

Every row of a prompt region must be of a known kind, option numbers must run
1, 2, 3… and exactly one row carries the cursor in the highlight colour. A
prompt whose footer is recognised but whose region cannot be proven is UNKNOWN
with a reason and no prompt. A proven prompt AKK must not answer (a permission
for any tool but Bash or a new file's Write, the cursor on a persistent-approval
row) is BLOCKED with its prompt for display. First-run screens (onboarding, API
key, trust) are recognised by their anchors.

This package re-exports what other modules use: `ClaudeProfile`, `PROFILES`
and the pinned rows.
"""

from akk.profiles.claude.profile import ClaudeProfile
from akk.profiles.claude.versions import (
    PROFILES,
    V2_1_263,
    V2_1_266,
    V2_1_267,
    V2_1_328,
    V2_1_332,
)

__all__ = ["PROFILES", "V2_1_263", "V2_1_266", "V2_1_267", "V2_1_328", "V2_1_332", "ClaudeProfile"]
