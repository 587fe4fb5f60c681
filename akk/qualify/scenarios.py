"""Scripted model conversations for the lab: a scenario is pure data.

A scenario says, for the newest input the agent sends (the last user message
text, or the newest tool result / function_call_output text), what the scripted
model replies. The model server (`akk.qualify.model_server`) plays it against the
real Claude Code and Codex clients; the capture tool and the tests read the same
data to know what the screen must show and what the agent must send back.

Matching rule: `Step.when` is a substring of the newest input. The first unused
step that matches wins; a step fires once unless `repeat=True`. Nothing matches
-> the default reply `Text("ok")`. Auxiliary requests (title generation, token
counting, probes) never consume steps.
"""

from __future__ import annotations

import base64
import functools
import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from akk.qualify.client import Agent


@attrs.frozen
class Option:
    """One selectable answer of a question."""

    label: str
    description: str = ""


@attrs.frozen
class Question:
    """One question of a questionnaire (Claude AskUserQuestion, Codex request_user_input)."""

    question: str
    header: str
    options: tuple[Option, ...]
    multi_select: bool = False
    secret: bool = False
    """Codex's ``isSecret``: the client hides what is typed for it (Claude has no such flag)."""


@attrs.frozen
class Text:
    """A plain assistant message, streamed at once; ends the turn."""

    text: str


@attrs.frozen
class SlowText:
    """A message whose stream starts, then holds the agent in `working`.

    The first word is streamed, then the server holds the stream open (sending
    keep-alives) until the named signal arrives via `ModelServer.signal`; with
    `hold=None` it holds until the client cancels the request (about an hour at
    most). Then the rest of the text is streamed and the turn ends.
    """

    text: str
    hold: str | None = None


@attrs.frozen
class AskUserQuestion:
    """Claude `AskUserQuestion` tool_use: the questionnaire screen."""

    questions: tuple[Question, ...]


@attrs.frozen
class Bash:
    """Claude `Bash` tool_use: the Bash permission prompt."""

    command: str
    description: str
    # A signal the message's close (its stop reason and `message_stop`) waits for: the
    # prompt is drawn before the message is whole (None: the close follows the block).
    close_held: str | None = None


@attrs.frozen
class ClaudeTool:
    """Any other Claude tool_use, e.g. `Write` for a new file's permission prompt."""

    name: str
    input: Mapping[str, object]


@attrs.frozen
class RequestUserInput:
    """Codex `request_user_input` function call; question ids are `q1`, `q2`, ...

    Codex renders it only in Plan mode (or with the `default_mode_request_user_input`
    feature); elsewhere the client answers "unsupported call".
    """

    questions: tuple[Question, ...]


@attrs.frozen
class RequestUserInputAsync:
    """Codex `request_user_input_async` function call (0.154.0+, needs the lab model catalog).

    The client answers at once with `{"accepted":true}` and the turn goes on;
    the user's reply arrives later as a new user message. Options are labels only.
    """

    questions: tuple[Question, ...]


@attrs.frozen
class ExecCommand:
    """Codex `exec_command` function call, by default asking for escalation (approval prompt)."""

    cmd: str
    escalated: bool = True
    justification: str = "The lab scenario needs to run this command outside the sandbox."


@attrs.frozen
class ApplyPatch:
    """Codex `apply_patch` call: a custom (freeform) tool call whose input is the patch.

    Every pinned Codex offers `apply_patch` as a `custom` tool with a Lark grammar
    (`*** Begin Patch` ... `*** End Patch`), not a function: the call is a
    `custom_tool_call` and its result comes back as a `custom_tool_call_output`.
    """

    patch: str


@attrs.frozen
class ApiError:
    """An HTTP error from the model API instead of a reply."""

    status: int
    message: str


Reply = (
    Text
    | SlowText
    | AskUserQuestion
    | Bash
    | ClaudeTool
    | RequestUserInput
    | RequestUserInputAsync
    | ExecCommand
    | ApplyPatch
    | ApiError
)


@attrs.frozen
class Step:
    """When the newest input contains `when`, reply with `reply`.

    `wait_for` names a signal the reply waits for before anything is sent
    (the agent shows `working` with no stream yet). `repeat` lets the step
    fire on every match instead of once. `context_tokens`, if set, is the
    context the reply reports having read (as cache reads): a client that
    counts it near its window compacts the conversation before its next request.
    """

    when: str
    reply: Reply
    wait_for: str | None = None
    repeat: bool = False
    context_tokens: int | None = None


@attrs.frozen
class Scenario:
    """A named script; `task` is the text to send that triggers the first step."""

    name: str
    steps: tuple[Step, ...]
    task: str = ""
    agents: frozenset[Agent] = frozenset({"claude", "codex"})
    files: tuple[tuple[str, str], ...] = ()
    """Files (name, text) the working directory holds before the client starts."""


DEFAULT_REPLY = Text("ok")

ANSWERED_CLAUDE = "Your questions have been answered"
"""Start of Claude's tool_result after an AskUserQuestion is answered (2.1.263 and 2.1.328)."""

ANSWERED_CODEX = '"answers"'
"""Key of Codex's function_call_output after request_user_input is answered."""

ACCEPTED_CODEX_ASYNC = '"accepted"'
"""Codex's immediate function_call_output for request_user_input_async: `{"accepted":true}`."""

REJECTED_CODEX_PATCH = "patch rejected by user"
"""Codex's custom_tool_call_output for an apply_patch whose approval was declined
(0.153.4 through 0.171.0)."""

ECHO_TASK = "lab: say hello"
ECHO_REPLY = "Hello from the lab model."
SLOW_TASK = "lab: work slowly"
SLOW_REPLY = "Working on it slowly... done."
SLOW_SIGNAL = "release"
HELD_TASK = "lab: think before answering"
"""A task whose reply waits for `SLOW_SIGNAL` before its first byte (the `held` scenario)."""
CLOSE_SIGNAL = "close"
"""Releases a held message close (`Bash.close_held`)."""
ASK_AGAIN = "ask again"
ASK_TASK = "lab: ask me a question"
RUN_TASK = "lab: run the command"
WRITE_TASK = "lab: write the file"
ERROR_TASK = "lab: trigger an error"

