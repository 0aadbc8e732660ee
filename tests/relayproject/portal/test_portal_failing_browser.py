"""A disabled endpoint in Debian's Chromium, at 1280 and 390 px: the banner
says why and what to do, fits the screen, and its button brings the endpoint
back with the held delivery due now."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from deliveries.models import Delivery
from endpoints.models import Membership
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from tests.deliveries.notifications.conftest import attempt
from tests.support import factories
from tests.support.browser import chromium_page, shot
from tests.support.portal import PASSWORD, user_with_role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 390])
def test_disabled_banner_and_reenable(live_server, settings, width):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    merchant = factories.merchant("acme")
    user_with_role(merchant, Membership.Role.OWNER, "alice")
    endpoint = factories.endpoint(
        merchant, url="http://127.0.0.1:9/webhooks/orders/relay/incoming"
    )
    attempt(endpoint, utcnow() - timedelta(hours=3))
    endpoint_disable(
        endpoint=endpoint,
        reason="auto-disabled: no success for 120 h and 24 failed attempts",
        by="auto-disable",
    )
    with chromium_page(width=width, height=900) as page:
        page.goto(f"{live_server.url}/portal/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.goto(f"{live_server.url}/portal/m/acme/endpoints/{endpoint.pk}/")
        banner = page.locator("#condition")
        expect(banner).to_contain_text("This endpoint is disabled since")
        expect(banner).to_contain_text("1 pending delivery is held")
        # The banner fits the screen, and so does the page around it.
        assert page.evaluate(
            "document.querySelector('#condition').getBoundingClientRect().right"
            " <= window.innerWidth"
        ), "the banner is wider than the screen"
        assert page.evaluate(
            "document.documentElement.scrollWidth <= window.innerWidth"
        ), "the page scrolls sideways"
        shot(page, f"portal-endpoint-disabled-{width}")
        page.click("#reenable")
        expect(page.locator(".messages")).to_contain_text(
            "1 held delivery is due now: the dispatchers send it next"
        )
        expect(page.locator("#condition")).to_have_count(0)
    held = Delivery.objects.get(endpoint=endpoint)
    assert held.status == "pending" and held.next_attempt_at <= utcnow()
