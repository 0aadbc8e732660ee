"""The merchant's admin page says what unticking Active does, and unticking
it there switches the merchant off."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from tests.support.api import api_as, assert_problem

pytestmark = pytest.mark.django_db


def test_the_active_box_says_what_switching_off_does(admin_client, merchant):
    page = admin_client.get(
        reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    )

    text = html.unescape(page.content.decode())
    # The field's help, rendered beside the box (Django ties it to the input).
    assert 'aria-describedby="id_is_active_helptext"' in text
    for said in (
        "Untick to switch this merchant off",
        "its API keys are refused (403)",
        "no key may publish or change anything for it",
        "its deliveries are held, spending no attempt, until it is ticked again",
    ):
        assert said in text


def test_unticking_active_in_the_admin_refuses_its_keys(admin_client, merchant):
    own_key = api_as(merchant)
    saved = admin_client.post(
        reverse("admin:endpoints_merchant_change", args=[merchant.pk]),
        {
            "slug": merchant.slug,
            "name": merchant.name,
            "membership_set-TOTAL_FORMS": "0",
            "membership_set-INITIAL_FORMS": "0",
        },  # no "is_active": the box unticked
    )
    assert saved.status_code == 302

    merchant.refresh_from_db()
    assert not merchant.is_active
    body = assert_problem(own_key.get(f"/merchants/{merchant.slug}"), 403)
    assert "switched off by staff" in body["detail"]