BASH_MARKER = "lab-bash-ran"
EXEC_MARKER = "lab-exec-ran"
BASH_CALL = Bash(f"touch {BASH_MARKER}.txt && echo {BASH_MARKER}", "Create the lab marker file")
"""The Bash call of the `claude_bash` scenarios (and the headless capture's)."""
WRITE_FILE = "lab-written.txt"
WRITE_CONTENT = "written by the lab model\n"
EDIT_TASK = "lab: edit the file"
EDIT_FILE = "lab-edited.txt"
EDIT_OLD = "the second line, as it was"
EDIT_NEW = "the second line, edited by the lab model"
EDIT_BEFORE = "the first line\nthe second line, as it was\nthe third line\n"
EDIT_SHAPES_BEFORE = "".join(f"line {n} of the file to edit\n" for n in range(1, 13))
EDIT_SHAPES_OLD = "line 5 of the file to edit\nline 6 of the file to edit\nline 7 of the file"
EDIT_SHAPES_NEW = (
    "line 5, edited\nline 6 of the file to edit\nline 7, edited into a line longer than the"
    " preview is wide, so that it breaks inside a word onto the rows under its number"
)
"""A three-line edit of a twelve-line file: its middle line stays (drawn as context
inside the change), its last is cut mid-line, and its new last line is long."""
OVERWRITE_BEFORE = "".join(f"line {n} of the file to write over\n" for n in range(1, 31))
OVERWRITE_AFTER = "".join(
    (
        *(f"line {n} of the file to write over\n" for n in range(1, 3)),
        "a line the lab model inserted\n",
        "another inserted line\n",
        *(f"line {n} of the file to write over\n" for n in range(3, 15)),
        "line 15, written over into a line longer than the preview is wide, so that it "
        "breaks inside a word onto the rows under its number\n",
        *(f"line {n} of the file to write over\n" for n in range(16, 28)),
        *(f"line {n} of the file to write over\n" for n in range(29, 31)),
    )
)
"""A thirty-line file written over whole: two lines inserted after line 2, line 15
changed into a long one and line 28 removed, each far enough from the others to be a
change of its own."""
WRITE_SHAPES_FILE = "lab_written.py"
WRITE_SHAPES_CONTENT = "".join(
    (
        "def main() -> None:\n",
        "    print('a line longer than the preview is wide breaks inside a word onto rows under"
        " its number, at eighty columns and at one hundred and twenty')\n",
        "\tindented = 'by a tab'\n",
        "    trailing = 'spaces'   \n",
        "\n",
        "\n",
        "# two blank lines above, and numbers of two digits below\n",
        "main()\n",
        "main()  # nine\n",
        "main()  # ten\n",
    )
)
"""A new file with what its preview draws otherwise than it holds: a line longer than
the row, blank lines, a tab, trailing spaces, and numbers of two digits; its prompt
fits a pane of 80x24."""
WRITE_LONG_CONTENT = "".join(f"line {n} of a file longer than the pane\n" for n in range(1, 61))
"""A new file whose prompt is taller than a pane of 40 rows."""
WRITE_HUGE_FILE = "lab-huge.txt"
WRITE_HUGE_CONTENT = "".join(
    f"line {n} of a file too long for a controller to be shown whole\n" for n in range(1, 1101)
)
"""A new file of 70,000 characters or so: past what a file's permission is offered with."""
PATCH_TASK = "lab: patch the file"
PATCH_FILE = "lab-patched.txt"
PATCH_LINE = "patched by the lab model"
PATCH_CALL = ApplyPatch(
    f"*** Begin Patch\n*** Add File: ../{PATCH_FILE}\n+{PATCH_LINE}\n*** End Patch\n"
)
"""The `codex_patch` call: it adds a file beside the working directory. Codex asks before
it writes there only if that is outside every writable root: `workspace-write` also
makes /tmp and $TMPDIR writable, where the lab's runs live, unless its config excludes
them (`[sandbox_workspace_write]`)."""
PATCH_SECOND_FILE = "lab-patched-second.txt"
PATCH_FILES_CALL = ApplyPatch(
    f"*** Begin Patch\n*** Add File: ../{PATCH_FILE}\n+{PATCH_LINE}\n"
    f"*** Add File: ../{PATCH_SECOND_FILE}\n+{PATCH_LINE}, the second file\n*** End Patch\n"
)
"""The `codex_patch_files` call: two files beside the working directory, one patch. Codex
names each on a row of its own (``Destination:``)."""
PATCH_DONE = "The file is patched."
PATCH_DECLINED = "I left the file alone."

_COLORS = (
    Option("Red", "A warm color"),
    Option("Blue", "A cool color"),
    Option("Green", "The color of leaves"),
    Option("Yellow", "The color of the sun"),
)


def _color_question(n_options: int, *, multi_select: bool = False) -> Question:
    return Question(
        question="Which colors do you like?" if multi_select else "Which color do you prefer?",
        header="Color",
        options=_COLORS[:n_options],
        multi_select=multi_select,
    )


_SIZE_QUESTION = Question(
    question="Which size should the widget be?",
    header="Size",
    options=(Option("Small", "Fits in a sidebar"), Option("Large", "Fills the page")),
)
_SHAPE_QUESTION = Question(
    question="Which shape should it have?",
    header="Shape",
    options=(
        Option("Round", "Soft corners"),
        Option("Square", "Sharp corners"),
        Option("Hexagon", "Six sides"),
    ),
)


DEMO_TASK = "demo: write a greeting card"
DEMO_FILE = "card.txt"
DEMO_GREETING = "Bonjour from AKK"
DEMO_COMMAND = f"echo '{DEMO_GREETING}' > {DEMO_FILE} && cat {DEMO_FILE}"
"""The demo's command: it writes the card and prints it, so its output reaches the model."""

_LANGUAGE_QUESTION = Question(
    question="Which language should the greeting be in?",
    header="Language",
    options=(Option("English", "Hello"), Option("French", "Bonjour"), Option("German", "Hallo")),
)
_EXTRAS_QUESTION = Question(
    question="Which extras should the card have?",
    header="Extras",
    options=(
        Option("Emoji", "a smiley"),
        Option("Signature", "signed"),
        Option("Date", "today's date"),
        Option("Border", "a frame"),
    ),
    multi_select=True,
)


NOTED = "Thanks, I noted your answers."


def _claude_questionnaire(
    name: str, *questions: Question, task: str = ASK_TASK, reply: str = NOTED
) -> Scenario:
    return Scenario(
        name=name,
        task=task,
        agents=frozenset({"claude"}),
        steps=(Step(task, AskUserQuestion(questions)), Step(ANSWERED_CLAUDE, Text(reply))),
    )


def _codex_questionnaire(
    name: str, *questions: Question, task: str = ASK_TASK, reply: str = NOTED
) -> Scenario:
    return Scenario(
        name=name,
        task=task,
        agents=frozenset({"codex"}),
        steps=(Step(task, RequestUserInput(questions)), Step(ANSWERED_CODEX, Text(reply))),
    )


def _patch(name: str, call: ApplyPatch) -> Scenario:
    """Codex asks to apply `call` for the patch task; once its output names the file it
    added ("A ../lab-patched.txt"), the model says it is patched, and declined, that it
    left it alone."""
    return Scenario(
        name,
        task=PATCH_TASK,
        agents=frozenset({"codex"}),
        steps=(
            Step(PATCH_TASK, call),
            Step(PATCH_FILE, Text(PATCH_DONE)),
            Step(REJECTED_CODEX_PATCH, Text(PATCH_DECLINED)),
        ),
    )


def _command(
    name: str,
    call: Bash | ExecCommand,
    *,
    marker: str | None = None,
    task: str = RUN_TASK,
    wait_for: str | None = None,
) -> Scenario:
    """The model asks to run `call` for `task`; once the output carrying `marker` comes back,
    it says the command ran.

    A Bash call is Claude's, an ExecCommand Codex's. Without a marker the default
    reply ("ok") ends the turn after the command's output.
    """
    agent: Agent = "claude" if isinstance(call, Bash) else "codex"
    ran = () if marker is None else (Step(marker, Text("The command ran.")),)
    return Scenario(
        name,
        task=task,
        agents=frozenset({agent}),
        steps=(Step(task, call, wait_for=wait_for), *ran),
    )


def _new_file(name: str, path: str, content: str) -> Scenario:
    """The model writes a new file at `path` for WRITE_TASK; once written, it says so."""
    call = ClaudeTool("Write", {"file_path": path, "content": content})
    return Scenario(
        name,
        task=WRITE_TASK,
        agents=frozenset({"claude"}),
        steps=(Step(WRITE_TASK, call), Step(path, Text("The file is written."))),
    )


def _edit(old: str, new: str) -> ClaudeTool:
    """Claude's Edit of EDIT_FILE: `old` replaced by `new`."""
    return ClaudeTool("Edit", {"file_path": EDIT_FILE, "old_string": old, "new_string": new})


def _read_then(name: str, before: str, call: ClaudeTool) -> Scenario:
    """The working directory holds EDIT_FILE as `before`. For EDIT_TASK the model reads
    it, then makes `call` once its first changed line (a Write's: the file's first line)
    came back (Claude edits only what it read); once the file is changed, it says so."""
    old = call.input.get("old_string", before.split("\n")[0])
    assert isinstance(old, str) and old in before
    first = old.split("\n")[0]
    return Scenario(
        name,
        task=EDIT_TASK,
        agents=frozenset({"claude"}),
        files=((EDIT_FILE, before),),
        steps=(
            Step(EDIT_TASK, ClaudeTool("Read", {"file_path": EDIT_FILE})),
            Step(first, call),
            Step(EDIT_FILE, Text("The file is changed.")),
        ),
    )


