"""Codex CLI version profiles: each pinned version is one row of data, read by one classifier.

What the pinned versions draw (fixtures/codex/<version>/, 120x40 and 80x24; also 100x30,
132x43 and 200x50, and inline with ``--no-alt-screen``):

- A fresh session: 0.153.4-0.155.1 draw a boxed header (``>_ OpenAI Codex (vX)``) and a
  ``Tip:`` line at every size, and no logo (none up to 250x80). 0.169.0 and 0.171.0 draw
  an unboxed header, no tip, and under it a static dim braille logo (17 rows at 80-200
  columns) when the pane has at least 32 rows (120x31: none, 120x32: shown; 40x40: none);
  a turn scrolls it away. Nothing reads it: it sits above the composer, where no anchor
  matches (fixtures at 120x40, 132x43 and 200x50 hold it; 80x24 and 100x30 do not).
- Inline (``--no-alt-screen``, offered by every pinned version; the ``codex_inline_*``
  fixtures): the same rows drawn from the top of the normal screen, blank rows under the
  footer until the history fills the pane, then the history scrolls into the pane's
  scrollback. 0.169.0 and 0.171.0 show a ``Tip:`` line there and never the logo.
- Idle: the composer row ``› <text>`` (glyph bold, not dim; an empty composer shows
  a dim placeholder) and the draft's further rows, indented by two (an empty row
  follows a line that fills its row exactly; paste placeholders are cyan
  elements), one blank row, the status row (model label in the version's status
  colour) and, from 0.169.0, an optional shortcut-hint row. A history user
  message also starts with ``›`` but its glyph is dim. In Plan mode the status
  row (up to 0.155.1) or the hint row (0.169.0) ends with ``Plan mode (shift+tab
  to cycle)``, right-aligned, ``Plan mode`` in magenta; on 0.169.0 the hint row
  keeps only that indicator while a draft is typed, and drops ``(shift+tab to
  cycle)`` while a turn runs.
- The status row is the user's (``[tui] status_line``): up to 0.155.1 one row, cut
  with ``…``; 0.169.0 wraps a long one onto a second row of coloured items, and may
  end its hint row with ``⚠ N warning · f2 to view`` (a model outside the catalog, once
  a turn ran); a draft hides the hints, leaving that notice alone on the row. With no
  status line the row under the composer is the bare hint (``? for shortcuts``; 0.169.0
  ``← for agents · ? for shortcuts``) with ``N% context left`` right-aligned (100x30,
  132x43 too).
- Working: the same composer plus a status line ``• Working (0s • esc to
  interrupt)``; a running command shows ``• Running <cmd>`` (verb bold). While a
  reply streams, 0.169.0 hides that line; from 0.155.1 each finished turn ends
  with a dim line (``done 10:02 PM``, ``Worked for 3s • 21:52``), so idle there
  also needs that line below the last sent message (or the session header on
  screen and no message at all), or the line ``■ Conversation interrupted - ...``
  an interrupted turn ends with (Esc, a rejected command). 0.153.4 and 0.154.0
  draw no such line: their idle rests on the absence of the status line alone.
- Async questions (0.154.0, 0.155.1): a queued question sits above the composer
  (``• Queued follow-up inputs`` / ``? 1 question`` / ``shift + ← to answer``:
  ASYNC_QUESTION, not actionable: no options on screen); its picker replaces
  the composer (heading, question, numbered options ending in ``Other``, footer
  ``enter submit   ctrl + ] skip   alt + ↓ main prompt``).
- Prompts replace the composer and end with their own footer. They have no box
  frame: a prompt is proven from its footer up to its top anchor, every row in
  between of a known kind, separated from history by blank rows:
  exec approval (``Would you like to run the following command?``; a long command
  wraps at spaces onto rows indented by two, syntax-highlighted), a
  request_user_input question (``Question i/n (k unanswered)``, prompt in the
  version's prompt colour, or one plain row once answered and visited again,
  numbered options whose descriptions wrap under their own column, an automatic
  ``None of the above`` row, optionally the notes editor) and the
  unanswered-question confirmation (``Submit with unanswered questions?``).
- The notes editor (Tab on a question row) is a small composer: ``  › `` then
  rows indented by four, wrapped by textwrap at the pane width less seven, an
  empty row after a row the text fills exactly, a dim ``Add notes`` when empty.
  It shows at most six rows and keeps the last ones in view, with no mark; a
  prompt that fills the pane clips it further. More than 1000 characters typed
  at once collapse into ``[Pasted Content N chars]``; 3000 show one 1024-character
  paste, and Enter then submits the question unanswered (tools/lab/NOTES.md).
  Notes belong to the row under the cursor (``Red`` + a note is an answer too).
- The current menu row carries the cursor glyph ``›`` and the version's highlight
  style (cyan bold up to 0.155.1, bold reverse in 0.169.0), which is also what
  keeps one version's prompt from being read under another's profile.

A prompt whose footer is recognised but whose region cannot be proven row by row
is UNKNOWN with a reason (no prompt, zero input). A proven approval prompt whose
cursor sits on a persistent-approval row is BLOCKED, with its prompt for display.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import attrs

from akk.profiles.composer import (
    DraftView,
    LengthUnit,
    Typing,
    TypingMethod,
    Wrapping,
    draft_matches,
)
from akk.profiles.keyplan import (
    EnterGuard,
    Intent,
    KeyPlan,
    KeyPlans,
    MoveToRole,
    PlanKey,
    Press,
    PressChosenNumber,
    PressRoleNumber,
    PressShortcut,
    TypeText,
)
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
)
from akk.protocol.text_rule import Special
from akk.screen.grid import Cell, Grid
from akk.screen.region import Region


@attrs.frozen
class Highlight:
    """The style that marks the menu row under the cursor."""

    bold: bool
    reverse: bool
    fg: str | None = None  # None: any foreground

    def marks(self, cell: Cell) -> bool:
        """Whether `cell` is drawn in this highlight style."""
        return (
            cell.bold == self.bold
            and cell.reverse == self.reverse
            and (self.fg is None or cell.fg == self.fg)
        )


@attrs.frozen
class MenuShape:
    """Where a numbered menu row draws its cursor glyph and its number."""

    cursor_col: int
    number_col: int
    descriptions: bool  # label and description are split by a gap of two or more spaces
    shortcuts: bool  # every row ends with its key in parentheses, e.g. "(y)"


@attrs.frozen
class Footer:
    """A prompt footer as its ``|``-separated parts; a narrow pane may wrap it at a separator."""

    parts: tuple[str, ...]

    @property
    def words(self) -> tuple[str, ...]:
        """The footer's words without separators, as compared against the screen."""
        return tuple(word for part in self.parts for word in part.split())


