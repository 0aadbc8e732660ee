"""The breaker's and the rate bucket's writes (endpoints/health.py) on Citus:
each runs on its merchant's shard alone.

Citus runs a write that names only the endpoint too, on every shard, and
serialises it with every other write of the table, so nothing fails: it is
slow. `citus.multi_task_query_log_level = 'error'` makes any statement Citus
splits over shards an error, so these tests fail on the first statement of
the dispatcher's that does not name its merchant.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection, transaction

from endpoints import health
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.citus, pytest.mark.django_db(transaction=True)]

State = EndpointHealth.State


@contextmanager
def one_shard_statements_only():
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL citus.multi_task_query_log_level = 'error'")
        yield


def test_a_flushs_breaker_writes_run_on_each_merchants_shard(distributed, settings):
    settings.BREAKER_FAILURE_THRESHOLD = 3
    failing = factories.endpoint()
    healthy = factories.endpoint()  # another merchant
    outcomes = [
        health.Outcome(
            endpoint_id=failing.pk,
            succeeded=False,
            is_probe=False,
            error="HTTP 500",
            merchant_id=failing.merchant_id,
        )
        for _ in range(3)
    ] + [
        health.Outcome(
            endpoint_id=healthy.pk,
            succeeded=True,
            is_probe=False,
            merchant_id=healthy.merchant_id,
        )
    ]
    now = utcnow()

    with one_shard_statements_only():
        locked = health.health_rows_locked(health.rows_to_lock(outcomes))
        assert list(locked) == [failing.pk]  # the healthy one is at rest
        for outcome in outcomes[:3]:
            health.outcome_apply(locked[failing.pk], outcome, now=now)
        opened, _ = health.health_rows_save(locked.values(), now=now)
        health.successes_mark({healthy.pk: healthy.merchant_id}, now=now)

    assert list(opened) == [failing.pk]
    assert EndpointHealth.objects.get(pk=failing.pk).breaker_state == State.OPEN
    assert EndpointHealth.objects.get(pk=healthy.pk).last_success_at == now


def test_the_probes_bookkeeping_runs_on_the_merchants_shard(distributed):
    endpoint = factories.endpoint()
    health.endpoint_breaker_open(endpoint_id=endpoint.pk, reason="test")
    due = utcnow() + timedelta(hours=1)  # past any cooldown
    row = {"endpoint_id": endpoint.pk, "merchant_id": endpoint.merchant_id}

    def state():
        h = EndpointHealth.objects.get(pk=endpoint.pk)
        return h.breaker_state, h.probe_delivery_id

    with one_shard_statements_only():
        won = health.probe_win(**row, now=due, lease_until=due + timedelta(seconds=30))
        lost = health.probe_win(**row, now=due, lease_until=due + timedelta(seconds=30))
        health.probe_taken(**row, delivery_id="dlv_probe")
    assert (won, lost) == (True, False)
    assert state() == (State.HALF_OPEN, "dlv_probe")

    with one_shard_statements_only():
        health.probes_of_released(["dlv_probe"], merchant_id=endpoint.merchant_id)
        health.probe_abandon(**row, now=due)
    assert state() == (State.OPEN, "")

    with one_shard_statements_only():
        health.probe_none_due(**row, now=due)
    assert EndpointHealth.objects.get(pk=endpoint.pk).next_probe_at == due


def test_the_rate_bucket_is_taken_on_the_merchants_shard(distributed):
    endpoint = factories.endpoint(rate_limit_per_second=1)
    now = utcnow().timestamp()

    with one_shard_statements_only():
        waits = [
            health.endpoint_rate_take(
                endpoint_id=endpoint.pk,
                merchant_id=endpoint.merchant_id,
                rate=1.0,
                now=now,
            )
            for _ in range(2)
        ]

    assert waits[0] == 0.0  # a full bucket of one token
    assert 0 < waits[1] <= 1.0
