"""Retry now on a pending delivery, in the portal and the admin: it goes at
the next claim, or the page says why it cannot."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from deliveries.models import Delivery
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow

pytestmark = pytest.mark.django_db


def waiting(delivery: Delivery) -> None:
    """Pending after one failed attempt, its retry an hour away."""
    Delivery.objects.filter(pk=delivery.pk).update(
        status="pending", next_attempt_at=utcnow() + timedelta(hours=1), dead_at=None
    )


def portal(client, world, name):
    side = world.mine
    return reverse(f"portal:{name}", args=[side.merchant.slug, side.delivery.pk])


def test_retry_now_makes_a_waiting_delivery_due(client, world):
    waiting(world.mine.delivery)
    client.force_login(world.owner)
    page = client.get(portal(client, world, "delivery_detail")).content.decode()
    assert 'id="retry-now"' in page

    response = client.post(portal(client, world, "delivery_retry_now"), follow=True)

    delivery = Delivery.objects.get(pk=world.mine.delivery.pk)
    assert delivery.next_attempt_at <= utcnow()
    assert delivery.attempt_count == 1  # the budget is untouched
    assert (
        "It is due now, without waiting for its retry time: sent as soon as its "
        "endpoint and merchant have a send slot free"
    ) in response.content.decode()


def test_retry_now_on_a_paused_endpoint_says_why_and_changes_nothing(client, world):
    waiting(world.mine.delivery)
    probe = utcnow() + timedelta(minutes=8)
    EndpointHealth.objects.filter(pk=world.mine.endpoint.pk).update(
        breaker_state="open", consecutive_failures=10, next_probe_at=probe
    )
    before = Delivery.objects.get(pk=world.mine.delivery.pk).next_attempt_at
    client.force_login(world.owner)
    page = client.get(portal(client, world, "delivery_detail")).content.decode()
    assert 'id="retry-now"' not in page
    assert "Paused after 10 failures, next try" in page
    assert 'id="try-now"' in page  # what ends the wait (test_try_now.py)

    response = client.post(portal(client, world, "delivery_retry_now"), follow=True)

    assert "Not sent now. The endpoint is paused" in response.content.decode()
    assert Delivery.objects.get(pk=world.mine.delivery.pk).next_attempt_at == before


def test_admin_replay_toward_a_paused_endpoint_does_not_say_shortly(client, world):
    EndpointHealth.objects.filter(pk=world.mine.endpoint.pk).update(
        breaker_state="open",
        consecutive_failures=10,
        next_probe_at=utcnow() + timedelta(minutes=8),
    )
    client.force_login(User.objects.create_superuser("staff", password="x"))
    delivery = world.mine.delivery
    response = client.post(
        reverse("admin:deliveries_delivery_replay", args=[delivery.pk]), follow=True
    )
    html = response.content.decode()
    assert "shortly" not in html
    assert f"Replayed {delivery.pk}: it is pending, but not sent yet. Paused" in html


def test_admin_retry_now_makes_a_waiting_delivery_due(client, world):
    waiting(world.mine.delivery)
    client.force_login(User.objects.create_superuser("staff", password="x"))
    delivery = world.mine.delivery
    page = client.get(
        reverse("admin:deliveries_delivery_change", args=[delivery.pk])
    ).content.decode()
    assert 'id="retry-now-button"' in page
    client.post(reverse("admin:deliveries_delivery_retry_now", args=[delivery.pk]))
    assert Delivery.objects.get(pk=delivery.pk).next_attempt_at <= utcnow()
