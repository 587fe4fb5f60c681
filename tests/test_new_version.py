"""The comparison `akk qualify` and `python -m tools.lab new-version` share: nearest version,
jobs, outcomes, row differences, report.

Fed with committed fixtures: a fixture against itself is "same"; Claude 2.1.328's
screens read with the 2.1.263 profile differ where 2.1.328 draws differently; a
theme fixture against the dark one differs in colour only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from akk.profiles.qualified import as_version
from akk.profiles.registry import PROFILES
from akk.qualify import compare, row_diff, trial
from akk.qualify.plans import corpus
from akk.qualify.plans.claude import CLAUDE_VARIANT_SIZES
from akk.qualify.plans.plan import SIZES
from akk.screen.render import render
from tools.lab import clients
from tools.lab import new_version as nv
from tools.lab.__main__ import _parser
from tools.lab.clients import Client

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture(agent: str, version: str, name: str, size: str = "") -> tuple[str, dict[str, Any]]:
    """A committed screen and its label."""
    folder = FIXTURES / agent / version / size
    return (folder / f"{name}.ansi").read_text(), json.loads((folder / f"{name}.json").read_text())


def point(label: dict[str, Any]) -> compare.Point:
    return compare.Point(label["plan"], label["step"], label["cols"], label["rows"])


# ---------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("agent", "version", "nearest"),
    [
        ("claude", "2.1.333", "2.1.332"),
        ("claude", "2.1.328", "2.1.328"),
        ("claude", "2.1.300", "2.1.267"),
        ("claude", "2.1.265", "2.1.263"),
        ("claude", "2.0.9", "2.1.263"),  # below every pinned one: the lowest above
        ("codex", "0.170.0", "0.169.0"),
        ("codex", "0.154.9", "0.154.0"),
        ("codex", "0.16.0", "0.153.4"),  # numeric, not string, order
        ("codex", "1.0.0", "0.171.0"),
    ],
)
def test_nearest_pinned(agent: str, version: str, nearest: str) -> None:
    assert nv.nearest_pinned(agent, version) == Client(agent, nearest)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["latest", "2", "2.1.x", "v2.1.332", "2.1.332-beta", ""])
def test_a_version_is_dotted_numbers(version: str) -> None:
    with pytest.raises(ValueError):
        compare.version_key(version)


# ---------------------------------------------------------------- jobs


def test_jobs_are_the_nearest_versions_corpus_run_once_each_on_the_new_client() -> None:
    new = Client("codex", "0.171.0")
    jobs = trial.jobs_for(new, "0.169.0")
    assert {job.client for job in jobs} == {new}
    keys = [(job.plan.name, job.cols, job.rows) for job in jobs]
    assert len(keys) == len(set(keys))
    nearest = {
        (j.plan.name, j.cols, j.rows) for j in corpus.corpus_jobs([clients.get("codex", "0.169.0")])
    }
    assert set(keys) == nearest
    names = {job.plan.name for job in jobs}
    # Version-kept plans follow the nearest version: 0.169.0 prints async questions.
    assert "codex_rui_async_text" in names and "codex_rui_async" not in names
    assert all(job.plan.applies_to(new) for job in jobs)


def test_jobs_limited_to_named_plans_at_every_size() -> None:
    new = Client("claude", "2.1.332")
    jobs = trial.jobs_for(new, "2.1.328", ["echo", "claude_bash_warning"])
    sizes = {(job.plan.name, job.cols, job.rows) for job in jobs}
    assert sizes == {
        (plan, cols, rows)
        for plan in ("echo", "claude_bash_warning")
        for cols, rows in (*SIZES, *CLAUDE_VARIANT_SIZES)
    }
    with pytest.raises(ValueError, match="no capture plan nope"):
        trial.jobs_for(new, "2.1.328", ["echo", "nope"])
    with pytest.raises(ValueError, match="none of the plans"):
        trial.jobs_for(new, "2.1.328", ["codex_exec"])
    with pytest.raises(ValueError, match="none of the plans"):
        trial.jobs_for(new, "2.1.328", [])


def test_the_captures_never_go_into_fixtures() -> None:
    for out in (clients.FIXTURES, clients.FIXTURES / "claude", clients.FIXTURES.parent):
        with pytest.raises(ValueError, match="never writes there"):
            nv.check_out(out)
    nv.check_out(Path("/tmp/somewhere"))


def test_the_command_line() -> None:
    args = _parser().parse_args(
        ["new-version", "codex", "0.171.0", "--scenarios", "echo,codex_exec", "--out", "/tmp/x"]
    )
    assert (args.agent, args.version, args.scenarios, args.out) == (
        "codex",
        "0.171.0",
        "echo,codex_exec",
        Path("/tmp/x"),
    )
    assert args.parallel == 2 and args.max_rows == row_diff.DEFAULT_MAX_ROWS


# ---------------------------------------------------------------- comparisons


SAMPLES = [
    ("claude", "2.1.263", "claude_bash-permission", ""),
    ("claude", "2.1.328", "questionnaire_multi-review", ""),
    ("claude", "2.1.328", "draft_paste5000", "80x24"),
    ("codex", "0.169.0", "codex_rui_three-q2", ""),
    ("codex", "0.155.1", "codex_rui_async-queued", "80x24"),
    ("codex", "0.153.4", "blocked_trust", ""),
]


@pytest.mark.parametrize(("agent", "version", "name", "size"), SAMPLES)
def test_a_fixture_against_itself_is_the_same(
    agent: str, version: str, name: str, size: str
) -> None:
    screen, label = fixture(agent, version, name, size)
    profile = PROFILES[(agent, version)]
    compared = compare.compare(point(label), label["expected"], screen, screen, profile, profile)
    assert compared.status == "same" and compared.rows == ()
    assert compared.old == compared.new and compared.new is not None
    assert compared.new.problems == ()
    text = compare.report(agent, version, version, [compared])
    assert "summary: 1 same, 0 differ, 0 not producible (of 1 screens)" in text
    assert "DIFFERS" not in text


def test_a_changed_permission_layout_differs_with_the_rows_that_moved() -> None:
    old_screen, label = fixture("claude", "2.1.263", "claude_bash-permission")
    new_screen, _ = fixture("claude", "2.1.328", "claude_bash-permission")
    old = PROFILES[("claude", "2.1.263")]
    compared = compare.compare(
        point(label),
        label["expected"],
        old_screen,
        new_screen,
        old,
        as_version(old, "2.1.328"),
    )
    assert compared.status == "differs"
    assert compared.old is not None and compared.old.state == "permission"
    assert compared.new is not None and compared.new.state == "unknown"
    assert compared.new.reason and compared.new.problems
    # 2.1.328 fences the command with dashed rules and puts the description above it.
    fence = [d for d in compared.rows if d.new_text is not None and d.new_text.startswith("╌╌╌")]
    assert fence and all("╌" not in (d.old_text or "") for d in fence)
    # The banner's version and the run's temp dir are no difference (the logo beside is).
    same = compare.run_neutral("2.1.263", "2.1.328")
    for d in compared.rows:
        assert d.styles or same(d.old_text or "") != same(d.new_text or "")
    logo = next(d for d in compared.rows if d.new_text and "/tmp/akk-lab-" in d.new_text)
    assert logo.old_text is not None and logo.old_text.startswith("  ▝▝ ▝▝    /tmp")

    text = compare.report("claude", "2.1.328", "2.1.263", [compared])
    assert "DIFFERS         claude_bash-permission 120x40" in text
    assert "expected:         permission, kind permission, command 'touch lab-bash-ran" in text
    assert "2.1.263 fixture:  permission/permission permission" in text
    assert f"2.1.328 capture:  unknown: {compared.new.reason}" in text
    assert "2.1.263 │ " in text and "2.1.328 │ ╌╌╌" in text
    assert "summary: 0 same, 1 differ, 0 not producible (of 1 screens)" in text
    assert "  1  unknown: unexpected row N in the permission body" in text


def test_an_equal_text_in_another_colour_shows_as_a_style_difference() -> None:
    # The light theme draws 2.1.328's composer rules in 8a8a8a instead of 808080.
    dark, _ = fixture("claude", "2.1.328", "echo-idle")
    light, _ = fixture("claude", "2.1.328", "theme_light_echo-idle")
    rows = row_diff.diff_rows(
        render(dark, 120, 40), render(light, 120, 40), same=compare.run_neutral("2.1.328")
    )
    same = compare.run_neutral("2.1.328")
    assert rows and all(d.styles and same(d.old_text or "") == same(d.new_text or "") for d in rows)
    rules = [d for d in rows if d.new_text == "─" * 120]
    assert [d.styles for d in rules] == [
        ("cols 0-119 '───────────────────────…': fg 808080→8a8a8a",)
    ] * 2
    # Words of one colour are one span, the spaces between them included.
    status = next(d for d in rows if d.new_text and "manual mode on" in d.new_text)
    assert len(status.styles) == 1 and status.styles[0].endswith("fg 949494→626262")

    lines = row_diff.format_row_diffs(rows, "2.1.328", "light")
    assert " 36 style   │ " + "─" * 120 in lines
    assert "            │   cols 0-119 '───────────────────────…': fg 808080→8a8a8a" in lines


def test_a_prompt_drawn_lower_down_is_one_moved_run_and_reads_the_same() -> None:
    # Claude 2.1.332 draws its prompts at the bottom of the pane, 2.1.328 under the
    # transcript; the profile reads bottom-up, so both classify alike.
    screen, label = fixture("claude", "2.1.328", "questionnaire_single2-q1")
    lines = screen.split("\n")
    lower = "\n".join([*lines[:7], *[""] * 19, *lines[7:21]]) + "\n"
    profile = PROFILES[("claude", "2.1.328")]
    compared = compare.compare(point(label), label["expected"], screen, lower, profile, profile)
    assert compared.status == "same"
    rows = row_diff.diff_rows(render(screen, 120, 40), render(lower, 120, 40))
    assert len(rows) == 11 and all(d.moved and not d.styles for d in rows)
    assert {(d.new_y or 0) - (d.old_y or 0) for d in rows} == {19}
    assert row_diff.format_row_diffs(rows, "2.1.328", "lower") == [
        "  7 moved   │ rows 7-20 (11 with text) are now at 26-39 (19 rows down): "
        "'───────────────────────────────────────…' … "
        "'Enter to select · ↑/↓ to navigate · Esc…'"
    ]
    # The report names the screen as drawn differently, and the kind of difference.
    text = compare.report("claude", "2.1.328", "2.1.328", [compared])
    assert "(drawn differently: rows 11 moved)" in text
    assert "of the 1 same, 1 are drawn differently (1 only by rows moved)" in text
    assert (
        "     1 screen   rows moved down  (e.g. questionnaire_single2-q1 120x40: row 7 is now "
        "row 26: '───────────────────────────────────────…')" in text
    )


def test_the_row_listing_is_bounded() -> None:
    old, _ = fixture("claude", "2.1.263", "questionnaire_multi-q1")
    new, _ = fixture("claude", "2.1.328", "questionnaire_multi-q1")
    rows = row_diff.diff_rows(render(old, 120, 40), render(new, 120, 40))
    assert len(rows) > 4
    lines = row_diff.format_row_diffs(rows, "2.1.263", "2.1.328", max_lines=6)
    assert len(lines) <= 7 and lines[-1].startswith("… ") and lines[-1].endswith("differing rows")
    assert 0 < int(lines[-1].split()[1]) < len(rows)
    assert row_diff.format_row_diffs(rows, "2.1.263", "2.1.328", max_lines=1000)[-1].startswith(" ")


def test_a_screen_not_captured_is_not_producible() -> None:
    screen, label = fixture("codex", "0.169.0", "codex_exec-permission", "80x24")
    profile = PROFILES[("codex", "0.169.0")]
    failure = "ScreenTimeout: codex-0.171.0: no 'Would you like to run' within 20.0 s"
    missing = compare.compare(
        point(label), label["expected"], screen, None, profile, profile, failure=failure
    )
    same = compare.compare(point(label), label["expected"], screen, screen, profile, profile)
    assert (missing.status, missing.note, missing.new) == ("not_producible", failure, None)
    phases = (
        compare.Phase("install", 1.25, "already installed"),
        compare.Phase("capture", 300.0, "2 plan runs"),
        compare.Phase("classify", 2.5),
    )
    text = compare.report("codex", "0.171.0", "0.169.0", [same, missing], phases)
    assert f"NOT PRODUCIBLE  codex_exec-permission 80x24  {failure}" in text
    assert "summary: 1 same, 0 differ, 1 not producible (of 2 screens)" in text
    assert (
        "time: install 1.2 s (already installed), capture 300.0 s (2 plan runs), classify 2.5 s"
        in text
    )


def test_without_a_committed_fixture_the_label_decides() -> None:
    screen, label = fixture("codex", "0.169.0", "codex_rui_one-q1")
    profile = PROFILES[("codex", "0.169.0")]
    held = compare.compare(point(label), label["expected"], None, screen, profile, profile)
    assert (held.status, held.note) == ("same", "no committed fixture")
    wrong = dict(label["expected"], state="permission")
    broken = compare.compare(point(label), wrong, None, screen, profile, profile)
    assert broken.status == "differs" and broken.new is not None
    assert broken.new.problems == ("state questionnaire, not permission",)
    assert "(none committed)" in compare.report("codex", "0.169.0", "0.169.0", [broken])


def test_a_label_mismatch_is_named() -> None:
    screen, label = fixture("codex", "0.169.0", "codex_rui_three-q2")
    profile = PROFILES[("codex", "0.169.0")]
    expected = json.loads(json.dumps(label["expected"]))
    expected["questions"][0]["current_row"] = "Nope"
    got = compare.outcome(profile, screen, label["cols"], label["rows"], expected)
    assert got.problems == (
        f"q1 current_row {[label['expected']['questions'][0]['current_row']]!r}, not ['Nope']",
    )
    assert got.key != compare.outcome(profile, screen, 120, 40, label["expected"]).key
