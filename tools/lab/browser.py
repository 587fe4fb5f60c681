"""Headless Chromium for the console's browser tests, from Debian's packages only.

`chromium()` starts Debian's ``chromium`` through its ``chromedriver``
(`tools/bootstrap.sh` installs both) with a fresh profile and always quits it.
Nothing is ever downloaded: the driver's path and the browser's binary are
given, so Selenium Manager has nothing to look up, and ``SE_OFFLINE`` forbids it
to try. The driver is synchronous; from a Trio test, call it through
``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,800",
)


@contextlib.contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """A headless Chromium with an empty profile of its own, quit on the way out.

    The browser's console log is kept (``driver.get_log("browser")``). Fails the
    test, naming the fix, when Debian's chromium or chromedriver is missing.
    """
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: `make bootstrap` installs Debian's {package}")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a browser or driver
    profile = tempfile.mkdtemp(prefix="akk-chromium-")
    try:
        options = Options()
        options.binary_location = CHROMIUM
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver: webdriver.Chrome, path: Path) -> Path:
    """Save the window as a PNG at ``path`` (its folder is made); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not driver.save_screenshot(str(path)):
        raise OSError(f"Chromium could not save a screenshot to {path}")
    return path
