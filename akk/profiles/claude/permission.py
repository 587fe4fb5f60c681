"""Claude Code's tool permission prompt: AKK answers Bash's, a Write's and an Edit's.

What the pinned versions draw, bottom-up: the footer ``Esc to cancel · Tab to
amend``, numbered rows with the cursor at column 1, ``Do you want to …?``, the
tool's body, a title row (``Bash command``, ``Create file``, ``Edit file``,
``Overwrite file``) under a full-width rule in the menu highlight colour. A
file's body is its path, then its lines, numbered, between two ``╌`` rules
(every pinned version): a new file's every line; an edit's change with context,
each line after its sign; a file written over, its changes so, those far apart
under a ``...`` row each. A line longer than the row breaks onto rows under its
number. A new file or one written over taller than the pane scrolls its title
and first lines off the top: its question names it, and 2.1.328 and later say
under the options how many rows are hidden. A Bash
permission may draw a long command under a dim ``│`` gutter (its rows wrapped at
spaces), add rows that say what Claude cannot check
about it (2.1.328: under the fence; 2.1.263-2.1.267: the parser's ``Contains
simple_expansion`` between blank rows), carry the auto-mode tip and ``Yes, and
switch to auto mode`` row (a model with auto mode; docs/permissions.md), and
offer a directory-scoped grant (``Yes, allow reading from /tmp from this
project``) as its persistent row (tools/lab/NOTES.md, "Claude in real users'
setups"). Any other permission (a fetch, another tool), or the cursor on a
persistent-approval row, is BLOCKED with its prompt for display.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from akk.profiles.claude.menu import (
    MenuShape,
    menu_rows,
    option_view,
    prove_cursor,
    prove_numbers,
    prove_wraps,
)
from akk.profiles.claude.reader import Reader
from akk.profiles.observation import (
    FileView,
    InteractionKind,
    Observation,
    OptionRole,
    PromptView,
    QuestionView,
    ResponseKind,
    State,
    StepKind,
    Unproven,
)
from akk.screen.region import Region, is_box_drawing


@attrs.frozen
class FileShape:
    """How one kind of file permission draws the file: a new one, an edit, one written over."""

    title: str
    tool: str  # the tool call it asks about, in the transcript
    number_pad: int  # its numbers are right-aligned this far past the widest
    signed: bool = False  # each line carries its sign after its number (context, -, +)
    verb: str | None = None
    """Its question, ``Do you want to <verb> <path>?``, names the file: such a prompt taller
    than the pane is read from its question and its last lines (None: it is not)."""
    hunks: bool = False
    """Changes far apart are drawn apart, a ``...`` row between them, each numbered in a
    column of its own; a line's number is its number in the new file (a removed line's,
    in the old one)."""


NEW_FILE = FileShape("Create file", "Write", 2, verb="create")
EDIT = FileShape("Edit file", "Edit", 1, signed=True)
OVERWRITE = FileShape("Overwrite file", "Write", 2, signed=True, verb="overwrite", hunks=True)


@attrs.frozen
class PermissionShape:
    """A tool permission prompt; AKK answers Bash's, and a Write's or an Edit's."""

    menu: MenuShape = attrs.field(default=MenuShape(cursor_col=1, number_col=3))
    rule_fg: str = "afd7ff"
    footer: str = "Esc to cancel · Tab to amend"
    footer_col: int = 1
    title_col: int = 1
    bash_title: str = "Bash command"
    tool: str = "Bash"  # the tool call a Bash prompt asks about, in the transcript
    files: tuple[FileShape, ...] = (NEW_FILE, EDIT, OVERWRITE)
    file_fence: str = "╌"  # the rules above and below a file's lines
    hunk_gap: str = "..."  # the row between two changes far apart (`FileShape.hunks`)
    # The row under the options of a prompt taller than the pane, saying how many rows
    # scrolled off (None: a version that draws none).
    hidden_rows: re.Pattern[str] | None = None
    question_prefix: str = "Do you want to "
    approve_once: str = "Yes"
    persistent_prefix: str = "Yes, and "
    # Other persistent grants, by their whole (unwrapped) label: the directory-scoped
    # family ("Yes, allow reading from /tmp from this project"). Never offered.
    persistent_grants: tuple[re.Pattern[str], ...] = (
        re.compile(r"Yes, allow reading from \S.* from this project"),
    )
    reject: str = "No"
    tip_prefix: str = "Tip: "
    command_indent: int = 3  # the command and its description (a muted row)
    # 2.1.328 draws the command between two full-width rows of this glyph, its
    # description above; earlier versions put the description below the command.
    command_fence: str | None = None
    # A long command (one that may wrap) is drawn under a dim gutter, one row per
    # wrapped row, broken at spaces: its rows join with a space. A long description
    # wraps under the same gutter, its text muted.
    command_gutter: str = "│ "
    # Rows a version adds when it cannot check the command, at `advisory_col` in the
    # default colour; each (wrapped) advisory must match one of these whole. 2.1.328
    # says so under the fence ("Quoted text in this command can't be checked before it
    # runs"); 2.1.263-2.1.267 print the bash parser's reason ("Contains simple_expansion")
    # between blank rows under the command's description.
    advisories: tuple[re.Pattern[str], ...] = ()
    advisory_fg: str = "default"
    advisory_col: int = 1
    # Muted rows under an advisory, each matching one of these whole: the hint under a
    # user's `permissions.ask` rule ("/permissions to update rules").
    advisory_hints: tuple[re.Pattern[str], ...] = ()


