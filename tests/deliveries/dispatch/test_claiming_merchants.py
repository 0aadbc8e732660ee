"""A merchant's cap and share on real PostgreSQL: claims on threads with their own
connections, held open as another dispatcher's would be (see test_claim_locks)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from deliveries.dispatch import claiming
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import (
    LEASE,
    WAIT,
    InThread,
    claim_held_open,
    lock_timeout,
)
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def merchant_with(endpoints: int, rows: int, *, max_in_flight: int | None = None):
    """A merchant with `endpoints` endpoints (each allowed 100 at once), `rows`
    due deliveries each."""
    merchant = factories.merchant()
    merchant.max_in_flight = max_in_flight
    merchant.save(update_fields=["max_in_flight"])
    for n in range(endpoints):
        factories.endpoint(merchant, url=f"http://127.0.0.1:9/{n}", max_in_flight=100)
    events_publish(
        merchant=merchant, events=[EventInput("a", {"n": n}) for n in range(rows)]
    )
    return merchant


def per_merchant(claim: claiming.Claim) -> Counter:
    return Counter(
        Delivery.objects.filter(pk__in=claim.delivery_ids).values_list(
            "endpoint__merchant_id", flat=True
        )
    )


def test_a_merchants_cap_holds_for_two_claims_made_at_the_same_moment():
    # Without the merchant's advisory lock, B would count A's claims before A
    # commits, see none, and take four more from the other endpoint: eight.
    merchant = merchant_with(2, 6, max_in_flight=4)
    locked, finish = threading.Event(), threading.Event()
    a = InThread(claim_held_open("A", limit=10, locked=locked, finish=finish))
    assert locked.wait(WAIT)
    b_locked = threading.Event()
    b = InThread(claim_held_open("B", limit=10, locked=b_locked, finish=finish))
    assert b_locked.wait(WAIT)  # B claimed while A's claim was still open
    finish.set()
    claims = [a.join(), b.join()]
    later = claiming.claim_batch(
        worker_id="C", now=utcnow(), lease_seconds=LEASE, limit=10
    )

    assert sum(len(c.delivery_ids) for c in claims) == 4
    assert later.delivery_ids == []
    delivering = Delivery.objects.filter(status="delivering")
    assert delivering.filter(endpoint__merchant=merchant).count() == 4
    assert set(delivering.values_list("endpoint_id", flat=True)) == set(
        merchant.endpoints.values_list("pk", flat=True)
    )


def test_a_claim_skips_a_merchant_another_claim_is_counting_and_takes_the_rest():
    busy = merchant_with(3, 4)
    other = merchant_with(1, 4)
    locked, finish = threading.Event(), threading.Event()
    # A claims one of busy's rows (the oldest merchant's), and holds its lock
    # until it commits.
    a = InThread(claim_held_open("A", limit=1, locked=locked, finish=finish))
    assert locked.wait(WAIT)
    try:
        with lock_timeout(2000):  # a claim that waited would fail here
            during = claiming.claim_batch(
                worker_id="B", now=utcnow(), lease_seconds=LEASE, limit=50
            )
    finally:
        finish.set()
    a_claim = a.join()

    assert per_merchant(a_claim) == {busy.pk: 1}
    # busy's other rows were free, but another claim was counting it.
    assert per_merchant(during) == {other.pk: 4}
    assert during.contended == 3  # busy's endpoints, skipped: not dry


def test_a_claim_lists_every_merchant_before_any_merchants_second_endpoint():
    # 40 endpoints all due before the quiet merchant's one, in a claim of 10:
    # by endpoints alone the quiet merchant would not be listed at all.
    noisy = merchant_with(40, 1)
    quiet = merchant_with(1, 3)
    claim = claiming.claim_batch(
        worker_id="W", now=utcnow(), lease_seconds=LEASE, limit=10
    )

    assert per_merchant(claim) == {noisy.pk: 5, quiet.pk: 3}