@attrs.frozen
class Blocker:
    """A screen AKK must leave to a person: its anchor text, the footer under it, why."""

    name: str
    anchor: str
    footer: str
    reason: str


@attrs.frozen
class AsyncShape:
    """How a version shows a queued async question and its picker (0.154.0, 0.155.1)."""

    anchor: str  # the bullet row heading the queued inputs, above the picker too
    queued: re.Pattern[str]  # the queued-question row under the anchor
    queued_hint: str  # the row telling how to open the picker
    footer: Footer  # the picker's footer
    other: str  # the picker's own free-text row


@attrs.frozen
class Notice:
    """A notice drawn right-aligned at the end of a composer footer row (``100% context left``)."""

    text: re.Pattern[str]
    right_pad: int  # blank columns between the notice and the pane's right edge


@attrs.frozen
class ModeIndicator:
    """The collaboration mode a version draws at the right end of its hint row (0.169.0)."""

    labels: tuple[str, ...]  # as drawn, e.g. "Plan mode (shift+tab to cycle)"
    fg: str  # the colour of the label's first word
    right_pad: int  # blank columns between the label and the pane's right edge


_NAMED_PREFIX = re.compile(r"`(.+)`", re.DOTALL)


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
            raise _Refused("the command shown is shorter than the one its approval names: cut off")


def _squeezed(text: str) -> str:
    return "".join(text.split())


class _Refused(Exception):
    """The screen cannot be proven to be what it looks like; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_NUMBERED = re.compile(r"(\d+)\. (\S.*)")
_GAP = re.compile(r"\s{2,}")
_SHORTCUT = re.compile(r" \(([^()\s]+)\)$")


@attrs.frozen
class _MenuRow:
    number: int
    label: str
    description: str
    current: bool


@attrs.frozen(kw_only=True)
class CodexProfile:
    """One pinned Codex version: exact anchors, footers, row shapes, styles and key plans."""

    version: str
    agent: str = attrs.field(default="codex", init=False)
    # Shared by every menu.
    cursor: str
    highlight: Highlight
    # Composer and working markers.
    composer_glyph: str
    composer_margin: int  # the draft wraps at the pane width less this (indent and right pad)
    placeholder_fg: str  # a paste placeholder is an element drawn in this colour
    status_fg: str
    status_max_rows: int  # a status line too long for the pane wraps over this many rows at most
    status_hints: tuple[str, ...]  # a hint row under the status row starts with one of these
    hint_notices: tuple[Notice, ...]  # drawn at the right end of the hint row (warnings)
    mode_indicator: ModeIndicator | None  # drawn on the hint row (None: on the status row)
    bare_footer: tuple[str, ...]  # with no status line (`[tui] status_line = []`): the one
    # row under the composer is one of these, then `context_left`
    context_left: Notice
    working_marker: str
    in_progress_verbs: tuple[str, ...]
    # Exec approval.
    permission_anchor: str
    permission_paragraphs: tuple[str, ...]
    command_prefix: str
    command_margin: int  # a wrapped command's rows end at least this many columns from the edge
    permission_menu: MenuShape
    permission_menu_gap: int  # blank rows between the command and the options
    permission_roles: tuple[tuple[str, OptionRole], ...]
    permission_footer: Footer
    # request_user_input.
    question_header: re.Pattern[str]
    question_prompt_fg: str
    prompt_fill_blank: bool  # an empty row follows a prompt row the text fills exactly
    answered_prompt_fg: str  # the prompt of a question answered earlier (visited again)
    question_menu: MenuShape
    question_footers: tuple[Footer, ...]
    notes_footer: Footer
    notes_margin: int  # the notes wrap at the pane width less this (indent and right pad)
    notes_max_rows: int  # the notes show this many rows at most, the last ones in view
    full_pane_top: int  # a prompt starting at this row or higher fills the pane (clipped)
    none_of_the_above: str
    # The unanswered-question confirmation.
    unanswered_anchor: str
    unanswered_count: re.Pattern[str]
    unanswered_roles: tuple[tuple[str, OptionRole], ...]
    unanswered_footer: Footer
    # Turn ends and async questions (None where the version draws none).
    banner: str  # the session header, shown until the first turn scrolls it away
    user_glyph: str  # a sent message in the history: glyph bold and dim
    turn_end: re.Pattern[str] | None  # dim line closing a finished turn
    interrupted: str  # the line closing an interrupted turn (Esc, a rejected command)
    interrupted_fg: str
    async_question: AsyncShape | None
    blockers: tuple[Blocker, ...]
    key_plans: KeyPlans
    typing: Typing
    permission_tool: str = "exec_command"  # the call an exec approval asks about (rollout)
    # What the id says after the version: empty for a pinned row, " (qualified from
    # 0.171.0)" for a pinned row read as a qualified version (akk.profiles.qualified).
    id_note: str = ""

    @property
    def id(self) -> str:
        """Stable profile id, part of every fingerprint."""
        return f"codex@{self.version}{self.id_note}"

    @property
    def enter_guard_seconds(self) -> float:
        """Quiet time after the last typed or pasted key before the one Enter."""
        return self.typing.enter_guard_seconds

    def classify(self, grid: Grid) -> Observation:
        """The one Observation this screen shows under this version's profile."""
        try:
            return _Classifier(self, grid).run()
        except _Refused as refused:
            return Observation(State.UNKNOWN, self.id, reason=refused.reason)

    @property
    def free_text_max_chars(self) -> int:
        """Longest notes text `editor_matches` can prove: more typed at once collapses or is lost.

        A bound, not a promise: the notes show at most `notes_max_rows` - 1
        provable rows of the pane width less `notes_margin` (about 560
        characters at 120 columns), and `editor_matches` decides per screen.
        """
        return self.typing.literal_max_length

    def draft_matches(self, draft: DraftView, text: str, how: TypingMethod) -> bool:
        """Whether `draft` shows exactly `text`, typed `how`, as this version renders it."""
        return draft_matches(self.typing, draft, text, how)

    def next_turn_message(self, question: str, label: str) -> str | None:
        """The user message an async answer given at an idle composer starts a turn with.

        The picker sends the question quoted, a blank line and the option
        (NOTES.md: ``> Which color do you prefer?\n\nBlue``); None for a version
        without async questions.
        """
        if self.async_question is None:
            return None
        return "> " + question.replace("\n", "\n> ") + "\n\n" + label

    def editor_matches(self, grid: Grid, prompt: PromptView, text: str) -> bool:
        """Whether `prompt`'s open notes show exactly `text`, typed with ``send-keys -l``.

        Only notes on the ``None of the above`` row are a free-text answer (on
        another row they would send that option too). False unless `grid`
        classifies to exactly `prompt`, and whenever the notes may not be whole
        on screen: as many rows as the editor shows at most (earlier ones may be
        scrolled away), a prompt filling the pane (clipped), a placeholder, or
        the dim empty-notes hint.
        """
        classifier = _Classifier(self, grid)
        try:
            observation = classifier.run()
        except _Refused:
            return False
        notes = classifier.notes
        if observation.prompt != prompt or not observation.actionable or notes is None:
            return False
        current = [option.role for option in prompt.questions[0].options if option.current]
        if current != [OptionRole.NONE_OF_THE_ABOVE] or prompt.region.top <= self.full_pane_top:
            return False
        return draft_matches(self.editor_typing, notes, text, TypingMethod.LITERAL)

    @property
    def editor_typing(self) -> Typing:
        """The notes editor's typing: the composer's, with the notes' own specials."""
        return attrs.evolve(self.typing, specials=_NOTES_SPECIALS)