EXEC_CALL = ExecCommand(f"touch ../{EXEC_MARKER}.txt && echo {EXEC_MARKER}")
"""The command the codex_exec scenarios ask to run: it leaves a file, and prints the marker."""


def _build() -> dict[str, Scenario]:
    scenarios = [
        Scenario("echo", task=ECHO_TASK, steps=(Step(ECHO_TASK, Text(ECHO_REPLY)),)),
        Scenario(
            "slow",
            task=SLOW_TASK,
            steps=(Step(SLOW_TASK, SlowText(SLOW_REPLY, hold=SLOW_SIGNAL)),),
        ),
        Scenario(
            "held",
            task=HELD_TASK,
            steps=(Step(HELD_TASK, Text("Thought it over."), wait_for=SLOW_SIGNAL),),
        ),
        Scenario(
            "api_error",
            task=ERROR_TASK,
            # 400 is not retried by either client, so the error shows at once.
            steps=(Step(ERROR_TASK, ApiError(400, "lab: simulated invalid request"), repeat=True),),
        ),
        Scenario(
            "api_error_once",
            task=ERROR_TASK,
            agents=frozenset({"claude"}),
            # Claude re-sends after a 400 with fewer betas (NOTES.md); a 403 is
            # shown at once ("Please run /login · API Error: 403 ...") and sent once.
            steps=(Step(ERROR_TASK, ApiError(403, "lab: simulated forbidden"), repeat=True),),
        ),
        _command("claude_bash", BASH_CALL, marker=BASH_MARKER),
        # The call waits for SLOW_SIGNAL: the Turn works until then, and its permission
        # prompt comes later (behind whatever a person opened meanwhile).
        _command("claude_bash_held", BASH_CALL, marker=BASH_MARKER, wait_for=SLOW_SIGNAL),
        _command(
            "claude_bash_late_close",
            attrs.evolve(BASH_CALL, close_held=CLOSE_SIGNAL),
            marker=BASH_MARKER,
        ),
        _new_file("claude_write", WRITE_FILE, WRITE_CONTENT),
        _new_file("claude_write_shapes", WRITE_SHAPES_FILE, WRITE_SHAPES_CONTENT),
        _new_file("claude_write_long", WRITE_FILE, WRITE_LONG_CONTENT),
        _new_file("claude_write_huge", WRITE_HUGE_FILE, WRITE_HUGE_CONTENT),
        _read_then("claude_edit", EDIT_BEFORE, _edit(EDIT_OLD, EDIT_NEW)),
        _read_then(
            "claude_edit_shapes", EDIT_SHAPES_BEFORE, _edit(EDIT_SHAPES_OLD, EDIT_SHAPES_NEW)
        ),
        # A file that exists written over whole (its prompt shows a diff): a person's.
        _read_then(
            "claude_overwrite",
            EDIT_BEFORE,
            ClaudeTool(
                "Write",
                {"file_path": EDIT_FILE, "content": EDIT_BEFORE.replace(EDIT_OLD, EDIT_NEW)},
            ),
        ),
        _read_then(
            "claude_overwrite_shapes",
            OVERWRITE_BEFORE,
            ClaudeTool("Write", {"file_path": EDIT_FILE, "content": OVERWRITE_AFTER}),
        ),
        _claude_questionnaire("questionnaire_single2", _color_question(2)),
        _claude_questionnaire("questionnaire_single3", _color_question(3)),
        _claude_questionnaire("questionnaire_single4", _color_question(4)),
        _claude_questionnaire("questionnaire_multi", _color_question(4, multi_select=True)),
        _claude_questionnaire(
            "questionnaire_multi_question", _color_question(3), _SIZE_QUESTION, _SHAPE_QUESTION
        ),
        _command("codex_exec", EXEC_CALL, marker=EXEC_MARKER),
        # As claude_bash_held: the Turn works until SLOW_SIGNAL, then its approval comes.
        _command("codex_exec_held", EXEC_CALL, marker=EXEC_MARKER, wait_for=SLOW_SIGNAL),
        _patch("codex_patch", PATCH_CALL),
        _patch("codex_patch_files", PATCH_FILES_CALL),
        _codex_questionnaire("codex_rui_one", _color_question(3)),
        Scenario(
            "codex_rui_async",
            task=ASK_TASK,
            agents=frozenset({"codex"}),
            steps=(
                Step(ASK_TASK, RequestUserInputAsync((_color_question(3),))),
                Step(ACCEPTED_CODEX_ASYNC, Text("I asked about the color; I will wait for it.")),
                Step("Blue", Text("Blue it is.")),
            ),
        ),
        Scenario(
            # The turn goes on (held until SLOW_SIGNAL) while the question waits.
            "codex_rui_async_held",
            task=ASK_TASK,
            agents=frozenset({"codex"}),
            steps=(
                Step(ASK_TASK, RequestUserInputAsync((_color_question(3),))),
                Step(ACCEPTED_CODEX_ASYNC, SlowText("Still working on it... done.", SLOW_SIGNAL)),
                Step("Blue", Text("Blue it is.")),
            ),
        ),
        _codex_questionnaire(
            "codex_rui_three", _color_question(3), _SIZE_QUESTION, _SHAPE_QUESTION
        ),
        Scenario(
            # The identical question twice: the second ask is a new appearance.
            "questionnaire_again",
            task=ASK_TASK,
            agents=frozenset({"claude"}),
            steps=(
                Step(ASK_TASK, AskUserQuestion((_color_question(3),))),
                # Held until the test signals, as a real model takes a moment to reply.
                Step(ANSWERED_CLAUDE, AskUserQuestion((_color_question(3),)), wait_for=ASK_AGAIN),
                Step(ANSWERED_CLAUDE, Text("Thanks, I noted both answers.")),
            ),
        ),
        Scenario(
            # `make demo`: a questionnaire (single- and multi-select), then a Bash permission.
            "demo_claude",
            task=DEMO_TASK,
            agents=frozenset({"claude"}),
            steps=(
                Step(DEMO_TASK, AskUserQuestion((_LANGUAGE_QUESTION, _EXTRAS_QUESTION))),
                Step(ANSWERED_CLAUDE, Bash(DEMO_COMMAND, "Write the greeting card")),
                Step(DEMO_GREETING, Text(f"The card is ready: {DEMO_FILE} says {DEMO_GREETING}.")),
            ),
        ),
        Scenario(
            # `AGENT=codex make demo`: request_user_input (single-select; Plan mode), then an
            # escalated exec_command.
            "demo_codex",
            task=DEMO_TASK,
            agents=frozenset({"codex"}),
            steps=(
                Step(DEMO_TASK, RequestUserInput((_LANGUAGE_QUESTION,))),
                Step(ANSWERED_CODEX, ExecCommand(DEMO_COMMAND, justification="Write the card.")),
                Step(DEMO_GREETING, Text(f"The card is ready: {DEMO_FILE} says {DEMO_GREETING}.")),
            ),
        ),
    ]
    return {scenario.name: scenario for scenario in scenarios}


SCENARIOS: Mapping[str, Scenario] = _build()


# ---------------------------------------------------------------- Claude variants (issue 12)

EXPANSION_MARKER = "lab-expansion-ran"
EXPANSION_COMMAND = (
    f'echo "{EXPANSION_MARKER} $(whoami) $HOME" > lab-expansion.txt '
    "&& cat lab-expansion.txt | head -n 1"
)
"""Shell expansion (`$(…)`, `$VAR`), a redirect, `&&` and a pipe.

Claude draws it under a dim gutter; no advisory row (it writes a file, so Claude asks anyway).
"""

