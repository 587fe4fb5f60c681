"""Claude Code key plans on the real pinned clients, driven step by step and proven at the
model's end.

The plans a controller's answer takes on a fresh prompt (one choice, several boxes and
the review, free text from the options up to 3,000 characters, approve once) are proven
end to end, through `akk serve`, on every pinned version by tests/lab/test_interactions.py.
Here are the plans' own cases: three questions and the review, a person's cursor already
in the editor, an editor that outgrows the pane, an advised Bash prompt, the rejection
the model hears with the next message, and the Write prompt left to a person.

Each step does what the dispatcher does (akk/backends/terminal/answer_step.py): capture the
pane, classify it with the exact version's profile, take the plan for the
prompt's kind, step and intent, expand it over the rows on screen with its
checkpoints (`expand_checked`) and send exactly those keys
(tools/lab/keystrokes.py), proving each checkpoint on screen before the keys
after it: the editor open, or the editor showing exactly the text
(`editor_matches`) before the one Enter. Keys go only to a prompt that has been
still for a moment: Claude drops keys within ~200 ms of a widget's first paint.

The model server decides: the next request carries exactly the chosen answer,
exactly once; an approved command ran and its output came back; a rejected one
left no file, and the model hears "no" with the next message.

    python -m tests.lab.test_claude_plans [--version V]

re-captures the editor screens of fixtures/claude/editor/ (tests/test_claude_editor.py)
with the same steps.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from akk.backends.terminal.typing_step import text_timeout
from akk.profiles.composer import TypingMethod
from akk.profiles.keyplan import (
    EditorCheck,
    Expanded,
    Intent,
    KeyPlan,
    TextCheck,
    expand_checked,
)
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    PromptView,
    State,
    StepKind,
)
from akk.profiles.registry import PINNED, Profile
from akk.qualify.capture import PRESS_QUIET_SECONDS
from akk.qualify.launcher import POLL_SECONDS, LabSession, ScreenTimeout, launch
from akk.qualify.model_server import RecordedRequest
from akk.qualify.plans.claude import CLAUDE_MULTI_EXTRA, CLAUDE_SINGLE_EXTRA
from akk.qualify.plans.labels import Expected, ExpectedQuestion, Typed
from akk.qualify.scenarios import (
    BASH_MARKER,
    SCENARIOS,
    VARIABLE_COMMAND,
    AskUserQuestion,
)
from akk.screen.grid import Grid
from akk.screen.render import render
from tests.lab.conftest import ensure_installed, lab_params
from tools.lab import clients
from tools.lab.keystrokes import send_keystrokes

THIS = "tests/lab/test_claude_plans.py"
STEP_TIMEOUT = 20.0
COLOR = "Which color do you prefer?"
COLORS = "Which colors do you like?"
QUESTIONS = (COLOR, "Which size should the widget be?", "Which shape should it have?")
REJECTED = "The user doesn't want to proceed with this tool use."
FOLLOW_UP = "lab: what happened to the command?"
EDITOR_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude" / "editor"


def prose(length: int, first: str = "lab") -> str:
    """Exactly `length` characters of numbered words starting with `first`, no end spaces."""
    words = " ".join([first, "free", "text", *(f"w{i:04d}" for i in range(length // 5 + 1))])
    text = words[:length]
    return text[:-1] + "x" if text.endswith(" ") else text


MARKS = 'It\'s "quoted" — café, 日本 🎉; run $HOME `x` | cat & echo > out *'
"""Both quotes, an accent, CJK and an emoji (wide cells), shell metacharacters: one row."""
TEXTS = {
    "799": prose(799, "/lab"),  # a leading '/' is plain text in the editor
    "800": prose(800, "!lab"),  # and so is '!'
    "marks": MARKS,
}
LONG = prose(3000)
"""Too tall for 120x40 under a three-option question (clipped), whole at 120x60."""


# ---------------------------------------------------------------- observing and answering


@attrs.frozen
class Screen:
    """One capture as the exact profile reads it, and when it was taken (trio clock)."""

    capture: str
    grid: Grid
    observation: Observation
    at: float

    @property
    def prompt(self) -> PromptView:
        prompt = self.observation.prompt
        assert prompt is not None and self.observation.actionable, self.observation.reason
        return prompt


def _profile(lab: LabSession) -> Profile:
    binding = PINNED.bind(lab.agent, lab.version)
    assert binding.profile is not None, binding.reason
    return binding.profile


async def observe(
    lab: LabSession, until: Callable[[Screen], bool], what: str, timeout: float = STEP_TIMEOUT
) -> Screen:
    """Capture and classify until `until` holds; the screen it held on."""
    profile = _profile(lab)
    with trio.move_on_after(timeout):
        while True:
            capture = await lab.capture()
            grid = render(capture, lab.cols, lab.rows)
            screen = Screen(capture, grid, profile.classify(grid), trio.current_time())
            if until(screen):
                return screen
            await trio.sleep(POLL_SECONDS)
    raise ScreenTimeout(f"{lab.client.name}: no {what} within {timeout} s", await lab.text())


async def settled(lab: LabSession, until: Callable[[Screen], bool], what: str) -> Screen:
    """`until` on a screen that has been still for a moment: keys sent sooner may be lost."""
    first = await observe(lab, until, what)
    await lab.wait_stable(quiet=PRESS_QUIET_SECONDS)
    screen = await observe(lab, until, what)
    print(f"{what}: shown, then still {screen.at - first.at:.2f} s later")
    return screen


def step_is(
    kind: InteractionKind, step: StepKind, question: str | None = None
) -> Callable[[Screen], bool]:
    """An actionable prompt of this kind and step (showing `question`)."""

    def holds(screen: Screen) -> bool:
        prompt = screen.observation.prompt
        return (
            screen.observation.actionable
            and prompt is not None
            and (prompt.kind, prompt.step) == (kind, step)
            and question in (None, prompt.questions[0].prompt)
        )

    return holds


def _index(prompt: PromptView, label: str) -> int:
    """The row of the option labelled `label`."""
    (index,) = [i for i, o in enumerate(prompt.questions[0].options) if o.label == label]
    return index


@attrs.frozen
class Answered:
    """One answer as sent: its plan, the screens that proved its checkpoints, and the
    model server's request count before its first key (its requests come after)."""

    plan: KeyPlan
    proofs: tuple[Screen, ...]
    after: int
    sent_at: float  # time.monotonic() after the last key, the model server's clock


