"""The pages issue 22 rewrote, in Debian's Chromium at 1280 and 390 px: what
they say is what the rows hold, and nothing runs off the screen."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.models import EndpointHealth, Membership
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.browser import chromium_page, shot
from tests.support.portal import PASSWORD, user_with_role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

URL = "http://127.0.0.1:9/webhooks/orders/relay/incoming"
HEADERS = [
    ["Content-Type", "application/json"],
    ["webhook-id", "evt_01"],
    ["webhook-timestamp", "1764770000"],
    ["webhook-signature", "redacted, hmac 1a2b3c4d"],
    ["Authorization", "redacted, hmac 9f8e7d6c"],
    ["X-Relay-Attempt", "1"],
    ["User-Agent", "webhook-relay/1.0"],
]


def _attempt(delivery, number, *, status, kind, outcome, at):
    return Attempt.objects.create(
        delivery=delivery,
        endpoint=delivery.endpoint,
        number=number,
        started_at=at,
        response_ms=120.0,
        status_code=status,
        error_kind=kind,
        error_message="" if status else "Connection refused (127.0.0.1:9)",
        response_body="unauthorized" if status else "",
        outcome=outcome,
        request_url=URL,
        request_headers=HEADERS,
        response_headers=[["Content-Type", "text/plain"], ["X-Build", "b-4711"]]
        if status
        else None,
    )


def world():
    now = utcnow()
    merchant = factories.merchant("acme")
    user_with_role(merchant, Membership.Role.OWNER, "alice")
    endpoint = factories.endpoint(
        merchant, url=URL, max_attempts=5, permanent_statuses=[422]
    )
    waiting = event_publish(
        merchant=merchant, type="order.paid", data={"n": 1}
    ).created_deliveries[0]
    _attempt(waiting, 1, status=401, kind="http_status", outcome="retry", at=now)
    _attempt(waiting, 2, status=None, kind="connection_error", outcome="retry", at=now)
    Delivery.objects.filter(pk=waiting.pk).update(
        attempt_count=2,
        last_status_code=None,
        last_error="connection_error: Connection refused (127.0.0.1:9)",
        next_attempt_at=now + timedelta(minutes=4),
    )
    dead = event_publish(
        merchant=merchant, type="order.refunded", data={"n": 2}
    ).created_deliveries[0]
    _attempt(dead, 1, status=422, kind="permanent_status", outcome="dead", at=now)
    Delivery.objects.filter(pk=dead.pk).update(
        status="dead", attempt_count=1, last_status_code=422, dead_at=now
    )
    EndpointHealth.objects.filter(pk=endpoint.pk).update(
        success_rate=0.55, sample_count=312, p95_ms=2600, is_slow=True
    )
    return endpoint, waiting, dead


def fits(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), (
        "the page scrolls sideways"
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_portal_pages_say_what_the_rows_hold(live_server, settings, width):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    endpoint, waiting, dead = world()
    base = f"{live_server.url}/portal/m/acme"
    with chromium_page(width=width, height=900) as page:
        page.goto(f"{live_server.url}/portal/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")

        page.goto(f"{base}/deliveries/{waiting.pk}/")
        expect(page.locator("#summary")).to_contain_text(
            "Retrying (3 of 5): the last attempt failed (Connection refused)"
        )
        expect(page.locator("#request-line")).to_have_text(f"POST {URL}")
        expect(page.locator("#attempts")).to_contain_text("HTTP 401 Unauthorized")
        expect(page.locator("#retry-now")).to_be_visible()
        page.locator("#attempt-1 summary").click()
        expect(page.locator("#attempt-1")).to_contain_text("b-4711")
        fits(page)
        shot(page, f"truth-delivery-waiting-{width}")

        page.goto(f"{base}/deliveries/{dead.pk}/")
        expect(page.locator("#stop-reason")).to_contain_text(
            "Not retried because the receiver answered HTTP 422"
        )
        fits(page)
        shot(page, f"truth-delivery-dead-{width}")

        page.goto(f"{base}/endpoints/{endpoint.pk}/")
        expect(page.locator("#max-attempts")).to_have_text("5")
        expect(page.locator("#max-in-flight")).to_contain_text("(the relay's default)")
        expect(page.locator("#permanent-statuses")).to_contain_text("422")
        fits(page)
        shot(page, f"truth-endpoint-{width}")

        page.goto(f"{base}/")
        expect(page.locator("table.endpoints")).to_contain_text("Degraded")
        expect(page.locator("table.endpoints")).not_to_contain_text("Closed")
        fits(page)
        shot(page, f"truth-endpoint-list-{width}")

        page.goto(f"{base}/endpoints/{endpoint.pk}/health/")
        expect(page.locator("#slow")).to_contain_text(
            "Over 5 s it would be paused after 5 failures in a row instead of 10"
        )
        expect(page.locator("#errors")).to_contain_text("Could not connect")
        fits(page)
        shot(page, f"truth-health-{width}")


@pytest.mark.parametrize("width", [1280, 390])
def test_admin_delivery_page_shows_the_attempt_record(live_server, width):
    _, waiting, dead = world()
    User.objects.create_superuser("staff", password=PASSWORD)
    with chromium_page(width=width, height=900) as page:
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.goto(f"{live_server.url}/admin/deliveries/delivery/{waiting.pk}/change/")
        expect(page.locator("#retry-now-button")).to_be_visible()
        expect(page.locator("body")).to_contain_text("Connection refused")
        shot(page, f"truth-admin-delivery-waiting-{width}")
        page.goto(f"{live_server.url}/admin/deliveries/delivery/{dead.pk}/change/")
        expect(page.locator("body")).to_contain_text("a status this endpoint treats")
        shot(page, f"truth-admin-delivery-dead-{width}")
        page.goto(f"{live_server.url}/admin/deliveries/delivery/pipeline/")
        expect(page.locator("#pending-held")).to_be_visible()
        shot(page, f"truth-admin-pipeline-{width}")


def test_disable_asks_first_and_dismissing_changes_nothing(live_server, settings):
    from endpoints.models import Endpoint

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    endpoint, _, _ = world()
    asked: list[str] = []
    with chromium_page(width=1280, height=900) as page:
        page.goto(f"{live_server.url}/portal/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.goto(f"{live_server.url}/portal/m/acme/endpoints/{endpoint.pk}/")
        page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
        page.click("#toggle")
        assert asked and "held, not lost" in asked[0]
        assert Endpoint.objects.get(pk=endpoint.pk).is_active
        page.once("dialog", lambda d: d.accept())
        page.click("#toggle")
        expect(page.locator(".messages")).to_contain_text("Endpoint disabled")
        assert not Endpoint.objects.get(pk=endpoint.pk).is_active
