"""Claude Code's composer: idle, draft and working, read off the input box at the bottom.

What the pinned versions draw (fixtures/claude/<version>/): a composer between
two full-width ``─`` rules, its first row ``❯\\u00a0<text>``, one hint row under
it (``⏸ manual mode on · ? for shortcuts``). While a turn runs the hint row says
``esc to interrupt``, a spinner line (``✽ Transmuting…``) stands above the
composer and the composer glyph turns grey (a draft drops the hint; the list a
``/`` or ``@`` draft opens over the composer hides the spinner line, leaving the
grey glyph the turn's one sign). A user ``statusLine`` draws its
output between the rule and the hint row, takes the place of ``? for
shortcuts`` and, on 2.1.263-2.1.267, of ``esc to interrupt`` too; ``editorMode:
vim`` starts the hint row with ``-- INSERT --`` and hides ``esc to interrupt``
on every version. There the spinner line is the sign of a turn. Vim's NORMAL
mode shows no mark at all: an empty NORMAL composer is drawn exactly as the
default idle one (tools/lab/NOTES.md). The rows between the rules are the draft
(`akk.profiles.composer.DraftView`); a scrolled draft shows its last rows only,
2.1.328 writing ``↑ N more`` into the upper rule. A prompt recalled with Up is a
draft under an upper rule labelled ``─── History 1/3 ───``. While an agent runs in the
background (every pinned version), a blank row and a list stand under the hint
row: ``● main`` in bold, then ``◯ general-purpose  <description>  <time>`` per
agent. Pressing Down focuses the list (a ``❯`` pointer on a row): the composer
then takes no keys, and the screen reads unknown. Ctrl-O's detailed transcript
takes the composer's place, over a footer of its own that says whether a prompt
waits behind it (`person_view`). A leading ``!`` turns the composer into a shell
prompt, rules and hint row (``! for shell mode``) in another colour (`shell_mode`).
After an API error 2.1.328 and 2.1.332 write a dim hint into the empty composer
(``Resend your message to try again``), the cursor on its first character: an empty
composer (`_hint_only`).
"""

from __future__ import annotations

import functools
import re

import attrs

from akk.profiles.claude.reader import Reader
from akk.profiles.composer import DraftView
from akk.profiles.observation import HIDDEN_PROMPT, PERSON_VIEW, Observation, State, Unproven


@attrs.frozen
class ComposerShape:
    """The input box Claude draws whenever no prompt replaces it."""

    rule: str = "─"
    rule_fg: str = "808080"
    prompt: str = "❯\u00a0"
    idle_fg: str = "default"  # colour of the prompt glyph while Claude waits for input
    continuation_indent: int = 2  # further rows of a multi-line draft
    # The draft wraps at the pane width less this: its cursor gets `columns - 3`
    # and measures wrapped rows with one column less, for the cursor cell.
    wrap_margin: int = 4
    # A composer rule that counts the rows scrolled away ("─── ↑ 4 more ───"); None
    # where the version scrolls without a mark (its rule stays plain).
    scroll_mark: re.Pattern[str] | None = None
    # Up recalls an earlier prompt into the composer (every pinned version) and labels the
    # upper rule with where in the history it is; the recalled prompt is a draft as any other.
    history_mark: re.Pattern[str] = re.compile(r"─── History \d+/\d+ ─+")
    # Under the bottom rule: the rows of the user's `statusLine` command (its own text,
    # never read), then the one hint row Claude draws itself (mode, hints), each from
    # this column; a status line of more rows is a screen this profile cannot place.
    footer_indent: int = 2
    status_line_rows: int = 1
    working_marker: str = "esc to interrupt"  # in the hint row while a turn runs
    # `editorMode: vim` starts the hint row with this in INSERT mode; NORMAL shows nothing.
    insert_mark: str = "-- INSERT --"
    # Ctrl-O shows the detailed transcript in place of the composer, under a full-width rule
    # and over this footer (after "working · " while a turn runs, "dialog waiting · " while
    # a prompt waits behind it: every pinned version).
    transcript_mark: str = "Showing detailed transcript · ctrl+o to toggle"
    transcript_dialog: str = "dialog waiting · "
    transcript_working: str = "working · "
    # A leading '!' turns the composer into a shell prompt: the glyph, both rules and the
    # hint row below (this text) in the shell's colour, not the rules' (every pinned version).
    shell_prompt: str = "!"
    shell_hint: str = "! for shell mode"
    # A draft that opens a list over the composer (the command menu, the mention popup): the
    # list stands where the working line was, so the grey glyph is the turn's only sign.
    popups: tuple[re.Pattern[str], ...] = (re.compile(r"^/"), re.compile(r"(?:^|\s)@\S*$"))
    spinner_glyphs: str = "·✢*✶✻✽✳"  # the animated glyph that starts a working line
    # A line such as "✽ Transmuting…" or "✻ Calculating… (0s · ↓ 2 tokens)": glyph,
    # one word, an ellipsis. A finished turn says "✻ Crunched for 0s" (no ellipsis).
    spinner_word: str = r"[A-Za-z][\w'-]*…"
    # While agents run in the background, a blank row and a list under the hint row: the
    # main session (bold), then one row per agent, each `agents_indent` in. A pointer in
    # its place marks the list focused: keys then go to it, not to the composer.
    agents_main: str = "● main"
    agents_row: str = "◯ "
    agents_indent: int = 2


