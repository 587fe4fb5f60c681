"""The operator CLI's record commands: watch, unwatch, cancel, close, renew, recover,
retry-callback.

Each command is one protocol call on one record (or, for `watch`, one task: a
terminal's, or a person's Codex thread or Claude session by its own id). This
module says which call, how the command line becomes its params and which
fields of the result a person reads (`akk.cli.app` builds their command line from it,
`record_calls.run` makes the call and prints it, one runner for all of them).
"""

from __future__ import annotations

import argparse
import datetime
import enum
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from akk.cli.errors import CliError


class Target(enum.Enum):
    """What the command's one positional argument names, and so its params key."""

    TERMINAL = "TERMINAL"
    """A terminal_id or pane; `record_calls.run` resolves it to a terminal_id."""
    TASK = "TASK"
    """A terminal (as TERMINAL), or a person's task by --codex-thread or --claude-session."""
    WATCH = "WATCH_ID"
    TURN = "TURN_ID"
    RECORD = "ID"
    """A watch_id or turn_id, told apart by its prefix."""

    @property
    def metavar(self) -> str:
        """The argument's name in `--help` (argparse brackets TASK's, which is optional)."""
        return Target.TERMINAL.value if self is Target.TASK else self.value


@attrs.frozen
class Option:
    """An optional flag that becomes one param when given."""

    flag: str
    param: str
    type: Callable[[str], Any]
    metavar: str
    help: str


@attrs.frozen
class Field:
    """One `label: value` line of the summary: the first of ``keys`` the result carries."""

    label: str
    keys: tuple[str, ...]
    show: Callable[[Any], str] = str


@attrs.frozen
class RecordCommand:
    name: str
    method: str
    help: str
    target: Target
    fields: tuple[Field, ...]
    options: tuple[Option, ...] = ()


RECORD_PREFIXES = ("turn_", "watch_")
"""How a Turn's and a Watch's ids begin; anything else a command takes names a terminal."""


def record_ids(record_id: str) -> dict[str, str]:
    """The params naming ``record_id``: a Watch by watch_id, a managed Send by turn_id."""
    return {"watch_id" if record_id.startswith("watch_") else "turn_id": record_id}


