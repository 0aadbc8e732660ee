"""Staff see each quota in force on the merchant's page, and can override it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.support import factories


@pytest.fixture
def staff_client(client, db):
    client.force_login(User.objects.create_superuser("root", password="pw-for-tests"))
    return client


def _page(client, merchant) -> str:
    url = reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_merchant_page_shows_the_settings_in_force(staff_client):
    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    html = _page(staff_client, merchant)
    assert "1 of at most 100 (MAX_ENDPOINTS_PER_MERCHANT" in html
    assert "1000 events/s (PUBLISH_RATE_PER_MERCHANT)" in html
    assert "10000 at once (PUBLISH_BURST_PER_MERCHANT)" in html
    assert "at most 10000 events x subscribed endpoints" in html
    for field in ("max_endpoints", "publish_rate_per_second", "publish_burst"):
        assert f'name="{field}"' in html  # staff may set each one


def test_an_override_is_shown_as_the_merchants_own(staff_client, settings):
    settings.PUBLISH_RATE_PER_MERCHANT = 0
    merchant = factories.merchant("acme")
    merchant.max_endpoints = 5
    merchant.save()
    html = _page(staff_client, merchant)
    assert "0 of at most 5 (set for this merchant" in html
    assert "not limited (PUBLISH_RATE_PER_MERCHANT is 0)" in html
