"""The status excerpt never carries a secret and stays bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from akk.protocol.excerpt import MAX_LINES, MAX_WIDTH, excerpt
from akk.protocol.redaction import MASK, redact


def test_masks_keys_and_tokens() -> None:
    line = (
        "export ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuv "
        "GH=ghp_0123456789abcdefghijABCDEFGHIJ sha=0123456789abcdef0123456789abcdef"
    )
    redacted = redact(line)
    assert (
        "sk-ant" not in redacted and "ghp_" not in redacted and "0123456789abcdef0" not in redacted
    )
    assert redacted.count(MASK) == 3
    assert redact("Do you want to proceed? ❯ 1. Yes") == "Do you want to proceed? ❯ 1. Yes"
    assert redact("/home/user/project/src/main.py:120") == "/home/user/project/src/main.py:120"


def test_keeps_the_last_stretch_bounded() -> None:
    lines = ["", "first", *[f"line {i}" for i in range(100)], "", "  "]
    out = excerpt(lines)
    assert out is not None and len(out) == MAX_LINES
    assert out[-1] == "line 99"


@given(st.lists(st.text(max_size=400), max_size=80), st.text(min_size=1, max_size=8))
def test_a_key_never_survives(lines: list[str], noise: str) -> None:
    key = "sk-live-" + "A1b2C3d4E5f6G7h8"
    lines = [*lines, f"{noise} {key} {noise}"]
    out = excerpt(lines)
    assert out is not None and len(out) <= MAX_LINES
    assert all(len(line) <= MAX_WIDTH for line in out)
    assert all(key not in line for line in out)
