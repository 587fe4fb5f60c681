"""`FileWatches`: the backend of Watches on a person's task found by its agent's native id.

A person runs Codex or Claude Code (a TUI in a terminal AKK may not supervise,
or a headless ``claude -p``), and a controller watches that task by the id the
agent gave it: `watch {thread_id, codex_home}` or `watch {claude_session_id,
claude_config_dir}`. Its witness is the agent's own file (`locate`,
`follow`), read-only. It has no pane and starts no process, so it never sends
anything and never acquires Send management: every input method is refused
here, with the reason, before anything could be sent.
"""

from __future__ import annotations

from typing import Any, NoReturn

import trio

from akk import evidence
from akk.actors.turn_follower import Outcome
from akk.backends.context import BackendContext
from akk.backends.contract import History, Refusal, RespondKey, Task
from akk.backends.file_watch.follow import FileFollower
from akk.backends.file_watch.locate import task_progress
from akk.backends.outcomes import file_outcome
from akk.evidence.model import Agent
from akk.protocol.errors import Reason, RpcError
from akk.store.interactions import Interaction
from akk.store.sessions import InvocationRow
from akk.store.turns import Turn

_WATCH_ONLY = (
    "{id} watches a task a person started by its agent's own file: it never sends input "
    "and holds no session. Act where the person runs the agent"
)


class FileWatches:
    """The `TurnBackend` of Watches on ``agent``'s sessions or threads, registered as ``name``.

    A Claude session's round ends at its final reply too (a ``claude -p`` run
    writes no ``turn_duration``), as the headless backend reads it (`locate`).
    """

    keeps_sessions = False

    def __init__(self, ctx: BackendContext, *, name: str, agent: Agent) -> None:
        self.name = name
        self._desk = ctx.desk
        self._agent: Agent = agent
        self.witness = FileWitness(self)

    async def read(self, record: Turn) -> evidence.Progress:
        """What the watched task's file proves now (`locate.task_progress`, in a thread)."""
        return await trio.to_thread.run_sync(task_progress, self._agent, record)

    async def follow_again(self, turn_id: str, *, restarted: bool) -> None:
        await self._desk.follow(turn_id, lambda: FileFollower(read=self.read))

    # -- nothing below sends: a Watch has no management

    async def start(self, task: Task) -> Turn | Refusal:
        return Refusal(Reason.INVALID_PARAMS, _WATCH_ONLY.format(id=self.name))

    async def dispatch(self, turn: Turn, text: str, key: RespondKey | None = None) -> Turn:
        _refuse(turn)

    async def history(self, workspace: str) -> History:
        raise RpcError(Reason.INVALID_PARAMS, _WATCH_ONLY.format(id=self.name))

    async def confirm_ended(self, turn: Turn, invocation: InvocationRow) -> str:
        return "unchecked"  # it starts no process: there is nothing of its own to clean up

    async def shown(self, turn: Turn, controller_id: str) -> dict[str, Any] | None:
        return None  # the person's prompts are theirs: a file shows no prompt to answer

    async def approve(
        self, turn: Turn, row: Interaction, controller_id: str, value: str
    ) -> dict[str, Any]:
        _refuse(turn)

    async def respond(
        self, turn: Turn, row: Interaction, controller_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        _refuse(turn)

    async def still_asked(self, turn: Turn, row: Interaction, notification_id: str) -> None:
        _refuse(turn)

    def check_respond(self, turn: Turn) -> None:
        _refuse(turn)


class FileWitness:
    """The `WatchWitness` of `FileWatches`: the watched task's own file."""

    def __init__(self, watches: FileWatches) -> None:
        self._watches = watches

    async def follow(self, record_id: str) -> None:
        await self._watches.follow_again(record_id, restarted=False)

    async def ended(self, record: Turn) -> Outcome | None:
        try:
            progress = await self._watches.read(record)
        except (evidence.EvidenceError, ValueError) as exc:
            raise RpcError(
                Reason.NOT_FOUND,
                f"the task of {record.turn_id} cannot be verified ({exc}), and a watch is never "
                "moved to another thread; watch the person's new task by its own id",
            ) from exc
        return file_outcome(progress)

    async def whereabouts(self, record: Turn) -> str:
        """present: the file still holds the person's request where it was bound; gone."""
        try:
            await self._watches.read(record)
        except (evidence.EvidenceError, ValueError):
            return "gone"
        return "present"

    async def reconcile(self, record: Turn) -> int | None:
        return 0  # nothing was ever sent, so no step can be open


def _refuse(turn: Turn) -> NoReturn:
    raise RpcError(Reason.INVALID_PARAMS, _WATCH_ONLY.format(id=turn.turn_id))