def params(
    command: RecordCommand, target: str | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """The call's params: ``target`` (a resolved terminal_id for TERMINAL) and given options
    (a TASK's options name its task instead)."""
    if command.target is Target.TASK:
        return task_ids(target, options)
    assert target is not None  # only a TASK's target is optional
    if command.target is Target.RECORD:
        named = record_ids(target)
    else:
        named = {_PARAM[command.target]: target}
    given = {o.param: options[o.param] for o in command.options if options[o.param] is not None}
    return named | given


def task_ids(target: str | None, options: Mapping[str, Any]) -> dict[str, str]:
    """The params naming a watch's task: exactly one of a terminal, a Codex thread or a Claude
    session (each with its agent's directory: as given, else as the agent's own default)."""
    thread, session = options.get("codex_thread"), options.get("claude_session")
    if sum(given is not None for given in (target, thread, session)) != 1:
        raise CliError("name one task: a TERMINAL, --codex-thread ID or --claude-session ID")
    if thread is not None:
        home = options.get("codex_home") or os.environ.get("CODEX_HOME") or "~/.codex"
        return {"thread_id": thread, "codex_home": os.path.abspath(os.path.expanduser(home))}
    if session is not None:
        config = (
            options.get("claude_config_dir") or os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude"
        )
        return {
            "claude_session_id": session,
            "claude_config_dir": os.path.abspath(os.path.expanduser(config)),
        }
    assert target is not None
    return {"terminal_id": target}


def add_arguments(parser: argparse.ArgumentParser, command: RecordCommand) -> None:
    parser.add_argument(
        "target", metavar=command.target.metavar, help=_TARGET_HELP[command.target],
        nargs="?" if command.target is Target.TASK else None,
    )  # fmt: skip
    for option in command.options:
        parser.add_argument(
            option.flag, dest=option.param, type=option.type, metavar=option.metavar,
            help=option.help,
        )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the raw result as JSON")


def summary(command: RecordCommand, result: Mapping[str, Any]) -> list[str]:
    """The command's fields of ``result`` as aligned lines; fields it lacks are left out."""
    shown: list[tuple[str, str]] = []
    for field in command.fields:
        value = next((result[k] for k in field.keys if result.get(k) is not None), None)
        if value is not None:
            shown.append((field.label + ":", field.show(value)))
    width = max((len(label) for label, _ in shown), default=0)
    return [f"{label:<{width}} {value}" for label, value in shown]


def iso_time(stamp: float) -> str:
    """A stored Unix time as local ISO 8601, to the second."""
    return datetime.datetime.fromtimestamp(stamp).astimezone().isoformat(timespec="seconds")


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def _verification(checked: Mapping[str, str]) -> str:
    return ", ".join(f"{name} {value}" for name, value in checked.items())


_PARAM = {Target.TERMINAL: "terminal_id", Target.WATCH: "watch_id", Target.TURN: "turn_id"}

_TARGET_HELP = {
    Target.TERMINAL: "the terminal_id (from `akk list --json`) or its pane, e.g. %%3",
    Target.TASK: "the terminal_id (from `akk list --json`) or its pane, e.g. %%3; or none, "
    "with --codex-thread or --claude-session",
    Target.WATCH: "the watch_id (from `akk watch` or `akk list`)",
    Target.TURN: "the turn_id of a managed Send",
    Target.RECORD: "a watch_id or a managed Send's turn_id",
}

_RECORD = (
    Field("record", ("watch_id", "turn_id")),
    Field("kind", ("task_kind",)),
    Field("state", ("state",)),
    Field("observation", ("observation_state",)),
    Field("management", ("management_state",)),
    Field("deadline", ("deadline_at",), iso_time),
)

COMMANDS = (
    RecordCommand(
        "watch", "watch",
        "observe the task a person started in a terminal, or in a Codex thread or Claude "
        "session by its id (sends no input)",
        Target.TASK, _RECORD,
        (Option("--codex-thread", "codex_thread", str, "ID", "a person's Codex thread id"),
         Option("--codex-home", "codex_home", str, "DIR",
                "the CODEX_HOME it runs with (default: $CODEX_HOME, else ~/.codex)"),
         Option("--claude-session", "claude_session", str, "ID",
                "a person's Claude Code session id"),
         Option("--claude-config-dir", "claude_config_dir", str, "DIR",
                "the Claude config dir it runs with (default: $CLAUDE_CONFIG_DIR, else "
                "~/.claude)")),
    ),
    RecordCommand(
        "unwatch", "unwatch", "stop observing a Watch; withdraw its unsent notifications",
        Target.WATCH, (*_RECORD, Field("withdrawn", ("withdrawn",))),
    ),
    RecordCommand(
        "cancel", "cancel",
        "interrupt a managed Send's running task (the agent's own interrupt, once, only while "
        "it is proven running); its outcome event says `cancelled`",
        Target.TURN, (Field("record", ("turn_id",)), Field("state", ("state",))),
    ),
    RecordCommand(
        "close", "close", "release a managed Send (no terminal input)", Target.TURN, _RECORD,
    ),
    RecordCommand(
        "renew", "renew", "verify a record's task and extend its deadline",
        Target.RECORD, (*_RECORD, Field("renewed", ("renewed",), _yes_no)),
        (Option("--minutes", "minutes", int, "N", "minutes from now (default: the server's "
                "lifetime); never earlier than the saved deadline"),),
    ),
    RecordCommand(
        "recover", "recover", "re-read a record's exact task and supervise it again",
        Target.RECORD,
        (*_RECORD, Field("verification", ("verification",), _verification),
         Field("supervised", ("supervised",), _yes_no)),
    ),
    RecordCommand(
        "retry-callback", "retry_callback", "deliver a record's failed notification once more",
        Target.RECORD,
        (Field("notification", ("notification_id",)), Field("kind", ("kind",)),
         Field("delivery", ("state",)), Field("event_id", ("event_id",)),
         Field("attempts", ("attempts",)), Field("retries", ("retries",))),
        (Option("--notification", "notification_id", str, "NOTIFICATION_ID",
                "which one, when the record has several in retryable_failure"),),
    ),
)  # fmt: skip
