"""The terminal board: the latest published state of every supervised pane.

TerminalActors publish here (upward news by a published latest value, never by
an ask); `list` and `status` read here. Everything runs on the one Trio thread,
so a snapshot is replaced whole and readers never see half an update.
`terminal_row` and `project_snapshot` are what controllers are shown of a snapshot;
`sighting` is what the store records of a projected prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs
import trio

from akk.discovery.identity import TerminalIdentity
from akk.profiles.observation import Observation, State
from akk.protocol import wakeups
from akk.protocol.projection import Shown, as_manual, cut, project, within_frame
from akk.protocol.redaction import asks_secret_question, redact_head, redact_screen
from akk.protocol.wakeups import Manual
from akk.runtime.actor import ActorRef
from akk.screen.fingerprint import Appearance, IdMinter
from akk.screen.grid import Grid
from akk.store.interactions import Sighting

if TYPE_CHECKING:
    from akk.profiles.registry import Profile


@attrs.frozen
class TerminalSnapshot:
    """What one TerminalActor last saw.

    ``seq`` counts the terminal's Observations: a snapshot with a higher seq
    than the one recorded with a key step was captured after that step.
    ``seen`` is the appearance of the prompt on screen (its fingerprint and
    appearance number), None when no prompt is. A ``busy`` snapshot shows a
    passing screen: it was taken between the keys of one step (a toggled box,
    half-typed text), or it holds a permission whose call the agent has not
    written yet (`akk.backends.terminal.observer`). Nobody announces or answers
    what it shows. ``manual`` is the appearance of a
    screen a person must handle (`akk.protocol.wakeups`), None while the screen is
    readable; only a prompt-less screen has one.
    """

    identity: TerminalIdentity
    observation: Observation
    seen: Appearance | None
    lines: tuple[str, ...]  # the screen's text, for the redacted excerpt
    observed_at: float  # trio clock
    seq: int = 0
    busy: bool = False  # a passing screen: mid-step, or a permission held for its call
    manual: Manual | None = None
    profile: Profile | None = None
    """The profile the terminal reads its pane with (its id is ``identity.profile``): every
    check made for this pane outside the actor uses this one, never a lookup of its own."""
    grid: Grid | None = None
    """The styled screen ``lines`` were read from (None before the first Observation): the
    grid the Observer keeps anyway, so the board holds one grid per terminal and no more.
    Redact before showing it (`akk.console.screen`)."""
    editor_taken: str | None = None
    """Why the prompt's open free-text editor cannot take an answer (`Profile.editor_taken`:
    a person typed into it), None when it can or none is open."""
    seen_secrets: frozenset[str] = frozenset()
    """Pieces of what was masked on the terminal's earlier drawings (`SeenSecrets.pieces`):
    every text read off ``lines`` masks them too (`redact_screen`)."""

    def quoted(self, text: str) -> str:
        """``text``, read off this screen (a profile's reason, a question), with every secret
        masked as the screen masks it: what its earlier drawings masked too."""
        return redact_screen(self.lines, self.seen_secrets).text(text)

    @property
    def reason(self) -> str | None:
        """Why its screen is not actionable, as a controller may read it (`list`, `status`,
        a refused `watch`): the profile's reason, bounded, masked as the screen is."""
        reason = _reason(self.observation)
        return None if reason is None else self.quoted(reason)

    @property
    def secret_question(self) -> bool:
        """Whether the prompt on screen asks for a secret in a question's own words
        ("Enter your API key:") or its call marks it secret, or a review lists one: its
        answer is the person's to type, never relayed, and nothing of the screen is shown
        (the editor below the question, or the review, shows what they typed)."""
        return _asks_secret(self.observation)

    def showing(self, now: float) -> Appearance | None:
        """The appearance a controller is shown at trio time ``now``: the prompt's, or a
        manual screen's once it settled (`Manual.settled`); None when neither."""
        if self.seen is not None:
            return self.seen
        manual = self.manual
        return manual.seen if manual is not None and manual.settled(now) else None


_PENDING = Observation(State.UNKNOWN, None, reason="not_observed_yet")


class TerminalBoard:
    """Latest snapshot per terminal_id, written by actors, read by methods.

    It is also the registry of TerminalActor refs by terminal_id: the one
    place a Turn finds the actor that may send keys to its pane.
    """

    def __init__(self) -> None:
        self._snapshots: dict[str, TerminalSnapshot] = {}
        self._refs: dict[str, ActorRef] = {}
        self._listeners: list[Callable[[TerminalSnapshot], None]] = []
        self.version = 0
        """Grows with every change of a snapshot on the board: equal, nothing changed."""

    def listen(self, listener: Callable[[TerminalSnapshot], None]) -> None:
        """Call ``listener`` with every published snapshot (it must not block: tell, never ask)."""
        self._listeners.append(listener)

    def announce(self, identity: TerminalIdentity, profile: Profile | None, now: float) -> None:
        """A terminal was discovered (or bound anew); it shows as unknown until observed."""
        self._snapshots[identity.terminal_id] = TerminalSnapshot(
            identity, _PENDING, None, (), now, profile=profile
        )
        self.version += 1

    def publish(self, snapshot: TerminalSnapshot) -> None:
        if snapshot.identity.terminal_id in self._snapshots:
            self._snapshots[snapshot.identity.terminal_id] = snapshot
            self.version += 1
            for listener in self._listeners:
                listener(snapshot)

    def retire(self, terminal_id: str) -> None:
        """The terminal's actor stopped: no current Observation (its ref stays until `forget`)."""
        if self._snapshots.pop(terminal_id, None) is not None:
            self.version += 1

    def bind_ref(self, terminal_id: str, ref: ActorRef) -> None:
        """Publish the TerminalActor of ``terminal_id`` (the ref survives the actor's restarts)."""
        self._refs[terminal_id] = ref

    def forget(self, terminal_id: str) -> None:
        """The terminal is gone for good (its pane or process ended)."""
        self.retire(terminal_id)
        self._refs.pop(terminal_id, None)

    def ref(self, terminal_id: str) -> ActorRef | None:
        return self._refs.get(terminal_id)

    def get(self, terminal_id: str) -> TerminalSnapshot | None:
        return self._snapshots.get(terminal_id)

    def __iter__(self) -> Iterator[TerminalSnapshot]:
        return iter(list(self._snapshots.values()))


ASKS_CHARS = 300
"""The head of a prompt's first question a terminal's row shows as `asks` (a question can
fill a pane thousands of cells wide; `status` projects it whole)."""


def _asks_secret(observation: Observation) -> bool:
    prompt = observation.prompt
    if prompt is None:
        return False
    asked = (*(q.prompt for q in prompt.offered), *prompt.reviewed)
    return prompt.secret or any(asks_secret_question(text) for text in asked)


def refused_for(observation: Observation, editor_taken: str | None = None) -> str | None:
    """Why the prompt ``observation`` read is a person's to answer, as its projection says
    (`manual_reason`): the profile's reason, redacted; ``secret_input`` for a question
    that asks for a secret in its own words or that its call marks secret;
    ``editor_in_use`` when its editor holds text a person typed (``editor_taken``,
    `TerminalSnapshot.editor_taken`), which any answer would be typed after; None when
    AKK may answer it (or no prompt)."""
    if observation.prompt is None:
        return None
    reason = _reason(observation)
    if reason is None and _asks_secret(observation):
        return wakeups.SECRET_INPUT  # its answer is a person's to type, never relayed
    if reason is None and editor_taken is not None:
        return wakeups.EDITOR_IN_USE  # a person is answering it at the terminal
    return reason


def _reason(observation: Observation) -> str | None:
    """Why the screen is not actionable, as a controller may read it: a profile's reason
    can quote the screen (a permission's title row), so it is redacted and bounded."""
    return None if observation.reason is None else redact_head(observation.reason, 200)


def terminal_row(snapshot: TerminalSnapshot) -> dict[str, Any]:
    """One terminal as `list` and `status` show it; no keys, regions or fingerprints."""
    identity, observation = snapshot.identity, snapshot.observation
    prompt = observation.prompt
    return {
        "terminal_id": identity.terminal_id,
        "agent": identity.agent,
        "version": identity.version,
        "profile": identity.profile,
        "profile_reason": identity.profile_reason,
        "cwd": identity.cwd,
        "pane": identity.pane_id,
        "tmux_socket": identity.tmux_socket,
        "activity_state": observation.activity.value,
        "observation": {
            "state": observation.state.value,
            "reason": snapshot.reason,
            "actionable": observation.actionable and identity.profile is not None,
        },
        "asks": None if prompt is None else _asks(snapshot),
        "session_id": None,
        "turn_id": None,
        "available_actions": [],
    }


def _asks(snapshot: TerminalSnapshot) -> str:
    prompt = snapshot.observation.prompt
    assert prompt is not None
    questions = prompt.offered
    first = questions[0] if questions else None
    text = first.prompt if first is not None else f"{prompt.step.value}, not yet opened"
    more = f" (+{len(questions) - 1} more)" if len(questions) > 1 else ""
    shown = cut(snapshot.quoted(text), ASKS_CHARS)
    return f"{prompt.kind.value}: {shown}{more}"


def project_snapshot(
    snapshot: TerminalSnapshot, ids: IdMinter, turn_id: str | None, now: float | None = None
) -> Shown | None:
    """The projection of the prompt on ``snapshot`` (None when no prompt is on screen).

    A settled manual screen (`akk.protocol.wakeups`; ``now`` is the trio clock, the
    current time by default) is projected too: ``manual_required``, with its
    reason, terminal and pane, and nothing to answer.
    """
    prompt, seen = snapshot.observation.prompt, snapshot.seen
    identity = snapshot.identity
    if prompt is None or seen is None:
        manual = snapshot.manual
        shows = snapshot.showing(trio.current_time() if now is None else now)
        if manual is None or shows is None:
            return None
        projection = wakeups.project(
            manual,
            interaction_id=ids.interaction_id(manual.seen),
            agent=identity.agent,
            turn_id=turn_id,
            terminal_id=identity.terminal_id,
            pane=identity.pane_id,
        )
        return Shown(manual.seen, None, projection)
    projection = prompt_projection(
        snapshot.observation, snapshot.editor_taken, seen=seen, ids=ids, agent=identity.agent,
        turn_id=turn_id, lines=snapshot.lines, seen_secrets=snapshot.seen_secrets,
    )  # fmt: skip
    if "manual_reason" in projection:
        # Who must look where, as for a prompt-less manual screen (PROTOCOL.md).
        projection |= {"terminal_id": identity.terminal_id, "pane": identity.pane_id}
    return Shown(seen, prompt, projection)


def prompt_projection(
    observation: Observation,
    editor_taken: str | None,
    *,
    seen: Appearance,
    ids: IdMinter,
    agent: str,
    turn_id: str | None,
    lines: tuple[str, ...],
    seen_secrets: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The projection of the prompt ``observation`` read off a screen of ``lines`` (its
    editor holding ``editor_taken``; ``seen_secrets`` as `TerminalSnapshot` has them):
    ``manual_required`` with its reason when it is a person's to answer (`refused_for`),
    else what a controller may answer it with."""
    assert observation.prompt is not None
    screen = redact_screen(lines, seen_secrets)
    projection = within_frame(
        project(observation.prompt, seen=seen, ids=ids, agent=agent, turn_id=turn_id,
                screen=screen)
    )  # fmt: skip
    reason = refused_for(observation, editor_taken)
    return projection if reason is None else as_manual(projection, screen.text(reason))


def sighting(snapshot: TerminalSnapshot, shown: Shown) -> Sighting:
    """What the store records of ``shown``, the projection of a prompt on ``snapshot``."""
    prompt = shown.prompt
    return Sighting(
        interaction_id=shown.interaction_id,
        terminal_id=snapshot.identity.terminal_id,
        kind=shown.kind,
        seen=shown.seen,
        profile=snapshot.identity.profile or "",
        step_index=1 if prompt is None else prompt.step_index,
        step_total=1 if prompt is None else prompt.step_total,
        projection=shown.projection,
    )
