"""Publish and claim on a Citus cluster, statement by statement."""

from __future__ import annotations

import pytest
from django.db import connection

from deliveries.dispatch.claiming import claim_batch
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.citus]


def _shard_of(merchant_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT get_shard_id_for_distribution_column('deliveries_delivery', %s)",
            [merchant_id],
        )
        return cursor.fetchone()[0]


def test_a_publish_writes_the_event_and_its_deliveries_on_the_merchants_shard(
    distributed,
):
    merchant = factories.merchant()
    for n in range(3):
        factories.endpoint(merchant, url=f"http://127.0.0.1:9/{n}")
    events_publish(
        merchant=merchant, events=[EventInput("order.paid", {"n": n}) for n in range(5)]
    )
    rows = Delivery.objects.filter(merchant_id=merchant.pk)
    assert rows.count() == 15
    with connection.cursor() as cursor:
        # Every row is in the shard Citus names for the merchant.
        cursor.execute(
            "SELECT DISTINCT get_shard_id_for_distribution_column("
            "'deliveries_delivery', merchant_id) FROM deliveries_delivery"
        )
        assert [r[0] for r in cursor.fetchall()] == [_shard_of(merchant.pk)]


def test_the_claim_takes_each_merchants_rows_in_single_shard_statements(distributed):
    merchants = [factories.merchant() for _ in range(3)]
    for merchant in merchants:
        factories.endpoint(merchant)
        events_publish(
            merchant=merchant,
            events=[EventInput("order.paid", {"n": n}) for n in range(4)],
        )
    claim = claim_batch(worker_id="w", now=utcnow(), lease_seconds=30, limit=6)
    taken = Delivery.objects.filter(pk__in=claim.delivery_ids)
    # Fair between merchants: 6 rows, 2 from each.
    per_merchant = sorted(
        taken.values_list("merchant_id", flat=True).order_by("merchant_id")
    )
    assert per_merchant == sorted([m.pk for m in merchants] * 2)
    assert set(taken.values_list("status", flat=True)) == {"delivering"}
