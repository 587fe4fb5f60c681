"""Codex key plans on the real pinned clients, driven step by step and proven at the model's end.

The plans a controller's answer takes on a fresh prompt (a choice, the three questions,
free text from "None of the above", approve once) are proven end to end, through
`akk serve`, on every pinned version by tests/lab/test_interactions.py. Here are the
plans' own cases: a person's cursor already in the notes, the unanswered confirmation
(back, then on), a text the notes never prove, the rejection the model hears with the
next message, and the queued questions.

Each step does what the dispatcher does: capture the pane, classify it with the
exact version's profile, take the plan for the prompt's kind, step and intent,
expand it over the rows on screen and send exactly those keys
(tools/lab/keystrokes.py). A plan that types text is sent up to its text
check; the notes must then prove the text (editor_matches) on every read for
the plan's Enter guard before the rest, the one Enter, goes out. The proof is the model server's
record: the next request carries exactly the chosen answer, exactly once.

Each test prints how long the client took from a key to the next screen, to the
answer at the model and to the idle composer (``pytest -rA`` shows it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

import attrs
import pytest
import trio

from akk.profiles.keyplan import (
    Intent,
    Keystroke,
    LiteralText,
    TextCheck,
    TmuxKey,
    expand,
    expand_checked,
)
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    PromptView,
    State,
    StepKind,
)
from akk.profiles.registry import PROFILES, Profile
from akk.qualify.launcher import POLL_SECONDS, LabSession, ScreenTimeout
from akk.qualify.model_server import RecordedRequest
from akk.qualify.scenarios import (
    ACCEPTED_CODEX_ASYNC,
    ANSWERED_CODEX,
    EXEC_MARKER,
    RUN_TASK,
    SLOW_SIGNAL,
)
from akk.screen.grid import Grid
from akk.screen.render import render
from tests.lab.conftest import lab_params
from tools.lab.keystrokes import send_keystrokes

THANKS = "Thanks, I noted your answers."
SPECIAL = "lab: he said \"don't\" & 'left' $HOME `x` ; ls | cat > out * ünïcödé 漢字 😀 done"
"""Quotes, shell metacharacters, accents, CJK and an emoji (wide cells) in one notes row."""
ASYNC_PICKER = ("0.154.0", "0.155.1")
"""The versions that queue an async question and open a picker for it (NOTES.md)."""
ASYNC_ANSWER = "> Which color do you prefer?\n\nBlue"


def _prose(length: int) -> str:
    """Exactly `length` characters of plain words, with no space at either end."""
    words = "lab note 0123456789 alpha beta gamma delta, epsilon zeta: eta theta-iota kappa. "
    text = (words * (length // len(words) + 1))[:length]
    return text[:-1] + "x" if text.endswith(" ") else text


def _codex(scenario: str, **options: object) -> list[object]:
    return lab_params(scenario, agents=("codex",), **options)


def _async(scenario: str) -> list[object]:
    return [
        param
        for param in _codex(scenario)
        if param.values[0].client.version in ASYNC_PICKER  # type: ignore[attr-defined]
    ]


# ---------------------------------------------------------------- observing and answering


@attrs.frozen
class Screen:
    """One capture as the exact profile reads it, and when it was taken (time.monotonic)."""

    grid: Grid
    observation: Observation
    at: float

    @property
    def prompt(self) -> PromptView:
        prompt = self.observation.prompt
        assert prompt is not None and self.observation.actionable, self.observation.reason
        return prompt


def _profile(lab: LabSession) -> Profile:
    return PROFILES[(lab.agent, lab.version)]


async def observe(
    lab: LabSession,
    until: Callable[[Screen], bool],
    what: str,
    timeout: float = 15.0,
) -> Screen:
    """Capture and classify until `until` holds; the screen it held on."""
    profile = _profile(lab)
    with trio.move_on_after(timeout):
        while True:
            grid = render(await lab.capture(), lab.cols, lab.rows)
            screen = Screen(grid, profile.classify(grid), time.monotonic())
            if until(screen):
                return screen
            await trio.sleep(POLL_SECONDS)
    raise ScreenTimeout(f"{lab.client.name}: no {what} within {timeout} s", await lab.text())


def step_is(
    kind: InteractionKind, step: StepKind, index: int | None = None
) -> Callable[[Screen], bool]:
    """An actionable prompt of this kind and step (and question index)."""

    def holds(screen: Screen) -> bool:
        prompt = screen.observation.prompt
        return (
            screen.observation.actionable
            and prompt is not None
            and (prompt.kind, prompt.step) == (kind, step)
            and index in (None, prompt.step_index)
        )

    return holds


def _idle(screen: Screen) -> bool:
    return screen.observation.state is State.IDLE


async def answer(
    lab: LabSession,
    screen: Screen,
    intent: Intent,
    chosen: Sequence[int] = (),
) -> tuple[Keystroke, ...]:
    """Expand the profile's plan for `intent` on `screen` and send exactly its keys."""
    prompt = screen.prompt
    options = prompt.questions[0].options if prompt.questions else ()  # a queued question: none
    plan = _profile(lab).key_plans.plan_for(prompt.kind, prompt.step, intent)
    keys = expand(plan, options, chosen=chosen)
    await send_keystrokes(lab, keys)
    return keys


