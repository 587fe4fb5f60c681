"""A client the lab cannot drive is refused with what the lab saw, never a traceback.

A stand-in Claude (a small C program, so the lab finds it in its pane as it
finds a real client) prints an unpinned version and exits without ever drawing
a composer. `akk qualify` must refuse it with the reason and the last screen,
leave nothing running, and still give every other candidate its own result;
`--auto-qualify` must log what stopped it and never leave it "running".
"""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from akk import cli
from akk.discovery.identity import TerminalIdentity
from akk.discovery.process import sha256_file
from akk.profiles.registry import PINNED
from akk.qualify import auto, command, qualification
from akk.qualify.auto import AutoQualifier
from akk.qualify.command import Attempt
from akk.qualify.launcher import LabError

_NO_COMPOSER = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) { puts(VERSION " (Claude Code)"); return 0; }
    FILE *log = fopen(LOG, "a");
    fprintf(log, "%s\n", argv[0]);
    fclose(log);
    puts("a stand-in that never draws a composer");
    fflush(stdout);
    sleep(1);
    return 3;
}
"""


def _stand_in(tmp_path: Path, version: str) -> Path:
    source = tmp_path / "agent.c"
    source.write_text(_NO_COMPOSER)
    binary = tmp_path / version / "claude"
    binary.parent.mkdir()
    log = tmp_path / "ran.log"
    subprocess.run(
        ["cc", "-O", f'-DVERSION="{version}"', f'-DLOG="{log}"', "-o", str(binary), str(source)],
        check=True,
    )
    return binary


def _left(copy: Path) -> list[int]:
    """Processes still running the copy (a lab run must leave none)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(copy).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


async def test_a_client_that_never_reaches_its_composer_is_refused_with_what_the_lab_saw(
    tmp_path: Path,
) -> None:
    binary = _stand_in(tmp_path, "2.1.999")
    with trio.fail_after(60):
        async with qualification.pinned("claude", binary) as found:
            judged = await qualification.qualify(found, PINNED.pinned)
            copy = found.copy
    assert copy is not None and not judged.qualified
    assert judged.problems == [
        "evidence: the lab could not run the echo Turn: "
        "claude-2.1.999 exited while waiting for idle composer"
    ], judged.problems
    assert judged.evidence.ran is False and judged.evidence.screen is not None
    assert "never draws a composer" in judged.evidence.screen
    assert [phase.name for phase in judged.phases] == ["probe", "evidence"]  # nothing else ran
    text = judged.text()
    assert "the last screen the lab saw:" in text and text.rstrip().splitlines()[-1].startswith(
        "REFUSED: claude 2.1.999: evidence: the lab could not run the echo Turn"
    )
    assert (tmp_path / "ran.log").read_text().split() == [str(copy)]  # the lab ran the copy
    assert _left(copy) == []


async def test_every_candidate_gets_its_own_result_each_as_it_ends(tmp_path: Path) -> None:
    broken = _stand_in(tmp_path, "2.1.999")
    as_pinned = _stand_in(tmp_path, "2.1.332")
    missing = tmp_path / "missing" / "claude"
    handed: list[Attempt] = []
    attempts = await trio.to_thread.run_sync(
        lambda: command.run(
            "claude",
            [broken, missing, as_pinned],
            PINNED,
            parallel=1,
            progress=lambda line: None,
            finished=handed.append,
        )
    )
    assert handed == attempts
    refused, gone, pinned = attempts
    assert refused.judgement is not None and not refused.judgement.qualified
    assert "exited while waiting for idle composer" in refused.judgement.problems[0]
    assert gone.error is not None and gone.error.startswith("no file at")
    assert pinned.pinned is not None and pinned.pinned.version == "2.1.332"