WARNING_COMMAND = 'echo "$(whoami)" | cat'
"""Read-only but for quoted expansion: 2.1.328 asks, saying it "can't be checked".

(`echo "lab-warning-ran $(whoami)" | cat` ran unasked there; 2.1.263-2.1.267 run both.)
"""

VARIABLE_COMMAND = "echo $USER > lab-variable.txt"
"""An unquoted variable (a `simple_expansion` Claude's bash parser cannot resolve).

2.1.263-2.1.267 show the parser's reason as it is (`Contains simple_expansion`) at the
title's column between blank rows; 2.1.328 and 2.1.332 say "A variable in this command
can't be checked before it runs" under the fence. Either way no persistent grant row.
"""

ASK_RULE = "Bash(touch:*)"
ASK_RULE_COMMAND = "touch lab-ask-rule.txt"
"""A command a user's `permissions.ask` rule (`ASK_RULE`) matches: the prompt names the rule
(2.1.263-2.1.267: `Permission rule Bash(touch:*) requires confirmation for this command.`;
2.1.328+: `Rule Bash(touch:*) from user settings says to ask.`), a muted `/permissions to
update rules` under it, and offers no grant and no auto mode."""

READ_OUTSIDE_COMMAND = "ls /tmp | head -n 3"
"""A read-only command on a directory outside the project: a directory-scoped grant row."""

LONG_MARKER = "lab-long-ran"
LONG_COMMAND = (
    f'echo "{LONG_MARKER} $(whoami)" > lab-long.txt && printf "%s\\n" alpha beta gamma delta '
    "epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi "
    "psi omega | sort -r | uniq -c | head -n 20 | tail -n 5 >> lab-long.txt && wc -l < "
    "lab-long.txt && head -n 1 lab-long.txt && echo the long lab command wrapped over rows"
)
"""Expansion, redirects, `&&` and pipes, long enough to wrap over 3+ rows at 120 columns."""


_LONG_DESCRIPTION = (
    "Create the lab marker file in the working directory, so that the test can tell the "
    "command ran exactly once, then print the marker for the transcript"
)
"""A description as long as a model writes one: it wraps over rows at every pane width."""


_CJK_DESCRIPTION = (
    "在工作目录中创建实验标记文件，以便测试能够判断这条命令只运行了一次，然后打印标记文件的内容"
)


def _claude_variant_scenarios() -> dict[str, Scenario]:
    scenarios = [
        _command(
            "claude_bash_expansion",
            Bash(EXPANSION_COMMAND, "Write and read the lab expansion file"),
            marker=EXPANSION_MARKER,
        ),
        _command("claude_bash_warning", Bash(WARNING_COMMAND, "Print the user name")),
        _command("claude_bash_variable", Bash(VARIABLE_COMMAND, "Write the user name to a file")),
        _command("claude_bash_ask_rule", Bash(ASK_RULE_COMMAND, "Create the ask-rule file")),
        # Its output varies with /tmp: no marker to wait for.
        _command(
            "claude_bash_read_outside", Bash(READ_OUTSIDE_COMMAND, "List a few entries of /tmp")
        ),
        _command(
            "claude_bash_long",
            Bash(LONG_COMMAND, "Write, sort and count the lab word list"),
            marker=LONG_MARKER,
        ),
        _command(
            "claude_bash_description_cjk",
            attrs.evolve(BASH_CALL, description=_CJK_DESCRIPTION),
            marker=BASH_MARKER,
        ),
        _command(
            "claude_bash_description_long",
            attrs.evolve(BASH_CALL, description=_LONG_DESCRIPTION),
            marker=BASH_MARKER,
        ),
    ]
    return {scenario.name: scenario for scenario in scenarios}


SCENARIOS = {**SCENARIOS, **_claude_variant_scenarios()}


# ---------------------------------------------------------------- Codex variants (issue 12)

EXEC_LONG_COMMAND = (
    f"touch ../{EXEC_MARKER}-long.txt && echo {EXEC_MARKER} && printf '%s\\n' alpha beta gamma "
    "delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon "
    "phi chi psi omega | sort -r | uniq -c | head -n 20 | tail -n 5 > /dev/null && ls -la .. "
    "| wc -l && echo the long lab command wrapped over several rows of the approval prompt"
)
"""An escalated exec command long enough to wrap over 3+ rows of the approval prompt at 120
columns (short words only, so each row breaks at a single space)."""

_LONG_QUESTION = Question(
    question="Which deployment strategy should the lab use for the widget service rollout?",
    header="Deploy",
    options=(
        Option(
            "Rolling",
            "Replace the running instances one at a time, keeping the service available the "
            "whole time, at the cost of a slower rollout and two versions live side by side",
        ),
        Option(
            "Blue-green",
            "Start a complete second environment with the new version, switch all traffic at "
            "once when it is healthy, and keep the old one around for a quick rollback",
        ),
        Option(
            "Canary",
            "Send a small share of the traffic to the new version first, watch its error rates "
            "and latency for a while, then widen the share step by step until it takes all",
        ),
    ),
)
"""A request_user_input question whose option descriptions wrap over several rows."""

LONG_ASKED = Question(
    question=(
        "The billing service keeps its invoices in two databases that drifted apart last "
        "month: which one should the lab treat as the source of truth while it reconciles "
        "the other, knowing that the reconciliation rewrites every differing row?"
    ),
    header="Source",
    options=(
        Option("Primary", "The database the service writes to today"),
        Option("Replica", "The copy the reports read from"),
    ),
)
"""A question as long as a model asks one: it wraps over rows at every pane width."""


_LONG_LABELS = Question(
    question="Which migration plan should the lab follow for the billing database?",
    header="Migration",
    options=(
        Option(
            "Copy every table into a fresh cluster, check the row counts, then switch over at "
            "once in one short window",
            "The old cluster stays untouched until the switch",
        ),
        Option(
            "Migrate the tables one by one while both clusters serve reads and writes in "
            "parallel for a week",
            "No downtime at all",
        ),
    ),
)
"""A request_user_input question whose option labels wrap, each beside a one-row description."""


_LONG_REASON = (
    "Running the test suite needs network access to download the project's dependencies, "
    "which the sandbox blocks, and it writes its cache outside the workspace."
)
"""A justification as long as a model writes one: it wraps over rows at every pane width."""


_CJK_REASON = (
    "运行测试套件需要网络访问来下载项目的依赖项，而沙箱会阻止网络访问；它还会在工作区之外"
    "写入缓存文件，所以这条命令必须在沙箱之外运行。"
)

CJK_ASKED = Question(
    question=(
        "账单服务的发票保存在两个上个月出现差异的数据库中：在核对另一个数据库时，"
        "实验应该把哪一个视为真实的数据来源？核对会重写每一个不同的行。"
    ),
    header="来源",
    options=(
        Option("主数据库", "服务今天写入的数据库，所有新发票都会先到达这里，然后才复制到副本中"),
        Option("副本数据库", "报表读取的那份副本，它比主数据库晚几分钟，但从未被手工修改过"),
    ),
)
"""A question as long as a model asks one, in Chinese: it wraps at every pane width, and
each client cuts it at the row's edge (no spaces to break at)."""

CJK_MULTI = attrs.evolve(
    CJK_ASKED,
    options=(
        *CJK_ASKED.options,
        Option("两个都不用", "先停下核对，等人工确认之后再决定哪一个数据库才是真实的来源"),
    ),
    multi_select=True,
)
"""`CJK_ASKED` as a multi-select question of three options: its review lists it."""


def _spaced(after: str) -> Question:
    """`CJK_ASKED` with a space the model wrote after `after`: where each client, at 80
    columns, cuts the question's first row (so no screen can show the space)."""
    head, tail = CJK_ASKED.question.split(after, 1)
    return attrs.evolve(CJK_ASKED, question=f"{head}{after} {tail}")