_Parser = Callable[[Footer, int, int], Observation]
"""Parses a prompt from its footer's first and last rows (bottom-up)."""


class _Classifier:
    """One classification: the profile, the grid and its right-stripped row texts."""

    def __init__(self, profile: CodexProfile, grid: Grid) -> None:
        self.p = profile
        self.grid = grid
        # Plain joins, not Grid.row_text: no column map is needed (the rows are read
        # only by ASCII prefixes and one-column glyphs), and this is ~6x faster.
        self.lines = [
            "".join([cell.char for cell in grid.row(y)]).rstrip() for y in range(grid.rows)
        ]
        self.notes: DraftView | None = None  # the open notes editor, once a question proved it

    def run(self) -> Observation:
        last = self._last_content_row()
        if last is None:
            raise _Refused("blank screen: nothing proves idle, working or a prompt")
        blocked = self._blocker(last)
        if blocked is not None:
            return blocked
        p = self.p
        parsers: list[tuple[Footer, _Parser]] = [
            (p.permission_footer, self._permission),
            (p.unanswered_footer, self._unanswered),
            (p.notes_footer, self._question),
            *((footer, self._question) for footer in p.question_footers),
        ]
        if p.async_question is not None:
            parsers.append((p.async_question.footer, self._picker))
        for footer, parse in parsers:
            top = self._footer_top(footer, last)
            if top is not None:
                observation = parse(footer, top, last)
                self._no_other_prompt(observation)
                return observation
        return self._composer(last)

    # -- shared row primitives ------------------------------------------------

    def _last_content_row(self) -> int | None:
        for y in range(self.grid.rows - 1, -1, -1):
            if self.lines[y]:
                return y
        return None

    def _blank(self, y: int, what: str) -> None:
        if y < 0 or self.lines[y]:
            raise _Refused(f"expected a blank row {what} (row {y}): unexpected or truncated prompt")

    def _run_above(self, y: int, what: str) -> int:
        """The top row of the non-blank run that ends at row `y`."""
        if y < 0 or not self.lines[y]:
            raise _Refused(f"missing {what} (row {y}): truncated prompt")
        while y > 0 and self.lines[y - 1]:
            y -= 1
        return y

    def _indented(self, y: int, indent: int) -> bool:
        line = self.lines[y]
        return line[:indent] == " " * indent and len(line) > indent and line[indent] != " "

    def _footer_top(self, footer: Footer, last: int) -> int | None:
        """The first row of `footer` if it ends at row `last` (a narrow pane wraps it)."""
        for count in range(1, 4):
            top = last - count + 1
            if top < 0 or not all(self._indented(y, 2) for y in range(top, last + 1)):
                return None
            words = tuple(
                word for y in range(top, last + 1) for word in self.lines[y].split() if word != "|"
            )
            if words == footer.words:
                return top
        return None

    def _blocker(self, last: int) -> Observation | None:
        for blocker in self.p.blockers:
            if self.lines[last].strip() == blocker.footer and any(
                blocker.anchor in line for line in self.lines
            ):
                return Observation(State.BLOCKED, self.p.id, reason=blocker.reason)
        return None

    def _no_other_prompt(self, observation: Observation) -> None:
        prompt = observation.prompt
        if prompt is None:
            return
        anchors = (self.p.permission_anchor, self.p.unanswered_anchor)
        for y in range(prompt.region.top):
            text = self.lines[y].strip()
            if text in anchors or self.p.question_header.fullmatch(text):
                raise _Refused(f"two prompts on screen (another one at row {y})")

    def _menu(self, top: int, bottom: int, shape: MenuShape) -> list[_MenuRow]:
        """Parse rows ``top..bottom-1`` as one numbered menu, proving numbers and highlight."""
        cursor, hl, grid = self.p.cursor, self.p.highlight, self.grid
        rows: list[_MenuRow] = []
        gap = " " * (shape.number_col - shape.cursor_col - 1)
        description_col: int | None = None  # where the last row's description starts
        for y in range(top, bottom):
            line = self.lines[y]
            glyph = line[shape.cursor_col : shape.cursor_col + 1]
            numbered = _NUMBERED.fullmatch(line, shape.number_col)
            lead_ok = (
                line[: shape.cursor_col] == " " * shape.cursor_col
                and line[shape.cursor_col + 1 : shape.number_col] == gap
            )
            if numbered and lead_ok and glyph in (cursor, " "):
                current = glyph == cursor
                styled = hl.marks(grid.cell(shape.number_col, y))
                if current != styled or (current and not hl.marks(grid.cell(shape.cursor_col, y))):
                    raise _Refused(f"menu row {y}: cursor glyph and highlight style disagree")
                text = numbered.group(2)
                label, description, description_col = text, "", None
                if shape.descriptions:
                    label, between, description = _partition_text(text)
                    if description:
                        description_col = numbered.start(2) + len(label) + len(between)
                rows.append(_MenuRow(int(numbered.group(1)), label, description, current))
            elif description_col is not None and self._indented(y, description_col):
                # A wrapped description: its further rows start under its first.
                prev = rows[-1]
                rows[-1] = attrs.evolve(prev, description=f"{prev.description} {line.strip()}")
            elif rows and self._indented(y, shape.number_col + 3):
                description_col = None
                # A wrapped label or description: it continues the row above.
                prev, more = rows[-1], line.strip()
                if prev.description:
                    rows[-1] = attrs.evolve(prev, description=f"{prev.description} {more}")
                else:
                    joiner = "" if prev.label.endswith("-") else " "
                    rows[-1] = attrs.evolve(prev, label=f"{prev.label}{joiner}{more}")
            else:
                raise _Refused(f"unexpected row {y} inside a menu")
        if [row.number for row in rows] != list(range(1, len(rows) + 1)):
            raise _Refused("menu numbers are duplicated or out of order")
        if shape.shortcuts and not all(_SHORTCUT.search(row.label) for row in rows):
            raise _Refused("a menu row lacks its key shortcut: truncated row")
        if sum(row.current for row in rows) != 1:
            raise _Refused("no single current row in the menu")
        return rows

    # -- prompts ----------------------------------------------------------------

    def _permission(self, footer: Footer, footer_top: int, last: int) -> Observation:
        p = self.p
        self._blank(footer_top - 1, "above the approval footer")
        menu_top = self._run_above(footer_top - 2, "approval options")
        rows = self._menu(menu_top, footer_top - 1, p.permission_menu)
        command: str | None = None
        y = menu_top - 1
        for _ in range(p.permission_menu_gap):
            self._blank(y, "above the approval options")
            y -= 1
        seen: set[str] = set()
        while True:
            top = self._run_above(y, "the approval anchor")
            first = self.lines[top]
            if top == y and first == f"  {p.permission_anchor}":
                if not self.grid.cell(2, top).bold:
                    raise _Refused("approval anchor is not drawn bold")
                break
            prefix = next(
                (pre for pre in p.permission_paragraphs if first[2:].startswith(pre)), None
            )
            if prefix in seen:
                raise _Refused(f"approval paragraph {prefix!r} shown twice")
            if not self._indented(top, 2) or prefix is None:
                raise _Refused(f"unexpected row {top} inside the approval prompt")
            if prefix == p.command_prefix:
                command = self._command(top, y)
            elif not all(self._indented(r, 4) for r in range(top + 1, y + 1)):
                raise _Refused(f"unexpected row inside the approval paragraph at row {top}")
            seen.add(prefix)
            self._blank(top - 1, "between approval paragraphs")
            y = top - 2
        if command is None:
            raise _Refused("approval prompt shows no command")
        options = []
        for row in rows:
            label = _SHORTCUT.sub("", row.label)
            role = next((r for pre, r in p.permission_roles if label.startswith(pre)), None)
            if role is None:
                raise _Refused(f"approval option {row.number} has no known meaning")
            options.append(OptionView(label, role, row.number, current=row.current))
        roles = [option.role for option in options]
        if roles.count(OptionRole.APPROVE_ONCE) != 1 or roles.count(OptionRole.REJECT) != 1:
            raise _Refused("approval prompt lacks exactly one approve-once and one reject row")
        _check_named_prefix(command, options)
        question = QuestionView(
            p.permission_anchor,
            ResponseKind.CONFIRM,
            tuple(options),
            detail=command,
            command=command,
        )
        prompt = PromptView(
            InteractionKind.PERMISSION,
            StepKind.PERMISSION,
            (question,),
            Region(top=top, bottom=last + 1, left=0, right=self.grid.cols),
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

    def _command(self, top: int, bottom: int) -> str:
        """The command in rows top..bottom (``$ `` and indent dropped), unwrapped.

        A long command wraps at spaces onto rows indented by two, every character
        in the syntax highlighter's colours (never the default colour, unlike any
        other row of the prompt). A row that may end inside a word (ending in
        ``-``, or one word filling the row) cannot be unwrapped exactly.
        """
        p, grid = self.p, self.grid
        parts = [self.lines[top][2 + len(p.command_prefix) :]]
        for r in range(top + 1, bottom + 1):
            drawn = [cell for cell in grid.row(r)[2:] if cell.char.strip()]
            if not self._indented(r, 2) or any(cell.fg == "default" for cell in drawn):
                raise _Refused(f"unexpected row {r} inside the approval command")
            parts.append(self.lines[r][2:])
        for r, part in zip(range(top, bottom), parts, strict=False):
            filled = len(self.lines[r]) >= grid.cols - p.command_margin
            if part.endswith("-") or (filled and " " not in part):
                raise _Refused(f"the command's row {r} may end inside a word: cannot unwrap it")
        return " ".join(parts)

    def _unanswered(self, footer: Footer, footer_top: int, last: int) -> Observation:
        p = self.p
        self._blank(footer_top - 1, "above the confirmation footer")
        menu_top = self._run_above(footer_top - 2, "confirmation options")
        rows = self._menu(menu_top, footer_top - 1, p.question_menu)
        self._blank(menu_top - 1, "above the confirmation options")
        top = self._run_above(menu_top - 2, "the confirmation anchor")
        texts = [self.lines[y] for y in range(top, menu_top - 1)]
        if (
            len(texts) != 2
            or texts[0] != f"  {p.unanswered_anchor}"
            or not self.grid.cell(2, top).bold
            or not p.unanswered_count.fullmatch(texts[1].strip())
        ):
            raise _Refused("unexpected rows above the unanswered-question options")
        roles = dict(p.unanswered_roles)
        options = []
        for row in rows:
            role = roles.get(row.label)
            if role is None:
                raise _Refused(f"confirmation option {row.number} has no known meaning")
            options.append(OptionView(row.label, role, row.number, row.description, row.current))
        question = QuestionView(
            p.unanswered_anchor, ResponseKind.CONFIRM, tuple(options), header=None
        )
        prompt = PromptView(
            InteractionKind.CONFIRMATION,
            StepKind.CONFIRM,
            (question,),
            Region(top=top, bottom=last + 1, left=0, right=self.grid.cols),
        )
        return Observation(State.QUESTIONNAIRE, p.id, prompt)

    def _question(self, footer: Footer, footer_top: int, last: int) -> Observation:
        p = self.p
        notes_open = footer == p.notes_footer
        self._blank(footer_top - 1, "above the question footer")
        y = footer_top - 2
        if notes_open:
            notes_end = y + 1
            if y > 0 and not self.lines[y] and self._fills_notes_row(y - 1):
                y -= 1  # the empty row after a notes row the text fills exactly
            notes_top = self._run_above(y, "the notes editor")
            if self.lines[notes_top][:4] != f"  {p.cursor} " or not all(
                self._indented(r, 4) for r in range(notes_top + 1, y + 1)
            ):
                raise _Refused(f"unexpected row {notes_top} where the notes editor belongs")
            self._blank(notes_top - 1, "above the notes editor")
            self.notes = self._notes(notes_top, notes_end)
            y = notes_top - 2
        menu_top = self._run_above(y, "question options")
        rows = self._menu(menu_top, y + 1, p.question_menu)
        self._blank(menu_top - 1, "above the question options")
        end = menu_top - 2  # the prompt's last row
        if (
            p.prompt_fill_blank
            and end > 0
            and not self.lines[end]
            and len(self.lines[end - 1]) == self.grid.cols - 2
        ):
            end -= 1  # the empty row after a prompt row the text fills exactly
        top = self._run_above(end, "the question header")
        header = p.question_header.fullmatch(self.lines[top].strip())
        if header is None or not self._indented(top, 2) or not self.grid.cell(2, top).dim:
            raise _Refused(f"row {top} is not this version's question header")
        prompt_rows = range(top + 1, end + 1)
        colours = {self.grid.cell(2, r).fg for r in prompt_rows}
        # A plain row proves nothing by its style: an answered prompt is one row only.
        answered = colours == {p.answered_prompt_fg} and len(prompt_rows) == 1
        if (
            not prompt_rows
            or not all(self._indented(r, 2) for r in prompt_rows)
            or not (colours == {p.question_prompt_fg} or answered)
        ):
            raise _Refused("question prompt missing or not drawn in the prompt colour")
        index, total = int(header.group(1)), int(header.group(2))
        if not 1 <= index <= total:
            raise _Refused(f"question {index}/{total} is out of range")
        options = []
        for row in rows:
            role = OptionRole.CHOICE
            if row.label == p.none_of_the_above:
                if row.number != len(rows):
                    raise _Refused("'None of the above' is not the last row")
                role = OptionRole.NONE_OF_THE_ABOVE
            options.append(OptionView(row.label, role, row.number, row.description, row.current))
        kind = ResponseKind.FREE_TEXT if notes_open else ResponseKind.SINGLE_SELECT
        question = QuestionView(
            " ".join(self.lines[r].strip() for r in prompt_rows), kind, tuple(options)
        )
        prompt = PromptView(
            InteractionKind.QUESTIONNAIRE,
            StepKind.FREE_TEXT if notes_open else StepKind.SINGLE_SELECT,
            (question,),
            Region(top=top, bottom=last + 1, left=0, right=self.grid.cols),
            step_index=index,
            step_total=total,
        )
        return Observation(State.QUESTIONNAIRE, p.id, prompt)

    def _fills_notes_row(self, y: int) -> bool:
        """Whether row `y` is a notes row whose text ends at the notes' last column."""
        if self.lines[y][:4] not in (f"  {self.p.cursor} ", "    "):
            return False
        row = self.grid.row(y)
        end = max((x + cell.width for x, cell in enumerate(row) if cell.char.strip()), default=0)
        return end == self.grid.cols - self.p.notes_margin + 4

    def _notes(self, top: int, end: int) -> DraftView:
        """The notes in rows top..end-1 as a draft (glyph and indent dropped); see `_draft`."""
        p, grid = self.p, self.grid
        shown = [cell for y in range(top, end) for cell in grid.row(y)[4:] if cell.char.strip()]
        dim = [cell.dim for cell in shown]
        rows = () if all(dim) else tuple(self.lines[y][4:] for y in range(top, end))
        return DraftView(
            rows=rows,
            width=grid.cols - p.notes_margin,
            pane_rows=grid.rows,
            placeholders=self._placeholders(top, end),
            complete=(all(dim) or not any(dim)) and end - top < p.notes_max_rows,
        )

    def _picker(self, footer: Footer, footer_top: int, last: int) -> Observation:
        p = self.p
        shape = p.async_question
        assert shape is not None, "only dispatched for versions with an async picker"
        self._blank(footer_top - 1, "above the picker footer")
        menu_top = self._run_above(footer_top - 2, "picker options")
        rows = self._menu(menu_top, footer_top - 1, p.question_menu)
        self._blank(menu_top - 1, "above the picker options")
        prompt_top = self._run_above(menu_top - 2, "the async question")
        prompt_rows = range(prompt_top, menu_top - 1)
        if not all(
            self._indented(r, 2) and self.grid.cell(2, r).fg == p.question_prompt_fg
            for r in prompt_rows
        ):
            raise _Refused("async question not drawn in the prompt colour")
        self._blank(prompt_top - 1, "above the async question")
        top = prompt_top - 2
        if top < 0 or self.lines[top] != f"• {shape.anchor}" or (top and self.lines[top - 1]):
            raise _Refused("the picker is not under its queued-inputs heading")
        options = []
        for row in rows:
            role = OptionRole.CHOICE
            if row.label == shape.other:
                if row.number != len(rows):
                    raise _Refused(f"'{shape.other}' is not the last row")
                role = OptionRole.FREE_TEXT
            options.append(OptionView(row.label, role, row.number, row.description, row.current))
        question = QuestionView(
            " ".join(self.lines[r].strip() for r in prompt_rows),
            ResponseKind.SINGLE_SELECT,
            tuple(options),
        )
        prompt = PromptView(
            InteractionKind.ASYNC_QUESTION,
            StepKind.SINGLE_SELECT,
            (question,),
            Region(top=top, bottom=last + 1, left=0, right=self.grid.cols),
        )
        # Opened while the turn runs, the agent works on above it: an answer steers that turn.
        working = any(p.working_marker in line for line in self.lines[:top])
        return Observation(State.WORKING if working else State.ASYNC_QUESTION, p.id, prompt)

    # -- composer: idle, draft or working ----------------------------------------

    def _composer(self, last: int) -> Observation:
        p, grid = self.p, self.grid
        y = self._composer_footer(last)
        self._blank(y - 1, "between the composer and its status row")
        top = self._composer_top(y - 2)
        draft = self._draft(top, y - 1)
        queued = self._queued_question(top)
        if any(p.working_marker in line for line in self.lines[:top]):
            return Observation(State.WORKING, p.id, queued, draft=draft)
        for row in range(top):
            words = self.lines[row][2:].split(" ", 1)
            if (
                self.lines[row][:2] in ("• ", "◦ ")
                and words[0] in p.in_progress_verbs
                and grid.cell(2, row).bold
            ):
                raise _Refused(f"a command is still running (row {row}) with no status line")
        if queued is not None:
            return Observation(State.ASYNC_QUESTION, p.id, queued)
        if p.turn_end is not None and not self._turn_finished(top):
            return Observation(State.WORKING, p.id, draft=draft)
        return Observation(State.IDLE if draft.empty else State.IDLE_DRAFT, p.id, draft=draft)

    def _composer_footer(self, last: int) -> int:
        """The first row of the composer's footer, which ends at row `last`.

        Either the status rows (the first in the status colour; a long status line
        wraps), then the version's hint row if any, or, with no status line, one
        bare footer row ending with the context left.
        """
        p = self.p
        bare = self._left_of(last, p.context_left)
        if bare is not None and bare[:2] == "  " and bare[2:] in p.bare_footer:
            return last
        y = last - 1 if self._hint_row(last) else last
        if y < 0 or not self.lines[y]:
            raise _Refused("no prompt and no composer status row at the bottom of the screen")
        top = self._run_above(y, "the composer status row")
        if (
            y - top >= p.status_max_rows
            or not all(self._indented(r, 2) for r in range(top, y + 1))
            or self.grid.cell(2, top).fg != p.status_fg
            or not all(self._status_items(r) for r in range(top + 1, y + 1))
        ):
            raise _Refused("no prompt and no composer status row at the bottom of the screen")
        return top

    def _status_items(self, y: int) -> bool:
        """Whether row `y` continues a wrapped status line: items in their colours, `·` between."""
        return all(
            cell.fg != "default" or cell.char in (" ", "·", "") for cell in self.grid.row(y)[2:]
        )

    def _left_of(self, y: int, notice: Notice) -> str | None:
        """Row `y`'s text left of `notice` if the row ends with it, right-aligned; else None."""
        row, cols = self.grid.row(y), self.grid.cols
        match = re.search(rf"(?<=  )(?:{notice.text.pattern})$", self.lines[y])
        if match is None:
            return None
        text = match.group()
        start = cols - notice.right_pad - len(text)
        if start < 1 or "".join(cell.char for cell in row[start : start + len(text)]) != text:
            return None
        if any(cell.char != " " for cell in row[start + len(text) :]) or row[start - 1].char != " ":
            return None
        return self.lines[y][: match.start()].rstrip()

    def _hint_row(self, y: int) -> bool:
        """Whether row `y` is the hint row under the status row (0.169.0).

        It starts with one of the version's hints, or ends with its collaboration
        mode indicator, or both (Plan mode with a draft shows the indicator alone);
        a notice (warnings) may end it after the hints instead of the indicator, and
        stands alone while a draft hides the hints (codex_after_warning-draft).
        """
        p, row, cols = self.p, self.grid.row(y), self.grid.cols
        left = self.lines[y]
        for notice in p.hint_notices:
            rest = self._left_of(y, notice)
            if rest is not None:
                return not rest or any(rest[2:].startswith(hint) for hint in p.status_hints)
        mode = p.mode_indicator
        if mode is not None:
            for label in mode.labels:
                start = cols - mode.right_pad - len(label)
                if (
                    start > 2
                    and "".join(cell.char for cell in row[start : start + len(label)]) == label
                    and row[start].fg == mode.fg
                    and all(cell.char == " " for cell in row[start + len(label) :])
                    and row[start - 1].char == " "
                ):
                    left = "".join(cell.char for cell in row[:start]).rstrip()
                    if not left:
                        return True
                    break
        return any(left[2:].startswith(hint) for hint in p.status_hints)

    def _composer_top(self, bottom: int) -> int:
        """The composer's first row, above its last row `bottom`.

        Draft rows are indented by two columns and may be empty (a blank line, or
        the row Codex adds after a row the text fills exactly); the first row
        carries the composer glyph, bold and not dim.
        """
        top = bottom
        while top > 0 and self.lines[top][:2] in ("", "  "):
            top -= 1
        glyph = self.grid.cell(0, top)
        if self.lines[top][:2] != f"{self.p.composer_glyph} " or not glyph.bold or glyph.dim:
            raise _Refused(f"row {top} is not the composer")
        return top

    def _draft(self, top: int, end: int) -> DraftView:
        """The draft in composer rows top..end-1, glyph and indent dropped.

        An empty composer shows a dim placeholder text. A draft mixing dim and
        plain text, or with a mark in the right margin (Codex's scroll arrows),
        cannot be read whole.
        """
        p, grid = self.p, self.grid
        shown = [
            cell for y in range(top, end) for cell in grid.row(y)[2:] if cell.char not in (" ", "")
        ]
        dim = [cell.dim for cell in shown]
        rows = () if all(dim) else tuple(self.lines[y][2:] for y in range(top, end))
        marked = any(grid.cell(grid.cols - 1, y).char != " " for y in range(top, end))
        return DraftView(
            rows=rows,
            width=grid.cols - p.composer_margin,
            pane_rows=grid.rows,
            placeholders=self._placeholders(top, end),
            complete=not marked and (all(dim) or not any(dim)),
        )

    def _placeholders(self, top: int, end: int) -> tuple[str, ...]:
        """The paste placeholders in rows top..end-1: elements in the placeholder colour."""
        p, grid = self.p, self.grid
        found = []
        for y in range(top, end):
            columns = grid.row_columns(y)
            for match in p.typing.any_placeholder().finditer(self.lines[y]):
                cells = [grid.cell(columns[i], y) for i in range(match.start(), match.end())]
                if all(cell.fg == p.placeholder_fg for cell in cells):
                    found.append(match.group())
        return tuple(found)

    def _queued_question(self, composer_top: int) -> PromptView | None:
        """The queued async question right above the composer, as its one step: opening it.

        Its question and options show only in its picker; the region is the
        queue's heading, count and hint rows.
        """
        shape = self.p.async_question
        if shape is None or composer_top < 4 or self.lines[composer_top - 1]:
            return None
        heading, queued, hint = self.lines[composer_top - 4 : composer_top - 1]
        if (
            heading != f"• {shape.anchor}"
            or not shape.queued.fullmatch(queued.strip())
            or hint.strip() != shape.queued_hint
        ):
            return None
        return PromptView(
            InteractionKind.ASYNC_QUESTION,
            StepKind.QUEUED,
            (),
            Region(top=composer_top - 4, bottom=composer_top - 1, left=0, right=self.grid.cols),
        )

    def _turn_finished(self, composer_top: int) -> bool:
        """Whether the history proves the last turn ended (its closing line is below it)."""
        p = self.p
        assert p.turn_end is not None
        for y in range(composer_top - 1, -1, -1):
            text = self.lines[y].strip()
            if p.turn_end.fullmatch(text) and self._indented(y, 2) and self.grid.cell(2, y).dim:
                return True
            if (
                self.lines[y].startswith(p.interrupted)
                and self.grid.cell(0, y).fg == p.interrupted_fg
            ):
                return True
            glyph = self.grid.cell(0, y)
            if self.lines[y][:2] == f"{p.user_glyph} " and glyph.bold and glyph.dim:
                return False
        # No turn on screen: idle only if the whole session (its header) is visible.
        if any(p.banner in line for line in self.lines[:composer_top]):
            return True
        raise _Refused("cannot tell whether the last turn ended: its start scrolled away")


def _partition_text(text: str) -> tuple[str, str, str]:
    """Split a menu row's text at its first gap of two or more spaces: label, gap, description."""
    match = _GAP.search(text)
    if match is None:
        return text, "", ""
    return text[: match.start()], match.group(), text[match.end() :]


_TRUST_REASON = (
    "trust: Codex asks whether to trust this folder; a person must answer it in the terminal"
)

_QUESTIONNAIRE = InteractionKind.QUESTIONNAIRE
_ENTER = Press("Enter")
# LAB.md measured ~120 ms; the lab's own guard (akk/qualify/launcher.py) is 0.3 s.
_ENTER_GUARD = EnterGuard(0.3)
_LAB = "tests/lab/test_codex_plans.py"
_ALL = "(0.153.4, 0.154.0, 0.155.1, 0.169.0)"

_KEY_PLANS = KeyPlans(
    (
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.CHOOSE),
            (PressChosenNumber(),),
            f"{_LAB} test_choose_answers_with_the_option_number and "
            f"test_three_questions_one_step_at_a_time {_ALL}: the digit picks the row and "
            "answers it at once (the next question, or the answers sent); no cursor walk",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.FREE_TEXT),
            (
                MoveToRole(OptionRole.NONE_OF_THE_ABOVE),
                Press("Tab"),
                TypeText(),
                _ENTER_GUARD,
                _ENTER,
            ),
            f"{_LAB} test_free_text_from_none_of_the_above and test_long_free_text {_ALL}: "
            "Tab opens the notes of the row under the cursor, editor_matches proves them, one "
            "Enter sends 'None of the above' and 'user_note: <text>'",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.FREE_TEXT, Intent.FREE_TEXT),
            (TypeText(), _ENTER_GUARD, _ENTER),
            f"{_LAB} test_free_text_into_the_open_notes {_ALL}",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(_QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.NEXT_QUESTION),
            (Press("Right"),),
            f"{_LAB} test_unanswered_confirmation_goes_back_then_proceeds {_ALL}",
            lab_verified=True,
        ),
        # The confirmation's digits only move its cursor (Enter still needed), so
        # the walk stays: Proceed is the first row, Go back one Down.
        KeyPlan(
            PlanKey(InteractionKind.CONFIRMATION, StepKind.CONFIRM, Intent.PROCEED),
            (MoveToRole(OptionRole.PROCEED), _ENTER),
            f"{_LAB} test_unanswered_confirmation_goes_back_then_proceeds {_ALL}: "
            "unanswered questions arrive as empty answer lists",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(InteractionKind.CONFIRMATION, StepKind.CONFIRM, Intent.GO_BACK),
            (MoveToRole(OptionRole.GO_BACK), _ENTER),
            f"{_LAB} test_unanswered_confirmation_goes_back_then_proceeds {_ALL}: "
            "back to the first unanswered question",
            lab_verified=True,
        ),
        KeyPlan(
            PlanKey(InteractionKind.PERMISSION, StepKind.PERMISSION, Intent.APPROVE_ONCE),
            (PressShortcut(OptionRole.APPROVE_ONCE, "y"),),
            f"{_LAB} test_exec_approve_once_runs_it {_ALL}; the row's own '(y)' shortcut",
            lab_verified=True,
        ),
        # The reject row itself, by its digit: Esc is the prompt's cancel, and a
        # walk past the persistent row could leave an Enter on it.
        KeyPlan(
            PlanKey(InteractionKind.PERMISSION, StepKind.PERMISSION, Intent.REJECT),
            (PressRoleNumber(OptionRole.REJECT),),
            f"{_LAB} test_exec_reject_selects_the_no_row {_ALL}: the command stays unrun; the "
            "model hears 'aborted by user' with the next message only",
            lab_verified=True,
        ),
    )
)

