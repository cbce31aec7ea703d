"""Debian's Chromium, headless, driven by Playwright: the browser every browser test uses.

Chromium is the system's (`apt-get install chromium`; ./scripts/test installs it where apt-get exists), never a
browser Playwright downloads. Without it a browser test fails under CI and is skipped elsewhere, saying why."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps trying hosts this machine cannot reach.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def chromium_page(*, width: int = 1400, height: int = 1000) -> Iterator:
    if not os.access(CHROMIUM, os.X_OK):
        reason = f"{CHROMIUM} is missing: `apt-get install chromium` (./scripts/test does where apt-get exists)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport={"width": width, "height": height})
            tab.set_default_timeout(30_000)
            yield tab
        finally:
            browser.close()