CJK_SPACED = {"claude": _spaced("实验应"), "codex": _spaced("实验")}
"""Per agent, a Chinese question with a space just where the agent breaks its first row at
80 columns: only its call in the agent's file says the space is there."""


MULTILINE_ASKED = Question(
    question="The build failed twice.\n\nShould I edit `src/app.py` now,\nor rewrite it?",
    header="Build",
    options=(
        Option("Edit it", "Keep **most** of `src/app.py`"),
        Option("Rewrite it", "Start from `main.py` again"),
    ),
)
"""A question of three lines, one blank, in the markdown a model writes (both clients draw
it raw): each line on rows of its own."""

MULTILINE_MULTI = attrs.evolve(
    MULTILINE_ASKED,
    options=(*MULTILINE_ASKED.options, Option("Leave it", "Skip the build for now")),
    multi_select=True,
)
"""`MULTILINE_ASKED` as a multi-select question of three options: its review lists it."""


def _codex_variant_scenarios() -> dict[str, Scenario]:
    scenarios = [
        _command(
            "codex_exec_reason_cjk",
            attrs.evolve(EXEC_CALL, justification=_CJK_REASON),
            marker=EXEC_MARKER,
        ),
        _codex_questionnaire("codex_rui_cjk", CJK_ASKED),
        _codex_questionnaire("codex_rui_cjk_spaced", CJK_SPACED["codex"]),
        _codex_questionnaire("codex_rui_multiline", MULTILINE_ASKED),
        _command("codex_exec_long", ExecCommand(EXEC_LONG_COMMAND), marker=EXEC_MARKER),
        _command(
            "codex_exec_reason_long",
            attrs.evolve(EXEC_CALL, justification=_LONG_REASON),
            marker=EXEC_MARKER,
        ),
        _codex_questionnaire("codex_rui_long", _LONG_QUESTION),
        _codex_questionnaire("codex_rui_long_asked", LONG_ASKED),
        _codex_questionnaire("codex_rui_long_labels", _LONG_LABELS),
    ]
    return {scenario.name: scenario for scenario in scenarios}


SCENARIOS = {**SCENARIOS, **_codex_variant_scenarios()}


# ---------------------------------------------------------------- Claude questions (issue 12)

WRAPPED_QUESTION = Question(
    question="Which migration plan should the lab follow for the billing database?",
    header="Migration",
    options=(
        Option(
            "Copy every table into a fresh cluster, check the row counts, then switch over at once",
            "The old cluster stays untouched until the switch, so going back is one configuration "
            "change; the copy needs twice the disk space for a day or two",
        ),
        Option(
            "Migrate the tables one by one while both clusters serve reads and writes in parallel",
            "No downtime at all, but every table needs its own cut-over and a failure halfway "
            "leaves a split state that has to be reconciled by hand",
        ),
        Option(
            "Leave the data where it is and only upgrade the database engine in place, tonight",
            "The quickest plan: one maintenance window and nothing to copy, but there is no way "
            "back once the engine has rewritten its files on disk",
        ),
    ),
)
"""Option labels (81-85 characters) that wrap at 80 columns, descriptions (135-145) at every
size; the whole question still fits an 80x24 pane."""

TALL_QUESTION = Question(
    question=(
        "Which rollout plan should the lab follow for the billing database, given that the "
        "nightly reports must keep running, the audit team needs the full history of every "
        "change, and the budget allows one extra cluster for a month at most?"
    ),
    header="Rollout",
    options=(
        Option(
            "Copy every table into a fresh cluster first, verify the row counts and checksums, "
            "then move the application over in one step",
            "The old cluster stays untouched until the switch, so going back is a single "
            "configuration change; the copy needs twice the disk space and a short write "
            "freeze while the last changes are replayed",
        ),
        Option(
            "Migrate the tables one by one while both clusters serve reads and writes in parallel",
            "No downtime at all, but every table needs its own cut-over, the application has "
            "to know which cluster holds which table for a few weeks, and a failure halfway "
            "leaves a split state that someone has to reconcile by hand before anything else "
            "can move",
        ),
        Option(
            "Leave the data where it is and only upgrade the database engine in place",
            "The quickest plan: one maintenance window and nothing to copy. There is no way "
            "back once the engine has rewritten its files, so a full backup must be taken "
            "and tested beforehand",
        ),
    ),
)
"""A question of 232 characters, a first label of 124 (wraps up to 100 columns), descriptions
of 177-247: taller than an 80x24 pane, where its top is cut off."""

UNICODE_QUESTION = Question(
    question="Quelle couleur préférez-vous ? 你喜欢哪种颜色？",
    header="颜色",
    options=(
        Option("蓝色 — 天空", "天空和大海的颜色"),
        Option(
            "🚀 Rocket 👨‍👩‍👧 launch", "Emoji: a rocket, then a family (a ZWJ sequence of three)"
        ),
        Option("أزرق כחול", "Arabic and Hebrew, right to left"),
        Option("Plain blue", "ASCII only"),
    ),
)
"""Single-select labels in CJK, emoji (a ZWJ sequence), right-to-left scripts and plain text."""

UNICODE_MULTI_QUESTION = Question(
    question="Which symbols should the card carry? 卡片上要哪些符号？",
    header="Symbols",
    options=(
        Option("漢字 — Kanji", "Two CJK characters"),
        Option("👨‍👩‍👧 Family", "A ZWJ sequence first"),
        Option("שלום Shalom", "Hebrew, right to left"),
        Option("Plain star", "ASCII only"),
    ),
    multi_select=True,
)
"""A multi-select question with CJK, a ZWJ emoji and Hebrew in its labels."""

SELECTOR_QUESTION = Question(
    question="Which symbol should the card carry?",
    header="Symbol",
    options=(
        Option("❤️ Heart", "A red heart: U+2764 and the emoji variation selector U+FE0F"),
        Option("⌚︎ Watch", "A watch in text style: U+231A and the text variation selector U+FE0E"),
        Option("Circle", "ASCII only"),
    ),
)
"""Labels with variation selectors (emoji and text style), which Claude draws without them."""

INVISIBLE_QUESTION = Question(
    question="Which spelling should the card use?",
    header="Spelling",
    options=(
        Option("Zero\u200bwidth", "A zero-width space (U+200B) between the words"),
        Option("Soft\u00adhyphen", "A soft hyphen (U+00AD) between the words"),
        Option("Plain", "ASCII only"),
    ),
)
"""Labels with invisible format characters, which Claude draws as U+FFFD."""


FOUR_QUESTIONS = tuple(
    Question(
        question=f"Which {what} should the lab use?",
        header=header,
        options=(Option(first, "The usual one"), Option(second, "The other one")),
    )
    for what, header, first, second in (
        ("deploy stage", "Deploy stage", "Staging", "Production"),
        ("cloud region", "Cloud region", "Frankfurt", "Oregon"),
        ("machine type", "Machine type", "Small", "Large"),
        ("backup plan", "Backup plans", "Nightly", "Hourly"),
    )
)
"""Four questions (as many as AskUserQuestion takes), each header as long as it may be
(12 characters): the tab row is wider than a narrow pane."""