async def answer(
    lab: LabSession,
    screen: Screen,
    intent: Intent,
    *,
    chosen: Sequence[int] = (),
    text: str | None = None,
) -> Answered:
    """Send the profile's plan for `intent` on `screen` as the dispatcher does.

    Keys up to each checkpoint, the checkpoint proven on screen, then the rest.
    """
    profile, prompt = _profile(lab), screen.prompt
    plan = profile.key_plans.plan_for(prompt.kind, prompt.step, intent)
    assert THIS in plan.evidence, "the plan's evidence names the lab test that drives it"
    expanded = expand_checked(plan, prompt.questions[0].options, chosen=chosen, text=text)
    after = len(lab.server.requests)
    proofs = await checkpoints(lab, screen, expanded, text)
    await send_keystrokes(lab, expanded.keys[expanded.checks[-1].after if expanded.checks else 0 :])
    return Answered(plan, tuple(proofs), after, time.monotonic())


async def checkpoints(
    lab: LabSession,
    screen: Screen,
    expanded: Expanded,
    text: str | None,
    *,
    prove_text: bool = True,
) -> list[Screen]:
    """The keys up to each of `expanded`'s checkpoints, each proven on screen before the next
    keys (the typed text's too unless not `prove_text`); the screens that proved them."""
    sent, proofs = 0, []
    for check in expanded.checks:
        await send_keystrokes(lab, expanded.keys[sent : check.after])
        sent = check.after
        match check:
            case TextCheck(chars=None) if not prove_text:
                continue
            case TextCheck() if not prove_text:
                # Unproven, but drawn before the next piece: of two pieces Claude reads before
                # it draws again it keeps only the second (`TypeText.piece_bytes`).
                assert text is not None
                word = check.shown(text).split()[-1]
                drawn = f"the piece ending {word}"
                await lab.wait_for_screen(lambda s, w=word: w in s, 20, what=drawn)
                continue
            case TextCheck():
                assert text is not None
                proof = await editor_showing(lab, check.shown(text))
            case EditorCheck():
                question = screen.prompt.questions[0].prompt
                opened = step_is(screen.prompt.kind, StepKind.FREE_TEXT, question)
                proof = await observe(lab, opened, "the editor open", 10)
        print(f"checkpoint {check} proven {proof.at - screen.at:.2f} s after the prompt")
        proofs.append(proof)
    return proofs


