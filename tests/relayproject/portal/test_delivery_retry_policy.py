"""The portal's delivery page says which retry policy is in force, and where
each part of it comes from."""

from __future__ import annotations

import pytest
from django.urls import reverse

from deliveries.models import Delivery
from deliveries.services import event_publish
from endpoints.merchant_services import merchant_update
from endpoints.models import Membership
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.portal import user_with_role

pytestmark = pytest.mark.django_db


def test_the_delivery_page_shows_the_policy_in_force_and_its_sources(client, settings):
    settings.HTTP_TIMEOUT_SECONDS = 10
    merchant = factories.merchant()
    merchant_update(merchant=merchant, max_attempts=4)
    factories.endpoint(merchant, retry_schedule=[1, 2])
    event_publish(merchant=merchant, type="a", data={}, now=utcnow())
    client.force_login(user_with_role(merchant, Membership.Role.VIEWER, "viewer"))

    html = client.get(
        reverse(
            "portal:delivery_detail", args=[merchant.slug, Delivery.objects.get().pk]
        )
    ).content.decode()

    assert "up to 4 attempts (from your account default)" in html
    assert "1 s, 2 s, then 2 s each time (from this endpoint;" in html
    assert "each attempt may take 10 s (from the relay&#x27;s default)" in html
