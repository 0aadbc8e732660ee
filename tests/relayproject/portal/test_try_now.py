"""*Try now* on a paused endpoint: the probe is due at once, never twice; the
test ping of a paused endpoint is its probe; a URL change ends the pause.
(Real dispatchers and a receiver: tests/acceptance/test_try_now.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from deliveries.models import Delivery
from endpoints import services
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow

pytestmark = pytest.mark.django_db

LATER = timedelta(hours=1)


def paused(world, *, state: str = "open") -> EndpointHealth:
    """The endpoint paused for an hour (or its probe in flight: half_open),
    its delivery pending and waiting an hour for its retry time."""
    Delivery.objects.filter(pk=world.mine.delivery.pk).update(
        status="pending", next_attempt_at=utcnow() + LATER, dead_at=None
    )
    EndpointHealth.objects.filter(pk=world.mine.endpoint.pk).update(
        breaker_state=state,
        consecutive_failures=10,
        last_failure_at=utcnow(),
        opened_at=utcnow(),
        next_probe_at=utcnow() + LATER,
    )
    return EndpointHealth.objects.get(pk=world.mine.endpoint.pk)


def url(world, name: str) -> str:
    return reverse(
        f"portal:{name}", args=[world.mine.merchant.slug, world.mine.endpoint.pk]
    )


def test_a_paused_endpoint_offers_try_now_and_it_makes_the_probe_due(client, world):
    paused(world)
    client.force_login(world.owner)
    page = client.get(url(world, "endpoint_detail")).content.decode()
    assert 'id="try-now"' in page and "Sending is paused until" in page

    response = client.post(url(world, "endpoint_try_now"), follow=True)

    assert "Trying now" in response.content.decode()
    health = EndpointHealth.objects.get(pk=world.mine.endpoint.pk)
    assert (health.breaker_state, health.next_probe_at <= utcnow()) == ("open", True)
    # The probe has something to send: the oldest pending delivery is due.
    assert Delivery.objects.get(pk=world.mine.delivery.pk).next_attempt_at <= utcnow()


def test_try_now_while_a_probe_is_in_flight_leaves_it_the_only_one(client, world):
    before = paused(world, state="half_open")
    client.force_login(world.owner)
    page = client.get(url(world, "endpoint_detail")).content.decode()
    assert 'id="try-now" disabled' in page
    assert "A test delivery is being sent now" in page

    response = client.post(url(world, "endpoint_try_now"), follow=True)

    assert "a test delivery is already deciding" in response.content.decode()
    after = EndpointHealth.objects.get(pk=world.mine.endpoint.pk)
    # Still not due: a due half-open row would be granted a second probe.
    assert (after.breaker_state, after.next_probe_at) == (
        "half_open",
        before.next_probe_at,
    )
    due = Delivery.objects.get(pk=world.mine.delivery.pk).next_attempt_at
    assert due > utcnow()


def test_try_now_on_a_healthy_endpoint_changes_nothing(client, world):
    client.force_login(world.owner)
    response = client.post(url(world, "endpoint_try_now"), follow=True)
    assert "the endpoint is not paused" in response.content.decode()
    assert EndpointHealth.objects.get(pk=world.mine.endpoint.pk).breaker_state == (
        "closed"
    )


def test_a_viewer_cannot_try_now(client, world):
    paused(world)
    client.force_login(world.viewer)
    assert (
        'id="try-now"' not in client.get(url(world, "endpoint_detail")).content.decode()
    )
    assert client.post(url(world, "endpoint_try_now")).status_code == 403
    health = EndpointHealth.objects.get(pk=world.mine.endpoint.pk)
    assert health.next_probe_at > utcnow()


def test_a_paused_deliverys_page_offers_try_now(client, world):
    paused(world)
    client.force_login(world.owner)
    detail = reverse(
        "portal:delivery_detail",
        args=[world.mine.merchant.slug, world.mine.delivery.pk],
    )
    page = client.get(detail).content.decode()
    assert 'id="try-now"' in page and 'id="retry-now"' not in page

    response = client.post(
        url(world, "endpoint_try_now"),
        {"next_delivery": world.mine.delivery.pk},
    )

    assert response.url == detail
    assert EndpointHealth.objects.get(pk=world.mine.endpoint.pk).next_probe_at <= (
        utcnow()
    )


def test_the_test_ping_of_a_paused_endpoint_is_its_probe_now(client, world):
    paused(world)
    client.force_login(world.owner)
    client.post(url(world, "endpoint_test"))
    health = EndpointHealth.objects.get(pk=world.mine.endpoint.pk)
    assert (health.breaker_state, health.next_probe_at <= utcnow()) == ("open", True)


def test_changing_the_url_ends_the_pause(world):
    paused(world)
    services.endpoint_update(
        endpoint=world.mine.endpoint, url="http://127.0.0.1:10/hook", now=utcnow()
    )
    health = EndpointHealth.objects.get(pk=world.mine.endpoint.pk)
    assert (health.breaker_state, health.consecutive_failures) == ("closed", 0)


def test_changing_only_the_description_keeps_the_pause(world):
    paused(world)
    services.endpoint_update(
        endpoint=world.mine.endpoint, description="orders", now=utcnow()
    )
    assert EndpointHealth.objects.get(pk=world.mine.endpoint.pk).breaker_state == (
        "open"
    )


def test_the_health_page_of_a_paused_endpoint_offers_try_now(client, world):
    paused(world)
    client.force_login(world.owner)
    page = client.get(url(world, "endpoint_health")).content.decode()
    assert 'id="try-now"' in page
