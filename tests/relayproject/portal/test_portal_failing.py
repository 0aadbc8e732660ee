"""The portal when delivery fails: banners with why, since when and what to
do; failing endpoints first; re-enable with held deliveries; email choices."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from deliveries.models import Delivery
from deliveries.notifications.models import NotificationAddress, NotificationSettings
from endpoints.models import EndpointHealth
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from tests.deliveries.notifications.conftest import attempt
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, world):
    client.force_login(world.owner)
    return client


def test_disabled_banner_says_why_and_offers_reenable_with_held(signed_in, world):
    endpoint = world.mine.endpoint
    attempt(endpoint, utcnow() - timedelta(hours=1))  # one held pending delivery
    endpoint_disable(
        endpoint=endpoint, reason="the receiver answered 410 Gone", by="receiver"
    )
    url = reverse("portal:endpoint_detail", args=["acme", endpoint.pk])
    page = signed_in.get(url).content.decode()
    assert 'id="condition"' in page
    assert "This endpoint is disabled since" in page
    assert "the receiver answered 410 Gone" in page
    assert "1 pending delivery is held" in page
    assert "Re-enable and send held deliveries now" in page

    response = signed_in.post(
        reverse("portal:endpoint_reenable", args=["acme", endpoint.pk])
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.is_active
    held = Delivery.objects.get(endpoint=endpoint, status="pending")
    assert held.attempt_count == 1
    assert held.next_attempt_at <= utcnow()
    assert 'id="condition"' not in signed_in.get(url).content.decode()


def test_failing_banner_and_failing_endpoints_listed_first(signed_in, world):
    healthy = world.mine.endpoint
    failing = factories.endpoint(world.mine.merchant, url="http://127.0.0.1:9/b")
    attempt(failing, utcnow() - timedelta(hours=2))
    endpoint_breaker_open(endpoint_id=failing.pk, reason="opened after 10 failures")
    listing = signed_in.get(reverse("portal:endpoint_list", args=["acme"]))
    html = listing.content.decode()
    assert html.index(failing.pk) < html.index(healthy.pk)
    assert 'class="failing"' in html
    detail = signed_in.get(
        reverse("portal:endpoint_detail", args=["acme", failing.pk])
    ).content.decode()
    assert "This endpoint is failing since" in detail
    assert "1 failed attempt and no success since then" in detail
    assert "it is disabled automatically" in detail
    assert EndpointHealth.objects.get(pk=failing.pk).breaker_state == "open"


def test_email_choices_saved_and_bad_addresses_shown_beside_the_field(signed_in, world):
    url = reverse("portal:notification_settings", args=["acme"])
    bad = signed_in.post(
        url, {"email_failing": "on", "extra_emails": "ops@acme.test\nnot-an-address"}
    )
    assert bad.status_code == 400
    assert 'id="extra_emails-errors"' in bad.content.decode()
    assert "Not an email address: &#x27;not-an-address&#x27;" in bad.content.decode()
    assert not NotificationSettings.objects.exists()
    good = signed_in.post(url, {"email_failing": "on", "extra_emails": "ops@acme.test"})
    assert good.status_code == 302
    saved = NotificationSettings.objects.get(merchant=world.mine.merchant)
    assert (saved.email_failing, saved.email_disabled, saved.email_enabled) == (
        True,
        False,
        False,
    )
    (listed,) = NotificationAddress.objects.filter(merchant=world.mine.merchant)
    assert (listed.email, listed.confirmed_at) == ("ops@acme.test", None)
