"""A permission is actionable only for the call the agent's own file says is pending.

No screen rule can tell a command cut short of its last wrapped row from a
shorter command (Claude draws both alike), but the agent's transcript or
rollout records the pending call with its whole input. So an actionable
permission prompt stays actionable only when its drawn command equals the one
pending call of the profile's tool, compared as every pinned version draws a
command (`drawn`); otherwise it becomes not actionable with a reason, which
the projection shows as ``manual_required`` and which gets no keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from akk.evidence import PendingCall
from akk.profiles.observation import InteractionKind, Observation

PENDING_CALL_UNKNOWN = "pending_call_unknown"
"""The agent's file could not be read, or shows no single pending call of the tool."""

PENDING_CALL_MISMATCH = "pending_call_mismatch"
"""The file's pending call runs another command than the screen shows."""


def asks_permission(observation: Observation) -> bool:
    """Whether `observation` is an actionable permission prompt (the ones checked here)."""
    prompt = observation.prompt
    return (
        observation.actionable and prompt is not None and prompt.kind is InteractionKind.PERMISSION
    )


def drawn(command: str) -> str:
    """`command` as the screen can show it: each run of whitespace one space, ends trimmed.

    Every pinned version breaks a long command at spaces onto rows that are
    read back trimmed and joined with one space (Claude's gutter rows, Codex's
    indented rows), and Claude draws each line of a multi-line command as a
    row: whitespace runs are all a screen can be trusted to show.
    """
    return " ".join(command.split())


def awaits_call(calls: Sequence[PendingCall] | None, tool: str) -> bool:
    """Whether the file was read and shows no pending call of `tool` yet: it may come next.

    Claude writes a call up to ~220 ms after drawing its prompt (tools/lab/NOTES.md).
    """
    return calls is not None and not any(call.tool == tool for call in calls)


def bind_pending(
    observation: Observation, tool: str, calls: Sequence[PendingCall] | None
) -> tuple[Observation, PendingCall | None]:
    """`observation` with the pending call it asks about, or not actionable with the reason why.

    `calls` are the pending calls of the agent's file (None: it could not be
    read); `tool` the profile's permission tool. Only an actionable permission
    is checked; any other observation comes back unchanged, with None.
    """
    if not asks_permission(observation):
        return observation, None
    assert observation.prompt is not None
    shown = observation.prompt.questions[0].command if observation.prompt.questions else None
    mine = [call for call in calls or () if call.tool == tool]
    if shown is None or len(mine) != 1:
        return attrs.evolve(observation, reason=PENDING_CALL_UNKNOWN), None
    (call,) = mine
    if call.command is None or drawn(call.command) != drawn(shown):
        return attrs.evolve(observation, reason=PENDING_CALL_MISMATCH), None
    return observation, call
