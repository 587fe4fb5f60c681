"""The Codex classifier's skeleton: which shape the bottom of the screen shows.

Prompts have no box frame: each ends with its own footer, and a prompt is
proven from its footer up to its top anchor, every row in between of a known
kind, separated from history by blank rows. The skeleton finds the last
non-blank row, leaves a first-run screen to a person (a `Blocker`), matches
the footer ending there (a narrow pane wraps it) to its shape (`permission`,
`confirmation`, `question`, `picker`) and, with none, reads the composer above
its status rows (`status`, `composer`), or a composer a tall draft scrolled over
them (`composer.scrolled`). A second prompt's anchor above the one read is refused.
"""

from __future__ import annotations

from collections.abc import Callable

from akk.profiles.codex import composer, confirmation, permission, picker, question, status
from akk.profiles.codex.reader import Footer, Reader
from akk.profiles.observation import Observation, State, Unproven

_Parser = Callable[[Reader, Footer, int, int], Observation]
"""Parses a prompt from its footer's first and last rows (bottom-up)."""


def observe(r: Reader) -> Observation:
    """The one Observation `r`'s screen shows; raises Unproven where a shape is not proven."""
    last = _last_content_row(r)
    if last is None:
        raise Unproven("blank screen: nothing proves idle, working or a prompt")
    blocked = _blocker(r, last)
    if blocked is not None:
        return blocked
    p = r.p
    parsers: list[tuple[Footer, _Parser]] = [
        (p.permission_footer, permission.read),
        (p.unanswered_footer, confirmation.read),
        (p.notes_footer, question.read),
        *((footer, question.read) for footer in p.question_footers),
    ]
    if p.async_question is not None:
        parsers.append((p.async_question.footer, picker.read))
    for footer, parse in parsers:
        top = _footer_top(r, footer, last)
        if top is not None:
            observation = parse(r, footer, top, last)
            _no_other_prompt(r, observation)
            return observation
    try:
        under = status.first_row(r, last)
    except Unproven:
        scrolled = composer.scrolled(r, last)
        if scrolled is None:
            raise
        return scrolled
    return composer.read(r, under)


def _last_content_row(r: Reader) -> int | None:
    for y in range(r.grid.rows - 1, -1, -1):
        if r.lines[y]:
            return y
    return None


def _footer_top(r: Reader, footer: Footer, last: int) -> int | None:
    """The first row of `footer` if it ends at row `last` (a narrow pane wraps it)."""
    for count in range(1, 4):
        top = last - count + 1
        if top < 0 or not all(r.indented(y, 2) for y in range(top, last + 1)):
            return None
        words = tuple(
            word for y in range(top, last + 1) for word in r.lines[y].split() if word != "|"
        )
        if words == footer.words:
            return top
    return None


def _blocker(r: Reader, last: int) -> Observation | None:
    for blocker in r.p.blockers:
        if r.lines[last].strip() == blocker.footer and any(
            blocker.anchor in line for line in r.lines
        ):
            return Observation(State.BLOCKED, r.p.id, reason=blocker.reason)
    return None


def _no_other_prompt(r: Reader, observation: Observation) -> None:
    prompt = observation.prompt
    if prompt is None:
        return
    anchors = (*r.p.approval_anchors, r.p.unanswered_anchor)
    for y in range(prompt.region.top):
        text = r.lines[y].strip()
        if text in anchors or r.p.question_header.fullmatch(text):
            raise Unproven(f"two prompts on screen (another one at row {y})")
