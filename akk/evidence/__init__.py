"""Evidence: what the agents' own files prove about a Turn.

The screen says what is asked; Claude Code's transcript JSONL and Codex's
rollout JSONL say what happened. `snapshot` (before a send), `bind` (after it)
and `read` (until the Turn settles) tie one Turn to the exact file its agent
process writes and report acceptance, outcome, final message, failure, usage
and the agent's native session id. A request is named by its SHA-256
(`request_digest`), so a Turn resumed after a restart needs no stored text.
`pending` reads the tool calls the file records without a result yet: what a
permission prompt on screen may ask about. `claude_editor` reads Claude's
editor mode from its own settings, found as its transcript is (`locate`).
"""

from akk.evidence.binding import bind, bind_task, newest_task, read, snapshot
from akk.evidence.files import READ_LIMIT
from akk.evidence.model import (
    Anchor,
    Binding,
    Candidate,
    EvidenceAmbiguous,
    EvidenceError,
    EvidenceFile,
    EvidenceLost,
    EvidenceReason,
    EvidenceTooLarge,
    EvidenceUnavailable,
    PendingCall,
    Progress,
    Snapshot,
    Tokens,
    UsageStatus,
    request_digest,
)
from akk.evidence.pending import PENDING_WINDOW, open_calls, owned_file

__all__ = [
    "PENDING_WINDOW",
    "READ_LIMIT",
    "Anchor",
    "Binding",
    "Candidate",
    "EvidenceAmbiguous",
    "EvidenceError",
    "EvidenceFile",
    "EvidenceLost",
    "EvidenceReason",
    "EvidenceTooLarge",
    "EvidenceUnavailable",
    "PendingCall",
    "Progress",
    "Snapshot",
    "Tokens",
    "UsageStatus",
    "bind",
    "bind_task",
    "newest_task",
    "open_calls",
    "owned_file",
    "read",
    "request_digest",
    "snapshot",
]