def _claude_question_scenarios() -> dict[str, Scenario]:
    scenarios = [
        _claude_questionnaire("questionnaire_four_questions", *FOUR_QUESTIONS),
        _claude_questionnaire("questionnaire_long_asked", LONG_ASKED),
        _claude_questionnaire("questionnaire_cjk", CJK_ASKED),
        _claude_questionnaire("questionnaire_cjk_multi", CJK_MULTI),
        _claude_questionnaire("questionnaire_cjk_spaced", CJK_SPACED["claude"]),
        _claude_questionnaire("questionnaire_multiline", MULTILINE_ASKED),
        _claude_questionnaire("questionnaire_multiline_multi", MULTILINE_MULTI),
        _claude_questionnaire("questionnaire_wrapped", WRAPPED_QUESTION),
        _claude_questionnaire("questionnaire_tall", TALL_QUESTION),
        _claude_questionnaire("questionnaire_unicode", UNICODE_QUESTION),
        _claude_questionnaire("questionnaire_unicode_multi", UNICODE_MULTI_QUESTION),
        _claude_questionnaire("questionnaire_selector", SELECTOR_QUESTION),
        _claude_questionnaire("questionnaire_invisible", INVISIBLE_QUESTION),
    ]
    return {scenario.name: scenario for scenario in scenarios}


SCENARIOS = {**SCENARIOS, **_claude_question_scenarios()}

SCENARIOS = {
    **SCENARIOS,
    **{
        scenario.name: scenario
        for scenario in (
            _codex_questionnaire("codex_rui_unicode", UNICODE_QUESTION),
            _codex_questionnaire("codex_rui_selector", SELECTOR_QUESTION),
            _codex_questionnaire("codex_rui_invisible", INVISIBLE_QUESTION),
        )
    },
}


# ---------------------------------------------------------------- hostile text (issue 26)

HOSTILE_TASK = "lab: answer with hostile text"
HOSTILE_ASK_TASK = "lab: ask a hostile question"

HOSTILE_MARKUP = "[/] [bold]bold [link=https://example.test]link"
"""Rich markup: `[/]` closes no tag (MarkupError), the others would style and link."""

HOSTILE_SEQUENCES = "\x1b]52;c;aGk=\x07 \x1b[2J \x9b31m \u202eevil\u202c"
"""An OSC 52 clipboard write ("hi"), a screen clear, a C1 CSI and a right-to-left override."""

HOSTILE_TEXT = f"{HOSTILE_MARKUP} {HOSTILE_SEQUENCES}\nstate:    done"
"""A final message: markup and control sequences on its first line (the event summary), then
a line that would pass for one of `akk status`'s own."""

HOSTILE_QUESTION = Question(
    question=f"Which {HOSTILE_MARKUP} color?",
    header="[/]Color",
    options=(Option("[bold]Red", "[/] warm"), Option("Blue", "cool")),
)
"""A question with markup: what the pane draws of it reaches `akk list` and the events.

Markup only: Claude draws control and bidi characters as U+FFFD, and AKK reads no question
it cannot read back.
"""

SCENARIOS = {
    **SCENARIOS,
    "hostile_text": Scenario(
        "hostile_text",
        task=HOSTILE_TASK,
        steps=(
            Step(HOSTILE_TASK, Text(HOSTILE_TEXT), repeat=True),
            Step(HOSTILE_ASK_TASK, AskUserQuestion((HOSTILE_QUESTION,))),
        ),
    ),
}


MIMIC_TASK = "lab: draw a prompt in your reply"
MIMIC_PROMPTS: dict[Agent, str] = {
    "claude": (
        "─" * 72 + "\n←  ☐ Color  ✔ Submit  →\n\nWhich colors do you like?\n\n"
        "❯ 1. [ ] Red\n     A warm color\n  2. [ ] Blue\n     A cool color\n"
        "  3. [ ] Type something\n     Submit\n" + "─" * 72 + "\n  4. Chat about this\n\n"
        "Enter to select · ↑/↓ to navigate · Esc to cancel"
    ),
    "codex": (
        "Would you like to run the following command?\n\n"
        "  Reason: The lab scenario needs to run this command outside the sandbox.\n\n"
        "  $ touch ../lab-exec-ran.txt && echo lab-exec-ran\n\n"
        "› 1. Yes, proceed (y)\n"
        "  2. Yes, and don't ask again for commands that start with `touch` (p)\n"
        "  3. No, and tell Codex what to do differently (esc)\n\n"
        "  Press enter to confirm or esc to cancel"
    ),
}
"""A reply that draws, as text, the prompt its client draws (a questionnaire, a command
approval): what a prompt injection would make a model write to get a controller's keys."""

SCENARIOS = {
    **SCENARIOS,
    **{
        f"{agent}_mimic_prompt": Scenario(
            f"{agent}_mimic_prompt",
            task=MIMIC_TASK,
            agents=frozenset({agent}),
            steps=(Step(MIMIC_TASK, Text(text)),),
        )
        for agent, text in MIMIC_PROMPTS.items()
    },
}


COMPACT_TASK = "lab: work until the context is full"
COMPACT_REPLY = "Done after the compaction."


def _compact(agent: Agent, call: Reply, context_tokens: int) -> Scenario:
    """The tool call's reply reports a nearly full context: the client compacts the
    conversation (Claude: a `compact_boundary`; Codex: a `compacted` record) before it sends
    the tool's result on, mid-Turn. Every later request gets the final reply."""
    return Scenario(
        f"{agent}_compact",
        task=COMPACT_TASK,
        agents=frozenset({agent}),
        steps=(
            Step(COMPACT_TASK, call, context_tokens=context_tokens),
            Step("", Text(COMPACT_REPLY), repeat=True),
        ),
    )


UNASKED_CALL: Mapping[Agent, Reply] = {
    "claude": ClaudeTool("Glob", {"pattern": "*.md"}),
    "codex": ExecCommand("echo lab-ran", escalated=False),
}
"""A tool call each client runs without asking: its result goes on to the model mid-Turn.
Claude's Glob answers "no such tool" on 2.1.332: a result all the same."""

SCENARIOS = {
    **SCENARIOS,
    # The lab's Claude model has a window of about a million tokens; Codex's catalog entry
    # has 272,000.
    "claude_compact": _compact("claude", UNASKED_CALL["claude"], 990_000),
    "codex_compact": _compact("codex", UNASKED_CALL["codex"], 260_000),
}

STEER_TASK = "lab: look around, then answer"
STEER_REPLY = "Looked around, and read your note."
"""The reply to the steered scenario's tool result and to anything after it."""


def _steered(agent: Agent) -> Scenario:
    """The first reply, a tool call that needs no approval, waits for `SLOW_SIGNAL`: the Turn
    works meanwhile, and a person may send a message at the pane. Claude queues it and takes
    it in with the tool's result; Codex steers it into the turn (0.169.0 and later cut the
    held reply to send it at once). Every later request gets the final reply."""
    return Scenario(
        f"{agent}_steered",
        task=STEER_TASK,
        agents=frozenset({agent}),
        steps=(
            Step(STEER_TASK, UNASKED_CALL[agent], wait_for=SLOW_SIGNAL),
            Step("", Text(STEER_REPLY), repeat=True),
        ),
    )


SCENARIOS = {**SCENARIOS, "claude_steered": _steered("claude"), "codex_steered": _steered("codex")}


BACKGROUND_TASK = "lab: hand this to a background agent"
BACKGROUND_WORK = "lab: the background agent's work"
BACKGROUND_SIGNAL = "background"
"""Releases the background agent's reply: until then it runs, listed under the composer."""
BACKGROUND_NEXT = "lab: a task beside the background agent"
"""Held until `SLOW_SIGNAL`: the agent finishes while it runs, and Claude notes that."""
BACKGROUND_NEXT_REPLY = "Working beside it... done."

SCENARIOS = {
    **SCENARIOS,
    # Every pinned Claude runs an `Agent` call in the background and ends the turn; it lists
    # the agent under the composer, and writes a `<task-notification>` when the agent ends.
    "claude_background_agent": Scenario(
        "claude_background_agent",
        task=BACKGROUND_TASK,
        agents=frozenset({"claude"}),
        steps=(
            Step(
                BACKGROUND_TASK,
                ClaudeTool(
                    "Agent",
                    {
                        "description": "lab errand",
                        "prompt": BACKGROUND_WORK,
                        "subagent_type": "general-purpose",
                    },
                ),
            ),
            Step(BACKGROUND_WORK, Text("The errand is done."), wait_for=BACKGROUND_SIGNAL),
            Step(BACKGROUND_NEXT, SlowText(BACKGROUND_NEXT_REPLY, hold=SLOW_SIGNAL)),
        ),
    ),
}


