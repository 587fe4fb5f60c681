"""A task whose typing command failed: not typed when provably nothing went out.

`type_and_submit` types a task with one command (`send-keys -l`) or two (a paste:
`set-buffer` of a private buffer, then `paste-buffer`). A command that was never written
(UTF-8 cannot encode it) or a paste whose buffer was never set sent no key: the step is
aborted, its Turn failed `not_typed`, saying no key was sent. A `%error` once the typing
command itself went out keeps the step `uncertain`. A paste that failed never leaves its
private buffer (the task's text) on the tmux server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import attrs
import pytest
import trio

from akk.backends.terminal.observer import Observer
from akk.backends.terminal.steps import TaskReceipt
from akk.backends.terminal.typing_step import type_and_submit
from akk.profiles.composer import TypingMethod
from akk.store.dispatches import Stage
from akk.store.turns import TurnState
from akk.tmux import keys
from akk.tmux.control import ClientLink, TmuxCommandError, encode_command, open_control_client
from tests.test_tmux_control import TmuxServer, running_tmux
from tests.test_typing_proof import EMPTY, TASK, _EveryStepPane, _reserved


@attrs.define
class _FailingTmux:
    """tmux as `akk.tmux.keys` uses it, each command encoded as the real client does
    (an unencodable one raises before it is written); ``refuse`` answers `%error`."""

    refuse: str | None = None
    written: list[tuple[str, ...]] = attrs.Factory(list)

    async def command(self, *args: str) -> list[str]:
        if args[0] == "display-message":
            return ["0||0|0"]
        encode_command(args)
        self.written.append(args)
        if args[0] == self.refuse:
            raise TmuxCommandError(args, ["no space for the buffer"])
        return []

    def client(self) -> _FailingTmux:
        return self


async def _type(tmp_path: Path, tmux: _FailingTmux, text: str, method: TypingMethod) -> TaskReceipt:
    with trio.fail_after(20):
        async with _reserved(tmp_path, method) as (store, receipt):
            pane = _EveryStepPane([(trio.current_time(), EMPTY)])
            return await type_and_submit(
                cast(Observer, pane), cast(ClientLink, tmux), store, receipt, text, method
            )


@pytest.mark.parametrize(
    ("method", "text", "refuse"),
    [
        (TypingMethod.LITERAL, "lab: \ud800", None),  # never encodable: never written
        (TypingMethod.PASTE, "lab: \ud800", None),
        (TypingMethod.PASTE, TASK, "set-buffer"),  # the text never staged: no paste
    ],
    ids=["literal-unencodable", "paste-unencodable", "set-buffer-refused"],
)
async def test_a_task_provably_never_typed_is_aborted_not_uncertain(
    tmp_path: Path, method: TypingMethod, text: str, refuse: str | None
) -> None:
    tmux = _FailingTmux(refuse)
    done = await _type(tmp_path, tmux, text, method)
    typing = [args[0] for args in tmux.written if args[0] in ("send-keys", "paste-buffer")]
    assert typing == []
    assert done.dispatch.stage is Stage.ABORTED
    assert (done.turn.state, done.turn.reason) == (TurnState.FAILED, "not_typed")
    assert done.dispatch.reason == "not_typed"


@pytest.mark.parametrize("refuse", ["send-keys", "paste-buffer"])
async def test_an_error_after_the_typing_command_went_out_stays_uncertain(
    tmp_path: Path, refuse: str
) -> None:
    method = TypingMethod.LITERAL if refuse == "send-keys" else TypingMethod.PASTE
    tmux = _FailingTmux(refuse)
    done = await _type(tmp_path, tmux, TASK, method)
    assert done.dispatch.stage is Stage.UNCERTAIN
    assert done.turn.state is TurnState.UNCERTAIN
    reason = str(done.dispatch.reason)
    assert reason.startswith(f"typing failed: {refuse}:") and TASK not in reason
    if refuse == "paste-buffer":  # its private buffer is deleted again
        (staged,) = [args for args in tmux.written if args[0] == "set-buffer"]
        assert ("delete-buffer", "-b", staged[2]) in tmux.written


@pytest.fixture
def server() -> Iterator[TmuxServer]:
    with running_tmux("akk-paste-") as srv:
        yield srv


async def test_a_failed_paste_leaves_no_buffer_on_the_server(server: TmuxServer) -> None:
    with trio.fail_after(20):
        async with open_control_client(server.socket) as client:
            with pytest.raises(TmuxCommandError) as failed:
                await keys.paste(client, "%999", "the task's private text")  # no such pane
            assert not isinstance(failed.value, keys.NothingPasted)
            listed = await client.command("list-buffers", "-F", "#{buffer_name}")
    assert [name for name in listed if name.startswith("akk-")] == []
