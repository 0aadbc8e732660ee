"""A lane's head that goes dead on reclaim (its lease lost with its last
attempt) lets its lane go on, in the claim's transaction."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.dispatch.claiming import claim_batch
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_a_head_dead_on_reclaim_promotes_the_next_row_of_its_lane():
    merchant = factories.merchant()
    endpoint = factories.endpoint(merchant, ordered=True, max_attempts=1)
    events_publish(
        merchant=merchant,
        events=[EventInput("a.b", {"n": n}, ordering_key="k") for n in range(3)],
    )
    now = utcnow()
    lost = now - timedelta(seconds=1)
    Delivery.objects.filter(endpoint=endpoint, lane_seq=1).update(
        status="delivering", claimed_by="gone", claimed_until=lost, next_attempt_at=lost
    )

    claim = claim_batch(worker_id="w", now=now, lease_seconds=60, limit=10)

    assert claim.dead_on_reclaim == 1
    statuses = dict(
        Delivery.objects.filter(endpoint=endpoint).values_list("lane_seq", "status")
    )
    assert statuses == {1: "dead", 2: "pending", 3: "waiting"}
