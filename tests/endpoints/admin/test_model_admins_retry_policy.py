"""Staff set a merchant's retry policy defaults in the admin, within the
operator's bounds, and see an endpoint's own."""

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
        "membership_set-TOTAL_FORMS": "0",
        "membership_set-INITIAL_FORMS": "0",
        **fields,
    }
    url = reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    return admin_client.post(url, data)


def test_staff_set_a_merchants_retry_defaults(admin_client):
    merchant = factories.merchant()

    response = change(
        admin_client,
        merchant,
        retry_schedule="[5, 30]",
        max_attempts="4",
        timeout_seconds="3",
    )

    assert response.status_code == 302
    merchant.refresh_from_db()
    assert (
        merchant.retry_schedule,
        merchant.max_attempts,
        merchant.timeout_seconds,
    ) == (
        [5, 30],
        4,
        3.0,
    )


def test_a_default_past_a_bound_is_refused_beside_the_field_naming_it(
    admin_client, settings
):
    settings.RETRY_MAX_ATTEMPTS_LIMIT = 20
    merchant = factories.merchant()

    response = change(admin_client, merchant, max_attempts="21")

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "RETRY_MAX_ATTEMPTS_LIMIT" in errors["max_attempts"][0]
    merchant.refresh_from_db()
    assert merchant.max_attempts is None


def test_an_endpoints_own_policy_is_shown(admin_client):
    endpoint = factories.endpoint(retry_schedule=[1, 2], timeout_seconds=4)

    page = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    ).content.decode()

    assert "[1, 2]" in page
    assert "Timeout seconds" in page
