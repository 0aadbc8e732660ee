"""A frozen dispatcher cannot hold the others up: session limits and a recorder
that leaves healthy endpoints' rows alone, on real PostgreSQL."""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import OperationalError, connection, transaction

from deliveries.dispatch import claiming, outcomes
from deliveries.dispatch.session import session_options
from deliveries.dispatch.transport import SendResult
from deliveries.models import Delivery
from deliveries.services import event_publish
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import WAIT, InThread, lock_timeout
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def raw_session(options: str = "") -> psycopg.Connection:
    params = connection.get_connection_params()
    for name in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(name, None)
    # The app's own session options (jit=off) come first; ours are added.
    options = f"{params.pop('options', '')} {options}".strip()
    return psycopg.connect(**params, options=options)


def test_a_session_frozen_inside_a_transaction_loses_its_locks_within_the_limit():
    endpoint = factories.endpoint()
    frozen = raw_session(session_options(idle_in_transaction=1, lock_timeout=1))
    # The frozen dispatcher: locked a health row, then stopped (SIGSTOP, a
    # blocked log write) before committing.
    frozen.execute(
        "SELECT 1 FROM endpoints_endpointhealth WHERE endpoint_id = %s FOR UPDATE",
        [endpoint.pk],
    )
    started = time.monotonic()
    try:
        with lock_timeout(int(WAIT * 1000)):
            EndpointHealth.objects.filter(endpoint=endpoint).update(
                consecutive_failures=1
            )
    finally:
        waited = time.monotonic() - started
        frozen.close()
    assert waited < 5


def test_a_session_waiting_on_a_lock_gives_up_after_the_lock_timeout():
    endpoint = factories.endpoint()
    holder = raw_session()
    holder.execute(
        "SELECT 1 FROM endpoints_endpointhealth WHERE endpoint_id = %s FOR UPDATE",
        [endpoint.pk],
    )
    waiter = raw_session(session_options(idle_in_transaction=5, lock_timeout=0.3))
    try:
        with pytest.raises(psycopg.errors.LockNotAvailable):
            waiter.execute(
                "UPDATE endpoints_endpointhealth SET consecutive_failures = 1"
                " WHERE endpoint_id = %s",
                [endpoint.pk],
            )
    finally:
        waiter.close()
        holder.close()


def record(endpoint, *, status: int) -> outcomes.Recorded:
    event_publish(merchant=endpoint.merchant, type="a", data={})
    now = utcnow()
    claim = claiming.claim_batch(worker_id="w", now=now, lease_seconds=60, limit=1)
    [delivery_id] = claim.delivery_ids
    return outcomes.outcomes_record(
        sent=[
            outcomes.Sent(
                delivery_id=delivery_id,
                endpoint_id=endpoint.pk,
                lease_until=claim.lease_until,
                attempt_count=0,
                budget_start=0,
                max_attempts=10,
                is_probe=False,
                started_at=now,
                result=SendResult(status_code=status, duration_ms=2.0),
            )
        ],
        worker_id="w",
        now=now,
        rand=random.Random(1),
    )


def hold_health_row(endpoint, locked: threading.Event, release: threading.Event):
    def run() -> None:
        with transaction.atomic():
            EndpointHealth.objects.select_for_update().get(endpoint=endpoint)
            locked.set()
            assert release.wait(WAIT)

    return InThread(run)


def test_a_success_on_a_healthy_endpoint_neither_locks_nor_rewrites_its_row():
    endpoint = factories.endpoint()
    marked = utcnow() - timedelta(milliseconds=100)
    EndpointHealth.objects.filter(endpoint=endpoint).update(last_success_at=marked)
    locked, release = threading.Event(), threading.Event()
    other = hold_health_row(endpoint, locked, release)
    assert locked.wait(WAIT)
    try:
        with lock_timeout(1000):  # waiting for the other recorder would fail
            record(endpoint, status=200)
    finally:
        release.set()
        other.join()

    assert Delivery.objects.get().status == "succeeded"
    assert EndpointHealth.objects.get(endpoint=endpoint).last_success_at == marked


def test_a_failure_still_counts_exactly_under_the_row_lock():
    endpoint = factories.endpoint()
    locked, release = threading.Event(), threading.Event()
    other = hold_health_row(endpoint, locked, release)
    assert locked.wait(WAIT)
    try:
        with lock_timeout(300), pytest.raises(OperationalError):
            record(endpoint, status=500)
    finally:
        release.set()
        other.join()
    record(endpoint, status=500)
    assert EndpointHealth.objects.get(endpoint=endpoint).consecutive_failures == 1


def test_last_success_at_moves_once_it_is_over_a_second_old():
    endpoint = factories.endpoint()
    EndpointHealth.objects.filter(endpoint=endpoint).update(
        last_success_at=utcnow() - timedelta(seconds=5)
    )
    record(endpoint, status=200)
    health = EndpointHealth.objects.get(endpoint=endpoint)
    assert utcnow() - health.last_success_at < timedelta(seconds=2)
