"""A permission is actionable only for the call the agent's own file says is pending.

No screen rule can tell a command cut short of its last wrapped row from a
shorter command (Claude draws both alike), but the agent's transcript or
rollout records the pending call with its whole input. So an actionable
permission prompt stays actionable only when what it draws is the one pending
call of the tool it asks about: its command compared as every pinned version
draws a command (`shows_command`), the file it would create or edit, path and
lines (`shows_file`), or the files a Codex patch writes (`patches_only`). Otherwise
it becomes not actionable with a reason, which the projection shows as
``manual_required`` and which gets no keys. A file's permission is offered in the
call's words (`PromptView.asked`, `offered_file`):
its whole path and its content or change exactly, whitespace and all, which its
drawing cannot show.
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Sequence

import attrs

from akk.evidence import PendingCall
from akk.evidence.model import FileEdit, FilePatch, FileWrite
from akk.profiles.observation import FileView, InteractionKind, Observation

PENDING_CALL_UNKNOWN = "pending_call_unknown"
"""The agent's file could not be read, or shows no single pending call of the tool."""

PENDING_CALL_MISMATCH = "pending_call_mismatch"
"""The file's pending call runs another command than the screen shows."""

FILE_TOO_LONG = "file_too_long"
"""A file's permission whose call (`offered_file`) is longer than `FILE_SHOWN_MAX`."""

FILE_SHOWN_MAX = 64_000
"""The most characters a file's permission is offered with (`offered_file`). A controller
approves only what it is shown whole, and a model may write megabytes: past this a
person answers it, and its text is never redacted and projected (about a second a
megabyte, on the terminal's actor)."""


def asks_permission(observation: Observation) -> bool:
    """Whether `observation` is an actionable permission prompt (the ones checked here)."""
    prompt = observation.prompt
    return (
        observation.actionable and prompt is not None and prompt.kind is InteractionKind.PERMISSION
    )


def asked_tool(observation: Observation) -> str:
    """The tool (its name in the agent's file) a permission prompt asks to call; empty for
    any other observation."""
    prompt = observation.prompt
    if prompt is None or prompt.kind is not InteractionKind.PERMISSION or not prompt.questions:
        return ""
    return prompt.questions[0].tool


def shows_command(shown: str, command: str) -> bool:
    """Whether a screen that reads `shown` can be drawing `command`.

    Every pinned version breaks a long command onto rows, at spaces or (Claude,
    for a word longer than the room left) inside a word, and the profiles read
    the rows back trimmed and joined with one space; Claude draws each line of a
    multi-line command as a row. So the two must hold the same characters but
    whitespace, and every whitespace run of `command` must show as a space: a
    command cut short, or with any character changed, added or removed, never
    matches. The one freedom is a space in `shown` where `command` has none, which
    is where a row broke inside a word.
    """
    chars, gaps = _spaced(command)
    shown_chars, shown_gaps = _spaced(shown)
    return chars == shown_chars and gaps <= shown_gaps


def _spaced(text: str) -> tuple[str, frozenset[int]]:
    """`text` without whitespace, and the offsets in it that whitespace stood before."""
    words = text.split()
    offsets = itertools.accumulate(len(word) for word in words[:-1])
    return "".join(words), frozenset(offsets)


def shows_file(shown: FileView, call: PendingCall) -> bool:
    """Whether a file's prompt that draws `shown` can be for `call` (a Write or an Edit).

    The path is drawn as the call holds it, or relative to Claude's directory (an
    absolute path ending in the drawn one). Lines compare by their characters but
    whitespace: a tab is drawn as spaces, a space at a row's end is not drawn at all.
    A new file's lines are the content's, one for one (the newline ending the last one
    starts none), from its `first` on (a prompt taller than the pane draws the last
    ones). A file written over shows the lines that change, and some around them: each
    one it keeps or adds must be the content's line of its number. An edit's context
    and removed lines must hold the call's `old`, and its context and added lines be
    them with it replaced by `new` (at its first occurrence, or at every one).
    """
    target = call.writes or call.edits
    if target is None or not _same_path(shown.path, target.path):
        return False
    drawn = [_spaced(line)[0] for line in shown.lines]
    if call.writes is not None:
        # Only the lines drawn are compared (a file may be megabytes, read at every look).
        lines = call.writes.content.split("\n")
        if lines[-1] == "":
            lines.pop()
        if not shown.signs:
            # A prompt taller than the pane draws the content's last lines from `first` on.
            return drawn == [_spaced(line)[0] for line in lines[shown.first - 1 :]]
        # Written over: each line the new file keeps or adds, at its number.
        kept = [
            (number, line)
            for number, line, sign in zip(shown.numbers, drawn, shown.signs, strict=True)
            if sign != "-"
        ]
        return bool(kept) and all(
            number <= len(lines) and _spaced(lines[number - 1])[0] == line for number, line in kept
        )
    if call.edits is None or not shown.signs:
        return False
    before = "".join(line for line, sign in zip(drawn, shown.signs, strict=True) if sign != "+")
    after = "".join(line for line, sign in zip(drawn, shown.signs, strict=True) if sign != "-")
    old, new = _spaced(call.edits.old)[0], _spaced(call.edits.new)[0]
    if not old or old not in before:
        return False
    return before.replace(old, new, -1 if call.edits.every else 1) == after