@functools.cache
def _spinner(glyphs: str, word: str) -> re.Pattern[str]:
    return re.compile(f"[{re.escape(glyphs)}] {word}")


def read(r: Reader, bottom: int) -> Observation | None:
    """Idle / idle_draft / working when the composer is at the bottom (above the list of
    background agents, if one shows); else None."""
    shape = r.p.composer
    bottom = _above_agents(r, bottom)
    lower = next(
        (
            y
            for y in range(bottom, max(-1, bottom - shape.status_line_rows - 2), -1)
            if _rule(r, y) is not None
        ),
        None,
    )
    if lower is None:
        return None
    upper = next((y for y in range(lower - 1, -1, -1) if _upper_rule(r, y) is not None), None)
    if upper is None or upper == lower - 1:
        return None
    # A rule that says how many rows are scrolled away frames a partial draft,
    # whose first row shown is a continuation row.
    scrolled = bool(_upper_rule(r, upper) or _rule(r, lower))
    if not scrolled and not r.texts[upper + 1].startswith(shape.prompt):
        return None
    _continued(r, upper + 1 if scrolled else upper + 2, lower, "the composer")
    hint = _footer(r, lower, bottom)
    r.single_prompt(upper)
    draft = _draft(r, upper + 1, lower)
    if scrolled:
        draft = attrs.evolve(draft, complete=False)
    if shape.working_marker in hint or _working_line(r, upper):
        return r.result(State.WORKING, draft=draft)
    glyph = r.cells[upper + 1][0]
    if glyph.fg != shape.idle_fg:
        if draft.complete and any(p.search("\n".join(draft.rows)) for p in shape.popups):
            return r.result(State.WORKING, draft=draft)
        return r.unknown("composer glyph is not in its idle colour but no working line shows")
    marked = hint[shape.footer_indent :].startswith(shape.insert_mark)
    return r.result(
        State.IDLE if draft.empty else State.IDLE_DRAFT,
        draft=draft,
        composer_mode="insert" if marked else None,
    )


def person_view(r: Reader, bottom: int) -> Observation | None:
    """The detailed transcript a person opened (Ctrl-O), with or without a prompt waiting
    behind it, from Claude's own footer under its full-width rule; else None. Either way
    there is no composer to type into (unknown); only a waiting prompt needs a person."""
    shape = r.p.composer
    if bottom < 1 or not r.rule(bottom - 1, shape.rule) or r.indent(bottom) != shape.footer_indent:
        return None
    footer = r.texts[bottom][shape.footer_indent :]
    if footer.startswith(shape.transcript_dialog + shape.transcript_mark):
        return r.unknown(
            f"a prompt {HIDDEN_PROMPT} the detailed transcript a person opened (Ctrl-O closes it)"
        )
    if footer.startswith((shape.transcript_mark, shape.transcript_working + shape.transcript_mark)):
        return r.unknown(f"{PERSON_VIEW}: the detailed transcript (Ctrl-O); no prompt waits")
    return None


def shell_mode(r: Reader, bottom: int) -> Observation | None:
    """The composer in shell mode, its hint row at `bottom`; else None. While a turn runs
    (its working line above), working with the person's shell command as the draft: the
    agent goes on, and its prompts come on top. At rest, no composer AKK may type into."""
    shape = r.p.composer
    if bottom < 3 or r.texts[bottom].rstrip() != " " * shape.footer_indent + shape.shell_hint:
        return None
    colour = r.cells[bottom][shape.footer_indent].fg
    lower = bottom - 1
    if colour == shape.rule_fg or not r.rule(lower, shape.rule, colour):
        return None
    upper = next((y for y in range(lower - 1, -1, -1) if r.rule(y, shape.rule, colour)), None)
    if upper is None or upper == lower - 1 or r.cells[upper + 1][0].char != shape.shell_prompt:
        return None
    _continued(r, upper + 2, lower, "the shell prompt")
    r.single_prompt(upper)
    if not _working_line(r, upper):
        return r.unknown("shell mode at an idle composer: no composer to type a task into")
    return r.result(State.WORKING, draft=_draft(r, upper + 1, lower), composer_mode="shell")


