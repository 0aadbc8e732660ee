"""Crash recovery and fencing with an injected clock: leases, not sleeps."""

from __future__ import annotations

import random

import pytest

from deliveries.dispatch import claiming, outcomes
from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from tests.support import factories
from tests.support.fakes import BlockingSender, FakeClock, ScriptedSender

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]

LEASE = 30


def dispatcher(clock: FakeClock, sender=None, worker_id: str = "healthy") -> Dispatcher:
    return Dispatcher(
        worker_id=worker_id,
        sender=sender or BlockingSender(timeout=5, body_limit=4096, allow_private=True),
        batch_size=10,
        concurrency=2,
        lease_seconds=LEASE,
        clock=clock,
        rand=random.Random(7),
    )


def publish_one(endpoint, clock: FakeClock):
    return event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())


def test_a_dropped_claim_is_reclaimed_only_after_its_lease(receiver):
    clock = FakeClock()
    endpoint = factories.endpoint(url=receiver.url)
    publish_one(endpoint, clock)
    claiming.claim_batch(
        worker_id="crashed", now=clock.now(), lease_seconds=LEASE, limit=10
    )

    healthy = dispatcher(clock)
    clock.advance(LEASE - 1)
    assert healthy.run_once() == 0  # the lease is still live

    clock.advance(2)
    assert healthy.run_once() == 1
    healthy.close()

    delivery = Delivery.objects.get()
    assert delivery.status == "succeeded"
    assert healthy.stats.reclaimed == 1
    lost, sent = Attempt.objects.order_by("number")
    assert (lost.error_kind, lost.worker_id, lost.number) == (
        "lease_expired",
        "crashed",
        1,
    )
    assert (sent.status_code, sent.worker_id, sent.number) == (200, "healthy", 2)
    assert receiver.wait_for(1)[0].headers["X-Relay-Attempt"] == "2"


def test_a_delivery_that_keeps_killing_its_worker_is_dead_lettered():
    clock = FakeClock()
    endpoint = factories.endpoint(max_attempts=2)
    publish_one(endpoint, clock)
    for worker in ("crash-1", "crash-2"):
        claiming.claim_batch(
            worker_id=worker, now=clock.now(), lease_seconds=LEASE, limit=1
        )
        clock.advance(LEASE + 1)
    claim = claiming.claim_batch(
        worker_id="crash-3", now=clock.now(), lease_seconds=LEASE, limit=1
    )

    delivery = Delivery.objects.get()
    assert claim.delivery_ids == []
    assert (delivery.status, delivery.attempt_count) == ("dead", 2)
    assert list(Attempt.objects.values_list("error_kind", "outcome")) == [
        ("lease_expired", "retry"),
        ("lease_expired", "dead"),
    ]


def sent_for(
    delivery_id: str, claim: claiming.Claim, status: int, now
) -> outcomes.Sent:
    row = Delivery.objects.get(pk=delivery_id)
    return outcomes.Sent(
        delivery_id=delivery_id,
        endpoint_id=row.endpoint_id,
        lease_until=claim.lease_until,
        attempt_count=row.attempt_count,
        budget_start=row.budget_start,
        max_attempts=10,
        is_probe=False,
        started_at=now,
        result=SendResult(status_code=status, duration_ms=3.0),
    )


def test_a_worker_whose_lease_was_taken_over_cannot_overwrite_the_new_owner():
    clock = FakeClock()
    endpoint = factories.endpoint()
    publish_one(endpoint, clock)
    delivery_id = Delivery.objects.get().pk
    old = claiming.claim_batch(
        worker_id="slow", now=clock.now(), lease_seconds=LEASE, limit=1
    )
    old_view = sent_for(delivery_id, old, 500, clock.now())
    clock.advance(LEASE + 1)
    new = claiming.claim_batch(
        worker_id="new", now=clock.now(), lease_seconds=LEASE, limit=1
    )
    outcomes.outcomes_record(
        sent=[sent_for(delivery_id, new, 200, clock.now())],
        worker_id="new",
        now=clock.now(),
        rand=random.Random(1),
    )

    late = outcomes.outcomes_record(
        sent=[old_view], worker_id="slow", now=clock.now(), rand=random.Random(1)
    )

    delivery = Delivery.objects.get()
    assert late.fenced == [delivery_id]
    assert (delivery.status, delivery.last_status_code) == ("succeeded", 200)
    assert not Attempt.objects.filter(worker_id="slow").exclude(
        error_kind="lease_expired"
    )


def test_a_late_outcome_cannot_touch_a_row_the_new_owner_still_holds():
    clock = FakeClock()
    endpoint = factories.endpoint()
    publish_one(endpoint, clock)
    delivery_id = Delivery.objects.get().pk
    old = claiming.claim_batch(
        worker_id="w", now=clock.now(), lease_seconds=LEASE, limit=1
    )
    old_view = sent_for(delivery_id, old, 200, clock.now())
    clock.advance(LEASE + 1)
    # The same worker id reclaiming is a new lease too: fencing is on the lease.
    claiming.claim_batch(worker_id="w", now=clock.now(), lease_seconds=LEASE, limit=1)

    late = outcomes.outcomes_record(
        sent=[old_view], worker_id="w", now=clock.now(), rand=random.Random(1)
    )

    assert late.fenced == [delivery_id]
    assert Delivery.objects.get().status == "delivering"


def test_stop_before_sending_gives_rows_back_without_spending_attempts():
    clock = FakeClock()
    endpoint = factories.endpoint()
    for _ in range(3):
        publish_one(endpoint, clock)
    sender = ScriptedSender()
    worker = dispatcher(clock, sender=sender)
    worker.stop()

    assert worker.run_once() == 3
    worker.close()

    assert sender.requests == []
    assert set(Delivery.objects.values_list("status", "attempt_count")) == {
        ("pending", 0)
    }
    assert not Delivery.objects.exclude(claimed_by="")