# ---------------------------------------------------------------- wrapped secrets (issue 26)

_FAKE_BODY = "Xq7Lm2Pz9Rt4Vb8Nc1Zd6Fh3Jk5Wy0Qa2Ub7Ie4Os9Gx1Tv6" * 3
TASK_SECRET_BODY = _FAKE_BODY[:77]
TASK_SECRET = f"sk-ant-api03-{TASK_SECRET_BODY}"
"""A fake Anthropic key of 90 characters, typed in a task: the composer and the history wrap it."""

COMMAND_SECRET_BODY = _FAKE_BODY[::-1][:82]
COMMAND_SECRET = f"github_pat_{COMMAND_SECRET_BODY}"
"""A fake GitHub token of 93 characters in the command the model asks to run."""

SECRET_TASK = f"lab: keep {TASK_SECRET} safe"
SECRET_MARKER = "lab-secret-ran"
SECRET_SIGNAL = "ask"
"""The model holds its reply until this signal, so the pane shows the task while it works."""
SECRET_COMMAND = f"touch {SECRET_MARKER}.txt && echo {COMMAND_SECRET} {SECRET_MARKER}"
"""It writes a file, so each client asks before running it (and nothing else: no advisory)."""


def _secret_scenarios() -> dict[str, Scenario]:
    scenarios = [
        _command(
            "claude_bash_secret",
            Bash(SECRET_COMMAND, "Use the token"),
            marker=SECRET_MARKER,
            task=SECRET_TASK,
            wait_for=SECRET_SIGNAL,
        ),
        _command(
            "codex_exec_secret",
            ExecCommand(SECRET_COMMAND),
            marker=SECRET_MARKER,
            task=SECRET_TASK,
            wait_for=SECRET_SIGNAL,
        ),
    ]
    return {scenario.name: scenario for scenario in scenarios}


SCENARIOS = {**SCENARIOS, **_secret_scenarios()}

SECRET_ASK_TASK = "lab: ask me for a key"
SECRET_QUESTION = Question(
    question="Enter your API key:",
    header="Key",
    options=(Option("Use the saved one", "from the keychain"), Option("Skip", "go on without")),
)
"""A question whose own words ask for a secret: its answer is a person's to type."""
SECRET_QUESTION_DONE = "I will go on with the saved key."
FLAGGED_SECRET = Question(
    question="Which release should the migration run against?",
    header="Release",
    options=(Option("The current one", "as deployed now"), Option("The next one", "staged")),
    secret=True,
)
"""A question in plain words that its call marks secret (Codex's ``isSecret``)."""

_SECRET_SCENARIOS = (
    _claude_questionnaire(
        "questionnaire_secret", SECRET_QUESTION, task=SECRET_ASK_TASK, reply=SECRET_QUESTION_DONE
    ),
    # Answered by the controller first, then the key, then the review listing both.
    _claude_questionnaire(
        "questionnaire_secret_second",
        _color_question(3),
        SECRET_QUESTION,
        task=SECRET_ASK_TASK,
        reply=SECRET_QUESTION_DONE,
    ),
    _codex_questionnaire(
        "codex_rui_secret", SECRET_QUESTION, task=SECRET_ASK_TASK, reply=SECRET_QUESTION_DONE
    ),
    _codex_questionnaire(
        "codex_rui_flagged_secret", FLAGGED_SECRET, task=SECRET_ASK_TASK, reply=SECRET_QUESTION_DONE
    ),
    Scenario(
        "codex_rui_async_secret",
        task=SECRET_ASK_TASK,
        agents=frozenset({"codex"}),
        steps=(
            Step(SECRET_ASK_TASK, RequestUserInputAsync((SECRET_QUESTION,))),
            Step(ACCEPTED_CODEX_ASYNC, Text("I asked for the key; I will wait for it.")),
        ),
    ),
)
SCENARIOS = {**SCENARIOS, **{scenario.name: scenario for scenario in _SECRET_SCENARIOS}}


# ---------------------------------------------------------------- a megabyte command (issue 23)

HUGE_TASK = "lab: run the huge command"
HUGE_MARKER = "lab-huge-ran"
HUGE_BLOB_BYTES = 900_000
"""Random bytes in the command's here-document: 1.2 MB of base64 in 76-column lines."""


@functools.cache
def huge_command() -> str:
    """A command of 1.2 MB: a key, a here-document of base64 lines, then the marker.

    Its projection used to outgrow a 1 MiB frame, and redacting it whole took seconds.
    """
    blob = base64.encodebytes(random.Random(23).randbytes(HUGE_BLOB_BYTES)).decode()
    return (f"export GITHUB_TOKEN={COMMAND_SECRET}\ncat > /dev/null <<'AKK'\n{blob}AKK\n"
            f"touch ../{HUGE_MARKER}.txt && echo {HUGE_MARKER}")  # fmt: skip


COSTLY_TASK = "lab: run the costly command"
COSTLY_MARKER = "lab-costly-ran"


@functools.cache
def costly_command() -> str:
    """A command of one 2.4 MB line: more than the redaction may read, so it shows nothing."""
    words = "lab " * 600_000
    return f"echo {words}> /dev/null && touch ../{COSTLY_MARKER}.txt && echo {COSTLY_MARKER}"


HUGE_FINAL_TASK = "lab: answer with the huge message"
HUGE_FINAL_ROWS = 40
"""Rows of 64 KiB of base64 in the final message: 2.6 MB that chains join 16 rows at a time."""


@functools.cache
def huge_final() -> str:
    """A final message whose head's redaction read 23 s of the server's thread."""
    rows = (random.Random(n).randbytes(49_152) for n in range(HUGE_FINAL_ROWS))
    return "\n".join(base64.b64encode(row).decode() for row in rows)


def _huge_scenarios() -> dict[str, Scenario]:
    scenarios = [
        Scenario("huge_final", task=HUGE_FINAL_TASK,
                 steps=(Step(HUGE_FINAL_TASK, Text(huge_final())),)),
        _command("claude_bash_costly", Bash(costly_command(), "Run the costly command"),
                 marker=COSTLY_MARKER, task=COSTLY_TASK),
        _command("codex_exec_costly", ExecCommand(costly_command()), marker=COSTLY_MARKER,
                 task=COSTLY_TASK),
        _command("claude_bash_huge", Bash(huge_command(), "Run the huge command"),
                 marker=HUGE_MARKER, task=HUGE_TASK),
        _command("codex_exec_huge", ExecCommand(huge_command()), marker=HUGE_MARKER,
                 task=HUGE_TASK),
    ]  # fmt: skip
    return {scenario.name: scenario for scenario in scenarios}


SCENARIOS = {**SCENARIOS, **_huge_scenarios()}


# ---------------------------------------------------------------- an MCP host drives AKK (issue 22)


@attrs.frozen
class ComputedStep(Step):
    """A step whose Claude tool call takes its input from the conversation so far.

    `reply` names the tool (a `ClaudeTool`, its own input unused); `compute` gets
    the request's `messages` and returns the input, e.g. an id read from an
    earlier tool result (`tool_results`). The model server replies (and records)
    the `ClaudeTool` that `resolve` returns. A conversation that lacks what
    `compute` looks for gets a `Text` saying so, which ends the turn.
    """

    compute: Callable[[Sequence[object]], Mapping[str, object]] = attrs.field(kw_only=True)

    def resolve(self, messages: Sequence[object]) -> Reply:
        """The tool call with its computed input, or the Text naming why there is none."""
        assert isinstance(self.reply, ClaudeTool)
        try:
            return ClaudeTool(self.reply.name, self.compute(messages))
        except (LookupError, TypeError, ValueError) as exc:
            return Text(f"lab: no input for {self.reply.name}: {exc!r}")


