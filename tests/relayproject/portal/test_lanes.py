"""Ordered lanes in the portal: the endpoint form's `ordered`, the test ping's
and the example's ordering key, and what the delivery pages say of a lane:
waiting in order, skipped in order, and a replay that goes out of order."""

from __future__ import annotations

import pytest
from django.urls import reverse

from deliveries.lanes import lanes_advance
from deliveries.models import Delivery, Event
from endpoints.models import EventType
from relayproject.lib.clock import utcnow
from tests.relayproject.portal.test_portal_platform import error_beside

pytestmark = pytest.mark.django_db


def url(name, side, *extra):
    return reverse(f"portal:{name}", args=[side.merchant.slug, *extra])


def ping(client, side, key):
    return client.post(
        url("endpoint_test", side, side.endpoint.pk), {"ordering_key": key}
    )


def test_an_owner_makes_an_endpoint_ordered_and_pings_it_in_order(client, world):
    client.force_login(world.owner)
    mine = world.mine
    client.post(
        url("endpoint_edit", mine, mine.endpoint.pk),
        {"url": mine.endpoint.url, "ordered": "on"},
    )
    mine.endpoint.refresh_from_db()
    assert mine.endpoint.ordered
    detail = client.get(url("endpoint_detail", mine, mine.endpoint.pk)).content.decode()
    assert 'id="test-ordering-key"' in detail
    assert "sent one at a time, in publish order" in detail

    first, second = ping(client, mine, "order-7"), ping(client, mine, "order-7")
    laned = Delivery.objects.filter(ordering_key="order-7").order_by("lane_seq")
    assert [d.status for d in laned] == ["pending", "waiting"]
    assert second["Location"] == url("delivery_detail", mine, laned[1].pk)
    page = client.get(second["Location"]).content.decode()
    assert "Waiting in order" in page
    assert 'id="replay"' not in page  # not sent yet: nothing to replay
    assert first.status_code == 302


def test_a_too_long_ordering_key_is_refused_beside_its_field(client, world):
    EventType.objects.create(name="order.created", example={})
    client.force_login(world.owner)
    before = Event.objects.count()
    response = client.post(
        url("endpoint_example", world.mine, world.mine.endpoint.pk),
        {"event_type": "order.created", "data": "{}", "ordering_key": "k" * 256},
    )
    assert response.status_code == 400
    assert "at most 255" in error_beside(response.content.decode(), "ordering_key")
    assert Event.objects.count() == before


def test_a_dead_letter_in_a_lane_says_it_was_skipped_and_its_replay_goes_out_of_order(
    client, world
):
    mine = world.mine
    mine.endpoint.ordered = True
    mine.endpoint.save()
    client.force_login(world.owner)
    ping(client, mine, "k")
    ping(client, mine, "k")
    head = Delivery.objects.get(ordering_key="k", lane_seq=1)
    Delivery.objects.filter(pk=head.pk).update(status="dead", dead_at=utcnow())
    lanes_advance(lanes=[(mine.merchant.pk, mine.endpoint.pk, "k")], now=utcnow())

    page = client.get(url("delivery_detail", mine, head.pk)).content.decode()
    assert "Skipped in order" in page
    assert 'id="replay-out-of-order"' in page
    dead_list = client.get(url("delivery_list", mine), {"status": "dead"})
    assert "Skipped in order" in dead_list.content.decode()

    client.post(url("delivery_replay", mine, head.pk))
    head.refresh_from_db()
    assert head.out_of_order and head.status == "pending"
    page = client.get(url("delivery_detail", mine, head.pk)).content.decode()
    assert "Replayed out of order" in page
