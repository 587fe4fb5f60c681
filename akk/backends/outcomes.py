"""What an agent's own file proves about how a task ended, as the one Turn outcome.

The terminal follower settles a pane's Turn or Watch with it, and the file
watches (`akk.backends.file_watch`) a person's task found by its native id.
"""

from __future__ import annotations

from akk import evidence
from akk.actors.turn import FINAL_MESSAGE_LIMIT
from akk.actors.turn_follower import Outcome, Usage
from akk.protocol.redaction import redact
from akk.store.turns import TurnState


def file_outcome(found: evidence.Progress) -> Outcome | None:
    """The outcome ``found`` proves (with usage and final message), or None while it runs."""
    usage = Usage(found.usage_status, found.usage)
    changes: dict[str, object] = {}
    if found.final_message is not None:
        changes["final_message"] = _bounded(found.final_message)
    if found.outcome == "done":
        return Outcome(TurnState.DONE, None, _summary(found.final_message), changes, usage)
    if found.outcome == "failed":
        why = redact((found.failure or "failed")[:200])
        return Outcome(
            TurnState.FAILED, "agent_error", f"the agent reported: {why}", changes, usage
        )
    if found.outcome == "cancelled":
        return Outcome(TurnState.CANCELLED, None, "the task was interrupted", changes, usage)
    return None


def _bounded(text: str) -> str:
    text = redact(text)
    return text if len(text) <= FINAL_MESSAGE_LIMIT else text[: FINAL_MESSAGE_LIMIT - 1] + "…"


def _summary(final: str | None) -> str:
    if not final:
        return "the agent finished the Turn"
    first = redact(final.strip().splitlines()[0] if final.strip() else "")
    return first[:200]
