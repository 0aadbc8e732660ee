"""How many times a claim waits for PostgreSQL, counted on the wire.

Each wait is also a wait for the GIL once the answer is in, so the count is
part of what a claim costs (together.py). libpq's own protocol trace counts
the ReadyForQuery messages: one per round trip, however many statements it
carried.
"""

from __future__ import annotations

import random
import tempfile

import pytest
from django.db import connection

from deliveries.dispatch import claiming, prepared
from deliveries.dispatch.jobs import jobs_load
from deliveries.dispatch.outcomes import outcomes_record
from deliveries.dispatch.recorder import sent_of
from deliveries.dispatch.sendloop import Finished
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery
from deliveries.services import EventInput, events_publish
from endpoints.secret_rotation import endpoint_rotate_secret
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class RoundTrips:
    """Counts the round trips on this thread's connection inside the block."""

    def __enter__(self) -> RoundTrips:
        connection.ensure_connection()
        self._pgconn = connection.connection.pgconn
        self._file = tempfile.TemporaryFile("w+")
        self._pgconn.trace(self._file.fileno())
        return self

    def __exit__(self, *exc) -> None:
        self._pgconn.untrace()
        self._file.seek(0)
        trace = self._file.read()
        self._file.close()
        self.count = trace.count("\tReadyForQuery\t")
        self.statements = trace.count("\tBind\t") + trace.count("\tQuery\t")


def a_claim_with_its_jobs(limit: int) -> tuple[claiming.Claim, list]:
    now = utcnow()
    claim = claiming.claim_batch(worker_id="w", now=now, lease_seconds=60, limit=limit)
    jobs = jobs_load(
        delivery_ids=claim.delivery_ids,
        lease_until=claim.lease_until,
        probe_ids=claim.probe_ids,
        now=now,
        merchants=claim.merchants,
        loaded=(claim.job_rows, claim.secrets),
    )
    return claim, jobs


def test_a_claim_and_its_jobs_take_seven_round_trips():
    """The due read; BEGIN; the merchants' locks; their live claims; the rows
    locked and marked, with their jobs; their endpoints' secrets; COMMIT.
    None pipelined, since the transaction holds the merchants' locks
    (together.py): pipelined, five; before the lock statement returned the
    jobs, eight."""
    endpoints = [factories.endpoint() for _ in range(3)]
    for endpoint in endpoints:
        events_publish(
            merchant=endpoint.merchant,
            events=[EventInput("order.paid", {"n": n}) for n in range(4)],
        )
    with prepared.statements(), RoundTrips() as trips:
        claim, jobs = a_claim_with_its_jobs(limit=100)

    assert len(claim.delivery_ids) == 12
    assert sorted(j.delivery_id for j in jobs) == sorted(claim.delivery_ids)
    assert {j.endpoint_id for j in jobs} == {e.pk for e in endpoints}
    assert all(j.secrets for j in jobs), (
        "every job is signed with its endpoint's secret"
    )
    assert trips.statements == 7
    assert trips.count == 7


def test_a_claim_that_finds_nothing_due_is_one_round_trip():
    factories.endpoint()
    with RoundTrips() as trips:
        claim, jobs = a_claim_with_its_jobs(limit=100)
    assert claim.delivery_ids == [] and jobs == []
    assert trips.count == 1


def test_a_flush_of_successes_is_recorded_in_six_round_trips():
    """BEGIN; which endpoints are at rest; the fenced UPDATE; their last
    success; the attempts, the counters and the lazy commit's SET LOCAL
    together; COMMIT. One by one, as before, eight."""
    endpoint = factories.endpoint()
    events_publish(
        merchant=endpoint.merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(5)],
    )
    claim, jobs = a_claim_with_its_jobs(limit=100)
    sent = [
        sent_of(Finished(job, SendResult(status_code=200, duration_ms=3.0), utcnow()))
        for job in jobs
    ]
    with prepared.statements(), RoundTrips() as trips:
        recorded = outcomes_record(
            sent=sent, worker_id="w", now=utcnow(), rand=random.Random(1)
        )

    assert recorded.fenced == []
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    assert Attempt.objects.filter(outcome="succeeded").count() == 5
    assert trips.count == 6


def test_jobs_from_the_claims_own_rows_equal_jobs_read_after_it():
    """The lock statement's job columns and load_sql.JOB_ROWS give the same
    jobs, field for field and in the same order: the endpoint's headers,
    permanent statuses and limits, both secrets of a rotation (newest
    first), the event's body."""
    endpoint = factories.endpoint(
        headers={"X-Tenant": "a"}, permanent_statuses=[404], max_attempts=3
    )
    # A second live secret: both sign through the overlap, newest first.
    endpoint_rotate_secret(endpoint=endpoint, now=utcnow())
    events_publish(
        merchant=endpoint.merchant,
        events=[EventInput("order.paid", {"n": n, "ü": "€"}) for n in range(5)],
    )
    claim, from_claim = a_claim_with_its_jobs(limit=100)
    read_after = jobs_load(
        delivery_ids=claim.delivery_ids,
        lease_until=claim.lease_until,
        probe_ids=claim.probe_ids,
        now=utcnow(),
        merchants=claim.merchants,
    )

    assert len(from_claim) == 5 and len(claim.job_rows) == 5
    assert from_claim == read_after
    assert len(from_claim[0].secrets) == 2
    assert from_claim[0].headers == {"X-Tenant": "a"}
    assert 404 in from_claim[0].permanent_statuses
    assert from_claim[0].max_attempts == 3
