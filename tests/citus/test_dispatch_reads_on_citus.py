"""The dispatcher's cycle around the claim on Citus: loading the claimed jobs,
re-reading the breakers of the endpoints it holds jobs for, and giving unsent
rows back each run on the merchants' shards, one statement per merchant.

As in test_health_on_citus.py, `citus.multi_task_query_log_level = 'error'`
makes any statement Citus splits over shards an error.
"""

from __future__ import annotations

import pytest

from deliveries.dispatch.claiming import claim_batch, release
from deliveries.dispatch.gate import BreakerWatch
from deliveries.dispatch.jobs import jobs_load
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from endpoints import probes
from relayproject.lib.clock import utcnow
from tests.citus.test_health_on_citus import one_shard_statements_only
from tests.support import factories

pytestmark = [pytest.mark.citus, pytest.mark.django_db(transaction=True)]


def _two_merchants_claimed():
    merchants = [factories.merchant() for _ in range(2)]
    endpoints = []
    for merchant in merchants:
        endpoints.append(factories.endpoint(merchant))
        events_publish(
            merchant=merchant,
            events=[EventInput("order.paid", {"n": n}) for n in range(2)],
        )
    now = utcnow()
    claim = claim_batch(worker_id="w", now=now, lease_seconds=30, limit=4)
    assert len(claim.delivery_ids) == 4
    return merchants, endpoints, claim, now


def test_the_claimed_jobs_load_on_each_merchants_shard(distributed):
    merchants, endpoints, claim, now = _two_merchants_claimed()

    with one_shard_statements_only():
        jobs = jobs_load(
            delivery_ids=claim.delivery_ids,
            lease_until=claim.lease_until,
            probe_ids=set(),
            now=now,
            merchants=claim.merchants,
        )

    assert sorted(j.delivery_id for j in jobs) == sorted(claim.delivery_ids)
    assert {j.merchant_id for j in jobs} == {m.pk for m in merchants}
    assert all(len(j.secrets) == 1 for j in jobs)  # each endpoint's own secret
    assert [j.delivery_id for j in jobs] == sorted(j.delivery_id for j in jobs)


def test_the_breaker_reread_runs_on_each_merchants_shard(distributed):
    merchants, endpoints, claim, now = _two_merchants_claimed()
    probes.endpoint_breaker_open(endpoint_id=endpoints[0].pk, reason="test")
    watch = BreakerWatch(monotonic=lambda: 0.0)
    watch.learn({e.pk: e.merchant_id for e in endpoints})

    with one_shard_statements_only():
        changed = watch.refresh([e.pk for e in endpoints], now=now)

    assert changed is True
    assert set(watch.held) == {endpoints[0].pk}


def test_unsent_rows_are_given_back_on_each_merchants_shard(distributed):
    merchants, endpoints, claim, now = _two_merchants_claimed()

    with one_shard_statements_only():
        released = release(
            worker_id="w",
            lease_until=claim.lease_until,
            delivery_ids=claim.delivery_ids,
            due_at=now,
            merchants=claim.merchants,
        )

    assert released == 4
    assert Delivery.objects.filter(status=Delivery.Status.PENDING).count() == 4
