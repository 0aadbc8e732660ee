"""The default signing scheme in the admin (staff set a merchant's), in the
portal (the new-endpoint form starts on the default it will take), and in the
standalone relay's settings (another value is refused at start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from endpoints.models import Endpoint, Membership, Merchant
from relayproject.portal.endpoint_form import EndpointForm
from tests.support import factories
from tests.support.portal import user_with_role

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def admin_change(admin_client, merchant: Merchant, **fields):
    data = {
        "slug": merchant.slug,
        "name": merchant.name,
        "is_active": "on",
        "membership_set-TOTAL_FORMS": "0",
        "membership_set-INITIAL_FORMS": "0",
        **fields,
    }
    url = reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    return admin_client.post(url, data)


def test_staff_set_a_merchants_default_beside_its_retry_defaults(admin_client):
    merchant = factories.merchant()
    url = reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    page = admin_client.get(url).content.decode()
    assert page.index('name="timeout_seconds"') < page.index('name="signing"')

    response = admin_change(admin_client, merchant, signing="both")

    assert response.status_code == 302, response.content.decode()[:2000]
    merchant.refresh_from_db()
    assert merchant.signing == "both"
    assert factories.endpoint(merchant).signing == "both"


def test_staff_clear_a_merchants_default_back_to_the_relays(admin_client):
    merchant = factories.merchant()
    Merchant.objects.filter(pk=merchant.pk).update(signing="v1a")

    response = admin_change(admin_client, merchant, signing="")

    assert response.status_code == 302, response.content.decode()[:2000]
    merchant.refresh_from_db()
    assert merchant.signing is None


def test_the_admin_refuses_another_scheme(admin_client):
    merchant = factories.merchant()

    response = admin_change(admin_client, merchant, signing="v2")

    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    merchant.refresh_from_db()
    assert merchant.signing is None


@pytest.mark.parametrize(
    ("merchant_default", "relay_default", "shown", "source"),
    [
        (None, "v1", "v1", "the relay's default"),
        (None, "both", "both", "the relay's default"),
        ("v1a", "v1", "v1a", "your account's default"),
    ],
)
def test_the_new_endpoint_form_starts_on_the_default_it_will_take(
    settings, merchant_default, relay_default, shown, source
):
    settings.DEFAULT_SIGNING_SCHEME = relay_default
    merchant = factories.merchant()
    Merchant.objects.filter(pk=merchant.pk).update(signing=merchant_default)
    merchant.refresh_from_db()

    field = EndpointForm(seen_types=[], merchant=merchant).fields["signing"]

    assert field.initial == shown
    assert f"New endpoints sign with {shown} unless another is picked: {source}." in (
        field.help_text
    )


def test_the_portals_new_endpoint_page_selects_the_merchants_default(client):
    merchant = factories.merchant()
    Merchant.objects.filter(pk=merchant.pk).update(signing="v1a")
    client.force_login(user_with_role(merchant, Membership.Role.OWNER, "owner"))
    url = reverse("portal:endpoint_create", args=[merchant.slug])

    page = client.get(url).content.decode()

    assert '<option value="v1a" selected>' in page
    # Left as it was, the form creates the endpoint with that scheme.
    response = client.post(url, {"url": "http://127.0.0.1:9/hook", "signing": "v1a"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Endpoint.objects.get(merchant=merchant).signing == "v1a"


def test_the_standalone_relay_refuses_to_start_with_another_scheme():
    env = {**os.environ, "DEBUG": "1", "DEFAULT_SIGNING_SCHEME": "v2"}
    env.pop("DJANGO_SETTINGS_MODULE", None)

    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode != 0
    assert "DEFAULT_SIGNING_SCHEME must be v1, v1a or both, not 'v2'." in done.stderr
