"""The quotas in force for a merchant: its staff override, else the setting.

Read by the services that enforce them (endpoints.services, the publish
path in deliveries) and by the staff console that shows them, so what staff
see is what is enforced. `endpoint_room_take` is the endpoint cap itself,
run by endpoint_create inside its transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from endpoints.filtering import MAX_FILTER_BYTES, MAX_FILTER_COST
from endpoints.models import Endpoint, Merchant
from relayproject.lib.limits import LimitExceeded


@dataclass(frozen=True)
class PublishRate:
    per_second: float  # sustained events per second
    burst: int  # events at once after a quiet spell: the largest request


def max_endpoints(merchant: Merchant) -> int:
    if merchant.max_endpoints is not None:
        return merchant.max_endpoints
    return settings.MAX_ENDPOINTS_PER_MERCHANT


def publish_rate(merchant: Merchant) -> PublishRate | None:
    """The merchant's publish rate, or None when publishing is not rate limited."""
    per_second = merchant.publish_rate_per_second
    if per_second is None:
        per_second = settings.PUBLISH_RATE_PER_MERCHANT
    if per_second <= 0:
        return None
    burst = merchant.publish_burst
    if burst is None:
        burst = settings.PUBLISH_BURST_PER_MERCHANT
    return PublishRate(per_second=per_second, burst=burst)


def max_in_flight(merchant: Merchant) -> int:
    """Sends at once for the merchant across all dispatchers, as the claim
    applies it (COALESCE in deliveries/dispatch/claim_sql.py)."""
    if merchant.max_in_flight is not None:
        return merchant.max_in_flight
    return settings.MERCHANT_MAX_IN_FLIGHT


def max_deliveries_per_request() -> int:
    return settings.MAX_DELIVERIES_PER_REQUEST


def endpoints_counted(merchant_id: int) -> int:
    """The merchant's endpoints the quota counts: disabled ones too, but not
    an ended listen session (deliveries/pull/sessions.py), which only waits
    to be deleted."""
    return (
        Endpoint.objects.filter(merchant_id=merchant_id)
        .exclude(listen_session=True, is_active=False)
        .count()
    )


def endpoint_room_take(merchant: Merchant) -> None:
    """Raise LimitExceeded unless the merchant may have one more endpoint.

    Locks the merchant's row for the caller's transaction first: creates for
    one merchant, from any process, then count in turn, each after the other
    committed (a statement under READ COMMITTED sees what committed before
    it), so the limit is exact. FOR NO KEY UPDATE: foreign-key checks (a new
    endpoint, event or delivery naming the merchant) never wait on it.
    """
    override = (
        Merchant.objects.select_for_update(no_key=True)
        .filter(pk=merchant.pk)
        .values_list("max_endpoints", flat=True)
        .get()
    )
    # The row as locked, not the caller's copy: staff may have just changed it.
    setting = settings.MAX_ENDPOINTS_PER_MERCHANT
    limit = setting if override is None else override
    count = endpoints_counted(merchant.pk)
    if count < limit:
        return
    source = (
        f"this merchant's own limit, set by staff (MAX_ENDPOINTS_PER_MERCHANT "
        f"is {setting})"
        if override is not None
        else "MAX_ENDPOINTS_PER_MERCHANT"
    )
    raise LimitExceeded(
        setting="MAX_ENDPOINTS_PER_MERCHANT",
        limit=limit,
        detail=f"Merchant {merchant.slug} has {count} endpoints (disabled ones "
        f"and listen sessions count) and may have at most {limit}: {source}. Delete one, or ask the "
        "platform's staff to raise the limit. Nothing was created.",
    )


def quotas_in_force(merchant: Merchant) -> list[tuple[str, str]]:
    """(what, the value in force and where it comes from), for staff pages."""

    def source(override: object, setting: str) -> str:
        return "set for this merchant" if override is not None else setting

    limit = max_endpoints(merchant)
    count = endpoints_counted(merchant.pk) if merchant.pk else 0
    rate = publish_rate(merchant)
    if rate is None:
        rate_words = "not limited (PUBLISH_RATE_PER_MERCHANT is 0)"
    else:
        rate_words = (
            f"{rate.per_second:g} events/s "
            f"({source(merchant.publish_rate_per_second, 'PUBLISH_RATE_PER_MERCHANT')}), "
            f"{rate.burst} at once "
            f"({source(merchant.publish_burst, 'PUBLISH_BURST_PER_MERCHANT')}); "
            "past it the API answers 429 with Retry-After"
        )
    return [
        (
            "Endpoints",
            f"{count} of at most {limit} "
            f"({source(merchant.max_endpoints, 'MAX_ENDPOINTS_PER_MERCHANT')}; "
            "disabled ones count)",
        ),
        ("Publish rate", rate_words),
        (
            "Deliveries per request",
            f"at most {max_deliveries_per_request()} events x subscribed endpoints "
            "(MAX_DELIVERIES_PER_REQUEST)",
        ),
        (
            "Each event",
            f"at most {settings.MAX_EVENT_BYTES} bytes (MAX_EVENT_BYTES), "
            f"{settings.MAX_EVENT_DEPTH} levels deep (MAX_EVENT_DEPTH)",
        ),
        (
            "Each endpoint filter",
            f"at most {MAX_FILTER_BYTES} bytes and {MAX_FILTER_COST} steps per event",
        ),
    ]