def read(r: Reader, footer: int) -> Observation:
    """The permission prompt whose footer is row `footer`; Unproven where a row is not its own."""
    shape = r.p.permission
    menu = shape.menu
    # A prompt taller than the pane: some versions say how many rows it hides.
    hidden = shape.hidden_rows and shape.hidden_rows.fullmatch(r.texts[footer - 1].strip())
    if not hidden:
        r.expect_blank(footer - 1, "above the permission footer")
    y = footer - 2
    while y >= 0 and not r.texts[y].startswith(" " + shape.question_prefix):
        if r.blank(y):
            raise Unproven(f"unexpected blank row {y} among the permission options")
        y -= 1
    if y < 0:
        raise Unproven("permission prompt truncated: no question row")
    question_row = y
    named = _named(r, question_row)
    ruled = any(r.rule(row, r.p.composer.rule) for row in range(question_row))
    tall = named is not None and not ruled
    if tall:
        # Its title and first lines scrolled off the top: its question names the file.
        assert named is not None
        top, title = 0, named[0].title
    else:
        if hidden:
            raise Unproven("rows of a permission that its question does not name are hidden")
        top = r.top_rule(question_row - 1, shape.rule_fg)
        r.single_prompt(top)
        title_cell = r.cells[top + 1][shape.title_col]
        title = r.texts[top + 1].strip()
        if not (title and title_cell.bold and title_cell.fg == shape.rule_fg):
            raise Unproven(f"row {top + 1} is not a permission title")
    kinds = {kind.title: kind for kind in shape.files}
    if title != shape.bash_title and title not in kinds:
        return r.result(
            State.BLOCKED, reason=f"blocked: this permission ({title}) is left to a person"
        )
    # The prompt's box pads its right edge as its left, where the cursor stands.
    rows = menu_rows(
        r,
        question_row + 1,
        footer - 1,
        menu,
        boxes=False,
        description=None,
        margin=menu.cursor_col,
    )
    prove_wraps(r, rows)
    prove_numbers(rows)
    prove_cursor(rows, exempt=None)
    file = None
    if title in kinds:
        kind = kinds[title]
        if named is not None and named[0] is not kind:
            raise Unproven(f"the question of a {title!r} permission is another kind's")
        if tall:  # its lines from the pane's top edge, its path in its question
            assert named is not None
            file = _file(r, top, question_row, kind, path=named[1])
        else:
            file = _file(r, top + 2, question_row, kind)
        signed = zip(file.signs, file.lines, strict=True)
        drawn = [sign + line for sign, line in signed] if kind.signed else list(file.lines)
        command, detail = None, "\n\n".join([file.path, "\n".join(drawn)])
        tool = kind.tool
    else:
        command, advisories = _body(r, top + 2, question_row)
        if not command:
            raise Unproven("Bash permission shows no command")
        # The command, then what the client says it could not check about it.
        detail, tool = "\n\n".join([command, *advisories]), shape.tool
    options = []
    for row in rows:
        if row.label == shape.approve_once:
            role = OptionRole.APPROVE_ONCE
        elif row.label == shape.reject:
            role = OptionRole.REJECT
        elif row.label.startswith(shape.persistent_prefix) or any(
            grant.fullmatch(row.label) for grant in shape.persistent_grants
        ):
            role = OptionRole.APPROVE_PERSISTENT
        else:
            raise Unproven(f"unknown permission option {row.number}")
        options.append(option_view(row, role))
    roles = [option.role for option in options]
    if roles.count(OptionRole.APPROVE_ONCE) != 1 or roles.count(OptionRole.REJECT) != 1:
        raise Unproven("permission menu lacks exactly one approve-once and one reject row")
    question = QuestionView(
        prompt=r.texts[question_row].strip(),
        response_kind=ResponseKind.CONFIRM,
        options=tuple(options),
        header=title,
        detail=detail,
        command=command,
        file=file,
        tool=tool,
    )
    prompt = PromptView(
        kind=InteractionKind.PERMISSION,
        step=StepKind.PERMISSION,
        questions=(question,),
        region=Region(top=top, bottom=footer + 1, left=0, right=r.grid.cols),
    )
    current = next(option for option in options if option.current)
    if current.role is OptionRole.APPROVE_PERSISTENT:
        return r.result(
            State.BLOCKED, prompt, "blocked: the cursor is on a persistent-approval row"
        )
    return r.result(State.PERMISSION, prompt)