async def editor_showing(lab: LabSession, text: str) -> Screen:
    """The first screen whose open editor shows exactly `text` (`editor_matches`)."""
    profile = _profile(lab)
    return await observe(
        lab,
        lambda s: (
            s.observation.prompt is not None
            and profile.editor_matches(s.grid, s.observation.prompt, text)
        ),
        "the editor showing exactly the text",
        timeout=text_timeout(10, text),
    )


async def ask(lab: LabSession, step: StepKind, question: str) -> Screen:
    """Submit the scenario's task and wait for its question, settled."""
    await lab.submit(lab.scenario.task)
    return await settled(lab, step_is(InteractionKind.QUESTIONNAIRE, step, question), question)


async def the_answer(lab: LabSession, answered: Answered | int) -> RecordedRequest:
    """The request that carries the answer: the first conversation request after its keys.

    `answered` may be a request index instead. Waits for the turn to end, then
    checks that nothing else carried it.
    """
    after = answered if isinstance(answered, int) else answered.after
    request = await lab.server.wait_for_request(
        lambda r: r.index >= after and not r.auxiliary, timeout=STEP_TIMEOUT
    )
    if not isinstance(answered, int):
        print(f"the answer at the model {request.at - answered.sent_at:.3f} s after the last key")
    await observe(lab, lambda s: s.observation.state is State.IDLE, "the idle composer")
    assert [r for r in lab.server.main_requests() if r.index >= after] == [request]
    return request


def only_the_task(lab: LabSession) -> bool:
    """Whether the model got the task and nothing since (no answer, no tool result)."""
    (request,) = lab.server.main_requests()
    # The lab's own typing may repeat a task it saw no effect of in time (a loaded
    # machine): what counts is that nothing else went out.
    return lab.scenario.task in request.newest_input


def pairs(*answers: tuple[str, str]) -> str:
    """How Claude's tool_result lists the answers: ``"Q1"="A1", "Q2"="A2"``."""
    return ", ".join(f'"{question}"="{value}"' for question, value in answers)


def assert_answered(
    lab: LabSession, request: RecordedRequest, *answers: tuple[str, str], first: int = 0
) -> None:
    """The tool_result names each question once, with exactly the chosen answers.

    Only the agent turns from request index `first` on (the case's own) are counted.
    """
    sent = request.newest_input
    listed = pairs(*answers)
    assert sent.count(listed) == 1, sent
    assert f"{listed}. " in sent, sent  # nothing more after the last answer
    for question, _ in answers:
        assert sent.count(f'"{question}"=') == 1, sent
    turns = [r for r in lab.server.main_requests() if r.index >= first]
    assert sum(listed in r.newest_input for r in turns) == 1, lab.server.summary()


def _claude(scenario: str, **options: object) -> list[object]:
    return lab_params(scenario, agents=("claude",), **options)


# ---------------------------------------------------------------- questionnaires


@pytest.mark.parametrize("lab", _claude("questionnaire_multi_question"), indirect=True)
async def test_three_questions_then_submit(lab: LabSession) -> None:
    chosen = ("Blue", "Large", "Hexagon")  # none of them the first option
    with trio.fail_after(30):
        await lab.submit(lab.scenario.task)
        for index, (question, label) in enumerate(zip(QUESTIONS, chosen, strict=True), start=1):
            screen = await settled(
                lab,
                step_is(InteractionKind.QUESTIONNAIRE, StepKind.SINGLE_SELECT, question),
                f"question {index}",
            )
            assert (screen.prompt.step_index, screen.prompt.step_total) == (index, 4)
            await answer(lab, screen, Intent.CHOOSE, chosen=(_index(screen.prompt, label),))
        review = await settled(
            lab, step_is(InteractionKind.CONFIRMATION, StepKind.REVIEW), "the review"
        )
        answered = await answer(lab, review, Intent.SUBMIT)
        request = await the_answer(lab, answered)
    assert_answered(lab, request, *zip(QUESTIONS, chosen, strict=True))


