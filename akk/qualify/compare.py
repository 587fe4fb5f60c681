"""Classify captured screens with a pinned profile, and say where and how they differ.

Pure: screens, labels and profiles in; outcomes, row differences (`row_diff`) and a report
out. `akk qualify` and `python -m tools.lab new-version` both read a new
version's captures with the profile of the NEAREST pinned version (the highest
pinned one <= the new version, else the lowest above), its version strings set
to the new version (`akk.profiles.qualified.as_version`), and compare each
screen with its label and, where one is at hand, with the pinned version's own
screen of the same capture point: state, kind, step, whether it holds its
label, and the rows that differ (text, place, or style where the text is equal).
"""

from __future__ import annotations

import collections
import contextlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from akk.profiles.composer import TypingMethod
from akk.profiles.observation import Observation, OptionRole, ResponseKind, StepKind
from akk.profiles.registry import Profile
from akk.qualify.row_diff import (
    DEFAULT_MAX_ROWS,
    RowDiff,
    clip,
    diff_rows,
    format_row_diffs,
    offset,
)
from akk.screen.render import CaptureMismatch, render

_VERSION = re.compile(r"\d+(?:\.\d+)+")
_NUMBER = re.compile(r"\d+")
_RUN_DIR = re.compile(r"/tmp/akk-lab-[A-Za-z0-9_]+")
"""Each lab run's own temp dir, shown in the clients' headers."""
_RUN_ID = re.compile(r"\b[0-9a-f]{4,}(?:-[0-9a-f]{4,})+\b")
"""A session id (or the part of one a narrow pane wraps onto a row)."""
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b")
"""A time of day (Codex: ``Worked for <1s • 15:13``)."""
_QUIET_STATES = {"idle", "idle_draft", "working"}
_CONFIRM_ROLES = (OptionRole.SUBMIT, OptionRole.CANCEL, OptionRole.PROCEED, OptionRole.GO_BACK)

Status = Literal["same", "differs", "not_producible"]


# ---------------------------------------------------------------- versions


def version_key(version: str) -> tuple[int, ...]:
    """``"2.1.263"`` -> ``(2, 1, 263)``; raises ValueError for anything but dotted numbers."""
    if not _VERSION.fullmatch(version):
        raise ValueError(f"{version!r} is not a dotted version such as 2.1.263")
    return tuple(int(part) for part in version.split("."))


def nearest(version: str, pinned: Iterable[str]) -> str:
    """The highest of `pinned` <= `version`, else the lowest above it (LookupError: none)."""
    own = sorted(pinned, key=version_key)
    if not own:
        raise LookupError("no pinned version to compare with")
    wanted = version_key(version)
    below = [v for v in own if version_key(v) <= wanted]
    return below[-1] if below else own[0]


# ---------------------------------------------------------------- outcomes


@attrs.frozen
class Outcome:
    """What a profile made of one screen, as far as the report compares it."""

    state: str
    kind: str | None = None
    step: str | None = None
    index: int | None = None
    total: int | None = None
    reason: str | None = None
    problems: tuple[str, ...] = ()
    """Where the classification departs from the screen's label (empty: it holds)."""
    draft_proven: bool | None = None
    """For a draft screen: whether the profile proves the composer shows the typed text."""

    @property
    def key(self) -> tuple[object, ...]:
        """What must be equal for two screens to classify "the same way"."""
        return (
            self.state,
            self.kind,
            self.step,
            self.index,
            self.total,
            not self.problems,
            self.draft_proven,
        )

    def describe(self) -> str:
        """One line: ``questionnaire/questionnaire single_select 1/2``, ``unknown: <reason>``."""
        text = self.state
        if self.kind is not None:
            text += f"/{self.kind}"
        if self.step is not None:
            text += f" {self.step}"
        if self.index is not None and self.total is not None and self.total > 1:
            text += f" {self.index}/{self.total}"
        if self.reason is not None:
            text += f": {self.reason}"
        if self.draft_proven is False:
            text += " (draft not proven)"
        if self.problems:
            text += " [label: " + "; ".join(self.problems) + "]"
        return text


