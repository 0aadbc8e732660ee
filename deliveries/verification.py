"""The relay.endpoint.verification event: made for an endpoint awaiting
verification (endpoints/verification.py), sent to it alone.

A dispatcher makes it (so every way an endpoint is created or changed, the
admin's and the command line's included, gets its challenge sent) and claims
its one delivery past the hold that keeps the endpoint's other deliveries
waiting. The stored event carries no challenge: the challenge is a secret,
encrypted on the endpoint and put into the body at send time
(dispatch/jobs.py), so the event pages never show it.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Exists, OuterRef, Q

from deliveries.models import Delivery, Event
from deliveries.notifications.operational import ENDPOINT_VERIFICATION, endpoint_part
from endpoints.models import Endpoint, Merchant

SUPERSEDED = "superseded by a newer verification challenge"


def verifications_due(*, now: datetime) -> list[tuple[str, int, str]]:
    """(endpoint, merchant, verification delivery or "") of active endpoints
    of switched-on merchants awaiting verification whose challenge is yet to
    be made or is due a send."""
    due = Delivery.objects.filter(
        pk=OuterRef("verification_delivery_id"),
        merchant_id=OuterRef("merchant_id"),
        status__in=Delivery.Status.UNFINISHED,
        next_attempt_at__lte=now,
    )
    return list(
        Endpoint.objects.filter(
            awaiting_verification=True, is_active=True, merchant__is_active=True
        )
        .filter(Q(verification_delivery_id="") | Exists(due))
        .order_by("verification_requested_at")
        .values_list("pk", "merchant_id", "verification_delivery_id")
    )


def verification_make(*, endpoint_id: str, merchant_id: int, now: datetime) -> str:
    """Make the event and its one delivery for the endpoint's current
    challenge, in the caller's transaction; "" when there is none to make
    (another dispatcher holds or made it). Pending deliveries of earlier
    challenges are ended: they would otherwise be sent, unasked, once the
    endpoint is verified."""
    endpoint = (
        Endpoint.objects.select_for_update(skip_locked=True)
        .filter(
            pk=endpoint_id,
            merchant_id=merchant_id,  # one shard on Citus
            awaiting_verification=True,
            verification_delivery_id="",
        )
        .first()
    )
    if endpoint is None:
        return ""
    mine = Delivery.objects.filter(endpoint_id=endpoint_id, merchant_id=merchant_id)
    # Read, then written by id: on Citus an UPDATE must not join.
    earlier = list(
        mine.filter(
            status=Delivery.Status.PENDING, event__type=ENDPOINT_VERIFICATION
        ).values_list("pk", flat=True)
    )
    if earlier:
        mine.filter(pk__in=earlier, status=Delivery.Status.PENDING).update(
            status=Delivery.Status.DEAD, dead_at=now, last_error=SUPERSEDED
        )
    event = Event.objects.create(
        merchant_id=merchant_id,
        type=ENDPOINT_VERIFICATION,
        # The slug read on its own: a locking read joins nothing (Citus).
        data={"merchant": _slug(merchant_id), "endpoint": endpoint_part(endpoint)},
        created_at=now,
    )
    delivery = Delivery.objects.create(
        event=event,
        endpoint_id=endpoint_id,
        merchant_id=merchant_id,
        next_attempt_at=now,
        created_at=now,
    )
    endpoint.verification_delivery_id = delivery.pk
    endpoint.save(update_fields=["verification_delivery_id"])
    return delivery.pk


def _slug(merchant_id: int) -> str:
    return Merchant.objects.values_list("slug", flat=True).get(pk=merchant_id)


def challenges_of(delivery_ids: set[str]) -> dict[str, str]:
    """The challenge each of these deliveries carries, if it is still its
    endpoint's current one (decrypted: for the body about to be sent)."""
    if not delivery_ids:
        return {}
    return {
        delivery_id: challenge
        for delivery_id, challenge in Endpoint.objects.filter(
            verification_delivery_id__in=delivery_ids, awaiting_verification=True
        ).values_list("verification_delivery_id", "verification_challenge")
        if challenge
    }


def body_data(data: dict, challenge: str) -> dict:
    """What the receiver gets as `data`: the stored event's, and the challenge."""
    return {**data, "challenge": challenge}
