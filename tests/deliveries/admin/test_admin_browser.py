"""A staff member in a real browser: find a dead letter, replay it, watch it succeed."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from deliveries.models import Delivery
from relayproject.lib.clock import utcnow
from tests.support import factories, seed
from tests.support.browser import chromium_page, shot
from tests.support.fakes import Reply


@pytest.fixture
def page():
    with chromium_page(width=1400, height=900) as page:
        yield page


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_staff_replays_a_dead_letter_and_sees_it_succeed(live_server, receiver, page):
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
    shot(page, "admin-dead-letters")

    page.click(f"text={d.pk}")
    page.wait_for_selector("#replay-button")
    page.click("#replay-button")
    message = page.locator(".messagelist li").first.inner_text()
    assert f"Replayed {d.pk}" in message
    assert "Pending" in page.locator(".field-status .readonly").inner_text()
    shot(page, "admin-replayed")

    call_command("run_dispatcher", "--drain", "--concurrency", "1", stdout=StringIO())

    page.reload()
    assert "Succeeded" in page.locator(".field-status .readonly").inner_text()
    shot(page, "admin-succeeded")
    assert Delivery.objects.get(pk=d.pk).status == "succeeded"
    assert len(receiver.received) == 1
