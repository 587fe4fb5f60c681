"""The generic actor runtime: mailboxes, ranks and typed asks (`actor`), and OTP-style
supervision trees (`supervisor`).

It knows nothing of terminals, Turns or the store; the domain actors built on it live in
`akk.actors`. The names below are its public surface.
"""

from akk.runtime.actor import (
    Actor,
    ActorCrashed,
    ActorError,
    ActorRef,
    ActorStopped,
    AskTimeout,
    Incarnation,
    MailboxFull,
    Rank,
    RankViolation,
    StopActor,
    current_actor,
    detach_from_actor,
)
from akk.runtime.supervisor import (
    ChildSpec,
    DuplicateChild,
    Restart,
    Strategy,
    Supervisor,
    SupervisorError,
    SupervisorEscalation,
    SupervisorNotRunning,
    SupervisorStats,
    UnknownChild,
)

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorError",
    "ActorRef",
    "ActorStopped",
    "AskTimeout",
    "ChildSpec",
    "DuplicateChild",
    "Incarnation",
    "MailboxFull",
    "Rank",
    "RankViolation",
    "Restart",
    "StopActor",
    "Strategy",
    "Supervisor",
    "SupervisorError",
    "SupervisorEscalation",
    "SupervisorNotRunning",
    "SupervisorStats",
    "UnknownChild",
    "current_actor",
    "detach_from_actor",
]
