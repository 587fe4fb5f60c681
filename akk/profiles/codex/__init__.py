"""Codex CLI version profiles: each pinned version is one row of data, read by one classifier.

How a family's profile is laid out (the same for `akk.profiles.claude`):

- `versions`: the pinned rows as data ("what does Codex 0.154.0 look like"
  opens this), with their key plans and typing;
- `profile`: `CodexProfile`, the row type, and what it answers (classify,
  editor_matches, draft_matches, the async answer's next turn), with its
  `Blocker`s; what a fresh session draws;
- `classify`: the classifier's skeleton, which decides which shape the bottom
  of the screen shows;
- one module per screen shape, each its shape's data and how it is read:
  `composer` (idle, draft, working, a queued question), `status` (the rows
  under the composer), `permission` (exec approval), `question`
  (request_user_input and its notes editor), `confirmation` (unanswered
  questions), `picker` (the async question); the pieces they share: `reader`
  (the grid, its small checks, the `Footer`), `menu` (numbered rows and the
  highlight).

Prompts replace the composer and end with their own footer; every row between
a prompt's footer and its top anchor must be of a known kind. A prompt whose
footer is recognised but whose region cannot be proven row by row is UNKNOWN
with a reason (no prompt, zero input). A proven approval prompt whose cursor
sits on a persistent-approval row is BLOCKED, with its prompt for display.

This package re-exports what other modules use: `CodexProfile` and `PROFILES`.
"""

from akk.profiles.codex.profile import CodexProfile
from akk.profiles.codex.versions import PROFILES

__all__ = ["PROFILES", "CodexProfile"]