_ASYNC_KEY_PLANS = (
    KeyPlan(
        PlanKey(InteractionKind.ASYNC_QUESTION, StepKind.QUEUED, Intent.OPEN_QUEUED_QUESTION),
        (Press("S-Left"),),
        f"{_LAB} test_async_answer_when_idle_starts_the_next_turn and "
        "test_async_answer_while_working_steers_the_turn (0.154.0, 0.155.1)",
        lab_verified=True,
    ),
    KeyPlan(
        PlanKey(InteractionKind.ASYNC_QUESTION, StepKind.SINGLE_SELECT, Intent.CHOOSE),
        (PressChosenNumber(),),
        f"{_LAB} test_async_answer_when_idle_starts_the_next_turn and "
        "test_async_answer_while_working_steers_the_turn (0.154.0, 0.155.1): the digit "
        "submits the option as a user message '> <question>\\n\\n<option>'",
        lab_verified=True,
    ),
)

# What the composer of every pinned version (0.153.4 to 0.171.0) does with text instead of
# typing it (tests/lab/test_hostile_input.py; docs/input.md).
_SPECIALS = (
    Special(r"^!", "shell mode (the rest would run as a shell command)"),
    Special(r"^/", "a slash command"),
    Special(r"^\?", "the shortcuts overlay (a leading '?' in an empty composer is eaten)"),
    Special(r"(?:^|\s)@", "a file, skill and agent mention popup over the composer"),
    # '$' then a name: a popup when the name matches an installed skill, which AKK cannot
    # know ('$sk' opened it, '$HOME' and '$(' did not); refused whatever the name.
    Special(r"(?:^|\s)\$[A-Za-z_]", "the skills popup (its Enter inserts a skill)"),
)
# The notes under a question (probed on 0.153.4 and 0.171.0, docs/input.md): '@' and '$'
# open no popup there and a leading '/' is text, but 0.153.4 still reads a leading '!' as
# shell mode ('! x') and eats a leading '?'; 0.171.0 types both. Refused on every version.
_NOTES_SPECIALS = tuple(s for s in _SPECIALS if s.pattern in (r"^!", r"^\?"))
_TYPING = Typing(
    wrapping=Wrapping.TEXTWRAP,
    literal_max_length=1000,
    paste_max_length=1000,
    length_unit=LengthUnit.CODEPOINTS,
    paste_max_newlines=None,
    placeholder_single=r"\[Pasted Content {chars} chars\]",
    placeholder_multi=r"\[Pasted Content {chars} chars\]",
    specials=_SPECIALS,
    viewport=None,
    enter_guard_seconds=_ENTER_GUARD.seconds,
    settle_seconds=0.5,
    evidence=(
        "fixtures/README.md 'Typing into the composer' (0.153.4 and 0.169.0 by hand, every "
        "version by tests/lab/test_typing.py): a paste of more than 1000 characters shows the "
        "cyan element '[Pasted Content N chars]' (a second one of the same size ' #2'); a "
        "burst of more than 1000 characters typed with send-keys -l is taken for a paste; an "
        "Enter within ~120 ms of a typed burst is a newline (0 ms: newline, 50 ms: sent), "
        "never after a bracketed paste; the specials (docs/input.md, lab probe of 0.153.4 and "
        "0.171.0, tests/lab/test_hostile_input.py on every version): '!' opens shell mode, '/' "
        "a command, '?' in an empty composer is eaten, '@' and '$' after a space or at the "
        "start open the mention popup, '$' and a name there the skills popup ('$sk' shows "
        "'enter insert'); a scrolled "
        "composer marks its right margin and drops the status row"
    ),
)

