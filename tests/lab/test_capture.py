"""The fixture corpus: complete, labelled consistently, and still what the clients show.

The first group reads the committed corpus only (fast, no clients): every
pinned version has every capture point at both sizes, and each screen carries
the labels its classification names. The second group re-captures a sample on
the real clients and checks that the plans still reach the same points with the
same labels, so a drifted client or plan shows up here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import trio

from akk.profiles.wrap import joiner
from akk.qualify.capture import fixture_stem, run_plan
from akk.qualify.launcher import CLAUDE_PROMPT, CODEX_PROMPT
from akk.qualify.plans.corpus import PLANS
from akk.qualify.plans.plan import SIZES
from tools.lab import clients
from tools.lab.clients import FIXTURES, Client

_SGR = re.compile(r"\x1b\[[0-9;:]*m")
# Claude's gutter before a long question's rows, and alone for a blank line of one.
_GUTTER = re.compile(r"^ *│(?: |$)", re.MULTILINE)
_STATES = {
    "idle",
    "idle_draft",
    "working",
    "permission",
    "questionnaire",
    "async_question",
    "blocked",
    "unknown",
}
_RESPONSE_KINDS = {"single_select", "multi_select", "free_text", "confirm"}


def _plain(screen: str) -> str:
    return _SGR.sub("", screen)


def _flat(text: str) -> str:
    # Narrow panes wrap long labels; compare with whitespace runs collapsed, and none
    # between two wide characters (CJK text has no spaces: it is cut at a row's edge).
    words = text.split()
    flat = words[:1]
    for word in words[1:]:
        flat.append(joiner(flat[-1], word, full=True) + word)
    return "".join(flat)


_COLUMN_GAP = re.compile(r" {3,}")
"""Between the label and the description of a Codex option drawn side by side."""


def _left_column(screen: str) -> str:
    """Each row's text up to its first wide gap, the rows joined: where a label wraps beside
    its description (Codex), this reads the label's rows on their own."""
    return _flat(" ".join(_COLUMN_GAP.split(line.strip())[0] for line in screen.splitlines()))


def _shows(line: str, label: object) -> bool:
    """Whether a menu row shows `label`, or its first row where the label wraps."""
    text = str(label)
    shown = _COLUMN_GAP.split(line.rstrip().split(". ", 1)[-1])[0]
    return text in line or (bool(shown) and text.startswith(shown) and shown != line.rstrip())


def label_problems(label: dict[str, object], screen: str) -> list[str]:
    """What the classification names that the screen does not show."""
    agent = label["agent"]
    expected = label["expected"]
    assert isinstance(expected, dict)
    plain = _plain(screen)
    flat = _flat(_GUTTER.sub("", plain))
    cursor = CLAUDE_PROMPT if agent == "claude" else CODEX_PROMPT
    problems = []
    if expected["state"] not in _STATES:
        problems.append(f"unknown state {expected['state']!r}")
    wanted: list[str] = [str(expected[key]) for key in ("draft", "reply") if expected[key]]
    if expected["command"]:
        wanted.append(str(expected["command"]))
    for question in expected["questions"]:
        if question["response_kind"] not in _RESPONSE_KINDS:
            problems.append(f"unknown response kind {question['response_kind']!r}")
        wanted += [question["prompt"], *question["options"]]
        typed = question["typed_text"]
        # Claude's free-text row shows the typed text in place of its label.
        hidden = question["current_row"] if typed and agent == "claude" else None
        wanted += [row for row in question["extra_rows"] if row != hidden]
        if typed:
            wanted.append(typed)
        current = typed if hidden else question["current_row"]
        lines = [line for line in plain.splitlines() if cursor in line and _shows(line, current)]
        if current is not None and not lines:
            problems.append(f"no {cursor} cursor row showing {current!r}")
    left = _left_column(plain)
    problems += [f"missing {t!r}" for t in wanted if _flat(t) not in flat and _flat(t) not in left]
    return problems


def _corpus_labels(client: Client) -> list[Path]:
    return sorted((FIXTURES / client.agent / client.version).glob("**/*.json"))


@pytest.mark.parametrize("client", clients.PINNED, ids=lambda client: client.name)
def test_corpus_has_every_capture_point_of_every_plan(client: Client) -> None:
    expected = {
        fixture_stem(FIXTURES, client, plan.name, step, cols, rows)
        for plan in PLANS.values()
        if plan.applies_to(client)
        for step in plan.steps
        for cols, rows in SIZES
        if plan.fits(cols, rows)
    }
    present = {path.with_suffix("") for path in _corpus_labels(client)}
    missing = sorted(str(path.relative_to(FIXTURES)) for path in expected - present)
    assert not missing, (
        f"{len(missing)} fixtures missing, e.g. {missing[:5]}; run "
        f"`python -m tools.lab capture --all --agent {client.agent} --version {client.version}`"
    )


@pytest.mark.parametrize("client", clients.PINNED, ids=lambda client: client.name)
def test_corpus_screens_show_what_their_labels_name(client: Client) -> None:
    failures = {}
    for label_path in _corpus_labels(client):
        label = json.loads(label_path.read_text())
        assert (label["agent"], label["version"]) == (client.agent, client.version)
        screen = label_path.with_suffix(".ansi").read_text()
        if problems := label_problems(label, screen):
            failures[str(label_path.relative_to(FIXTURES))] = problems
    assert not failures, json.dumps(failures, indent=1)


_SAMPLE = [
    ("claude", "2.1.328", "questionnaire_multi_question"),
    ("claude", "2.1.263", "questionnaire_single3"),
    ("claude", "2.1.266", "claude_bash"),
    ("codex", "0.169.0", "codex_rui_notes"),
    ("codex", "0.153.4", "codex_exec"),
    ("codex", "0.155.1", "blocked_trust"),
]


@pytest.mark.lab
@pytest.mark.parametrize(("agent", "version", "plan"), _SAMPLE)
async def test_recapture_keeps_the_labels(
    agent: str, version: str, plan: str, tmp_path: Path
) -> None:
    client = clients.get(agent, version)
    cols, rows = SIZES[0]
    with trio.fail_after(90):
        written = await run_plan(PLANS[plan], client, cols=cols, rows=rows, out=tmp_path)

    assert [pair.label.name for pair in written] == [
        fixture_stem(tmp_path, client, plan, step, cols, rows).name + ".json"
        for step in PLANS[plan].steps
    ]
    for pair in written:
        fresh = json.loads(pair.label.read_text())
        committed_path = FIXTURES / pair.label.relative_to(tmp_path)
        committed = json.loads(committed_path.read_text())
        assert fresh == committed, f"{committed_path} differs from the plan; re-capture"
        assert label_problems(fresh, pair.screen.read_text()) == [], pair.screen.name
