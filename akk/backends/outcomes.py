"""What an agent's own file proves about how a task ended, as the one Turn outcome.

The terminal follower settles a pane's Turn or Watch with it, and the file
watches (`akk.backends.file_watch`) a person's task found by its native id.
"""

from __future__ import annotations

import re

from akk import evidence
from akk.actors.turn import FINAL_MESSAGE_LIMIT
from akk.actors.turn_follower import Outcome, Usage
from akk.protocol.redaction import redact_head
from akk.store.turns import TurnState


def file_outcome(found: evidence.Progress) -> Outcome | None:
    """The outcome ``found`` proves (with usage and final message), or None while it runs."""
    usage = Usage(found.usage_status, found.usage)
    changes: dict[str, object] = {"person_messages": found.person_messages}
    if found.final_message is not None:
        changes["final_message"] = bounded_final(found.final_message)
    joined = _joined(found.person_messages)
    if found.outcome == "done":
        summary = final_summary(found.final_message)
        return Outcome(TurnState.DONE, None, summary + joined, changes, usage)
    if found.outcome == "failed":
        why = redact_head(found.failure or "failed", 200)
        return Outcome(
            TurnState.FAILED, "agent_error", f"the agent reported: {why}{joined}", changes, usage
        )
    if found.outcome == "cancelled":
        summary = "the task was interrupted" + joined
        return Outcome(TurnState.CANCELLED, None, summary, changes, usage)
    if found.replaced:
        why = (
            "the agent stopped before it answered, and another prompt was sent at the pane in "
            "its place; AKK never sends the task again"
        )
        return Outcome(TurnState.CANCELLED, "withdrawn", why, changes, usage)
    return None


def _joined(person_messages: int) -> str:
    """What a summary adds when a person sent messages into the task at the pane: the
    final message may answer them too."""
    if not person_messages:
        return ""
    plural = "s" if person_messages > 1 else ""
    return f" (a person at the pane added {person_messages} message{plural} to this task)"


def bounded_final(text: str) -> str:
    """A final message as every backend's outcome keeps it: redacted, then at most
    FINAL_MESSAGE_LIMIT characters, one it cut ending in "…"."""
    text = redact_head(text, FINAL_MESSAGE_LIMIT + 1)
    return text if len(text) <= FINAL_MESSAGE_LIMIT else text[: FINAL_MESSAGE_LIMIT - 1] + "…"


# What `str.splitlines` reads as the first line, found without splitting all the others
# (a message may be megabytes of lines).
_FIRST_LINE = re.compile("[^\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]*")


def final_summary(final: str | None) -> str:
    """A settled Turn's summary: its final message's first line, redacted, or a stock line.

    Redacted with the rows below it, then cut: a key the message wraps onto the next
    line is masked in its first half too, as in the final message."""
    text = (final or "").strip()  # a blank message has no first line
    if not text:
        return "the agent finished the Turn"
    first = _FIRST_LINE.match(redact_head(text, 201))
    assert first is not None  # the pattern matches the empty string
    return first.group()[:200]
