"""In Chromium, at 1280, 390 and 360 px: an owner sets OAuth2 auth and uploads
a PKCS#12 client certificate on the Authentication page, past a first try
with errors, then gives the endpoint a retry schedule; every page fits the
screen and keeps its labels by their fields."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from playwright.sync_api import expect

from endpoints.models import Endpoint, Membership
from relayproject.lib.clock import utcnow
from tests.relayproject.portal.test_layout_browser import check
from tests.support import client_certs, factories
from tests.support.browser import chromium_page, shot
from tests.support.portal import PASSWORD, user_with_role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CLIENT_SECRET = "browser-client-secret-5e1f"
P12_PASSWORD = "browser-p12-password-c7d2"


@pytest.mark.parametrize("width", [1280, 390, 360])
def test_an_owner_sets_oauth2_and_uploads_a_certificate(
    live_server, settings, tmp_path, width
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    merchant = factories.merchant("acme")
    user_with_role(merchant, Membership.Role.OWNER, "alice")
    endpoint = factories.endpoint(
        merchant, url="https://127.0.0.1:9/hooks.example-merchant.com/webhooks/v2"
    )
    # Expires inside the warning window, so the page has a warning to show.
    made = client_certs.identity(
        "payments-client.acme.example", not_after=utcnow() + dt.timedelta(days=10)
    )
    p12 = tmp_path / "client.p12"
    p12.write_bytes(base64.b64decode(made.pkcs12(P12_PASSWORD)))
    base = f"{live_server.url}/portal/m/acme/endpoints/{endpoint.pk}"

    with chromium_page(width=width, height=900) as page:
        page.goto(f"{live_server.url}/portal/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.goto(f"{base}/")
        page.click("nav.tabs >> text=Authentication")
        expect(page.locator("h1")).to_contain_text("Authentication")

        # Only the chosen type's fields show.
        page.check("#auth-type-picker >> text=HTTP Basic")
        expect(page.locator("#auth-oauth2")).to_be_hidden()
        page.check("#auth-type-picker >> text=OAuth2 client credentials")
        expect(page.locator("#auth-basic")).to_be_hidden()

        page.fill("#id_token_url", "ftp://127.0.0.1/token")
        page.fill("#id_client_id", "acme-relay")
        page.fill("#id_client_secret", CLIENT_SECRET)
        page.set_input_files("#id_pkcs12", str(p12))
        page.fill("#id_pkcs12_password", "not-the-password")
        page.click("#save-credentials")
        expect(page.locator("#token_url-errors")).to_contain_text("http and https")
        expect(page.locator("#pkcs12-errors")).to_contain_text("password is wrong")
        assert page.input_value("#id_client_secret") == ""  # never sent back
        check(page, "credentials-error")
        shot(page, f"credentials-error-{width}")

        page.fill("#id_token_url", "http://127.0.0.1:9/oauth/token")
        page.fill("#id_client_secret", CLIENT_SECRET)
        page.set_input_files("#id_pkcs12", str(p12))
        page.fill("#id_pkcs12_password", P12_PASSWORD)
        page.click("#save-credentials")
        expect(page.locator(".messages")).to_contain_text("Saved")
        expect(page.locator("#cert-subject")).to_contain_text("payments-client")
        expect(page.locator("#cert-badge")).to_contain_text("expires in 9 days")
        expect(page.locator("#auth-state")).to_contain_text("acme-relay")
        assert CLIENT_SECRET not in page.content()
        check(page, "credentials-set")
        shot(page, f"credentials-set-{width}")

        page.goto(f"{base}/edit/")
        page.click("#advanced summary")
        page.fill("#id_retry_schedule", "5, 30, 300")
        page.fill("#id_max_attempts", "500")
        page.click("button[type=submit] >> text=Save")
        expect(page.locator("#max_attempts-errors")).to_contain_text(
            "RETRY_MAX_ATTEMPTS_LIMIT"
        )
        check(page, "retry-error")
        shot(page, f"retry-error-{width}")
        page.fill("#id_max_attempts", "4")
        page.click("button[type=submit] >> text=Save")
        expect(page.locator("#retry-schedule")).to_contain_text("5 s, 30 s, 300 s")
        check(page, "endpoint")
        shot(page, f"endpoint-credentials-{width}")

    stored = Endpoint.objects.get(pk=endpoint.pk)
    assert (stored.auth_type, stored.auth_secret) == ("oauth2", CLIENT_SECRET)
    assert stored.tls_subject.startswith("CN=payments-client.acme.example")
    assert (stored.retry_schedule, stored.max_attempts) == ([5, 30, 300], 4)
