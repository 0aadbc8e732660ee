"""A pull that meets an expired lease spends it as the upkeep would, and
/metrics counts it the same (relay_reclaimed_total, relay_attempts_total)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.models import Counter
from deliveries.pull.leasing import messages_lease
from relayproject.lib.clock import utcnow
from tests.deliveries.pull.support import VISIBILITY, publish, pull_endpoint

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def totals() -> dict[tuple[str, str], float]:
    found: dict[tuple[str, str], float] = {}
    for name, label, value in Counter.objects.values_list("name", "label", "value"):
        found[(name, label)] = found.get((name, label), 0) + value
    return found


def test_a_pull_that_takes_expired_leases_over_counts_them():
    endpoint = pull_endpoint(max_attempts=1)
    kept = pull_endpoint(endpoint.merchant)
    publish(endpoint, 2)  # each event reaches both endpoints
    now = utcnow()
    later = now + timedelta(seconds=VISIBILITY + 1)
    messages_lease(endpoint=endpoint, limit=10, now=now)
    messages_lease(endpoint=kept, limit=10, now=now)

    assert messages_lease(endpoint=endpoint, limit=10, now=later) == []  # both dead
    assert len(messages_lease(endpoint=kept, limit=10, now=later)) == 2

    counted = totals()
    assert counted[("reclaimed_total", "")] == 4
    assert counted[("attempts_total", "retry")] == 2
    assert counted[("attempts_total", "dead")] == 2
    assert counted[("deliveries_total", "dead")] == 2
