"""The capture plans both clients run, and the pieces the family plans are built from.

The idle, finished, draft, working, typed-draft, permission and blocked screens
are one plan each for Claude Code and Codex; `plans.claude` and `plans.codex`
add what only one client draws. Every label here is written from the scenario
(`akk.qualify.scenarios`), never read off a screen.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from akk.evidence.model import file_patch
from akk.profiles.composer import TypingMethod
from akk.qualify.client import Agent
from akk.qualify.plans.labels import Expected, ExpectedQuestion, Typed
from akk.qualify.plans.plan import (
    Action,
    Paste,
    Plan,
    Press,
    Release,
    Settle,
    Shot,
    Submit,
    Type,
    WaitIdle,
    WaitText,
)
from akk.qualify.run_files import Preseed
from akk.qualify.scenarios import (
    ECHO_REPLY,
    SCENARIOS,
    SLOW_SIGNAL,
    ApplyPatch,
    ClaudeTool,
    Question,
)

BOTH: frozenset[Agent] = frozenset({"claude", "codex"})
CLAUDE: frozenset[Agent] = frozenset({"claude"})
CODEX: frozenset[Agent] = frozenset({"codex"})

DRAFT_TEXT = "lab: a draft that is never sent"
APPROVE = ("approve_once", "reject")
"""The decisions AKK offers on a permission it may answer."""


def wait(*texts: str) -> WaitText:
    """Wait until any of `texts` shows, with the default timeout."""
    return WaitText(texts)


WORKING_SHOWN = wait("esc to interrupt", "• Working")
"""Claude's status line, or Codex 0.169.0's first streamed word: a turn is running."""


ECHO_DONE: tuple[Action, ...] = (Submit(), wait(ECHO_REPLY), WaitIdle())
"""The echo task sent and answered, the composer idle again."""


def passing_mode(
    enter: Action, shown: str, step: str, leave: tuple[str, ...]
) -> tuple[Action, ...]:
    """A mode a person puts the pane in with ``enter``, which shows ``shown``: captured as
    `unknown` (no composer AKK may type a task into), then left with the ``leave`` keys, back
    at the idle composer."""
    return (enter, wait(shown), Shot(step, Expected("unknown")), Press(leave), WaitIdle())


SHELL_MODE = Type("!")
"""A leading '!' turns the empty composer into a shell prompt (both agents): text typed there
would run as a command. Backspace leaves it."""
MODEL_PICKER = Submit("/model")
"""/model opens a numbered list of models (both agents), where Enter changes the person's
model: numbered like a question, but no tool call asked it. Escape leaves it."""
MENTION = "look at @"
"""A draft that opens the mention popup (files, and Claude's agents or Codex's skills)."""
HISTORY_SEARCH = Press(("C-r",))
"""Ctrl-R searches the prompt history (both agents), where Enter would put an old prompt
back. Escape leaves it."""


def person_while_working(agent: Agent, search: Expected, popups: tuple[Action, ...] = ()) -> Plan:
    """What a person does at the composer while a Turn works, each captured with the turn
    still running: the shell mode, a draft of their own, the lists a draft opens (`popups`)
    and the history search (labelled `search`). The agent goes on behind each, and its
    prompts come on top (`tests/lab`)."""
    return Plan(
        f"{agent}_person_while_working",
        "slow",
        frozenset({agent}),
        while_working(
            SHELL_MODE,
            wait("Shell mode", "for shell mode"),
            Shot("shell_mode", Expected("working"), settle=False),
            Press(("BSpace",)),
            Type(DRAFT_TEXT),
            wait(DRAFT_TEXT),
            Shot("draft", Expected("working", draft=DRAFT_TEXT), settle=False),
            Press(("C-u",)),
            *popups,
            HISTORY_SEARCH,
            wait("reverse-i-search", "Filter history"),
            Shot("history_search", search, settle=False),
            Press(("Escape",)),
        ),
    )


def while_working(*actions: Action) -> tuple[Action, ...]:
    """`actions` taken while the `slow` scenario's turn works; then the turn goes on to its
    end, at an idle composer."""
    return (Submit(), WORKING_SHOWN, *actions, Release(SLOW_SIGNAL), WaitIdle())


def asking(
    question: ExpectedQuestion, step: tuple[int, int] | None = None, typed: Typed | None = None
) -> Expected:
    """The label of a questionnaire showing `question` (at `step` of a multi-step prompt)."""
    return Expected("questionnaire", "questionnaire", (question,), step=step, typed=typed)


def questions(scenario: str) -> tuple[Question, ...]:
    """The questions `scenario` opens with (AssertionError if it opens with none)."""
    first = SCENARIOS[scenario].steps[0].reply
    asked = getattr(first, "questions", None)
    assert asked is not None, f"scenario {scenario} does not open with a question"
    return tuple(asked)


def command(scenario: str) -> str:
    """The command `scenario` opens with, or the path of the file it writes or edits (a
    patch's: its name, which ends the absolute path Codex draws), AssertionError if it has
    neither."""
    reply = SCENARIOS[scenario].steps[0].reply
    found = getattr(reply, "command", None) or getattr(reply, "cmd", None)
    if isinstance(reply, ApplyPatch):
        given = file_patch(reply.patch, None)
        found = None if given is None else posixpath.basename(given.paths[0])
    for step in SCENARIOS[scenario].steps:
        if isinstance(step.reply, ClaudeTool) and step.reply.name in ("Write", "Edit"):
            found = step.reply.input["file_path"]
    assert isinstance(found, str), f"scenario {scenario} does not open with a command"
    return found


_PASTE_WORDS = "lab paste 0123456789 alpha beta gamma delta, epsilon zeta: eta theta-iota kappa."


def filler(length: int, *, lines: int = 1, words: str = _PASTE_WORDS) -> str:
    """Exactly `length` characters of `words` repeated, in `lines` lines (no edge spaces)."""
    body = (words + " ") * (length // len(words) + 2)
    per_line = (length - (lines - 1)) // lines
    cut = [body[i * per_line : (i + 1) * per_line] for i in range(lines)]
    cut[-1] = body[(lines - 1) * per_line : length - (lines - 1)]
    text = "\n".join(line.replace(" ", "x", 1) if line.startswith(" ") else line for line in cut)
    text = "\n".join(line[:-1] + "x" if line.endswith(" ") else line for line in text.split("\n"))
    assert len(text) == length and text == text.strip(), (length, lines)
    return text


TYPED_DRAFTS: Mapping[str, Typed] = {
    "wrap": Typed(
        "lab: this long draft wraps over several rows of the composer, word by word, and "
        "must come back exactly as typed. " + " ".join(["alpha beta gamma delta epsilon"] * 8),
        TypingMethod.LITERAL,
    ),
    "multiline": Typed(
        "lab: the first line of a pasted draft\nthe second line, a little longer than the "
        "first\nthe third and last line",
        TypingMethod.PASTE,
    ),
    "quotes": Typed("lab: he said \"don't\" and 'left' `now`", TypingMethod.LITERAL),
    "semicolon": Typed("lab: echo one; echo two;", TypingMethod.LITERAL),
    "unicode": Typed("lab: 漢字テスト and emoji 😀 🎉 ünïcödé done", TypingMethod.LITERAL),
    "shell": Typed(
        "lab: $(rm -rf /x) && echo $HOME | grep -v '*' > /dev/null & [x] {y} %v \\ end",
        TypingMethod.LITERAL,
    ),
    "paste799": Typed(filler(799), TypingMethod.PASTE),
    "paste800": Typed(filler(800), TypingMethod.PASTE),
    "paste801": Typed(filler(801), TypingMethod.PASTE),
    "paste1001": Typed(filler(1001), TypingMethod.PASTE),
    "paste5000": Typed(filler(5000, lines=50), TypingMethod.PASTE),
}
"""The text classes the typing plans put into an idle composer, one plan each.

Pastes of 799 to 801 characters straddle Claude's threshold, 1001 is past
Codex's (1000 itself would need 14 rows at 80x24, where Codex drops its status
row); the 5000-character one is 50 lines, so Claude's placeholder counts them.
"""


def turn_plans() -> list[Plan]:
    """Idle and finished (echo), a draft, a running turn (slow), and each typed draft."""
    return [
        Plan(
            "echo",
            "echo",
            BOTH,
            (
                Shot("idle", Expected("idle")),
                Submit(),
                wait(ECHO_REPLY),
                WaitIdle(),
                Shot("finished", Expected("idle", reply=ECHO_REPLY)),
            ),
        ),
        Plan(
            "draft",
            "echo",
            BOTH,
            (
                Type(DRAFT_TEXT),
                wait(DRAFT_TEXT),
                Shot("idle_draft", Expected("idle_draft", draft=DRAFT_TEXT)),
            ),
        ),
        Plan(
            "slow",
            "slow",
            BOTH,
            while_working(Shot("working", Expected("working"), settle=False)),
        ),
        *(_typed(name, typed) for name, typed in TYPED_DRAFTS.items()),
    ]


def _typed(name: str, typed: Typed) -> Plan:
    put: Action = Type(typed.text) if typed.method is TypingMethod.LITERAL else Paste(typed.text)
    return Plan(
        f"draft_{name}",
        "echo",
        BOTH,
        (
            # Claude drops text that arrives right after its composer first shows.
            Settle(0.5),
            put,
            wait(typed.text[:12], "[Pasted"),
            Shot(None, Expected("idle_draft", typed=typed)),
        ),
    )


def permission(scenario: str, agents: frozenset[Agent], tool: str, manual: bool) -> Plan:
    """The permission prompt `scenario` opens with: answerable, or left to a person (`manual`)."""
    anchor = wait("Do you want", "Would you like to run", "Would you like to make")
    expected = Expected(
        "permission",
        "permission",
        decisions=() if manual else APPROVE,
        tool=tool,
        command=None if manual else command(scenario),
        manual_only=manual,
    )
    return Plan(scenario, scenario, agents, (Submit(), anchor, Shot("permission", expected)))


def blocked_plans() -> list[Plan]:
    """The screens a client shows before its composer: onboarding, the API key, trust."""
    return [
        _blocked(
            "onboarding", CLAUDE, Preseed(onboarded=False), "Choose the text style", "Let's get"
        ),
        _blocked(
            "api_key", CLAUDE, Preseed(api_key_approved=False), "Do you want to use this API key?"
        ),
        _blocked(
            "trust",
            BOTH,
            Preseed(trusted=False),
            "Is this a project you created or one you trust?",
            "trust this folder",
            "Trust this folder",
            "Do you trust",
        ),
    ]


def _blocked(blocker: str, agents: frozenset[Agent], preseed: Preseed, *anchor: str) -> Plan:
    return Plan(
        f"blocked_{blocker}",
        "echo",
        agents,
        # A first-run screen may carry welcome art that never stops moving.
        (WaitText(anchor), Shot(None, Expected("blocked", blocker=blocker), animated=True)),
        preseed=preseed,
    )
