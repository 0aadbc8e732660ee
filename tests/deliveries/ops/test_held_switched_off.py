"""A switched-off merchant's unfinished deliveries: held, said so wherever they
are shown, counted as held rather than waiting, and not sent by Retry now."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.models import Delivery
from deliveries.ops.held import HeldKind, delivery_held
from deliveries.ops.summary import oldest_pending, queue_depth
from deliveries.replay import RetryRefused, delivery_retry_now
from endpoints.models import EndpointHealth, Merchant
from relayproject.lib.clock import utcnow
from tests.support import factories, seed

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

HOUR = timedelta(hours=1)


def switched_off_row(*, next_attempt_at=None, breaker_open=False) -> Delivery:
    now = utcnow()
    endpoint = factories.endpoint()
    if breaker_open:
        EndpointHealth.objects.filter(endpoint=endpoint).update(
            breaker_state=EndpointHealth.State.OPEN, next_probe_at=now + HOUR
        )
    row = seed.delivery(
        endpoint,
        status="pending",
        created_at=now - HOUR,
        next_attempt_at=next_attempt_at or now - HOUR,
    )
    Merchant.objects.filter(pk=endpoint.merchant_id).update(is_active=False)
    return Delivery.objects.select_related(
        "endpoint__merchant", "endpoint__health"
    ).get(pk=row.pk)


def test_its_held_reason_says_the_merchant_is_switched_off():
    # Its breaker open too: the merchant is what holds it first.
    row = switched_off_row(breaker_open=True)
    held = delivery_held(delivery=row, now=utcnow())

    assert held.reason == HeldKind.MERCHANT_DISABLED
    assert held.is_hold
    assert held.text == (
        "Held: the merchant is switched off; it is sent once staff switch it on again"
    )


def test_a_lost_lease_waits_for_the_merchant_too():
    row = switched_off_row()
    Delivery.objects.filter(pk=row.pk).update(
        status="delivering", claimed_by="gone", claimed_until=utcnow() - HOUR
    )
    row.refresh_from_db()

    held = delivery_held(delivery=row, now=utcnow())

    assert held.reason == HeldKind.MERCHANT_DISABLED  # not "the next claim"


def test_it_is_counted_held_not_waiting_for_a_dispatcher():
    switched_off_row()

    depth = queue_depth(now=utcnow())

    assert (depth["pending"], depth["held"]) == (0, 1)
    assert oldest_pending(now=utcnow()) == (None, None)


def test_retry_now_is_refused_saying_why():
    row = switched_off_row(next_attempt_at=utcnow() + HOUR)

    with pytest.raises(RetryRefused, match="The merchant is switched off"):
        delivery_retry_now(delivery_id=row.pk, now=utcnow())

    assert Delivery.objects.get(pk=row.pk).next_attempt_at == row.next_attempt_at
