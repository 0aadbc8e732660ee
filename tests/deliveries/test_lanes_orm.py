"""Ordered lanes through the ORM forms (SQLite, and a statement per lane on
Citus): they park and promote as the PostgreSQL statements do."""

from __future__ import annotations

import pytest

from deliveries.lanes import lanes_advance
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.both_backends, pytest.mark.django_db]


def statuses(endpoint) -> list[str]:
    rows = Delivery.objects.filter(endpoint=endpoint).order_by("lane_seq")
    return list(rows.values_list("status", flat=True))


def test_a_lane_parks_and_goes_on_on_either_database():
    merchant = factories.merchant()
    ordered = factories.endpoint(merchant, ordered=True)
    events_publish(
        merchant=merchant,
        events=[EventInput("a.b", {"n": n}, ordering_key="k") for n in range(3)],
    )
    assert statuses(ordered) == ["pending", "waiting", "waiting"]
    Delivery.objects.filter(endpoint=ordered, lane_seq=1).update(status="succeeded")
    lanes_advance(lanes=[(merchant.pk, ordered.pk, "k")], now=utcnow())
    assert statuses(ordered) == ["succeeded", "pending", "waiting"]
    assert lanes_advance(lanes=[(merchant.pk, ordered.pk, "k")], now=utcnow()) == []
