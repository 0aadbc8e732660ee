"""Day partitions of distributed tables: made ahead, dropped whole, on Citus.

Fixtures and seed from tests/deliveries/history/test_partitions.py; the assertions
here read rows, not partition names (on Citus a row's tableoid is its
shard's table, which the coordinator does not know by name).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from deliveries.history import partitions
from deliveries.history.partitions import TABLES
from deliveries.models import Attempt, Delivery, Event
from relayproject.lib.clock import utcnow
from tests.deliveries.history.test_partitions import (  # noqa: F401 - fixtures
    _drop_partitions_made_here,
    history,
    old_days,
    prune,
)

pytestmark = [pytest.mark.citus, pytest.mark.django_db(transaction=True)]


def _distributed_partitions(day) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT logicalrelid::regclass::text FROM pg_dist_partition "
            "WHERE logicalrelid::regclass::text = ANY(%s)",
            [[h.partition(day) for h in TABLES]],
        )
        return {name for (name,) in cursor.fetchall()}


def test_partitions_made_ahead_are_distributed_with_their_tables():
    day = utcnow().date() + timedelta(days=45)
    partitions.partitions_ensure(first=day, last=day)
    assert _distributed_partitions(day) == {h.partition(day) for h in TABLES}


def test_prune_drops_old_days_of_distributed_tables_and_keeps_what_must_stay(
    history,  # noqa: F811 - the fixture imported above
    old_days,  # noqa: F811
):
    out = prune("--older-than", "30")

    assert out.startswith("deleted 2 deliveries, 3 attempts, 1 events"), out
    for table in TABLES:
        assert old_days not in partitions.partition_days(table)
    remaining = set(Delivery.objects.values_list("pk", flat=True))
    kept = {history[s].pk for s in ("pending", "delivering", "dead", "recent")}
    assert kept | {history["shared_pending"].pk} == remaining
    for status in ("pending", "delivering", "dead"):
        row = history[status]
        assert Attempt.objects.filter(delivery_id=row.pk).count() == 2
        assert Event.objects.filter(pk=row.event_id).exists()
    assert not Event.objects.filter(pk=history["succeeded"].event_id).exists()