def outcome(
    profile: Profile, screen: str, cols: int, rows: int, expected: Mapping[str, Any]
) -> Outcome:
    """Classify one captured screen with `profile` and check it against its label."""
    try:
        grid = render(screen, cols, rows)
    except CaptureMismatch as exc:
        return Outcome("unknown", reason=f"not renderable at {cols}x{rows}: {exc}")
    observation = profile.classify(grid)
    prompt = observation.prompt
    draft_proven: bool | None = None
    if expected["state"] == "idle_draft" and observation.draft is not None:
        text, how = _typed(expected)
        draft_proven = profile.draft_matches(observation.draft, text, how)
    return Outcome(
        state=observation.state.value,
        kind=None if prompt is None else prompt.kind.value,
        step=None if prompt is None else prompt.step.value,
        index=None if prompt is None else prompt.step_index,
        total=None if prompt is None else prompt.step_total,
        reason=observation.reason,
        problems=tuple(label_problems(expected, observation)),
        draft_proven=draft_proven,
    )


def _typed(expected: Mapping[str, Any]) -> tuple[str, TypingMethod]:
    typed = expected.get("typed")
    if typed is None:
        return str(expected["draft"]), TypingMethod.LITERAL
    return str(typed["text"]), TypingMethod(typed["method"])


def label_problems(expected: Mapping[str, Any], observation: Observation) -> list[str]:
    """Where `observation` departs from the label (tests/test_fixtures.py's checks, as text)."""
    state = "blocked" if expected["manual_only"] else expected["state"]
    if observation.state.value != state:
        return [f"state {observation.state.value}, not {state}"]
    if state in _QUIET_STATES:
        if observation.prompt is not None or observation.reason is not None:
            return ["a quiet screen with a prompt or a reason"]
        return []
    if state in ("blocked", "unknown"):
        return [] if not observation.actionable and observation.reason else ["not refused"]
    prompt = observation.prompt
    if prompt is None or not observation.actionable:
        return [f"not actionable: {observation.reason}"]
    if prompt.kind.value != expected["kind"]:
        return [f"kind {prompt.kind.value}, not {expected['kind']}"]
    problems: list[str] = []
    if not expected["questions"] and not expected["decisions"]:
        if (prompt.step, prompt.questions) != (StepKind.QUEUED, ()):
            problems.append("not a queued question")
        return problems
    step = expected["step"]
    if step is not None and (prompt.step_index, prompt.step_total) != (
        step["index"],
        step["total"],
    ):
        problems.append(
            f"step {prompt.step_index}/{prompt.step_total}, not {step['index']}/{step['total']}"
        )
    if expected["decisions"]:
        return problems + _permission_problems(expected, observation)
    if len(prompt.questions) != len(expected["questions"]):
        return [*problems, f"{len(prompt.questions)} questions, not {len(expected['questions'])}"]
    confirming = prompt.step in (StepKind.REVIEW, StepKind.CONFIRM)
    for number, (question, wanted) in enumerate(
        zip(prompt.questions, expected["questions"], strict=True), start=1
    ):
        choices = [
            o.label
            for o in question.options
            if o.role is OptionRole.CHOICE or (confirming and o.role in _CONFIRM_ROLES)
        ]
        found = {
            "prompt": question.prompt,
            "header": question.header,
            "response_kind": question.response_kind.value,
            "options": choices,
            "extra_rows": [o.label for o in question.options if o.label not in choices],
            "current_row": [o.label for o in question.options if o.current],
            "checked": [o.label for o in question.options if o.checked],
        }
        wants = {
            **{key: wanted[key] for key in ("prompt", "header", "response_kind")},
            **{key: list(wanted[key]) for key in ("options", "extra_rows", "checked")},
            "current_row": [wanted["current_row"]],
        }
        problems += [
            f"q{number} {key} {found[key]!r}, not {wants[key]!r}"
            for key in wants
            if found[key] != wants[key]
        ]
    return problems