def test_the_cli_refuses_a_client_that_never_starts_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = _stand_in(tmp_path, "2.1.999")
    argv = ["qualify", "claude", "--binary", str(binary), "--state-dir", str(tmp_path / "s")]
    assert cli.main([*argv, "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["state"] == "refused" and result["report"]["qualified"] is False
    assert result["report"]["evidence"]["ran"] is False
    assert "exited while waiting for idle composer" in result["report"]["problems"][0]


def test_the_cli_refuses_a_state_directory_it_could_not_store_in_before_running_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A qualification takes minutes; a verdict it could not store would be lost."""
    binary = _stand_in(tmp_path, "2.1.999")
    state = tmp_path / "s"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    argv = ["qualify", "claude", "--binary", str(binary), "--state-dir", str(state)]
    assert cli.main(argv) == 2
    said = capsys.readouterr().err
    assert "other users may read it" in said and f"chmod 700 {state}" in said, said
    assert not (tmp_path / "ran.log").exists()  # the client never ran


def _identity(binary: Path) -> TerminalIdentity:
    return TerminalIdentity(
        "term_x", "/s", "%1", 1, "claude", 2, 3, str(binary), "2.1.999", None, None,
        "unpinned_version: claude 2.1.999 has no profile", binary=str(binary),
        binary_sha256=sha256_file(binary),
    )  # fmt: skip


def _qualifier() -> AutoQualifier:
    return AutoQualifier(
        board=[],  # type: ignore[arg-type]
        store=None,  # type: ignore[arg-type]
        qualified=types.SimpleNamespace(registry=PINNED),  # type: ignore[arg-type]
    )


async def test_auto_qualify_logs_a_client_the_lab_cannot_drive(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    identity = _identity(_stand_in(tmp_path, "2.1.999"))
    qualifier = _qualifier()
    with trio.fail_after(60), caplog.at_level(logging.WARNING, "akk.qualify.auto"):
        await qualifier.qualify(identity)
    outcome = qualifier.tried[str(identity.binary_sha256)]
    assert outcome.startswith("refused: evidence: the lab could not run the echo Turn"), outcome
    assert "exited while waiting for idle composer" in caplog.text


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (LabError("lab processes survived SIGKILL: [7]\nmore"), "error: lab processes survived"),
        (RuntimeError("a bug"), "error: RuntimeError"),
    ],
)
async def test_auto_qualify_never_leaves_a_binary_running(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: Exception,
    outcome: str,
) -> None:
    identity = _identity(_stand_in(tmp_path, "2.1.999"))

    async def fails(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(qualification, "qualify", fails)
    qualifier = _qualifier()
    with trio.fail_after(20), caplog.at_level(logging.WARNING, "akk.qualify.auto"):
        if isinstance(error, LabError):
            await qualifier.qualify(identity)
            assert "lab processes survived SIGKILL" in caplog.text
        else:
            with pytest.raises(RuntimeError, match="a bug"):
                await qualifier.qualify(identity)
    assert qualifier.tried[str(identity.binary_sha256)].startswith(outcome)


@pytest.mark.parametrize(
    ("unproduced_only", "tries"), [(True, auto.BUSY_TRIES), (False, 1)], ids=["busy", "differs"]
)
async def test_auto_qualify_tries_again_later_a_binary_refused_for_screens_not_produced(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
    unproduced_only: bool,
    tries: int,
) -> None:
    """A busy machine may keep a screen from settling: the binary is qualified again 600 s
    later, three times in all. A screen that differs from its label stays refused."""
    (tmp_path / "claude").write_text("a binary that never runs here")
    identity = _identity(tmp_path / "claude")
    problem = "1 screens could not be produced" if unproduced_only else "1 screens read differently"
    started: list[float] = []

    async def refused(*args: object, **kwargs: object) -> object:
        started.append(trio.current_time())
        return types.SimpleNamespace(
            qualified=False, problems=[problem], unproduced_only=unproduced_only, comparisons=()
        )

    @asynccontextmanager
    async def pinned(*args: object, **kwargs: object) -> AsyncIterator[object]:
        yield None  # no copy: the qualification is the stand-in above

    monkeypatch.setattr(qualification, "pinned", pinned)
    monkeypatch.setattr(qualification, "qualify", refused)
    qualifier = AutoQualifier(
        board=[types.SimpleNamespace(identity=identity)],  # type: ignore[arg-type]
        store=None,  # type: ignore[arg-type]
        qualified=types.SimpleNamespace(registry=PINNED),  # type: ignore[arg-type]
    )
    with trio.move_on_after(10 * auto.BUSY_RETRY_SECONDS):
        await qualifier.run()
    assert len(started) == tries
    assert all(
        later - earlier >= auto.BUSY_RETRY_SECONDS for earlier, later in itertools.pairwise(started)
    )
    outcome = qualifier.tried[str(identity.binary_sha256)]
    assert outcome == f"refused: {problem}", outcome
