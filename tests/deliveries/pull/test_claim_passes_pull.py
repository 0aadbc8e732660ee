"""The dispatchers' claims pass pull endpoints by: their consumers lease their
rows, and a consumer's leases take none of the merchant's room."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.dispatch import claiming, single_claims
from deliveries.models import Delivery
from deliveries.pull.leasing import messages_lease
from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib.clock import utcnow
from tests.deliveries.pull.support import publish, pull_endpoint
from tests.support import factories

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

LEASE = 60.0


def claim(limit: int = 50) -> claiming.Claim:
    return claiming.claim_batch(
        worker_id="w1", now=utcnow(), lease_seconds=LEASE, limit=limit
    )


def test_a_claim_never_takes_a_pull_endpoints_delivery():
    merchant = factories.merchant()
    pull = pull_endpoint(merchant)
    http = factories.endpoint(merchant)
    publish(pull, 3)  # one delivery per endpoint per event

    taken = claim()

    assert set(
        Delivery.objects.filter(pk__in=taken.delivery_ids).values_list(
            "endpoint_id", flat=True
        )
    ) == {http.pk}
    assert len(taken.delivery_ids) == 3
    assert set(
        Delivery.objects.filter(endpoint=pull).values_list("status", flat=True)
    ) == {"pending"}
    assert claim().delivery_ids == []


def test_a_claim_takes_no_expired_pulled_lease_over():
    # A consumer's lease that ran out is the pull upkeep's (or the next
    # pull's) to spend, never a dispatcher's to send.
    pull = pull_endpoint()
    an_hour_ago = utcnow() - timedelta(hours=1)
    publish(pull, 2, now=an_hour_ago)
    assert len(messages_lease(endpoint=pull, limit=10, now=an_hour_ago)) == 2

    assert claim().delivery_ids == []
    assert set(
        Delivery.objects.filter(endpoint=pull).values_list("claimed_by", flat=True)
    ) == {"pull"}


def test_a_consumers_leases_take_none_of_the_merchants_room():
    merchant = factories.merchant()
    merchant.max_in_flight = 2
    merchant.save(update_fields=["max_in_flight"])
    pull = pull_endpoint(merchant)
    factories.endpoint(merchant)
    publish(pull, 5)
    assert len(messages_lease(endpoint=pull, limit=5, now=utcnow())) == 5

    # Five messages leased to the consumer; the HTTP endpoint still gets the
    # merchant's two slots.
    assert len(claim().delivery_ids) == 2


def test_no_probe_is_claimed_for_a_pull_endpoint():
    pull = pull_endpoint()
    publish(pull, 1)
    EndpointHealth.objects.filter(endpoint_id=pull.pk).update(
        breaker_state=EndpointHealth.State.OPEN,
        next_probe_at=utcnow() - timedelta(seconds=1),
    )

    probes = single_claims.claim_probes(
        worker_id="w1", now=utcnow(), lease_seconds=LEASE
    )

    assert probes.delivery_ids == []
    assert Delivery.objects.get(endpoint=pull).status == "pending"


def test_no_verification_challenge_is_made_for_a_pull_endpoint():
    pull = pull_endpoint()
    Endpoint.objects.filter(pk=pull.pk).update(
        awaiting_verification=True, verification_requested_at=utcnow()
    )

    verifications = single_claims.claim_verifications(
        worker_id="w1", now=utcnow(), lease_seconds=LEASE
    )

    assert verifications.delivery_ids == []
    assert not Delivery.objects.filter(endpoint=pull).exists()