def _body(r: Reader, first: int, last: int) -> tuple[str, list[str]]:
    """The command shown between the title and the question (rows first..last-1).

    Also the advisory rows under it, each whole (wrapped rows joined).
    """
    shape = r.p.permission
    fence = shape.command_fence
    command: list[str] = []
    wrapped: list[str] = []  # the rows of a command drawn under the gutter
    advisory: list[tuple[str, bool]] = []  # each row's text, and whether it is a hint
    fences = 0
    in_tip = False
    gap = False  # a blank row after the command (unfenced: only trailing ones are drawn)
    for y in range(first, last):
        text = r.texts[y]
        if r.blank(y):
            if fence is not None and fences == 1 and (command or wrapped):
                raise Unproven(f"blank row {y} inside the command fence: a row is missing")
            gap = gap or bool(command or wrapped)
            in_tip = False
            continue
        start = r.indent(y)
        cell = r.cells[y][start]
        if gap and fence is None:
            # The command's description follows it directly; after a blank row only
            # an advisory may stand (else a row is missing).
            if not (shape.advisories and _advisory_cell(r, y, start)):
                raise Unproven(f"row {y} after a blank row under the command")
            advisory.append((text.strip(), cell.fg == shape.menu.muted_fg))
            continue
        if is_box_drawing(text[0]) and text == text[0] * r.grid.cols:
            if text[0] != fence:
                raise Unproven(f"unexpected rule at row {y} in the permission body")
            fences += 1
            continue
        if text[start:].startswith(shape.tip_prefix) and cell.bold:
            in_tip = True
            continue
        if in_tip and cell.bold:
            continue
        if shape.advisories and (command or wrapped) and fences == 2:
            if not _advisory_cell(r, y, start):
                raise Unproven(f"unexpected row {y} under the command")
            advisory.append((text.strip(), cell.fg == shape.menu.muted_fg))
            continue
        if start != shape.command_indent:
            raise Unproven(f"unexpected row {y} in the permission body")
        guttered = text[start:].startswith(shape.command_gutter) and cell.dim
        after = start + len(shape.command_gutter) if guttered else start
        if r.cells[y][after].fg == shape.menu.muted_fg:
            # The tool's description of the command; a long one wraps under the gutter.
            continue
        if fence is not None and fences != 1:
            raise Unproven(f"unexpected row {y} outside the command fence")
        if guttered:
            if command:
                raise Unproven(f"gutter row {y} after an unguttered command row")
            wrapped.append(text[start + len(shape.command_gutter) :].strip())
            continue
        if wrapped:
            raise Unproven(f"row {y} after a guttered command is not guttered")
        command.append(text.strip())
    if fence is not None and fences != 2:
        raise Unproven("the command fence is not closed")
    if wrapped:
        return " ".join(wrapped), _advisory_rows(r, advisory)
    return "\n".join(command), _advisory_rows(r, advisory)


