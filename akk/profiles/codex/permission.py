"""Codex's approvals: ``Would you like to run the following command?`` (exec) and ``Would
you like to make the following edits?`` (a patch), and their options.

What the pinned versions draw, bottom-up: the footer ``Press enter to confirm
or esc to cancel``, numbered rows each ending in its key shortcut (``(y)``), a
blank row (two from 0.169.0), then paragraphs separated by blank rows under the bold
anchor: an exec's ``$ `` and the command, ``Reason: ``, ``Environment: ``; a patch's
``Description: `` and, a row each under it, ``Destination: `` and each file it writes
(a move's file and where it goes, both), sorted by path, in full. The patch itself shows above the
prompt, in the transcript, and is offered from the rollout's call. A long paragraph
wraps at spaces onto rows indented by two, as its first row is (the command's
syntax-highlighted): a model's reason often does, at any width. A proven approval whose
cursor sits on a persistent-approval row is BLOCKED, with its prompt for display.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from wcwidth import wcswidth

from akk.profiles.codex.menu import SHORTCUT, menu
from akk.profiles.codex.reader import Footer, Reader
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    OptionRole,
    OptionView,
    PromptView,
    QuestionView,
    ResponseKind,
    State,
    StepKind,
    Unproven,
)
from akk.screen.region import Region

if TYPE_CHECKING:
    from akk.profiles.codex.profile import CodexProfile

_NAMED_PREFIX = re.compile(r"`(.+)`", re.DOTALL)
# What Codex draws in place of a command too long for the pane: the rows it left
# out, and the key that shows them ("ctrl + a" up to 0.155.1, "^a" from 0.169.0).
_CUT_COMMAND = re.compile(r" *\[… (?P<lines>\d+) lines\] (?:ctrl \+ a|\^a) view all *")


def read(r: Reader, footer: Footer, footer_top: int, last: int) -> Observation:
    """The approval whose footer spans rows footer_top..last."""
    p = r.p
    _refuse_cut_command(r, footer_top)
    r.blank(footer_top - 1, "above the approval footer")
    menu_top = r.run_above(footer_top - 2, "approval options")
    rows = menu(r, menu_top, footer_top - 1, p.permission_menu)
    command: str | None = None
    y = menu_top - 1
    for _ in range(p.permission_menu_gap):
        r.blank(y, "above the approval options")
        y -= 1
    destinations: list[str] = []
    seen: set[str] = set()
    paragraphs = (*p.permission_paragraphs, *p.patch_paragraphs)
    while True:
        top = r.run_above(y, "the approval anchor")
        first = r.lines[top]
        if top == y and first[2:] in p.approval_anchors and r.indented(top, 2):
            if not r.grid.cell(2, top).bold:
                raise Unproven("approval anchor is not drawn bold")
            anchor = first[2:]
            break
        # A patch's files are drawn a row each right under its description, no blank between.
        while top < y and r.lines[y][2:].startswith(p.destination_prefix):
            destinations.insert(0, _destination(r, y))
            seen.add(p.destination_prefix)
            y -= 1
        prefix = next((pre for pre in paragraphs if _opens(first, pre, p)), None)
        if prefix in seen:
            raise Unproven(f"approval paragraph {prefix!r} shown twice")
        if not r.indented(top, 2) or prefix is None:
            raise Unproven(f"unexpected row {top} inside the approval prompt")
        if prefix == p.command_prefix:
            command = _command(r, top, y)
        elif top == y and first[2:] == prefix.rstrip():
            raise Unproven(f"approval paragraph {prefix!r} shows no text")
        else:
            _prove_wrapped(r, top, y)
        seen.add(prefix)
        r.blank(top - 1, "between approval paragraphs")
        y = top - 2
    patch = anchor == p.patch_anchor
    # Every pinned version draws a patch's description and destination, both.
    if patch and seen != {*p.patch_paragraphs, p.destination_prefix}:
        raise Unproven(f"patch approval shows {sorted(seen)}, not its description and file")
    if not patch and not seen <= set(p.permission_paragraphs):
        raise Unproven(f"approval paragraphs {sorted(seen)} under {anchor!r}")
    if not patch and command is None:
        raise Unproven("approval prompt shows no command")
    options = []
    for row in rows:
        label = SHORTCUT.sub("", row.label)
        role = next((role for pre, role in p.permission_roles if label.startswith(pre)), None)
        if role is None:
            raise Unproven(f"approval option {row.number} has no known meaning")
        options.append(OptionView(label, role, row.number, current=row.current))
    roles = [option.role for option in options]
    if roles.count(OptionRole.APPROVE_ONCE) != 1 or roles.count(OptionRole.REJECT) != 1:
        raise Unproven("approval prompt lacks exactly one approve-once and one reject row")
    if patch:
        question = QuestionView(
            anchor,
            ResponseKind.CONFIRM,
            tuple(options),
            detail="\n".join(destinations),
            patched=tuple(destinations),
            tool=p.patch_tool,
        )
    else:
        assert command is not None
        _check_named_prefix(command, options)
        question = QuestionView(
            anchor,
            ResponseKind.CONFIRM,
            tuple(options),
            detail=command,
            command=command,
            tool=p.permission_tool,
        )
    prompt = PromptView(
        InteractionKind.PERMISSION,
        StepKind.PERMISSION,
        (question,),
        Region(top=top, bottom=last + 1, left=0, right=r.grid.cols),
    )
    current = next(option for option in options if option.current)
    if current.role is OptionRole.APPROVE_PERSISTENT:
        return Observation(
            State.BLOCKED,
            p.id,
            prompt,
            reason="the cursor is on a persistent-approval row; only a person may press Enter",
        )
    return Observation(State.PERMISSION, p.id, prompt)


def _opens(line: str, prefix: str, p: CodexProfile) -> bool:
    """Whether row text `line` opens the paragraph `prefix` names. Its text may start on the
    next row, a word of CJK text wider than what is left beside the name (`_prove_wrapped`
    proves it); a command never does."""
    named = line[2:]
    return named.startswith(prefix) or (prefix != p.command_prefix and named == prefix.rstrip())


def _refuse_cut_command(r: Reader, footer_top: int) -> None:
    """Raise Unproven, naming the cut, when Codex drew the command cut short: a person
    reads it whole in the pane (the prompt's rows between its anchor and its footer)."""
    for y in range(footer_top - 1, -1, -1):
        if r.lines[y] in (f"  {anchor}" for anchor in r.p.approval_anchors):
            return
        if (cut := _CUT_COMMAND.fullmatch(r.lines[y])) is not None:
            raise Unproven(
                f"Codex cut off the command ({cut['lines']} lines not shown, row {y}); "
                "ctrl + a in the pane shows it whole, to decide there"
            )


def _command(r: Reader, top: int, bottom: int) -> str:
    """The command in rows top..bottom (``$ `` and indent dropped), unwrapped.

    A long command wraps at spaces onto rows indented by two, every character
    in the syntax highlighter's colours (never the default colour, unlike any
    other row of the prompt). A row that may end inside a word (ending in
    ``-``, or one word filling the row) cannot be unwrapped exactly.
    """
    p, grid = r.p, r.grid
    parts = [r.lines[top][2 + len(p.command_prefix) :]]
    for y in range(top + 1, bottom + 1):
        drawn = [cell for cell in grid.row(y)[2:] if cell.char.strip()]
        if not r.indented(y, 2) or any(cell.fg == "default" for cell in drawn):
            raise Unproven(f"unexpected row {y} inside the approval command")
        parts.append(r.lines[y][2:])
    for y, part in zip(range(top, bottom), parts, strict=False):
        filled = r.end(y) >= grid.cols - p.command_margin
        if part.endswith("-") or (filled and " " not in part):
            raise Unproven(f"the command's row {y} may end inside a word: cannot unwrap it")
    return " ".join(parts)


def _destination(r: Reader, top: int) -> str:
    """The path a patch approval's row ``top`` names after ``Destination: ``, drawn bold.

    A path longer than the row would wrap, and a row broken inside a path cannot be joined
    back exactly: such a destination is a person's to read.
    """
    start = 2 + len(r.p.destination_prefix)
    path = r.lines[top][start:]
    if not path.startswith("/"):
        raise Unproven(f"the patch's destination at row {top} is no absolute path")
    if r.end(top) >= r.grid.cols - r.p.command_margin:
        raise Unproven(f"the patch's destination at row {top} may go on past the row")
    line = r.lines[top]
    if not all(r.grid.cell(r.column(top, i), top).bold for i in range(start, len(line))):
        raise Unproven(f"the patch's destination at row {top} is not drawn bold")
    return path


def _prove_wrapped(r: Reader, top: int, bottom: int) -> None:
    """Rows top+1..bottom continue row top's paragraph (the model's reason) as Codex wraps it.

    Codex breaks a paragraph at a space, onto a row indented by two, when the next
    word would reach past the command margin (a word of CJK text wider than the row
    starts a row of its own, cut at the margin); any other row there was not its wrap.
    """
    limit = r.grid.cols - r.p.command_margin
    for y in range(top + 1, bottom + 1):
        word = r.lines[y][2:].split(" ", 1)[0]
        if not r.indented(y, 2) or r.end(y - 1) + 1 + wcswidth(word) <= limit:
            raise Unproven(f"unexpected row {y} inside the approval paragraph at row {top}")


def _check_named_prefix(command: str, options: Sequence[OptionView]) -> None:
    """The command shown must begin with the prefix the persistent row quotes.

    That row repeats the command (or its execpolicy prefix) in backticks; a
    command shorter than it was cut off (a row missing from the screen), so it
    is refused. Whitespace is ignored: the two wrap differently.
    """
    for option in options:
        named = _NAMED_PREFIX.search(option.label)
        if option.role is not OptionRole.APPROVE_PERSISTENT or named is None:
            continue
        if not _squeezed(command).startswith(_squeezed(named[1])):
            raise Unproven("the command shown is shorter than the one its approval names: cut off")


def _squeezed(text: str) -> str:
    return "".join(text.split())
