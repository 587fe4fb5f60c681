"""What `akk status` shows of a screen: the terminal's row, what its agent asks, the excerpt.

A status reply carries the agent's current question or permission (its
projection) and a bounded, redacted excerpt of the screen; these are their lines
for a person (`akk list` takes a row's profile from here too). Ids are left out:
the operator answers at the terminal itself. Every line goes through `shown`
when printed, as all outside text does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INDENT = " " * len("asks:     ")
"""Where the lines under a field start: none can pass for a field line."""

TEXT_ROLES = frozenset({"free_text", "none_of_the_above"})
"""Option roles whose choice is the person's own text."""

OWN_TEXT = "(your own text)"
"""The numbered row of a question's own text that its options do not list."""


def profile_text(row: Mapping[str, Any]) -> str:
    """A terminal row's profile, or why it has none."""
    return str(row["profile"] or f"none ({row.get('profile_reason') or 'unknown'})")


def terminal_lines(row: Mapping[str, Any]) -> list[str]:
    """A terminal's row (as `list` gives it) as aligned lines."""
    observation = row["observation"]
    state = row["activity_state"]
    if observation["reason"]:
        state += f" ({observation['reason']})"
    return [
        f"terminal: {row['terminal_id']} (pane {row['pane']} on {row['tmux_socket']})",
        f"agent:    {row['agent']} {row['version'] or '?'}   profile: {profile_text(row)}",
        f"state:    {state}",
        f"turn:     {row['turn_id'] or '-'}   session: {row['session_id'] or '-'}",
        f"cwd:      {row['cwd'] or '?'}",
    ]


def interaction_lines(projection: Mapping[str, Any] | None, *, numbered: bool = False) -> list[str]:
    """What the agent asks now: its kind, each question with its options, its decisions;
    or why a person must answer it at the terminal. Nothing when it asks nothing.

    ``numbered``: options and decisions by the numbers `akk answer` takes them by, a row
    that takes the person's own text marked so.
    """
    if projection is None:
        return []
    kind = str(projection["kind"]).replace("_", " ")
    kind = ("an " if kind[:1] in "aeiou" else "a ") + kind
    if projection["state"] == "manual_required":
        at = f" at pane {projection['pane']}" if projection.get("pane") else ""
        lines = [f"asks:     {kind} that needs a person{at}"]
        lines.append(f"{INDENT}{projection['reason']}")
        if projection.get("detail"):
            lines.append(f"{INDENT}{projection['detail']}")
        return lines
    step = projection.get("step")
    where = f" (step {step['index']} of {step['total']})" if step and step["total"] > 1 else ""
    if step is None and not projection["questions"]:
        where = ", not opened yet (its questions show once it is)"  # Codex's queued question
    lines = [f"asks:     {kind}{where}"]
    numbered_options = numbered and projection["kind"] != "permission"  # decisions answer it
    for question in projection["questions"]:
        header = f"{question['header']}: " if question.get("header") else ""
        lines.append(f"{INDENT}{header}{question['prompt']}")
        # What it would run or change, quoted: a person decides on it.
        detail = str(question.get("detail") or "").splitlines()
        lines.extend(f"{INDENT}  > {line}" for line in detail)
        options = question.get("options", [])
        for n, option in enumerate(options, 1):
            own = " (then your own text)" if option.get("role") in TEXT_ROLES else ""
            lines.append(f"{INDENT}  {n}. {option['label']}{own}" if numbered_options
                         else f"{INDENT}  - {option['label']}")  # fmt: skip
        if numbered_options and unlisted_text_row(projection, question):
            lines.append(f"{INDENT}  {len(options) + 1}. {OWN_TEXT}")
    decisions = projection.get("decisions") or []
    if decisions and numbered:
        lines.append(f"{INDENT}decisions:")
        lines.extend(f"{INDENT}  {n}. {decision}" for n, decision in enumerate(decisions, 1))
    elif decisions:
        lines.append(f"{INDENT}decisions: {', '.join(decisions)}")
    return lines


def unlisted_text_row(projection: Mapping[str, Any], question: Mapping[str, Any]) -> bool:
    """Whether ``question`` takes the person's own text on a row its options leave out
    (Claude's "Type something."): the prompt takes free text, and no listed row does."""
    return (
        bool((projection.get("capabilities") or {}).get("free_text"))
        and question["response_kind"] in ("single_select", "multi_select")
        and not any(option.get("role") in TEXT_ROLES for option in question["options"])
    )


def shown_lines(result: Mapping[str, Any]) -> list[str]:
    """A status reply's `asks:` lines, then its `screen:` lines."""
    return [*interaction_lines(result["interaction"]), *excerpt_lines(result)]


def excerpt_lines(result: Mapping[str, Any]) -> list[str]:
    """The reply's screen excerpt under a heading, or why it was withheld."""
    if result.get("screen_excerpt_withheld"):
        return [f"screen:   withheld ({result['screen_excerpt_withheld']}): it asks for input "
                "that is never shown"]  # fmt: skip
    shown = result.get("screen_excerpt")
    if not shown:
        return []
    return ["screen:   (its last lines, redacted)", *(f"{INDENT}{line}" for line in shown)]
