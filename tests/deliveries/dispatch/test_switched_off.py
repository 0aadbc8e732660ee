"""No claim takes a switched-off merchant's deliveries (the batch, a breaker's
probe, a verification challenge): they wait, spending no attempt, and are
claimed as usual once the merchant is switched on again."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.dispatch import claiming, single_claims
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from endpoints.models import EndpointHealth, Merchant
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]

LEASE = 60.0


def publish(endpoint, count: int) -> set[str]:
    events_publish(
        merchant=endpoint.merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(count)],
    )
    return set(Delivery.objects.filter(endpoint=endpoint).values_list("id", flat=True))


def switch(merchant: Merchant, *, on: bool) -> None:
    Merchant.objects.filter(pk=merchant.pk).update(is_active=on)


def test_the_claim_passes_a_switched_off_merchant_by_until_it_is_on_again():
    off = factories.endpoint()
    held = publish(off, 3)  # due first: a claim that saw them would take them
    other = publish(factories.endpoint(), 1)
    switch(off.merchant, on=False)

    claim = claiming.claim_batch(
        worker_id="w", now=utcnow(), lease_seconds=LEASE, limit=10
    )

    assert set(claim.delivery_ids) == other
    rows = Delivery.objects.filter(pk__in=held)
    assert set(rows.values_list("status", "attempt_count")) == {("pending", 0)}

    switch(off.merchant, on=True)
    claim = claiming.claim_batch(
        worker_id="w", now=utcnow(), lease_seconds=LEASE, limit=10
    )
    assert set(claim.delivery_ids) == held
    assert set(rows.values_list("attempt_count", flat=True)) == {0}  # none lost


def test_no_probe_is_claimed_for_a_switched_off_merchants_open_breaker():
    endpoint = factories.endpoint()
    publish(endpoint, 2)
    now = utcnow()
    health = EndpointHealth.objects.filter(endpoint=endpoint)
    health.update(
        breaker_state=EndpointHealth.State.OPEN,
        opened_at=now - timedelta(minutes=10),
        next_probe_at=now - timedelta(seconds=1),
    )
    switch(endpoint.merchant, on=False)

    claim = single_claims.claim_probes(worker_id="w", now=now, lease_seconds=LEASE)

    assert (claim.probe_ids, claim.delivery_ids) == (set(), [])
    assert health.get().breaker_state == EndpointHealth.State.OPEN  # not half-open

    switch(endpoint.merchant, on=True)
    claim = single_claims.claim_probes(worker_id="w", now=now, lease_seconds=LEASE)
    assert len(claim.probe_ids) == 1


def test_no_verification_challenge_is_made_for_a_switched_off_merchant(settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    endpoint = factories.endpoint()
    switch(endpoint.merchant, on=False)

    claim = single_claims.claim_verifications(
        worker_id="w", now=utcnow(), lease_seconds=LEASE
    )

    assert claim.verification_ids == set()
    assert not Delivery.objects.filter(endpoint=endpoint).exists()  # none made

    switch(endpoint.merchant, on=True)
    claim = single_claims.claim_verifications(
        worker_id="w", now=utcnow(), lease_seconds=LEASE
    )
    assert len(claim.verification_ids) == 1
