"""A staff member in a real browser: find a dead letter, replay it, watch it succeed."""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from deliveries.models import Delivery
from relayproject.clock import utcnow
from tests import factories
from tests.fakes import Reply
from tests.ops import seed

# Playwright's sync API runs its own event loop; Django would otherwise refuse
# ORM calls made from the test while it runs.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        yield context.new_page()
        browser.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_staff_replays_a_dead_letter_and_sees_it_succeed(live_server, receiver, page):
    SHOTS.mkdir(parents=True, exist_ok=True)
    User.objects.create_superuser("ops", "ops@example.com", "correct-horse-battery")
    receiver.respond = lambda r: Reply(status=200)
    endpoint = factories.endpoint(url=receiver.url)
    now = utcnow()
    d = seed.delivery(
        endpoint,
        status="dead",
        created_at=now,
        dead_at=now,
        attempts=3,
        with_attempts=True,
        last_status_code=503,
        last_error="HTTP 503",
    )

    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "ops")
    page.fill("#id_password", "correct-horse-battery")
    page.click("input[type=submit]")
    page.get_by_role("link", name="Dead letters").first.click()
    page.wait_for_selector("#dead-letter-analysis")
    page.screenshot(path=str(SHOTS / "admin-dead-letters.png"), full_page=True)

    page.click(f"text={d.pk}")
    page.wait_for_selector("#replay-button")
    page.click("#replay-button")
    message = page.locator(".messagelist li").first.inner_text()
    assert f"Replayed {d.pk}" in message
    assert "Pending" in page.locator(".field-status .readonly").inner_text()
    page.screenshot(path=str(SHOTS / "admin-replayed.png"), full_page=True)

    call_command("run_dispatcher", "--drain", "--concurrency", "1", stdout=StringIO())

    page.reload()
    assert "Succeeded" in page.locator(".field-status .readonly").inner_text()
    page.screenshot(path=str(SHOTS / "admin-succeeded.png"), full_page=True)
    assert Delivery.objects.get(pk=d.pk).status == "succeeded"
    assert len(receiver.received) == 1