def tool_results(messages: Sequence[object]) -> list[Any]:
    """Every tool_result of the user messages, oldest first, as JSON where its text is JSON.

    A result's content is a string or text blocks (joined). Its JSON is the whole
    text or, after a summary line (as `akk mcp` writes), its last line; text
    with neither stays a string.
    """
    found: list[Any] = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str) or not isinstance(content, Sequence):
            continue
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                found.append(_json_or_text(block.get("content")))
    return found


def _json_or_text(content: object) -> Any:
    if isinstance(content, Sequence) and not isinstance(content, str):
        content = "".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        )
    text = str(content or "")
    # The whole text, else its last line: a host may put a summary line before the JSON.
    for candidate in (text, text.rsplit("\n", 1)[-1]):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return text


def newest_with(messages: Sequence[object], key: str) -> Mapping[str, Any]:
    """The newest tool result that is an object with `key` (a non-null value); KeyError if none."""
    for result in reversed(tool_results(messages)):
        if isinstance(result, Mapping) and result.get(key) is not None:
            return result
    raise KeyError(f"no tool result carries {key!r}")


def events_in(value: object) -> Iterator[Mapping[str, Any]]:
    """Every object with an `event_id` and a `kind` inside `value`, in document order."""
    if isinstance(value, Mapping):
        if "event_id" in value and "kind" in value:
            yield value
            return
        value = list(value.values())
    if isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            yield from events_in(item)


MCP_SERVER = "akk"
"""The name the MCP host knows `akk mcp` by: Claude Code calls its tools `mcp__akk__<tool>`."""
MCP_TOOL_PREFIX = f"mcp__{MCP_SERVER}__agent_knock_knock_"
MCP_HOST_TASK = "mcp: have the Codex pane write a greeting"
"""What the Claude session (the MCP host) is asked; the scripted model then drives AKK's tools."""
MCP_CODEX_TASK = "mcp host: greet the team"
"""What the host sends the Codex pane through `agent_knock_knock_send`."""
MCP_REQUEST_ID = "mcp-host-1"
MCP_CHOICE = "French"
"""The label the host's model picks; it answers with the option id that carries it."""
MCP_CODEX_DONE = "Bonjour, the team is greeted."
MCP_HOST_DONE = "The Codex agent answered in French and is done."
MCP_WAIT_SECONDS = 60
MCP_HOST_METHODS = (
    "list", "send", "wait_events", "ack", "status", "respond_interaction", "wait_events", "ack",
)  # fmt: skip
"""The AKK methods the host's scripted model calls, in order (after one ToolSearch)."""
MCP_TOOL_SEARCH = "select:" + ",".join(
    MCP_TOOL_PREFIX + method for method in dict.fromkeys(MCP_HOST_METHODS)
)
"""The ToolSearch query that loads the schemas of the tools the host calls."""


def _mcp_tool(method: str) -> ClaudeTool:
    return ClaudeTool(MCP_TOOL_PREFIX + method, {})


def _send_to_codex(messages: Sequence[object]) -> Mapping[str, object]:
    terminals = newest_with(messages, "terminals")["terminals"]
    codex = next(row for row in terminals if row["agent"] == "codex")
    return {
        "terminal_id": codex["terminal_id"],
        "request": MCP_CODEX_TASK,
        "client_request_id": MCP_REQUEST_ID,
    }


def _sent_turn(messages: Sequence[object]) -> Mapping[str, object]:
    return {"turn_id": newest_with(messages, "session_decision")["turn_id"]}


def _answer_by_label(messages: Sequence[object]) -> Mapping[str, object]:
    """respond_interaction with the ids `status` showed for the label MCP_CHOICE."""
    shown = newest_with(messages, "interaction")["interaction"]
    answers = []
    for question in shown["questions"]:
        chosen = [o["option_id"] for o in question["options"] if o["label"] == MCP_CHOICE]
        if not chosen:
            raise LookupError(f"no option {MCP_CHOICE!r} in {question['question_id']}")
        answers.append(
            {
                "question_id": question["question_id"],
                "response_kind": question["response_kind"],
                "selected_option_ids": chosen,
            }
        )
    return {
        "interaction_id": shown["interaction_id"],
        "turn_id": shown["turn_id"],
        "answers": answers,
    }


def _ack_newest(kind: str) -> Callable[[Sequence[object]], Mapping[str, object]]:
    def ack(messages: Sequence[object]) -> Mapping[str, object]:
        for result in reversed(tool_results(messages)):
            for event in events_in(result):
                if event["kind"] == kind:
                    return {"event_id": event["event_id"]}
        raise LookupError(f"no {kind} event in any tool result")

    return ack


def _wait_events(_: Sequence[object]) -> Mapping[str, object]:
    return {"timeout_seconds": MCP_WAIT_SECONDS}


def _mcp_scenarios() -> dict[str, Scenario]:
    def step(
        when: str, method: str, compute: Callable[[Sequence[object]], Mapping[str, object]]
    ) -> Step:
        return ComputedStep(when, _mcp_tool(method), compute=compute)

    host = Scenario(
        # The host's model: each step's `when` is a key of the previous tool's result.
        "mcp_host_claude",
        task=MCP_HOST_TASK,
        agents=frozenset({"claude"}),
        steps=(
            # Claude Code 2.1.332 defers MCP tools: it names them, and ToolSearch loads their
            # schemas. Its result is tool references and no text, so the next `when` is "".
            Step(MCP_HOST_TASK, ClaudeTool("ToolSearch", {"query": MCP_TOOL_SEARCH})),
            step("", "list", lambda _: {}),
            step('"terminals"', "send", _send_to_codex),
            step('"session_decision"', "wait_events", _wait_events),
            step('"interaction_required"', "ack", _ack_newest("interaction_required")),
            step('"accepted"', "status", _sent_turn),
            step('"questions"', "respond_interaction", _answer_by_label),
            step('"dispatched"', "wait_events", _wait_events),
            step('"done"', "ack", _ack_newest("done")),
            Step('"accepted"', Text(MCP_HOST_DONE)),
        ),
    )
    codex = Scenario(
        # The Codex pane's model: the language question (Plan mode), then the greeting.
        "mcp_host_codex",
        task=MCP_CODEX_TASK,
        agents=frozenset({"codex"}),
        steps=(
            Step(MCP_CODEX_TASK, RequestUserInput((_LANGUAGE_QUESTION,))),
            Step(ANSWERED_CODEX, Text(MCP_CODEX_DONE)),
        ),
    )
    return {scenario.name: scenario for scenario in (host, codex)}


SCENARIOS = {**SCENARIOS, **_mcp_scenarios()}


# ---------------------------------------------------------------- one pane, many cases (issue 23)


def repeating(scenario: Scenario) -> Scenario:
    """The scenario with every step firing on each match, so one pane serves many rounds."""
    steps = tuple(attrs.evolve(step, repeat=True) for step in scenario.steps)
    return attrs.evolve(scenario, name=f"{scenario.name}_repeating", steps=steps)


REPEATING = (
    "claude_bash_description_long",
    "codex_exec_reason_long",
    "codex_exec_reason_cjk",
    "codex_rui_one",
    "questionnaire_single3",
    "questionnaire_multi",
)
"""The scenarios a lab test may run case after case in one pane, as ``<name>_repeating``.

Each ends its turn at an idle composer, so the next task starts from where a person
would start it. The qualification plays none of these variants."""

SCENARIOS = {
    **SCENARIOS,
    **{f"{name}_repeating": repeating(SCENARIOS[name]) for name in REPEATING},
}
