"""What an agent's own file proves about how a task ended (`akk.backends.outcomes`): the
summary and final message a controller is shown, bounded and redacted."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akk import evidence
from akk.actors.turn import FINAL_MESSAGE_LIMIT
from akk.backends.outcomes import bounded_final, file_outcome, final_summary
from akk.protocol.redaction import MASK, withheld
from akk.qualify.scenarios import huge_final
from akk.store.turns import TurnState

KEY = "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"


def progress(outcome: Any, final: str | None, failure: str | None = None) -> evidence.Progress:
    return evidence.Progress(
        accepted=True, session_id="s", outcome=outcome, final_message=final, failure=failure,
        usage=None, usage_status=evidence.UsageStatus.UNKNOWN,
    )  # fmt: skip


@pytest.mark.parametrize("final", [None, "", "  \n \n", "\n"])
def test_a_message_with_no_words_gets_the_stock_summary(final: str | None) -> None:
    assert final_summary(final) == "the agent finished the Turn"


def test_the_summary_is_the_first_line_redacted_then_cut() -> None:
    assert final_summary("\n  Fixed it.\nDetails follow.") == "Fixed it."
    summary = final_summary("x " * 95 + KEY + " and more")
    assert len(summary) == 200 and KEY[:8] not in summary and summary.endswith(MASK)


@pytest.mark.parametrize(
    "final",
    [
        "Here it is: 9f86d081884c7d659a2feaa0\nc55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "Key: Zx8Qw2Er5Ty7Ui9OpAs3Df6Gh\nJk1Lz4Xc7Vb0Nm2Qw5Er8Ty1Ui",
    ],
    ids=["hex", "mixed"],
)
def test_a_key_the_message_wraps_is_masked_in_the_summary_as_in_the_message(final: str) -> None:
    head = final.split("\n")[0].split(": ")[1]
    assert bounded_final(final).split("\n")[0].endswith(MASK)  # masked with the next row
    summary = final_summary(final)
    assert summary.endswith(MASK) and head[:8] not in summary, summary


def test_a_long_final_message_is_redacted_then_bounded_with_an_ellipsis() -> None:
    final = "\n\n".join(f"paragraph {n}: token = {KEY}" for n in range(20_000))
    found = file_outcome(progress("done", final))
    assert found is not None and found.state is TurnState.DONE
    shown = found.changes["final_message"]
    assert isinstance(shown, str) and len(shown) == FINAL_MESSAGE_LIMIT and shown.endswith("…")
    assert KEY[:8] not in shown and shown.startswith(f"paragraph 0: token = {MASK}")


def test_a_final_message_at_the_limit_is_kept_whole_and_one_past_it_is_marked_cut() -> None:
    whole = "x" * FINAL_MESSAGE_LIMIT
    assert bounded_final(whole) == whole
    cut = bounded_final(whole + "y")
    assert len(cut) == FINAL_MESSAGE_LIMIT and cut == "x" * (FINAL_MESSAGE_LIMIT - 1) + "…"


def test_a_failure_is_redacted_before_it_is_cut() -> None:
    found = file_outcome(progress("failed", None, failure="x " * 95 + KEY))
    assert found is not None and found.state is TurnState.FAILED
    assert KEY[:8] not in found.summary and MASK in found.summary


BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@given(st.lists(st.sampled_from(["a", " ", "\t", *BREAKS])).map("".join))
def test_the_first_line_is_the_one_splitlines_reads(final: str) -> None:
    """The first line is found without splitting the rest: the same line as before."""
    lines = final.strip().splitlines()
    expected = lines[0] if lines else "the agent finished the Turn"
    assert final_summary(final) == expected


def test_a_message_of_long_rows_is_withheld_not_redacted_for_seconds() -> None:
    """40 rows of 64 KiB of base64 (the lab's `huge_final`): redacting their chains read 23 s
    of the server's thread. The rules' budget runs out first, and nothing of the text is
    shown. The summary, the first row redacted with the rows below it, is withheld too (the
    first row alone would be cheap, but a key may continue below it)."""
    final = huge_final()
    found = file_outcome(progress("done", final))
    assert found is not None and found.state is TurnState.DONE
    assert found.changes["final_message"] == found.summary == withheld(len(final))