_CONTEXT_LEFT = Notice(re.compile(r"\d{1,3}% context left"), right_pad=2)

_V0_153_4 = CodexProfile(
    version="0.153.4",
    cursor="›",
    highlight=Highlight(bold=True, reverse=False, fg="cyan"),
    composer_glyph="›",
    composer_margin=3,
    placeholder_fg="cyan",
    status_fg="f6e2b7",
    status_max_rows=1,  # a long status line is cut with "…"
    status_hints=(),
    hint_notices=(),
    mode_indicator=None,
    bare_footer=("? for shortcuts",),
    context_left=_CONTEXT_LEFT,
    working_marker="esc to interrupt",
    in_progress_verbs=("Running",),
    permission_anchor="Would you like to run the following command?",
    permission_paragraphs=("Environment: ", "Reason: ", "$ "),
    command_prefix="$ ",
    command_margin=2,
    permission_menu=MenuShape(cursor_col=0, number_col=2, descriptions=False, shortcuts=True),
    permission_menu_gap=1,
    permission_roles=(
        ("Yes, proceed", OptionRole.APPROVE_ONCE),
        ("Yes, and don't ask again", OptionRole.APPROVE_PERSISTENT),
        ("No, and tell Codex what to do differently", OptionRole.REJECT),
    ),
    permission_footer=Footer(("Press enter to confirm or esc to cancel",)),
    question_header=re.compile(r"Question (\d+)/(\d+) \((\d+) unanswered\)"),
    question_prompt_fg="cyan",
    prompt_fill_blank=True,
    answered_prompt_fg="default",
    question_menu=MenuShape(cursor_col=2, number_col=4, descriptions=True, shortcuts=False),
    question_footers=(
        Footer(("tab to add notes", "enter to submit answer", "esc to interrupt")),
        Footer(
            (
                "tab to add notes",
                "enter to submit answer",
                "←/→ to navigate questions",
                "esc to interrupt",
            )
        ),
        Footer(
            (
                "tab to add notes",
                "enter to submit all",
                "←/→ to navigate questions",
                "esc to interrupt",
            )
        ),
    ),
    notes_footer=Footer(("tab or esc to clear notes", "enter to submit answer")),
    notes_margin=7,
    notes_max_rows=6,
    full_pane_top=2,
    none_of_the_above="None of the above",
    unanswered_anchor="Submit with unanswered questions?",
    unanswered_count=re.compile(r"\d+ unanswered questions?"),
    unanswered_roles=(("Proceed", OptionRole.PROCEED), ("Go back", OptionRole.GO_BACK)),
    unanswered_footer=Footer(("Press enter to confirm or esc to go back",)),
    banner=">_ OpenAI Codex (v0.153.4)",
    user_glyph="›",
    turn_end=None,
    interrupted="■ Conversation interrupted - ",
    interrupted_fg="red",
    async_question=None,
    blockers=(
        Blocker(
            "trust",
            "Do you trust the contents of this directory?",
            "Press enter to continue",
            _TRUST_REASON,
        ),
    ),
    key_plans=_KEY_PLANS,
    typing=_TYPING,
)

