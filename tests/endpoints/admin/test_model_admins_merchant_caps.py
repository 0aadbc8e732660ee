"""Staff see and set a merchant's cap on sends at once in the admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from endpoints.models import Merchant
from tests.support import factories

pytestmark = pytest.mark.django_db


def change(admin_client, merchant: Merchant, **fields):
    data = {
        "slug": merchant.slug,
        "name": merchant.name,
        "is_active": "on",
        "max_in_flight": "",
        "membership_set-TOTAL_FORMS": "0",
        "membership_set-INITIAL_FORMS": "0",
        **fields,
    }
    url = reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    return admin_client.post(url, data)


def test_the_cap_in_force_is_shown_with_where_it_comes_from(admin_client, settings):
    settings.MERCHANT_MAX_IN_FLIGHT = 64
    default = factories.merchant("default")
    own = factories.merchant("own")
    own.max_in_flight = 5
    own.save(update_fields=["max_in_flight"])

    listing = admin_client.get(reverse("admin:endpoints_merchant_changelist"))
    page = admin_client.get(
        reverse("admin:endpoints_merchant_change", args=[default.pk])
    )

    assert "64 (the MERCHANT_MAX_IN_FLIGHT setting)" in listing.content.decode()
    assert "5 (set for this merchant)" in listing.content.decode()
    assert "64 (the MERCHANT_MAX_IN_FLIGHT setting)" in page.content.decode()


def test_staff_set_and_clear_a_merchants_cap(admin_client):
    merchant = factories.merchant()

    assert change(admin_client, merchant, max_in_flight="7").status_code == 302
    merchant.refresh_from_db()
    assert merchant.max_in_flight == 7
    assert change(admin_client, merchant).status_code == 302
    merchant.refresh_from_db()
    assert merchant.max_in_flight is None


def test_a_cap_of_zero_is_refused_beside_the_field(admin_client):
    merchant = factories.merchant()

    response = change(admin_client, merchant, max_in_flight="0")

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["max_in_flight"]
    merchant.refresh_from_db()
    assert merchant.max_in_flight is None