# ---------------------------------------------------------------- free text


@pytest.mark.parametrize("lab", _claude("questionnaire_single3"), indirect=True)
async def test_3000_characters_are_not_proven_at_120x40(lab: LabSession) -> None:
    """The editor grows past the pane: the prompt is clipped, never proven, never sent."""
    profile = _profile(lab)
    with trio.fail_after(30):
        screen = await ask(lab, StepKind.SINGLE_SELECT, COLOR)
        plan = profile.key_plans.plan_for(screen.prompt.kind, screen.prompt.step, Intent.FREE_TEXT)
        expanded = expand_checked(plan, screen.prompt.questions[0].options, text=LONG)
        await checkpoints(lab, screen, expanded, LONG, prove_text=False)
        # Claude takes the 3,000 keys in bursts, and on a busy machine it pauses between
        # them for longer than a quiet gap: the text's last whole word shows it got them.
        last_word = LONG.rsplit(" ", 2)[-2]
        await lab.wait_for_screen(lambda s: last_word in s, 20, what="the text's end")
        await lab.wait_stable(quiet=0.5)
        clipped = await observe(lab, lambda s: True, "any screen")
    assert not clipped.observation.actionable, "a clipped prompt is never proven"
    assert not profile.editor_matches(clipped.grid, screen.prompt, LONG)
    assert only_the_task(lab)


@pytest.mark.parametrize("lab", _claude("questionnaire_single3"), indirect=True)
async def test_free_text_into_the_open_editor(lab: LabSession) -> None:
    """A person left the cursor on "Type something.": the plan only types and submits."""
    text = "Teal, please"
    with trio.fail_after(30):
        screen = await ask(lab, StepKind.SINGLE_SELECT, COLOR)
        free = _index(screen.prompt, "Type something.")
        for _ in range(free):
            await lab.send_keys("Down")
        editor = await settled(
            lab, step_is(InteractionKind.QUESTIONNAIRE, StepKind.FREE_TEXT, COLOR), "the editor"
        )
        assert not _profile(lab).editor_matches(editor.grid, editor.prompt, "Type something.")
        answered = await answer(lab, editor, Intent.FREE_TEXT, text=text)
        request = await the_answer(lab, answered)
    assert_answered(lab, request, (COLOR, text))


# ---------------------------------------------------------------- permissions


def settings_untouched(lab: LabSession) -> None:
    """No persistent grant: the mode, the project's allowed tools and its settings as they were.

    The user settings gained no permission rule and no default mode (auto mode) either.
    """
    config = json.loads((lab.home / ".claude.json").read_text())
    assert config["projects"][str(lab.workdir)].get("allowedTools", []) == []
    assert not (lab.workdir / ".claude").exists()
    user = lab.home / ".claude" / "settings.json"
    assert not user.exists() or "permissions" not in json.loads(user.read_text())


@pytest.mark.parametrize("lab", _claude("claude_bash_variable"), indirect=True)
async def test_bash_approve_once_on_an_advised_prompt_runs_it(lab: LabSession) -> None:
    """An advised Bash prompt is read with its advisory, and `Yes` runs the command once.

    The advisory is `Contains simple_expansion` on 2.1.263-2.1.267 (unknown before) and
    `A variable in this command can't be checked before it runs` on 2.1.328 and 2.1.332.
    """
    with trio.fail_after(30):
        await lab.submit(lab.scenario.task)
        screen = await settled(
            lab, step_is(InteractionKind.PERMISSION, StepKind.PERMISSION), "the Bash permission"
        )
        assert screen.prompt is not None
        command, advisory = screen.prompt.questions[0].detail.split("\n\n")
        assert command == VARIABLE_COMMAND
        assert advisory in (
            "Contains simple_expansion",  # 2.1.263-2.1.267
            "A variable in this command can't be checked before it runs",  # 2.1.328+
        )
        answered = await answer(lab, screen, Intent.APPROVE_ONCE)
        request = await the_answer(lab, answered)
        idle = await lab.text()
    assert [result["is_error"] for result in tool_results(request)] == [False]
    written = (lab.workdir / "lab-variable.txt").read_text()
    assert written == os.environ.get("USER", "lab") + "\n"
    assert "auto mode on" not in idle
    settings_untouched(lab)


