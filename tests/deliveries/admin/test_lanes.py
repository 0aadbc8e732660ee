"""Ordered lanes in the staff console: the dead-letter list says a lane's dead
letter was skipped in order, its page says so, and its Replay button warns
that a replay goes out of order."""

from __future__ import annotations

import pytest
from django.urls import reverse

from deliveries.lanes import lanes_advance
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.admin import staff

pytestmark = pytest.mark.django_db


def test_a_lanes_dead_letter_is_skipped_in_order_and_its_replay_warned(client):
    merchant = factories.merchant()
    endpoint = factories.endpoint(merchant, ordered=True)
    events_publish(
        merchant=merchant,
        events=[EventInput("a.b", {"n": n}, ordering_key="o-1") for n in range(2)],
    )
    head = Delivery.objects.get(lane_seq=1)
    Delivery.objects.filter(pk=head.pk).update(status="dead", dead_at=utcnow())
    lanes_advance(lanes=[(merchant.pk, endpoint.pk, "o-1")], now=utcnow())
    client.force_login(
        staff("ops", "deliveries.view_delivery", "deliveries.change_delivery")
    )

    listed = client.get(reverse("admin:deliveries_deadletter_changelist"))
    assert "Skipped in order" in listed.content.decode()
    page = client.get(
        reverse("admin:deliveries_delivery_change", args=[head.pk])
    ).content.decode()
    assert "Skipped in order" in page
    assert 'id="replay-out-of-order"' in page
    waiting_next = Delivery.objects.get(lane_seq=2)
    page = client.get(
        reverse("admin:deliveries_delivery_change", args=[waiting_next.pk])
    ).content.decode()
    assert "In order: ordering key" in page


def test_the_pipeline_counts_what_waits_in_lanes(client):
    merchant = factories.merchant()
    factories.endpoint(merchant, ordered=True)
    events_publish(
        merchant=merchant,
        events=[EventInput("a.b", {"n": n}, ordering_key="o-1") for n in range(3)],
    )
    client.force_login(staff("ops", "deliveries.view_delivery"))
    page = client.get(reverse("admin:deliveries_pipeline")).content.decode()
    assert 'id="waiting-in-lanes">2<' in page
