"""Operational events: what the relay tells a platform about its own delivery.

They are ordinary events of a reserved merchant, so they are signed, retried,
dead-lettered and shown in the admin like any other; the platform subscribes
its own endpoints to them (the operational-endpoints API). Nothing that
happens to those endpoints is announced in turn: no loops.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction

from deliveries.models import Event
from deliveries.services import event_publish
from deliveries.signing import format_timestamp
from endpoints.models import Endpoint, EndpointHealth, Merchant
from endpoints.switched_off import MerchantSwitchedOff

# A dot is not allowed in a merchant slug the API or the admin accepts, so no
# real merchant can ever take (or be mistaken for) this one.
OPERATIONAL_MERCHANT_SLUG = "relay.operational"
OPERATIONAL_MERCHANT_NAME = "Operational events (webhook-relay)"

ENDPOINT_FAILING = "relay.endpoint.failing"
ENDPOINT_DISABLED = "relay.endpoint.disabled"
ENDPOINT_ENABLED = "relay.endpoint.enabled"
DELIVERY_DEAD = "relay.delivery.dead"
CERTIFICATE_EXPIRING = "relay.endpoint.certificate_expiring"
# Sent to the merchant's own endpoint, not to operational endpoints
# (deliveries/verification.py); catalogued here with the relay's other types.
ENDPOINT_VERIFICATION = "relay.endpoint.verification"
OPERATIONAL_TYPES = {
    ENDPOINT_FAILING: "An endpoint's breaker opened, or it has had no success "
    "for 50% and then 90% of the auto-disable window (once each per episode).",
    ENDPOINT_DISABLED: "An endpoint was disabled: by a 410, by auto-disable, "
    "by staff, by its merchant or through the API; with who and why.",
    ENDPOINT_ENABLED: "A disabled endpoint was enabled again.",
    DELIVERY_DEAD: "Deliveries to an endpoint were dead-lettered (at most one "
    "event per endpoint per OPERATIONAL_COALESCE_SECONDS, with the count).",
    CERTIFICATE_EXPIRING: "An active endpoint's client certificate (mTLS) "
    "expires within CLIENT_CERT_EXPIRY_WARNING_DAYS, or has expired: once per "
    "certificate, again when a new one is uploaded.",
    ENDPOINT_VERIFICATION: "Sent to a merchant's endpoint awaiting verification "
    "(REQUIRE_ENDPOINT_VERIFICATION): answer 2xx with data.challenge as the "
    'body (or as {"challenge": ...}) and the endpoint is verified.',
}


def operational_merchant() -> Merchant:
    merchant = Merchant.objects.filter(slug=OPERATIONAL_MERCHANT_SLUG).first()
    if merchant is not None:
        return merchant
    try:
        with transaction.atomic():
            return Merchant.objects.create(
                slug=OPERATIONAL_MERCHANT_SLUG, name=OPERATIONAL_MERCHANT_NAME
            )
    except IntegrityError:  # another process made it first
        return Merchant.objects.get(slug=OPERATIONAL_MERCHANT_SLUG)


def is_operational(merchant: Merchant) -> bool:
    return merchant.slug == OPERATIONAL_MERCHANT_SLUG


def operational_publish(*, type: str, data: dict, now: datetime) -> Event | None:
    """Publish in the caller's transaction, so it exists exactly when the change
    does; None when staff switched the operational merchant off (silenced:
    the change it announces must not fail for that)."""
    try:
        merchant = operational_merchant()
        return event_publish(merchant=merchant, type=type, data=data, now=now)
    except MerchantSwitchedOff:  # raised before anything is written
        return None


def ts(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


def endpoint_part(endpoint: Endpoint) -> dict:
    return {
        "id": endpoint.pk,
        "url": endpoint.url,
        "description": endpoint.description,
    }


def health_part(health: EndpointHealth | None) -> dict:
    if health is None:
        return {"breaker_state": EndpointHealth.State.CLOSED}
    return {
        "breaker_state": health.breaker_state,
        "breaker_reason": health.breaker_reason,
        "consecutive_failures": health.consecutive_failures,
        "last_success_at": ts(health.last_success_at),
        "last_failure_at": ts(health.last_failure_at),
    }


def disabled_by_part(disabled_by: str) -> dict:
    """ "staff:alice" -> {"by": "staff", "actor": "alice"}; "" -> unknown."""
    kind, _, actor = (disabled_by or "unknown").partition(":")
    return {"by": kind, "actor": actor}
