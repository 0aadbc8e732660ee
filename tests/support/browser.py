"""Debian's Chromium under Playwright, the one way browser tests start it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
CHROMIUM = os.environ.get("RELAY_TEST_CHROMIUM", "/usr/bin/chromium")
# Without the networking flags Chromium keeps dialling Google on this closed
# network; the sandbox needs privileges a CI container does not have.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def chromium_page(
    *, width: int, height: int, timeout_ms: int = 15_000
) -> Iterator[Page]:
    # Playwright's sync API runs an event loop in this thread; Django's async
    # safety check would otherwise refuse the ORM calls the test makes.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(
                viewport={"width": width, "height": height}
            ).new_page()
            page.set_default_timeout(timeout_ms)
            yield page
        finally:
            browser.close()


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