@pytest.mark.parametrize("lab", _claude("claude_bash"), indirect=True)
async def test_bash_reject_leaves_it_unrun(lab: LabSession) -> None:
    with trio.fail_after(30):
        await lab.submit(lab.scenario.task)
        screen = await settled(
            lab, step_is(InteractionKind.PERMISSION, StepKind.PERMISSION), "the Bash permission"
        )
        await answer(lab, screen, Intent.REJECT)
        await observe(lab, lambda s: s.observation.state is State.IDLE, "the idle composer")
        # The rejection ends the turn with no request (NOTES.md) ...
        assert only_the_task(lab)
        after = len(lab.server.requests)
        await lab.submit(FOLLOW_UP)
        request = await the_answer(lab, after)
        idle = await lab.text()
    # ... and the model hears it with the next message: one error result for its tool call.
    results = tool_results(request)
    assert [(r["is_error"], text_of(r).split(" The tool use")[0]) for r in results] == [
        (True, REJECTED)
    ]
    assert request.newest_input.startswith(REJECTED)
    assert lab.server.count_inputs_containing(REJECTED) == 1
    assert FOLLOW_UP in json.dumps(request.body)
    assert not (lab.workdir / f"{BASH_MARKER}.txt").exists()
    assert "auto mode on" not in idle
    settings_untouched(lab)