def _continued(r: Reader, first: int, end: int, what: str) -> None:
    """Refuse unless rows first..end-1 are blank or indented as a draft's further rows."""
    for y in range(first, end):
        if r.indent(y) < r.p.composer.continuation_indent and not r.blank(y):
            raise Unproven(f"unexpected row {y} inside {what}")


def _working_line(r: Reader, upper: int) -> bool:
    """Whether a turn's working line (``✽ Transmuting…``) stands above row `upper`."""
    shape = r.p.composer
    spinner = _spinner(shape.spinner_glyphs, shape.spinner_word)
    return any(spinner.match(r.texts[y]) for y in range(upper))


def _above_agents(r: Reader, bottom: int) -> int:
    """The last row above the list of background agents ending at `bottom` (`bottom` itself
    when none shows): its agent rows, the bold main row, a blank row. Only the list as
    drawn unfocused counts; any other row there leaves the composer unproven."""
    shape = r.p.composer
    lead = " " * shape.agents_indent
    y = bottom
    while y >= 0 and _plain(r, y) and r.texts[y].startswith(lead + shape.agents_row):
        y -= 1
    main = lead + shape.agents_main
    if y == bottom or y < 1 or r.texts[y].rstrip() != main or not r.blank(y - 1):
        return bottom
    if not all(cell.bold for cell in r.cells[y][len(lead) : len(main)]):
        return bottom
    return next((above for above in range(y - 2, -1, -1) if not r.blank(above)), bottom)


def _plain(r: Reader, y: int) -> bool:
    """Row `y` has no bold or reverse cell (no mark of a selection)."""
    return not any(cell.bold or cell.reverse for cell in r.cells[y])


def _footer(r: Reader, lower: int, bottom: int) -> str:
    """Claude's own hint row under the composer's bottom rule ("" when there is none).

    Rows lower+1..bottom-1 are the user's status line, bounded here and never
    read (a blank row where its command printed nothing); row `bottom` is the
    hint row. All of them start at the footer column, so none can be a rule, a
    prompt anchor or a menu row.
    """
    shape = r.p.composer
    for y in range(lower + 1, bottom + 1):
        if not r.blank(y) and r.indent(y) < shape.footer_indent:
            raise Unproven(f"unexpected row {y} under the composer")
    return r.texts[bottom] if bottom > lower else ""


def _rule(r: Reader, y: int) -> str | None:
    """The scroll mark of the composer rule at row `y` ("" when unmarked); None: no rule."""
    shape = r.p.composer
    if r.rule(y, shape.rule, shape.rule_fg):
        return ""
    mark = shape.scroll_mark
    found = mark.fullmatch(r.texts[y]) if mark is not None else None
    if found is None or r.cells[y][0].fg != shape.rule_fg:
        return None
    return found.group(1)


def _upper_rule(r: Reader, y: int) -> str | None:
    """`_rule`, or "" for the upper rule labelled with the place of a recalled prompt."""
    shape = r.p.composer
    if shape.history_mark.fullmatch(r.texts[y]) and r.cells[y][0].fg == shape.rule_fg:
        return ""
    return _rule(r, y)


def _hint_only(r: Reader, first: int, end: int, indent: int) -> bool:
    """Whether the composer is empty but for a dim hint, the cursor on its first character:
    2.1.328 and 2.1.332 write one there after an API error ("Resend your message to try
    again", "Once fixed, resend your message"). A person's text is never drawn dim."""
    if end - first != 1:
        return False
    cells = r.cells[first][indent:]
    shown = [cell for cell in cells if cell.char.strip()]
    cursor = cells[0]
    return (
        len(shown) > 1
        and cursor.reverse
        and bool(cursor.char.strip())
        and all(cell.dim for cell in shown[1:])
    )


def _draft(r: Reader, first: int, end: int) -> DraftView:
    """The draft in composer rows first..end-1 (the prompt glyph and the indent dropped).

    Claude draws its cursor as one reverse-video cell; more than one such cell
    is a rendering this profile cannot read.
    """
    indent = r.p.composer.continuation_indent  # the prompt glyph takes as many columns
    rows = tuple(r.texts[y][indent:].rstrip(" ") for y in range(first, end))
    if rows == ("",) or _hint_only(r, first, end, indent):
        rows = ()
    cursors = [
        (y - first, x - indent)
        for y in range(first, end)
        for x in range(indent, r.grid.cols)
        if r.cells[y][x].reverse
    ]
    found = r.p.typing.any_placeholder()
    return DraftView(
        rows=rows,
        width=r.grid.cols - r.p.composer.wrap_margin,
        pane_rows=r.grid.rows,
        placeholders=tuple(token for row in rows for token in found.findall(row)),
        cursor=cursors[0] if len(cursors) == 1 else None,
        complete=len(cursors) <= 1,
    )