NUMBERED = re.compile(r" *([1-9][0-9]*)(?= |$)")
"""A file's numbered row: the number, right-aligned in its column, then a space."""

SIGNS = {False: ("",), True: (" ", "-", "+")}
"""The signs a line of a file may carry, by whether its kind signs its lines."""


def _named(r: Reader, question_row: int) -> tuple[FileShape, str] | None:
    """The kind of file permission whose question on `question_row` names its file, and
    the path it names; None for any other question."""
    shape = r.p.permission
    for kind in shape.files:
        if kind.verb is None:
            continue
        asked = re.fullmatch(
            rf" {re.escape(shape.question_prefix)}{kind.verb} (\S.*)\?",
            r.texts[question_row].rstrip(),
        )
        if asked:
            return kind, asked[1]
    return None


def _file(r: Reader, first: int, last: int, kind: FileShape, path: str | None = None) -> FileView:
    """The file drawn on rows first..last-1: its path row, then its numbered lines
    between two rules; Unproven where a row is not its own.

    With `path` (named by its question), the rows from `first` are the tail of its
    lines, the top of the prompt scrolled off the pane: rows carrying on a line whose
    number is above them (or a hunk's gap) are skipped, and the lines count from the
    first number shown.

    A new file's numbers count from 1 with none skipped. A signed kind's lines carry
    their sign after the number (context, removed, added; a removed and an added line
    share a number); a hunked kind's new-file numbers count on within a hunk. Numbers
    are right-aligned in a column `FileShape.number_pad` wider than the largest (of each
    hunk). A row with the number's column blank carries on the line above it (a long
    line, broken where the row ends), a signed one under the same sign.
    """
    shape = r.p.permission
    tail = path is not None
    leading = range(0)  # a tall file's rows above its first number shown
    if path is None:
        if last - first < 4 or r.indent(first) != shape.title_col or r.blank(first):
            raise Unproven("a file's permission shows no path")
        if not r.rule(first + 1, shape.file_fence):
            raise Unproven("a file's lines are not under their rule")
        path, first = r.texts[first].strip(), first + 2
    else:
        # Rows above the first number shown carry on the line it follows: checked below.
        leading = range(
            first, next((y for y in range(first, last) if NUMBERED.match(r.texts[y])), last)
        )
        first = leading.stop
    if not r.rule(last - 1, shape.file_fence):
        raise Unproven("a file's lines are not over their rule")
    sign = int(kind.signed)  # the column a sign takes after the number's space
    lines: list[str] = []
    signs: list[str] = []
    numbers: list[int] = []
    hunk = 0  # the index in `lines` of the first line of the hunk being read
    column = 0  # where the numbers of the hunk end
    for y in range(first, last - 1):
        text = r.texts[y].rstrip()
        numbered = NUMBERED.match(text)
        if kind.hunks and text == " " + shape.hunk_gap and len(lines) > hunk:
            _numbered_in(numbers[hunk:], column, kind)
            hunk = len(lines)
        elif numbered and (len(lines) == hunk or numbered.end() == column):
            column = numbered.end()
            number = int(numbered[1])
            marked = (text[column + 1 : column + 2] or " ") if kind.signed else ""
            if marked not in SIGNS[kind.signed] or not _in_turn(
                numbers, signs, hunk, number, marked, kind, tail
            ):
                raise Unproven(f"row {y} is no line of the file")
            numbers.append(number)
            signs.append(marked)
            lines.append(text[column + 1 + sign :])
        elif (
            len(lines) > hunk
            and not text[: column + 1].strip()
            and text[column + 1 : column + 1 + sign] == signs[-1]
            and len(text) > column + 1 + sign
        ):
            lines[-1] += text[column + 1 + sign :]
        else:
            raise Unproven(f"row {y} is no line of the file")
    if len(lines) == hunk:
        raise Unproven("a file's lines end with no line")
    _numbered_in(numbers[hunk:], column, kind)
    if tail:
        # Scrolled off: its first line (or part of one, or a gap) and, above it, its
        # title and path. A new file's line 1 shown would show them too.
        hidden = numbers[0] > 1 or bool(leading) or kind.hunks
        if not hidden or any(
            (r.texts[y][: column + 1].strip() or r.blank(y))
            and not (kind.hunks and r.texts[y].rstrip() == " " + shape.hunk_gap)
            for y in leading
        ):
            raise Unproven("a file's top is cut, but not by the pane's edge")
    return FileView(path, tuple(lines), "".join(signs), tuple(numbers), cut=tail)


