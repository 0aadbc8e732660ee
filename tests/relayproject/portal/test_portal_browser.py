"""The portal in Debian's Chromium: set up an endpoint and debug a failed delivery."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from playwright.sync_api import expect
from standardwebhooks.webhooks import Webhook

from deliveries.signing import serialize_body
from endpoints.models import Membership
from tests.support import factories
from tests.support.browser import chromium_page, shot
from tests.support.fakes import Receiver, Reply
from tests.support.portal import PASSWORD, user_with_role

WAIT_MS = 15_000

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page():
    with chromium_page(width=1200, height=900, timeout_ms=WAIT_MS) as page:
        yield page


def drain() -> None:
    call_command("run_dispatcher", "--drain", "--concurrency", "1")


def header(page, name: str) -> str:
    return (
        page.locator("#request-headers tr", has=page.locator(f"th:text-is('{name}')"))
        .locator("td")
        .inner_text()
    )


def send_test_event(page, endpoint_url: str) -> None:
    page.goto(endpoint_url)
    page.click("#send-test")
    expect(page.locator("h1")).to_contain_text("Delivery")


def test_set_up_an_endpoint_and_debug_a_failed_delivery(live_server, page, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    merchant = factories.merchant("acme")
    user_with_role(merchant, Membership.Role.OWNER, "alice")
    with Receiver() as receiver:
        page.goto(f"{live_server.url}/portal/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        shot(page, "01-sign-in")
        page.click("button[type=submit]")
        expect(page.locator("h1")).to_contain_text("Endpoints")

        page.click("text=Add endpoint")
        page.fill("#id_url", receiver.url)
        page.fill("#id_description", "Orders service")
        page.click("#advanced summary")  # the rarely used fields are folded
        page.fill("#id_max_attempts", "1")
        shot(page, "02-new-endpoint")
        page.click("text=Create endpoint")
        expect(page.locator(".messages")).to_contain_text("created")
        endpoint_url = page.url
        shot(page, "03-endpoint")

        send_test_event(page, endpoint_url)
        expect(page.locator("#status")).to_contain_text("Pending")
        drain()
        expect(page.locator("#status")).to_contain_text("Succeeded", timeout=WAIT_MS)
        shot(page, "04-delivery-succeeded")

        got = receiver.wait_for(1)[0]
        event = merchant.events.get()
        assert got.body == serialize_body(
            event_id=event.pk,
            event_type=event.type,
            created_at=event.created_at,
            data=event.data,
        )
        assert page.locator("#request-body").inner_text() == got.body.decode()
        for name in (
            "webhook-id",
            "webhook-timestamp",
            "X-Relay-Delivery-Id",
            "X-Relay-Attempt",
            "Content-Type",
        ):
            assert header(page, name) == got.headers[name]
        # The signature as a fingerprint of what was sent, never the value.
        assert header(page, "webhook-signature").startswith("redacted, hmac ")
        assert got.headers["webhook-signature"] not in page.content()

        receiver.respond = lambda _r: Reply(status=500, body=b"receiver exploded")
        send_test_event(page, endpoint_url)
        drain()
        expect(page.locator("#status")).to_contain_text("Dead", timeout=WAIT_MS)
        expect(page.locator("#summary")).to_contain_text(
            "HTTP 500 Internal Server Error"
        )
        expect(page.locator("#attempts")).to_contain_text("receiver exploded")
        shot(page, "05-delivery-failed")

        receiver.respond = lambda _r: Reply()
        page.click("#replay")
        expect(page.locator(".messages")).to_contain_text("Replayed")
        drain()
        expect(page.locator("#status")).to_contain_text("Succeeded", timeout=WAIT_MS)
        expect(page.locator("#attempts tbody tr")).to_have_count(2)

        page.goto(endpoint_url)
        page.click("text=Rotate…")
        expect(page.locator("main")).to_contain_text("two signatures")
        shot(page, "06-rotate")
        page.click("#rotate")
        expect(page.locator(".messages")).to_contain_text("keeps signing until")
        expect(page.locator(".secret-value")).to_have_count(2)
        shot(page, "07-endpoint-rotated")
        page.click("#reveal")
        secrets = page.locator(".secret-value").all_inner_texts()
        assert all(s.startswith("whsec_") for s in secrets) and len(set(secrets)) == 2

        count = len(receiver.received)
        send_test_event(page, endpoint_url)
        drain()
        expect(page.locator("#status")).to_contain_text("Succeeded", timeout=WAIT_MS)
        got = receiver.wait_for(count + 1)[-1]
        for secret in secrets:
            Webhook(secret).verify(got.body, got.headers)

        page.click("text=Deliveries")
        expect(page.locator("table.deliveries tbody tr")).to_have_count(3)
        shot(page, "08-deliveries")
        page.goto(endpoint_url)
        page.click("nav.tabs >> text=Health")
        expect(page.locator("#success-rate")).to_contain_text("of 4 attempts")
        shot(page, "09-health")
        page.click("text=Endpoints")
        shot(page, "10-endpoints")
