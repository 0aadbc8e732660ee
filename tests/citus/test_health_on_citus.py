"""The record of a flush and the breaker's and the rate bucket's writes
(endpoints/health.py, endpoints/probes.py) on Citus: each runs on its
merchant's shard alone.

Citus runs a write that names only the endpoint too, on every shard, and
serialises it with every other write of the table, so nothing fails: it is
slow. `citus.multi_task_query_log_level = 'error'` makes any statement Citus
splits over shards an error, so these tests fail on the first statement of
the dispatcher's that does not name its merchant.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection, transaction

from deliveries.dispatch.claiming import claim_batch
from deliveries.dispatch.jobs import jobs_load
from deliveries.dispatch.outcomes import Sent, outcomes_record
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery
from deliveries.services import EventInput, events_publish
from endpoints import health, probes
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
    probes.endpoint_breaker_open(endpoint_id=endpoint.pk, reason="test")
    due = utcnow() + timedelta(hours=1)  # past any cooldown
    row = {"endpoint_id": endpoint.pk, "merchant_id": endpoint.merchant_id}

    def state():
        h = EndpointHealth.objects.get(pk=endpoint.pk)
        return h.breaker_state, h.probe_delivery_id

    with one_shard_statements_only():
        won = probes.probe_win(**row, now=due, lease_until=due + timedelta(seconds=30))
        lost = probes.probe_win(**row, now=due, lease_until=due + timedelta(seconds=30))
        probes.probe_taken(**row, delivery_id="dlv_probe")
    assert (won, lost) == (True, False)
    assert state() == (State.HALF_OPEN, "dlv_probe")

    with one_shard_statements_only():
        probes.probes_of_released(["dlv_probe"], merchant_id=endpoint.merchant_id)
        probes.probe_abandon(**row, now=due)
    assert state() == (State.OPEN, "")

    with one_shard_statements_only():
        probes.probe_none_due(**row, now=due)
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


def test_a_flushs_record_runs_on_each_merchants_shard(distributed):
    # Two merchants' deliveries claimed together, sent, and recorded in one
    # flush: the fenced UPDATE of their rows, their attempts, the breaker
    # rows and the counters, with no statement over every shard.
    merchants = [factories.merchant() for _ in range(2)]
    for merchant in merchants:
        factories.endpoint(merchant)
        events_publish(
            merchant=merchant,
            events=[EventInput("order.paid", {"n": n}) for n in range(3)],
        )
    now = utcnow()
    claim = claim_batch(worker_id="w", now=now, lease_seconds=30, limit=6)
    jobs = jobs_load(
        delivery_ids=claim.delivery_ids,
        lease_until=claim.lease_until,
        probe_ids=set(),
        now=now,
    )
    sent = [
        Sent(
            delivery_id=job.delivery_id,
            endpoint_id=job.endpoint_id,
            lease_until=job.lease_until,
            attempt_count=job.attempt_count,
            budget_start=job.budget_start,
            max_attempts=job.max_attempts,
            is_probe=False,
            started_at=now,
            result=SendResult(status_code=200 if n % 2 else 500, duration_ms=1.0),
            event_id=job.event_id,
            merchant_id=job.merchant_id,
        )
        for n, job in enumerate(jobs)
    ]
    assert {s.merchant_id for s in sent} == {m.pk for m in merchants}

    with one_shard_statements_only():
        recorded = outcomes_record(
            sent=sent, worker_id="w", now=now, rand=random.Random(1)
        )

    assert recorded.fenced == []
    assert Delivery.objects.filter(status="succeeded").count() == 3
    assert Attempt.objects.count() == 6
