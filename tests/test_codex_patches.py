"""A Codex patch approval in a pane, bound to the one ``apply_patch`` call its rollout holds.

Codex draws the patch above its prompt, in the transcript, and the prompt itself names
only the one file it writes (``Destination:``). The rollout records the call with the
whole patch before the prompt shows (a ``custom_tool_call``), and its result once
answered (a ``custom_tool_call_output``). So the prompt is actionable only while exactly
one such call is pending and it writes that file and no other, and the controller is
offered the call's patch. The records below are shaped as 0.171.0 wrote them in the lab
(the ``codex_patch`` scenario); the screens are every pinned version's capture.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from akk.evidence import open_calls
from akk.evidence.files import identify
from akk.evidence.model import FilePatch, PendingCall, file_patch, input_digest
from akk.profiles.codex import PROFILES
from akk.profiles.observation import Observation, OptionRole
from akk.profiles.permission import (
    FILE_SHOWN_MAX,
    FILE_TOO_LONG,
    PENDING_CALL_MISMATCH,
    PENDING_CALL_UNKNOWN,
    asked_tool,
    bind_pending,
    patches_only,
)
from akk.protocol.projection import project
from akk.qualify import scenarios as sc
from akk.qualify.scenarios import PATCH_CALL
from akk.screen import IdMinter
from akk.screen.fingerprint import Appearance
from tests import corpus

CWD = "/tmp/akk-lab-x/work"
PATCH = PATCH_CALL.patch  # adds ../lab-patched.txt
VERSIONS = [profile.id.removeprefix("codex@") for profile in PROFILES]


def _line(kind: str, payload: dict[str, object]) -> str:
    return json.dumps({"timestamp": "2026-12-07T21:56:06.529Z", "type": kind, "payload": payload})


ROLLOUT = [
    _line("session_meta", {"id": "01a25281-c149-7821-9fea-0b60da7662a1", "cwd": CWD}),
    _line("turn_context", {"turn_id": "t1", "cwd": CWD, "approval_policy": "on-request"}),
    _line(
        "response_item",
        {
            "type": "custom_tool_call",
            "id": "ctc_lab_0",
            "status": "completed",
            "call_id": "call_lab_0",
            "name": "apply_patch",
            "input": PATCH,
        },
    ),
    _line(
        "response_item",
        {
            "type": "custom_tool_call_output",
            "call_id": "call_lab_0",
            "output": "Exit code: 0\nOutput:\nSuccess. Updated the following files:\n"
            "A ../lab-patched.txt\n",
        },
    ),
]


def test_the_rollout_shows_the_patch_pending_until_its_output_is_written(tmp_path: Path) -> None:
    written = tmp_path / "rollout-2026-12-07T21-56-00-01a25281-c149-7821-9fea-0b60da7662a1.jsonl"
    for upto, pending in ((2, 0), (3, 1), (4, 0)):
        written.write_text("".join(line + "\n" for line in ROLLOUT[:upto]))
        found = identify(str(written))
        assert found is not None
        calls = open_calls("codex", found[0])
        assert len(calls) == pending, upto
        if pending:
            (call,) = calls
            assert (call.call_id, call.tool, call.command) == ("call_lab_0", "apply_patch", None)
            assert call.patches == FilePatch(PATCH, ("../lab-patched.txt",), CWD)
            assert call.input_sha256 == input_digest(PATCH)


def test_a_patch_names_its_files_and_nothing_else_is_one() -> None:
    two = "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** Move to: b.txt\n*** End Patch\n"
    assert file_patch(two, None) == FilePatch(two, ("a.txt", "b.txt"), None)
    assert file_patch("*** Begin Patch\n*** End Patch\n", CWD) is None  # no file
    assert file_patch("*** Add File: a\n+x\n", CWD) is None  # no envelope
    assert file_patch({"input": PATCH}, CWD) is None


def test_the_destinations_are_the_files_the_patch_writes() -> None:
    one = file_patch(PATCH, CWD)
    assert one is not None
    written = "/tmp/akk-lab-x/lab-patched.txt"
    assert patches_only((written,), one)
    assert not patches_only(("/tmp/akk-lab-x/work/lab-patched.txt",), one)
    assert not patches_only((written,), attrs.evolve(one, cwd=None))
    absolute = attrs.evolve(one, paths=("/etc/x/../lab-patched.txt",))
    assert patches_only(("/etc/lab-patched.txt",), absolute)
    # Every file the patch names must be drawn (in Codex's order, sorted), and no other:
    # one not drawn is never approved from the prompt.
    both = attrs.evolve(one, paths=("../lab-patched.txt", "../other.txt"))
    other = "/tmp/akk-lab-x/other.txt"
    assert patches_only((written, other), both) and patches_only((other, written), both)
    assert not patches_only((written,), both)
    assert not patches_only((written, other, "/tmp/akk-lab-x/third.txt"), both)
    assert not patches_only((written, written), one)


def _screen(version: str) -> Observation:
    label = next((corpus.ROOT / "codex" / version).glob("codex_patch-permission.json"))
    _, observation = corpus.observed(label)
    assert observation.actionable, observation.reason
    return observation


def patch_call(patch: str, cwd: str | None, call_id: str = "call_lab_0") -> PendingCall:
    """A pending ``apply_patch`` call of `patch`, its relative paths from `cwd`."""
    return PendingCall(
        call_id, "apply_patch", None, input_digest(patch), patches=file_patch(patch, cwd)
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_a_patch_approval_is_actionable_only_for_its_one_pending_call(version: str) -> None:
    observation = _screen(version)
    assert asked_tool(observation) == "apply_patch"
    prompt = observation.prompt
    assert prompt is not None
    (question,) = prompt.questions
    (destination,) = question.patched
    assert destination.endswith("/lab-patched.txt")
    roles = [option.role for option in question.options]
    assert roles == [OptionRole.APPROVE_ONCE, OptionRole.APPROVE_PERSISTENT, OptionRole.REJECT]
    # The lab's working directory is the destination's folder's `work`.
    cwd = destination.removesuffix("/lab-patched.txt") + "/work"
    call = patch_call(PATCH, cwd)
    bound, matched = bind_pending(observation, [call])
    assert matched == call and bound.actionable
    (offered,) = bound.prompt.offered if bound.prompt else ()
    assert offered.detail == f"{destination}\n\n{PATCH}"
    other_file = PATCH.replace("lab-patched.txt", "lab-other.txt")
    refused = {
        "the file unreadable": (None, PENDING_CALL_UNKNOWN),
        "no pending call": ([], PENDING_CALL_UNKNOWN),
        "two pending patches": ([call, patch_call(PATCH, cwd, "call_2")], PENDING_CALL_UNKNOWN),
        "another file": ([patch_call(other_file, cwd)], PENDING_CALL_MISMATCH),
        "no working directory": ([patch_call(PATCH, None)], PENDING_CALL_MISMATCH),
        "not a patch": (
            [PendingCall("call_lab_0", "apply_patch", None, "0" * 64)],
            PENDING_CALL_MISMATCH,
        ),
        "too long": (
            [patch_call(PATCH.replace("+patched", "+" + "x" * FILE_SHOWN_MAX), cwd)],
            FILE_TOO_LONG,
        ),
    }
    for why, (calls, reason) in refused.items():
        bound, matched = bind_pending(observation, calls)
        assert matched is None and not bound.actionable, why
        assert bound.reason == reason, why


def test_a_patch_s_projection_shows_the_call_and_redacts_a_key_in_it() -> None:
    observation = _screen(VERSIONS[-1])
    assert observation.prompt is not None
    (question,) = observation.prompt.questions
    (destination,) = question.patched
    key = "sk-ant-api03-" + "Q" * 40
    keyed = PATCH.replace(sc.PATCH_LINE, key)
    bound, call = bind_pending(
        observation, [patch_call(keyed, destination.rsplit("/", 1)[0] + "/w")]
    )
    assert call is not None and bound.prompt is not None
    projection = project(
        bound.prompt, seen=Appearance(b"f" * 32, 0), ids=IdMinter(b"k" * 32), agent="codex",
        turn_id=None,
    )  # fmt: skip
    detail = projection["questions"][0]["detail"]
    assert detail.startswith(f"{destination}\n\n*** Begin Patch\n") and key not in detail
    assert projection["decisions"] == ["approve_once", "reject"]