def tool_results(request: RecordedRequest) -> list[Mapping[str, Any]]:
    """Every tool_result block in the request's messages."""
    assert request.body is not None
    messages = request.body["messages"]
    assert isinstance(messages, list)
    return [
        block
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def text_of(result: Mapping[str, Any]) -> str:
    content = result["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


# ---------------------------------------------------------------- the editor corpus


@attrs.frozen
class EditorShot:
    """One editor screen for fixtures/claude/editor/: what is typed where, and at what size."""

    name: str
    scenario: str
    text: str
    cols: int = 120
    rows: int = 40
    proven: bool = True  # False: the prompt is clipped by the pane, typed but never proven


EDITOR_SHOTS = (
    EditorShot("editor_799", "questionnaire_single3", TEXTS["799"]),
    EditorShot("editor_800", "questionnaire_single3", TEXTS["800"]),
    EditorShot("editor_marks", "questionnaire_single3", MARKS),
    EditorShot("editor_full_row", "questionnaire_single3", "lab " + "f" * 110),
    EditorShot("editor_3000", "questionnaire_single3", LONG, proven=False),
    EditorShot("editor_3000", "questionnaire_single3", LONG, rows=60),
    EditorShot("editor_300", "questionnaire_single3", prose(300), cols=80, rows=24),
    EditorShot("editor_799", "questionnaire_single3", TEXTS["799"], cols=80, rows=24, proven=False),
    EditorShot("editor_empty", "questionnaire_multi", ""),
    EditorShot("editor_typed", "questionnaire_multi", "Teal, please"),
)


def editor_stem(version: str, shot: EditorShot) -> Path:
    """fixtures/claude/editor/<version>/[<cols>x<rows>/]<scenario>-<name>, without extension."""
    folder = EDITOR_FIXTURES / version
    if (shot.cols, shot.rows) != (120, 40):
        folder = folder / f"{shot.cols}x{shot.rows}"
    return folder / f"{shot.scenario}-{shot.name}"


def editor_expected(shot: EditorShot) -> Expected:
    """The label: the scenario's own question and the typed text, never read off the screen."""
    typed = Typed(shot.text, TypingMethod.LITERAL)
    if not shot.proven:
        return Expected("unknown", typed=typed)
    reply = SCENARIOS[shot.scenario].steps[0].reply
    assert isinstance(reply, AskUserQuestion)
    (question,) = reply.questions
    labels = tuple(option.label for option in question.options)
    multi = question.multi_select
    extra = CLAUDE_MULTI_EXTRA if multi else CLAUDE_SINGLE_EXTRA
    asked = ExpectedQuestion(
        prompt=question.question,
        header=question.header,
        # A multi-select question stays one with the cursor on its editor.
        response_kind="multi_select" if multi else "free_text",
        options=labels,
        extra_rows=extra,
        current_row=extra[0],
        checked=(extra[0],) if multi and shot.text else (),  # typing ticks the editor's box
        free_text=True,
        typed_text=shot.text or None,
    )
    return Expected(
        "questionnaire",
        "questionnaire",
        (asked,),
        step=(1, 2) if multi else None,
        typed=typed,
    )


async def capture_shot(client: clients.Client, shot: EditorShot) -> None:
    """Drive `shot` on `client` and write its screen and label."""
    await ensure_installed(client)
    scenario = SCENARIOS[shot.scenario]
    async with launch(client, scenario, cols=shot.cols, rows=shot.rows) as lab:
        if scenario.name == "questionnaire_multi":
            screen = await ask(lab, StepKind.MULTI_SELECT, COLORS)
            for _ in range(_index(screen.prompt, "Type something")):
                await lab.send_keys("Down")
            await lab.wait_stable(quiet=PRESS_QUIET_SECONDS)
            if shot.text:
                await lab.type_text(shot.text)
                await lab.wait_for_screen(lambda s: shot.text in s, 10, what="the typed text")
            await lab.wait_stable(quiet=PRESS_QUIET_SECONDS)
            capture = await lab.capture()
        elif shot.proven:
            screen = await ask(lab, StepKind.SINGLE_SELECT, COLOR)
            profile = _profile(lab)
            plan = profile.key_plans.plan_for(
                screen.prompt.kind, screen.prompt.step, Intent.FREE_TEXT
            )
            expanded = expand_checked(plan, screen.prompt.questions[0].options, text=shot.text)
            capture = (await checkpoints(lab, screen, expanded, shot.text))[-1].capture
        else:
            screen = await ask(lab, StepKind.SINGLE_SELECT, COLOR)
            for _ in range(_index(screen.prompt, "Type something.")):
                await lab.send_keys("Down")
            editor = step_is(InteractionKind.QUESTIONNAIRE, StepKind.FREE_TEXT, COLOR)
            await settled(lab, editor, "the editor")
            await lab.type_text(shot.text)
            await lab.wait_stable(quiet=0.5)
            capture = await lab.capture()
    stem = editor_stem(client.version, shot)
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".ansi").write_text(capture)
    label = {
        "agent": client.agent,
        "version": client.version,
        "cols": shot.cols,
        "rows": shot.rows,
        "plan": "editor",
        "scenario": shot.scenario,
        "step": shot.name,
        "expected": editor_expected(shot).to_json(),
    }
    stem.with_suffix(".json").write_text(json.dumps(label, indent=2, ensure_ascii=False) + "\n")
    print(f"captured {client.name} {stem.relative_to(EDITOR_FIXTURES)}")


def main(argv: list[str] | None = None) -> None:
    """Capture the editor corpus for the chosen Claude versions (default: all pinned)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version")
    args = parser.parse_args(argv)
    chosen = [
        c for c in clients.PINNED if c.agent == "claude" and args.version in (None, c.version)
    ]

    async def run_all() -> None:
        limiter = trio.CapacityLimiter(2)

        async def one(client: clients.Client, shot: EditorShot) -> None:
            async with limiter:
                await capture_shot(client, shot)

        async with trio.open_nursery() as nursery:
            for client in chosen:
                for shot in EDITOR_SHOTS:
                    nursery.start_soon(one, client, shot)

    trio.run(run_all)


if __name__ == "__main__":
    main()