# 0.154.0 draws what 0.153.4 draws, plus queued async questions and their picker.
_V0_154_0 = attrs.evolve(
    _V0_153_4,
    version="0.154.0",
    banner=">_ OpenAI Codex (v0.154.0)",
    async_question=AsyncShape(
        anchor="Queued follow-up inputs",
        queued=re.compile(r"\? \d+ questions?"),
        queued_hint="shift + ← to answer",
        footer=Footer(("enter submit", "ctrl + ] skip", "alt + ↓ main prompt")),
        other="Other",
    ),
    key_plans=KeyPlans(_KEY_PLANS.plans + _ASYNC_KEY_PLANS),
)
# 0.155.1 closes each turn with a dim "done <time>" line.
_V0_155_1 = attrs.evolve(
    _V0_154_0,
    version="0.155.1",
    banner=">_ OpenAI Codex (v0.155.1)",
    turn_end=re.compile(r"done \d{1,2}:\d{2}(?: [AP]M)?"),
)

_V0_169_0 = attrs.evolve(
    _V0_153_4,
    version="0.169.0",
    highlight=Highlight(bold=True, reverse=True),
    status_fg="ffd7af",
    # Observed: five items at 80 and 100 columns wrap onto a second row; the default
    # items with the thread title onto a third at 30 columns (codex_narrow).
    status_max_rows=3,
    status_hints=("← for agents",),
    hint_notices=(Notice(re.compile(r"⚠ \d+ warnings? · f2 to view"), right_pad=1),),
    bare_footer=("← for agents · ? for shortcuts",),
    mode_indicator=ModeIndicator(
        labels=("Plan mode (shift+tab to cycle)", "Plan mode"), fg="magenta", right_pad=1
    ),
    permission_menu_gap=2,
    question_prompt_fg="5fafff",
    prompt_fill_blank=False,
    full_pane_top=1,
    banner=">_ OpenAI Codex (v0.169.0)",
    turn_end=re.compile(r"Worked for .+ • \d{1,2}:\d{2}(?: [AP]M)?"),
    interrupted_fg="default",
    blockers=(Blocker("trust", "Trust this folder?", "enter continue · esc back", _TRUST_REASON),),
)

# 0.171.0 draws what 0.169.0 draws (`python -m tools.lab new-version codex 0.171.0`:
# every corpus screen classified the same under the 0.169.0 data).
_V0_171_0 = attrs.evolve(_V0_169_0, version="0.171.0", banner=">_ OpenAI Codex (v0.171.0)")

PROFILES: tuple[CodexProfile, ...] = (_V0_153_4, _V0_154_0, _V0_155_1, _V0_169_0, _V0_171_0)
"""Every pinned Codex version, one data row each."""