def _permission_problems(expected: Mapping[str, Any], observation: Observation) -> list[str]:
    prompt = observation.prompt
    assert prompt is not None
    if prompt.kind.value != "permission" or len(prompt.questions) != 1:
        return ["not a one-question permission"]
    (question,) = prompt.questions
    problems = []
    if question.response_kind is not ResponseKind.CONFIRM:
        problems.append(f"response kind {question.response_kind.value}")
    if expected["command"] not in question.detail:
        problems.append(f"command {question.detail!r}, not {expected['command']!r}")
    roles = [o.role for o in question.options]
    if roles.count(OptionRole.APPROVE_ONCE) != 1 or roles.count(OptionRole.REJECT) != 1:
        problems.append("not one approve_once and one reject row")
    return problems


def describe_expected(expected: Mapping[str, Any]) -> str:
    """The label in one line: state, kind, step and what the questions or command are."""
    state = "blocked (manual only)" if expected["manual_only"] else expected["state"]
    parts = [state]
    if expected["kind"]:
        parts.append(f"kind {expected['kind']}")
    if expected["step"]:
        parts.append(f"step {expected['step']['index']}/{expected['step']['total']}")
    for question in expected["questions"]:
        parts.append(
            f"{question['response_kind']} {question['prompt']!r} "
            f"({len(question['options'])} options, cursor on {question['current_row']!r})"
        )
    if expected["command"]:
        parts.append(f"command {expected['command']!r}")
    if expected["blocker"]:
        parts.append(f"blocker {expected['blocker']}")
    if expected.get("typed"):
        parts.append(
            f"typed {len(expected['typed']['text'])} chars ({expected['typed']['method']})"
        )
    elif expected["draft"]:
        parts.append(f"draft {expected['draft']!r}")
    if expected["reply"]:
        parts.append(f"reply {expected['reply']!r}")
    return ", ".join(parts)


# ---------------------------------------------------------------- comparisons


@attrs.frozen(order=True)
class Point:
    """One capture point: a plan's shot at one pane size."""

    plan: str
    step: str | None
    cols: int
    rows: int

    @property
    def name(self) -> str:
        """``echo-idle 120x40`` (the fixture's file name and the pane size)."""
        shot = self.plan if self.step is None else f"{self.plan}-{self.step}"
        return f"{shot} {self.cols}x{self.rows}"


@attrs.frozen
class Comparison:
    """One capture point of the new version against the nearest pinned version's fixture."""

    point: Point
    status: Status
    expected: Mapping[str, Any]
    old: Outcome | None
    new: Outcome | None
    rows: tuple[RowDiff, ...] = ()
    """The rows that differ between the fixture and the capture (also where both read the same)."""
    note: str | None = None
    """Why it is not producible, or that no committed fixture exists to compare with."""
    drawn: tuple[str, ...] = ()
    """A differing capture's rows as drawn, where no fixture's rows can be set against them."""


def compare(
    point: Point,
    expected: Mapping[str, Any],
    old_screen: str | None,
    new_screen: str | None,
    old_profile: Profile,
    new_profile: Profile,
    *,
    failure: str | None = None,
) -> Comparison:
    """Classify the committed fixture (`old_screen`) and the new capture, and compare them.

    No new screen: not producible (`failure` says why). No committed fixture:
    the capture is the same only if it holds its label.
    """
    old = (
        None
        if old_screen is None
        else outcome(old_profile, old_screen, point.cols, point.rows, expected)
    )
    if new_screen is None:
        return Comparison(
            point, "not_producible", expected, old, None, note=failure or "no screen captured"
        )
    new = outcome(new_profile, new_screen, point.cols, point.rows, expected)
    if old is None:
        if not new.problems:
            return Comparison(point, "same", expected, None, new, note="no committed fixture")
        drawn: tuple[str, ...] = ()
        with contextlib.suppress(CaptureMismatch):
            grid = render(new_screen, point.cols, point.rows)
            drawn = tuple(grid.row_text(y).rstrip() for y in range(grid.rows))
        return Comparison(
            point, "differs", expected, None, new, note="no committed fixture", drawn=drawn
        )
    rows: tuple[RowDiff, ...] = ()
    assert old_screen is not None
    # Unrenderable: the outcome already says the screen does not fit this size.
    with contextlib.suppress(CaptureMismatch):
        rows = tuple(
            diff_rows(
                render(old_screen, point.cols, point.rows),
                render(new_screen, point.cols, point.rows),
                same=run_neutral(old_profile.version, new_profile.version),
            )
        )
    status: Status = "same" if old.key == new.key else "differs"
    return Comparison(point, status, expected, old, new, rows)


