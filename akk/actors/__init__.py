"""Actor runtime and OTP-style supervision on Trio.

`runtime` holds actors, refs, ranks and their errors; `supervisor` holds
child specs, restart policy and supervisors.
"""

from akk.actors.runtime import (
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
from akk.actors.supervisor import (
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