async def answer_free_text(lab: LabSession, screen: Screen, text: str) -> float:
    """The FREE_TEXT plan up to its text check, the notes proven and held for the plan's
    Enter guard on every read, then the rest (the Enter), as the dispatcher sends it.

    Returns when the Enter went out (time.monotonic).
    """
    profile, prompt = _profile(lab), screen.prompt
    plan = profile.key_plans.plan_for(prompt.kind, prompt.step, Intent.FREE_TEXT)
    expanded = expand_checked(plan, prompt.questions[0].options, text=text)
    (check,) = expanded.checks
    assert isinstance(check, TextCheck) and check.hold > 0
    assert expanded.keys[check.after - 1] == LiteralText(text)

    def shown(s: Screen) -> bool:
        return step_is(InteractionKind.QUESTIONNAIRE, StepKind.FREE_TEXT)(s) and (
            profile.editor_matches(s.grid, s.prompt, text)
        )

    typed_at = time.monotonic()
    await send_keystrokes(lab, expanded.keys[: check.after])
    notes = await observe(lab, shown, "notes showing exactly the text", timeout=10)
    held = notes
    while held.at - notes.at < check.hold:
        await trio.sleep(POLL_SECONDS)
        held = await observe(lab, lambda s: True, "a screen")
        assert shown(held), "the notes changed during the Enter guard"
    _took(lab, "typing keys -> notes proven and held for the guard", typed_at, held.at)
    assert expanded.keys[check.after :] == (TmuxKey("Enter"),)
    sent = time.monotonic()
    await send_keystrokes(lab, expanded.keys[check.after :])
    return sent


async def answers_sent(lab: LabSession, since: float) -> dict[str, list[str]]:
    """The one request_user_input answer the model received, once the turn is over.

    `since` is when the answering key went out (time.monotonic).
    """
    request = await lab.server.wait_for_request(
        lambda r: not r.auxiliary and ANSWERED_CODEX in r.newest_input,
        timeout=10,
    )
    await lab.wait_for_screen(lambda s: THANKS in s, 10, what="the model's thanks")
    idle = await observe(lab, _idle, "idle composer after the answer")
    _took(lab, "answering key -> answer at the model", since, request.at)
    _took(lab, "answering key -> idle composer (reply shown)", since, idle.at)
    main = lab.server.main_requests()
    assert [r for r in main if ANSWERED_CODEX in r.newest_input] == [request]
    assert main.index(request) == 1, "the answer is the request right after the question"
    answers = json.loads(request.newest_input)["answers"]
    return {question: value["answers"] for question, value in answers.items()}


def _took(lab: LabSession, what: str, since: float, until: float) -> None:
    print(f"{lab.version} {what}: {until - since:.3f} s")


async def _ask(lab: LabSession, total: int) -> Screen:
    """Submit the scenario's task and wait for question 1/`total`."""
    await lab.submit(lab.scenario.task)
    return await observe(
        lab,
        step_is(InteractionKind.QUESTIONNAIRE, StepKind.SINGLE_SELECT, 1),
        f"question 1/{total}",
    )


def _key_names(keys: tuple[Keystroke, ...]) -> tuple[str, ...]:
    return tuple(key.name for key in keys if isinstance(key, TmuxKey))


# ---------------------------------------------------------------- request_user_input