def run_neutral(*versions: str) -> Callable[[str], str]:
    """A row's text without what differs on every run: temp dir, ids, clock, version numbers."""
    numbers = re.compile("|".join(re.escape(v) for v in sorted(versions, key=len, reverse=True)))

    def same(text: str) -> str:
        text = _RUN_DIR.sub("/tmp/akk-lab-<run>", text)
        text = _CLOCK.sub("<hh:mm>", _RUN_ID.sub("<id>", text))
        return numbers.sub("<version>", text)

    return same


@attrs.frozen
class Phase:
    """One timed phase of a run: ``install``, ``capture``, ``classify``..."""

    name: str
    seconds: float
    note: str = ""

    def describe(self) -> str:
        """``capture 144.3 s (99 plan runs, 2 at a time, 0 failed)``."""
        return f"{self.name} {self.seconds:.1f} s" + (f" ({self.note})" if self.note else "")


def report(
    agent: str,
    version: str,
    nearest: str,
    comparisons: Sequence[Comparison],
    phases: Sequence[Phase] = (),
    *,
    baseline: str | None = None,
    where: str | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> str:
    """The readable report: a line per capture point, details for each that differs, a summary.

    `baseline` names where the pinned version's own screens came from (None:
    each screen is held to its label alone).
    """
    against = "each screen's label" if baseline is None else f"{baseline} and each label"
    lines = [
        f"new version {agent} {version}, read with the profile of {agent} {nearest} "
        f"(its version strings set to {version}); compared with {against}",
        "rows differing only in the run's temp dir, session id, clock or version are not shown",
    ]
    if where is not None:
        lines.append(f"captures: {where}")
    lines.append("")
    counts = collections.Counter(c.status for c in comparisons)
    width = max((len(c.point.name) for c in comparisons), default=0)
    for c in comparisons:
        if c.status == "same":
            assert c.new is not None
            note = f" ({c.note})" if c.note else _drawn(c.rows)
            lines.append(f"same            {c.point.name:<{width}}  {c.new.describe()}{note}")
            continue
        if c.status == "not_producible":
            lines.append(f"NOT PRODUCIBLE  {c.point.name:<{width}}  {c.note}")
            continue
        assert c.new is not None
        lines.append(f"DIFFERS         {c.point.name}")
        lines.append(f"    expected:         {describe_expected(c.expected)}")
        if c.old is None:
            lines.append(f"    {nearest + ' fixture:':<18}(none committed)")
        else:
            lines.append(f"    {nearest + ' fixture:':<18}{c.old.describe()}")
        lines.append(f"    {version + ' capture:':<18}{c.new.describe()}")
        if c.rows:
            lines.append(f"    rows that differ (row, side │ text; fixture {nearest} first):")
            lines += [
                "      " + line
                for line in format_row_diffs(c.rows, nearest, version, max_lines=max_rows)
            ]
        elif c.old is not None:
            lines.append("    the two screens render identically")
        elif c.drawn:
            lines.append(f"    the {version} capture as drawn (row │ text):")
            lines += [f"      {y:>3} │ {text}" for y, text in enumerate(c.drawn) if text]
    lines.append("")
    differing = [c for c in comparisons if c.status == "differs" and c.new is not None]
    if differing:
        lines.append("differences by what the new capture classifies to:")
        families = collections.Counter(_family(c.new) for c in differing if c.new is not None)
        lines += [f"  {n:>4}  {family}" for family, n in families.most_common()]
        lines.append("")
    drawn = [c for c in comparisons if c.status == "same" and c.rows]
    if drawn:
        lines.append(
            f"of the {counts['same']} same, {len(drawn)} are drawn differently "
            f"({sum(1 for c in drawn if _moved_only(c.rows))} only by rows moved); "
            "the row differences most screens share:"
        )
        same = run_neutral(nearest, version)
        lines += [f"  {line}" for line in row_families(drawn, same=same)]
        lines.append("")
    lines.append(
        f"summary: {counts['same']} same, {counts['differs']} differ, "
        f"{counts['not_producible']} not producible (of {len(comparisons)} screens)"
    )
    if phases:
        lines.append("time: " + ", ".join(phase.describe() for phase in phases))
    return "\n".join(lines) + "\n"


def row_families(
    comparisons: Sequence[Comparison],
    *,
    same: Callable[[str], str] = lambda text: text,
    limit: int = 12,
) -> list[str]:
    """The kinds of row difference the most screens show, each with its first example.

    A kind leaves out row numbers, other numbers and what `same` rewrites.
    """
    screens: dict[str, set[Point]] = collections.defaultdict(set)
    example: dict[str, str] = {}
    for c in comparisons:
        for diff in c.rows:
            family, detail = _row_family(diff, same)
            screens[family].add(c.point)
            example.setdefault(family, f"{c.point.name}: {detail}")
    ranked = sorted(screens, key=lambda family: (-len(screens[family]), family))
    lines = []
    for family in ranked[:limit]:
        count = len(screens[family])
        plural = "s" if count > 1 else " "
        lines.append(f"{count:>4} screen{plural}  {family}  (e.g. {example[family]})")
    if len(ranked) > limit:
        lines.append(f"… {len(ranked) - limit} more kinds")
    return lines


def _row_family(diff: RowDiff, same: Callable[[str], str]) -> tuple[str, str]:
    """A row difference without its row numbers and run-specific values; and the row itself."""
    if diff.moved:
        return (
            f"rows moved {'down' if offset(diff) > 0 else 'up'}",
            f"row {diff.old_y} is now row {diff.new_y}: {clip(diff.new_text)}",
        )
    if diff.styles:
        changed = sorted({part.split(" ")[0] for span in diff.styles for part in _changes(span)})
        return f"restyled ({', '.join(changed)})", f"row {diff.new_y} {diff.styles[0]}"
    before, after = (
        None if text is None else _NUMBER.sub("N", same(text)).strip()
        for text in (diff.old_text, diff.new_text)
    )
    if before is not None and after is not None:
        # Only where they part: a long status line differs at its end.
        common = next(
            (i for i, (x, y) in enumerate(zip(before, after, strict=False)) if x != y),
            min(len(before), len(after)),
        )
        if common > 16:
            before, after = "…" + before[common - 8 :], "…" + after[common - 8 :]
    where = diff.new_y if diff.new_y is not None else diff.old_y
    return (
        f"changed {'(none)' if before is None else clip(before, 50)} → "
        f"{'(none)' if after is None else clip(after, 50)}",
        f"row {where}",
    )


def _changes(span: str) -> list[str]:
    """``cols 0-3 'text': fg a→b, +bold`` -> ``["fg a→b", "+bold"]``."""
    return span.rsplit(": ", 1)[-1].split(", ")


def _drawn(rows: Sequence[RowDiff]) -> str:
    """``  (drawn differently: rows 2 changed, 11 moved, 1 restyled)`` for a same screen."""
    if not rows:
        return ""
    moved = sum(1 for d in rows if d.moved)
    restyled = sum(1 for d in rows if d.styles and not d.moved)
    changed = len(rows) - moved - restyled
    parts = [
        f"{n} {what}"
        for n, what in ((changed, "changed"), (moved, "moved"), (restyled, "restyled"))
        if n
    ]
    return f"  (drawn differently: rows {', '.join(parts)})"


def _moved_only(rows: Sequence[RowDiff]) -> bool:
    return all(d.moved and not d.styles for d in rows)


def _family(new: Outcome) -> str:
    """A differing outcome without its screen-specific numbers (row indexes, counts)."""
    head = attrs.evolve(new, reason=None, problems=()).describe()
    if new.reason is not None:
        return f"{head}: {_NUMBER.sub('N', new.reason)}"
    if new.problems:
        return f"{head} [label: {_NUMBER.sub('N', new.problems[0])}]"
    return head
