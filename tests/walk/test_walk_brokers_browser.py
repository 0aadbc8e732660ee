"""The pages broker endpoints add, in Chromium at 1280, 390 and 360 px (the
whole walk covers them too; this walks only them, for a quick look), and the
endpoint form's kind picker with its script.

Screenshots go to test-output/screenshots/walk-brokers-*.png.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import expect

from endpoints.models import Endpoint, Membership
from tests.support import factories
from tests.support.browser import chromium_page
from tests.walk import seed
from tests.walk.test_walk_browser import WIDTHS, broker_pages, check, visit

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]


def sign_in(page, base: str, username: str) -> None:
    page.goto(f"{base}{reverse('portal:login')}")
    page.fill("#id_username", username)
    page.fill("#id_password", seed.PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def test_the_broker_pages_fit_at_every_width(live_server, settings):
    settings.RELAY_BROKER_HOSTS = seed.BROKER_HOSTS
    walk = seed.relay()
    pages = broker_pages(walk) | {
        "endpoint_create": reverse("portal:endpoint_create", args=[walk.slug]),
        "endpoint_list": reverse("portal:endpoint_list", args=[walk.slug]),
        "delivery_list": reverse("portal:delivery_list", args=[walk.slug]),
    }
    found: dict[str, list[str]] = {}
    with chromium_page(width=WIDTHS[0], height=900, timeout_ms=60_000) as page:
        sign_in(page, live_server.url, walk.user.username)
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for name, path in pages.items():
                status = visit(page, f"{live_server.url}{path}")
                assert status == 200, f"{name}: HTTP {status}"
                check(page, f"brokers-{name}-{width}", found)
            # The form as it comes back with errors beside the broker fields.
            visit(page, f"{live_server.url}{pages['endpoint_create_nats']}")
            page.fill(
                "#id_broker_url", "nats://nats.internal.example-merchant.com:4222"
            )
            page.fill("#id_broker_password", "walk-typed-pw")
            page.fill("#id_subject", "orders.*.with-a-wildcard")
            page.click("form.stack button[type=submit]:not([name])")
            page.wait_for_load_state("load")
            expect(page.locator("#subject-errors")).to_be_visible()
            check(page, f"brokers-endpoint_create_errors-{width}", found)
            assert "walk-typed-pw" not in page.content()
    report = "\n".join(f"{p}: {o}" for p, items in found.items() for o in items)
    assert not found, f"{len(found)} pages with layout faults:\n{report}"


def test_the_picker_shows_the_picked_kinds_fields_at_once(live_server, settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1:1883"]
    merchant = factories.merchant("picker")
    user = User.objects.create_user("picker", password=seed.PASSWORD)
    Membership.objects.create(user=user, merchant=merchant, role="owner")
    with chromium_page(width=390, height=900) as page:
        sign_in(page, live_server.url, "picker")
        page.goto(
            f"{live_server.url}{reverse('portal:endpoint_create', args=['picker'])}"
        )
        expect(page.locator("#pick-kind")).to_be_hidden()  # the script shows
        expect(page.locator("#id_url")).to_be_visible()
        expect(page.locator("#id_broker_url")).to_be_hidden()
        page.get_by_label("MQTT topic").check()
        expect(page.locator("#id_url")).to_be_hidden()
        expect(page.locator("#id_topic")).to_be_visible()
        expect(page.locator("#id_exchange")).to_be_hidden()
        expect(page.locator("#id_broker_url")).to_have_attribute(
            "placeholder", "mqtts://mqtt.example.com:8883"
        )
        expect(page.get_by_text("mqtt:// or mqtts:// (TLS)")).to_be_visible()
        expect(page.get_by_text("amqp:// or amqps:// (TLS)")).to_be_hidden()
        page.fill("#id_broker_url", "mqtt://127.0.0.1:1883")
        page.fill("#id_topic", "shop/orders")
        page.click("form.stack button[type=submit]:not([name])")
        page.wait_for_url(lambda url: "/endpoints/new/" not in url)
        expect(page.locator("#kind")).to_have_text("MQTT topic")
    endpoint = Endpoint.objects.get(merchant=merchant)
    assert (endpoint.kind, endpoint.target) == ("mqtt", {"topic": "shop/orders"})