@pytest.mark.parametrize("lab", _codex("codex_rui_three", plan_mode=True), indirect=True)
async def test_unanswered_confirmation_goes_back_then_proceeds(lab: LabSession) -> None:
    questionnaire, single = InteractionKind.QUESTIONNAIRE, StepKind.SINGLE_SELECT
    confirm = step_is(InteractionKind.CONFIRMATION, StepKind.CONFIRM)
    with trio.fail_after(30):
        screen = await _ask(lab, 3)
        for _round in ("go back", "proceed"):
            for index in (2, 3):
                assert _key_names(await answer(lab, screen, Intent.NEXT_QUESTION)) == ("Right",)
                screen = await observe(lab, step_is(questionnaire, single, index), f"{index}/3")
            await answer(lab, screen, Intent.CHOOSE, chosen=(1,))  # Square, with 2 unanswered
            screen = await observe(lab, confirm, "the unanswered-question confirmation")
            if _round == "go back":
                assert _key_names(await answer(lab, screen, Intent.GO_BACK)) == ("Down", "Enter")
                # Back to the first unanswered question; nothing was sent.
                screen = await observe(lab, step_is(questionnaire, single, 1), "question 1/3")
                assert ANSWERED_CODEX not in " ".join(r.newest_input for r in lab.server.requests)
        sent = time.monotonic()
        assert _key_names(await answer(lab, screen, Intent.PROCEED)) == ("Enter",)
        assert await answers_sent(lab, sent) == {"q1": [], "q2": [], "q3": ["Square"]}


# ---------------------------------------------------------------- free text in the notes


@pytest.mark.parametrize("lab", _codex("codex_rui_one", plan_mode=True), indirect=True)
async def test_free_text_into_the_open_notes(lab: LabSession) -> None:
    with trio.fail_after(30):
        await _ask(lab, 1)
        # A person opened the notes of 'None of the above' (the FREE_TEXT step's start).
        opened = time.monotonic()
        await lab.send_keys(*("Down",) * 3, "Tab")
        empty = await observe(
            lab, step_is(InteractionKind.QUESTIONNAIRE, StepKind.FREE_TEXT), "the open notes"
        )
        _took(lab, "Down Down Down Tab -> notes open", opened, empty.at)
        assert not _profile(lab).editor_matches(empty.grid, empty.prompt, SPECIAL)
        sent = await answer_free_text(lab, empty, SPECIAL)
        wanted = {"q1": ["None of the above", f"user_note: {SPECIAL}"]}
        assert await answers_sent(lab, sent) == wanted


@pytest.mark.parametrize("lab", _codex("codex_rui_one", plan_mode=True), indirect=True)
async def test_3000_typed_characters_are_never_proven(lab: LabSession) -> None:
    """The notes show a 1024-character paste: never proven, so the dispatcher never sends.

    (Pressing Enter anyway adds a second paste; a second Enter submits the
    question unanswered, the note lost: tools/lab/NOTES.md.)
    """
    text = _prose(3000)
    profile = _profile(lab)
    assert len(text) > profile.free_text_max_chars
    with trio.fail_after(30):
        question = await _ask(lab, 1)
        plan = profile.key_plans.plan_for(
            InteractionKind.QUESTIONNAIRE, StepKind.SINGLE_SELECT, Intent.FREE_TEXT
        )
        expanded = expand_checked(plan, question.prompt.questions[0].options, text=text)
        (check,) = expanded.checks
        await send_keystrokes(lab, expanded.keys[: check.after])
        await lab.wait_stable(quiet=1.0)
        grid = render(await lab.capture(), lab.cols, lab.rows)
        after = profile.classify(grid)
        prompt = after.prompt if after.actionable and after.prompt else question.prompt
        assert not profile.editor_matches(grid, prompt, text)
        notes = [grid.row_text(y) for y in range(prompt.region.top, prompt.region.bottom)]
        print(f"notes after 3000 typed characters: {notes[-3:]}")
    assert not any(ANSWERED_CODEX in r.newest_input for r in lab.server.requests)


# ---------------------------------------------------------------- exec approval


async def _permission(lab: LabSession) -> Screen:
    await lab.submit(RUN_TASK)
    return await observe(
        lab, step_is(InteractionKind.PERMISSION, StepKind.PERMISSION), "the approval prompt"
    )


def _marker(lab: LabSession) -> bool:
    return (lab.workdir.parent / f"{EXEC_MARKER}.txt").exists()


@pytest.mark.parametrize("lab", _codex("codex_exec"), indirect=True)
async def test_exec_reject_selects_the_no_row(lab: LabSession) -> None:
    with trio.fail_after(30):
        prompt = await _permission(lab)
        rows = prompt.prompt.questions[0].options
        no_row = next(o for o in rows if o.label == "No, and tell Codex what to do differently")
        sent = time.monotonic()
        keys = await answer(lab, prompt, Intent.REJECT)
        assert _key_names(keys) == (str(no_row.number),)  # the row itself; never Escape
        done = await observe(lab, _idle, "idle composer after the rejection")
        _took(lab, f"{no_row.number} (reject) -> idle composer", sent, done.at)
        assert "You canceled the request to run" in await lab.text()
        # The turn ends with nothing sent: the model hears of it with the next message.
        assert len(lab.server.main_requests()) == 1
        await lab.submit("lab: what now")
        after: RecordedRequest = await lab.server.wait_for_request(
            lambda r: r.newest_input == "lab: what now", timeout=10
        )
    outputs = [
        item["output"]
        for item in after.body["input"]  # type: ignore[index, union-attr]
        if item.get("type") == "function_call_output"
    ]
    assert len(outputs) == 1 and outputs[0].endswith("aborted by user"), outputs
    assert not _marker(lab)
    assert lab.server.count_inputs_containing(EXEC_MARKER) == 0


