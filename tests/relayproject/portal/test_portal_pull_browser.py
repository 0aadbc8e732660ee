"""Chromium through the pull endpoint form, a pull endpoint's pages and the
Listen page at 1280, 390 and 360 px: the picker shows pull's one field at
once, its error sits beside it, a session started shows its secret and
command, and nothing runs off the side, sits far from its label or breaks a
word in a cell (the checks of test_layout_browser.py)."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from deliveries.services import event_publish
from endpoints.models import Endpoint, EndpointSecret, Membership
from tests.relayproject.portal.test_layout_browser import check
from tests.support import factories
from tests.support.browser import chromium_page, shot
from tests.support.portal import PASSWORD, user_with_role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_TYPE = "subscription.payment_method.automatically_updated"


def sign_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/portal/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")


@pytest.mark.parametrize("width", [1280, 390, 360])
def test_a_pull_endpoint_is_made_and_read_in_a_browser(live_server, settings, width):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    slug = f"acme-{uuid.uuid4().hex[:8]}"
    merchant = factories.merchant(slug)
    factories.endpoint(merchant)  # an HTTP endpoint beside it in the lists
    user_with_role(merchant, Membership.Role.DEVELOPER, "dana")
    base = f"{live_server.url}/portal/m/{slug}"
    with chromium_page(width=width, height=900) as page:
        sign_in(page, live_server, "dana")
        page.goto(f"{base}/endpoints/new/")
        page.check("input[name=kind][value=pull]")
        # portal.js shows pull's field at once, and hides the URL.
        expect(page.locator("#id_visibility_timeout_seconds")).to_be_visible()
        expect(page.locator("#id_url")).to_be_hidden()
        page.click("#advanced summary")
        expect(page.locator("#id_headers")).to_be_hidden()
        expect(page.locator("#id_max_attempts")).to_be_visible()
        page.fill("#id_description", "Warehouse feed")
        page.fill("#id_visibility_timeout_seconds", "0")
        page.click("form.stack button[type=submit]:not([name])")
        expect(page.locator("#visibility_timeout_seconds-errors")).to_have_text(
            "Whole seconds from 1 to 43200."
        )
        expect(page.locator("#visibility_timeout_seconds-errors")).to_be_visible()
        check(page, "pull-form")
        shot(page, f"pull-form-error-{width}")

        page.fill("#id_visibility_timeout_seconds", "45")
        page.click("form.stack button[type=submit]:not([name])")
        expect(page.locator("#pull-line")).to_contain_text("nothing is sent")
        endpoint = Endpoint.objects.get(merchant=merchant, kind="pull")
        assert endpoint.visibility_timeout_seconds == 45
        expect(page.locator("#visibility-timeout")).to_contain_text("45 s")
        expect(page.locator("#snippet-pull")).to_contain_text("/messages?limit=10")
        check(page, "pull-endpoint")
        shot(page, f"pull-endpoint-{width}")

        delivery = event_publish(
            merchant=merchant,
            type=LONG_TYPE,
            data={"n": 1},
            endpoint_ids=[endpoint.pk],
        ).created_deliveries[0]
        page.goto(f"{base}/deliveries/{delivery.pk}/")
        expect(page.locator("#summary")).to_have_text(
            "Waiting for its consumer to pull it."
        )
        check(page, "pull-delivery")
        shot(page, f"pull-delivery-{width}")
        page.goto(f"{base}/deliveries/")
        check(page, "pull-deliveries")
        page.goto(f"{base}/endpoints/{endpoint.pk}/health/")
        expect(page.locator("#pulling")).to_contain_text("never paused")
        check(page, "pull-health")
        shot(page, f"pull-health-{width}")
        page.goto(f"{base}/")
        check(page, "pull-endpoint-list")
        shot(page, f"pull-endpoint-list-{width}")


@pytest.mark.parametrize("width", [1280, 390, 360])
def test_a_listen_session_is_started_and_ended_in_a_browser(
    live_server, settings, width
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    slug = f"acme-{uuid.uuid4().hex[:8]}"
    merchant = factories.merchant(slug)
    user_with_role(merchant, Membership.Role.DEVELOPER, "dana")
    base = f"{live_server.url}/portal/m/{slug}"
    with chromium_page(width=width, height=900) as page:
        page.on("dialog", lambda dialog: dialog.accept())  # the End confirmation
        sign_in(page, live_server, "dana")
        page.goto(f"{base}/listen/")
        expect(page.locator("#sessions")).to_contain_text("No live session.")
        check(page, "listen-empty")
        shot(page, f"listen-empty-{width}")

        page.fill("#id_event_types", f"order.* {LONG_TYPE}")
        page.fill("#id_description", "Dana's laptop")
        page.click("#start-session")
        expect(page.locator("#started")).to_be_visible()
        session = Endpoint.objects.get(merchant=merchant, listen_session=True)
        secret = EndpointSecret.objects.get(endpoint=session).secret
        expect(page.locator("#started-secret")).to_have_text(secret)
        expect(page.locator("#started-command")).to_contain_text(
            f"--session {session.pk} --merchant {slug}"
        )
        expect(page.locator(f"#end-{session.pk}")).to_be_visible()
        check(page, "listen-started")
        shot(page, f"listen-started-{width}")

        page.reload()
        expect(page.locator("#started")).to_have_count(0)  # the secret, once
        page.goto(f"{base}/endpoints/{session.pk}/")
        expect(page.locator("#snippet-listen")).to_contain_text(
            f"--session {session.pk}"
        )
        expect(page.locator("#end-session")).to_be_visible()
        check(page, "listen-session-page")
        shot(page, f"listen-session-page-{width}")
        page.goto(f"{base}/listen/")
        page.click(f"#end-{session.pk}")
        expect(page.locator("#sessions")).to_contain_text("No live session.")
        session.refresh_from_db()
        assert not session.is_active
        check(page, "listen-ended")
