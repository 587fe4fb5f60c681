"""The operator console against a real agent, in Debian's headless Chromium.

The operator logs in through `akk ui`'s link; the page shows the lab pane with
its screen, then the Turn a controller sends, then that Turn's questionnaire
as a form within a second of the controller's own event. The operator answers
in the browser: the model server (the oracle) gets the answer exactly once,
the Turn ends `done`, and the console shows it. A screenshot of each view is
saved (to $AKK_CONSOLE_SCREENSHOTS when set, e.g. for docs/; else the test's
temp dir).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from akk.client import Controller, connect
from akk.qualify import scenarios as sc
from akk.qualify.launcher import LabSession
from tests.lab.conftest import lab_params
from tests.lab.test_interactions import (
    WAKE_UPS,
    audit_rows,
    count_since,
    next_event,
    reached,
    send_task,
    settled,
)
from tools.lab.akk_runner import Served, idle_terminal, serving
from tools.lab.browser import chromium, screenshot

FORM_WITHIN = 1.0
"""Seconds from the controller's wake-up to the form in the browser (the issue's bound)."""
NEWEST_CLAUDE = lab_params("questionnaire_single3", agents=("claude",))[-1:]
NEWEST_CLAUDE_BASH = lab_params("claude_bash", agents=("claude",))[-1:]


def login_link(served: Served) -> str:
    """`akk ui`'s link, as a person runs it beside this server."""
    done = subprocess.run(
        [sys.executable, "-m", "akk", "ui", "--state-dir", str(served.state.path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def shown(driver: webdriver.Chrome, testid: str, timeout: float, text: str = "") -> float:
    """Wait until the element ``testid`` shows (with ``text``); the seconds it took."""
    began = time.monotonic()

    def present(d: Any) -> bool:
        found = d.find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]')
        return bool(found) and found[0].is_displayed() and text in found[0].text

    # The page builds a card again when its record changes: an element found a moment ago
    # may be gone (stale); look again.
    WebDriverWait(
        driver, timeout, poll_frequency=0.02, ignored_exceptions=(StaleElementReferenceException,)
    ).until(present, f"{testid!r} with {text!r} not shown within {timeout} s")
    return time.monotonic() - began


async def in_browser(work: Callable[..., Any], *args: Any) -> Any:
    return await trio.to_thread.run_sync(work, *args)


@pytest.mark.parametrize("lab", NEWEST_CLAUDE, indirect=True)
async def test_the_operator_sees_the_pane_and_answers_a_questionnaire_in_the_browser(
    lab: LabSession, tmp_path: Path
) -> None:
    shots = Path(os.environ.get("AKK_CONSOLE_SCREENSHOTS") or tmp_path / "screenshots")
    async with (
        serving(lab, tmp_path, "ctl") as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        terminal_id = (await idle_terminal(ctl, timeout=30))["terminal_id"]
        link = await in_browser(login_link, served)
        with chromium() as driver:
            await in_browser(driver.get, link)
            # Logged in, and the code is gone from the address and the page.
            assert driver.current_url.endswith("/ui/"), driver.current_url
            code = link.rsplit("code=", 1)[1]
            assert code not in driver.page_source
            await in_browser(shown, driver, f"terminal-{terminal_id}", 10)
            await in_browser(shown, driver, f"screen-{terminal_id}", 10, "?")
            await in_browser(screenshot, driver, shots / "console-terminals.png")

            first = len(lab.server.requests)
            turn_id = await send_task(ctl, sc.ASK_TASK)
            await in_browser(shown, driver, f"turn-{turn_id}", 10)
            await in_browser(screenshot, driver, shots / "console-turn.png")

            await next_event(ctl, WAKE_UPS)  # the controller's wake-up
            took = await in_browser(shown, driver, "interaction-form", 10, "Green")
            print(f"form shown {took:.3f} s after the controller's event")
            assert took <= FORM_WITHIN
            await in_browser(screenshot, driver, shots / "console-form.png")

            await answer_as_a_person(driver, "Green")
            answered = await reached(lab, lambda r: sc.ANSWERED_CLAUDE in r.newest_input, first)
            assert '"Which color do you prefer?"="Green"' in answered.newest_input
            assert (await settled(ctl, turn_id))["kind"] == "done"
            await in_browser(shown, driver, f"turn-{turn_id}", 10, "done")
            # Its stages: the task the controller sent, the answer the operator gave.
            await in_browser(shown, driver, f"turn-{turn_id}", 10, "akk-console")
            await in_browser(shown, driver, "event-list", 10, "interaction_required")
            await in_browser(screenshot, driver, shots / "console-done.png")
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert not errors, errors
        # The operator answered through its own offer: its receipt is in the Turn's trail.
        assert ("respond_interaction", "dispatched", turn_id) in [
            row[:3] for row in audit_rows(served, "akk-console")
        ]
        status = await ctl.call("status", {"turn_id": turn_id})
        (receipt,) = [d for d in status["dispatches"] if d["kind"] == "answer"]
        assert receipt["controller_id"] == "akk-console" and receipt["stage"] == "accepted"
    assert count_since(lab, first, sc.ANSWERED_CLAUDE) == 1
    assert count_since(lab, first, sc.ASK_TASK) == 1


@pytest.mark.parametrize("lab", NEWEST_CLAUDE, indirect=True)
async def test_the_operator_answers_with_their_own_text_in_the_browser(
    lab: LabSession, tmp_path: Path
) -> None:
    """Claude's "Type something." row is no option of the projection; the form offers the
    operator's own text after the options, and the model gets exactly that text, once."""
    teal = '"Which color do you prefer?"="Teal, please"'  # Claude's line for the answer
    async with logged_in(lab, tmp_path) as (_, ctl, driver):
        first = len(lab.server.requests)
        turn_id = await send_task(ctl, sc.ASK_TASK)
        await next_event(ctl, WAKE_UPS)
        await in_browser(shown, driver, "interaction-form", 10, "Your own text")
        await answer_as_a_person(driver, "Your own text", "Teal, please")
        await reached(lab, lambda r: teal in r.newest_input, first)
        assert (await settled(ctl, turn_id))["kind"] == "done"
    assert count_since(lab, first, teal) == 1


@pytest.mark.parametrize("lab", NEWEST_CLAUDE_BASH, indirect=True)
async def test_the_operator_approves_a_command_once_in_the_browser(
    lab: LabSession, tmp_path: Path
) -> None:
    marker = lab.workdir / f"{sc.BASH_MARKER}.txt"
    async with logged_in(lab, tmp_path) as (_, ctl, driver):
        first = len(lab.server.requests)
        turn_id = await send_task(ctl, sc.RUN_TASK)
        event = await next_event(ctl, WAKE_UPS)
        assert event["kind"] == "approval_required"
        await in_browser(shown, driver, "decision-approve_once", 10)
        # Only the two decisions AKK ever offers: no persistent one reaches the form.
        decisions = driver.find_elements(By.CSS_SELECTOR, '[data-testid^="decision-"]')
        assert sorted(d.get_attribute("data-testid") for d in decisions) == [
            "decision-approve_once", "decision-reject"]  # fmt: skip
        assert not marker.exists()
        await in_browser(click, driver, "decision-approve_once")
        ran = await reached(lab, lambda r: sc.BASH_MARKER in r.newest_input, first)
        assert sc.BASH_MARKER in ran.newest_input and marker.exists()
        assert (await settled(ctl, turn_id))["kind"] == "done"
        await in_browser(shown, driver, f"turn-{turn_id}", 10, "done")
        status = await ctl.call("status", {"turn_id": turn_id})
        (receipt,) = [d for d in status["dispatches"] if d["kind"] == "approval"]
        assert receipt["controller_id"] == "akk-console" and receipt["stage"] == "accepted"
    assert count_since(lab, first, sc.RUN_TASK) == 1


@asynccontextmanager
async def logged_in(
    lab: LabSession, tmp_path: Path
) -> AsyncIterator[tuple[Served, Controller, webdriver.Chrome]]:
    """`akk serve` with controller ``ctl`` connected, the lab pane idle, and the console
    open in Chromium through `akk ui`'s link."""
    async with (
        serving(lab, tmp_path, "ctl") as served,
        connect(served.endpoint.url, served.tokens["ctl"]) as ctl,
    ):
        await idle_terminal(ctl, timeout=30)
        link = await in_browser(login_link, served)
        with chromium() as driver:
            await in_browser(driver.get, link)
            yield served, ctl, driver


def click(driver: webdriver.Chrome, testid: str) -> None:
    """Click the button ``testid`` once (again only if the page had replaced it: stale)."""

    def press(_: Any) -> bool:
        driver.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]').click()
        return True

    WebDriverWait(driver, 5, ignored_exceptions=(StaleElementReferenceException,)).until(press)


async def answer_as_a_person(driver: webdriver.Chrome, label: str, text: str = "") -> None:
    """Pick ``label`` as a person would, type ``text`` in the box it shows (if any), and
    submit once."""

    def form() -> Any:
        return driver.find_element(By.CSS_SELECTOR, '[data-testid="interaction-form"]')

    def pick(_: Any) -> bool:
        (label_of,) = [el for el in form().find_elements(By.TAG_NAME, "label") if el.text == label]
        label_of.click()
        return bool(form().find_element(By.CSS_SELECTOR, "input:checked").is_selected())

    def type_text(_: Any) -> bool:
        boxes = [el for el in form().find_elements(By.CSS_SELECTOR, "input[type=text]")
                 if el.is_displayed()]  # fmt: skip
        if len(boxes) != 1:
            return False
        boxes[0].send_keys(text)
        return True

    def submit(_: Any) -> bool:
        form().find_element(By.CSS_SELECTOR, '[data-testid="submit-answer"]').click()
        return True

    # A click on an element the page just replaced raises before it does anything: that
    # one is tried again, never a click that went through.
    for step in (pick, type_text, submit) if text else (pick, submit):
        waiting = WebDriverWait(driver, 5, ignored_exceptions=(StaleElementReferenceException,))
        await in_browser(waiting.until, step)