# ---------------------------------------------------------------- async questions


async def _pick_blue(lab: LabSession, queued: Screen) -> RecordedRequest:
    """Open the queued question's picker, choose Blue by the plans; the request carrying it."""
    opened = time.monotonic()
    assert _key_names(await answer(lab, queued, Intent.OPEN_QUEUED_QUESTION)) == ("S-Left",)
    picker = await observe(
        lab, step_is(InteractionKind.ASYNC_QUESTION, StepKind.SINGLE_SELECT), "the picker"
    )
    _took(lab, "S-Left -> picker", opened, picker.at)
    sent = time.monotonic()
    assert _key_names(await answer(lab, picker, Intent.CHOOSE, chosen=(1,))) == ("2",)
    request = await lab.server.wait_for_request(
        lambda r: not r.auxiliary and r.newest_input == ASYNC_ANSWER, timeout=10
    )
    _took(lab, "digit -> answer at the model", sent, request.at)
    return request


@pytest.mark.parametrize("lab", _async("codex_rui_async"), indirect=True)
async def test_async_answer_when_idle_starts_the_next_turn(lab: LabSession) -> None:
    """queue_next_turn: answered once the asking turn is over, the answer is a new turn."""
    with trio.fail_after(30):
        await lab.submit(lab.scenario.task)
        # Codex draws the reply and an idle composer a moment before its turn is over: an
        # answer then steers that turn. Its rollout file says when it is over (as AKK reads
        # it before a queue_next_turn answer).
        while '"task_complete"' not in json.dumps(lab.transcript_records()):
            await trio.sleep(0.05)
        queued = await observe(
            lab,
            lambda s: (
                s.observation.state is State.ASYNC_QUESTION
                and step_is(InteractionKind.ASYNC_QUESTION, StepKind.QUEUED)(s)
            ),
            "the queued question at an idle composer",
        )
        answered = await _pick_blue(lab, queued)
        await lab.wait_for_screen(lambda s: "Blue it is." in s, 10, what="the reply")
        await observe(lab, _idle, "idle composer")
    asked = lab.server.main_requests()[0]
    assert answered.codex_turn_id != asked.codex_turn_id
    assert lab.server.count_inputs_containing(ASYNC_ANSWER) == 1


@pytest.mark.parametrize("lab", _async("codex_rui_async_held"), indirect=True)
async def test_async_answer_while_working_steers_the_turn(lab: LabSession) -> None:
    """steer_current_turn: answered while the turn runs, it joins that turn's next request.

    While the turn runs the queued question (and then its picker) reads as
    WORKING with the question as its prompt.
    """
    with trio.fail_after(30):
        await lab.submit(lab.scenario.task)
        queued = await observe(
            lab,
            lambda s: (
                s.observation.state is State.WORKING
                and step_is(InteractionKind.ASYNC_QUESTION, StepKind.QUEUED)(s)
            ),
            "the queued question while the agent works",
        )
        answered: list[RecordedRequest] = []

        async def pick() -> None:
            answered.append(await _pick_blue(lab, queued))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pick)
            await lab.wait_for_screen(
                lambda s: "Messages to be submitted after next tool call" in s and "Blue" in s,
                10,
                what="the answer waiting for the running turn",
            )
            # The screen can show the waiting answer before Codex sends the held request.
            await lab.server.wait_for_request(
                lambda r: not r.auxiliary and ACCEPTED_CODEX_ASYNC in r.newest_input, timeout=10
            )
            assert len(lab.server.main_requests()) == 2  # held: nothing sent yet
            lab.server.signal(SLOW_SIGNAL)
        await lab.wait_for_screen(lambda s: "Blue it is." in s, 10, what="the reply")
        await observe(lab, _idle, "idle composer")
    asked = lab.server.main_requests()[0]
    assert answered[0].codex_turn_id == asked.codex_turn_id
    assert lab.server.count_inputs_containing(ASYNC_ANSWER) == 1