def _in_turn(
    numbers: Sequence[int], signs: Sequence[str], hunk: int, number: int, sign: str,
    kind: FileShape, tail: bool,
) -> bool:  # fmt: skip
    """Whether a line numbered `number` (with `sign`) may follow the lines read so far."""
    if kind.hunks:
        # New-file numbers count on within a hunk; a hunk starts past the one before.
        if sign == "-":
            return True
        before = [n for n, s in zip(numbers[hunk:], signs[hunk:], strict=True) if s != "-"]
        if before:
            return number == before[-1] + 1
        earlier = [n for n, s in zip(numbers[:hunk], signs[:hunk], strict=True) if s != "-"]
        return not earlier or number > earlier[-1] + 1
    if kind.signed:
        return True
    # A new file's count on from the first: 1, unless the top scrolled off.
    start = numbers[0] if numbers else (number if tail else 1)
    return number == start + len(numbers)


def _numbered_in(numbers: Sequence[int], column: int, kind: FileShape) -> None:
    """Refuse a hunk whose numbers do not end `kind.number_pad` past its widest one."""
    if column != kind.number_pad + len(str(max(numbers))):
        raise Unproven("a file's lines are not numbered in their column")


def _advisory_cell(r: Reader, y: int, start: int) -> bool:
    """True when row `y`, its text starting at column `start`, is drawn as an advisory.

    In the advisory colour, or muted for a whole hint row (`advisory_hints`).
    """
    shape = r.p.permission
    cell = r.cells[y][start]
    if start != shape.advisory_col or cell.bold:
        return False
    if cell.fg == shape.menu.muted_fg:
        text = r.texts[y].strip()
        return any(hint.fullmatch(text) for hint in shape.advisory_hints)
    return cell.fg == shape.advisory_fg


def _advisory_rows(r: Reader, rows: Sequence[tuple[str, bool]]) -> list[str]:
    """`rows` cut into whole advisories (the longest known one first); refused otherwise.

    A hint row (muted) is read by the hint patterns only, any other by the advisories.
    """
    shape = r.p.permission
    found: list[str] = []
    start = 0
    while start < len(rows):
        hint = rows[start][1]
        patterns = shape.advisory_hints if hint else shape.advisories
        end = next(
            (
                end
                for end in range(len(rows), start, -1)
                if all(row[1] == hint for row in rows[start:end])
                and any(p.fullmatch(" ".join(t for t, _ in rows[start:end])) for p in patterns)
            ),
            None,
        )
        if end is None:
            raise Unproven("unknown advisory row under the command")
        found.append(" ".join(text for text, _ in rows[start:end]))
        start = end
    return found