def offered_file(change: FileWrite | FileEdit) -> str:
    """What a file's permission is offered as (`detail`), from its call's input: the path,
    a blank line, then a new file's content exactly, or an edit's removed text, each line
    after ``-``, over its added text, each line after ``+`` (and whether it replaces
    every occurrence). The headless backend offers a Write or an Edit so too.
    """
    if isinstance(change, FileWrite):
        return f"{change.path}\n\n{change.content}"
    removed = "\n".join("-" + line for line in change.old.split("\n"))
    added = "\n".join("+" + line for line in change.new.split("\n"))
    every = "\n\n(every occurrence)" if change.every else ""
    return f"{change.path}\n\n{removed}\n{added}{every}"


def patches_only(destinations: Sequence[str], patch: FilePatch) -> bool:
    """Whether a patch's prompt that names `destinations` can be for `patch`: the files it
    names (a move's file and where it goes, both) are those and no other, each as an
    absolute path or one relative to its turn's directory. Codex draws them in its own
    order (sorted by path on every pinned version), each once.

    The prompt draws no line of the patch: the controller is offered the call's whole
    patch (`bind_pending`), which is what Codex applies once approved.
    """
    resolved = []
    for path in patch.paths:
        if not path.startswith("/"):
            if patch.cwd is None or not patch.cwd.startswith("/"):
                return False
            path = posixpath.join(patch.cwd, path)
        resolved.append(posixpath.normpath(path))
    return len(set(destinations)) == len(destinations) and set(resolved) == set(destinations)


def _same_path(drawn: str, path: str) -> bool:
    """Whether Claude draws `path` as `drawn`: as it is, or relative to its directory."""
    return drawn == path or (path.startswith("/") and path.endswith("/" + drawn))


def awaits_call(calls: Sequence[PendingCall] | None, tool: str) -> bool:
    """Whether the file was read and shows no pending call of `tool` yet: it may come next.

    Claude writes a call up to ~220 ms after drawing its prompt (tools/lab/NOTES.md).
    """
    return calls is not None and not any(call.tool == tool for call in calls)


def bind_pending(
    observation: Observation, calls: Sequence[PendingCall] | None
) -> tuple[Observation, PendingCall | None]:
    """`observation` with the pending call it asks about, or not actionable with the reason why.

    `calls` are the pending calls of the agent's file (None: it could not be
    read). Only an actionable permission is checked, against the calls of the
    tool its question names; any other observation comes back unchanged, with None.
    """
    if not asks_permission(observation):
        return observation, None
    prompt = observation.prompt
    assert prompt is not None
    if len(prompt.questions) != 1:
        return attrs.evolve(observation, reason=PENDING_CALL_UNKNOWN), None
    (question,) = prompt.questions
    mine = [call for call in calls or () if call.tool == question.tool]
    drawn = question.command is not None or question.file is not None or bool(question.patched)
    if not drawn or len(mine) != 1:
        return attrs.evolve(observation, reason=PENDING_CALL_UNKNOWN), None
    (call,) = mine
    if question.patched:
        if call.patches is None or not patches_only(question.patched, call.patches):
            return attrs.evolve(observation, reason=PENDING_CALL_MISMATCH), None
        return _offered(observation, "\n".join(question.patched) + f"\n\n{call.patches.text}", call)
    if question.file is not None:
        if not shows_file(question.file, call):
            return attrs.evolve(observation, reason=PENDING_CALL_MISMATCH), None
        change = call.writes or call.edits
        assert change is not None  # (`shows_file` found one)
        return _offered(observation, offered_file(change), call)
    assert question.command is not None
    if call.command is None or not shows_command(question.command, call.command):
        return attrs.evolve(observation, reason=PENDING_CALL_MISMATCH), None
    return observation, call


def _offered(
    observation: Observation, offered: str, call: PendingCall
) -> tuple[Observation, PendingCall | None]:
    """A file's permission bound to ``call``, offered as ``offered`` (its call's words); a
    person's when that is longer than `FILE_SHOWN_MAX`."""
    if len(offered) > FILE_SHOWN_MAX:
        return attrs.evolve(observation, reason=FILE_TOO_LONG), None
    prompt = observation.prompt
    assert prompt is not None and len(prompt.questions) == 1
    asked = attrs.evolve(prompt.questions[0], detail=offered)
    return attrs.evolve(observation, prompt=attrs.evolve(prompt, asked=(asked,))), call
